//! A GPU's board and preemption watcher, attached at its first queue; the controllers' requests
//! (`xhsactl`) carried out; each shadow's hardware queue made preemptable.

use std::sync::atomic::Ordering;

use xhsa_model::ids::QueueId;

use crate::entry::clock::now_ns;
use crate::entry::rocr::rocr;
use crate::entry::{global, Global};
use crate::path::aql_ring::AqlRing;

use super::registry::KFD_QUEUES;
use super::scheduler_lock::{trace_operator_priority, with_gpu};

/// Sets up the passthrough whitelist by code object on GPU `gpu`'s scheduler (when it names
/// any library).
pub(super) fn init_kernel_filter(gpu: usize) {
    let g = global();
    if g.settings.passthrough.is_empty() {
        return;
    }
    let filter = crate::path::scheduler::KernelFilter(std::sync::Arc::new(
        crate::entry::origin::kernel_decision,
    ));
    with_gpu(gpu, |s, _, _, _| s.set_passthrough_kernels(filter));
}

/// Attaches the board of GPU `gpu` (KFD node `node`) to its scheduler and starts its
/// preemption watcher, once per GPU (see docs/board.md); the whitelist by code object is set up
/// there too. Without a board the GPU's scheduler schedules this process's queues only, after
/// one log line saying why.
pub(super) fn attach_board(g: &Global, gpu: usize, node: Option<u32>) {
    let Some(this) = g.gpus.get(gpu) else { return };
    if this.board_tried.swap(true, Ordering::AcqRel) {
        return;
    }
    init_kernel_filter(gpu);
    let Some(node) = node else {
        tracing::warn!("xhsa: the GPU's KFD node id is unknown, so no board: only this process's queues are scheduled against each other");
        return;
    };
    let place = match crate::board::link::place_from_settings(&g.settings) {
        Ok(place) => place,
        Err(e) => {
            tracing::error!(
                "xhsa: {e}; no board: only this process's queues are scheduled against each other"
            );
            return;
        }
    };
    match crate::board::link::BoardLink::open(&place, node) {
        Ok(link) => {
            tracing::info!("xhsa: board {}", link.path().display());
            let link = std::sync::Arc::new(link);
            let waker = link.clone();
            with_gpu(gpu, |s, _, _, _| {
                s.attach_board(link.clone());
                s.set_notifier(crate::path::scheduler::Notifier(std::sync::Arc::new(move || {
                    waker.notify()
                })));
            });
            start_preemption(g, gpu, link);
        }
        Err(e) => tracing::warn!(
            "xhsa: {e}; no board: only this process's queues are scheduled against each other"
        ),
    }
}

