//! What the scheduler is given by the edge: the GPU's board ([`Board`]), the hardware through
//! ROCr ([`Hardware`]), the passthrough whitelist's kernel filter ([`KernelFilter`]) and a
//! callback for changes ([`Notifier`]).

use crate::path::shadow_queue::HwQueue;
use std::sync::Arc;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::Priority;
use xhsa_model::stats::QueueStats;

/// The cross-process board as the scheduler uses it ([`crate::board::link::BoardLink`] in a
/// process; a fake in tests): the queues of this process publish there, and the other
/// processes' work is the *external* contention of the window.
pub trait Board: Send + Sync + std::fmt::Debug {
    /// Gives a queue a slot in CU partition `partition`; false if it could not (the queue is
    /// then invisible to others).
    fn join(&self, queue: QueueId, priority: Priority, partition: PartitionId) -> bool;
    /// Publishes a queue's counters.
    fn publish(&self, queue: QueueId, stats: &QueueStats);
    /// Frees a queue's slot.
    fn leave(&self, queue: QueueId);
    /// The highest priority with work in other processes, by CU partition.
    fn contention(&self) -> ExternalWork;
    /// Whether queues of other processes are on the board at all (they may then be held back
    /// by this process's work, and must learn promptly when it ends).
    fn others_present(&self) -> bool;
}

/// Which dispatched kernels belong to a passthrough library (by kernel object): their
/// packets, and everything before them in their queue, reach the hardware unthrottled. `None`:
/// not known yet (being looked up off the submission path); the packet and those after it in its
/// queue wait in the shadow ring, and the edge runs a pass once it is known.
#[derive(Clone)]
pub struct KernelFilter(pub Arc<dyn Fn(u64) -> Option<bool> + Send + Sync>);

impl std::fmt::Debug for KernelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KernelFilter")
    }
}

/// What a scheduler calls when a queue's priority or work changed ([`Scheduler::set_notifier`]).
#[derive(Clone)]
pub struct Notifier(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notifier")
    }
}

/// What libxhsa does through the runtime for a hardware queue.
pub trait Hardware {
    /// Reserves `n` slots (ROCr's `add_write_index`); returns the first index.
    fn reserve(&self, hw: &HwQueue, n: u64) -> u64;
    /// The hardware queue's read index.
    fn read_index(&self, hw: &HwQueue) -> u64;
    /// The hardware queue's write index.
    fn write_index(&self, hw: &HwQueue) -> u64;
    /// Rings the hardware doorbell with the index of the last packet written.
    fn ring(&self, hw: &HwQueue, index: u64);
    /// Asks for [`Scheduler::on_tracking`] of `queue` once `signal`'s value is below `below`;
    /// false when the runtime refused.
    fn arm(&self, queue: QueueId, signal: u64, below: i64) -> bool;
    /// The current value of a tracking signal (a plain load: no waiting).
    fn signal_value(&self, signal: u64) -> i64;
}
