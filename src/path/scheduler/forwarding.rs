//! The forwarding pass: packets from the shadow rings through the priority rings and the
//! window into the hardware rings, tracking barriers while completions matter, and the
//! completions they report.

use super::*;
use crate::path::aql_ring::{intake, intake_until, next_published, QueueMemory};
use crate::path::packet::Packet;
use crate::path::shadow_queue::{Mode, ShadowQueue};
use crate::path::window::{Nanos, Seq};
use crate::settings::fault::{FaultPlan, Point};
use std::collections::BTreeMap;
use xhsa_model::ids::QueueId;

impl Scheduler {
    pub(super) fn hw_free(q: &ShadowQueue, hw: &dyn Hardware) -> u64 {
        let used = hw.write_index(&q.hw).saturating_sub(hw.read_index(&q.hw));
        q.hw.ring.slots.saturating_sub(used)
    }

    /// A doorbell store on the shadow doorbell of `id`: one forwarding pass. False when the
    /// queue does not take doorbells (unknown, inactive, failed or closing).
    pub fn doorbell(
        &mut self,
        id: QueueId,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
        now: Nanos,
    ) -> bool {
        if !self.queues.get(&id).is_some_and(ShadowQueue::takes_doorbells) {
            return false;
        }
        self.pass(mem, hw, now);
        true
    }

    /// One forwarding pass over every queue; see the module doc.
    pub fn pass(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware, now: Nanos) {
        self.note_contention(now);
        self.pass_noted(mem, hw, now);
    }

    /// A pass once the busy periods' contention is noted for `now`.
    fn pass_noted(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware, now: Nanos) {
        let ids = self.queue_ids();
        self.stalled = false;
        self.reconcile(hw, now);
        // 1. Intake; Direct queues forward at once.
        for &id in &ids {
            let Some(q) = self.queues.get_mut(&id) else { continue };
            match q.mode {
                Mode::Direct => self.stalled |= Self::direct_flush(q, &self.faults, mem, hw),
                Mode::Scheduled => {
                    let held = self.part.pending(id).unwrap_or(0);
                    let room = (q.shadow.slots as usize).saturating_sub(held);
                    let filter = self.passthrough_kernels.clone();
                    let unknown = |p: &Packet| match (&filter, p.kernel_object()) {
                        (Some(f), Some(ko)) => (f.0)(ko).is_none(),
                        _ => false,
                    };
                    let taken = intake_until(mem, &q.shadow, room, &unknown);
                    q.taken += taken.len() as u64;
                    if let Some(o) = self.occupancy {
                        q.widths.count(&o, &taken);
                    }
                    for p in taken {
                        let passthrough = match (&self.passthrough_kernels, p.kernel_object()) {
                            (Some(f), Some(ko)) => (f.0)(ko).unwrap_or(false),
                            _ => false,
                        };
                        if passthrough {
                            self.expedited += 1;
                            let _ = self.part.push_expedited(id, p);
                        } else {
                            let _ = self.part.push(id, p);
                        }
                    }
                }
                _ => {}
            }
        }
        // Arrivals are told before anything is written ([`Self::publish_arrivals`]).
        self.publish_arrivals(&ids, now);
        // 2. Hardware room.
        for &id in &ids {
            let Some(q) = self.queues.get(&id).filter(|q| q.mode == Mode::Scheduled) else {
                continue;
            };
            let free = Self::hw_free(q, hw);
            let in_flight = self.part.in_flight(id).unwrap_or(0);
            let cap = in_flight.saturating_add(free.saturating_sub(1)).min(u32::MAX as u64) as u32;
            let _ = self.part.set_capacity(id, Some(cap));
        }
        // 3. Selection.
        self.refresh_external(now);
        self.apply_horizon();
        let mut batches: BTreeMap<QueueId, (Vec<Packet>, Seq)> = BTreeMap::new();
        // The board's last read (fields apart from the rings: no copy on the doorbell path).
        for f in self.part.drain_forwardable(&self.external.0) {
            let b = batches.entry(f.queue).or_insert_with(|| (Vec::new(), f.seq));
            b.0.push(f.packet);
            b.1 = f.seq;
        }
        // 4. Writing. A tracking barrier follows a batch only when completions matter now
        // (`wants_wakeups`); otherwise the batch stays untracked until a later barrier.
        let track = self.wants_wakeups();
        for (id, (packets, last)) in batches {
            if let Some(q) = self.queues.get_mut(&id) {
                let before =
                    self.part.in_flight(id).unwrap_or(0).saturating_sub(packets.len() as u64);
                q.timing.forwarded(now, before);
                q.latency.forwarded(last, packets.len() as u64, now);
            }
            self.write_batch(id, packets, last, track, mem, hw);
        }
        if track {
            self.track_untracked(mem, hw);
        }
        self.part.observe(now, &self.external.0);
        self.arm_where_needed(mem, hw);
        self.publish(now);
    }