/// Starts the process's watcher over the board of GPU `gpu`: preemption when it is on, through
/// the runtime's KFD descriptor when the interposer saw it, else through one of libxhsa's own
/// ([`crate::entry::unseen_kfd`]); and in every case the housekeeping and the controllers' requests
/// (`xhsactl`).
pub(super) fn start_preemption(
    g: &Global,
    gpu: usize,
    link: std::sync::Arc<crate::board::link::BoardLink>,
) {
    let Some(this) = g.gpus.get(gpu) else { return };
    let mut settings = g.preempt_settings;
    let port: Box<dyn crate::preempt::KfdPort> =
        if settings.mode == crate::preempt::PreemptMode::Off {
            tracing::info!("xhsa: XHSA_PREEMPT=off: level 1 only");
            Box::new(crate::preempt::mechanism::NoKfd)
        } else if let Some(port) = g
            .seen
            .kfd_fd()
            .map(|fd| {
                // SAFETY: `fd` is the descriptor the runtime's CREATE_QUEUE ioctl was made on, open while
                // its queues exist; libxhsa never closes it.
                Box::new(unsafe { crate::entry::kfd_port::RuntimeKfd::borrow(fd) })
                    as Box<dyn crate::preempt::KfdPort>
            })
            .or_else(crate::entry::unseen_kfd::port)
        {
            match &g.trace {
                // XHSA_TRACE: the KFD calls and each queue's time off the GPU on the trace.
                Some(sink) => Box::new(crate::trace::kfd::TracedKfd::new(
                    port,
                    sink.recorder(),
                    gpu.min(u16::MAX as usize) as u16,
                    Box::new(|kfd_id| KFD_QUEUES.get(u64::from(kfd_id) + 1).map(QueueId)),
                )),
                None => port,
            }
        } else {
            settings.mode = crate::preempt::PreemptMode::Off;
            Box::new(crate::preempt::mechanism::NoKfd)
        };
    let pre =
        std::sync::Arc::new(crate::preempt::Preemption::new(settings, port, Box::new(now_ns)));
    pre.set_sharing(g.settings.policy);
    pre.set_resplit(std::sync::Arc::new(move |cus| resplit(gpu, cus)));
    if let Some(setup) = this.sizing.get() {
        pre.set_sizing(*setup);
    }
    pre.set_control(std::sync::Arc::new(move |q, c| control(gpu, q, c)));
    pre.set_horizon(std::sync::Arc::new(move |ns| {
        with_gpu(gpu, |s, _, _, _| s.set_horizon(ns));
    }));
    pre.set_hold(std::sync::Arc::new(move |queues, held| {
        // On the watcher's thread, which may wait for the scheduler (never an application's).
        with_gpu(gpu, |s, m, hw, now| {
            for q in queues {
                s.set_held(*q, held, now);
            }
            if !held {
                s.pass(m, hw, now);
            }
        })
        .is_some()
    }));
    pre.set_track_untracked(std::sync::Arc::new(move || {
        // On the watcher's thread, which may wait for the scheduler (never an application's).
        if global().gpus.get(gpu).is_some_and(|g| g.untracked.load(Ordering::Relaxed)) {
            tracing::debug!(target: "xhsa::preempt", "xhsa: GPU {gpu}: tracking barriers after untracked packets, to confirm in-flight counts");
            super::scheduler_lock::run(gpu, true, |s, m, hw, now| s.track_now(m, hw, now));
        }
    }));
    if this.preempt.set(pre.clone()).is_ok()
        && crate::preempt::watcher::spawn(pre, link)
        && settings.mode != crate::preempt::PreemptMode::Off
    {
        tracing::info!(
            "xhsa: preemption {} (starvation bound {} ms, budget {} %)",
            settings.mode,
            settings.max_preempted_ns / 1_000_000,
            settings.budget_pct
        );
    }
}

/// Moves this process's queues of GPU `gpu` to the live split of `cus` reserved CUs (0: none),
/// on the watcher's thread; their hardware queues get their new masks outside the scheduler's
/// lock.
fn resplit(gpu: usize, cus: u32) {
    let g = global();
    let Some(setup) = g.gpus.get(gpu).and_then(|x| x.sizing.get()).copied() else { return };
    let split = (cus > 0)
        .then(|| {
            xhsa_model::partition::Split::plan(setup.reserve.sized(cus), setup.cu_count, setup.xccs)
                .ok()
        })
        .flatten();
    let remasks = with_gpu(gpu, |s, _, _, _| {
        let moved = s.resplit(split);
        (moved, s.take_remasks())
    });
    if let Some((moved, remasks)) = remasks {
        tracing::info!(
            "xhsa: GPU {gpu}: {moved} queue(s) moved to the live split of {cus} reserved CUs"
        );
        super::shadow::set_partition_masks(remasks);
    }
}

