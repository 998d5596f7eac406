//! This process's link to the board of one GPU: its queues' slots, what it publishes, and the
//! other processes' contention as the level-1 window sees it.
//!
//! It is also what the process's preemption watcher watches ([`crate::preempt::Watch`]): the
//! board's wake word, this process's queues and the other processes' work.
//!
//! The link never fails the caller. A board that cannot be opened (no such directory, another
//! layout version, permissions) or a full board leaves the process scheduling with what it
//! knows in-process (the caller logs the reason once); a slot taken away because a reader
//! thought this process dead is claimed again at the next publish. Dead processes' slots are
//! cleared when the link opens and then by the watcher's housekeeping (every
//! [`crate::preempt::watcher::HOUSEKEEPING_NS`], never on an application's thread: it reads
//! `/proc`), so a crashed process stops throttling others within about a second.

#![forbid(unsafe_code)]

use crate::path::scheduler::Board;
use crate::preempt::policy::{Mine, Other};
use crate::preempt::Watch;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use xhsa_board::layout::{
    external_work, name_bytes, Control, Owner, RecentPreemption, Slot, ACK_NOT_PERMITTED,
    NAME_BYTES, RECENT_PREEMPTIONS,
};
use xhsa_board::owner::{process_name, this_process};
use xhsa_board::place::BoardPlace;
use xhsa_board::shared::{BoardError, SharedBoard, SlotHandle};
use xhsa_model::clock::monotonic_ns;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::Priority;
use xhsa_model::settings::config::{GroupSpec, Settings};
use xhsa_model::stats::{QueueState, QueueStats, FLAG_PAUSED};

/// Where the boards of this process live: `XHSA_BOARD_DIR` and the config's `board_group`
/// (a group name is looked up in the group database).
pub fn place_from_settings(settings: &Settings) -> Result<BoardPlace, String> {
    let group = match &settings.config.board_group {
        None => None,
        Some(GroupSpec::Id(gid)) => Some(*gid),
        Some(GroupSpec::Name(name)) => match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Some(g.gid.as_raw()),
            Ok(None) => {
                return Err(format!(
                    "board_group {name:?}: no such group (expected a group name or a numeric gid)"
                ))
            }
            Err(e) => return Err(format!("board_group {name:?}: cannot look the group up: {e}")),
        },
    };
    Ok(BoardPlace { dir: settings.board_dir.clone(), group })
}

/// What this process knows of one of its queues' preemptions, merged into every publish.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct PreemptRecord {
    count: u64,
    /// Time off in spells that ended, nanoseconds.
    total_ns: u64,
    /// `CLOCK_MONOTONIC` of the current spell's start, while off.
    off_since: Option<u64>,
    /// Newest first.
    recent: [RecentPreemption; RECENT_PREEMPTIONS],
}

impl PreemptRecord {
    fn taken_off(&mut self, now: u64) {
        if self.off_since.is_some() {
            return;
        }
        self.count += 1;
        self.off_since = Some(now);
        self.recent.copy_within(0..RECENT_PREEMPTIONS - 1, 1);
        self.recent[0] = RecentPreemption { start_ns: now, duration_ns: 0 };
    }

    fn put_back(&mut self, now: u64) {
        if let Some(since) = self.off_since.take() {
            let d = now.saturating_sub(since).max(1);
            self.total_ns += d;
            if self.recent[0].start_ns == since {
                self.recent[0].duration_ns = d;
            }
        }
    }

    /// Writes the record into a slot about to be published at `now`.
    fn apply(&self, slot: &mut Slot, now: u64) {
        slot.stats.preemptions = self.count;
        slot.stats.preempted_ns =
            self.total_ns + self.off_since.map_or(0, |s| now.saturating_sub(s));
        if self.off_since.is_some() {
            slot.stats.state = QueueState::Preempted.code();
        } else if slot.stats.state() == QueueState::Preempted {
            slot.stats.state = QueueState::Running.code();
        }
        slot.recent = self.recent;
    }
}

