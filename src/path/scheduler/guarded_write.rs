//! Writing into reserved hardware slots, failure-safe: what was not written becomes harmless
//! no-op barriers (the last one the tracking barrier) and goes back to the queue, in order.

use super::*;
use crate::path::aql_ring::{write_reserved, QueueMemory};
use crate::path::packet::Packet;
use crate::path::shadow_queue::HwQueue;
use crate::settings::fault::{FaultPlan, Point};
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use xhsa_model::ids::QueueId;

/// How a write into reserved hardware slots ended ([`write_guarded`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Written {
    /// The leading application packets written as intended.
    pub(super) packets: usize,
    /// A tracking barrier stands in the last reserved slot (the one asked for, or a filler): the
    /// caller counts it issued.
    pub(super) barrier: bool,
    /// Writing stopped early or the doorbell failed: the caller puts the packets after
    /// `packets` back, in order, and degrades the queue.
    pub(super) failed: bool,
}

/// Writes `packets`, then a tracking barrier on `signal` if `barrier`, into the hardware slots
/// of `q` reserved from `first` (one each; body first, header last), and rings its doorbell
/// once.
///
/// Failure-safe: if anything panics once the slots are reserved (or `forward_after_reserve`
/// injects that, after half the packets), every reserved slot still ends up holding something
/// the packet processor can run — its intended packet, or, from the first one not written on,
/// a no-op barrier ([`Packet::no_op`]), the last slot a tracking barrier on `signal` so that its
/// completion runs the next pass — and the doorbell is rung. A slot whose header was not
/// stored holds nothing published, and a filler overwrites it whole. The application's packets
/// not written are the caller's to put back.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_guarded(
    faults: &FaultPlan,
    mem: &dyn QueueMemory,
    hw: &dyn Hardware,
    q: &HwQueue,
    signal: u64,
    first: u64,
    packets: &[Packet],
    barrier: bool,
) -> Written {
    let slots = packets.len() + usize::from(barrier);
    if slots == 0 {
        return Written { packets: 0, barrier: false, failed: false };
    }
    let tracking = Packet::tracking_barrier(signal);
    let fail_at = (!packets.is_empty()
        && faults.hit_with(Point::ForwardAfterReserve, packets.len()))
    .then_some(packets.len() / 2);
    let done = Cell::new(0usize);
    let whole = catch_unwind(AssertUnwindSafe(|| {
        for i in 0..slots {
            if fail_at == Some(i) {
                // A panic without the panic hook's message: the test knob stays quiet.
                resume_unwind(Box::new(
                    "xhsa: failure injected after the reserve (XHSA_FAULT_INJECT)",
                ));
            }
            let p = packets.get(i).unwrap_or(&tracking);
            write_reserved(mem, &q.ring, first + i as u64, std::slice::from_ref(p));
            done.set(i + 1);
        }
    }))
    .is_ok();
    let done = done.get();
    let mut barrier_written = barrier && done == slots;
    for i in done..slots {
        let last = i + 1 == slots;
        let p = if last { tracking } else { Packet::no_op() };
        let ok = catch_unwind(AssertUnwindSafe(|| {
            write_reserved(mem, &q.ring, first + i as u64, std::slice::from_ref(&p))
        }))
        .is_ok();
        if last {
            barrier_written = ok;
        }
        if !ok {
            tracing::error!(target: LOG_TARGET, "xhsa: hardware queue {:#x}: slot {} could not be filled either; its packet processor will stop there", q.queue, first + i as u64);
        }
    }
    let rang = catch_unwind(AssertUnwindSafe(|| hw.ring(q, first + slots as u64 - 1))).is_ok();
    Written { packets: done.min(packets.len()), barrier: barrier_written, failed: !whole || !rang }
}

/// Logs, once per process, a failed write into reserved slots of a queue already passing
/// through (`Direct`, `Closing`), where there is nothing further to degrade.
pub(super) fn log_write_failure(id: QueueId, written: usize, of: usize) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::error!(target: LOG_TARGET, "xhsa: {id}: writing into the hardware ring failed after its slots were reserved ({written} of {of} packets written; no-op barriers fill the other slots); the rest is retried after them");
    }
}
