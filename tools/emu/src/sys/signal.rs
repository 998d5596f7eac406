//! Catching termination signals and sending signals, for the launcher
//! (`launcher::signals` decides what to do with them).

use std::sync::OnceLock;

/// The launcher's handler: `(signal, sent by a process)` (false: sent by the kernel, as the
/// terminal's signals to the whole foreground group are).
pub type Handler = fn(i32, bool);

/// The installed [`Handler`] (set once; reading it is one atomic load, async-signal-safe).
static HANDLER: OnceLock<Handler> = OnceLock::new();

extern "C" fn trampoline(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // si_code <= 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL); > 0: by the kernel.
    // SAFETY: the kernel passes SA_SIGINFO handlers a valid siginfo_t for the signal's
    // duration; it is only read after the null check.
    let from_process = info.is_null() || unsafe { (*info).si_code } <= 0;
    if let Some(h) = HANDLER.get() {
        h(sig, from_process);
    }
}

/// Calls `handler` for each of `signals` from now on (it runs in signal context: it must be
/// async-signal-safe, e.g. atomics and [`send`]). One handler per process: a later call keeps
/// the first handler. Exec resets the handlers in a child.
pub fn catch(signals: &[i32], handler: Handler) {
    let _ = HANDLER.set(handler);
    for &sig in signals {
        // SAFETY: sigaction is a plain C struct (all-zero is valid); the handler installed has
        // the SA_SIGINFO signature and only does async-signal-safe work; sigemptyset and
        // sigaction get pointers to that local struct.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = trampoline
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Sends `sig` to process `pid` (async-signal-safe).
pub fn send(pid: i32, sig: i32) {
    // SAFETY: kill(2) is async-signal-safe and takes no pointers.
    unsafe { libc::kill(pid, sig) };
}