/// The link to one GPU's board.
pub struct BoardLink {
    board: SharedBoard,
    me: Owner,
    /// The process that opened the link: a forked child inherits the link but must never
    /// release or answer for the parent's slots.
    opened_by: u32,
    /// This process's real uid: a controller of another uid (but root) may not steer its queues.
    uid: u32,
    /// This process's name, as its slots show it.
    name: [u8; NAME_BYTES],
    /// Slot handles, and what the preemption watcher recorded, of this process's queues.
    slots: Mutex<HashMap<QueueId, SlotHandle>>,
    /// The CU partition of each of this process's queues (a slot claimed again keeps it).
    partitions: Mutex<HashMap<QueueId, PartitionId>>,
    preemptions: Mutex<HashMap<QueueId, PreemptRecord>>,
    /// Other processes had live slots at the last [`BoardLink::contention`].
    others: AtomicBool,
    /// This process's watcher is blocked on the board.
    own_waiting: AtomicBool,
    /// A change of this process's queues may concern its own watcher.
    own_interest: AtomicBool,
    /// When the link was opened, and whether the lonely-board check ran ([`lonely_board`]).
    opened_at: std::time::Instant,
    lonely_checked: AtomicBool,
    /// This process's sharing policy and share, as its slots show it ([`Slot::sharing`]).
    sharing: AtomicU32,
}

/// Where KFD lists the processes that have it open (one directory per process, named by its
/// pid in the initial pid namespace; sysfs is not namespaced, so a container sees them all).
pub const KFD_PROCESSES: &str = "/sys/class/kfd/kfd/proc";

/// How long after opening the board the lonely-board check waits, so that processes started
/// together have joined.
const LONELY_AFTER: Duration = Duration::from_secs(2);

/// The warning for a process alone on its board while other processes use the GPU driver: they
/// are in other containers (a private `/dev/shm`), or use another board directory, user or
/// group, and are not coordinated with this one. `kfd_processes` counts the processes KFD lists
/// (this one among them), `others_on_board` the other processes' live slots.
pub fn lonely_board(
    kfd_processes: usize,
    others_on_board: usize,
    board: &std::path::Path,
) -> Option<String> {
    (others_on_board == 0 && kfd_processes >= 2).then(|| {
        format!(
            "xhsa: {} other process(es) use the GPU driver (KFD), but none of them is on this process's board {}: \
             processes in other containers (each with its own /dev/shm), or with another XHSA_BOARD_DIR, user or \
             board_group, are not scheduled with this one. To share the board, mount one host directory into every \
             container and point XHSA_BOARD_DIR (or board_dir in the config) at it: docs/deployment.md",
            kfd_processes - 1,
            board.display()
        )
    })
}

impl BoardLink {
    /// Opens (or creates) the board of KFD node `node` in `place`, clearing dead owners.
    pub fn open(place: &BoardPlace, node: u32) -> Result<BoardLink, BoardError> {
        let board = SharedBoard::open(place, node, xhsa_board::layout::DEFAULT_SLOT_COUNT)?;
        board.cleanup_dead();
        let me = this_process();
        Ok(BoardLink {
            board,
            me,
            opened_by: std::process::id(),
            uid: nix::unistd::getuid().as_raw(),
            name: name_bytes(&process_name(me.pid).unwrap_or_default()),
            slots: Mutex::new(HashMap::new()),
            partitions: Mutex::new(HashMap::new()),
            preemptions: Mutex::new(HashMap::new()),
            others: AtomicBool::new(false),
            own_waiting: AtomicBool::new(false),
            own_interest: AtomicBool::new(true),
            opened_at: std::time::Instant::now(),
            lonely_checked: AtomicBool::new(false),
            sharing: AtomicU32::new(0),
        })
    }

    /// The board file.
    pub fn path(&self) -> &std::path::Path {
        self.board.path()
    }

