//! Requests to the processes that own queues (`xhsactl set-priority`, `pause`, `resume`,
//! `policy`) and the
//! cleaning of boards left by dead processes (`xhsactl board clean`).
//!
//! A request is written into the control words of each target queue's board slot and every
//! watcher of the board is woken (one futex wake); the owning process's libxhsa watcher applies it
//! and answers in the slot's ack words, which wakes the controller (no polling on either side).
//! The owner enforces its `control_max_level` for non-root users. Only users who may write the
//! board file (its owner, or its group for a group board) can send anything: the file's mode is
//! the access control, and a refusal says whose file it is.
#![forbid(unsafe_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xhsa_board::layout::{
    ACK_ABOVE_CAP, ACK_APPLIED, ACK_BAD_LEVEL, ACK_NOT_PERMITTED, ACK_UNKNOWN_OP, ACK_UNVERIFIED,
    OP_CLEAR_PRIORITY, OP_PAUSE, OP_RESUME, OP_SET_POLICY, OP_SET_PRIORITY,
};
use xhsa_board::owner::Locator;
use xhsa_board::place::board_files;
use xhsa_board::shared::{BoardError, SharedBoard};
use xhsa_model::clock::monotonic_ns;
use xhsa_model::priority::Level;
use xhsa_model::sharing::{Sharing, ACCEPTED_POLICY};

/// How long a controller waits for the owner's answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// What to ask.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Run at this level (the operator's override).
    SetPriority(Level),
    /// Back to the priority the application and the config ask for.
    ClearPriority,
    Pause,
    Resume,
    /// The process's sharing policy (`XHSA_POLICY`).
    SetPolicy(Sharing),
}

impl Request {
    fn op(self) -> (u32, i32) {
        match self {
            Request::SetPriority(l) => (OP_SET_PRIORITY, l.get()),
            Request::ClearPriority => (OP_CLEAR_PRIORITY, 0),
            Request::Pause => (OP_PAUSE, 0),
            Request::Resume => (OP_RESUME, 0),
            Request::SetPolicy(p) => (OP_SET_POLICY, i32::from(p.code())),
        }
    }
}

/// Which queues: a process, or one of its queues.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    pub queue: Option<u64>,
}

/// The accepted forms of a target.
pub const TARGET_FORMS: &str =
    "PID (every queue of the process) or PID:QUEUE (one queue, its id as xhsa-top shows it)";
/// The accepted forms of a level.
pub const LEVEL_FORMS: &str = "an integer -256..=255 (higher is more urgent), or `reset` to go back to the requested priority";

/// Parses `PID` or `PID:QUEUE`.
pub fn parse_target(text: &str) -> Result<Target, String> {
    let bad = || format!("`{text}` is not a target: expected {TARGET_FORMS}");
    let (pid, queue) = match text.split_once(':') {
        Some((p, q)) => (p, Some(q.trim().parse::<u64>().map_err(|_| bad())?)),
        None => (text, None),
    };
    let pid = pid.trim().parse::<u32>().map_err(|_| bad())?;
    if pid == 0 {
        return Err(bad());
    }
    Ok(Target { pid, queue })
}

/// Parses a level for `set-priority`.
pub fn parse_level(text: &str) -> Result<Request, String> {
    if text.trim().eq_ignore_ascii_case("reset") {
        return Ok(Request::ClearPriority);
    }
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(Level::new)
        .map(Request::SetPriority)
        .ok_or_else(|| format!("`{text}` is not a level: expected {LEVEL_FORMS}"))
}

/// Parses a sharing policy for `policy`.
pub fn parse_policy(text: &str) -> Result<Request, String> {
    Sharing::parse(text)
        .map(Request::SetPolicy)
        .ok_or_else(|| format!("`{text}` is not a sharing policy: expected {ACCEPTED_POLICY}"))
}

/// What one queue's owner answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub node: u32,
    pub pid: u32,
    pub queue: u64,
    /// `Ok(what was done)` or `Err(why not)`.
    pub result: Result<String, String>,
}

/// Why a board cannot be changed by this user, from the file's owner, group and mode.
fn permission_text(path: &Path, err: &BoardError) -> String {
    let who = match std::fs::metadata(path) {
        Ok(m) if m.mode() & 0o020 != 0 => format!(
            "only its owner (uid {}) and group (gid {}) may change it (mode {:o})",
            m.uid(),
            m.gid(),
            m.mode() & 0o777
        ),
        Ok(m) => {
            format!("only its owner (uid {}) may change it (mode {:o})", m.uid(), m.mode() & 0o777)
        }
        Err(_) => String::new(),
    };
    format!("{err}; {who}")
}

