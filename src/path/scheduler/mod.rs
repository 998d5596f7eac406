//! The level-1 scheduler of one process: its shadow queues, the priority rings they feed, and
//! the forwarding passes that move packets from the shadow rings to the hardware queues.
//!
//! Safe logic over two abstractions the edge implements: [`QueueMemory`] (the rings and
//! indices in process memory) and [`Hardware`] (what is done through ROCr: reserving
//! hardware slots with `add_write_index`, ringing the hardware doorbell, reading the hardware
//! indices, registering a completion handler on a tracking signal). Tested here with fakes.
//!
//! A **forwarding pass** ([`Scheduler::pass`]) runs on every doorbell of a shadow queue (on the
//! caller's thread) and on every tracking-barrier completion (on libxhsa's completion waiter, `entry/completions/`):
//!
//! 1. take the published packets of every queue from its shadow ring (`Scheduled` queues into
//!    the priority rings, at most one ring's worth held per queue; `Direct` queues straight to
//!    hardware); a queue that had no work and now has some, above another process's queue
//!    present in an overlapping partition, is published on the board and the preemption
//!    watchers told at once, before anything below is done ([`Scheduler::publish_arrivals`]:
//!    that process's take-off starts from there);
//! 2. bound every queue's packets in flight by the room in its hardware ring, keeping one slot
//!    for the tracking barrier ([`crate::path::partition::Partition::set_capacity`]): the
//!    hardware ring is never overfilled;
//! 3. pick what the window lets go ([`crate::path::partition::Partition::drain_forwardable`]);
//! 4. per queue: reserve `n + 1` hardware slots, write the `n` packets unchanged (body first,
//!    header last) and a tracking barrier with libxhsa's signal, ring the hardware doorbell once;
//!    make sure a completion handler is registered on the tracking signal.
//!
//! On an internal failure of a queue (a forwarding batch fails, the completion handler cannot
//! be registered, a completion report does not fit) the queue **degrades** to `Direct`: what it
//! holds is forwarded first, in order, then its packets pass straight through. Nothing is lost,
//! duplicated or reordered, and every application completion signal is left to the hardware.
//!
//! Writing into reserved hardware slots is failure-safe ([`write_guarded`]): if it stops part
//! way (a panic, or `XHSA_FAULT_INJECT=forward_after_reserve`), the slots not written get
//! harmless no-op barriers, the last one libxhsa's tracking barrier, and the doorbell is rung, so
//! the packet processor never stops at an invalid header; the application's packets not written
//! go back, in order, ahead of everything else the queue holds, and the queue degrades.
//!
//! One concern per file: [`interfaces`] (what the edge gives the scheduler), [`forwarding`]
//! (the pass), [`guarded_write`] (failure-safe hardware writes), [`priorities`],
//! [`board_view`] (publishing and the other processes' contention), [`lifecycle`]
//! (degradation, inactivation, destroy); this file holds the scheduler's state.
#![forbid(unsafe_code)]

use crate::path::partition::CuMask;
use crate::path::partitions::Partitions;
use crate::path::shadow_queue::{Mode, ShadowQueue};
use crate::path::window::Nanos;
use crate::settings::fault::FaultPlan;
use std::collections::BTreeMap;
use std::sync::Arc;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::PartitionId;
use xhsa_model::ids::QueueId;
use xhsa_model::partition::Split;
use xhsa_model::priority::{Level, Priority};
use xhsa_model::stats::QueueStats;
use xhsa_model::window_size::WindowSize;

mod board_view;
mod forwarding;
mod guarded_write;
mod interfaces;
mod lifecycle;
mod priorities;
#[cfg(test)]
mod tests;

use board_view::Published;
use guarded_write::{log_write_failure, write_guarded};
pub use interfaces::{Board, Hardware, KernelFilter, Notifier};

/// The `tracing` target of the scheduler's logs: `xhsa::scheduler`, the name `XHSA_LOG`
/// directives select them by (`xhsa::scheduler=debug`, the example the settings give).
const LOG_TARGET: &str = "xhsa::scheduler";

/// How long a read of the board is reused by later passes (device work is ms-scale; a pass runs
/// on every doorbell and completion).
pub const CONTENTION_CACHE_NS: Nanos = 20_000;
/// A queue's counters are republished at least this often while they change (for `xhsa-top`);
/// a change of priority or of whether it has work is published at once.
pub const PUBLISH_PERIOD_NS: Nanos = 10_000_000;