    /// Gives `queue` a slot at `priority`; `false` if the board is full (the queue is then
    /// invisible to other processes, which the caller logs).
    pub fn join(&self, queue: QueueId, priority: Priority, partition: PartitionId) -> bool {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner()).insert(queue, partition);
        match self.board.claim(self.me, partition, queue, priority) {
            Ok(handle) => {
                self.board.publish_with(&handle, |s| s.name = self.name);
                self.slots.lock().unwrap_or_else(|e| e.into_inner()).insert(queue, handle);
                true
            }
            Err(_) => false,
        }
    }

    /// Publishes `queue`'s counters (claiming a slot again if its slot was taken away), with
    /// the process name and what the preemption watcher recorded of the queue.
    pub fn publish(&self, queue: QueueId, stats: &QueueStats) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(handle) = slots.get(&queue).copied() else { return };
        let record = self.record(queue);
        let now = monotonic_ns();
        let sharing = self.sharing.load(Ordering::Relaxed);
        let fill = |slot: &mut Slot| {
            slot.stats = *stats;
            slot.name = self.name;
            slot.sharing = sharing;
            record.apply(slot, now);
        };
        if self.board.publish_with(&handle, fill) {
            return;
        }
        // Taken away: the old slot is let go (its lock, and the slot itself should it be live
        // in this process's name again) before another is claimed, so that a queue never has
        // two slots on the board.
        slots.remove(&queue);
        self.board.release(handle);
        if let Some(priority) = stats.priority() {
            let partition = self.partition_of(queue);
            if let Ok(handle) = self.board.claim(self.me, partition, queue, priority) {
                self.board.publish_with(&handle, fill);
                slots.insert(queue, handle);
            }
        }
    }

    fn record(&self, queue: QueueId) -> PreemptRecord {
        self.preemptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&queue)
            .copied()
            .unwrap_or_default()
    }

    /// The watcher took `queues` off the GPU (`off`) or put them back: recorded and published
    /// at once (state, counters, recent preemptions; the other counters as last published).
    pub fn preempted(&self, queues: &[QueueId], off: bool) {
        let now = monotonic_ns();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for q in queues {
            let record = {
                let mut all = self.preemptions.lock().unwrap_or_else(|e| e.into_inner());
                let r = all.entry(*q).or_default();
                if off {
                    r.taken_off(now);
                } else {
                    r.put_back(now);
                }
                *r
            };
            if let Some(handle) = slots.get(q) {
                self.board.publish_with(handle, |slot| record.apply(slot, now));
            }
        }
    }

    /// The controllers' requests waiting for this process's queues that their senders may make,
    /// each with the sender's uid as the kernel knows it (`Control::uid`, from the request
    /// file). A request whose sender cannot be established, or who is neither root nor this
    /// process's user, is answered (refused) here and not returned.
    pub fn controls(&self) -> Vec<(QueueId, Control)> {
        if !self.same_process() {
            return Vec::new();
        }
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for (q, h) in slots.iter() {
            let Some(mut c) = self.board.pending_control(h.index()) else { continue };
            match self.board.verify_control(h.index(), &c) {
                Ok(sender) if sender == 0 || sender == self.uid => {
                    c.uid = sender;
                    out.push((*q, c));
                }
                Ok(sender) => {
                    tracing::warn!("xhsa: queue {q}: a request of uid {sender} refused: only root and uid {} may steer this process's queues", self.uid);
                    self.board.acknowledge(h.index(), c.seq, ACK_NOT_PERMITTED, sender as i32);
                }
                Err(status) => {
                    tracing::warn!("xhsa: queue {q}: a request (op {}) came without its sender's request file: refused", c.op);
                    self.board.acknowledge(h.index(), c.seq, status, 0);
                }
            }
        }
        out.sort_by_key(|(q, _)| *q);
        out
    }

    /// Whether slot `index` (holding `slot`) is one of this process's own: it names this process
    /// and this process holds it. Another slot that names this process (a forgery, or a forked
    /// parent's) is not.
    fn is_mine(&self, index: usize, slot: &Slot) -> bool {
        slot.owner() == self.me && self.board.holds(index)
    }

    /// Whether this is the process that opened the link (not a forked child).
    fn same_process(&self) -> bool {
        std::process::id() == self.opened_by
    }

    /// Answers request `seq` for `queue`.
    pub fn answer(&self, queue: QueueId, seq: u32, status: u32, detail: i32) {
        if let Some(h) = self.slots.lock().unwrap_or_else(|e| e.into_inner()).get(&queue) {
            self.board.acknowledge(h.index(), seq, status, detail);
        }
    }

    /// Confirms this process's slots (it runs; what they say stands): the other processes
    /// count a slot's work only while its owner confirms it
    /// ([`STALE_AFTER_NS`](xhsa_model::stats::STALE_AFTER_NS)). A forked child confirms nothing
    /// of its parent's.
    pub fn beat(&self) {
        if !self.same_process() {
            return;
        }
        let handles: Vec<SlotHandle> =
            self.slots.lock().unwrap_or_else(|e| e.into_inner()).values().copied().collect();
        for h in &handles {
            self.board.confirm(h);
        }
    }

    /// The CU partition `queue` joined with (the whole GPU when unknown).
    fn partition_of(&self, queue: QueueId) -> PartitionId {
        let parts = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        parts.get(&queue).copied().unwrap_or(PartitionId::WHOLE)
    }

    /// Frees `queue`'s slot.
    pub fn leave(&self, queue: QueueId) {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner()).remove(&queue);
        self.preemptions.lock().unwrap_or_else(|e| e.into_inner()).remove(&queue);
        if let Some(handle) = self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(&queue) {
            self.board.release(handle);
        }
    }

    /// Frees every slot of this process (at exit). A forked child leaves the parent's slots alone.
    pub fn leave_all(&self) {
        if !self.same_process() {
            return;
        }
        let handles: Vec<SlotHandle> =
            self.slots.lock().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, h)| h).collect();
        for h in handles {
            self.board.release(h);
        }
    }

    /// What the other processes' queues say: the highest priority with work, per CU partition.
    pub fn contention(&self) -> ExternalWork {
        let slots = self.board.snapshot();
        let (work, live) = external_work(&slots, Some(self.me), monotonic_ns());
        self.others.store(live > 0, Ordering::Relaxed);
        work
    }

    /// Whether other processes had queues on the board at the last [`BoardLink::contention`].
    pub fn others_present(&self) -> bool {
        self.others.load(Ordering::Relaxed)
    }

    /// Clears the slots of processes that are gone (their slot locks are free: the watcher's job).
    pub fn cleanup_dead(&self) -> usize {
        self.board.cleanup_dead()
    }

    /// Wakes the watchers a change of this process's queues can concern: every other process's,
    /// and this process's own only when it has said the change may concern it
    /// ([`Watch::set_interest`]: queues of several priorities, or queues off the GPU). A process
    /// alone on the GPU with one priority thus pays no wake-up per transition.
    pub fn notify(&self) {
        let skip = u32::from(
            self.own_waiting.load(Ordering::SeqCst) && !self.own_interest.load(Ordering::Relaxed),
        );
        self.board.notify(monotonic_ns(), skip);
    }
}

