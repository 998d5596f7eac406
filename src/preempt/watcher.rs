//! The process's preemption: its preemptable queues, the policy's state, the mechanisms, and
//! the one watcher thread that acts on them.
//!
//! The watcher blocks on the board's wake word ([`Watch::wait`], a futex in the shared
//! mapping: no spinning) and is woken whenever any process's queue changes priority or starts
//! or stops having work; it then reads the board, asks the [`Policy`] and makes the KFD calls
//! for this process's queues ([`Mechanisms`]). A process can only preempt its own queues (KFD
//! needs ptrace for another's), so every process runs its own watcher. It also does the
//! housekeeping that must not run on an application's thread: clearing the board slots of dead
//! processes ([`Watch::housekeeping`], every [`HOUSEKEEPING_NS`]).
//!
//! Nothing here makes an application thread wait: the application's doorbell only publishes and
//! wakes. Destroying a queue ([`Preemption::forget`]) puts it back first if it is off (KFD blocks
//! the destroy of a suspended queue), under the preemption lock, which the watcher holds only
//! for one decision and its KFD calls.
#![forbid(unsafe_code)]

use super::budget::Budget;
use super::mechanism::{How, KfdPort, Mechanisms, Target};
use super::policy::{Mine, Other, Policy};
use super::settings::PreemptSettings;
use super::sizing::{Look, Sizer, DEFAULT_TARGET_PCT, HORIZON_NS, HYSTERESIS, LOOK_NS};
use crate::path::window::Nanos;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use xhsa_board::layout::{Control, SplitWord};
use xhsa_model::ids::QueueId;
use xhsa_model::partition::{overlaps, Reserve, Split};
use xhsa_model::priority::Priority;
use xhsa_model::stats::BEAT_NS;

/// How often the watcher clears dead processes' board slots (and re-evaluates) when nothing
/// wakes it.
pub const HOUSEKEEPING_NS: Nanos = 1_000_000_000;
/// Wake-to-KFD-call latencies kept for the summary.
pub const LATENCY_SAMPLES: usize = 4096;
/// How soon a failed put-back is retried.
pub const RETRY_NS: Nanos = 50_000_000;
/// How long the debug trap stays on with no queue suspended before it is turned off again
/// (turning it on costs a KFD call and a queue snapshot; leaving it on blocks the runtime's
/// shutdown).
pub const DEBUG_TRAP_IDLE_NS: Nanos = 1_000_000_000;
/// How long the exit path waits for the watcher to let go before giving up on putting queues
/// back itself (KFD puts an exiting process's queues away anyway).
pub const EXIT_WAIT: Duration = Duration::from_millis(100);

/// What the watcher reads and waits on: the board (or a fake).
pub trait Watch: Send + Sync {
    /// The wake word's value, read before looking at the board.
    fn wake_seq(&self) -> u32;
    /// Blocks until the wake word differs from `seen`, or `timeout`.
    fn wait(&self, seen: u32, timeout: Option<Duration>);
    /// This process's queues on the board, and the priorities of the other processes' queues
    /// that have work.
    fn view(&self) -> (Vec<Mine>, Vec<Other>);
    /// Periodic work off the application's threads (dead owners' slots).
    fn housekeeping(&self);
    /// Whether changes of this process's own queues may concern its watcher (it then wants
    /// to be woken by them too).
    fn set_interest(&self, own_changes_matter: bool);
    /// How long ago the last wake-up was published (for the wake-to-KFD-call latency).
    fn wake_age_ns(&self) -> Option<u64>;
    /// `queues` were taken off the GPU (`off`) or put back (published for `xhsa-top`).
    fn preempted(&self, _queues: &[QueueId], _off: bool) {}
    /// Controllers' requests (`xhsactl`) waiting for this process's queues.
    fn controls(&self) -> Vec<(QueueId, Control)> {
        Vec::new()
    }
    /// Answers request `seq` for `queue` (`ACK_*` status and detail).
    fn answer(&self, _queue: QueueId, _seq: u32, _status: u32, _detail: i32) {}
    /// Confirms to the other processes that this one runs and its published work stands (the
    /// board's `beat_ns`; a process that stops confirming holds nobody back for long).
    fn beat(&self) {}
    /// Shows this process's sharing policy and share on its slots
    /// ([`xhsa_board::layout::Slot::sharing_word`]).
    fn show_sharing(&self, _word: u32) {}
    /// The board's live CU split and when it last changed (`CLOCK_MONOTONIC` ms, wrapping).
    fn split(&self) -> Option<(SplitWord, u32)> {
        None
    }
    /// Every queue on the board now, the ones `reserve` puts on its reserved side critical.
    fn sizing_look(&self, _reserve: &Reserve) -> Option<Look> {
        None
    }
    /// Changes the live split from `old` to `new`, unless another process changed it first.
    fn swap_split(&self, _old: SplitWord, _new: SplitWord) -> bool {
        false
    }
}

/// What the live sizing of a GPU's reserve (`XHSA_RESERVE=auto@LEVEL`) needs to know of it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SizingSetup {
    pub reserve: Reserve,
    pub cu_count: u32,
    pub xccs: u32,
}

/// Applies a live size (reserved CUs, 0: none) to this process's queues of the GPU.
pub type Resplit = Arc<dyn Fn(u32) + Send + Sync>;

/// Holds this process's queues in libxhsa (`true`: nothing more of them is forwarded) or lets
/// them go (`false`, and forwards what they hold), on the scheduler; returns whether it did.
/// Called on the watcher's thread without the preemption's lock.
pub type Hold = Arc<dyn Fn(&[QueueId], bool) -> bool + Send + Sync>;

/// Sets the scheduler's horizon ([`crate::path::scheduler::Scheduler::set_horizon`]): half the
/// measured cost of a take-off. Called on the watcher's thread without the preemption's lock.
pub type Horizon = Arc<dyn Fn(Nanos) + Send + Sync>;

/// What carries out a controller's request for one of this process's queues (the scheduler's
/// side: priorities, pauses); returns the `ACK_*` status and its detail.
pub type ControlSink = Arc<dyn Fn(QueueId, Control) -> (u32, i32) + Send + Sync>;

/// What the lock protects.
struct Inner {
    policy: Policy,
    mech: Mechanisms,
    budget: Budget,
    /// Queues KFD knows, by libxhsa queue id, kept current from the runtime's own KFD calls.
    known: BTreeMap<QueueId, Target>,
    /// Queues whose KFD id is not known yet (the runtime's `CREATE_QUEUE` was not seen): found
    /// in KFD's queue snapshot by their ring the first time one of them is to be taken off.
    unresolved: BTreeMap<QueueId, Unresolved>,
    /// KFD's queue snapshot failed: unresolved queues are never taken off.
    snapshot_failed: bool,
    /// Queues off the GPU and how.
    off: BTreeMap<QueueId, How>,
    /// A put-back failed: retry.
    retry_at: Option<Nanos>,
    last_housekeeping: Option<Nanos>,
    /// Wake-up to KFD call latencies of take-offs (ns), the most recent [`LATENCY_SAMPLES`]: from
    /// the board's wake-up, or from when a timed take-off was due if that is later
    /// ([`Policy::timed_due`]).
    wake_to_call: std::collections::VecDeque<u64>,
    /// Counters for the log and the exit summary.
    preemptions: u64,
    restores: u64,
    off_ns: u64,
    holds: u64,
    /// The horizon last given to the scheduler.
    horizon_set: Option<Nanos>,
    /// Since when the debug trap is on with no queue suspended.
    trap_idle_since: Option<Nanos>,
    /// The runtime shut down (`hsa_shut_down`): no more KFD calls, nothing is taken off.
    retired: bool,
    /// An `hsa_shut_down` runs: nothing is taken off.
    held_for_shutdown: bool,
    /// When this process last confirmed its work on the board ([`Watch::beat`]).
    last_beat: Option<Nanos>,
    /// The live sizing of the GPU's reserve (`auto`), once its topology is known.
    sizer: Option<Sizer>,
    /// The live split this process's queues are in.
    applied_split: Option<SplitWord>,
    /// When the sizing looks at the board next.
    next_look: Nanos,
    /// The sharing policy's state last logged.
    last_sharing: Option<super::sharing::ShareStatus>,
}

/// A queue whose KFD id is still to be found: what [`Target`] needs besides the id and size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Unresolved {
    ring_base: u64,
    priority: u32,
    percentage: u32,
}

