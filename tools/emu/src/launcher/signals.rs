//! Termination signals while CMD runs: the launcher catches them (so it lives to remove the
//! runtime directory) and forwards them to CMD, which decides whether to exit.
//!
//! CMD stays in the launcher's process group, so it is in the terminal's foreground with it.
//! Signals the kernel sends to the whole group (^C, ^\ and hangup from the terminal) reach CMD
//! directly and are not forwarded again, so CMD sees each ^C once. Signals a process sends to
//! the launcher (`kill PID`, `timeout`, a supervisor) are forwarded to CMD. A signal that
//! arrives before CMD has started is kept and delivered as soon as it has.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signals caught and forwarded.
pub const FORWARDED: [libc::c_int; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// CMD's pid while it runs, 0 otherwise.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A signal to deliver to CMD, 0 if none.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // si_code <= 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL); > 0: by the kernel, which
    // sends terminal signals to the whole foreground process group, CMD included.
    // SAFETY: the kernel passes SA_SIGINFO handlers a valid siginfo_t for the signal's
    // duration; it is only read after the null check.
    let from_process = info.is_null() || unsafe { (*info).si_code } <= 0;
    if CHILD.load(Ordering::SeqCst) == 0 || from_process {
        PENDING.store(sig, Ordering::SeqCst);
        deliver();
    }
}

/// Sends the pending signal, if any, to CMD, if it runs. Async-signal-safe.
fn deliver() {
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        let sig = PENDING.swap(0, Ordering::SeqCst);
        if sig != 0 {
            // SAFETY: kill(2) is async-signal-safe and takes no pointers.
            unsafe { libc::kill(child, sig) };
        }
    }
}

/// Installs the handlers (once, before CMD is spawned). Handlers are reset to the default in
/// CMD by exec.
pub fn install() {
    for sig in FORWARDED {
        // SAFETY: sigaction is a plain C struct (all-zero is valid); the handler installed has
        // the SA_SIGINFO signature and only does async-signal-safe work (atomics and kill);
        // sigemptyset and sigaction get pointers to that local struct.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// CMD has started: forward to `pid` from now on, and deliver what arrived before.
pub fn set_child(pid: libc::pid_t) {
    CHILD.store(pid, Ordering::SeqCst);
    deliver();
}

/// CMD has exited (not yet reaped): stop forwarding, so a recycled pid is never signalled.
pub fn clear_child() {
    CHILD.store(0, Ordering::SeqCst);
}