impl std::fmt::Debug for BoardLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardLink").field("path", &self.board.path()).field("me", &self.me).finish()
    }
}

impl Watch for BoardLink {
    fn wake_seq(&self) -> u32 {
        self.board.wake_seq()
    }

    fn wait(&self, seen: u32, timeout: Option<Duration>) {
        self.own_waiting.store(true, Ordering::SeqCst);
        self.board.wait(seen, timeout);
        self.own_waiting.store(false, Ordering::SeqCst);
    }

    fn set_interest(&self, own_changes_matter: bool) {
        self.own_interest.store(own_changes_matter, Ordering::Relaxed);
    }

    fn wake_age_ns(&self) -> Option<u64> {
        let at = self.board.last_wake_ns();
        (at != 0).then(|| monotonic_ns().saturating_sub(at))
    }

    fn view(&self) -> (Vec<Mine>, Vec<Other>) {
        let now = monotonic_ns();
        let mut mine = Vec::new();
        let mut others = Vec::new();
        for (index, slot) in self.board.live_slots() {
            // A slot in this process's name it does not hold never makes the watcher act.
            if self.is_mine(index, &slot) {
                if let Some(priority) = slot.stats.priority() {
                    let st = &slot.stats;
                    mine.push(Mine {
                        id: QueueId(slot.queue_id),
                        priority,
                        pending: st.pending,
                        in_flight: st.in_flight,
                        packet_ns: st.packet_ns,
                        own_ns: st.own_packet_ns,
                        preemptable: false,
                        paused: st.has_flag(FLAG_PAUSED),
                        partition: PartitionId(slot.partition),
                        unconfirmed: st.has_flag(xhsa_model::stats::FLAG_UNCONFIRMED),
                    });
                }
            } else if let Some(p) = slot.priority_with_work(now) {
                others.push(Other {
                    priority: p,
                    partition: PartitionId(slot.partition),
                    key: slot.queue_key(),
                    packet_ns: slot.stats.packet_ns,
                });
            }
        }
        (mine, others)
    }

