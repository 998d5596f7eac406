//! Snapshots of the boards: every GPU board in a directory, its processes and their queues, as
//! plain values the front ends render.
//!
//! Each slot is copied under its seqlock ([`SharedBoard::read`]: two equal even sequence words
//! around the copy), so a queue's counters are consistent with each other; different queues are
//! copied one after another (a snapshot is not one instant of the whole GPU). Reading never
//! writes to the board: the writers are not disturbed.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use xhsa_board::layout::Slot;
use xhsa_board::owner::{process_name, Locator};
use xhsa_board::place::board_files;
use xhsa_board::shared::{BoardError, SharedBoard};
use xhsa_model::clock::monotonic_ns;
use xhsa_model::priority::{Priority, StreamPriority};
use xhsa_model::stats::{
    latency_bucket_limit_us, QueueState, FLAG_HELD, FLAG_OVERRIDDEN, FLAG_PAUSED, LATENCY_BUCKETS,
};

/// Every board of a directory at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// `CLOCK_MONOTONIC` nanoseconds when it was taken.
    pub taken_ns: u64,
    /// The directory read.
    pub dir: PathBuf,
    /// The GPUs with a board, by KFD node.
    pub gpus: Vec<Gpu>,
    /// Boards that could not be read, and why (another layout version, permissions).
    pub problems: Vec<String>,
}

/// One GPU's board.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    /// KFD node id.
    pub node: u32,
    /// The board file.
    pub board: PathBuf,
    /// Its processes, by pid.
    pub processes: Vec<Process>,
}

/// One process on a board.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// Its pid as this monitor sees it: on the host, a container's process shows its host pid;
    /// when it cannot be seen from here (another container), the pid in its own namespace.
    pub pid: u32,
    /// Its pid in its own pid namespace (what the process itself sees).
    pub ns_pid: u32,
    /// It runs in another pid namespace than this monitor (a container).
    pub other_namespace: bool,
    /// Whether [`Process::pid`] is a pid of this monitor's namespace.
    pub visible: bool,
    /// Its cgroup (names the container or pod), when visible.
    pub cgroup: Option<String>,
    /// Its real uid.
    pub uid: u32,
    /// The process name it published (`comm`).
    pub name: String,
    /// Whether it still runs (a crashed process's slots stay until a live one clears them).
    pub alive: bool,
    /// Its sharing policy (`XHSA_POLICY`, `xhsactl policy`) as text, `?` for one this build does
    /// not know.
    pub policy: String,
    /// The share of time its held queues get now, per mille.
    pub held_share_permille: u32,
    /// Its queues, by id.
    pub queues: Vec<Queue>,
}

/// A priority as the front ends show it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Prio {
    /// The level, `-256..=255` (higher is more urgent).
    pub level: i32,
    /// The stream priority inside the level.
    pub stream: &'static str,
}

impl Prio {
    fn from_rank(rank: i32) -> Option<Prio> {
        let p = Priority::from_rank(rank)?;
        Some(Prio { level: p.level().get(), stream: stream_name(p.stream()) })
    }
}

impl std::fmt::Display for Prio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stream {
            "normal" => write!(f, "{}", self.level),
            "high" => write!(f, "{}+", self.level),
            _ => write!(f, "{}-", self.level),
        }
    }
}

fn stream_name(s: StreamPriority) -> &'static str {
    match s {
        StreamPriority::Low => "low",
        StreamPriority::Normal => "normal",
        StreamPriority::High => "high",
    }
}

/// One queue.
#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    /// The owner's queue id.
    pub id: u64,
    /// Its slot on the board.
    pub slot: usize,
    /// Its CU partition (`XHSA_RESERVE`; the whole GPU without).
    pub partition: xhsa_model::ids::PartitionId,
    /// Effective priority (`None`: the slot holds no valid priority).
    pub priority: Option<Prio>,
    /// What the application and the config asked for.
    pub requested: Option<Prio>,
    pub state: QueueState,
    /// An operator paused it.
    pub paused: bool,
    /// An operator set its priority.
    pub overridden: bool,
    /// The window holds it back now.
    pub held_now: bool,
    /// It has work its owner stopped confirming (the process is stopped or hangs): the other
    /// processes no longer count that work.
    pub stale: bool,
    /// How long ago its owner last confirmed its counters, nanoseconds.
    pub confirmed_ns_ago: u64,
    pub pending: u32,
    pub in_flight: u32,
    pub submitted: u64,
    /// Packets forwarded to the hardware.
    pub dispatched: u64,
    pub completed: u64,
    pub preemptions: u64,
    pub preempted_ns: u64,
    /// Time held back by the window.
    pub held_ns: u64,
    /// Times it started being held back.
    pub held_events: u64,
    /// Recent time per packet on the hardware (0: not measured).
    pub packet_ns: u64,
    /// The same without the time waited for higher-priority work (0: not measured).
    pub own_packet_ns: u64,
    /// Total time with packets in flight on the hardware.
    pub busy_ns: u64,
    /// Dispatch-to-completion histogram: (upper bound in µs, `None` for the last bucket; count).
    pub latency: Vec<(Option<u64>, u32)>,
    /// The last preemptions, newest first: (how long ago it started, how long it lasted; `None`
    /// while still off), nanoseconds.
    pub recent_preemptions: Vec<(u64, Option<u64>)>,
}