/// Carries out a controller's request (`xhsactl`) for queue `q` of GPU `gpu`, on the watcher's
/// thread; returns the `ACK_*` status and its detail.
pub(super) fn control(gpu: usize, q: QueueId, c: xhsa_board::layout::Control) -> (u32, i32) {
    use xhsa_board::layout::{
        ACK_ABOVE_CAP, ACK_APPLIED, ACK_BAD_LEVEL, ACK_UNKNOWN_OP, OP_CLEAR_PRIORITY, OP_PAUSE,
        OP_RESUME, OP_SET_POLICY, OP_SET_PRIORITY,
    };
    let g = global();
    match c.op {
        OP_SET_PRIORITY | OP_CLEAR_PRIORITY => {
            let level = if c.op == OP_SET_PRIORITY {
                let Some(level) = xhsa_model::priority::Level::new(i64::from(c.level)) else {
                    return (ACK_BAD_LEVEL, 0);
                };
                if let Err(cap) = g.settings.control_allows(c.uid, level) {
                    tracing::warn!("xhsa: queue {q}: uid {} asked for level {}, above control_max_level {}: refused", c.uid, c.level, cap.get());
                    return (ACK_ABOVE_CAP, cap.get());
                }
                Some(level)
            } else {
                None
            };
            // Marked under the scheduler's lock, just before the change: the tracer observes
            // after every use of the scheduler, so a mark made before taking the lock could be
            // used up by another thread's observation and the change put down as libxhsa's.
            let changed = with_gpu(gpu, |s, _, _, _| {
                trace_operator_priority(q.0);
                let changed = s.set_override(q, level).map(|p| (p, s.queue(q).map(|x| x.hw.queue)));
                (changed, s.take_remasks())
            });
            let changed = changed.and_then(|(changed, remasks)| {
                super::shadow::set_partition_masks(remasks);
                changed
            });
            match changed {
                Some((p, hw)) => {
                    if let (Some(r), Some(hw)) = (rocr(), hw) {
                        super::calls::set_hw_priority(r, hw, p.hardware());
                    }
                    tracing::info!("xhsa: queue {q}: priority {p} set by uid {}", c.uid);
                    (ACK_APPLIED, p.level().get())
                }
                _ => (ACK_UNKNOWN_OP, 0),
            }
        }
        OP_PAUSE | OP_RESUME => {
            let paused = c.op == OP_PAUSE;
            let done = with_gpu(gpu, |s, m, hw, now| {
                s.set_paused(q, paused, now);
                if !paused {
                    s.pass(m, hw, now);
                }
            });
            tracing::info!(
                "xhsa: queue {q}: {} by uid {}",
                if paused { "paused" } else { "resumed" },
                c.uid
            );
            if done.is_some() {
                (ACK_APPLIED, 0)
            } else {
                (ACK_UNKNOWN_OP, 0)
            }
        }
        OP_SET_POLICY => {
            let Some(policy) =
                u16::try_from(c.level).ok().and_then(xhsa_model::sharing::Sharing::from_code)
            else {
                return (ACK_BAD_LEVEL, 0);
            };
            // The process's policy: every GPU's watcher.
            for (_, this) in g.gpus.iter() {
                if let Some(pre) = this.preempt.get() {
                    pre.set_sharing(policy);
                }
            }
            tracing::info!("xhsa: sharing policy {policy} set by uid {}", c.uid);
            (ACK_APPLIED, c.level)
        }
        _ => (ACK_UNKNOWN_OP, 0),
    }
}

/// Lets the preemption watcher take the hardware queue of `id` off the GPU when it must.
pub(super) fn register_preemptable(g: &Global, gpu: usize, id: u64, hw_ring: &AqlRing) {
    let Some(pre) = g.gpus.get(gpu).and_then(|x| x.preempt.get()) else { return };
    let Some(k) = g.seen.kfd_queue_at(hw_ring.base) else {
        if !crate::entry::unseen_kfd::register(pre, id, hw_ring.base) {
            tracing::debug!(
                "xhsa: queue {id}: no KFD queue seen at ring {:#x}; it cannot be preempted",
                hw_ring.base
            );
        }
        return;
    };
    if let (Some(kfd_id), Some(ring_bytes), Some(priority), Some(percentage)) =
        (k.id(), k.ring_bytes, k.priority, k.percentage)
    {
        if g.trace.is_some() {
            // KFD reuses the ids of destroyed queues: the newest owner replaces the old entry.
            KFD_QUEUES.insert(u64::from(kfd_id) + 1, id);
        }
        pre.add(crate::preempt::Target {
            queue: QueueId(id),
            kfd_id,
            ring_base: hw_ring.base,
            ring_bytes,
            priority,
            percentage,
        });
    }
}