impl Inner {
    /// `queues` are back on the GPU: no longer off, their time off (to `off_until`) and the
    /// put-back counted, and the policy told (at `at`; `starved` ones get their minimum run).
    /// Every put-back goes through here, whatever brought the queues back.
    fn came_back(&mut self, queues: &[QueueId], starved: &[QueueId], off_until: Nanos, at: Nanos) {
        for q in queues {
            if let State::Off { since } = self.policy.state(*q) {
                self.off_ns += off_until.saturating_sub(since);
            }
            self.off.remove(q);
        }
        self.restores += queues.len() as u64;
        self.policy.put_back(queues, starved, at);
    }

    /// Finds the KFD ids of the unresolved queues in KFD's queue snapshot (by ring base address)
    /// and makes them known; a queue the snapshot does not list is dropped (never taken off).
    /// A failed snapshot is logged once and leaves every unresolved queue at level 1.
    fn resolve(&mut self) {
        let pending = std::mem::take(&mut self.unresolved);
        match self.mech.queue_snapshot() {
            Ok(kfd) => {
                let mut found = 0;
                for (q, u) in &pending {
                    match kfd.iter().find(|k| k.ring_base == u.ring_base) {
                        Some(k) => {
                            found += 1;
                            let t = Target { queue: *q, kfd_id: k.kfd_id, ring_base: u.ring_base, ring_bytes: k.ring_bytes, priority: u.priority, percentage: u.percentage };
                            self.known.insert(*q, t);
                        }
                        None => tracing::warn!("xhsa: queue {q}: KFD lists no queue with its ring {:#x}; it is not preempted", u.ring_base),
                    }
                }
                tracing::info!("xhsa: KFD queue ids of {found} of {} queues found in KFD's queue snapshot ({} KFD queues)", pending.len(), kfd.len());
            }
            Err(e) => {
                self.snapshot_failed = true;
                tracing::error!("xhsa: KFD's queue snapshot failed ({}); this process's queues are not preempted (level 1)", e.0);
            }
        }
    }
}

/// The process's preemption; see the module doc.
pub struct Preemption {
    settings: PreemptSettings,
    /// Carries out controllers' requests, once the process set it.
    control: std::sync::OnceLock<ControlSink>,
    /// Asks the scheduler to track packets it wrote untracked (never waits).
    track_untracked: std::sync::OnceLock<Arc<dyn Fn() + Send + Sync>>,
    inner: Mutex<Inner>,
    said_broken: AtomicBool,
    clock: Box<dyn Fn() -> Nanos + Send + Sync>,
    /// The GPU's live sizing (`XHSA_RESERVE=auto@LEVEL`), once its topology is known.
    sizing: std::sync::OnceLock<SizingSetup>,
    /// Applies a live size to this process's queues.
    resplit: std::sync::OnceLock<Resplit>,
    /// Holds this process's queues in libxhsa and lets them go.
    hold: std::sync::OnceLock<Hold>,
    /// Sets the scheduler's horizon.
    horizon: std::sync::OnceLock<Horizon>,
}

/// Totals for the exit summary.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PreemptSummary {
    pub preemptions: u64,
    pub restores: u64,
    pub off_now: u64,
    pub off_ns: u64,
    /// Times queues were held in libxhsa instead ([`super::policy`], "Hold").
    pub holds: u64,
    /// Wake-up to KFD call of take-offs: (P50, P99, samples), nanoseconds.
    pub wake_to_call: Option<(u64, u64, usize)>,
}

impl Preemption {
    /// Preemption of this process's queues through `port`.
    pub fn new(
        settings: PreemptSettings,
        port: Box<dyn KfdPort>,
        clock: Box<dyn Fn() -> Nanos + Send + Sync>,
    ) -> Preemption {
        let inner = Inner {
            policy: Policy::new(settings),
            mech: Mechanisms::new(port, settings.mode),
            budget: Budget::new(settings.budget_pct),
            known: BTreeMap::new(),
            unresolved: BTreeMap::new(),
            snapshot_failed: false,
            off: BTreeMap::new(),
            retry_at: None,
            last_housekeeping: None,
            wake_to_call: Default::default(),
            preemptions: 0,
            restores: 0,
            trap_idle_since: None,
            retired: false,
            held_for_shutdown: false,
            last_beat: None,
            off_ns: 0,
            holds: 0,
            horizon_set: None,
            sizer: None,
            applied_split: None,
            next_look: 0,
            last_sharing: None,
        };
        Preemption {
            settings,
            control: std::sync::OnceLock::new(),
            track_untracked: std::sync::OnceLock::new(),
            inner: Mutex::new(inner),
            said_broken: AtomicBool::new(false),
            clock,
            sizing: std::sync::OnceLock::new(),
            resplit: std::sync::OnceLock::new(),
            hold: std::sync::OnceLock::new(),
            horizon: std::sync::OnceLock::new(),
        }
    }

    /// Sets what gives the scheduler its horizon (once): half the measured cost of a take-off,
    /// given again whenever that cost moves by more than a quarter, unless preemption is off.
    pub fn set_horizon(&self, hook: Horizon) {
        let _ = self.horizon.set(hook);
    }

    /// Sets what holds this process's queues in libxhsa and lets them go (once); from then on
    /// the policy holds queues beside other processes' higher work where a take-off is not
    /// worth its cost ([`super::policy`], "Hold"), unless preemption is off.
    pub fn set_hold(&self, hook: Hold) {
        if self.hold.set(hook).is_ok() {
            let on = self.settings.mode != super::settings::PreemptMode::Off;
            self.lock().policy.set_holds(on);
        }
    }

    /// Lets every held queue go (the policy forgets the holds); returns whether the scheduler
    /// did. Takes the preemption's lock and then, not holding it, the scheduler's.
    fn release_all(&self) -> bool {
        let held = {
            let mut g = self.lock();
            let held = g.policy.held();
            let now = (self.clock)();
            g.policy.put_back(&held, &[], now);
            held
        };
        match (held.is_empty(), self.hold.get()) {
            (true, _) | (_, None) => true,
            (false, Some(hook)) => hook(&held, false),
        }
    }

    /// Sizes the GPU's reserve live (`XHSA_RESERVE=auto@LEVEL`), from now on (once).
    pub fn set_sizing(&self, setup: SizingSetup) {
        if self.sizing.set(setup).is_ok() {
            let sizes = Split::sizes(setup.cu_count, setup.xccs);
            self.lock().sizer = Some(Sizer::new(sizes, setup.cu_count, DEFAULT_TARGET_PCT));
        }
    }

    /// Sets what applies a live size to this process's queues (once).
    pub fn set_resplit(&self, hook: Resplit) {
        let _ = self.resplit.set(hook);
    }

    /// The live sizing: applies the board's split to this process's queues when it changed, and
    /// every [`LOOK_NS`] ([`super::sizing::TRIAL_LOOK_NS`] while a trial size is not measured
    /// yet) measures the demand and may change the split (docs/partitions.md).
    /// Returns when to look again; `None` without live sizing.
    pub fn size(&self, watch: &dyn Watch) -> Option<Nanos> {
        let setup = *self.sizing.get()?;
        let (split, split_at_ms) = watch.split()?;
        if self.lock().applied_split != Some(split) {
            if let Some(hook) = self.resplit.get() {
                hook(u32::from(split.cus));
            }
            tracing::info!(
                "xhsa: live CU split epoch {}: {} (XHSA_RESERVE={})",
                split.epoch,
                if split.cus == 0 {
                    "the whole GPU for every queue".to_string()
                } else {
                    format!("{} CUs reserved", split.cus)
                },
                setup.reserve
            );
            self.lock().applied_split = Some(split);
        }
        let now = (self.clock)();
        let next_look = self.lock().next_look;
        if now < next_look {
            return Some(next_look);
        }
        let look = watch.sizing_look(&setup.reserve)?;
        let queues = look.queues.len().max(1) as u64;
        let since_change =
            u64::from(((now / 1_000_000) as u32).wrapping_sub(split_at_ms)) * 1_000_000;
        let verdict = {
            let mut g = self.lock();
            g.next_look = now + LOOK_NS;
            let unmap = g.mech.expected_cost();
            let policy = g.policy.sharing().policy;
            let sizer = g.sizer.as_mut()?;
            sizer.follow(policy);
            let v = sizer.look(Look { at: now, ..look }, u32::from(split.cus), since_change, unmap);
            g.next_look = now + sizer.look_interval(u32::from(split.cus), now);
            v
        };
        if let Some(v) = verdict.filter(|v| v.change) {
            let to = split.next(v.best.cus.min(u32::from(u16::MAX)) as u16);
            if watch.swap_split(split, to) {
                // The new size's first look comes at its pace (soon for a trial).
                let mut g = self.lock();
                let next =
                    g.sizer.as_ref().map(|sz| now + sz.look_interval(u32::from(to.cus), now));
                if let Some(next) = next {
                    g.next_look = next;
                }
                drop(g);
                tracing::info!(
                    "xhsa: re-partitioned: {} -> {} reserved CUs ({}): predicted gain {} us over the next {} s > {} x the cost, {} unmaps of {} us; latency-critical slowdown predicted {:.2}x (was {:.2}x), batch share {:.0} % (was {:.0} %)",
                    split.cus,
                    to.cus,
                    if v.best.measured { "measured before" } else { "a trial: not measured yet" },
                    v.gain_ns / 1000,
                    HORIZON_NS / 1_000_000_000,
                    HYSTERESIS,
                    queues,
                    v.cost_ns / queues / 1000,
                    v.best.slowdown,
                    v.now.slowdown,
                    v.best.batch_share * 100.0,
                    v.now.batch_share * 100.0,
                );
            }
        } else if let Some(v) = verdict {
            tracing::debug!(
                "xhsa: live CU split kept at {} CUs: best {} CUs, predicted gain {} us, cost {} us",
                split.cus,
                v.best.cus,
                v.gain_ns / 1000,
                v.cost_ns / 1000
            );
        }
        Some(self.lock().next_look)
    }