    /// Writes one queue's batch, and its tracking barrier if `track`.
    pub(super) fn write_batch(
        &mut self,
        id: QueueId,
        packets: Vec<Packet>,
        last: Seq,
        track: bool,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
    ) {
        if self.faults.hit_with(Point::Forward, packets.len()) {
            self.degrade(id, packets, "forwarding failed (injected by XHSA_FAULT_INJECT)", mem, hw);
            return;
        }
        let Some(q) = self.queues.get_mut(&id) else { return };
        let n = packets.len();
        let first = hw.reserve(&q.hw, n as u64 + u64::from(track));
        let w =
            write_guarded(&self.faults, mem, hw, &q.hw, q.tracking.signal, first, &packets, track);
        q.forwarded += w.packets as u64;
        if w.barrier {
            q.tracking.issue((!w.failed).then_some(last));
        }
        if !w.failed {
            if track {
                q.barrier_after_all();
            } else {
                q.untracked = Some(last);
            }
            return;
        }
        let why = format!(
            "writing into the hardware ring failed after its slots were reserved ({} of {n} packets written; no-op barriers fill the other slots)",
            w.packets
        );
        let mut packets = packets;
        let rest = packets.split_off(w.packets);
        self.degrade(id, rest, &why, mem, hw);
    }

    /// Writes a tracking barrier after the untracked packets of every scheduled queue (room
    /// permitting: the capacity rule always keeps a slot for it), so that their completions
    /// are seen.
    pub(super) fn track_untracked(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware) {
        let mut failed = Vec::new();
        for q in self.queues.values_mut() {
            let Some(last) = q.untracked.filter(|_| q.mode == Mode::Scheduled) else { continue };
            if Self::hw_free(q, hw) == 0 {
                continue;
            }
            let first = hw.reserve(&q.hw, 1);
            let w =
                write_guarded(&self.faults, mem, hw, &q.hw, q.tracking.signal, first, &[], true);
            if w.barrier {
                q.tracking.issue(Some(last));
                q.barrier_after_all();
            }
            if w.failed {
                failed.push(q.id);
            }
        }
        for id in failed {
            self.degrade(
                id,
                Vec::new(),
                "writing a tracking barrier into the hardware ring failed",
                mem,
                hw,
            );
        }
    }

    /// Writes a `Direct` queue's backlog, then its newly published packets, as far as the
    /// hardware ring has room, keeping one slot for a tracking barrier; rings the doorbell once.
    ///
    /// When packets are left over (in the backlog, or published in the shadow ring), progress
    /// must not wait for the application (an HSA program may just wait on a completion signal):
    /// a tracking barrier follows what was written and a completion handler is registered on
    /// it, so its completion runs the next pass ([`Scheduler::on_tracking`]). No barrier is
    /// added while an armed one is outstanding: its completion frees at least its own slot and
    /// runs the pass that writes the next. Untracked writes never take the last free slot, so
    /// there is always room for that barrier. Returns whether packets are left over with nothing
    /// to wake libxhsa (the runtime refused the handler): the edge then retries from the
    /// application's doorbells and read-index polls.
    pub(super) fn direct_flush(
        q: &mut ShadowQueue,
        faults: &FaultPlan,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
    ) -> bool {
        let free = Self::hw_free(q, hw) as usize;
        let budget = free.saturating_sub(1);
        let mut out: Vec<Packet> = Vec::new();
        while out.len() < budget {
            match q.backlog.pop_front() {
                Some(p) => out.push(p),
                None => break,
            }
        }
        if q.backlog.is_empty() {
            let taken = intake(mem, &q.shadow, budget - out.len());
            q.taken += taken.len() as u64;
            out.extend(taken);
        }
        let mut left = !q.backlog.is_empty() || next_published(mem, &q.shadow);
        if left {
            // Barriers the processor completed since the last look (no handler ran for them).
            q.tracking.observe(hw.signal_value(q.tracking.signal));
        }
        let track = left && free >= 1 && !(q.tracking.armed && q.tracking.outstanding() > 0);
        if !out.is_empty() || track {
            let first = hw.reserve(&q.hw, out.len() as u64 + u64::from(track));
            let w = write_guarded(faults, mem, hw, &q.hw, q.tracking.signal, first, &out, track);
            q.forwarded += w.packets as u64;
            if w.barrier {
                q.tracking.issue(None);
            }
            if w.failed {
                log_write_failure(q.id, w.packets, out.len());
                for p in out.drain(w.packets..).rev() {
                    q.backlog.push_front(p);
                }
                left = !q.backlog.is_empty();
            }
        }
        if !left {
            return false;
        }
        if !q.tracking.armed && q.tracking.outstanding() > 0 {
            q.tracking.armed = hw.arm(q.id, q.tracking.signal, q.tracking.arm_below());
            if !q.tracking.armed {
                tracing::debug!(target: LOG_TARGET, "xhsa: {}: the completion handler could not be registered; its remaining packets go at its next doorbell or read-index poll", q.id);
            }
        }
        !q.tracking.armed
    }

