//! The level-1 scheduler of one process: its shadow queues, the priority rings they feed, and
//! the forwarding passes that move packets from the shadow rings to the hardware queues.
//!
//! Safe logic over two abstractions the edge implements: [`QueueMemory`] (the rings and
//! indices in process memory) and [`Hardware`] (what is done through ROCr: reserving
//! hardware slots with `add_write_index`, ringing the hardware doorbell, reading the hardware
//! indices, registering a completion handler on a tracking signal). Tested here with fakes.
//!
//! A **forwarding pass** ([`Scheduler::pass`]) runs on every doorbell of a shadow queue (on the
//! caller's thread) and on every tracking-barrier completion (on ROCr's async thread):
//!
//! 1. take the published packets of every queue from its shadow ring (`Scheduled` queues into
//!    the priority rings, at most one ring's worth held per queue; `Direct` queues straight to
//!    hardware);
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
#![forbid(unsafe_code)]

use crate::path::aql_ring::{intake, intake_until, next_published, write_reserved, QueueMemory};
use crate::path::packet::Packet;
use crate::path::partition::{CuMask, Partition};
use crate::path::shadow_queue::{HwQueue, Mode, ShadowQueue};
use crate::path::window::{Nanos, Seq};
use crate::settings::fault::{FaultPlan, Point};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xhsa_model::contention::Contention;
use xhsa_model::ids::PartitionId;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::{Level, Priority};
use xhsa_model::stats::QueueState;
use xhsa_model::stats::QueueStats;
use xhsa_model::window_size::WindowSize;

/// The `tracing` target of this module's logs: the module path it had before `src/` was sorted
/// into folders, so that an `XHSA_LOG` directive such as `xhsa::scheduler=debug` (the example
/// the settings give) keeps selecting them.
const LOG_TARGET: &str = "xhsa::scheduler";

/// The cross-process board as the scheduler uses it ([`crate::board::link::BoardLink`] in a
/// process; a fake in tests): the queues of this process publish there, and the other
/// processes' work is the *external* contention of the window.
pub trait Board: Send + Sync + std::fmt::Debug {
    /// Gives a queue a slot; false if it could not (the queue is then invisible to others).
    fn join(&self, queue: QueueId, priority: Priority) -> bool;
    /// Publishes a queue's counters.
    fn publish(&self, queue: QueueId, stats: &QueueStats);
    /// Frees a queue's slot.
    fn leave(&self, queue: QueueId);
    /// The highest priority with work in other processes.
    fn contention(&self) -> Contention;
    /// Whether queues of other processes are on the board at all (they may then be held back
    /// by this process's work, and must learn promptly when it ends).
    fn others_present(&self) -> bool;
}

/// How long a read of the board is reused by later passes (device work is ms-scale; a pass runs
/// on every doorbell and completion).
pub const CONTENTION_CACHE_NS: Nanos = 20_000;
/// A queue's counters are republished at least this often while they change (for `xhsa-top`);
/// a change of priority or of whether it has work is published at once.
pub const PUBLISH_PERIOD_NS: Nanos = 10_000_000;

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

/// What was last published for a queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Published {
    priority: i32,
    has_work: bool,
    /// Packets in flight on the hardware (what a preemption can take off).
    busy: bool,
    flags: u32,
    at: Nanos,
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

