//! What the packet processor needs from a hardware scheduler (priorities and CU masks are set
//! by KFD requests on the scheduler's owner, not through the packet processor): the local [`Hws`] when the
//! device lives in this process (tests), or the shared device's scheduler in another process
//! (`crate::shared::client::RemoteScheduler`), reached through shared memory.

use super::{Completion, Hws, KernelJob, QueueKey};

pub trait Scheduler: Send {
    fn add_queue(&mut self, key: QueueKey, priority: u8);
    fn remove_queue(&mut self, key: QueueKey);
    fn set_runnable(&mut self, key: QueueKey, runnable: bool);
    /// Queues a kernel whose packet was fetched at device time `now`.
    fn submit(&mut self, key: QueueKey, job: KernelJob, now: u64);
    /// The next group of completions due at or before `now`, with their time.
    fn step(&mut self, now: u64) -> Option<(u64, Vec<Completion>)>;
    fn sync(&mut self, now: u64);
    /// When completions are next due without any further submission, if this scheduler knows.
    fn next_event(&self) -> Option<u64>;
}

impl Scheduler for Hws {
    fn add_queue(&mut self, key: QueueKey, priority: u8) {
        Hws::add_queue(self, key, priority)
    }
    fn remove_queue(&mut self, key: QueueKey) {
        Hws::remove_queue(self, key);
    }
    fn set_runnable(&mut self, key: QueueKey, runnable: bool) {
        Hws::set_runnable(self, key, runnable)
    }
    fn submit(&mut self, key: QueueKey, job: KernelJob, now: u64) {
        Hws::submit(self, key, job, now)
    }
    fn step(&mut self, now: u64) -> Option<(u64, Vec<Completion>)> {
        Hws::step(self, now)
    }
    fn sync(&mut self, now: u64) {
        Hws::sync(self, now)
    }
    fn next_event(&self) -> Option<u64> {
        Hws::next_event(self)
    }
}