    /// The tracking signal of `id` changed to `value` (its completion handler ran): records the
    /// completions, runs a pass, and registers the handler again while barriers are
    /// outstanding.
    pub fn on_tracking(
        &mut self,
        id: QueueId,
        value: i64,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
        now: Nanos,
    ) {
        self.note_contention(now);
        let Some(q) = self.queues.get_mut(&id) else { return };
        q.tracking.armed = false;
        let scheduled = q.mode == Mode::Scheduled;
        let done = q.tracking.observe(value);
        if let (true, Some(seq)) = (scheduled, done) {
            match self.part.complete_through(id, seq) {
                Ok(n) => {
                    q.timing.completed(now, n, self.part.in_flight(id).unwrap_or(0));
                    q.latency.completed_through(seq, now);
                    q.completed_through(seq);
                }
                Err(e) => self.degrade(
                    id,
                    Vec::new(),
                    &format!("completion report does not fit ({e})"),
                    mem,
                    hw,
                ),
            }
        }
        // The pass registers the handler again where completions must still wake libxhsa.
        self.pass_noted(mem, hw, now);
    }

    /// Marks the busy period of every queue that higher-priority work contends now, so that it
    /// gives no sample of the queue's own time per packet ([`crate::path::packet_time`]).
    fn note_contention(&mut self, now: Nanos) {
        self.refresh_external(now);
        for (id, q) in &mut self.queues {
            if self.part.is_contended(*id, &self.external.0) {
                q.timing.contended();
            }
        }
    }

    /// Counts the completions of queues whose tracking signal has no handler registered.
    pub(super) fn reconcile(&mut self, hw: &dyn Hardware, now: Nanos) {
        for id in self.queue_ids() {
            let Some(q) = self.queues.get_mut(&id) else { continue };
            if q.mode != Mode::Scheduled || q.tracking.armed || q.tracking.outstanding() == 0 {
                continue;
            }
            if let Some(seq) = q.tracking.observe(hw.signal_value(q.tracking.signal)) {
                if let Ok(n) = self.part.complete_through(id, seq) {
                    q.timing.completed(now, n, self.part.in_flight(id).unwrap_or(0));
                    q.latency.completed_through(seq, now);
                    q.completed_through(seq);
                }
            }
        }
    }

    /// Registers completion handlers when [`Self::wants_wakeups`] asks for them.
    pub(super) fn arm_where_needed(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware) {
        if self.wants_wakeups() {
            self.arm_outstanding(mem, hw);
        }
    }

    /// The preemption watcher's ask (it is about to weigh this process's queues against higher
    /// work, and some count packets in flight that may be done): a tracking barrier after every
    /// queue's untracked packets, its completion handler registered whatever
    /// [`Self::wants_wakeups`] says, so that packets done long ago stop counting as in flight
    /// (an idle queue's are seen complete within a barrier's round trip).
    pub fn track_now(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware, now: Nanos) {
        self.reconcile(hw, now);
        self.track_untracked(mem, hw);
        self.arm_outstanding(mem, hw);
        self.publish(now);
    }

    /// Registers a completion handler for every scheduled queue with barriers outstanding.
    fn arm_outstanding(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware) {
        for id in self.queue_ids() {
            let Some(q) = self.queues.get_mut(&id) else { continue };
            if q.mode != Mode::Scheduled || q.tracking.armed || q.tracking.outstanding() == 0 {
                continue;
            }
            if hw.arm(id, q.tracking.signal, q.tracking.arm_below()) {
                q.tracking.armed = true;
            } else {
                self.degrade(
                    id,
                    Vec::new(),
                    "the completion handler could not be registered",
                    mem,
                    hw,
                );
            }
        }
    }
}