    fn housekeeping(&self) {
        self.cleanup_dead();
        if self.opened_at.elapsed() >= LONELY_AFTER
            && !self.lonely_checked.swap(true, Ordering::Relaxed)
        {
            let kfd = std::fs::read_dir(KFD_PROCESSES).map_or(0, |d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
                    .count()
            });
            let others =
                self.board.live_slots().iter().filter(|(i, s)| !self.is_mine(*i, s)).count();
            if let Some(msg) = lonely_board(kfd, others, self.path()) {
                tracing::warn!("{msg}");
            }
        }
    }

    fn preempted(&self, queues: &[QueueId], off: bool) {
        BoardLink::preempted(self, queues, off);
    }

    fn controls(&self) -> Vec<(QueueId, Control)> {
        BoardLink::controls(self)
    }

    fn answer(&self, queue: QueueId, seq: u32, status: u32, detail: i32) {
        BoardLink::answer(self, queue, seq, status, detail);
    }

    fn beat(&self) {
        BoardLink::beat(self);
    }

    fn split(&self) -> Option<(xhsa_board::layout::SplitWord, u32)> {
        Some(self.board.split())
    }

    fn sizing_look(
        &self,
        reserve: &xhsa_model::partition::Reserve,
    ) -> Option<crate::preempt::sizing::Look> {
        let slots = self.board.live_slots();
        // The leader: the live owner with the lowest token (random, fixed for its life; a slot's
        // index changes when a queue moves partitions).
        let leader = slots
            .iter()
            .min_by_key(|(_, slot)| slot.owner_token)
            .is_some_and(|(index, slot)| self.is_mine(*index, slot));
        // Each queue's counters once: of two live slots with one queue's key (one left behind
        // by an owner of another version, or written by hand) the one confirmed last.
        let mut newest: HashMap<u64, (u64, crate::preempt::sizing::QueueSample)> = HashMap::new();
        for (_, slot) in slots {
            let Some(p) = slot.stats.priority() else { continue };
            let beat = slot.stats.beat_ns;
            let sample = crate::preempt::sizing::QueueSample {
                key: slot.queue_key(),
                critical: reserve.is_reserved(p),
                completed: slot.stats.completed,
                busy_ns: slot.stats.busy_ns,
                preemptions: slot.stats.preemptions,
                rounds: slot.stats.rounds,
            };
            match newest.get(&sample.key) {
                Some(&(b, _)) if b >= beat => {}
                _ => {
                    newest.insert(sample.key, (beat, sample));
                }
            }
        }
        let mut queues: Vec<_> = newest.into_values().map(|(_, q)| q).collect();
        queues.sort_by_key(|q| q.key);
        Some(crate::preempt::sizing::Look { at: monotonic_ns(), queues, leader })
    }

    fn swap_split(
        &self,
        old: xhsa_board::layout::SplitWord,
        new: xhsa_board::layout::SplitWord,
    ) -> bool {
        self.board.swap_split(old, new, monotonic_ns())
    }

    fn show_sharing(&self, word: u32) {
        if self.sharing.swap(word, Ordering::Relaxed) != word {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            for handle in slots.values() {
                self.board.publish_with(handle, |slot| slot.sharing = word);
            }
        }
    }
}

impl Board for BoardLink {
    fn join(&self, queue: QueueId, priority: Priority, partition: PartitionId) -> bool {
        BoardLink::join(self, queue, priority, partition)
    }

    fn publish(&self, queue: QueueId, stats: &QueueStats) {
        BoardLink::publish(self, queue, stats)
    }

    fn leave(&self, queue: QueueId) {
        BoardLink::leave(self, queue)
    }

    fn contention(&self) -> ExternalWork {
        BoardLink::contention(self)
    }

