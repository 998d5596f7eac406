//! The end of a queue's scheduling: degrading to passthrough on an internal failure,
//! inactivation and failure, and destroy (close, drain in steps, remove).

use super::*;
use crate::path::aql_ring::{intake, QueueMemory};
use crate::path::packet::Packet;
use crate::path::shadow_queue::{Mode, ShadowQueue};
use crate::path::window::Nanos;
use xhsa_model::ids::QueueId;

impl Scheduler {
    /// Takes the queue out of the rings after an internal failure: `drawn` (packets already
    /// taken out of the rings for forwarding, not written) and what the rings held go first,
    /// then the queue passes straight through. Logged once per queue.
    pub fn degrade(
        &mut self,
        id: QueueId,
        drawn: Vec<Packet>,
        why: &str,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
    ) {
        let Some(q) = self.queues.get_mut(&id) else { return };
        if q.mode != Mode::Scheduled {
            q.backlog.extend(drawn);
            return;
        }
        let pending = self.part.remove_queue(id).map(|r| r.pending).unwrap_or_default();
        q.backlog.extend(drawn);
        q.backlog.extend(pending);
        q.mode = Mode::Direct;
        self.degraded += 1;
        tracing::error!(target: LOG_TARGET, "xhsa: {id}: {why}; this queue passes through unscheduled from now on");
        if Self::direct_flush(q, &self.faults, mem, hw) {
            self.stalled = true;
        }
    }

    /// Moves every queue to `Direct` (after libxhsa itself failed).
    pub fn degrade_all(&mut self, why: &str, mem: &dyn QueueMemory, hw: &dyn Hardware) {
        for id in self.queue_ids() {
            self.degrade(id, Vec::new(), why, mem, hw);
        }
    }

    /// `hsa_queue_inactivate`: the queue stops taking doorbells; what it held is dropped (a real
    /// queue drops unprocessed packets on inactivation).
    pub fn inactivate(&mut self, id: QueueId) {
        self.stop(id, Mode::Inactive);
    }

    /// The hardware queue reported an error: it is dead; held packets are dropped like packets
    /// after a failing one on a real queue.
    pub fn fail(&mut self, id: QueueId) {
        if let Some(q) = self.queues.get_mut(&id) {
            q.failed = true;
        }
        self.stop(id, Mode::Failed);
    }

    pub(super) fn stop(&mut self, id: QueueId, mode: Mode) {
        let Some(q) = self.queues.get_mut(&id) else { return };
        match q.mode {
            Mode::Scheduled => {
                let _ = self.part.remove_queue(id);
            }
            Mode::Closing => return,
            _ => {}
        }
        q.backlog.clear();
        q.mode = mode;
    }

    /// `hsa_queue_destroy`, first step: takes what is left in the shadow ring and everything
    /// libxhsa holds for the queue into its backlog, in order, and marks it `Closing`. False for
    /// an unknown queue.
    pub fn close(&mut self, id: QueueId, mem: &dyn QueueMemory, now: Nanos) -> bool {
        // The rings' counters of the queue (throttle time, completions) outlive its ring.
        if let Some(st) = self.part.stats(id, now, &self.external.0) {
            self.closed.insert(id, st);
        }
        let Some(q) = self.queues.get_mut(&id) else { return false };
        match q.mode {
            Mode::Scheduled => {
                let rest = intake(mem, &q.shadow, usize::MAX);
                q.taken += rest.len() as u64;
                if let Ok(removed) = self.part.remove_queue(id) {
                    q.backlog.extend(removed.pending);
                }
                q.backlog.extend(rest);
                q.drain = true;
            }
            Mode::Direct => {
                let rest = intake(mem, &q.shadow, usize::MAX);
                q.taken += rest.len() as u64;
                q.backlog.extend(rest);
                q.drain = true;
            }
            Mode::Inactive | Mode::Failed => {
                q.backlog.clear();
                q.drain = false;
            }
            Mode::Closing => {}
        }
        q.mode = Mode::Closing;
        true
    }

    /// `hsa_queue_destroy`, repeated: forwards the backlog ignoring the window, as far as the
    /// hardware ring has room, and after the last packet a final tracking barrier.
    pub fn drain_step(&mut self, id: QueueId, mem: &dyn QueueMemory, hw: &dyn Hardware) -> Drain {
        let Some(q) = self.queues.get_mut(&id) else { return Drain::Done { wait_for: None } };
        if !q.drain || q.failed {
            q.backlog.clear();
            return Drain::Done { wait_for: None };
        }
        let free = Self::hw_free(q, hw) as usize;
        let all = q.backlog.len();
        let n = all.min(free.saturating_sub(1));
        let last_chunk = n == all;
        if n == 0 && !(last_chunk && free >= 1) {
            return Drain::NeedRoom;
        }
        let mut out: Vec<Packet> = q.backlog.drain(..n).collect();
        let first = hw.reserve(&q.hw, n as u64 + u64::from(last_chunk));
        let w =
            write_guarded(&self.faults, mem, hw, &q.hw, q.tracking.signal, first, &out, last_chunk);
        q.forwarded += w.packets as u64;
        if w.barrier {
            q.tracking.issue(None);
        }
        if w.failed {
            // What was not written goes first again; the next step retries after the fillers.
            log_write_failure(id, w.packets, n);
            for p in out.drain(w.packets..).rev() {
                q.backlog.push_front(p);
            }
            return Drain::NeedRoom;
        }
        if last_chunk {
            Drain::Done { wait_for: Some((q.tracking.signal, q.tracking.target())) }
        } else {
            Drain::NeedRoom
        }
    }

    /// Removes a queue (after its drain); its counters go into the totals.
    pub fn remove(&mut self, id: QueueId, now: Nanos) -> Option<ShadowQueue> {
        let q = self.queues.remove(&id)?;
        let closed = self.closed.remove(&id);
        let stats = self.part.stats(id, now, &self.external.0).or(closed);
        let _ = self.part.remove_queue(id);
        if let Some(b) = &self.board {
            b.leave(id);
        }
        self.published.remove(&id);
        self.requested.remove(&id);
        self.overrides.remove(&id);
        self.app_masks.remove(&id);
        self.notify();
        add_stats(&mut self.retired, &q, stats.as_ref());
        self.retired.held = 0;
        self.retired.in_flight = 0;
        Some(q)
    }
}
