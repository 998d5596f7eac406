//! This process's queues on the GPU's board: attaching it, publishing each queue's counters,
//! reading the other processes' contention, and the counters themselves ([`Scheduler::stats`]).

use super::*;
use crate::path::shadow_queue::Mode;
use crate::path::window::Nanos;
use std::sync::Arc;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::PartitionId;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::Priority;
use xhsa_model::stats::QueueState;
use xhsa_model::stats::QueueStats;

/// What was last published for a queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Published {
    pub(super) priority: i32,
    pub(super) has_work: bool,
    /// Packets in flight on the hardware (what a preemption can take off).
    pub(super) busy: bool,
    pub(super) flags: u32,
    pub(super) at: Nanos,
}

impl Published {
    /// What publishing `stats` at `now` tells.
    fn of(stats: &QueueStats, now: Nanos) -> Published {
        Published {
            priority: stats.priority,
            has_work: stats.has_work(),
            busy: stats.in_flight > 0,
            flags: stats.flags,
            at: now,
        }
    }
}

impl Scheduler {
    /// Attaches the GPU's board: the queues already there join it.
    pub fn attach_board(&mut self, board: Arc<dyn Board>) {
        for id in self.queue_ids() {
            if let Some(p) = self.part.priority(id) {
                board.join(id, p, self.partition_of(id));
            }
        }
        self.board = Some(board);
        for (&id, &p) in &self.unshadowed.clone() {
            self.show_unshadowed(id, p);
        }
    }

    /// A queue libxhsa passes through without a shadow (a passthrough library's, a cooperative
    /// one): not scheduled, but shown on the board as `passthrough` (no counters: its packets
    /// never pass through libxhsa; it never has work others must yield to).
    pub fn add_unshadowed(&mut self, id: QueueId, priority: Priority) {
        self.unshadowed.insert(id, priority);
        self.show_unshadowed(id, priority);
    }

    pub(super) fn show_unshadowed(&self, id: QueueId, priority: Priority) {
        if let Some(b) = &self.board {
            b.join(id, priority, PartitionId::WHOLE);
            let stats = QueueStats {
                priority: priority.rank(),
                requested: priority.rank(),
                flags: xhsa_model::stats::FLAG_PASSTHROUGH,
                state: QueueState::Passthrough.code(),
                ..QueueStats::default()
            };
            b.publish(id, &stats);
        }
    }

    /// An unshadowed queue was destroyed.
    pub fn remove_unshadowed(&mut self, id: QueueId) {
        if self.unshadowed.remove(&id).is_some() {
            if let Some(b) = &self.board {
                b.leave(id);
            }
        }
    }

    /// Frees every slot of this process's queues on the board (process exit).
    pub fn leave_board(&mut self) {
        if let Some(b) = &self.board {
            for id in self.queues.keys().chain(self.unshadowed.keys()) {
                b.leave(*id);
            }
        }
        self.published.clear();
    }

    /// The source of *external* contention: the highest priority with work in other processes
    /// on the same GPU, by CU partition, as the board said at the last read (none without a
    /// board).
    pub fn external_work(&self) -> &ExternalWork {
        &self.external.0
    }

    /// Reads the board again unless the last read is younger than [`CONTENTION_CACHE_NS`].
    pub(super) fn refresh_external(&mut self, now: Nanos) {
        let Some(board) = &self.board else { return };
        if self.external.1.is_some_and(|t| now.saturating_sub(t) < CONTENTION_CACHE_NS) {
            return;
        }
        self.external = (board.contention(), Some(now));
        self.others = board.others_present();
    }

    /// Whether completions must wake libxhsa (a completion handler registered on each tracking
    /// signal with barriers outstanding) rather than be counted at the next pass: while some
    /// queue of the process holds packets (a completion may let them go), or while other
    /// processes are on the board (they must learn promptly when this process's work ends).
    /// Otherwise completions are read from the tracking signals at the next pass, which saves a
    /// wake-up of libxhsa's completion waiter per pass.
    pub(super) fn wants_wakeups(&self) -> bool {
        self.others || self.queues.keys().any(|&id| self.part.pending(id).unwrap_or(0) > 0)
    }

