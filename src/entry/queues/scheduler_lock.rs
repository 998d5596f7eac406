//! Running work on a GPU's scheduler from an intercepted call: blocking for its lock, or (a
//! doorbell's forwarding pass) never waiting, leaving the pass to the thread that holds it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use hsa_sys::hsa::hsa_signal_value_t;
use xhsa_model::ids::QueueId;

use crate::entry::clock::now_ns;
use crate::entry::memory::ProcessMemory;
use crate::entry::rocr::{rocr, RocrHardware};
use crate::entry::{global, inside};
use crate::path::scheduler::Scheduler;
use crate::path::shadow_queue::ShadowQueue;
use crate::path::window::Nanos;

use super::registry::MEMORY;

/// Runs `f` on the scheduler of GPU `gpu` (blocking for its lock, or only if it is free when
/// `wait` is false), inside an intercepted call. A panic in `f` degrades every queue of that
/// GPU to passthrough, logged once. `None` when `f` did not run.
pub(super) fn run<R>(
    gpu: usize,
    wait: bool,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let g = global();
    let gpu = g.gpus.get(gpu)?;
    // SAFETY: the scheduler holds only hardware queues and signals libxhsa created and destroys
    // them only after the scheduler forgot them (tracking signals through `completions::retire`).
    let hw = unsafe { RocrHardware::new(rocr()?, tracking_done) };
    inside(|| {
        let mut s = if wait {
            gpu.sched.lock().unwrap_or_else(|p| p.into_inner())
        } else {
            match gpu.sched.try_lock() {
                Ok(s) => s,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            }
        };
        let now = now_ns();
        match catch_unwind(AssertUnwindSafe(|| f(&mut s, &MEMORY, &hw, now))) {
            Ok(r) => {
                gpu.stalled.store(s.stalled(), Ordering::Relaxed);
                gpu.untracked.store(s.has_untracked(), Ordering::Relaxed);
                if let Some(t) = &gpu.trace {
                    trace_queues(t, &s, now);
                }
                Some(r)
            }
            Err(_) => {
                if !g.degraded.swap(true, Ordering::Relaxed) {
                    tracing::error!("xhsa: internal error in the scheduler; every queue passes through unscheduled from now on");
                }
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    s.degrade_all("libxhsa failed internally", &MEMORY, &hw)
                }));
                None
            }
        }
    })
}

/// `XHSA_TRACE`: records what the scheduler's use changed on the GPU's queue tracks (under the
/// scheduler's lock, so the tracer's own lock is free). A failure in the tracer turns tracing
/// off, logged once; the scheduler is not affected.
pub(super) fn trace_queues(
    t: &Mutex<crate::trace::queue_track::QueueTracer>,
    s: &Scheduler,
    now: Nanos,
) {
    let Ok(mut t) = t.try_lock() else { return };
    if !t.recorder().sink().is_on() {
        return;
    }
    let views = s.queue_ids().into_iter().filter_map(|id| {
        let direct = s.queue(id).is_some_and(ShadowQueue::is_direct);
        Some(crate::trace::queue_track::QueueView { id, stats: s.stats(id, now)?, direct })
    });
    if catch_unwind(AssertUnwindSafe(|| t.observe(now, views))).is_err() {
        t.recorder().sink().disable();
        tracing::error!("xhsa: XHSA_TRACE: the tracer failed internally; nothing more is recorded (the file is closed at exit)");
    }
}

/// Marks the next priority change of queue `id` on the trace as the application's.
pub(super) fn trace_application_priority(id: u64) {
    if let Some(t) = global().gpus.of_queue(id).and_then(|(_, g)| g.trace.as_ref()) {
        if let Ok(mut t) = t.try_lock() {
            t.application_priority(QueueId(id));
        }
    }
}