/// How a write into reserved hardware slots ended ([`write_guarded`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Written {
    /// The leading application packets written as intended.
    packets: usize,
    /// A tracking barrier stands in the last reserved slot (the one asked for, or a filler): the
    /// caller counts it issued.
    barrier: bool,
    /// Writing stopped early or the doorbell failed: the caller puts the packets after
    /// `packets` back, in order, and degrades the queue.
    failed: bool,
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
fn write_guarded(
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
    let fail_at = (!packets.is_empty() && faults.hit(Point::ForwardAfterReserve))
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
fn log_write_failure(id: QueueId, written: usize, of: usize) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::error!(target: LOG_TARGET, "xhsa: {id}: writing into the hardware ring failed after its slots were reserved ({written} of {of} packets written; no-op barriers fill the other slots); the rest is retried after them");
    }
}

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
    part: Partition,
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
    /// The board's last contention and when it was read.
    external: (Contention, Option<Nanos>),
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
    /// Queues libxhsa does not shadow (a passthrough library's, cooperative ones), shown on the
    /// board for the monitor only, at the priority their process would have.
    unshadowed: BTreeMap<QueueId, Priority>,
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
            part: Partition::new(PartitionId(0), CuMask::all(0), window),
            queues: BTreeMap::new(),
            faults,
            retired: Summary::default(),
            created: 0,
            degraded: 0,
            stalled: false,
            board: None,
            external: (Contention::external(None), None),
            others: false,
            published: BTreeMap::new(),
            closed: BTreeMap::new(),
            passthrough_kernels: None,
            expedited: 0,
            notifier: None,
            requested: BTreeMap::new(),
            overrides: BTreeMap::new(),
            unshadowed: BTreeMap::new(),
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

    /// Attaches the GPU's board: the queues already there join it.
    pub fn attach_board(&mut self, board: Arc<dyn Board>) {
        for id in self.queue_ids() {
            if let Some(p) = self.part.priority(id) {
                board.join(id, p);
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

    fn show_unshadowed(&self, id: QueueId, priority: Priority) {
        if let Some(b) = &self.board {
            b.join(id, priority);
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
    /// on the same GPU, as the board said at the last read (none without a board).
    pub fn external_contention(&self) -> Contention {
        self.external.0
    }

    /// Reads the board again unless the last read is younger than [`CONTENTION_CACHE_NS`].
    fn refresh_external(&mut self, now: Nanos) {
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
    /// wake-up of ROCr's async thread per pass.
    fn wants_wakeups(&self) -> bool {
        self.others || self.queues.keys().any(|&id| self.part.pending(id).unwrap_or(0) > 0)
    }

    /// Counts the completions of queues whose tracking signal has no handler registered.
    fn reconcile(&mut self, hw: &dyn Hardware, now: Nanos) {
        for id in self.queue_ids() {
            let Some(q) = self.queues.get_mut(&id) else { continue };
            if q.mode != Mode::Scheduled || q.tracking.armed || q.tracking.outstanding() == 0 {
                continue;
            }
            if let Some(seq) = q.tracking.observe(hw.signal_value(q.tracking.signal)) {
                if let Ok(n) = self.part.complete_through(id, seq) {
                    q.timing.completed(now, n, self.part.in_flight(id).unwrap_or(0));
                    q.latency.completed_through(seq, now);
                }
            }
        }
    }

    /// Registers completion handlers when [`Self::wants_wakeups`] asks for them.
    fn arm_where_needed(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware) {
        if !self.wants_wakeups() {
            return;
        }
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

    /// Publishes the queues whose priority or work changed, and the others' counters every
    /// [`PUBLISH_PERIOD_NS`]; when a queue's priority, whether it has work or whether it has packets in flight changed, tells the
    /// preemption watchers ([`Scheduler::set_notifier`]) once.
    fn publish(&mut self, now: Nanos) {
        let board = self.board.clone();
        let mut changed = false;
        for id in self.queue_ids() {
            let Some(stats) = self.stats(id, now) else { continue };
            let new = Published {
                priority: stats.priority,
                has_work: stats.has_work(),
                busy: stats.in_flight > 0,
                flags: stats.flags,
                at: now,
            };
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

    /// Tells the preemption watchers that a queue's priority or work changed.
    fn notify(&self) {
        if let Some(n) = &self.notifier {
            (n.0)();
        }
    }

    /// Sets what [`Scheduler::publish`] calls when a queue's priority or work changed (the
    /// board's wake-up of every process's watcher, or this process's own).
    pub fn set_notifier(&mut self, notifier: Notifier) {
        self.notifier = Some(notifier);
    }

    /// Adds a new shadow queue at `priority`.
    pub fn add(&mut self, queue: ShadowQueue, priority: Priority) -> bool {
        let id = queue.id;
        if self.queues.contains_key(&id) || self.part.add_queue(id, priority).is_err() {
            return false;
        }
        self.queues.insert(id, queue);
        self.requested.insert(id, priority);
        self.created += 1;
        if let Some(b) = &self.board {
            b.join(id, priority);
        }
        true
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

    fn apply_priority(&mut self, id: QueueId) -> Option<Priority> {
        let priority = self.effective_priority(id)?;
        if let Some(q) = self.queues.get_mut(&id) {
            q.stream = priority.stream();
            if q.mode == Mode::Scheduled {
                let _ = self.part.set_priority(id, priority);
            }
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

    /// Whether the queue is paused.
    pub fn is_paused(&self, id: QueueId) -> bool {
        self.part.is_paused(id).unwrap_or(false)
    }

    /// The queue's effective priority, while it is scheduled.
    pub fn priority(&self, id: QueueId) -> Option<Priority> {
        self.part.priority(id)
    }

    fn hw_free(q: &ShadowQueue, hw: &dyn Hardware) -> u64 {
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
        let contention = self.external_contention();
        let mut batches: BTreeMap<QueueId, (Vec<Packet>, Seq)> = BTreeMap::new();
        for f in self.part.drain_forwardable(&contention) {
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
        self.part.observe(now, &contention);
        self.arm_where_needed(mem, hw);
        self.publish(now);
    }

    /// Writes one queue's batch, and its tracking barrier if `track`.
    fn write_batch(
        &mut self,
        id: QueueId,
        packets: Vec<Packet>,
        last: Seq,
        track: bool,
        mem: &dyn QueueMemory,
        hw: &dyn Hardware,
    ) {
        if self.faults.hit(Point::Forward) {
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
            q.untracked = if track { None } else { Some(last) };
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
    fn track_untracked(&mut self, mem: &dyn QueueMemory, hw: &dyn Hardware) {
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
                q.untracked = None;
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
    fn direct_flush(
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
        let Some(q) = self.queues.get_mut(&id) else { return };
        q.tracking.armed = false;
        let scheduled = q.mode == Mode::Scheduled;
        let done = q.tracking.observe(value);
        if let (true, Some(seq)) = (scheduled, done) {
            match self.part.complete_through(id, seq) {
                Ok(n) => {
                    q.timing.completed(now, n, self.part.in_flight(id).unwrap_or(0));
                    q.latency.completed_through(seq, now);
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
        self.pass(mem, hw, now);
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

    fn stop(&mut self, id: QueueId, mode: Mode) {
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
        if let Some(st) = self.part.stats(id, now, &self.external_contention()) {
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
        let stats = self.part.stats(id, now, &self.external_contention()).or(closed);
        let _ = self.part.remove_queue(id);
        if let Some(b) = &self.board {
            b.leave(id);
        }
        self.published.remove(&id);
        self.requested.remove(&id);
        self.overrides.remove(&id);
        self.notify();
        add_stats(&mut self.retired, &q, stats.as_ref());
        self.retired.held = 0;
        self.retired.in_flight = 0;
        Some(q)
    }

    /// The queue's counters at `now` (pending and in flight as the rings see them).
    pub fn stats(&self, id: QueueId, now: Nanos) -> Option<QueueStats> {
        let q = self.queues.get(&id)?;
        let mut s = self
            .part
            .stats(id, now, &self.external_contention())
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
        s.pending = s.pending.saturating_add(q.backlog.len().min(u32::MAX as usize) as u32);
        if q.mode != Mode::Scheduled {
            s.flags |= xhsa_model::stats::FLAG_PASSTHROUGH;
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

    /// Totals over every queue, live and removed.
    pub fn summary(&self, now: Nanos) -> Summary {
        let mut total = self.retired;
        for (&id, q) in &self.queues {
            add_stats(
                &mut total,
                q,
                self.part.stats(id, now, &self.external_contention()).as_ref(),
            );
        }
        total.queues = self.created;
        total.degraded = self.degraded;
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::aql_ring::{AqlRing, READ_DISPATCH_ID, WRITE_DISPATCH_ID};
    use crate::path::packet::{FenceScope, PacketType, PACKET_SIZE};
    use crate::path::shadow_queue::TRACKING_START;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use xhsa_model::priority::{Level, StreamPriority};

    type Mem = crate::path::aql_ring::fake::Fake;

    /// A hardware model: write indices owned here, read indices moved by `consume`, doorbells
    /// and handler registrations recorded; every packet written is in `mem`.
    #[derive(Default)]
    struct Hw {
        write: RefCell<HashMap<u64, u64>>,
        read: RefCell<HashMap<u64, u64>>,
        rings: RefCell<Vec<(u64, u64)>>,
        armed: RefCell<Vec<(QueueId, i64)>>,
        refuse_arm: bool,
        /// Tracking signal values (the "GPU" decrements them).
        signals: RefCell<HashMap<u64, i64>>,
    }

    impl Hardware for Hw {
        fn reserve(&self, hw: &HwQueue, n: u64) -> u64 {
            let mut w = self.write.borrow_mut();
            let e = w.entry(hw.queue).or_default();
            let first = *e;
            *e += n;
            first
        }
        fn read_index(&self, hw: &HwQueue) -> u64 {
            *self.read.borrow().get(&hw.queue).unwrap_or(&0)
        }
        fn write_index(&self, hw: &HwQueue) -> u64 {
            *self.write.borrow().get(&hw.queue).unwrap_or(&0)
        }
        fn ring(&self, hw: &HwQueue, index: u64) {
            self.rings.borrow_mut().push((hw.queue, index));
        }
        fn arm(&self, queue: QueueId, _signal: u64, below: i64) -> bool {
            self.armed.borrow_mut().push((queue, below));
            !self.refuse_arm
        }
        fn signal_value(&self, signal: u64) -> i64 {
            *self.signals.borrow().get(&signal).unwrap_or(&TRACKING_START)
        }
    }

    const SLOTS: u64 = 8;

    struct World {
        mem: Mem,
        hw: Hw,
        sched: Scheduler,
        /// Per queue: next shadow index the application writes.
        app_next: HashMap<u64, u64>,
        /// Per queue: packets the "GPU" executed, read from the hardware ring in order.
        executed: HashMap<u64, Vec<Packet>>,
        /// Per queue: tracking barriers executed.
        barriers: HashMap<u64, i64>,
        /// Per queue: no-op barriers executed (fillers of slots whose packet was not written).
        fillers: HashMap<u64, u64>,
    }

    fn shadow_ring(q: u64) -> AqlRing {
        AqlRing { base: 0x100_0000 * q, slots: SLOTS, amd_queue: 0x100_0000 * q - 0x1000 }
    }
    fn hw_queue(q: u64) -> HwQueue {
        HwQueue {
            queue: 0x8000_0000 + 0x100_0000 * q,
            ring: AqlRing {
                base: 0x8000_0000 + 0x100_0000 * q + 0x1000,
                slots: SLOTS,
                amd_queue: 0x8000_0000 + 0x100_0000 * q,
            },
            doorbell: 0xd00 + q,
        }
    }
    fn app_packet(q: u64, n: u64) -> Packet {
        let mut b = [0u8; PACKET_SIZE];
        b[0] = 2;
        b[1] = 1; // barrier bit
        b[8..16].copy_from_slice(&q.to_le_bytes());
        b[16..24].copy_from_slice(&n.to_le_bytes());
        Packet::from_bytes(b)
    }
    fn prio(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    impl World {
        fn new(w: u64, faults: &str) -> World {
            let (plan, errs) = FaultPlan::parse(faults);
            assert!(errs.is_empty());
            World {
                mem: Mem::default(),
                hw: Hw::default(),
                sched: Scheduler::new(WindowSize::new(w).unwrap(), Arc::new(plan)),
                app_next: HashMap::new(),
                executed: HashMap::new(),
                barriers: HashMap::new(),
                fillers: HashMap::new(),
            }
        }
        fn add(&mut self, q: u64, p: Priority) {
            let ring = shadow_ring(q);
            for i in 0..SLOTS {
                // Both rings start INVALID, as ROCr's do.
                self.mem.store_header(ring.slot(i), 1);
                self.mem.store_header(hw_queue(q).ring.slot(i), 1);
            }
            assert!(self.sched.add(ShadowQueue::new(QueueId(q), ring, hw_queue(q), 0x5000 + q), p));
        }
        /// The application publishes `n` packets (as far as the shadow has room) and rings.
        fn submit(&mut self, q: u64, n: u64) -> u64 {
            let ring = shadow_ring(q);
            let mut done = 0;
            for _ in 0..n {
                let next = *self.app_next.get(&q).unwrap_or(&0);
                let read = self.mem.load_u64(ring.amd_queue + READ_DISPATCH_ID);
                if next - read >= SLOTS {
                    break;
                }
                let p = app_packet(q, next);
                self.mem.write_body(ring.slot(next), &p);
                self.mem.store_header(ring.slot(next), p.header());
                self.mem.store_u64(ring.amd_queue + WRITE_DISPATCH_ID, next + 1);
                self.app_next.insert(q, next + 1);
                done += 1;
            }
            self.sched.doorbell(QueueId(q), &self.mem, &self.hw, 0);
            done
        }
        /// The GPU executes up to `n` packets of queue `q`'s hardware ring; then the handler
        /// runs if a barrier completed.
        fn gpu(&mut self, q: u64, n: u64) {
            let h = hw_queue(q);
            let mut completed_barrier = false;
            for _ in 0..n {
                let read = self.hw.read_index(&h);
                if read >= self.hw.write_index(&h) {
                    break;
                }
                let p = self.mem.read_packet(h.ring.slot(read));
                assert_ne!(
                    p.packet_type(),
                    PacketType::Invalid,
                    "the doorbell was rung before the packet was written"
                );
                self.mem.store_header(h.ring.slot(read), 1);
                if p.completion_signal() == 0x5000 + q && p.packet_type() == PacketType::BarrierAnd
                {
                    *self.barriers.entry(q).or_default() += 1;
                    completed_barrier = true;
                } else if p == Packet::no_op() {
                    *self.fillers.entry(q).or_default() += 1;
                } else {
                    self.executed.entry(q).or_default().push(p);
                }
                self.hw.read.borrow_mut().insert(h.queue, read + 1);
            }
            if completed_barrier {
                let value = TRACKING_START - self.barriers[&q];
                self.hw.signals.borrow_mut().insert(0x5000 + q, value);
                // ROCr runs the handler only when one is registered.
                if self.sched.queue(QueueId(q)).is_some_and(|s| s.tracking.armed) {
                    self.sched.on_tracking(QueueId(q), value, &self.mem, &self.hw, 0);
                }
            }
        }
        fn check_executed(&self, q: u64, n: u64) {
            let got = self.executed.get(&q).cloned().unwrap_or_default();
            let want: Vec<Packet> = (0..n).map(|i| app_packet(q, i)).collect();
            assert_eq!(got, want, "queue {q}: lost, duplicated, reordered or modified");
        }
    }

    #[test]
    fn alone_a_queue_forwards_everything_and_tracks_it_only_once_completions_matter() {
        let mut w = World::new(1, "");
        w.add(1, prio(0));
        assert_eq!(w.submit(1, 3), 3);
        assert_eq!(
            w.hw.write_index(&hw_queue(1)),
            3,
            "alone and holding nothing: no tracking barrier"
        );
        assert_eq!(
            *w.hw.rings.borrow(),
            vec![(hw_queue(1).queue, 2)],
            "one doorbell per pass, with the last packet's id"
        );
        assert!(w.hw.armed.borrow().is_empty(), "no completion handler, no wake-up");
        assert_eq!(
            w.mem.load_u64(shadow_ring(1).amd_queue + READ_DISPATCH_ID),
            3,
            "the application sees its packets taken"
        );
        w.gpu(1, 10);
        w.check_executed(1, 3);
        // A higher queue arrives and queue 1 gets held: now completions matter, and a barrier
        // after queue 1's untracked packets makes them observable.
        w.add(2, prio(5));
        w.submit(2, 1);
        w.submit(1, 2);
        assert_eq!(
            w.sched.stats(QueueId(1), 0).unwrap().pending,
            2,
            "held: W = 1 and 3 packets count as in flight"
        );
        assert_eq!(
            w.hw.write_index(&hw_queue(1)),
            4,
            "a tracking barrier after the untracked packets"
        );
        w.gpu(1, 10);
        let s = w.sched.stats(QueueId(1), 0).unwrap();
        assert_eq!(
            (s.completed, s.pending),
            (3, 1),
            "the barrier's completion counts all three; one more may go"
        );
        w.gpu(2, 10);
        w.gpu(1, 10);
        w.gpu(1, 10);
        w.check_executed(1, 5);
        w.check_executed(2, 1);
    }

    #[test]
    fn the_window_holds_a_lower_queue_while_a_higher_one_works() {
        let mut w = World::new(1, "");
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.submit(1, 2);
        w.submit(2, 4);
        // The high queue has work in flight: the low one gets W = 1 packet.
        assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().in_flight, 1);
        assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 3);
        w.gpu(2, 10); // its one packet and barrier complete: one more may go
        assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 2);
        w.gpu(1, 10); // the high queue finishes: the low one is free
        assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 0);
        w.gpu(2, 100);
        w.check_executed(1, 2);
        w.check_executed(2, 4);
    }

    /// The board as another process's work shows on it.
    #[derive(Debug, Default)]
    struct FakeBoard {
        external: std::sync::Mutex<Option<Priority>>,
        published: std::sync::Mutex<Vec<(QueueId, QueueStats)>>,
        joined: std::sync::Mutex<Vec<QueueId>>,
        left: std::sync::Mutex<Vec<QueueId>>,
    }

    impl Board for FakeBoard {
        fn join(&self, queue: QueueId, _: Priority) -> bool {
            self.joined.lock().unwrap().push(queue);
            true
        }
        fn publish(&self, queue: QueueId, stats: &QueueStats) {
            self.published.lock().unwrap().push((queue, *stats));
        }
        fn leave(&self, queue: QueueId) {
            self.left.lock().unwrap().push(queue);
        }
        fn contention(&self) -> Contention {
            Contention::external(*self.external.lock().unwrap())
        }
        fn others_present(&self) -> bool {
            true
        }
    }

    impl FakeBoard {
        fn last(&self, q: u64) -> QueueStats {
            self.published
                .lock()
                .unwrap()
                .iter()
                .rev()
                .find(|(id, _)| *id == QueueId(q))
                .expect("published")
                .1
        }
    }

    #[test]
    fn higher_work_of_another_process_on_the_board_holds_this_process_queue() {
        let mut w = World::new(1, "");
        let board = Arc::new(FakeBoard::default());
        *board.external.lock().unwrap() = Some(prio(10));
        w.add(1, prio(0));
        w.sched.attach_board(board.clone());
        w.add(2, prio(0));
        assert_eq!(
            *board.joined.lock().unwrap(),
            vec![QueueId(1), QueueId(2)],
            "queues join whenever the board comes"
        );
        w.submit(2, 4);
        let s = w.sched.stats(QueueId(2), 0).unwrap();
        assert_eq!((s.in_flight, s.pending), (1, 3), "contended from outside: W = 1 in flight");
        assert!(
            board.last(2).has_work() && board.last(2).has_flag(xhsa_model::stats::FLAG_CONTENDED)
        );
        // The other process finishes; the next pass after the cached read expires sees it.
        *board.external.lock().unwrap() = None;
        w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS - 1);
        assert_eq!(
            w.sched.stats(QueueId(2), 0).unwrap().pending,
            3,
            "a read younger than the cache period is reused"
        );
        w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS);
        assert_eq!(
            w.sched.stats(QueueId(2), 0).unwrap().pending,
            0,
            "uncontended: everything goes"
        );
        assert_eq!(
            w.sched.stats(QueueId(2), CONTENTION_CACHE_NS).unwrap().throttle_ns,
            CONTENTION_CACHE_NS,
            "held from 0 until the board cleared"
        );
        assert_eq!(w.sched.summary(CONTENTION_CACHE_NS).throttle_ns, CONTENTION_CACHE_NS);
        w.gpu(2, 100);
        w.check_executed(2, 4);
        assert!(!board.last(2).has_work(), "the end of the work is published");
        assert_eq!(board.last(2).completed, 4);
        w.sched.remove(QueueId(2), 0);
        w.sched.leave_board();
        assert_eq!(*board.left.lock().unwrap(), vec![QueueId(2), QueueId(1)]);
    }

    #[test]
    fn the_hardware_ring_is_never_overfilled_and_the_shadow_backs_up() {
        let mut w = World::new(2, "");
        w.add(1, prio(0));
        // 8 packets: 7 fit with a tracking barrier, the 8th waits in libxhsa.
        assert_eq!(w.submit(1, 8), 8);
        assert_eq!(w.hw.write_index(&hw_queue(1)), SLOTS);
        assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 1);
        // The application keeps going: libxhsa holds at most a ring's worth.
        assert_eq!(w.submit(1, 16), 8);
        assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 8);
        assert_eq!(
            w.mem.load_u64(shadow_ring(1).amd_queue + READ_DISPATCH_ID),
            15,
            "one left in the shadow ring"
        );
        for _ in 0..20 {
            w.gpu(1, 3);
            assert!(w.hw.write_index(&hw_queue(1)) - w.hw.read_index(&hw_queue(1)) <= SLOTS);
        }
        w.check_executed(1, 16);
    }

    #[test]
    fn an_injected_forwarding_failure_degrades_the_queue_in_order() {
        let mut w = World::new(1, "forward:2");
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.submit(1, 2); // batch 1
        w.submit(2, 3); // batch 2 fails: queue 2 goes Direct with its packets in order
        assert!(w.sched.queue(QueueId(2)).unwrap().is_direct());
        assert!(!w.sched.queue(QueueId(1)).unwrap().is_direct());
        w.submit(2, 2);
        w.gpu(1, 100);
        w.gpu(2, 100);
        w.check_executed(1, 2);
        w.check_executed(2, 5);
        assert_eq!(w.sched.summary(0).degraded, 1);
        let s = w.sched.summary(0);
        assert_eq!((s.taken, s.forwarded), (7, 7));
    }

    /// A failure after the slots were reserved, half way through a batch: the slots not written
    /// hold no-op barriers (the last one a tracking barrier), the doorbell is rung, the packets
    /// not written follow them in order, and the queue degrades.
    #[test]
    fn an_injected_failure_after_the_reserve_fills_the_slots_and_degrades_in_order() {
        let mut w = World::new(1, "forward_after_reserve:1");
        w.add(1, prio(0));
        assert_eq!(w.submit(1, 4), 4);
        assert!(w.sched.queue(QueueId(1)).unwrap().is_direct());
        let h = hw_queue(1);
        // p0, p1, a no-op, a tracking barrier, then p2, p3 again.
        assert_eq!(w.hw.write_index(&h), 6);
        assert_eq!(w.mem.read_packet(h.ring.slot(2)), Packet::no_op());
        assert_eq!(w.mem.read_packet(h.ring.slot(3)), Packet::tracking_barrier(0x5001));
        assert_eq!(w.mem.read_packet(h.ring.slot(4)), app_packet(1, 2));
        assert_eq!(
            w.hw.rings.borrow().first(),
            Some(&(h.queue, 3)),
            "the doorbell covers the filled slots"
        );
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 4);
        assert_eq!((w.fillers[&1], w.barriers[&1]), (1, 1));
        let s = w.sched.summary(0);
        assert_eq!((s.taken, s.forwarded, s.held, s.degraded), (4, 4, 0, 1));
        // Destroy waits for every barrier issued, the filler included.
        assert!(w.sched.close(QueueId(1), &w.mem, 0));
        let Drain::Done { wait_for: Some((_, target)) } =
            w.sched.drain_step(QueueId(1), &w.mem, &w.hw)
        else {
            panic!("one step")
        };
        gpu_until_idle(&mut w, &[1]);
        assert_eq!(TRACKING_START - w.barriers[&1], target);
    }

    /// A real panic while writing a batch (the memory write fails half way), as the edge sees
    /// it: nothing escapes the pass; no reserved slot is left invalid (the model GPU asserts
    /// that); every packet runs once, in order, without the application's help.
    #[test]
    fn a_panic_while_writing_leaves_no_invalid_slot_and_loses_nothing() {
        let mut w = World::new(1, "");
        w.add(1, prio(5));
        w.add(2, prio(0));
        let h = hw_queue(2);
        w.mem.panic_on_write_at(h.ring.slot(1));
        // What the edge does (`run` in src/entry/queues.rs): catch, then degrade everything.
        let edge = |w: &mut World, q: u64, n: u64| {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.submit(q, n))).is_err() {
                w.sched.degrade_all("libxhsa failed internally", &w.mem, &w.hw);
            }
        };
        edge(&mut w, 2, 3); // a batch of three: the second one's write panics
        edge(&mut w, 1, 2);
        edge(&mut w, 2, 2);
        gpu_until_idle(&mut w, &[1, 2]);
        w.check_executed(1, 2);
        w.check_executed(2, 5);
        assert!(
            w.sched.queue(QueueId(2)).unwrap().is_direct(),
            "the queue whose write failed passes through"
        );
        assert!(
            !w.sched.queue(QueueId(1)).unwrap().is_direct(),
            "the others stay scheduled: the failure never left the pass"
        );
    }

    /// The same failure in a passthrough flush and in a destroy's drain: the rest goes again
    /// after the fillers (woken by their tracking barrier), nothing is lost.
    #[test]
    fn failures_after_the_reserve_in_passthrough_and_destroy_lose_nothing() {
        // forward:1 degrades queue 1 at once; its second write fails half way.
        let mut w = World::new(1, "forward:1,forward_after_reserve:2");
        w.add(1, prio(0));
        w.submit(1, 1);
        assert_eq!(w.submit(1, 4), 4);
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 5);
        assert!(w.fillers.get(&1).is_some_and(|&n| n >= 1));
        // Destroy with six published and not taken: the drain's write fails once, then goes on.
        let mut w = World::new(1, "forward_after_reserve:1");
        w.add(1, prio(0));
        let ring = shadow_ring(1);
        for i in 0..6 {
            let p = app_packet(1, i);
            w.mem.write_body(ring.slot(i), &p);
            w.mem.store_header(ring.slot(i), p.header());
        }
        w.mem.store_u64(ring.amd_queue + WRITE_DISPATCH_ID, 6);
        assert!(w.sched.close(QueueId(1), &w.mem, 0));
        let wait = loop {
            match w.sched.drain_step(QueueId(1), &w.mem, &w.hw) {
                Drain::NeedRoom => gpu_until_idle(&mut w, &[1]),
                Drain::Done { wait_for } => break wait_for,
            }
        };
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 6);
        assert_eq!(
            TRACKING_START - w.barriers[&1],
            wait.unwrap().1,
            "the final barrier covers the fillers' too"
        );
    }

    /// Runs the GPU until nothing moves (completion handlers run as ROCr would run them); no
    /// doorbell, no read-index poll: what the application leaves behind must still complete.
    fn gpu_until_idle(w: &mut World, queues: &[u64]) {
        for _ in 0..1000 {
            let before: usize = w.executed.values().map(Vec::len).sum::<usize>()
                + w.barriers.values().sum::<i64>() as usize;
            for &q in queues {
                w.gpu(q, 1000);
            }
            let after: usize = w.executed.values().map(Vec::len).sum::<usize>()
                + w.barriers.values().sum::<i64>() as usize;
            if after == before {
                return;
            }
        }
        panic!("the GPU never went idle");
    }

    /// A queue degraded to passthrough whose packets do not all fit in the hardware ring: a
    /// tracking barrier after what was written, and its completion writes the rest. Before,
    /// the rest waited for the application's next doorbell or read-index poll.
    #[test]
    fn a_degraded_queue_left_with_packets_drains_without_the_application() {
        let mut w = World::new(1, "forward:1");
        w.add(1, prio(0));
        let mut submitted = 0;
        // One doorbell per packet, the GPU busy (executing nothing) meanwhile; the application
        // publishes as long as the shadow has room.
        while w.submit(1, 1) == 1 {
            submitted += 1;
            let h = hw_queue(1);
            assert!(w.hw.write_index(&h) - w.hw.read_index(&h) <= SLOTS);
        }
        assert!(w.sched.queue(QueueId(1)).unwrap().is_direct());
        assert_eq!(
            submitted, 15,
            "7 written untracked, a barrier in the last slot, 8 in the shadow ring"
        );
        assert!(!w.sched.stalled(), "a completion will run the next pass");
        assert_eq!(w.hw.armed.borrow().len(), 1, "one handler, on the barrier");
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 15);
        let s = w.sched.summary(0);
        assert_eq!((s.taken, s.forwarded, s.held), (15, 15, 0));
        // The queue goes on normally afterwards.
        assert_eq!(w.submit(1, 3), 3);
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 18);
    }

    /// Without a completion handler (the runtime refused it) the leftover waits for the
    /// application's next doorbell or read-index poll, as the edge retries when `stalled`.
    #[test]
    fn a_degraded_queue_without_a_handler_is_reported_stalled() {
        let mut w = World::new(1, "forward:1");
        w.hw.refuse_arm = true;
        w.add(1, prio(0));
        while w.submit(1, 1) == 1 {}
        assert!(w.sched.stalled());
        gpu_until_idle(&mut w, &[1]);
        w.sched.pass(&w.mem, &w.hw, 0); // the application polls its read index
        gpu_until_idle(&mut w, &[1]);
        w.sched.pass(&w.mem, &w.hw, 0);
        gpu_until_idle(&mut w, &[1]);
        w.check_executed(1, 15);
        assert!(!w.sched.stalled());
    }

    #[test]
    fn a_refused_completion_handler_degrades_the_queue() {
        let mut w = World::new(1, "");
        w.hw.refuse_arm = true;
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.submit(1, 1);
        assert!(!w.sched.queue(QueueId(1)).unwrap().is_direct(), "nothing held, no handler needed");
        // Queue 2 holds packets behind queue 1: it needs a handler, which is refused.
        w.submit(2, 3);
        assert!(w.sched.queue(QueueId(2)).unwrap().is_direct());
        w.submit(2, 3);
        w.gpu(1, 100);
        w.gpu(2, 100);
        w.check_executed(1, 1);
        w.check_executed(2, 6);
    }

    #[test]
    fn destroy_drains_everything_in_several_passes() {
        let mut w = World::new(1, "");
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.submit(1, 1);
        w.submit(2, 8); // one in flight, seven held by the window
        assert!(w.sched.close(QueueId(2), &w.mem, 0));
        assert_eq!(w.sched.queue(QueueId(2)).unwrap().backlog.len(), 7);
        let mut steps = 0;
        let wait = loop {
            steps += 1;
            match w.sched.drain_step(QueueId(2), &w.mem, &w.hw) {
                Drain::NeedRoom => w.gpu(2, 2),
                Drain::Done { wait_for } => break wait_for,
            }
            assert!(steps < 50);
        };
        assert!(steps > 1, "the hardware ring was too short for one pass");
        let (signal, target) = wait.unwrap();
        assert_eq!(signal, 0x5002);
        w.gpu(2, 100);
        assert_eq!(TRACKING_START - w.barriers[&2], target, "the final barrier covers everything");
        w.check_executed(2, 8);
        let q = w.sched.remove(QueueId(2), 0).unwrap();
        assert_eq!((q.taken, q.forwarded), (8, 8));
        assert_eq!(w.sched.summary(0).forwarded, 9);
        // Queue 1 is unaffected.
        w.gpu(1, 10);
        w.check_executed(1, 1);
    }

    #[test]
    fn inactive_and_failed_queues_drop_what_they_hold_and_ignore_doorbells() {
        let mut w = World::new(1, "");
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.add(3, prio(0));
        w.submit(1, 1);
        w.submit(2, 3);
        w.submit(3, 3);
        w.sched.inactivate(QueueId(2));
        w.sched.fail(QueueId(3));
        assert_eq!(w.submit(2, 1), 1);
        assert!(!w.sched.doorbell(QueueId(2), &w.mem, &w.hw, 0));
        assert!(w.sched.close(QueueId(3), &w.mem, 0));
        assert_eq!(w.sched.drain_step(QueueId(3), &w.mem, &w.hw), Drain::Done { wait_for: None });
    }

    #[test]
    fn stream_priority_orders_queues_within_a_level() {
        let mut w = World::new(1, "");
        w.add(1, prio(0));
        w.add(2, prio(0));
        w.sched.set_priority(QueueId(2), prio(0).with_stream(StreamPriority::High));
        assert_eq!(w.sched.priority(QueueId(2)), Some(prio(0).with_stream(StreamPriority::High)));
        w.submit(2, 2);
        w.submit(1, 3);
        assert_eq!(
            w.sched.stats(QueueId(1), 0).unwrap().in_flight,
            1,
            "held to W under the high stream"
        );
        let _ = FenceScope::None;
    }

    #[test]
    fn an_operator_level_overrides_the_requested_priority_and_keeps_the_stream() {
        let mut w = World::new(1, "");
        w.add(1, prio(0));
        w.sched.set_priority(QueueId(1), prio(0).with_stream(StreamPriority::High));
        let p = w.sched.set_override(QueueId(1), Some(Level::new(-7).unwrap())).unwrap();
        assert_eq!(p, prio(-7).with_stream(StreamPriority::High));
        assert_eq!(w.sched.priority(QueueId(1)), Some(p));
        let st = w.sched.stats(QueueId(1), 0).unwrap();
        assert_eq!(
            (st.priority, st.requested),
            (p.rank(), prio(0).with_stream(StreamPriority::High).rank())
        );
        assert!(st.has_flag(xhsa_model::stats::FLAG_OVERRIDDEN));
        // The application changes its stream priority meanwhile: the operator's level stays.
        w.sched.set_priority(QueueId(1), prio(0).with_stream(StreamPriority::Low));
        assert_eq!(w.sched.priority(QueueId(1)), Some(prio(-7).with_stream(StreamPriority::Low)));
        // Cleared: back to what was asked.
        assert_eq!(
            w.sched.set_override(QueueId(1), None),
            Some(prio(0).with_stream(StreamPriority::Low))
        );
        assert!(!w
            .sched
            .stats(QueueId(1), 0)
            .unwrap()
            .has_flag(xhsa_model::stats::FLAG_OVERRIDDEN));
        assert_eq!(w.sched.set_override(QueueId(9), None), None, "unknown queue");
    }

    #[test]
    fn a_paused_queue_is_held_without_holding_others_back_and_resumes_in_order() {
        let mut w = World::new(1, "");
        w.add(1, prio(5));
        w.add(2, prio(0));
        w.sched.set_paused(QueueId(1), true, 0);
        assert!(w.sched.is_paused(QueueId(1)));
        w.submit(1, 3);
        w.submit(2, 3);
        let st = w.sched.stats(QueueId(1), 0).unwrap();
        assert_eq!((st.pending, st.in_flight), (3, 0), "nothing of a paused queue is forwarded");
        assert_eq!(st.state(), QueueState::Held);
        assert!(
            st.has_flag(xhsa_model::stats::FLAG_PAUSED) && !st.has_work(),
            "its work holds nobody back"
        );
        assert_eq!(
            w.sched.stats(QueueId(2), 0).unwrap().in_flight,
            3,
            "the lower queue runs unthrottled"
        );
        w.sched.set_paused(QueueId(1), false, 0);
        w.sched.pass(&w.mem, &w.hw, 0);
        assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 0);
        w.gpu(1, 10);
        w.check_executed(1, 3);
    }

    #[test]
    fn completions_fill_the_latency_histogram_and_degradation_shows_in_the_state() {
        let mut w = World::new(1, "");
        w.add(1, prio(0));
        w.add(2, prio(5));
        w.submit(2, 1); // completions matter: queue 1's packets are tracked
        w.submit(1, 2);
        w.gpu(1, 10);
        w.gpu(2, 10);
        let st = w.sched.stats(QueueId(1), 0).unwrap();
        assert_eq!(
            st.latency.iter().sum::<u32>() as u64,
            st.completed,
            "one sample per completed packet"
        );
        assert!(st.completed > 0);
        assert_eq!(st.state(), QueueState::Running);
        w.sched.degrade(QueueId(1), Vec::new(), "test", &w.mem, &w.hw);
        assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().state(), QueueState::Degraded);
    }

    proptest::proptest! {
        /// Random submissions, GPU progress and a destroy at the end: every queue's packets run
        /// exactly once, in order, unmodified, and the hardware ring is never overfilled.
        #[test]
        fn packets_are_never_lost_duplicated_or_reordered(
            w in 1u64..4,
            ops in proptest::collection::vec((0u8..3, 1u64..4, 1u64..6), 1..120),
            fault in proptest::option::of((proptest::bool::ANY, 1u64..20)),
        ) {
            let faults = match fault {
                Some((false, n)) => format!("forward:{n}"),
                Some((true, n)) => format!("forward_after_reserve:{n}"),
                None => String::new(),
            };
            let mut world = World::new(w, &faults);
            for q in 1..=3 {
                world.add(q, prio(q as i64));
            }
            let mut submitted: HashMap<u64, u64> = HashMap::new();
            for (op, q, n) in ops {
                match op {
                    0 | 1 => *submitted.entry(q).or_default() += world.submit(q, n),
                    _ => world.gpu(q, n),
                }
                for q in 1..=3 {
                    let h = hw_queue(q);
                    proptest::prop_assert!(world.hw.write_index(&h) - world.hw.read_index(&h) <= SLOTS);
                }
            }
            // Whatever the application left behind completes without it: no doorbell, no poll.
            gpu_until_idle(&mut world, &[1, 2, 3]);
            for q in 1..=3 {
                world.check_executed(q, *submitted.get(&q).unwrap_or(&0));
            }
            for q in 1..=3 {
                proptest::prop_assert!(world.sched.close(QueueId(q), &world.mem, 0));
                let mut guard = 0;
                while world.sched.drain_step(QueueId(q), &world.mem, &world.hw) == Drain::NeedRoom {
                    for r in 1..=3 { world.gpu(r, 4); }
                    guard += 1;
                    proptest::prop_assert!(guard < 1000);
                }
            }
            for q in 1..=3 {
                world.gpu(q, 1000);
                world.check_executed(q, *submitted.get(&q).unwrap_or(&0));
            }
        }
    }
}