    /// Whether queues may be taken off at all (preemption on and KFD reachable).
    pub fn enabled(&self) -> bool {
        self.settings.mode != super::settings::PreemptMode::Off
    }

    /// Sets what asks the scheduler to track the packets it wrote untracked (once): called when
    /// other processes have work while this one shows packets in flight, which may be done
    /// already without anyone having counted them (an idle server whose last packets were
    /// written while it was alone).
    pub fn set_track_untracked(&self, ask: Arc<dyn Fn() + Send + Sync>) {
        let _ = self.track_untracked.set(ask);
    }

    /// Sets what carries out controllers' requests (once).
    pub fn set_control(&self, sink: ControlSink) {
        let _ = self.control.set(sink);
    }

    /// Carries out the controllers' requests waiting on the board and answers them; a request
    /// with nothing to carry it out is answered "unknown". Returns whether there was any.
    pub fn serve_controls(&self, watch: &dyn Watch) -> bool {
        let controls = watch.controls();
        let any = !controls.is_empty();
        for (q, c) in controls {
            let (status, detail) = match self.control.get() {
                Some(sink) => sink(q, c),
                None => (xhsa_board::layout::ACK_UNKNOWN_OP, 0),
            };
            // The board shows the process's sharing policy before the answer: a monitor reading
            // it once the controller has its answer sees the new one.
            let sharing = self.lock().policy.sharing();
            watch.show_sharing(xhsa_board::layout::Slot::sharing_word(
                sharing.policy,
                sharing.share_permille,
            ));
            tracing::info!(
                "xhsa: queue {q}: controller request op {} level {} from uid {}: status {status}",
                c.op,
                c.level,
                c.uid
            );
            watch.answer(q, c.seq, status, detail);
        }
        any
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A queue KFD knows (its hardware queue was created).
    pub fn add(&self, target: Target) {
        let mut g = self.lock();
        if !g.retired {
            g.known.insert(target.queue, target);
        }
    }

    /// Adds queue `queue` whose KFD id is not known (the runtime's `CREATE_QUEUE` was not seen),
    /// with the ring base address of its hardware queue and the KFD priority and percentage
    /// the runtime gave it: its id and ring size are looked up in KFD's queue snapshot when it
    /// is first to be taken off ([`KfdPort::queue_snapshot`]).
    pub fn add_unresolved(&self, queue: QueueId, ring_base: u64, priority: u32, percentage: u32) {
        let mut g = self.lock();
        if !g.retired {
            g.unresolved.insert(queue, Unresolved { ring_base, priority, percentage });
        }
    }

    /// The runtime gave the hardware queue with ring `ring_base` KFD priority `priority` (with
    /// its percentage, which puts a deactivated queue back on) through an `UPDATE_QUEUE` libxhsa
    /// did not see: the priority is kept for the put-back, and a queue libxhsa deactivated is
    /// deactivated again.
    pub fn runtime_priority(&self, ring_base: u64, priority: u32) {
        let mut g = self.lock();
        if let Some(u) = g.unresolved.values_mut().find(|u| u.ring_base == ring_base) {
            u.priority = priority;
            return;
        }
        let Some((q, t)) = g.known.iter_mut().find(|(_, t)| t.ring_base == ring_base) else {
            return;
        };
        t.priority = priority;
        let (q, t) = (*q, *t);
        if g.off.get(&q) == Some(&How::Deactivate) {
            if let Err(e) = g.mech.keep_off(&t) {
                tracing::error!(
                    "xhsa: queue {q} could not be kept off after a priority change ({e})"
                );
            }
        }
    }

    /// The runtime changes a queue's KFD priority or percentage (its own `UPDATE_QUEUE`, seen by
    /// the interposer): `send` makes the runtime's call with the percentage KFD must get, 0 while
    /// libxhsa keeps the queue deactivated, so that the runtime's call does not bring it back
    /// early (the runtime's percentage is restored when libxhsa puts it back). The call is made
    /// under the preemption's lock, so a put-back never runs between the decision and the call
    /// (which would leave the queue off for good). `None` (nothing sent) for a queue this
    /// process's preemption does not know.
    pub fn runtime_update<R>(
        &self,
        kfd_id: u32,
        priority: u32,
        percentage: u32,
        send: impl FnOnce(u32) -> R,
    ) -> Option<R> {
        let mut g = self.lock();
        if g.retired {
            return None;
        }
        let (q, t) = g.known.iter_mut().find(|(_, t)| t.kfd_id == kfd_id)?;
        t.priority = priority;
        t.percentage = percentage;
        let q = *q;
        let pct = if g.off.get(&q) == Some(&How::Deactivate) { 0 } else { percentage };
        Some(send(pct))
    }

    /// A queue is being destroyed: put it back if it is off (KFD blocks destroying a
    /// suspended queue), and forget it.
    ///
    /// Also for `hsa_queue_inactivate` (KFD may give the id to a new queue). A suspended queue
    /// whose resume fails is brought back by turning the debug trap off, which resumes every
    /// queue KFD suspended (destroying a suspended queue would block forever).
    pub fn forget(&self, q: QueueId) {
        let mut g = self.lock();
        if let Some(how) = g.off.remove(&q) {
            if let Some(t) = g.known.get(&q).copied() {
                if let Err(e) = g.mech.put_back(&[(t, how)]) {
                    if how == How::Suspend {
                        tracing::error!("xhsa: queue {q} could not be resumed before its destroy ({e}); turning the debug trap off, which resumes every suspended queue");
                        if let Err(e) = Self::trap_off(&mut g, (self.clock)()) {
                            tracing::error!("xhsa: {e}");
                        }
                    } else {
                        tracing::error!(
                            "xhsa: queue {q} could not be put back before its destroy: {e}"
                        );
                    }
                }
            }
            g.restores += 1;
        }
        g.policy.forget(q);
        g.known.remove(&q);
        g.unresolved.remove(&q);
    }

    /// Turns the debug trap off: KFD resumes every queue it suspended, which then count as put
    /// back.
    fn trap_off(g: &mut Inner, now: Nanos) -> Result<(), String> {
        g.mech.disable_debug_trap()?;
        let resumed: Vec<QueueId> =
            g.off.iter().filter(|(_, h)| **h == How::Suspend).map(|(q, _)| *q).collect();
        g.came_back(&resumed, &[], now, now);
        g.trap_idle_since = None;
        Ok(())
    }

    /// Puts every queue back and turns the debug trap off, waiting for the watcher's step if it
    /// runs one (and going on after a panic in it); what failed is logged.
    pub fn put_all_back(&self) {
        {
            let mut g = self.lock();
            for e in Self::all_back(&mut g, (self.clock)()) {
                tracing::error!("xhsa: {e}");
            }
        }
        if !self.release_all() {
            tracing::error!("xhsa: letting held queues go failed");
        }
    }

    /// [`put_all_back`](Self::put_all_back) at process exit: waits at most [`EXIT_WAIT`] for
    /// the watcher to let go (it may be inside a KFD call, or stopped by the exit), then gives
    /// up (KFD puts an exiting process's queues away itself).
    /// Returns whether it got the lock.
    pub fn put_all_back_at_exit(&self) -> bool {
        // Nothing is logged: at exit the logger's thread-local state may be gone.
        let Some(mut g) = crate::exit_lock::lock_within(&self.inner, EXIT_WAIT) else {
            return false;
        };
        let _ = Self::all_back(&mut g, (self.clock)());
        true
    }

    /// While the runtime's `hsa_shut_down` runs (`true`): every queue back, the debug trap off,
    /// nothing taken off until `false` (the runtime still runs) or [`retire`](Self::retire).
    /// Returns what failed, for the caller to log when it can (`hsa_shut_down` may run from a
    /// library destructor at exit, when logging is no longer possible).
    pub fn hold_for_shutdown(&self, hold: bool) -> Vec<String> {
        let mut errors = {
            let mut g = self.lock();
            g.held_for_shutdown = hold;
            if hold {
                Self::all_back(&mut g, (self.clock)())
            } else {
                Vec::new()
            }
        };
        if hold && !self.release_all() {
            errors.push("letting held queues go failed".into());
        }
        errors
    }

    /// Every queue back, the debug trap off; returns what failed (never logs).
    fn all_back(g: &mut Inner, now: Nanos) -> Vec<String> {
        let mut errors = Vec::new();
        if g.retired {
            return errors;
        }
        let targets: Vec<(Target, How)> =
            g.off.iter().filter_map(|(q, h)| g.known.get(q).map(|t| (*t, *h))).collect();
        if !targets.is_empty() {
            match g.mech.put_back(&targets) {
                Ok(_) => {
                    let queues: Vec<QueueId> = targets.iter().map(|(t, _)| t.queue).collect();
                    g.came_back(&queues, &[], now, now);
                }
                Err(e) => errors.push(format!("putting every queue back failed: {e}")),
            }
        }
        if g.mech.debug_trap_on() {
            if let Err(e) = Self::trap_off(g, now) {
                errors.push(e);
            }
        }
        errors
    }

    /// The runtime shuts down (`hsa_shut_down`, the last one): every queue back, the debug trap
    /// off (before the runtime's own runtime-disable, which blocks while it is on), and no KFD
    /// call from now on (the descriptor closes with the runtime and its number may be reused).
    /// The queues of a runtime started again are scheduled at level 1.
    /// Returns what failed (for the caller to log when it can) and whether this retired it
    /// (false if it was already).
    pub fn retire(&self) -> (Vec<String>, bool) {
        let mut g = self.lock();
        let now = (self.clock)();
        let errors = Self::all_back(&mut g, now);
        let first = !g.retired;
        g.retired = true;
        g.known.clear();
        g.unresolved.clear();
        // The holds were let go when the shutdown began (`hold_for_shutdown`); the runtime is
        // down now, so the scheduler is not asked again.
        let held = g.policy.held();
        g.policy.put_back(&held, &[], now);
        (errors, first)
    }

    /// Another sharing policy from now on (the settings' at start, `xhsactl policy` later).
    pub fn set_sharing(&self, sharing: xhsa_model::sharing::Sharing) {
        self.lock().policy.set_sharing(sharing);
    }

    /// The queues off the GPU now.
    pub fn off(&self) -> Vec<QueueId> {
        self.lock().off.keys().copied().collect()
    }

    /// Totals.
    pub fn summary(&self) -> PreemptSummary {
        let g = self.lock();
        let mut lat: Vec<u64> = g.wake_to_call.iter().copied().collect();
        lat.sort_unstable();
        let wake_to_call = (!lat.is_empty()).then(|| {
            (lat[lat.len() / 2], lat[(lat.len() * 99 / 100).min(lat.len() - 1)], lat.len())
        });
        PreemptSummary {
            preemptions: g.preemptions,
            restores: g.restores,
            off_now: g.off.len() as u64,
            off_ns: g.off_ns,
            holds: g.holds,
            wake_to_call,
        }
    }

    /// The mechanisms' measured costs, for the log.
    pub fn costs(&self) -> String {
        let g = self.lock();
        g.mech
            .costs()
            .iter()
            .filter(|(_, off, _, n)| off.is_some() && *n > 0)
            .map(|(h, off, back, n)| {
                format!(
                    "{}: off {} us, back {} us ({n} times)",
                    h.name(),
                    off.unwrap_or(0) / 1000,
                    back.unwrap_or(0) / 1000
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One evaluation: reads `watch`, decides, makes the KFD calls. Returns when to look again
    /// at the latest.
    pub fn step(&self, watch: &dyn Watch) -> Nanos {
        let now = (self.clock)();
        let mut g = self.lock();
        if g.last_housekeeping.is_none_or(|t| now.saturating_sub(t) >= HOUSEKEEPING_NS) {
            g.last_housekeeping = Some(now);
            drop(g);
            watch.housekeeping();
            g = self.lock();
        }
        if g.retired || g.held_for_shutdown {
            return now + HOUSEKEEPING_NS;
        }
        // The debug trap goes off after a while with nothing suspended.
        let trap_idle_at = if g.mech.debug_trap_on() && !g.off.values().any(|h| *h == How::Suspend)
        {
            let since = *g.trap_idle_since.get_or_insert(now);
            if now.saturating_sub(since) >= DEBUG_TRAP_IDLE_NS {
                if let Err(e) = Self::trap_off(&mut g, now) {
                    tracing::error!("xhsa: {e}");
                }
                None
            } else {
                Some(since + DEBUG_TRAP_IDLE_NS)
            }
        } else {
            g.trap_idle_since = None;
            None
        };
        let (mut mine, others) = watch.view();
        // While this process has work, it confirms it every BEAT_NS at the least: the other
        // processes stop counting work nobody confirms (a stopped process's). So it does while
        // another process's work is below one of its queues: that process keeps its work in
        // flight short beside a higher priority present (the scheduler's horizon) only while
        // that presence is confirmed.
        let working = mine.iter().any(Mine::has_work)
            || others.iter().any(|o| {
                mine.iter().any(|m| m.priority > o.priority && overlaps(o.partition, m.partition))
            });
        let beat_at = if working {
            if g.last_beat.is_none_or(|t| now.saturating_sub(t) >= BEAT_NS / 2) {
                g.last_beat = Some(now);
                watch.beat();
            }
            g.last_beat.map(|t| t + BEAT_NS)
        } else {
            None
        };
        // Counts of packets in flight that may be done unseen are confirmed (a tracking barrier
        // after them) at every look, before anything is weighed against them: an idle queue's
        // within a look of going idle (one barrier per idle stretch, the looks being at least
        // every housekeeping period).
        if mine.iter().any(|m| m.in_flight > 0 && m.unconfirmed) {
            if let Some(ask) = self.track_untracked.get() {
                drop(g);
                ask();
                g = self.lock();
            }
        }
        let resolvable = !g.snapshot_failed && g.mech.usable();
        for m in &mut mine {
            m.preemptable =
                g.known.contains_key(&m.id) || (resolvable && g.unresolved.contains_key(&m.id));
        }
        // Own changes concern this watcher when this process has queues of several priorities
        // (one can preempt another), queues off the GPU, or queues below some other process's
        // work in an overlapping CU partition (one of them starting to have packets in flight is
        // then a reason to act).
        let distinct: std::collections::BTreeSet<Priority> =
            mine.iter().map(|m| m.priority).collect();
        let below_others = mine.iter().any(|m| {
            others.iter().any(|o| o.priority > m.priority && overlaps(o.partition, m.partition))
        });
        watch.set_interest(
            distinct.len() > 1 || !g.off.is_empty() || below_others || g.policy.acts_on_own_work(),
        );
        let cost = g.mech.expected_cost();
        let expected = cost.unwrap_or(0);
        let budget_ok = g.mech.usable() && g.budget.allows(now, expected);
        let budget_at = g.budget.next_allowed(now, expected);
        let mut d = g.policy.decide(now, &mine, &others, cost, budget_ok, budget_at);
        let sharing = g.policy.sharing();
        if g.last_sharing != Some(sharing) {
            tracing::debug!(
                "xhsa: sharing policy {}: held queues get {:.1} % of each period (the higher work's time per packet beside them: {} % of its time without them)",
                sharing.policy,
                f64::from(sharing.share_permille) / 10.0,
                sharing.ratio_pct
            );
            g.last_sharing = Some(sharing);
        }
        watch.show_sharing(xhsa_board::layout::Slot::sharing_word(
            sharing.policy,
            sharing.share_permille,
        ));
        if !g.mech.usable() {
            d.take_off.clear();
        }
        // The horizon: half the measured cost of a take-off (given again when the cost moves by
        // a quarter), so that what is in flight when higher work comes is worth a hold even as
        // the estimates move between two looks.
        if let (Some(c), Some(hook)) = (cost, self.horizon.get().cloned()) {
            let moved = g.horizon_set.is_none_or(|h| c.abs_diff(h) > h / 4);
            if self.settings.mode != super::settings::PreemptMode::Off && moved {
                g.horizon_set = Some(c);
                drop(g);
                hook(c / 2);
                g = self.lock();
            }
        }
        // Holds and releases first: no KFD call, and a hold is what the higher work waits for
        // where a take-off is not worth its cost. The scheduler's lock is taken without the
        // preemption's (the runtime's KFD calls, seen under the scheduler's, take this one).
        if !d.hold.is_empty() || !d.release.is_empty() {
            if let Some(hook) = self.hold.get().cloned() {
                drop(g);
                let released = d.release.is_empty() || hook(&d.release, false);
                let held = d.hold.is_empty() || hook(&d.hold, true);
                g = self.lock();
                if released {
                    g.policy.put_back(&d.release, &d.starved, now);
                }
                if held {
                    g.holds += d.hold.len() as u64;
                    g.policy.held_now(&d.hold, now);
                }
            }
        }
        // Put back first (failed put-backs of earlier steps included).
        let mut back: Vec<QueueId> = d.put_back.clone();
        if g.retry_at.is_some_and(|t| now >= t) {
            let more: Vec<QueueId> = g.off.keys().filter(|q| !back.contains(q)).copied().collect();
            back.extend(more);
        }
        back.retain(|q| g.off.contains_key(q));
        if !back.is_empty() {
            let targets: Vec<(Target, How)> =
                back.iter().filter_map(|q| Some((*g.known.get(q)?, *g.off.get(q)?))).collect();
            let start = (self.clock)();
            let r = g.mech.put_back(&targets);
            let end = (self.clock)();
            g.budget.record(start, end.saturating_sub(start));
            match r {
                Ok(_) => {
                    g.came_back(&back, &d.starved, now, end);
                    if g.mech.debug_trap_on() && !g.off.values().any(|h| *h == How::Suspend) {
                        g.trap_idle_since.get_or_insert(end);
                    }
                    g.retry_at = None;
                    watch.preempted(&back, false);
                }
                Err(e) => {
                    tracing::error!("xhsa: putting queues back on the GPU failed ({e}); retrying");
                    g.retry_at = Some(end + RETRY_NS);
                }
            }
        }
        if d.take_off.iter().any(|q| g.unresolved.contains_key(q)) {
            // The snapshot's debug-trap session costs the device what a preemption does.
            let start = (self.clock)();
            g.resolve();
            let end = (self.clock)();
            g.budget.record(start, end.saturating_sub(start));
        }
        if !d.take_off.is_empty() {
            let targets: Vec<Target> =
                d.take_off.iter().filter_map(|q| g.known.get(q).copied()).collect();
            // From the board's wake-up, or from when a timed take-off was due if later (the
            // end of a minimum run: the wake-up may be long past).
            let since_due = d
                .take_off
                .iter()
                .filter_map(|q| g.policy.timed_due(*q))
                .max()
                .map(|due| (self.clock)().saturating_sub(due));
            if let Some(age) = [watch.wake_age_ns(), since_due].into_iter().flatten().min() {
                if g.wake_to_call.len() == LATENCY_SAMPLES {
                    g.wake_to_call.pop_front();
                }
                g.wake_to_call.push_back(age);
            }
            let start = (self.clock)();
            let r = g.mech.take_off(&targets);
            let end = (self.clock)();
            g.budget.record(start, end.saturating_sub(start));
            // Held queues now off the GPU (their packets in flight did not drain): their holds
            // in libxhsa are let go, so that they come back with the put-back.
            let mut let_go = Vec::new();
            let taken = match r {
                Ok(t) => t,
                Err((why, t)) => {
                    if !self.said_broken.swap(true, Ordering::Relaxed) {
                        tracing::error!("xhsa: preemption failed ({why}); this process goes on at level 1 (no preemption)");
                    }
                    // What was taken off before the failure goes back at once.
                    let targets: Vec<(Target, How)> =
                        t.queues.iter().filter_map(|(q, h)| Some((*g.known.get(q)?, *h))).collect();
                    if !targets.is_empty() && g.mech.put_back(&targets).is_err() {
                        for (q, h) in &t.queues {
                            g.off.insert(*q, *h);
                        }
                        let qs: Vec<QueueId> = t.queues.iter().map(|(q, _)| *q).collect();
                        let_go = g.policy.taken_off(&qs, start);
                        g.retry_at = Some(end + RETRY_NS);
                    }
                    Default::default()
                }
            };
            let qs: Vec<QueueId> = taken.queues.iter().map(|(q, _)| *q).collect();
            for (q, h) in &taken.queues {
                g.off.insert(*q, *h);
            }
            g.preemptions += qs.len() as u64;
            let_go.extend(g.policy.taken_off(&qs, start));
            if !let_go.is_empty() {
                if let Some(hook) = self.hold.get().cloned() {
                    drop(g);
                    hook(&let_go, false);
                    g = self.lock();
                }
            }
            if !qs.is_empty() {
                watch.preempted(&qs, true);
            }
            if !g.off.is_empty() {
                watch.set_interest(true);
            }
        }
        // Said after the KFD calls: formatting and writing it is not on the reaction's path.
        if !d.take_off.is_empty()
            || !d.put_back.is_empty()
            || !d.hold.is_empty()
            || !d.release.is_empty()
            || tracing::enabled!(tracing::Level::TRACE)
        {
            tracing::debug!(
                "xhsa: preemption step: mine {:?}, others with work {:?}, cost {cost:?}, budget {budget_ok}: take off {:?}, put back {:?}, hold {:?}, release {:?}",
                mine.iter().map(|m| (m.id.0, m.priority.rank(), m.pending, m.in_flight, m.packet_ns / 1000, m.own_ns / 1000, m.preemptable, m.unconfirmed)).collect::<Vec<_>>(),
                others.iter().map(|o| (o.priority.rank(), o.partition.0, o.packet_ns / 1000)).collect::<Vec<_>>(),
                d.take_off,
                d.put_back,
                d.hold,
                d.release
            );
        }
        let mut wake = now + HOUSEKEEPING_NS;
        if let Some(t) = beat_at {
            wake = wake.min(t);
        }
        if below_others || !g.off.is_empty() {
            // Work above this process's may go stale without a wake-up (its owner stopped):
            // look again within a beat.
            wake = wake.min(now + BEAT_NS);
        }
        if let Some(t) = trap_idle_at {
            wake = wake.min(t);
        }
        if let Some(t) = d.wake_at {
            wake = wake.min(t);
        }
        // The take-offs and put-backs just made start stretches that end by themselves (the
        // decision above ran before them).
        if let Some(t) = g.policy.deadline_after(now) {
            wake = wake.min(t);
        }
        if let Some(t) = g.retry_at {
            wake = wake.min(t);
        }
        wake
    }

    /// The watcher thread's loop: step, then serve controllers and look at the sizing, then
    /// block on the board until something changes or the earliest deadline. Runs until `stop`
    /// is set.
    ///
    /// The step comes first: a wake-up is most often higher work arriving, and the take-off it
    /// waits for should not wait behind a sizing look (0.1-7 ms of wall time on a loaded host,
    /// measured) or a controller's request. Served requests are stepped on at once (a second
    /// step); a new CU split wakes every watcher through the board.
    pub fn run(&self, watch: &dyn Watch, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            let seen = watch.wake_seq();
            let mut wake_at = self.step(watch);
            if self.serve_controls(watch) {
                wake_at = wake_at.min(self.step(watch));
            }
            if let Some(t) = self.size(watch) {
                wake_at = wake_at.min(t);
            }
            let now = (self.clock)();
            if wake_at > now {
                watch.wait(seen, Some(Duration::from_nanos(wake_at - now)));
            }
        }
    }
}

use super::policy::State;

impl std::fmt::Debug for Preemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preemption").field("settings", &self.settings).finish()
    }
}

/// Starts the watcher thread over `watch` (the board). Returns whether it started. It runs in
/// every mode: with preemption off (`XHSA_PREEMPT=off`, or no KFD access) it still clears dead
/// owners and serves controllers' requests, and never takes a queue off.
pub fn spawn(pre: Arc<Preemption>, watch: Arc<dyn Watch>) -> bool {
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::Builder::new()
        .name("xhsa-watcher".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pre.run(watch.as_ref(), &stop)));
            if r.is_err() {
                tracing::error!("xhsa: the preemption watcher failed internally; putting every queue back and going on at level 1");
                pre.put_all_back();
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::super::mechanism::fake::FakeKfd;
    use super::super::settings::PreemptMode;
    use super::*;
    use std::sync::atomic::AtomicU64;
    use xhsa_model::ids::PartitionId;
    use xhsa_model::priority::Level;

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    #[derive(Default)]
    struct FakeBoard {
        view: Mutex<(Vec<Mine>, Vec<Other>)>,
        housekeeping: AtomicU64,
        beats: AtomicU64,
        /// How long ago the board last woke the watchers.
        wake_age: AtomicU64,
    }

    impl Watch for FakeBoard {
        fn wake_seq(&self) -> u32 {
            0
        }
        fn wait(&self, _: u32, _: Option<Duration>) {}
        fn view(&self) -> (Vec<Mine>, Vec<Other>) {
            self.view.lock().unwrap().clone()
        }
        fn housekeeping(&self) {
            self.housekeeping.fetch_add(1, Ordering::Relaxed);
        }
        fn set_interest(&self, _: bool) {}
        fn wake_age_ns(&self) -> Option<u64> {
            Some(self.wake_age.load(Ordering::Relaxed))
        }
        fn beat(&self) {
            self.beats.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn target(q: u64, id: u32) -> Target {
        Target {
            queue: QueueId(q),
            kfd_id: id,
            ring_base: 0x10000 * q,
            ring_bytes: 65536,
            priority: 7,
            percentage: 100,
        }
    }

    fn low(in_flight: u32) -> Mine {
        Mine {
            id: QueueId(1),
            priority: p(-1),
            pending: 0,
            in_flight,
            packet_ns: 2_000_000,
            own_ns: 0,
            preemptable: false,
            paused: false,
            partition: PartitionId::WHOLE,
            unconfirmed: false,
        }
    }

    fn setup(mode: PreemptMode, k: &FakeKfd) -> (Preemption, Arc<AtomicU64>) {
        let clock = Arc::new(AtomicU64::new(1_000));
        let c = clock.clone();
        let settings = PreemptSettings { mode, ..Default::default() };
        let pre = Preemption::new(
            settings,
            Box::new(k.clone()),
            Box::new(move || c.load(Ordering::Relaxed)),
        );
        pre.add(target(1, 3));
        (pre, clock)
    }

    /// A board on which the watcher's loop makes one round: it records, in the KFD's log, when
    /// the loop read the controllers' requests and the CU split (the sizing look's first read),
    /// and its wait stops the loop.
    struct OneRound {
        view: (Vec<Mine>, Vec<Other>),
        log: Arc<Mutex<Vec<String>>>,
        stop: Arc<AtomicBool>,
        requests: Mutex<Vec<(QueueId, Control)>>,
    }

    impl Watch for OneRound {
        fn wake_seq(&self) -> u32 {
            0
        }
        fn wait(&self, _: u32, _: Option<Duration>) {
            self.stop.store(true, Ordering::Release);
        }
        fn view(&self) -> (Vec<Mine>, Vec<Other>) {
            self.log.lock().unwrap().push("view".into());
            self.view.clone()
        }
        fn housekeeping(&self) {}
        fn set_interest(&self, _: bool) {}
        fn wake_age_ns(&self) -> Option<u64> {
            None
        }
        fn controls(&self) -> Vec<(QueueId, Control)> {
            self.log.lock().unwrap().push("controls".into());
            std::mem::take(&mut *self.requests.lock().unwrap())
        }
        fn split(&self) -> Option<(SplitWord, u32)> {
            self.log.lock().unwrap().push("split".into());
            Some((SplitWord::default(), 0))
        }
    }

    /// What woke the watcher is acted on first: higher work's take-off is not made to wait
    /// behind the controllers' requests or a sizing look (a look took up to 7 ms of wall time on
    /// a loaded host). A request served is stepped on in the same round.
    #[test]
    fn a_take_off_comes_before_the_controls_and_the_sizing_look() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, _) = setup(PreemptMode::Queue, &k);
        pre.set_sizing(SizingSetup {
            reserve: Reserve::parse("auto@1").unwrap(),
            cu_count: 80,
            xccs: 4,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let request = Control { seq: 2, op: xhsa_board::layout::OP_PAUSE, level: 0, uid: 0 };
        let board = OneRound {
            view: (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]),
            log: k.log.clone(),
            stop: stop.clone(),
            requests: Mutex::new(vec![(QueueId(1), request)]),
        };
        pre.run(&board, &stop);
        let log = k.log.lock().unwrap().clone();
        let views: Vec<usize> = (0..log.len()).filter(|&i| log[i] == "view").collect();
        let at = |what: &str| {
            log.iter().position(|l| l == what).unwrap_or_else(|| panic!("no {what}: {log:?}"))
        };
        // The first step takes the queue off; then the request; then a second step (it views
        // the board again); then the sizing look.
        assert_eq!(views.len(), 2, "{log:?}");
        assert!(views[0] < at("update 3 0"), "{log:?}");
        assert!(at("update 3 0") < at("controls"), "{log:?}");
        assert!(at("controls") < views[1] && views[1] < at("split"), "{log:?}");
    }

    #[test]
    fn the_watcher_takes_a_low_queue_off_and_puts_it_back() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        assert_eq!(board.housekeeping.load(Ordering::Relaxed), 1);
        // The runtime changes the priority meanwhile: a suspended queue keeps its percentage.
        assert_eq!(pre.runtime_update(3, 9, 100, |pct| pct), Some(100));
        clock.fetch_add(5_000_000, Ordering::Relaxed);
        *board.view.lock().unwrap() = (vec![low(2)], vec![]);
        pre.step(&board);
        assert!(pre.off().is_empty());
        let s = pre.summary();
        assert_eq!((s.preemptions, s.restores, s.off_now), (1, 1, 0));
        assert_eq!(s.off_ns, 5_000_000);
        assert_eq!(*k.log.lock().unwrap(), vec!["enable", "suspend [3]", "resume [3]"]);
    }

    /// A take-off answering higher work is timed from the board's wake-up; one at the end of a
    /// minimum run (the higher work there all along, its wake-up long past) from when it was
    /// due.
    #[test]
    fn the_reaction_time_of_a_timed_take_off_runs_from_when_it_was_due() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        board.wake_age.store(30_000, Ordering::Relaxed);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        assert_eq!(pre.summary().wake_to_call, Some((30_000, 30_000, 1)));
        // The starvation bound: back for its minimum run, then off again once it is over.
        clock.fetch_add(PreemptSettings::default().max_preempted_ns, Ordering::Relaxed);
        pre.step(&board);
        assert!(pre.off().is_empty());
        let State::Running { exempt_until } = pre.lock().policy.state(QueueId(1)) else {
            panic!("running")
        };
        assert!(exempt_until > clock.load(Ordering::Relaxed), "a minimum run");
        board.wake_age.store(500_000_000, Ordering::Relaxed);
        clock.store(exempt_until + 2_000_000, Ordering::Relaxed);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        let (_, p99, n) = pre.summary().wake_to_call.expect("two samples");
        assert_eq!((p99, n), (2_000_000, 2), "2 ms after it was due, not the wake's 500 ms");
    }

    /// A process with work confirms it on the board at least every beat (others stop counting
    /// work nobody confirms), and one below others' work looks again within a beat even if no
    /// wake-up comes (their owner may have stopped).
    #[test]
    fn the_watcher_confirms_its_work_every_beat_and_looks_again_within_one() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Off, &k);
        let board = FakeBoard::default();
        // Idle and alone: nothing to confirm, nothing to look at before the housekeeping.
        *board.view.lock().unwrap() = (vec![low(0)], vec![]);
        let now = clock.load(Ordering::Relaxed);
        assert_eq!(pre.step(&board), now + HOUSEKEEPING_NS);
        assert_eq!(board.beats.load(Ordering::Relaxed), 0);
        // With work: confirmed at once, and again one beat later at the latest.
        *board.view.lock().unwrap() = (vec![low(3)], vec![]);
        assert_eq!(pre.step(&board), now + BEAT_NS);
        assert_eq!(board.beats.load(Ordering::Relaxed), 1);
        // Steps in between (wake-ups of the board) confirm no more often than every half beat.
        clock.fetch_add(BEAT_NS / 4, Ordering::Relaxed);
        assert_eq!(pre.step(&board), now + BEAT_NS);
        assert_eq!(board.beats.load(Ordering::Relaxed), 1);
        clock.store(now + BEAT_NS, Ordering::Relaxed);
        assert_eq!(pre.step(&board), now + 2 * BEAT_NS);
        assert_eq!(board.beats.load(Ordering::Relaxed), 2);
        // Idle again, below another process's work: no beats, but a look within a beat.
        *board.view.lock().unwrap() = (vec![low(0)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        let at = now + BEAT_NS + 1;
        clock.store(at, Ordering::Relaxed);
        assert_eq!(pre.step(&board), at + BEAT_NS);
        assert_eq!(board.beats.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_deactivated_queue_stays_off_when_the_runtime_updates_it_and_gets_its_percentage_back() {
        let k = FakeKfd::default();
        let (pre, _) = setup(PreemptMode::Queue, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.runtime_update(3, 11, 50, |pct| pct), Some(0), "kept off");
        assert_eq!(
            pre.runtime_update(99, 11, 50, |pct| pct),
            None,
            "a queue it does not know: not its call"
        );
        *board.view.lock().unwrap() = (vec![low(2)], vec![]);
        pre.step(&board);
        assert_eq!(*k.log.lock().unwrap(), vec!["update 3 0", "update 3 50"]);
        assert_eq!(pre.runtime_update(3, 11, 100, |pct| pct), Some(100));
    }

    #[test]
    fn a_failed_preemption_falls_back_to_level_1_and_nothing_stays_off() {
        let k = FakeKfd { fail_suspend: true, ..Default::default() };
        let (pre, _) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert!(pre.off().is_empty());
        pre.step(&board);
        assert_eq!(
            k.log.lock().unwrap().iter().filter(|l| l.starts_with("suspend")).count(),
            1,
            "no second try"
        );
    }

    #[test]
    fn a_failed_put_back_is_retried_and_stops_preemption() {
        let k = FakeKfd::default();
        let (pre, clock) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        *k.fail_resume.lock().unwrap() = true;
        *board.view.lock().unwrap() = (vec![low(2)], vec![]);
        let wake = pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)], "still off after the failed resume");
        assert!(wake <= clock.load(Ordering::Relaxed) + RETRY_NS);
        *k.fail_resume.lock().unwrap() = false;
        clock.fetch_add(RETRY_NS, Ordering::Relaxed);
        pre.step(&board);
        assert!(pre.off().is_empty());
        // A failed call stopped preemption for the process.
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert!(pre.off().is_empty());
    }

