//! Who owns a slot: a process as the board identifies it, and how a monitor finds it.
//!
//! An [`Owner`] is the process's pid as it sees it and a random token drawn once per process
//! ([`this_process`]). Pids are not unique on a machine with containers (each pid namespace
//! counts from 1), so nothing decides by pid: a slot's owner is alive while it holds its lock
//! on the slot (`SharedBoard::is_held`). The pid, the pid namespace and the process name are for
//! people: [`locate`] turns them into the process as the caller's namespace sees it.
#![forbid(unsafe_code)]

use crate::layout::Owner;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

/// The name of process `pid` (`/proc/<pid>/comm`, in the caller's pid namespace), if it exists.
pub fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// This process as the board identifies it. The token is drawn once per process image; a
/// forked child that uses the board draws its own ([`fresh_process`]).
pub fn this_process() -> Owner {
    static TOKEN: OnceLock<u64> = OnceLock::new();
    Owner { pid: std::process::id(), token: *TOKEN.get_or_init(random_token) }
}

/// A new identity for this process, unlike any drawn before (a forked child's).
pub fn fresh_process() -> Owner {
    Owner { pid: std::process::id(), token: random_token() }
}

/// A random non-zero token: 8 bytes of `/dev/urandom`, or, if that cannot be read, the clock
/// and the pid mixed (unique enough to tell processes apart; not a secret either way).
fn random_token() -> u64 {
    let mut b = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok();
    let t = if random {
        u64::from_le_bytes(b)
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        now.rotate_left(17)
            ^ (u64::from(std::process::id()) << 32)
            ^ xhsa_model::clock::monotonic_ns()
    };
    t.max(1)
}

/// The pid namespace of process `pid` as the caller sees it (`"self"` for this one): the inode
/// of `/proc/<pid>/ns/pid`, or `None` if it cannot be read.
pub fn pid_namespace(pid: &str) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok().map(|m| m.ino())
}

/// A board owner as the caller's pid namespace sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Located {
    /// Its pid here (on the host: the host pid); `None` when it is not visible from here.
    pub pid: Option<u32>,
    /// Whether it runs in another pid namespace than the caller (a container).
    pub other_namespace: bool,
    /// Its cgroup path (`/proc/<pid>/cgroup`, the unified hierarchy's), when visible: names the
    /// container or pod.
    pub cgroup: Option<String>,
}

/// Finds board owners from the caller's pid namespace: the same namespace, or one nested in it
/// (a container seen from the host, through each process's `NSpid`). `/proc` is read at most
/// once, the first time an owner of another namespace is asked about, however many are.
pub struct Locator {
    /// The caller's pid namespace.
    mine: Option<u64>,
    /// The processes of other namespaces visible from here: (namespace, pid there) → pid here.
    nested: Option<std::collections::HashMap<(u64, u32), u32>>,
}

impl Default for Locator {
    fn default() -> Locator {
        Locator { mine: pid_namespace("self"), nested: None }
    }
}

impl Locator {
    /// The process with pid `pid` in pid namespace `pid_ns` (as a slot records them). A
    /// namespace the caller cannot see into gives `pid: None`.
    pub fn locate(&mut self, pid_ns: u64, pid: u32) -> Located {
        if pid_ns == 0 || Some(pid_ns) == self.mine {
            let visible = std::fs::metadata(format!("/proc/{pid}")).is_ok();
            return Located {
                pid: visible.then_some(pid),
                other_namespace: false,
                cgroup: visible.then(|| cgroup(pid)).flatten(),
            };
        }
        let mine = self.mine;
        let found =
            self.nested.get_or_insert_with(|| nested_processes(mine)).get(&(pid_ns, pid)).copied();
        Located { pid: found, other_namespace: true, cgroup: found.and_then(cgroup) }
    }
}

/// The visible processes outside pid namespace `mine`: (their namespace, their pid there) → pid.
fn nested_processes(mine: Option<u64>) -> std::collections::HashMap<(u64, u32), u32> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for p in dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
    {
        let Some(ns) = pid_namespace(&p.to_string()).filter(|ns| Some(*ns) != mine) else {
            continue;
        };
        if let Some(inner) = innermost_pid(p) {
            out.entry((ns, inner)).or_insert(p);
        }
    }
    out
}

/// The pid process `pid` has in its own (innermost) pid namespace: the last field of `NSpid`.
fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The cgroup of process `pid` (the `0::` line of `/proc/<pid>/cgroup`, else the first line's
/// path).
fn cgroup(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let line = text.lines().find(|l| l.starts_with("0::")).or_else(|| text.lines().next())?;
    Some(line.splitn(3, ':').nth(2)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_stable_and_a_fresh_one_differs() {
        let a = this_process();
        assert_eq!(a, this_process());
        assert_eq!(a.pid, std::process::id());
        assert_ne!(a.token, 0);
        assert_ne!(fresh_process().token, a.token);
    }

    #[test]
    fn this_process_is_located_in_its_own_namespace() {
        let ns = pid_namespace("self").expect("/proc/self/ns/pid is readable");
        let mut locator = Locator::default();
        let here = locator.locate(ns, std::process::id());
        assert_eq!(here.pid, Some(std::process::id()));
        assert!(!here.other_namespace);
        // A namespace that exists nowhere: not found, and said to be another one.
        let nowhere = locator.locate(ns ^ 0x5a5a_5a5a, std::process::id());
        assert_eq!(nowhere.pid, None);
        assert!(nowhere.other_namespace);
    }
}