    fn others_present(&self) -> bool {
        BoardLink::others_present(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_board::layout::{Slot, HEADER_SIZE, SLOT_LIVE, SLOT_SIZE};
    use xhsa_model::contention::Contention;
    use xhsa_model::priority::Level;

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    fn place(name: &str) -> BoardPlace {
        let dir =
            std::env::temp_dir().join(format!("xhsa-link-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        BoardPlace { dir, group: None }
    }

    #[test]
    fn another_process_work_contends_and_own_work_does_not() {
        let place = place("contend");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(-10), PartitionId::WHOLE));
        link.publish(
            QueueId(1),
            &QueueStats { priority: p(-10).rank(), pending: 4, ..Default::default() },
        );
        assert_eq!(
            link.contention().anywhere(),
            Contention::external(None),
            "its own queues are not external contention"
        );
        // A second process (same pid, as in another container: only its token tells them apart;
        // alive while its open of the board holds its slot's lock).
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        let other = Owner { pid: std::process::id(), token: this_process().token.wrapping_add(7) };
        let h = board.claim(other, PartitionId(0), QueueId(9), p(10)).unwrap();
        assert_eq!(
            link.contention().anywhere(),
            Contention::external(None),
            "idle queues do not contend"
        );
        assert!(link.others_present());
        board.publish(
            &h,
            &QueueStats { priority: p(10).rank(), in_flight: 1, ..Default::default() },
        );
        assert_eq!(link.contention().anywhere(), Contention::external(Some(p(10))));
        assert_eq!(link.cleanup_dead(), 0, "it is alive");
        // The other process goes (its descriptor closes): the watcher's housekeeping removes it.
        drop(board);
        assert_eq!(
            link.contention().anywhere(),
            Contention::external(Some(p(10))),
            "contention reads never test liveness"
        );
        assert_eq!(link.cleanup_dead(), 1);
        assert_eq!(link.contention().anywhere(), Contention::external(None));
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        assert_eq!(board.snapshot().len(), 1);
        link.leave_all();
        assert!(board.snapshot().is_empty());
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn other_processes_work_is_read_by_partition_and_a_reclaimed_slot_keeps_its_partition() {
        use xhsa_model::partition::{Reserve, Side, Split};
        let split = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        let (reserved, shared) = (split.id(Side::Reserved), split.id(Side::Shared));
        let place = place("partitions");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(10), reserved));
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        let other = Owner { pid: std::process::id(), token: this_process().token.wrapping_add(9) };
        let h = board.claim(other, shared, QueueId(9), p(-10)).unwrap();
        board
            .publish(&h, &QueueStats { priority: p(-10).rank(), pending: 3, ..Default::default() });
        let work = link.contention();
        assert_eq!(work.contention_in(reserved), Contention::external(None));
        assert_eq!(work.contention_in(shared), Contention::external(Some(p(-10))));
        // The view the watcher decides on carries the partitions.
        let (mine, others) = link.view();
        assert_eq!(mine[0].partition, reserved);
        let seen: Vec<_> = others.iter().map(|o| (o.priority, o.partition)).collect();
        assert_eq!(seen, vec![(p(-10), shared)]);
        // A slot taken away is claimed again in the same partition.
        let index = link.slots.lock().unwrap()[&QueueId(1)].index();
        link.board.release(link.slots.lock().unwrap()[&QueueId(1)]);
        link.publish(QueueId(1), &QueueStats { priority: p(10).rank(), ..Default::default() });
        let again = board.snapshot().into_iter().find(|s| s.queue_id == 1).unwrap();
        assert_eq!(PartitionId(again.partition), reserved, "slot {index} reclaimed");
        link.leave_all();
        drop(board);
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_slot_taken_away_is_claimed_again_at_the_next_publish() {
        let place = place("reclaim");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(3), PartitionId::WHOLE));
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        assert_eq!(board.cleanup_dead(), 0, "a live owner's slot is never cleared as dead");
        // Someone who may write the file zeroed the slot.
        let index = link.slots.lock().unwrap()[&QueueId(1)].index();
        let file = std::fs::OpenOptions::new().write(true).open(link.path()).unwrap();
        std::os::unix::fs::FileExt::write_all_at(
            &file,
            &[0u8; SLOT_SIZE],
            (HEADER_SIZE + index * SLOT_SIZE) as u64,
        )
        .unwrap();
        assert!(board.snapshot().is_empty());
        link.publish(
            QueueId(1),
            &QueueStats { priority: p(3).rank(), pending: 1, ..Default::default() },
        );
        let live: Vec<Slot> = board.snapshot();
        assert_eq!(live.len(), 1);
        assert_eq!((live[0].state, live[0].stats.pending), (SLOT_LIVE, 1));
        link.leave(QueueId(1));
        assert!(board.snapshot().is_empty());
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    /// The live slots naming `queue` of this link's process.
    fn slots_of(board: &SharedBoard, link: &BoardLink, queue: u64) -> usize {
        let own = |s: &Slot| s.owner() == link.me && s.queue_id == queue;
        board.snapshot().iter().filter(|s| own(s)).count()
    }

    #[test]
    fn a_publish_that_meets_a_write_under_way_keeps_the_queue_to_one_slot() {
        let place = place("write-under-way");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(3), PartitionId::WHOLE));
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        // The slot's sequence word odd: a write under way (another thread of the owner's, or a
        // writer stopped half-way).
        let index = link.slots.lock().unwrap()[&QueueId(1)].index();
        let file = std::fs::OpenOptions::new().read(true).write(true).open(link.path()).unwrap();
        let at = (HEADER_SIZE + index * SLOT_SIZE) as u64;
        let mut seq = [0u8; 4];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut seq, at).unwrap();
        let even = u32::from_le_bytes(seq);
        std::os::unix::fs::FileExt::write_all_at(&file, &(even + 1).to_le_bytes(), at).unwrap();
        let stats =
            |completed| QueueStats { priority: p(3).rank(), completed, ..Default::default() };
        link.publish(QueueId(1), &stats(5));
        // The write ends; the queue still has the one slot, and the next publish lands there.
        std::os::unix::fs::FileExt::write_all_at(&file, &(even + 2).to_le_bytes(), at).unwrap();
        assert_eq!(slots_of(&board, &link, 1), 1, "{:?}", board.snapshot());
        link.publish(QueueId(1), &stats(9));
        assert_eq!(slots_of(&board, &link, 1), 1);
        let live = board.snapshot();
        assert_eq!(live[0].stats.completed, 9);
        link.leave_all();
        assert!(board.snapshot().is_empty());
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn threads_of_one_owner_publishing_and_confirming_at_once_keep_one_slot_per_queue() {
        let place = place("one-writer");
        let link = std::sync::Arc::new(BoardLink::open(&place, 0).unwrap());
        assert!(link.join(QueueId(1), p(3), PartitionId::WHOLE));
        let board = SharedBoard::open(&place, 0, 16).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let beater = {
            let (link, stop) = (link.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    link.beat();
                }
            })
        };
        for completed in 0..200_000u64 {
            let stats = QueueStats { priority: p(3).rank(), completed, ..Default::default() };
            link.publish(QueueId(1), &stats);
        }
        stop.store(true, Ordering::Relaxed);
        beater.join().unwrap();
        assert_eq!(slots_of(&board, &link, 1), 1, "{} slots live", board.snapshot().len());
        assert_eq!(board.snapshot()[0].stats.completed, 199_999, "the last publish stands");
        link.leave_all();
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn the_sizing_counts_each_queue_once_from_its_slot_confirmed_last() {
        use xhsa_model::partition::Reserve;
        let place = place("sizing-once");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(3), PartitionId::WHOLE));
        // A slot left behind in this queue's name, its counters frozen before the live one's.
        let other = SharedBoard::open(&place, 0, 16).unwrap();
        let h = other.claim(link.me, PartitionId(0), QueueId(1), p(3)).unwrap();
        other
            .publish(&h, &QueueStats { priority: p(3).rank(), completed: 7, ..Default::default() });
        std::thread::sleep(Duration::from_millis(2));
        link.publish(
            QueueId(1),
            &QueueStats { priority: p(3).rank(), completed: 40, ..Default::default() },
        );
        let look = Watch::sizing_look(&link, &Reserve::parse("auto@1").unwrap()).unwrap();
        let seen: Vec<_> = look.queues.iter().map(|q| (q.critical, q.completed)).collect();
        assert_eq!(seen, vec![(true, 40)]);
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn the_watcher_sees_as_its_own_only_the_slots_it_holds() {
        let place = place("forged-own");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(-3), PartitionId::WHOLE));
        link.publish(
            QueueId(1),
            &QueueStats { priority: p(-3).rank(), in_flight: 2, ..Default::default() },
        );
        // Another writer of the board puts up a slot in this process's name.
        let forger = SharedBoard::open(&place, 0, 16).unwrap();
        let h = forger.claim(link.me, PartitionId(0), QueueId(1), p(-3)).unwrap();
        forger.publish(
            &h,
            &QueueStats { priority: p(-3).rank(), in_flight: 5, ..Default::default() },
        );
        let (mine, _) = Watch::view(&link);
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!(mine[0].in_flight, 2, "the forged slot is not taken for this process's queue");
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn requests_need_their_senders_file_and_a_sender_who_may_steer() {
        use xhsa_board::layout::{ACK_UNVERIFIED, OP_PAUSE};
        let place = place("requests");
        let link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(0), PartitionId::WHOLE));
        let index = link.slots.lock().unwrap()[&QueueId(1)].index();
        let ctl = SharedBoard::open_existing(link.path()).unwrap();
        // A proper request of this user reaches the watcher with the kernel's uid.
        let req = ctl.send_control(index, OP_PAUSE, 0, 1).unwrap();
        let got = link.controls();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].1.seq, got[0].1.uid), (req.seq, link.uid));
        link.answer(QueueId(1), req.seq, xhsa_board::layout::ACK_APPLIED, 0);
        // Its file gone before the owner looked: refused, answered, never handed on.
        let req = ctl.send_control(index, OP_PAUSE, 0, 2).unwrap();
        let seq = req.seq;
        drop(req);
        assert!(link.controls().is_empty());
        assert_eq!(
            ctl.wait_ack(index, seq, Duration::from_secs(1)).map(|a| a.status),
            Some(ACK_UNVERIFIED)
        );
        // A request file of another user (root can make one): not permitted.
        if link.uid == 0 {
            let req = ctl.send_control(index, OP_PAUSE, 0, 3).unwrap();
            let file = xhsa_board::place::request_path(link.path(), index, req.seq);
            std::os::unix::fs::chown(&file, Some(4321), None).unwrap();
            assert!(
                link.controls().is_empty(),
                "a process accepts requests of root and its own user only"
            );
            let ack = ctl.wait_ack(index, req.seq, Duration::from_secs(1)).unwrap();
            assert_eq!((ack.status, ack.detail), (ACK_NOT_PERMITTED, 4321));
        }
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_forked_child_leaves_the_parents_slots_alone() {
        let place = place("fork");
        let mut link = BoardLink::open(&place, 0).unwrap();
        assert!(link.join(QueueId(1), p(0), PartitionId::WHOLE));
        // As in a child of fork(): another pid than the one that opened the link.
        link.opened_by = link.opened_by.wrapping_add(1);
        link.leave_all();
        assert!(link.controls().is_empty());
        let board = SharedBoard::open_existing(link.path()).unwrap();
        assert_eq!(board.snapshot().len(), 1, "the parent's slot stays");
        std::fs::remove_dir_all(&place.dir).unwrap();
    }

    #[test]
    fn a_process_alone_on_its_board_beside_other_kfd_users_is_told_how_to_share_it() {
        let board = std::path::Path::new("/dev/shm/xhsa-u0-gpu1.board");
        let msg = lonely_board(3, 0, board).expect("two other KFD processes, nobody on the board");
        assert!(
            msg.contains("2 other process(es)")
                && msg.contains("XHSA_BOARD_DIR")
                && msg.contains("/dev/shm/xhsa-u0-gpu1.board"),
            "{msg}"
        );
        assert_eq!(lonely_board(1, 0, board), None, "alone on the GPU: nothing to say");
        assert_eq!(
            lonely_board(0, 0, board),
            None,
            "KFD lists nobody (not readable): nothing to say"
        );
        assert_eq!(lonely_board(3, 1, board), None, "someone else is on the board");
    }

    #[test]
    fn the_place_comes_from_the_settings() {
        let mut s = Settings { board_dir: "/run/x".into(), ..Settings::default() };
        assert_eq!(place_from_settings(&s), Ok(BoardPlace { dir: "/run/x".into(), group: None }));
        s.config.board_group = Some(GroupSpec::Id(1234));
        assert_eq!(place_from_settings(&s).unwrap().group, Some(1234));
        s.config.board_group = Some(GroupSpec::Name("root".into()));
        assert_eq!(place_from_settings(&s).unwrap().group, Some(0));
        s.config.board_group = Some(GroupSpec::Name("no-such-group-xhsa".into()));
        assert!(place_from_settings(&s).unwrap_err().contains("no such group"));
    }

    #[test]
    fn an_unusable_place_is_an_error_not_a_panic() {
        let place = BoardPlace { dir: "/nonexistent/xhsa".into(), group: None };
        let err = BoardLink::open(&place, 0).expect_err("no such directory");
        assert!(err.to_string().contains("/nonexistent/xhsa"), "{err}");
    }
}