    #[test]
    fn an_unresolved_queue_gets_its_kfd_id_from_the_snapshot_when_first_taken_off() {
        use super::super::mechanism::SnapshotQueue;
        let snap = vec![SnapshotQueue {
            kfd_id: 9,
            ring_base: 0xa000,
            ring_bytes: 8192,
            gpu_id: 1,
            queue_type: 2,
        }];
        let k = FakeKfd { snapshot: Some(snap), ..Default::default() };
        let settings = PreemptSettings { mode: PreemptMode::Queue, ..Default::default() };
        let pre = Preemption::new(settings, Box::new(k.clone()), Box::new(|| 1_000));
        pre.add_unresolved(QueueId(1), 0xa000, 7, 100);
        // A priority change before the id is known is kept for the put-back.
        pre.runtime_priority(0xa000, 0);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(0)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert!(k.log.lock().unwrap().is_empty(), "no snapshot before a queue is to be taken off");
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        // The runtime's own priority change put the deactivated queue back on: off again.
        pre.runtime_priority(0xa000, 11);
        *board.view.lock().unwrap() = (vec![low(2)], vec![]);
        pre.step(&board);
        assert!(pre.off().is_empty());
        assert_eq!(
            *k.log.lock().unwrap(),
            vec!["snapshot", "update 9 0", "update 9 0", "update 9 100"]
        );
    }

