//! Processes and descriptors: the identity of this process, its timer slack, a session of its
//! own for a spawned program, code run between fork and exec, waiting for a child's exit
//! without reaping it, and copies of descriptors named by number. Safe wrappers; the
//! `unsafe` they need is here, each with its argument.

use std::io;
use std::num::NonZeroU64;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// This process's real user id.
pub fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// This process's effective user id.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Sets the calling thread's timer slack to 1 ns (the default 50 µs would blur the device's
/// timed sleeps); failures are ignored (the sleeps are then only coarser).
pub fn finest_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
}

/// Makes `cmd`'s program the leader of a new session (`setsid` between fork and exec), so it
/// outlives the session of the process that started it.
pub fn new_session(cmd: &mut Command) {
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Runs `f` in `cmd`'s child between fork and exec ([`CommandExt::pre_exec`]).
///
/// # Safety
///
/// `f` must be async-signal-safe: no allocation, no locks, only system calls on data prepared
/// before the fork (the child of a multithreaded parent has only the forking thread).
pub unsafe fn before_exec(
    cmd: &mut Command,
    f: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) {
    // SAFETY: the caller vouches that `f` is async-signal-safe.
    unsafe {
        cmd.pre_exec(f);
    }
}

/// Waits until child `pid` has exited, without reaping it (`waitid(WNOWAIT)`), so its pid stays
/// taken until the caller reaps it.
pub fn wait_exited_unreaped(pid: i32) {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else { return };
    let opts = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
    loop {
        match rustix::process::waitid(rustix::process::WaitId::Pid(pid), opts) {
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
    }
}

/// A copy (close-on-exec) of the descriptor numbered `fd`, whatever opened it; `EBADF` if no
/// descriptor has that number.
pub fn dup_cloexec(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on any integer; one that is not an open descriptor fails
    // with EBADF and nothing is created.
    let r = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a descriptor fcntl just created for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// The file of the loaded object (executable or shared library) that contains code address
/// `addr`, as the dynamic linker names it.
pub fn object_containing(addr: usize) -> Option<std::path::PathBuf> {
    // SAFETY: Dl_info is plain data; all-zero is a valid value for dladdr to overwrite.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads `addr` as a number and fills `info`.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the dynamic linker.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(std::path::PathBuf::from(name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_is_copied_and_a_closed_number_is_refused() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let copy = dup_cloexec(std::os::fd::AsRawFd::as_raw_fd(&f)).unwrap();
        assert_ne!(std::os::fd::AsRawFd::as_raw_fd(&copy), std::os::fd::AsRawFd::as_raw_fd(&f));
        assert_eq!(dup_cloexec(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn this_code_is_found_in_a_loaded_object() {
        let me = object_containing(object_containing as *const () as usize).unwrap();
        assert!(me.exists(), "{}", me.display());
    }
}
