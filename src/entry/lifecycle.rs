//! The runtime's and the process's lifecycle as libxhsa meets it: `hsa_shut_down` (the runtime
//! goes; with it the KFD descriptor libxhsa's preemption borrows) and `fork` (a child inherits
//! libxhsa's state but none of its threads, and must never act for its parent).
//!
//! What it is not: the queues' own lifecycle (create, inactivate, destroy) is
//! [`super::queues`].

use std::sync::OnceLock;

use hsa_sys::hsa::hsa_status_t;

use super::{global, inside, rocr::rocr};

/// `hsa_shut_down`'s C type.
pub(crate) type ShutDownFn = unsafe extern "C" fn() -> hsa_status_t;

/// The process libxhsa started in.
static STARTED_IN: OnceLock<u32> = OnceLock::new();

/// Records the process libxhsa starts in (called when its state is set up).
pub(crate) fn note_start() {
    let _ = STARTED_IN.set(std::process::id());
}

/// Whether this is a child forked after libxhsa started (its state is the parent's copy: no
/// watcher thread, the parent's queues and board slots, possibly locks held at the fork).
pub(crate) fn is_forked_child() -> bool {
    STARTED_IN.get().is_some_and(|&pid| pid != std::process::id())
}

/// `hsa_shut_down`. Before the runtime's own: every queue back on the GPU and the debug trap
/// off on every GPU (with the trap on, the runtime's runtime-disable would block forever), no
/// preemption while the call runs. After it: if the runtime is down (the last `hsa_shut_down`
/// of the process), preemption retires for good (no KFD call on a descriptor that closed and
/// whose number may be reused); if it still runs (an earlier `hsa_init` keeps it), preemption
/// goes on.
///
/// # Safety
///
/// `real` is `None` or `hsa_shut_down`.
pub(crate) unsafe fn shut_down(real: Option<ShutDownFn>) -> hsa_status_t {
    let Some(real) = real else { return hsa_sys::hsa::HSA_STATUS_ERROR };
    let g = global();
    let mine = !is_forked_child() && !g.passthrough();
    // HIP shuts the runtime down from a static destructor, after libxhsa's exit summary: the
    // logger's thread-local state may be gone then, so nothing is logged once the process exits.
    let can_log = !super::exiting();
    let say = |errors: Vec<String>| {
        if can_log {
            for e in errors {
                tracing::error!("xhsa: {e}");
            }
        }
    };
    if mine {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for (_, gpu) in g.gpus.iter() {
                if let Some(p) = gpu.preempt.get() {
                    say(p.hold_for_shutdown(true));
                }
            }
        }));
    }
    // The completion waiter sleeps in KFD on the events of signals the runtime may destroy now
    // (it does nothing in a forked child).
    let r = rocr();
    if r.is_some() {
        let _ = std::panic::catch_unwind(|| inside(super::completions::stop));
    }
    // SAFETY: ROCr's hsa_shut_down, no arguments.
    let status = inside(|| unsafe { real() });
    // Whether that was the process's last `hsa_shut_down`.
    let down = r.and_then(|r| r.initialized()).is_none_or(|up| !up);
    if let Some(r) = r {
        let _ = std::panic::catch_unwind(|| inside(|| super::completions::resume(r, down)));
    }
    if mine {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut retired = false;
            for (_, gpu) in g.gpus.iter() {
                if let Some(p) = gpu.preempt.get() {
                    if down {
                        let (errors, first) = p.retire();
                        say(errors);
                        retired |= first;
                    } else {
                        say(p.hold_for_shutdown(false));
                    }
                }
            }
            if down {
                super::rocr::forget_runtime();
                super::origin::forget_kernels();
            }
            if retired && can_log {
                tracing::info!("xhsa: the runtime shut down: preemption of its queues stops (a runtime started again is scheduled at level 1)");
            }
        }));
    }
    status
}