    #[test]
    fn a_failed_snapshot_leaves_unresolved_queues_at_level_1() {
        let k = FakeKfd { snapshot: None, ..Default::default() };
        let settings = PreemptSettings { mode: PreemptMode::Queue, ..Default::default() };
        let pre = Preemption::new(settings, Box::new(k.clone()), Box::new(|| 1_000));
        pre.add_unresolved(QueueId(1), 0xa000, 7, 100);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        pre.step(&board);
        assert!(pre.off().is_empty());
        assert_eq!(*k.log.lock().unwrap(), vec!["snapshot"], "asked once");
    }

    #[test]
    fn destroy_puts_a_queue_back_first() {
        let k = FakeKfd::default();
        let (pre, _) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        pre.forget(QueueId(1));
        assert!(pre.off().is_empty());
        assert_eq!(k.log.lock().unwrap().last().unwrap(), "resume [3]");
    }

    #[test]
    fn the_runtimes_update_and_a_put_back_never_interleave() {
        let k = FakeKfd::default();
        let (pre, _) = setup(PreemptMode::Queue, &k);
        let pre = Arc::new(pre);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        // The runtime's call is decided and made under the lock: a put-back waiting for it
        // comes after the call and restores the runtime's new percentage.
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let log = k.log.clone();
        let p2 = pre.clone();
        let runtime = std::thread::spawn(move || {
            p2.runtime_update(3, 11, 60, |pct| {
                entered_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                log.lock().unwrap().push(format!("runtime update 3 {pct}"));
            })
        });
        entered_rx.recv().unwrap();
        let p3 = pre.clone();
        let watcher = std::thread::spawn(move || {
            let board = FakeBoard::default();
            *board.view.lock().unwrap() = (vec![low(2)], vec![]);
            p3.step(&board);
        });
        go_tx.send(()).unwrap();
        runtime.join().unwrap();
        watcher.join().unwrap();
        assert!(pre.off().is_empty());
        assert_eq!(
            *k.log.lock().unwrap(),
            vec!["update 3 0", "runtime update 3 0", "update 3 60"],
            "kept off by the runtime, then put back with its percentage"
        );
    }

