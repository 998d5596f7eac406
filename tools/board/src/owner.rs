//! Who owns a slot: a process as the board identifies it, and whether it still runs.
//!
//! An [`Owner`] is a pid and the process's start time (`/proc/<pid>/stat` field 22), so a pid
//! reused by another process is not taken for the old owner.
#![forbid(unsafe_code)]

use crate::layout::Owner;

/// The name of process `pid` (`/proc/<pid>/comm`), if it exists.
pub fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// The start time of process `pid` (`/proc/<pid>/stat` field 22), if it exists.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process as the board identifies it.
pub fn this_process() -> Owner {
    let pid = std::process::id();
    Owner { pid, start_time: process_start_time(pid).unwrap_or(0) }
}

/// Whether `owner` is still running (same pid, same start time when it recorded one).
pub fn is_alive(owner: Owner) -> bool {
    match process_start_time(owner.pid) {
        Some(start) => owner.start_time == 0 || start == owner.start_time,
        None => false,
    }
}