    /// Publishes the queues whose priority or work changed, and the others' counters every
    /// [`PUBLISH_PERIOD_NS`]; when a queue's priority, whether it has work or whether it has packets in flight changed, tells the
    /// preemption watchers ([`Scheduler::set_notifier`]) once.
    pub(super) fn publish(&mut self, now: Nanos) {
        let board = self.board.clone();
        let mut changed = false;
        for id in self.queue_ids() {
            let Some(stats) = self.stats(id, now) else { continue };
            let new = Published::of(&stats, now);
            let (due, moved) = match self.published.get(&id) {
                Some(old) => {
                    let moved = (old.priority, old.has_work, old.busy)
                        != (new.priority, new.has_work, new.busy);
                    (
                        moved
                            || old.flags != new.flags
                            || now.saturating_sub(old.at) >= PUBLISH_PERIOD_NS,
                        moved,
                    )
                }
                None => (true, new.has_work),
            };
            if due {
                if let Some(b) = &board {
                    b.publish(id, &stats);
                }
                self.published.insert(id, new);
            }
            changed |= moved;
        }
        if changed {
            self.notify();
        }
    }

    /// Publishes, right after the intake, the queues that had no work and now have some, and
    /// tells the watchers at once: an arrival of work is what another process's watcher takes
    /// its queues off for, and the rest of the pass (writing the packets, ringing, tracking,
    /// arming) must not delay it: on a loaded host those steps took 0.5-5 ms of wall time at a
    /// request's first pass, the watcher of the batch process waiting for them. The pass's
    /// own publish then follows with the packets in flight. Only for a queue above some other
    /// process's queue present in an overlapping CU partition (as the board was last read):
    /// nobody else yields to the rest (a batch process's work among its peers, a process alone,
    /// with no other process present), and the pass's publish tells this process's own watcher
    /// in time, sparing the doorbell path the extra publish and every watcher a second wake-up.
    /// `ids`: the pass's queues.
    pub(super) fn publish_arrivals(&mut self, ids: &[QueueId], now: Nanos) {
        let Some(board) = self.board.clone() else { return };
        let mut arrived = false;
        for &id in ids {
            if self.published.get(&id).is_some_and(|p| p.has_work) {
                continue;
            }
            let Some(priority) = self.part.priority(id) else { continue };
            if !self.external.0.below_present(self.partition_of(id), priority) {
                continue;
            }
            let Some(stats) = self.stats(id, now) else { continue };
            if !stats.has_work() {
                continue;
            }
            board.publish(id, &stats);
            self.published.insert(id, Published::of(&stats, now));
            arrived = true;
        }
        if arrived {
            self.notify();
        }
    }

    /// Tells the preemption watchers that a queue's priority or work changed.
    pub(super) fn notify(&self) {
        if let Some(n) = &self.notifier {
            (n.0)();
        }
    }

    /// Sets what [`Scheduler::publish`] calls when a queue's priority or work changed (the
    /// board's wake-up of every process's watcher, or this process's own).
    pub fn set_notifier(&mut self, notifier: Notifier) {
        self.notifier = Some(notifier);
    }

    /// The queue's counters at `now` (pending and in flight as the rings see them).
    pub fn stats(&self, id: QueueId, now: Nanos) -> Option<QueueStats> {
        let q = self.queues.get(&id)?;
        let mut s = self
            .part
            .stats(id, now, &self.external.0)
            .or_else(|| {
                self.closed.get(&id).map(|c| QueueStats {
                    pending: 0,
                    in_flight: 0,
                    flags: 0,
                    ..*c
                })
            })
            .unwrap_or_default();
        s.submitted = q.taken;
        s.forwarded = q.forwarded;
        s.packet_ns = q.timing.per_packet();
        s.own_packet_ns = q.timing.own_per_packet();
        s.busy_ns = q.timing.busy_ns();
        s.rounds = q.widths.0;
        s.pending = s.pending.saturating_add(q.backlog.len().min(u32::MAX as usize) as u32);
        if q.mode != Mode::Scheduled {
            s.flags |= xhsa_model::stats::FLAG_PASSTHROUGH;
        } else if s.in_flight > 0 && q.unconfirmed() {
            s.flags |= xhsa_model::stats::FLAG_UNCONFIRMED;
        }
        if let Some(r) = self.requested.get(&id) {
            s.requested = r.rank();
        }
        if self.overrides.contains_key(&id) {
            s.flags |= xhsa_model::stats::FLAG_OVERRIDDEN;
        }
        s.latency = q.latency.histogram();
        s.state = if q.mode == Mode::Direct {
            QueueState::Degraded
        } else if s.has_flag(xhsa_model::stats::FLAG_HELD)
            || (s.has_flag(xhsa_model::stats::FLAG_PAUSED) && s.pending > 0)
        {
            QueueState::Held
        } else {
            QueueState::Running
        }
        .code();
        Some(s)
    }
}