    /// The hold hook's calls (queues, held), as [`record_holds`] keeps them.
    type HoldCalls = Arc<Mutex<Vec<(Vec<QueueId>, bool)>>>;

    /// Gives `pre` a hold hook that records its calls into `calls` and says it carried them
    /// out as `works` says.
    fn record_holds(pre: &Preemption, calls: &HoldCalls, works: Arc<AtomicBool>) {
        let c = calls.clone();
        pre.set_hold(Arc::new(move |qs, held| {
            c.lock().unwrap().push((qs.to_vec(), held));
            works.load(Ordering::Relaxed)
        }));
    }

    /// The state a hold that does not drain starts from: a first take-off of queues `ids` (its
    /// cost unknown: worth it) measures the cost, 450 us, and they go back; then, beside higher
    /// work again, two packets of 100 us each by their own time: not worth a take-off, held.
    fn held_after_a_measured_take_off(
        pre: &Preemption,
        board: &FakeBoard,
        clock: &AtomicU64,
        calls: &HoldCalls,
        ids: &[u64],
    ) {
        let mine =
            |m: Mine| -> Vec<Mine> { ids.iter().map(|&q| Mine { id: QueueId(q), ..m }).collect() };
        let queues: Vec<QueueId> = ids.iter().map(|&q| QueueId(q)).collect();
        let higher = vec![Other::new(p(3), PartitionId::WHOLE)];
        *board.view.lock().unwrap() = (mine(low(2)), higher.clone());
        pre.step(board);
        assert_eq!(pre.off(), queues);
        *board.view.lock().unwrap() = (mine(low(2)), vec![]);
        for _ in 0..2 {
            clock.fetch_add(1_000_000, Ordering::Relaxed);
            pre.step(board);
        }
        assert!(pre.off().is_empty());
        let short = Mine { packet_ns: 100_000, own_ns: 100_000, ..low(2) };
        *board.view.lock().unwrap() = (mine(short), higher);
        clock.fetch_add(1_000_000, Ordering::Relaxed);
        pre.step(board);
        assert_eq!(calls.lock().unwrap().last().cloned(), Some((queues, true)));
        assert!(pre.off().is_empty());
    }