/// What destroying a queue still has to do ([`Scheduler::drain_step`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Drain {
    /// The hardware ring is full: wait (without the scheduler's lock) and call again.
    NeedRoom,
    /// Everything was forwarded; wait until `signal` reaches `target` (if any) — every packet of
    /// the queue has then completed — and remove the queue.
    Done { wait_for: Option<(u64, i64)> },
}

/// Totals over every queue the process had, for the exit summary.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Shadow queues created.
    pub queues: u64,
    /// Packets taken from shadow rings.
    pub taken: u64,
    /// Packets written to hardware rings.
    pub forwarded: u64,
    /// Packets held in libxhsa now.
    pub held: u64,
    /// Packets in flight now (as far as completions were seen).
    pub in_flight: u64,
    /// Time queues spent held back by the window, summed.
    pub throttle_ns: u64,
    /// Queues that degraded to passthrough.
    pub degraded: u64,
}

/// The scheduler; see the module doc.
#[derive(Debug)]
pub struct Scheduler {
    part: Partitions,
    queues: BTreeMap<QueueId, ShadowQueue>,
    faults: Arc<FaultPlan>,
    /// Totals of queues already removed.
    retired: Summary,
    created: u64,
    degraded: u64,
    /// A `Direct` queue has packets left over for lack of hardware room and nothing will wake
    /// libxhsa for them (see [`Scheduler::stalled`]).
    stalled: bool,
    /// The GPU's board, once attached.
    board: Option<Arc<dyn Board>>,
    /// The board's last contention (other processes' work by partition) and when it was read.
    external: (ExternalWork, Option<Nanos>),
    /// Whether other processes had queues on the board at the last read.
    others: bool,
    published: BTreeMap<QueueId, Published>,
    /// The rings' last counters of queues being destroyed (out of the rings, not yet removed).
    closed: BTreeMap<QueueId, QueueStats>,
    /// Passthrough libraries' kernels, when the whitelist names any.
    passthrough_kernels: Option<KernelFilter>,
    /// Packets of passthrough libraries' kernels seen.
    expedited: u64,
    /// Called when a queue's priority or work changed.
    notifier: Option<Notifier>,
    /// The priority each queue's application and the config asked for.
    requested: BTreeMap<QueueId, Priority>,
    /// Levels an operator set (`xhsactl set-priority`), overriding the requested level.
    overrides: BTreeMap<QueueId, Level>,
    /// Hardware queues whose partition changed, with their new CU mask, for the edge to set.
    remasks: Vec<(u64, CuMask)>,
    /// The CU masks applications set on their queues (`hsa_amd_queue_cu_set_mask`): bounds of
    /// the partitions' masks, kept across a move.
    app_masks: BTreeMap<QueueId, Vec<u32>>,
    /// Queues libxhsa does not shadow (a passthrough library's, cooperative ones), shown on the
    /// board for the monitor only, at the priority their process would have.
    unshadowed: BTreeMap<QueueId, Priority>,
    /// The horizon (0: none): beside another process's higher priority that is present but
    /// idle, a queue keeps at most this much of its own time per packet in flight
    /// ([`Scheduler::set_horizon`]).
    horizon_ns: Nanos,
    /// The GPU's CUs and what each holds, once known: each queue's dispatches are counted in
    /// rounds of work-groups on parts of the GPU ([`crate::path::packet_width`]).
    occupancy: Option<crate::path::packet_width::Occupancy>,
}

fn add_stats(total: &mut Summary, q: &ShadowQueue, s: Option<&QueueStats>) {
    total.taken += q.taken;
    total.forwarded += q.forwarded;
    total.held += q.backlog.len() as u64;
    if let Some(s) = s {
        total.held += u64::from(s.pending);
        total.in_flight += u64::from(s.in_flight);
        total.throttle_ns += s.throttle_ns;
    }
}