impl Queue {
    fn from_slot(slot: &Slot, index: usize, now: u64) -> Queue {
        let st = &slot.stats;
        Queue {
            id: slot.queue_id,
            slot: index,
            partition: xhsa_model::ids::PartitionId(slot.partition),
            priority: Prio::from_rank(st.priority),
            requested: Prio::from_rank(st.requested),
            state: st.state(),
            paused: st.has_flag(FLAG_PAUSED),
            overridden: st.has_flag(FLAG_OVERRIDDEN),
            held_now: st.has_flag(FLAG_HELD),
            stale: st.has_work() && !st.has_work_at(now),
            confirmed_ns_ago: now.saturating_sub(st.beat_ns),
            pending: st.pending,
            in_flight: st.in_flight,
            submitted: st.submitted,
            dispatched: st.forwarded,
            completed: st.completed,
            preemptions: st.preemptions,
            preempted_ns: st.preempted_ns,
            held_ns: st.throttle_ns,
            held_events: st.throttle_events,
            packet_ns: st.packet_ns,
            own_packet_ns: st.own_packet_ns,
            busy_ns: st.busy_ns,
            latency: (0..LATENCY_BUCKETS)
                .map(|i| (latency_bucket_limit_us(i), st.latency[i]))
                .collect(),
            recent_preemptions: slot
                .recent
                .iter()
                .filter(|r| r.start_ns != 0)
                .map(|r| {
                    (now.saturating_sub(r.start_ns), (r.duration_ns != 0).then_some(r.duration_ns))
                })
                .collect(),
        }
    }

    /// The dispatch-to-completion time below which `q` (0..=1) of the packets completed, as the
    /// upper bound of its histogram bucket in µs (`None`: no sample, or the open last bucket).
    pub fn latency_quantile_us(&self, q: f64) -> Option<u64> {
        let total: u64 = self.latency.iter().map(|(_, n)| u64::from(*n)).sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (limit, n) in &self.latency {
            seen += u64::from(*n);
            if seen >= want {
                return *limit;
            }
        }
        None
    }
}

/// Reads one board file into a [`Gpu`].
pub fn read_board(path: &Path, node: u32, now: u64) -> Result<Gpu, BoardError> {
    let board = SharedBoard::open_existing(path)?;
    Ok(gpu_of(&board, path, node, now))
}

/// The [`Gpu`] an open board shows now.
pub fn gpu_of(board: &SharedBoard, path: &Path, node: u32, now: u64) -> Gpu {
    // By owner, not by pid: processes of two containers may have the same pid.
    let mut procs: BTreeMap<(u64, u32, u64), Process> = BTreeMap::new();
    let mut locator = Locator::default();
    for (index, slot) in board.live_slots() {
        let p = procs.entry((slot.pid_ns, slot.pid, slot.owner_token)).or_insert_with(|| {
            let at = locator.locate(slot.pid_ns, slot.pid);
            Process {
                pid: at.pid.unwrap_or(slot.pid),
                ns_pid: slot.pid,
                other_namespace: at.other_namespace,
                visible: at.pid.is_some(),
                cgroup: at.cgroup,
                uid: slot.owner_uid,
                name: slot.name(),
                alive: board.is_held(index),
                policy: String::new(),
                held_share_permille: 0,
                queues: Vec::new(),
            }
        });
        if p.policy.is_empty() || slot.sharing != 0 {
            let (policy, share) = slot.sharing();
            p.policy = policy.map_or_else(|| "?".to_string(), |x| x.to_string());
            p.held_share_permille = share;
        }
        if p.name.is_empty() {
            p.name = slot.name();
        }
        if p.name.is_empty() && p.alive && p.visible {
            // A slot read between its claim and its first publish.
            p.name = process_name(p.pid).unwrap_or_default();
        }
        p.queues.push(Queue::from_slot(&slot, index, now));
    }
    let mut processes: Vec<Process> = procs.into_values().collect();
    for p in &mut processes {
        p.queues.sort_by_key(|q| q.id);
    }
    Gpu { node, board: path.to_path_buf(), processes }
}

