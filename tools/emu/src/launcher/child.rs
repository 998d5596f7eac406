//! Running CMD: spawn it with the emulator's environment, wait for it, and turn its end into
//! the launcher's exit status the way a shell does.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};

use super::signals;

/// CMD could not be started.
#[derive(Debug)]
pub struct SpawnError {
    /// 127 if not found, 126 if not executable (as a shell).
    pub code: u8,
    pub message: String,
}

/// Runs `cmd` (program and arguments) with `vars` added to the inherited environment; returns
/// its exit status (128+signal if a signal killed it).
pub fn run(
    cmd: &[OsString],
    vars: &[(OsString, OsString)],
    sandbox: Option<&super::sandbox::Sandbox>,
) -> Result<u8, SpawnError> {
    let Some((program, args)) = cmd.split_first() else {
        return Err(SpawnError { code: 2, message: "no command to run".into() });
    };
    signals::install();
    let mut c = Command::new(program);
    c.args(args).envs(vars.iter().map(|(k, v)| (k, v)));
    if let Some(sb) = sandbox.cloned() {
        // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
        // calls (chroot, chdir) on data prepared before the fork.
        unsafe { crate::sys::process::before_exec(&mut c, move || sb.apply()) };
    }
    let mut child = c.spawn().map_err(|e| {
        let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
        SpawnError { code, message: format!("cannot run {}: {e}", program.to_string_lossy()) }
    })?;
    let pid = child.id() as libc::pid_t;
    signals::set_child(pid);
    wait_exited(pid);
    signals::clear_child();
    let status = child.wait().map_err(|e| SpawnError {
        code: 2,
        message: format!("cannot wait for {}: {e}", program.to_string_lossy()),
    })?;
    Ok(exit_code(status))
}

/// Waits until `pid` has exited without reaping it, so the pid cannot be reused before
/// forwarding stops.
fn wait_exited(pid: libc::pid_t) {
    crate::sys::process::wait_exited_unreaped(pid);
}

/// The shell's convention: the exit code, or 128 + the signal that killed the process.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