impl Scheduler {
    /// An empty scheduler: one partition (the whole GPU), window `W`.
    pub fn new(window: WindowSize, faults: Arc<FaultPlan>) -> Scheduler {
        Scheduler {
            part: Partitions::new(window),
            queues: BTreeMap::new(),
            faults,
            retired: Summary::default(),
            created: 0,
            degraded: 0,
            stalled: false,
            board: None,
            external: (ExternalWork::none(), None),
            others: false,
            published: BTreeMap::new(),
            closed: BTreeMap::new(),
            passthrough_kernels: None,
            expedited: 0,
            notifier: None,
            requested: BTreeMap::new(),
            overrides: BTreeMap::new(),
            unshadowed: BTreeMap::new(),
            remasks: Vec::new(),
            app_masks: BTreeMap::new(),
            horizon_ns: 0,
            occupancy: None,
        }
    }

    /// Counts each queue's kernel dispatches from now on in rounds of work-groups on parts of
    /// a GPU of this occupancy (the board's `rounds`, which the live CU split reads).
    pub fn set_occupancy(&mut self, occupancy: crate::path::packet_width::Occupancy) {
        self.occupancy = Some(occupancy);
    }

    /// Sets the horizon (0: none; the preemption watcher sets half the measured cost of a
    /// take-off).
    /// Beside a higher priority of another process that is present but has no work, each queue
    /// keeps at most `horizon_ns` of work in flight by its packets' own time (at least the
    /// window's `W` packets), so that when that priority's work comes, what is in flight drains
    /// in less than a take-off would cost and the queue is held rather than taken off
    /// ([`crate::preempt::policy`], "Hold"). Without it a held queue let go forwards everything
    /// it held at once (a batch process beside an inference server: 77 packets in flight when
    /// the next request came, worth a take-off).
    pub fn set_horizon(&mut self, horizon_ns: Nanos) {
        self.horizon_ns = horizon_ns;
    }

    /// Each scheduled queue's horizon in packets, from the board's last read (see
    /// [`Scheduler::set_horizon`]).
    pub(super) fn apply_horizon(&mut self) {
        let w = u64::from(self.part.window().get());
        for (id, q) in &self.queues {
            if q.mode != Mode::Scheduled {
                continue;
            }
            let (Some(part), Some(priority)) =
                (self.part.partition_of(*id), self.part.priority(*id))
            else {
                continue;
            };
            let above = self.external.0.present_in(part).is_some_and(|p| p > priority);
            let own = q.timing.own_or_all();
            // A queue one packet of which already exceeds the horizon (long kernels: a take-off
            // is worth it whatever it keeps in flight) is not bounded: the bound would buy
            // nothing, and cost the request (intensive: ResNet-50 bs1024 at W in flight put
            // +0.3 ms on the latency-critical median, unexplained).
            let fits = own > 0 && own < self.horizon_ns;
            let packets = if above && fits {
                (self.horizon_ns / own).max(w).min(u64::from(u32::MAX)) as u32
            } else {
                0
            };
            let _ = self.part.set_horizon(*id, packets);
        }
    }

    /// Makes dispatches of the kernels `filter` accepts go unthrottled (the passthrough
    /// whitelist by code object).
    pub fn set_passthrough_kernels(&mut self, filter: KernelFilter) {
        self.passthrough_kernels = Some(filter);
    }

    /// Packets of passthrough libraries' kernels seen so far.
    pub fn expedited(&self) -> u64 {
        self.expedited
    }

    /// Splits the GPU's CUs (`XHSA_RESERVE`) for the queues added from now on.
    pub fn set_split(&mut self, split: Option<Split>) {
        self.part.set_split(split);
    }

    /// Splits the GPU's CUs another way (the live size of an `auto` reserve) or not at all:
    /// every scheduled queue whose partition changes moves with what it holds, its board slot
    /// says so, and its hardware queue is queued for its new mask ([`Scheduler::take_remasks`];
    /// an application's own mask still bounds it). Returns how many queues moved.
    pub fn resplit(&mut self, split: Option<Split>) -> usize {
        let moved = self.part.resplit(split);
        for (id, to, all) in &moved {
            if let Some(p) = self.part.priority(*id) {
                self.rehomed(*id, p, *to, all.clone());
            }
            if let (Some(board), Some(stats)) = (self.board.clone(), self.stats(*id, 0)) {
                board.publish(*id, &stats);
            }
        }
        if !moved.is_empty() {
            self.notify();
        }
        moved.len()
    }