    #[test]
    fn a_held_queue_whose_packets_do_not_drain_is_taken_off_and_its_hold_let_go() {
        let k = FakeKfd { cost_ns: 450_000, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Queue, &k);
        let calls = HoldCalls::default();
        record_holds(&pre, &calls, Arc::new(AtomicBool::new(true)));
        let last = || calls.lock().unwrap().last().cloned();
        let board = FakeBoard::default();
        held_after_a_measured_take_off(&pre, &board, &clock, &calls, &[1]);
        // Neither completes within a round trip (900 us): taken off, and its hold let go (off
        // the GPU, it comes back with the put-back).
        clock.fetch_add(1_000_000, Ordering::Relaxed);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        assert_eq!(last(), Some((vec![QueueId(1)], false)));
        assert_eq!(k.log.lock().unwrap().last().map(String::as_str), Some("update 3 0"));
        assert_eq!(pre.summary().preemptions, 2);
    }

    /// The double fault: a take-off of two held queues fails after the first was taken off, and
    /// putting that one back fails too. It stays off (retried), and its hold in libxhsa is let go
    /// (it comes back with the put-back rather than stay held after it); the retry puts it back.
    #[test]
    fn a_held_queue_left_off_by_a_failed_take_off_and_put_back_has_its_hold_let_go() {
        let k = FakeKfd { cost_ns: 450_000, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Queue, &k);
        pre.add(target(2, 4));
        let calls = HoldCalls::default();
        record_holds(&pre, &calls, Arc::new(AtomicBool::new(true)));
        let last = || calls.lock().unwrap().last().cloned();
        let board = FakeBoard::default();
        held_after_a_measured_take_off(&pre, &board, &clock, &calls, &[1, 2]);
        // They do not drain: the take-off deactivates queue 1, fails on queue 2, and putting
        // queue 1 back fails.
        *k.updates_left.lock().unwrap() = Some(1);
        clock.fetch_add(1_000_000, Ordering::Relaxed);
        let wake = pre.step(&board);
        let log = k.log.lock().unwrap().clone();
        assert_eq!(log[log.len() - 3..], ["update 3 0", "update 4 0", "update 3 100"]);
        assert_eq!(pre.off(), vec![QueueId(1)], "off until a put-back succeeds");
        assert_eq!(last(), Some((vec![QueueId(1)], false)), "its hold let go");
        assert!(wake <= clock.load(Ordering::Relaxed) + RETRY_NS, "a retry is due");
        // KFD works again: the retry puts it back, the higher work still there.
        *k.updates_left.lock().unwrap() = None;
        clock.fetch_add(RETRY_NS, Ordering::Relaxed);
        pre.step(&board);
        assert!(pre.off().is_empty());
        assert_eq!(k.log.lock().unwrap().last().map(String::as_str), Some("update 3 100"));
    }