/// Marks the next priority change of queue `id` on the trace as an operator's. Called under
/// the scheduler's lock (as [`trace_application_priority`]), where the tracer's lock is free.
pub(super) fn trace_operator_priority(id: u64) {
    if let Some(t) = global().gpus.of_queue(id).and_then(|(_, g)| g.trace.as_ref()) {
        if let Ok(mut t) = t.try_lock() {
            t.operator_priority(QueueId(id));
        }
    }
}

/// Runs `f` on the scheduler of GPU `gpu`, waiting for it; then the passes other threads asked
/// for meanwhile.
pub(super) fn with_gpu<R>(
    gpu: usize,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let r = run(gpu, true, f);
    passes_wanted(gpu);
    r
}

/// Runs `f` on the scheduler of queue `id`'s GPU.
pub(super) fn with_queue<R>(
    id: u64,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let (gpu, _) = global().gpus.of_queue(id)?;
    with_gpu(gpu, f)
}

/// A doorbell's forwarding pass on GPU `gpu`, never waiting: runs it if the scheduler is free,
/// else leaves it to the thread holding the scheduler (libxhsa's completion waiter, the watcher or
/// another application thread), which runs it before letting go ([`passes_wanted`]). The
/// application's submission path thus never waits on a lock another thread holds.
pub(super) fn doorbell_pass(gpu: usize) {
    let Some(g) = global().gpus.get(gpu) else { return };
    g.pass_wanted.store(true, Ordering::SeqCst);
    passes_wanted(gpu);
}

/// Runs the passes asked for while the scheduler of `gpu` was busy, as long as it is free, at
/// most [`PASSES_PER_CALL`](crate::entry::forwarder::PASSES_PER_CALL) of them; passes still wanted
/// after that go to the forwarder thread.
pub(super) fn passes_wanted(gpu: usize) {
    passes(gpu, Some(crate::entry::forwarder::PASSES_PER_CALL));
}

/// The forwarder's: runs the passes asked for as long as the scheduler is free.
pub(crate) fn passes_until_done(gpu: usize) {
    passes(gpu, None);
}

pub(super) fn passes(gpu: usize, limit: Option<u64>) {
    let Some(g) = global().gpus.get(gpu) else { return };
    let mut ran = 0u64;
    std::sync::atomic::fence(Ordering::SeqCst);
    while g.pass_wanted.load(Ordering::SeqCst) {
        if limit.is_some_and(|l| ran >= l) {
            crate::entry::forwarder::hand_off(gpu);
            break;
        }
        let done = run(gpu, false, |s, m, hw, now| {
            g.pass_wanted.store(false, Ordering::SeqCst);
            s.pass(m, hw, now)
        });
        if done.is_none() {
            // Busy: the holder sees the flag after it lets go (or rocr() is missing).
            break;
        }
        ran += 1;
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    if limit.is_some() {
        crate::entry::forwarder::MOST_PASSES_PER_CALL.fetch_max(ran, Ordering::Relaxed);
    }
}

/// The forwarder thread's work ([`crate::entry::forwarder::set_work`]): the passthrough
/// decisions about kernel objects asked for (`asked`), then the passes handed off, and on every
/// GPU a pass for the packets that waited for a decision now made.
pub(crate) fn forwarded_work(asked: bool) {
    if asked {
        let _ = catch_unwind(crate::entry::origin::decide_asked);
    }
    for (gpu, g) in global().gpus.iter() {
        let handed_off = g.handed_off.swap(false, Ordering::SeqCst);
        if asked {
            // Packets waiting in their shadow rings for a decision now made: a pass takes
            // them (or asks again for what is still unknown).
            g.pass_wanted.store(true, Ordering::SeqCst);
        }
        if asked || handed_off {
            let _ = catch_unwind(|| passes_until_done(gpu));
        }
    }
}

/// The completion handler of tracking signals (run by libxhsa's completion waiter): the
/// tracking signal of `id` fell to `value`.
fn tracking_done(id: QueueId, value: hsa_signal_value_t) {
    let _ = catch_unwind(|| with_queue(id.0, |s, m, hw, now| s.on_tracking(id, value, m, hw, now)));
}