    /// Queue `id` (at `priority`) moved to partition `to`: its board slot says so, and its
    /// hardware queue is queued for that partition's mask (bounded by the application's), the
    /// application's own on the whole GPU, else `all` (every CU) — set by the edge, outside the
    /// scheduler's lock ([`Scheduler::take_remasks`]).
    pub(super) fn rehomed(
        &mut self,
        id: QueueId,
        priority: Priority,
        to: PartitionId,
        all: Option<CuMask>,
    ) {
        if let Some(b) = &self.board {
            b.leave(id);
            b.join(id, priority, to);
        }
        let mask = match (self.cu_mask_of(id), self.app_masks.get(&id)) {
            (Some(m), _) => Some(m),
            (None, Some(app)) => Some(CuMask::from_words(app.clone())),
            (None, None) => all,
        };
        if let (Some(q), Some(mask)) = (self.queues.get(&id), mask) {
            self.remasks.push((q.hw.queue, mask));
        }
    }

    /// The split of the GPU's CUs, if any.
    pub fn split(&self) -> Option<&Split> {
        self.part.split()
    }

    /// Adds a new shadow queue at `priority`, in the CU partition its priority puts it in.
    pub fn add(&mut self, queue: ShadowQueue, priority: Priority) -> bool {
        let id = queue.id;
        if self.queues.contains_key(&id) || self.part.add_queue(id, priority).is_err() {
            return false;
        }
        self.queues.insert(id, queue);
        self.requested.insert(id, priority);
        self.created += 1;
        if let Some(b) = &self.board {
            b.join(id, priority, self.partition_of(id));
        }
        true
    }

    /// The CU partition of a queue (the whole GPU for one unknown or unshadowed).
    pub fn partition_of(&self, id: QueueId) -> PartitionId {
        self.part.partition_of(id).unwrap_or(PartitionId::WHOLE)
    }

    /// The CU mask the hardware queue behind `id` must have, `None` for the whole GPU: its
    /// partition's, bounded by the mask its application set ([`CuMask::bound_by`]).
    pub fn cu_mask_of(&self, id: QueueId) -> Option<CuMask> {
        let part = self.part.cu_mask_of(id)?;
        Some(match self.app_masks.get(&id) {
            Some(app) => part.bound_by(app).unwrap_or_else(|own| own),
            None => part,
        })
    }

    /// The application set CU mask `app` on queue `id` (words as `hsa_amd_queue_cu_set_mask`
    /// takes them; empty: every CU again). Returns what its hardware queue gets when the queue is
    /// in a partition: `Ok` the CUs of both, `Err` the application's own when they share none;
    /// `None` for the whole GPU (the application's mask as it is).
    pub fn bind_app_mask(&mut self, id: QueueId, app: &[u32]) -> Option<Result<CuMask, CuMask>> {
        if app.is_empty() {
            self.app_masks.remove(&id);
        } else if self.queues.contains_key(&id) {
            self.app_masks.insert(id, app.to_vec());
        }
        Some(self.part.cu_mask_of(id)?.bound_by(app))
    }

    /// The queue, if present.
    pub fn queue(&self, id: QueueId) -> Option<&ShadowQueue> {
        self.queues.get(&id)
    }

    /// The shadow queues, in id order.
    pub fn queue_ids(&self) -> Vec<QueueId> {
        self.queues.keys().copied().collect()
    }

    /// Whether some `Direct` queue was left with packets for lack of hardware room at the last
    /// pass and no completion will run the next pass (the runtime refused the completion
    /// handler; normally a tracking barrier's completion does): the edge then retries from the
    /// application's read-index polls.
    pub fn stalled(&self) -> bool {
        self.stalled
    }

    /// Whether some queue has packets on the hardware that no tracking barrier follows yet
    /// (written while completions did not matter: the process was alone on the board). Their
    /// completions are counted only once a pass tracks them; until then they count as in flight.
    pub fn has_untracked(&self) -> bool {
        self.queues.values().any(|q| q.mode == Mode::Scheduled && q.untracked.is_some())
    }

    /// Totals over every queue, live and removed.
    pub fn summary(&self, now: Nanos) -> Summary {
        let mut total = self.retired;
        for (&id, q) in &self.queues {
            add_stats(&mut total, q, self.part.stats(id, now, &self.external.0).as_ref());
        }
        total.queues = self.created;
        total.degraded = self.degraded;
        total
    }
}