/// Sends `req` to the queues `target` names on every board in `dir`, and waits for each answer.
/// `Err` when nothing could be sent (no such process, or no board could be opened).
pub fn send(dir: &Path, target: Target, req: Request) -> Result<Vec<Outcome>, String> {
    let files = board_files(dir).map_err(|e| format!("board directory {}: {e}", dir.display()))?;
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut locator = Locator::default();
    for (path, node) in files {
        let board = match SharedBoard::open_existing(&path) {
            Ok(b) => b,
            Err(e) => {
                refused.push(permission_text(&path, &e));
                continue;
            }
        };
        let mut sent = Vec::new();
        for (index, slot) in board.live_slots() {
            // The pid as this controller sees the process (a container's from the host: its
            // host pid), else the pid in its own namespace.
            let pid = locator.locate(slot.pid_ns, slot.pid).pid.unwrap_or(slot.pid);
            if pid != target.pid || target.queue.is_some_and(|q| q != slot.queue_id) {
                continue;
            }
            if !board.is_held(index) {
                out.push(Outcome { node, pid, queue: slot.queue_id, result: Err(format!("process {pid} is gone (its slots stay until a live process or `xhsactl board clean` clears them)")) });
                continue;
            }
            let (op, level) = req.op();
            match board.send_control(index, op, level, monotonic_ns()) {
                Ok(request) => {
                    sent.push((index, slot.queue_id, request, std::time::Instant::now()))
                }
                Err(e) => out.push(Outcome {
                    node,
                    pid,
                    queue: slot.queue_id,
                    result: Err(format!("{e}; nothing was sent")),
                }),
            }
        }
        for (index, queue, request, sent_at) in sent {
            let seq = request.seq;
            let result = match board.wait_ack(index, seq, ANSWER_WAIT) {
                Some(a) if a.status == ACK_APPLIED => {
                    let took = format!(" (answered in {:.1} ms)", sent_at.elapsed().as_secs_f64() * 1e3);
                    Ok(match req {
                        Request::SetPriority(_) | Request::ClearPriority => format!("priority level {} applied{took}", a.detail),
                        Request::Pause => format!("paused{took}"),
                        Request::Resume => format!("resumed{took}"),
                        Request::SetPolicy(p) => format!("process's sharing policy {p} applied{took}"),
                    })
                }
                Some(a) if a.status == ACK_ABOVE_CAP => Err(format!(
                    "refused by the process: level {} is above its control_max_level {} (the cap for non-root users, set in its XHSA_CONFIG)",
                    req.op().1,
                    a.detail
                )),
                Some(a) if a.status == ACK_BAD_LEVEL => Err(match req {
                    Request::SetPolicy(p) => format!("refused by the process: its libxhsa does not know policy {p}"),
                    _ => format!("refused by the process: {} is not a level (-256..=255)", req.op().1),
                }),
                Some(a) if a.status == ACK_NOT_PERMITTED => Err(format!(
                    "refused by the process: uid {} may not steer it (only root and the process's own user may)",
                    a.detail
                )),
                Some(a) if a.status == ACK_UNVERIFIED => Err("refused by the process: it could not verify who sent the request (its request file was missing or changed)".into()),
                Some(a) if a.status == ACK_UNKNOWN_OP => Err("refused by the process: the queue is not scheduled by libxhsa any more (destroyed or degraded), or its libxhsa does not know this request".into()),
                Some(a) => Err(format!("the process answered with an unknown status {}", a.status)),
                None => Err(format!("no answer within {} s: the process's libxhsa watcher did not answer (stopped, or busy)", ANSWER_WAIT.as_secs())),
            };
            out.push(Outcome { node, pid: target.pid, queue, result });
        }
    }
    if out.is_empty() {
        let what = match target.queue {
            Some(q) => format!("no queue {q} of process {}", target.pid),
            None => format!("no queue of process {}", target.pid),
        };
        let mut msg = format!(
            "{what} on the boards in {} (xhsa-top or `xhsactl list` shows them)",
            dir.display()
        );
        if !refused.is_empty() {
            msg.push_str("; boards this user cannot change: ");
            msg.push_str(&refused.join("; "));
        }
        return Err(msg);
    }
    Ok(out)
}