/// Every board in `dir`; a board that cannot be read is a [`Snapshot::problems`] entry.
pub fn take(dir: &Path) -> Snapshot {
    let now = monotonic_ns();
    let mut snap = Snapshot { taken_ns: now, dir: dir.to_path_buf(), ..Snapshot::default() };
    match board_files(dir) {
        Ok(files) => {
            for (path, node) in files {
                match read_board(&path, node, now) {
                    Ok(gpu) => snap.gpus.push(gpu),
                    Err(e) => snap.problems.push(e.to_string()),
                }
            }
        }
        Err(e) => snap.problems.push(format!("board directory {}: {e}", dir.display())),
    }
    snap
}

impl Snapshot {
    /// Every queue, with its GPU and process.
    pub fn queues(&self) -> impl Iterator<Item = (&Gpu, &Process, &Queue)> {
        self.gpus.iter().flat_map(|g| {
            g.processes.iter().flat_map(move |p| p.queues.iter().map(move |q| (g, p, q)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_model::stats::STALE_AFTER_NS;

    fn queue_with(latency: &[u32]) -> Queue {
        let mut slot = Slot::default();
        slot.stats.latency[..latency.len()].copy_from_slice(latency);
        Queue::from_slot(&slot, 0, 0)
    }

    #[test]
    fn work_nobody_confirms_is_marked_stale() {
        let mut slot = Slot::default();
        slot.stats.in_flight = 4;
        slot.stats.beat_ns = 1_000_000;
        let fresh = Queue::from_slot(&slot, 0, 1_000_000 + STALE_AFTER_NS);
        assert!(!fresh.stale);
        assert_eq!(fresh.confirmed_ns_ago, STALE_AFTER_NS);
        let stopped = Queue::from_slot(&slot, 0, 2_000_000 + STALE_AFTER_NS);
        assert!(stopped.stale);
        slot.stats.in_flight = 0;
        assert!(
            !Queue::from_slot(&slot, 0, 2_000_000 + STALE_AFTER_NS).stale,
            "no work, nothing stale"
        );
    }

    #[test]
    fn quantiles_come_from_the_bucket_bounds() {
        assert_eq!(queue_with(&[]).latency_quantile_us(0.5), None);
        let q = queue_with(&[0, 0, 98, 1, 0, 1]);
        assert_eq!(q.latency_quantile_us(0.5), Some(64));
        assert_eq!(q.latency_quantile_us(0.99), Some(128));
        assert_eq!(q.latency_quantile_us(1.0), Some(512));
        let mut open = [0u32; LATENCY_BUCKETS];
        open[LATENCY_BUCKETS - 1] = 3;
        assert_eq!(
            queue_with(&open).latency_quantile_us(0.5),
            None,
            "the last bucket has no bound"
        );
    }

    #[test]
    fn a_board_of_another_layout_is_a_problem_that_says_so() {
        let dir = std::env::temp_dir().join(format!("xhsa-monitor-old-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A version-2 header (128-byte slots), as an older libxhsa wrote it.
        let mut bytes = vec![0u8; 64 + 128 * 4];
        bytes[..8].copy_from_slice(b"XHSABRD\0");
        for (off, v) in [(8, 2u32), (12, 4), (16, 128), (20, 2), (24, 64), (28, 1)] {
            bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        let file = dir.join(format!("xhsa-u{}-gpu1.board", nix::unistd::getuid().as_raw()));
        std::fs::write(&file, &bytes).unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let s = take(&dir);
        assert!(s.gpus.is_empty());
        assert_eq!(s.problems.len(), 1);
        assert!(
            s.problems[0].contains("layout version 2")
                && s.problems[0].contains("another release of xhsa"),
            "{}",
            s.problems[0]
        );
        let text = crate::text::render(&s);
        assert!(text.contains("problem: ") && text.contains("layout version 2"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn priorities_show_their_stream() {
        let p = |level: i32, s: i32| Prio::from_rank(level * 4 + s).unwrap().to_string();
        assert_eq!((p(5, 1), p(-3, 2), p(0, 0)), ("5".into(), "-3+".into(), "0-".into()));
        assert_eq!(Prio::from_rank(3), None);
    }
}
