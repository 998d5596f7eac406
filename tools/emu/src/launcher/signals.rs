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

/// The handler of the caught signals (signal context: atomics and `sys::signal::send` only).
fn on_signal(sig: i32, from_process: bool) {
    // Sent by the kernel: terminal signals to the whole foreground process group, CMD included.
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
            crate::sys::signal::send(child, sig);
        }
    }
}

/// Installs the handlers (once, before CMD is spawned). Handlers are reset to the default in
/// CMD by exec.
pub fn install() {
    crate::sys::signal::catch(&FORWARDED, on_signal);
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
