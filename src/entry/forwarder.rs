//! The forwarder: libxhsa's own thread that runs the forwarding passes an application thread
//! leaves behind. A thread that lets go of a GPU's scheduler runs the passes other threads asked
//! for meanwhile, but an application thread runs at most [`PASSES_PER_CALL`] per call (its own
//! and one more): more would make its doorbell pay for other threads' work without bound. What
//! is still asked for then is handed to this thread, woken through a futex (never waiting on a
//! lock), which runs it. It also makes the passthrough whitelist's decisions about kernel
//! objects the submission path met for the first time (ROCr's loader is asked here, never there).
//!
//! What it is not: a scheduler of its own. It runs the same passes, under the same lock: the
//! work itself is the one [`set_work`] gave it (the edge's root gives
//! `queues::forwarded_work` at start-up), so that this module depends on nothing that wakes it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use xhsa_board::futex::{futex_wait, futex_wake};

use super::global;

/// Passes an application thread runs in one call: its own and one more.
pub(crate) const PASSES_PER_CALL: u64 = 2;

/// Bumped by every hand-off; the forwarder sleeps on it.
static WORD: AtomicU32 = AtomicU32::new(0);
static STARTED: AtomicBool = AtomicBool::new(false);
/// The submission path met a kernel object whose passthrough decision is not made yet.
pub(crate) static KERNELS_ASKED: AtomicBool = AtomicBool::new(false);
/// The most passes one call ran (for the exit summary and the tests).
pub(crate) static MOST_PASSES_PER_CALL: AtomicU64 = AtomicU64::new(0);
/// What the forwarder does when woken; its argument is whether kernel decisions were asked for.
static WORK: OnceLock<fn(bool)> = OnceLock::new();

/// Gives the forwarder its work (once, before anything can wake it; later calls are ignored).
pub(crate) fn set_work(work: fn(bool)) {
    let _ = WORK.set(work);
}

/// Hands the passes still wanted on GPU `gpu` to the forwarder (started on first use). Never
/// blocks.
pub(crate) fn hand_off(gpu: usize) {
    let Some(g) = global().gpus.get(gpu) else { return };
    g.handed_off.store(true, Ordering::SeqCst);
    let _ = wake();
}

/// Wakes the forwarder (started on first use); `false` if it could not be started. Never
/// blocks (but for starting the thread, once).
pub(crate) fn wake() -> bool {
    if !STARTED.swap(true, Ordering::SeqCst) {
        let started = std::thread::Builder::new().name("xhsa-forwarder".into()).spawn(run);
        if started.is_err() {
            STARTED.store(false, Ordering::SeqCst);
            tracing::error!("xhsa: the forwarder thread could not be started; passes left behind run at the next doorbell or completion");
            return false;
        }
    }
    WORD.fetch_add(1, Ordering::SeqCst);
    futex_wake(&WORD);
    true
}

fn run() {
    loop {
        let seen = WORD.load(Ordering::SeqCst);
        let asked = KERNELS_ASKED.swap(false, Ordering::SeqCst);
        if let Some(work) = WORK.get() {
            let _ = std::panic::catch_unwind(|| work(asked));
        }
        futex_wait(&WORD, seen, None);
    }
}
