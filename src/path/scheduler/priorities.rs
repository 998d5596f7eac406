//! Each queue's priority: what its application and the config asked for, an operator's
//! override (`xhsactl`), the one that applies in the rings, and pausing.

use super::*;
use crate::path::shadow_queue::Mode;
use crate::path::window::Nanos;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::{Level, Priority};

impl Scheduler {
    /// The priority the queue's application and the config ask for now (the application set a
    /// stream priority); the effective priority is that, unless an operator's level overrides
    /// it ([`Scheduler::set_override`]).
    pub fn set_priority(&mut self, id: QueueId, priority: Priority) {
        if !self.queues.contains_key(&id) {
            return;
        }
        self.requested.insert(id, priority);
        self.apply_priority(id);
    }

    /// An operator's level for the queue (`None`: back to the requested priority); the stream
    /// priority the application set is kept. Returns the new effective priority.
    pub fn set_override(&mut self, id: QueueId, level: Option<Level>) -> Option<Priority> {
        if !self.queues.contains_key(&id) {
            return None;
        }
        match level {
            Some(l) => self.overrides.insert(id, l),
            None => self.overrides.remove(&id),
        };
        self.apply_priority(id)
    }

    /// The effective priority of `id`: the requested one, at the operator's level if set.
    pub fn effective_priority(&self, id: QueueId) -> Option<Priority> {
        let requested = *self.requested.get(&id)?;
        Some(match self.overrides.get(&id) {
            Some(&level) => Priority::at_level(level).with_stream(requested.stream()),
            None => requested,
        })
    }

    /// The priority the application and the config asked for.
    pub fn requested_priority(&self, id: QueueId) -> Option<Priority> {
        self.requested.get(&id).copied()
    }

    pub(super) fn apply_priority(&mut self, id: QueueId) -> Option<Priority> {
        let priority = self.effective_priority(id)?;
        let mut moved = None;
        if let Some(q) = self.queues.get_mut(&id) {
            q.stream = priority.stream();
            if q.mode == Mode::Scheduled {
                moved = self.part.set_priority(id, priority).ok().flatten();
            }
        }
        if let Some(to) = moved {
            // The other side of the split (a side of a split always has its mask).
            self.rehomed(id, priority, to, None);
        }
        if let (Some(board), Some(stats)) = (self.board.clone(), self.stats(id, 0)) {
            board.publish(id, &stats);
        }
        if let (Some(stats), Some(old)) = (self.stats(id, 0), self.published.get_mut(&id)) {
            old.priority = stats.priority;
        }
        self.notify();
        Some(priority)
    }

    /// The hardware queues whose CU partition changed since the last call, with the mask each must
    /// get now (`hsa_amd_queue_cu_set_mask`, outside the scheduler's lock).
    pub fn take_remasks(&mut self) -> Vec<(u64, CuMask)> {
        std::mem::take(&mut self.remasks)
    }

    /// Pauses the queue (an operator's `xhsactl pause`): its packets are held in libxhsa and its
    /// work holds no other queue back; or lets it go on. Destroying a paused queue still drains
    /// it.
    pub fn set_paused(&mut self, id: QueueId, paused: bool, now: Nanos) {
        if self.part.set_paused(id, paused).is_ok() {
            if let (Some(board), Some(stats)) = (self.board.clone(), self.stats(id, now)) {
                board.publish(id, &stats);
            }
            self.notify();
        }
    }

    /// Holds the queue for higher work of another process (nothing of it is forwarded) or lets
    /// it go (the caller runs a pass then); its counters are published.
    pub fn set_held(&mut self, id: QueueId, held: bool, now: Nanos) {
        if self.part.set_held(id, held).is_ok() {
            if let (Some(board), Some(stats)) = (self.board.clone(), self.stats(id, now)) {
                board.publish(id, &stats);
            }
        }
    }

    /// Whether the queue is paused.
    pub fn is_paused(&self, id: QueueId) -> bool {
        self.part.is_paused(id).unwrap_or(false)
    }

    /// The queue's effective priority, while it is scheduled.
    pub fn priority(&self, id: QueueId) -> Option<Priority> {
        self.part.priority(id)
    }
}