    #[test]
    fn holds_go_through_the_scheduler_and_are_let_go_whenever_the_watcher_stops() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Queue, &k);
        let calls = HoldCalls::default();
        let works = Arc::new(AtomicBool::new(true));
        record_holds(&pre, &calls, works.clone());
        let last = || calls.lock().unwrap().last().cloned();
        let board = FakeBoard::default();
        // A queue KFD does not know, beside another process's higher work: held, not taken off.
        let lone = Mine { id: QueueId(2), ..low(2) };
        let higher = vec![Other::new(p(3), PartitionId::WHOLE)];
        *board.view.lock().unwrap() = (vec![lone], higher.clone());
        pre.step(&board);
        assert_eq!(last(), Some((vec![QueueId(2)], true)));
        assert!(pre.off().is_empty());
        assert_eq!(pre.summary().holds, 1);
        // The higher work is gone (no take-off measured: no wait): let go, with a pass.
        *board.view.lock().unwrap() = (vec![lone], vec![]);
        clock.fetch_add(1_000_000, Ordering::Relaxed);
        pre.step(&board);
        assert_eq!(last(), Some((vec![QueueId(2)], false)));
        // A release the scheduler could not carry out is asked again at the next look.
        *board.view.lock().unwrap() = (vec![lone], higher.clone());
        pre.step(&board);
        works.store(false, Ordering::Relaxed);
        *board.view.lock().unwrap() = (vec![lone], vec![]);
        pre.step(&board);
        works.store(true, Ordering::Relaxed);
        let n = calls.lock().unwrap().len();
        pre.step(&board);
        assert_eq!(calls.lock().unwrap().len(), n + 1);
        assert_eq!(last(), Some((vec![QueueId(2)], false)));
        // Held again, then the watcher fails: let go.
        *board.view.lock().unwrap() = (vec![lone], higher.clone());
        pre.step(&board);
        assert_eq!(last(), Some((vec![QueueId(2)], true)));
        pre.put_all_back();
        assert_eq!(last(), Some((vec![QueueId(2)], false)));
        // Held again, then the runtime shuts down: let go, and nothing is held meanwhile.
        pre.step(&board);
        assert_eq!(last(), Some((vec![QueueId(2)], true)));
        pre.hold_for_shutdown(true);
        assert_eq!(last(), Some((vec![QueueId(2)], false)));
        let n = calls.lock().unwrap().len();
        pre.step(&board);
        assert_eq!(calls.lock().unwrap().len(), n, "no hold while the runtime shuts down");
        pre.hold_for_shutdown(false);
        pre.step(&board);
        assert_eq!(last(), Some((vec![QueueId(2)], true)));
        // With preemption off nothing is held.
        let (off, _) = setup(PreemptMode::Off, &k);
        record_holds(&off, &calls, Arc::new(AtomicBool::new(true)));
        let n = calls.lock().unwrap().len();
        off.step(&board);
        assert_eq!(calls.lock().unwrap().len(), n);
    }

    #[test]
    fn a_panic_in_the_watchers_step_leaves_nothing_off() {
        struct Exploding(FakeBoard, std::sync::atomic::AtomicBool);
        impl Watch for Exploding {
            fn wake_seq(&self) -> u32 {
                0
            }
            fn wait(&self, _: u32, _: Option<Duration>) {}
            fn view(&self) -> (Vec<Mine>, Vec<Other>) {
                if self.1.load(Ordering::Relaxed) {
                    panic!("a bug in the watcher's step");
                }
                self.0.view()
            }
            fn housekeeping(&self) {}
            fn set_interest(&self, _: bool) {}
            fn wake_age_ns(&self) -> Option<u64> {
                None
            }
        }
        let k = FakeKfd::default();
        let (pre, _) = setup(PreemptMode::Suspend, &k);
        let board = Exploding(FakeBoard::default(), std::sync::atomic::AtomicBool::new(false));
        *board.0.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        board.1.store(true, Ordering::Relaxed);
        // The step panics holding the lock (poisoning it), as spawn's catch_unwind sees it.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pre.step(&board)));
        assert!(r.is_err());
        pre.put_all_back();
        assert!(pre.off().is_empty(), "put back despite the poisoned lock");
        assert_eq!(
            k.log.lock().unwrap().iter().rev().take(2).cloned().collect::<Vec<_>>(),
            vec!["disable", "resume [3]"]
        );
    }

    #[test]
    fn the_debug_trap_goes_off_when_nothing_was_suspended_for_a_while_and_at_shutdown() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        *board.view.lock().unwrap() = (vec![low(0)], vec![]);
        pre.step(&board);
        assert!(pre.off().is_empty());
        assert!(!k.log.lock().unwrap().contains(&"disable".to_string()), "not at once");
        clock.fetch_add(DEBUG_TRAP_IDLE_NS / 2, Ordering::Relaxed);
        let wake = pre.step(&board);
        assert!(
            wake <= clock.load(Ordering::Relaxed) + DEBUG_TRAP_IDLE_NS / 2,
            "the watcher wakes for it"
        );
        clock.fetch_add(DEBUG_TRAP_IDLE_NS / 2, Ordering::Relaxed);
        pre.step(&board);
        assert_eq!(k.log.lock().unwrap().last().unwrap(), "disable");
        // A new suspension enables it again; the runtime's shutdown turns it off and retires.
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        pre.retire();
        assert!(pre.off().is_empty());
        let log = k.log.lock().unwrap().clone();
        assert_eq!(&log[log.len() - 4..], ["enable", "suspend [3]", "resume [3]", "disable"]);
        // Retired: no more KFD calls, whatever the board says.
        pre.step(&board);
        pre.add(target(2, 4));
        assert_eq!(pre.runtime_update(3, 1, 1, |p| p), None);
        assert_eq!(*k.log.lock().unwrap(), log);
    }

    #[test]
    fn a_suspended_queue_that_cannot_be_resumed_before_its_destroy_is_resumed_by_turning_the_trap_off(
    ) {
        let k = FakeKfd::default();
        let (pre, _) = setup(PreemptMode::Suspend, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        *k.fail_resume.lock().unwrap() = true;
        pre.forget(QueueId(1));
        assert!(pre.off().is_empty());
        assert_eq!(k.log.lock().unwrap().last().unwrap(), "disable");
    }

    #[test]
    fn queues_put_back_for_a_shutdown_that_keeps_the_runtime_are_preempted_again() {
        let k = FakeKfd { cost_ns: 0, ..Default::default() };
        let (pre, clock) = setup(PreemptMode::Queue, &k);
        let board = FakeBoard::default();
        *board.view.lock().unwrap() = (vec![low(2)], vec![Other::new(p(3), PartitionId::WHOLE)]);
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        clock.fetch_add(1_000_000, Ordering::Relaxed);
        // An hsa_shut_down that leaves the runtime up (another hsa_init holds it).
        assert!(pre.hold_for_shutdown(true).is_empty());
        assert!(pre.off().is_empty());
        assert!(pre.hold_for_shutdown(false).is_empty());
        let s = pre.summary();
        assert_eq!(
            (s.preemptions, s.restores, s.off_ns),
            (1, 1, 1_000_000),
            "the time off and the put-back are counted"
        );
        // Higher work still waits: the queue goes off again.
        pre.step(&board);
        assert_eq!(pre.off(), vec![QueueId(1)]);
        assert_eq!(*k.log.lock().unwrap(), vec!["update 3 0", "update 3 100", "update 3 0"]);
    }
}