/// Pids whose memory maps `path` (from `/proc/*/maps`; processes this user cannot inspect are
/// not seen).
pub fn mapped_by(path: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let want = path.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            if maps.lines().any(|l| l.ends_with(&want)) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// `xhsactl board clean`: clears the slots of dead processes on every board in `dir` and removes
/// boards no live process uses (no live slot, and mapped by no process); with `force`, also
/// boards of another layout (made by another release of xhsa). Returns one line per board.
pub fn clean(dir: &Path, force: bool) -> Result<Vec<String>, String> {
    let files = board_files(dir).map_err(|e| format!("board directory {}: {e}", dir.display()))?;
    let mut lines = Vec::new();
    let remove =
        |path: &PathBuf, why: String, lines: &mut Vec<String>| match std::fs::remove_file(path) {
            Ok(()) => lines.push(format!("removed {}: {why}", path.display())),
            Err(e) => lines.push(format!("could not remove {}: {e}", path.display())),
        };
    for (path, _) in files {
        match SharedBoard::open_existing(&path) {
            Ok(board) => {
                let cleared = board.cleanup_dead();
                let live = board.live_slots();
                let users: Vec<u32> = mapped_by(&path).into_iter().filter(|p| *p != std::process::id()).collect();
                drop(board);
                if live.is_empty() && users.is_empty() {
                    remove(&path, format!("no live process uses it ({cleared} slots of dead processes cleared)"), &mut lines);
                } else {
                    let mut pids: Vec<u32> = live.iter().map(|(_, s)| s.pid).chain(users).collect();
                    pids.sort_unstable();
                    pids.dedup();
                    lines.push(format!("kept {}: in use by {:?}; {cleared} slots of dead processes cleared", path.display(), pids));
                }
            }
            Err(BoardError::Layout { err, .. }) if force => remove(&path, format!("{err} (--force)"), &mut lines),
            Err(e @ BoardError::Layout { .. }) => lines.push(format!("not removed: {e}; `xhsactl board clean --force` removes it once no process of that release runs")),
            Err(e) => lines.push(format!("not cleaned: {}", permission_text(&path, &e))),
        }
    }
    if lines.is_empty() {
        lines.push(format!("no xhsa board in {}", dir.display()));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_board::layout::Owner;
    use xhsa_board::owner::this_process;
    use xhsa_board::place::BoardPlace;
    use xhsa_model::ids::{PartitionId, QueueId};
    use xhsa_model::priority::Priority;

    #[test]
    fn clean_clears_dead_owners_and_removes_only_boards_nobody_uses() {
        let dir = std::env::temp_dir().join(format!("xhsa-monitor-clean-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let place = BoardPlace { dir: dir.clone(), group: None };
        // A process that is gone: a child that exited.
        let child = std::process::Command::new("true").spawn().unwrap();
        let dead = Owner { pid: child.id(), token: 1 };
        let mut child = child;
        child.wait().unwrap();
        {
            let b = SharedBoard::open(&place, 7, 8).unwrap();
            b.claim(dead, PartitionId(0), QueueId(1), Priority::default()).unwrap();
        }
        // Board 8 has a live owner: this process, which keeps it mapped.
        let live = SharedBoard::open(&place, 8, 8).unwrap();
        live.claim(this_process(), PartitionId(0), QueueId(2), Priority::default()).unwrap();
        let lines = clean(&dir, false).unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("removed")
                && lines[0].contains("gpu7")
                && lines[0].contains("1 slots of dead processes cleared"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("kept")
                && lines[1].contains("gpu8")
                && lines[1].contains(&std::process::id().to_string()),
            "{lines:?}"
        );
        assert!(!place.path(7, nix::unistd::getuid().as_raw()).exists());
        // A board of another layout stays unless forced.
        let old = dir.join(format!("xhsa-u{}-gpu9.board", nix::unistd::getuid().as_raw()));
        let mut bytes = vec![0u8; 4096];
        bytes[..8].copy_from_slice(b"XHSABRD\0");
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&old, &bytes).unwrap();
        std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        assert!(clean(&dir, false)
            .unwrap()
            .iter()
            .any(|l| l.starts_with("not removed") && l.contains("--force")));
        assert!(old.exists());
        assert!(clean(&dir, true)
            .unwrap()
            .iter()
            .any(|l| l.starts_with("removed") && l.contains("gpu9")));
        assert!(!old.exists());
        drop(live);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn policies_parse_or_say_what_is_accepted() {
        assert_eq!(
            parse_policy("weights:3:1"),
            Ok(Request::SetPolicy(Sharing::Weights { high: 3, low: 1 }))
        );
        assert_eq!(parse_policy("slo:1.2x").unwrap().op(), (OP_SET_POLICY, 0x2078));
        let e = parse_policy("fair").unwrap_err();
        assert!(e.contains("`fair` is not a sharing policy") && e.contains("cap:PCT"), "{e}");
    }

    #[test]
    fn targets_and_levels_parse_or_say_what_is_accepted() {
        assert_eq!(parse_target("123"), Ok(Target { pid: 123, queue: None }));
        assert_eq!(parse_target("123:4"), Ok(Target { pid: 123, queue: Some(4) }));
        for bad in ["", "0", "x", "12:", "12:q", "-1"] {
            let e = parse_target(bad).unwrap_err();
            assert!(e.contains("PID:QUEUE"), "{e}");
        }
        assert_eq!(parse_level("-5"), Ok(Request::SetPriority(Level::new(-5).unwrap())));
        assert_eq!(parse_level("RESET"), Ok(Request::ClearPriority));
        for bad in ["256", "high", ""] {
            assert!(parse_level(bad).unwrap_err().contains("-256..=255"));
        }
    }
}
