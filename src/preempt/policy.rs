//! When a queue of this process is taken off the GPU and when it comes back: pure decisions over
//! what the board says, with time passed in.
//!
//! **Take off** a running queue `q` when all of these hold:
//! - higher-priority work exists: some other queue (of this process or of any other process on
//!   the GPU, from the board) with a higher priority has packets pending or in flight, in a CU
//!   partition that overlaps `q`'s (work on disjoint CUs, the two sides of an `XHSA_RESERVE`
//!   split, never takes the other side's queues off; [`xhsa_model::partition::overlaps`]);
//! - `q` has packets in flight on the hardware (held packets are the level-1 window's business);
//! - its work in flight would delay that work by more than a preemption costs: `in_flight ×`
//!   its packets' own time (measured while no higher work was beside it; the time per packet
//!   with the waits for higher work included while that is not measured yet,
//!   [`crate::path::packet_time`]) above the measured cost of taking it off (either unknown
//!   counts as worth it);
//! - its in-flight count is confirmed: a queue whose in-flight packets were written while
//!   libxhsa did not track completions (an idle queue's last packets, written while its process
//!   was alone: `FLAG_UNCONFIRMED`) waits up to [`CONFIRM_NS`], or a round trip's cost (twice
//!   the measured cost of a take-off) if more, while the watcher has a tracking barrier written
//!   after them; an idle queue's count drops to 0 within a barrier's round trip
//!   and it is never taken off, a busy one is taken off once that time has passed;
//! - `q` is not in its minimum run after the starvation bound put it back;
//! - the device-wide preemption budget allows it ([`super::budget`]).
//!
//! **Put back** a preempted queue once no higher-priority work has been pending or in flight
//! (in an overlapping partition) for as long as a round trip costs — putting it back and taking
//! it off again, twice the measured cost of a preemption — or when it has been off for the
//! starvation bound (`XHSA_PREEMPT_MAX_MS`); in the latter case it then runs at least
//! `XHSA_PREEMPT_MIN_RUN_MS` before it can be taken off again. Putting back is never delayed by
//! the budget. The wait before putting back is the ski-rental rule: latency-critical work often
//! pauses only briefly (a server's host code between two decode steps, between two kernels of a
//! request); putting the batch queue back for such a pause costs two device-wide unmaps, the
//! second one delaying the next step. Waiting as long as the round trip would cost, and no
//! longer, costs at most twice what knowing the pause's length in advance would. Once the
//! higher work's pauses have been seen ([`super::pauses`]), the wait covers the longest recent
//! pause shorter than a round trip: none beside a server whose pauses are all long (a request
//! every 50 ms), just over the step pauses of one that pauses briefly between decode steps.
//!
//! **Hold.** Where a take-off is not worth its cost (short packets in flight), cannot be made
//! (KFD does not know the queue, or the budget is spent) or is not needed (packets waiting, none
//! in flight), a lower queue beside **another process's** higher work is *held* in libxhsa
//! instead: nothing more of it is forwarded (the level-1 window would let it keep `W` packets
//! running; a batch process's short kernels, each taking the CUs the latency-critical kernels
//! leave between two of theirs, cost a ResNet-18 request beside BERT-base as much as an
//! unmap), its packets in flight drain, and no KFD call is made. A hold follows the rules of an
//! off stretch — the starvation bound and the sharing policy's periods, then the minimum run;
//! let go once the higher work is gone, after the same wait as a put-back (the queue would
//! otherwise forward at once what it holds into the higher work's next step) — and is let go
//! whenever the watcher stops (shutdown, a failure). Higher work of the same process does not
//! hold a queue (its streams may wait for each other: the window keeps them moving).
//!
//! **A hold that does not drain** is taken off. A hold bets that the packets in flight finish
//! sooner than a take-off costs, by an own time per packet that is the least of the last one to
//! two seconds ([`crate::path::packet_time`]): right for a batch process of short kernels slowed
//! by another's long ones, wrong for one whose kernels span 100x (a training step's elementwise
//! kernels and its GEMMs: two GEMMs of 120 ms of wall time held behind an estimate of 2.7 ms
//! delayed an LLM decode step). So when no packet of a held queue in flight has completed for a
//! round trip's cost (twice the measured cost of a take-off), it is taken off (the budget
//! allowing), its stretch going on from the hold's start, and its hold in libxhsa is let go (it
//! is off the GPU: what it forwards waits there). A wrong bet costs the higher work at most a
//! round trip more than the take-off it should have had, the ski-rental bound again.
//!
//! How long "off" and "on" last under higher work, and the utilisation cap, are the sharing
//! policy's (`XHSA_POLICY`, [`super::sharing`]): strict priority is the starvation bound above;
//! weights and the SLO policy give held queues a share of each period; a cap takes a queue of
//! this process off once it has been busy for its share of a period, higher work or not, and
//! puts it back after the rest of the period (or later, by the rules above, if higher work came).
//!
//! A queue an operator **paused** (`xhsactl pause`) is taken off as soon as it has packets in
//! flight, whatever the cost and the budget, and stays off, without the starvation bound, until
//! it is resumed; its work counts as no one's higher work.
#![forbid(unsafe_code)]

use super::pauses::Pauses;
use super::settings::PreemptSettings;
use super::sharing::{Sample, ShareState, ShareStatus};
use crate::path::window::Nanos;
use std::collections::{BTreeMap, BTreeSet};
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::partition::overlaps;
use xhsa_model::priority::Priority;
use xhsa_model::sharing::Sharing;

/// A queue of another process with work, as the board shows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Other {
    pub priority: Priority,
    pub partition: PartitionId,
    /// Stable while the queue lives (its owner's token and queue id).
    pub key: u64,
    /// Its measured time per packet (0: unknown).
    pub packet_ns: u64,
}

impl Other {
    /// Work at `priority` in `partition`, nothing measured.
    pub fn new(priority: Priority, partition: PartitionId) -> Other {
        Other { priority, partition, key: 0, packet_ns: 0 }
    }
}

/// One queue of this process as the board shows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mine {
    pub id: QueueId,
    pub priority: Priority,
    pub pending: u32,
    pub in_flight: u32,
    /// Measured time per packet (0: unknown).
    pub packet_ns: u64,
    /// Measured time per packet over the busy periods without higher work beside it (0:
    /// unknown): what its packets in flight would cost higher work that has priority.
    pub own_ns: u64,
    /// Whether KFD knows the queue (it can be taken off at all).
    pub preemptable: bool,
    /// An operator paused it (`xhsactl pause`): off the GPU until resumed, whatever else runs.
    pub paused: bool,
    /// Its CU partition.
    pub partition: PartitionId,
    /// Its in-flight count may hold packets done unseen (`FLAG_UNCONFIRMED`).
    pub unconfirmed: bool,
}

impl Mine {
    /// Its packets' own time, as far as measured: without the waits for higher work when a
    /// period without it was measured, else with them (an upper bound).
    pub fn own_packet_ns(&self) -> u64 {
        xhsa_model::stats::own_time_or_all(self.own_ns, self.packet_ns)
    }

    /// Whether it has work that lower priorities must yield to (a paused queue's does not count).
    pub(super) fn has_work(&self) -> bool {
        !self.paused && (self.pending > 0 || self.in_flight > 0)
    }
}

/// A queue's preemption state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// On the GPU; not to be taken off before `exempt_until`.
    Running { exempt_until: Nanos },
    /// Off the GPU since `since`.
    Off { since: Nanos },
    /// Held in libxhsa since `since`: on the GPU, but nothing more of it is forwarded, so its
    /// packets in flight drain and no new ones join the higher work's (module doc, "Hold").
    Held { since: Nanos },
}

/// Where a stretch off the GPU (or held) stands ([`Policy::decide`]).
#[derive(Clone, Copy)]
enum Stretch {
    /// The higher work is gone and the wait after it is over: back.
    Ends,
    /// The starvation bound is reached: back for the minimum run.
    Starved,
    /// Goes on; look again then.
    Until(Nanos),
}

/// What to do now, and when to look again at the latest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub take_off: Vec<QueueId>,
    pub put_back: Vec<QueueId>,
    /// To hold in libxhsa (nothing forwarded; no KFD call).
    pub hold: Vec<QueueId>,
    /// Held queues to let go.
    pub release: Vec<QueueId>,
    /// The starvation bound put these back or let them go: they get their minimum run.
    pub starved: Vec<QueueId>,
    /// Look again by then even if nothing is published.
    pub wake_at: Option<Nanos>,
}

impl Decision {
    /// Look again by `at` at the latest.
    fn wake_by(&mut self, at: Nanos) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    /// What `stretch` says for `q`, off the GPU or (`held`) held: back (put back or let go,
    /// with the minimum run if starved), or a look again when it may end.
    fn settle(&mut self, q: QueueId, stretch: Stretch, held: bool) {
        let back = if held { &mut self.release } else { &mut self.put_back };
        match stretch {
            Stretch::Ends => back.push(q),
            Stretch::Starved => {
                back.push(q);
                self.starved.push(q);
            }
            Stretch::Until(at) => self.wake_by(at),
        }
    }
}

/// The policy's memory: each queue's state.
#[derive(Clone, Debug)]
pub struct Policy {
    settings: PreemptSettings,
    states: BTreeMap<QueueId, State>,
    /// Queues off the GPU with no higher work left: since when (the round trip's wait).
    idle_since: BTreeMap<QueueId, Nanos>,
    sharing: ShareState,
    /// Running queues with work in flight: since when, without a pause (the cap).
    busy_since: BTreeMap<QueueId, Nanos>,
    /// Queues the cap took off.
    capped: BTreeSet<QueueId>,
    /// Queues with an unconfirmed in-flight count under higher work: since when.
    unconfirmed_since: BTreeMap<QueueId, Nanos>,
    /// The pauses of the work above each queue (the round trip's wait, learned).
    pauses: BTreeMap<QueueId, Pauses>,
    /// Whether the process can hold queues (its scheduler carries the holds out).
    holds: bool,
    /// Held queues with packets in flight beside another process's higher work: the count
    /// last seen and since when it has not dropped (a hold that does not drain, module doc).
    draining: BTreeMap<QueueId, (u32, Nanos)>,
}

/// How long a queue whose in-flight count is unconfirmed waits to be taken off for higher work
/// (module doc): a tracking barrier's round trip on an idle queue, with room for a loaded host
/// (tens of µs on a GPU; on the emulated MI308X with four processes on two cores, 0.2-10 ms,
/// median 0.5 ms, and 0.3 ms let one run in twelve take idle queues off).
pub const CONFIRM_NS: Nanos = 1_000_000;

/// Keys of this process's queues among the SLO's samples (others' keys come from the board).
const MINE_KEY: u64 = 1 << 63;

impl Policy {
    pub fn new(settings: PreemptSettings) -> Policy {
        Policy::with_sharing(settings, Sharing::Strict)
    }

    /// A policy with a sharing policy other than strict.
    pub fn with_sharing(settings: PreemptSettings, sharing: Sharing) -> Policy {
        Policy {
            settings,
            states: BTreeMap::new(),
            idle_since: BTreeMap::new(),
            sharing: ShareState::new(sharing),
            busy_since: BTreeMap::new(),
            capped: BTreeSet::new(),
            unconfirmed_since: BTreeMap::new(),
            pauses: BTreeMap::new(),
            holds: false,
            draining: BTreeMap::new(),
        }
    }

    /// Whether queues may be held (module doc, "Hold"): only where a scheduler carries the
    /// holds out.
    pub fn set_holds(&mut self, holds: bool) {
        self.holds = holds;
    }

    /// Another sharing policy from now on (`xhsactl policy`).
    pub fn set_sharing(&mut self, sharing: Sharing) {
        self.sharing.set(sharing);
        self.busy_since.clear();
    }

    /// The sharing policy and its state.
    pub fn sharing(&self) -> ShareStatus {
        self.sharing.status(&self.settings)
    }

    /// Whether the sharing policy acts on this process's own work alone (a cap), so the watcher
    /// must look whenever it changes.
    pub fn acts_on_own_work(&self) -> bool {
        self.sharing.cap(&self.settings).is_some()
    }

    /// The state of `q` (running when unknown).
    pub fn state(&self, q: QueueId) -> State {
        self.states.get(&q).copied().unwrap_or(State::Running { exempt_until: 0 })
    }

    /// When a take-off of `q` just decided became due by the policy's own clock rather than by
    /// higher work seen: the end of its minimum run (the starvation bound's, or the SLO's time
    /// share), or of the utilisation cap's on time. `None` for a take-off that answers higher
    /// work (its latency runs from the board's wake-up).
    pub fn timed_due(&self, q: QueueId) -> Option<Nanos> {
        if self.capped.contains(&q) {
            let (on, _) = self.sharing.cap(&self.settings)?;
            return self.busy_since.get(&q).map(|b| b + on);
        }
        match self.state(q) {
            State::Running { exempt_until } if exempt_until > 0 => Some(exempt_until),
            _ => None,
        }
    }

    /// The queues off the GPU.
    pub fn off(&self) -> Vec<QueueId> {
        self.in_state(|s| matches!(s, State::Off { .. }))
    }

    /// The queues whose state `which` accepts.
    fn in_state(&self, which: impl Fn(&State) -> bool) -> Vec<QueueId> {
        self.states.iter().filter(|(_, s)| which(s)).map(|(q, _)| *q).collect()
    }

    /// `queues` start a stretch in `state` (off or held).
    fn start(&mut self, queues: &[QueueId], state: State) {
        for q in queues {
            self.states.insert(*q, state);
            self.idle_since.remove(q);
            self.busy_since.remove(q);
            self.draining.remove(q);
        }
    }

    /// The queues held in libxhsa.
    pub fn held(&self) -> Vec<QueueId> {
        self.in_state(|s| matches!(s, State::Held { .. }))
    }

    /// `queues` were held at `now`.
    pub fn held_now(&mut self, queues: &[QueueId], now: Nanos) {
        self.start(queues, State::Held { since: now });
    }

    /// `queues` were taken off at `now`. A held queue's stretch goes on (the starvation bound
    /// counts from the hold); returns those that were held, whose holds in libxhsa are to be
    /// let go (off the GPU, they come back with the put-back).
    pub fn taken_off(&mut self, queues: &[QueueId], now: Nanos) -> Vec<QueueId> {
        let mut were_held = Vec::new();
        for q in queues {
            let since = match self.state(*q) {
                State::Held { since } => {
                    were_held.push(*q);
                    since.min(now)
                }
                _ => now,
            };
            self.start(&[*q], State::Off { since });
        }
        were_held
    }

    /// `queues` were put back at `now`; `starved` ones get their minimum run.
    pub fn put_back(&mut self, queues: &[QueueId], starved: &[QueueId], now: Nanos) {
        let min_run = self.sharing.duty(&self.settings).1;
        for q in queues {
            let exempt_until = if starved.contains(q) { now + min_run } else { 0 };
            self.states.insert(*q, State::Running { exempt_until });
            self.idle_since.remove(q);
            self.capped.remove(q);
            self.busy_since.insert(*q, now);
        }
    }

    /// The earliest time after `now` at which a queue's state runs out by itself: a preempted
    /// queue's longest stretch off (the starvation bound or the cap's off time) or a put-back
    /// queue's minimum run. The watcher looks again then, also when the state began after its
    /// last decision (a take-off or put-back it just made).
    pub fn deadline_after(&self, now: Nanos) -> Option<Nanos> {
        let (max_off, _) = self.sharing.duty(&self.settings);
        let cap_off = self.sharing.cap(&self.settings).map(|(_, off)| off);
        self.states
            .iter()
            .map(|(q, s)| match *s {
                State::Off { since } if self.capped.contains(q) => {
                    since + cap_off.unwrap_or(max_off).min(max_off)
                }
                State::Off { since } | State::Held { since } => since + max_off,
                State::Running { exempt_until } => exempt_until,
            })
            .filter(|&t| t > now)
            .min()
    }

    /// Forgets a queue (destroyed).
    pub fn forget(&mut self, q: QueueId) {
        self.states.remove(&q);
        self.idle_since.remove(&q);
        self.busy_since.remove(&q);
        self.capped.remove(&q);
        self.pauses.remove(&q);
        self.draining.remove(&q);
    }

    /// For held `q` (its packets in flight beside another process's higher work): since when
    /// its in-flight count has not dropped, the hold's start at the earliest; `None` (and
    /// forgotten) when it has nothing in flight or KFD cannot take it off.
    fn undrained_since(&mut self, q: &Mine, held_since: Nanos, now: Nanos) -> Option<Nanos> {
        if q.in_flight == 0 || !q.preemptable {
            self.draining.remove(&q.id);
            return None;
        }
        let (count, since) = self.draining.entry(q.id).or_insert((q.in_flight, held_since));
        if q.in_flight < *count {
            *since = now;
        }
        *count = q.in_flight;
        Some(*since)
    }

    /// The wait before `q` goes back once the work above it is gone, for a round trip costing
    /// `round_trip` (module doc; [`super::pauses`]).
    pub fn put_back_wait(&self, q: QueueId, round_trip: Nanos) -> Nanos {
        self.pauses.get(&q).map_or(round_trip, |p| p.wait(round_trip))
    }

    /// Where the stretch off (or held) of `q` since `since` stands at `now`, with or without
    /// `higher` work above it: with none, it ends after the round trip's wait (module doc:
    /// twice the measured cost, or just over the longest recent pause of the higher work
    /// shorter than that, none if there is no such pause, [`super::pauses`]); with some, at the
    /// starvation bound `max_off`.
    fn stretch(
        &mut self,
        q: QueueId,
        since: Nanos,
        higher: bool,
        now: Nanos,
        cost: Option<Nanos>,
        max_off: Nanos,
    ) -> Stretch {
        if !higher {
            let wait = self.put_back_wait(q, cost.unwrap_or(0).saturating_mul(2));
            let idle = *self.idle_since.entry(q).or_insert(now);
            return if now.saturating_sub(idle) >= wait {
                Stretch::Ends
            } else {
                Stretch::Until(idle + wait)
            };
        }
        self.idle_since.remove(&q);
        if now.saturating_sub(since) >= max_off {
            Stretch::Starved
        } else {
            Stretch::Until(since + max_off)
        }
    }

    /// Decides; `others` are the priorities and partitions of the other processes' queues that have work,
    /// `cost` the expected cost of taking a queue off, `budget_ok` whether the budget allows a
    /// preemption of that cost now (and `budget_at` when it will).
    pub fn decide(
        &mut self,
        now: Nanos,
        mine: &[Mine],
        others: &[Other],
        cost: Option<Nanos>,
        budget_ok: bool,
        budget_at: Nanos,
    ) -> Decision {
        let mut d = Decision::default();
        let higher_work = |q: &Mine| {
            others.iter().any(|o| o.priority > q.priority && overlaps(o.partition, q.partition))
                || mine.iter().any(|m| {
                    m.id != q.id
                        && m.has_work()
                        && m.priority > q.priority
                        && overlaps(m.partition, q.partition)
                })
        };
        let (max_off, _) = self.sharing.duty(&self.settings);
        let cap = self.sharing.cap(&self.settings);
        let wake = |d: &mut Decision, at: Nanos| d.wake_by(at);
        for q in mine {
            let higher = higher_work(q);
            // Higher work of another process: what a hold is for (module doc, "Hold").
            let higher_elsewhere = others
                .iter()
                .any(|o| o.priority > q.priority && overlaps(o.partition, q.partition));
            self.pauses.entry(q.id).or_default().observe(now, higher);
            match self.state(q.id) {
                State::Held { since } => {
                    if q.paused || !self.holds {
                        // An operator's pause takes over (it takes the queue off).
                        d.release.push(q.id);
                        continue;
                    }
                    // Letting go costs nothing, but the queue would forward at once what it
                    // holds, in the way of higher work that only paused: a put-back's wait.
                    let stretch = self.stretch(q.id, since, higher_elsewhere, now, cost, max_off);
                    // A hold that does not drain: no packet in flight completed for a round
                    // trip's cost; the own time it was weighed by was wrong (module doc).
                    let round_trip = cost.map(|c| c.saturating_mul(2));
                    if let (Stretch::Until(_), true, Some(rt)) =
                        (stretch, higher_elsewhere, round_trip)
                    {
                        if let Some(from) = self.undrained_since(q, since, now) {
                            if now.saturating_sub(from) < rt {
                                wake(&mut d, from + rt);
                            } else if budget_ok {
                                d.take_off.push(q.id);
                                continue;
                            } else {
                                wake(&mut d, budget_at);
                            }
                        }
                    } else {
                        self.draining.remove(&q.id);
                    }
                    d.settle(q.id, stretch, true);
                }
                State::Off { since } => {
                    if q.paused {
                        continue;
                    }
                    if self.capped.contains(&q.id) && !higher {
                        // The cap's off time: the rest of the period.
                        let off = cap.map_or(0, |(_, off)| off);
                        if now.saturating_sub(since) >= off {
                            d.put_back.push(q.id);
                        } else {
                            wake(&mut d, since + off);
                        }
                        continue;
                    }
                    let stretch = self.stretch(q.id, since, higher, now, cost, max_off);
                    d.settle(q.id, stretch, false);
                }
                State::Running { exempt_until } => {
                    self.capped.remove(&q.id);
                    if q.paused && q.preemptable && q.in_flight > 0 {
                        d.take_off.push(q.id);
                        continue;
                    }
                    if q.in_flight == 0 {
                        self.busy_since.remove(&q.id);
                        self.unconfirmed_since.remove(&q.id);
                    }
                    // Held instead of left to the window or taken off, where a take-off is
                    // not worth its cost (or cannot be made) and the higher work is another
                    // process's.
                    let may_hold = self.holds
                        && higher_elsewhere
                        && !q.paused
                        && q.has_work()
                        && now >= exempt_until;
                    if !q.preemptable || q.in_flight == 0 {
                        if may_hold {
                            d.hold.push(q.id);
                        }
                        continue;
                    }
                    if let Some((on, _)) = cap {
                        let busy = *self.busy_since.entry(q.id).or_insert(now);
                        if now.saturating_sub(busy) >= on {
                            if budget_ok {
                                d.take_off.push(q.id);
                                self.capped.insert(q.id);
                            } else {
                                wake(&mut d, budget_at);
                            }
                            continue;
                        }
                        wake(&mut d, busy + on);
                    }
                    if !higher || !q.unconfirmed {
                        self.unconfirmed_since.remove(&q.id);
                    }
                    if !higher {
                        continue;
                    }
                    if now < exempt_until {
                        wake(&mut d, exempt_until);
                        continue;
                    }
                    if q.unconfirmed {
                        // Up to a round trip's cost: a wrong take-off of an idle queue costs
                        // taking it off and putting it back.
                        let wait = CONFIRM_NS.max(cost.unwrap_or(0).saturating_mul(2));
                        let since = *self.unconfirmed_since.entry(q.id).or_insert(now);
                        if now.saturating_sub(since) < wait {
                            wake(&mut d, since + wait);
                            continue;
                        }
                    }
                    let ns = q.own_packet_ns();
                    let delay = u64::from(q.in_flight).saturating_mul(ns);
                    let worth = ns == 0 || cost.is_none_or(|c| delay > c);
                    if !worth {
                        if may_hold {
                            d.hold.push(q.id);
                        }
                        continue;
                    }
                    if !budget_ok {
                        if may_hold {
                            d.hold.push(q.id);
                        } else {
                            wake(&mut d, budget_at);
                        }
                        continue;
                    }
                    d.take_off.push(q.id);
                }
            }
        }
        // A held queue's stretch beside the higher work ends with its take-off, one off with its
        // put-back while the higher work goes on: the SLO measures the higher work then.
        let held = |q: &QueueId| mine.iter().any(|m| m.id == *q && higher_work(m));
        let stretch_end = if d.take_off.iter().chain(&d.hold).any(held) {
            Some(true)
        } else if d.put_back.iter().chain(&d.release).any(held) {
            Some(false)
        } else {
            None
        };
        // The SLO's samples, when a stretch ends: queues with work above some queue of this
        // process.
        let mut samples: Vec<Sample> = Vec::new();
        if stretch_end.is_some() && self.sharing.learns() {
            let above_mine = |p: Priority, part: PartitionId| {
                mine.iter().any(|m| p > m.priority && overlaps(part, m.partition))
            };
            samples = others
                .iter()
                .filter(|o| above_mine(o.priority, o.partition))
                .map(|o| (o.key, o.packet_ns))
                .chain(
                    mine.iter()
                        .filter(|m| m.has_work() && above_mine(m.priority, m.partition))
                        .map(|m| (MINE_KEY | m.id.0, m.packet_ns)),
                )
                .collect();
        }
        self.sharing.observe(now, &samples, stretch_end, &self.settings);
        // Queues that disappeared from the board while off are put back too.
        for q in self.off() {
            if !mine.iter().any(|m| m.id == q) {
                d.put_back.push(q);
            }
        }
        for q in self.held() {
            if !mine.iter().any(|m| m.id == q) {
                d.release.push(q);
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_model::priority::Level;

    const MS: Nanos = 1_000_000;

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    /// Another process's work at `level` on the whole GPU.
    fn o(level: i64) -> Other {
        Other::new(p(level), PartitionId::WHOLE)
    }

    fn q(id: u64, level: i64, in_flight: u32, packet_ns: u64) -> Mine {
        Mine {
            id: QueueId(id),
            priority: p(level),
            pending: 0,
            in_flight,
            packet_ns,
            own_ns: 0,
            preemptable: true,
            paused: false,
            partition: PartitionId::WHOLE,
            unconfirmed: false,
        }
    }

    #[test]
    fn an_unconfirmed_in_flight_count_waits_for_its_barrier_before_a_take_off() {
        let mut pol = policy();
        let idle = Mine { unconfirmed: true, ..q(1, 0, 86, 0) };
        let high = q(2, 5, 1, 0);
        // Higher work arrives: no take-off yet, a look again once the confirmation is due.
        let d = pol.decide(0, &[idle, high], &[], Some(MS / 2), true, 0);
        assert!(d.take_off.is_empty(), "{d:?}");
        assert_eq!(d.wake_at, Some(CONFIRM_NS));
        // The barrier completed: the count was stale (nothing in flight), never taken off.
        let done = Mine { in_flight: 0, unconfirmed: false, ..idle };
        let d = pol.decide(CONFIRM_NS + 1, &[done, high], &[], Some(MS / 2), true, 0);
        assert!(d.take_off.is_empty(), "{d:?}");
        // A busy queue still unconfirmed once the time passed is taken off, and a confirmed
        // one at once.
        let mut pol = policy();
        let busy = Mine { unconfirmed: true, ..q(1, 0, 4, 0) };
        assert!(pol.decide(0, &[busy, high], &[], Some(MS / 2), true, 0).take_off.is_empty());
        let d = pol.decide(CONFIRM_NS, &[busy, high], &[], Some(MS / 2), true, 0);
        assert_eq!(d.take_off, vec![QueueId(1)]);
        let mut pol = policy();
        let d = pol.decide(0, &[Mine { unconfirmed: false, ..busy }, high], &[], None, true, 0);
        assert_eq!(d.take_off, vec![QueueId(1)]);
    }

    #[test]
    fn work_on_the_other_side_of_a_split_never_takes_a_queue_off() {
        use xhsa_model::partition::{Reserve, Side, Split};
        let split = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        let (reserved, shared) = (split.id(Side::Reserved), split.id(Side::Shared));
        let mut pol = policy();
        let batch = Mine { partition: shared, ..q(1, -10, 4, 2 * MS) };
        let mut own_high = Mine { partition: reserved, ..q(2, 10, 0, 0) };
        own_high.pending = 3;
        // Higher work of this process and of another, both on the reserved side: no.
        let d = pol.decide(0, &[batch, own_high], &[Other::new(p(10), reserved)], None, true, 0);
        assert!(d.take_off.is_empty(), "{d:?}");
        // Higher work on its own side, or on the whole GPU (another setting): yes.
        assert_eq!(
            pol.decide(0, &[batch], &[Other::new(p(0), shared)], None, true, 0).take_off.len(),
            1
        );
        assert_eq!(pol.decide(0, &[batch], &[o(10)], None, true, 0).take_off.len(), 1);
        // Off for shared-side work, it comes back when only reserved-side work is left.
        pol.taken_off(&[QueueId(1)], 0);
        let d = pol.decide(MS, &[batch, own_high], &[Other::new(p(10), reserved)], None, true, MS);
        assert_eq!(d.put_back, vec![QueueId(1)]);
    }

    #[test]
    fn a_paused_queue_goes_off_at_once_stays_off_and_holds_nobody_back() {
        let mut pol = policy();
        let paused = Mine { paused: true, ..q(1, 9, 2, 10) };
        // No higher work, the budget says no, a cost above its delay: off anyway.
        let d = pol.decide(0, &[paused, q(2, 0, 3, 1_000)], &[], Some(1 << 40), false, 5 * MS);
        assert_eq!(
            d.take_off,
            vec![QueueId(1)],
            "the paused queue only: its work is nobody's higher work"
        );
        pol.taken_off(&[QueueId(1)], 0);
        // Far past the starvation bound, nothing else on the GPU: it stays off.
        let d = pol.decide(3_600_000 * MS, &[paused], &[], None, true, 0);
        assert!(d.put_back.is_empty() && d.starved.is_empty());
        // Resumed: back.
        let d = pol.decide(3_600_001 * MS, &[Mine { paused: false, ..paused }], &[], None, true, 0);
        assert_eq!(d.put_back, vec![QueueId(1)]);
        // A paused queue with nothing in flight is not touched.
        let mut pol = policy();
        let d = pol.decide(0, &[Mine { in_flight: 0, pending: 4, ..paused }], &[], None, true, 0);
        assert!(d.take_off.is_empty());
    }

    fn policy() -> Policy {
        Policy::new(PreemptSettings::default())
    }

    #[test]
    fn a_busy_low_queue_is_taken_off_while_higher_work_waits_and_put_back_after() {
        let mut pol = policy();
        let low = q(1, -5, 2, 2 * MS);
        // Nobody higher: nothing to do.
        assert_eq!(pol.decide(0, &[low], &[], None, true, 0), Decision::default());
        // A higher priority elsewhere has work.
        let d = pol.decide(10, &[low], &[o(5)], Some(450_000), true, 10);
        assert_eq!(d.take_off, vec![QueueId(1)]);
        pol.taken_off(&d.take_off, 10);
        // Still there: stays off, wakes up at the starvation bound.
        let d = pol.decide(20, &[low], &[o(5)], Some(450_000), true, 20);
        assert!(d.take_off.is_empty() && d.put_back.is_empty());
        assert_eq!(d.wake_at, Some(10 + 100 * MS));
        // Gone: back once it stayed gone for a round trip's cost (2 x 450 us).
        let d = pol.decide(30, &[low], &[], Some(450_000), true, 30);
        assert!(d.put_back.is_empty());
        assert_eq!(d.wake_at, Some(30 + 900_000));
        let d = pol.decide(30 + 900_000, &[low], &[], Some(450_000), true, 30);
        assert_eq!(d.put_back, vec![QueueId(1)]);
        assert!(d.starved.is_empty());
    }

    #[test]
    fn a_pause_of_the_higher_work_shorter_than_a_round_trip_keeps_the_batch_queue_off() {
        let mut pol = policy();
        let low = q(1, -5, 2, 2 * MS);
        let cost = Some(450_000);
        pol.taken_off(&[QueueId(1)], 0);
        // The server pauses between two decode steps (0.5 ms): the queue stays off.
        assert!(pol.decide(MS, &[low], &[], cost, true, MS).put_back.is_empty());
        let d = pol.decide(MS + 500_000, &[low], &[o(5)], cost, true, MS);
        assert!(d.put_back.is_empty() && d.take_off.is_empty(), "no unmap either way: {d:?}");
        // The next pause starts the wait afresh.
        assert!(pol.decide(2 * MS, &[low], &[], cost, true, 2 * MS).put_back.is_empty());
        assert!(pol.decide(2 * MS + 899_999, &[low], &[], cost, true, 0).put_back.is_empty());
        assert_eq!(
            pol.decide(2 * MS + 900_000, &[low], &[], cost, true, 0).put_back,
            vec![QueueId(1)]
        );
        // An unknown cost: back at once, as before any preemption was measured.
        let mut pol = policy();
        pol.taken_off(&[QueueId(1)], 0);
        assert_eq!(pol.decide(1, &[low], &[], None, true, 1).put_back, vec![QueueId(1)]);
    }

    #[test]
    fn the_wait_before_a_put_back_follows_the_pauses_the_higher_work_showed() {
        let cost = Some(450_000);
        let low = q(1, -5, 2, 2 * MS);
        // Requests of 3 ms every 50 ms: each one takes the queue off; it goes back after the
        // round trip's wait until enough pauses are seen, then as soon as the request is done.
        let mut pol = policy();
        let mut waits = Vec::new();
        for r in 0..(super::super::pauses::MIN_SEEN as u64 + 3) {
            let t = r * 50 * MS;
            let d = pol.decide(t, &[low], &[o(5)], cost, true, t);
            assert_eq!(d.take_off, vec![QueueId(1)], "request {r}");
            pol.taken_off(&d.take_off, t);
            let done = t + 3 * MS;
            let d = pol.decide(done, &[low], &[], cost, true, done);
            let back = if d.put_back.is_empty() {
                let at = d.wake_at.expect("a wake for the put-back");
                let d = pol.decide(at, &[low], &[], cost, true, at);
                assert_eq!(d.put_back, vec![QueueId(1)]);
                at
            } else {
                done
            };
            pol.put_back(&[QueueId(1)], &[], back);
            waits.push(back - done);
        }
        assert_eq!(waits[0], 900_000, "nothing seen yet: the round trip's wait");
        assert_eq!(*waits.last().unwrap(), 0, "long pauses only: back at once ({waits:?})");
        // A server pausing 200 us between steps keeps the queue off through such a pause once
        // its pauses are known, and puts it back soon after a long one begins.
        let mut pol = policy();
        pol.taken_off(&[QueueId(1)], 0);
        let mut t = 0;
        for _ in 0..20 {
            assert!(pol.decide(t, &[low], &[o(5)], cost, true, t).put_back.is_empty());
            t += 5 * MS;
            assert!(pol.decide(t, &[low], &[], cost, true, t).put_back.is_empty());
            t += 200_000;
        }
        // The last pause began 200 us ago and goes on.
        let began = t - 200_000;
        let wait = pol.put_back_wait(QueueId(1), 900_000);
        assert!((200_000..=250_000).contains(&wait), "{wait}");
        assert!(pol.decide(began + 200_000, &[low], &[], cost, true, 0).put_back.is_empty());
        assert_eq!(pol.decide(began + wait, &[low], &[], cost, true, 0).put_back, vec![QueueId(1)]);
    }

    #[test]
    fn higher_work_of_this_process_counts_too_and_equal_priorities_do_not() {
        let mut pol = policy();
        let low = q(1, 0, 3, MS);
        let mut high = q(2, 0, 0, 0);
        high.pending = 4;
        assert!(
            pol.decide(0, &[low, high], &[o(0)], None, true, 0).take_off.is_empty(),
            "equal priorities never preempt"
        );
        high.priority = p(1);
        let d = pol.decide(0, &[low, high], &[], None, true, 0);
        assert_eq!(d.take_off, vec![QueueId(1)], "the high queue is not taken off for itself");
    }

    #[test]
    fn a_take_off_is_weighed_by_the_packets_own_time_once_measured() {
        // 9 packets in flight measured at 87 us each beside the higher work (their waits for it
        // included): 783 us of delay, worth a 576 us take-off by that figure ...
        let slowed = q(1, -1, 9, 87_000);
        let mut pol = policy();
        assert_eq!(
            pol.decide(0, &[slowed], &[o(3)], Some(576_000), true, 0).take_off,
            vec![QueueId(1)]
        );
        // ... but their own time is 14 us (measured while no higher work was there): 126 us.
        let mut pol = policy();
        let own = Mine { own_ns: 14_000, ..slowed };
        assert!(pol.decide(0, &[own], &[o(3)], Some(576_000), true, 0).take_off.is_empty());
        // Long packets are worth it by their own time too.
        let mut pol = policy();
        let long = Mine { own_ns: 500_000, ..q(1, -1, 2, 900_000) };
        assert_eq!(pol.decide(0, &[long], &[o(3)], Some(576_000), true, 0).take_off.len(), 1);
    }

    fn holding() -> Policy {
        let mut pol = policy();
        pol.set_holds(true);
        pol
    }

    #[test]
    fn short_work_beside_another_process_s_higher_work_is_held_and_let_go_when_it_is_gone() {
        // 2 packets of 100 us in flight, a 450 us take-off: not worth it, held instead.
        let low = q(1, -1, 2, 100_000);
        let mut pol = holding();
        let d = pol.decide(0, &[low], &[o(3)], Some(450_000), true, 0);
        assert_eq!((d.take_off.clone(), d.hold.clone()), (vec![], vec![QueueId(1)]));
        pol.held_now(&d.hold, 0);
        assert_eq!(pol.state(QueueId(1)), State::Held { since: 0 });
        assert_eq!(pol.held(), vec![QueueId(1)]);
        assert!(pol.off().is_empty(), "a hold is not a take-off");
        // Still there, its packets drained: held on, and looked at again at the starvation
        // bound.
        let drained = q(1, -1, 0, 100_000);
        let d = pol.decide(MS, &[drained], &[o(3)], Some(450_000), true, 0);
        assert!(d.hold.is_empty() && d.release.is_empty() && d.take_off.is_empty(), "{d:?}");
        assert_eq!(d.wake_at, Some(100 * MS));
        assert_eq!(pol.deadline_after(MS), Some(100 * MS));
        // The higher work is gone: let go after the round trip's wait (no pauses seen yet).
        let d = pol.decide(2 * MS, &[low], &[], Some(450_000), true, 0);
        assert!(d.release.is_empty());
        assert_eq!(d.wake_at, Some(2 * MS + 900_000));
        let d = pol.decide(2 * MS + 900_000, &[low], &[], Some(450_000), true, 0);
        assert_eq!(d.release, vec![QueueId(1)]);
        assert!(d.starved.is_empty());
        // Without holds (no scheduler to carry them out) it is left to the window.
        let mut pol = policy();
        let d = pol.decide(0, &[low], &[o(3)], Some(450_000), true, 0);
        assert!(d.hold.is_empty() && d.take_off.is_empty(), "{d:?}");
    }

    #[test]
    fn a_hold_whose_packets_in_flight_do_not_complete_for_a_round_trip_is_taken_off() {
        // 2 packets of 100 us by their own time, a 450 us take-off: held.
        let low = q(1, -1, 2, 100_000);
        let mut pol = holding();
        let d = pol.decide(0, &[low], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.hold, vec![QueueId(1)]);
        pol.held_now(&d.hold, 0);
        // None has completed half a millisecond later: looked at again a round trip after the
        // hold began.
        let d = pol.decide(500_000, &[low], &[o(3)], Some(450_000), true, 0);
        assert!(d.take_off.is_empty() && d.release.is_empty(), "{d:?}");
        assert_eq!(d.wake_at, Some(900_000));
        // Still none a round trip after the hold: the estimate was wrong, taken off (the
        // budget allowing: else looked at again when it does).
        let d = pol.decide(900_000, &[low], &[o(3)], Some(450_000), false, 2 * MS);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(2 * MS));
        let d = pol.decide(2 * MS, &[low], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.take_off, vec![QueueId(1)]);
        // Off, its stretch going on from the hold's start (the starvation bound counts from
        // there).
        assert_eq!(pol.taken_off(&d.take_off, 2 * MS), vec![QueueId(1)], "its hold to let go");
        assert_eq!(pol.state(QueueId(1)), State::Off { since: 0 });
        assert_eq!(pol.off(), vec![QueueId(1)]);
        assert_eq!(
            pol.decide(100 * MS, &[low], &[o(3)], Some(450_000), true, 0).starved,
            vec![QueueId(1)]
        );

        // Packets completing keep the hold: the round trip runs from the last completion seen.
        let mut pol = holding();
        pol.held_now(&[QueueId(1)], 0);
        let d = pol.decide(100_000, &[q(1, -1, 5, 100_000)], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.wake_at, Some(900_000));
        let d = pol.decide(800_000, &[q(1, -1, 3, 100_000)], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.wake_at, Some(1_700_000));
        let d = pol.decide(1_600_000, &[q(1, -1, 3, 100_000)], &[o(3)], Some(450_000), true, 0);
        assert!(d.take_off.is_empty(), "{d:?}");
        assert_eq!(
            pol.decide(1_700_000, &[q(1, -1, 3, 100_000)], &[o(3)], Some(450_000), true, 0)
                .take_off,
            vec![QueueId(1)]
        );

        // Not without a measured cost, with nothing in flight, for a queue KFD does not know,
        // or once the higher work is gone.
        for (mine, others, cost) in [
            (low, vec![o(3)], None),
            (q(1, -1, 0, 100_000), vec![o(3)], Some(450_000)),
            (Mine { preemptable: false, ..low }, vec![o(3)], Some(450_000)),
            (low, vec![], Some(450_000)),
        ] {
            let mut pol = holding();
            pol.held_now(&[QueueId(1)], 0);
            let d = pol.decide(50 * MS, &[mine], &others, cost, true, 0);
            assert!(d.take_off.is_empty(), "{mine:?} {others:?} {cost:?}: {d:?}");
        }
    }

    #[test]
    fn a_hold_follows_the_starvation_bound_and_the_minimum_run() {
        let low = q(1, -1, 1, 100_000);
        let mut pol = holding();
        pol.held_now(&[QueueId(1)], 0);
        let d = pol.decide(100 * MS, &[low], &[o(3)], Some(450_000), true, 0);
        assert_eq!((d.release.clone(), d.starved.clone()), (vec![QueueId(1)], vec![QueueId(1)]));
        pol.put_back(&d.release, &d.starved, 100 * MS);
        let d = pol.decide(105 * MS, &[low], &[o(3)], Some(450_000), true, 0);
        assert!(d.hold.is_empty(), "within its minimum run: {d:?}");
        assert_eq!(d.wake_at, Some(110 * MS));
        assert_eq!(
            pol.decide(110 * MS, &[low], &[o(3)], Some(450_000), true, 0).hold,
            vec![QueueId(1)]
        );
    }

    #[test]
    fn what_a_take_off_cannot_reach_is_held_and_long_work_is_still_taken_off() {
        let mut pol = holding();
        // Packets waiting and none in flight; a queue KFD does not know; the budget spent.
        let waiting = Mine { pending: 3, ..q(1, -1, 0, MS) };
        let unknown = Mine { preemptable: false, ..q(2, -1, 4, MS) };
        let d = pol.decide(0, &[waiting, unknown], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.hold, vec![QueueId(1), QueueId(2)]);
        let mut pol = holding();
        let d = pol.decide(0, &[q(1, -1, 4, MS)], &[o(3)], Some(450_000), false, 5 * MS);
        assert_eq!((d.take_off.clone(), d.hold.clone()), (vec![], vec![QueueId(1)]));
        // Worth a take-off: taken off, not held.
        let mut pol = holding();
        let d = pol.decide(0, &[q(1, -1, 4, MS)], &[o(3)], Some(450_000), true, 0);
        assert_eq!((d.take_off.clone(), d.hold.clone()), (vec![QueueId(1)], vec![]));
        // Nothing to hold: an idle queue.
        let mut pol = holding();
        assert!(pol.decide(0, &[q(1, -1, 0, MS)], &[o(3)], Some(450_000), true, 0).hold.is_empty());
    }

    #[test]
    fn higher_work_of_the_same_process_or_a_paused_queue_is_never_held() {
        let mut pol = holding();
        let low = q(1, -1, 2, 100_000);
        let high = q(2, 3, 1, 100_000);
        let d = pol.decide(0, &[low, high], &[], Some(450_000), true, 0);
        assert!(d.hold.is_empty() && d.take_off.is_empty(), "{d:?}");
        // A held queue an operator pauses is let go (the pause takes it off).
        pol.held_now(&[QueueId(1)], 0);
        let paused = Mine { paused: true, ..low };
        let d = pol.decide(MS, &[paused], &[o(3)], Some(450_000), true, 0);
        assert_eq!(d.release, vec![QueueId(1)]);
        // A held queue that left the board is let go.
        let mut pol = holding();
        pol.held_now(&[QueueId(7)], 0);
        assert_eq!(pol.decide(MS, &[], &[o(3)], None, true, 0).release, vec![QueueId(7)]);
        // Work on the other side of a split holds nothing.
        use xhsa_model::partition::{Reserve, Side, Split};
        let split = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        let mut pol = holding();
        let other_side = Other::new(p(10), split.id(Side::Reserved));
        let low = Mine { partition: split.id(Side::Shared), ..q(1, -1, 2, 100_000) };
        assert!(pol.decide(0, &[low], &[other_side], Some(450_000), true, 0).hold.is_empty());
    }

    #[test]
    fn short_work_is_not_worth_a_preemption() {
        let mut pol = policy();
        // 2 packets of 100 us in flight: 200 us of delay < 450 us of cost.
        assert!(pol
            .decide(0, &[q(1, -1, 2, 100_000)], &[o(3)], Some(450_000), true, 0)
            .take_off
            .is_empty());
        // Unknown packet time or unknown cost: worth trying.
        assert_eq!(
            pol.decide(0, &[q(1, -1, 2, 0)], &[o(3)], Some(450_000), true, 0).take_off.len(),
            1
        );
        assert_eq!(
            pol.decide(0, &[q(1, -1, 2, 100_000)], &[o(3)], None, true, 0).take_off.len(),
            1
        );
        // Nothing in flight, or not known to KFD: nothing to take off.
        assert!(pol.decide(0, &[q(1, -1, 0, MS)], &[o(3)], None, true, 0).take_off.is_empty());
        let mut unknown = q(1, -1, 4, MS);
        unknown.preemptable = false;
        assert!(pol.decide(0, &[unknown], &[o(3)], None, true, 0).take_off.is_empty());
    }

    #[test]
    fn the_starvation_bound_puts_a_queue_back_for_its_minimum_run() {
        let mut pol = policy();
        let low = q(1, -5, 2, 2 * MS);
        pol.taken_off(&[QueueId(1)], 0);
        let d = pol.decide(100 * MS, &[low], &[o(5)], None, true, 100 * MS);
        assert_eq!((d.put_back.clone(), d.starved.clone()), (vec![QueueId(1)], vec![QueueId(1)]));
        pol.put_back(&d.put_back, &d.starved, 100 * MS);
        // Within its minimum run it stays on, and the policy looks again when it ends.
        let d = pol.decide(105 * MS, &[low], &[o(5)], None, true, 105 * MS);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(110 * MS));
        assert_eq!(
            pol.decide(110 * MS, &[low], &[o(5)], None, true, 110 * MS).take_off,
            vec![QueueId(1)]
        );
    }

    #[test]
    fn the_budget_delays_taking_off_but_never_putting_back() {
        let mut pol = policy();
        let low = q(1, -5, 2, 2 * MS);
        let d = pol.decide(0, &[low], &[o(5)], None, false, 70 * MS);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(70 * MS));
        pol.taken_off(&[QueueId(1)], 0);
        assert_eq!(pol.decide(1, &[low], &[], None, false, 70 * MS).put_back, vec![QueueId(1)]);
    }

    #[test]
    fn weights_give_a_held_queue_its_share_of_each_period() {
        let mut pol =
            Policy::with_sharing(PreemptSettings::default(), Sharing::Weights { high: 1, low: 1 });
        let low = q(1, -5, 2, 2 * MS);
        assert_eq!(pol.decide(0, &[low], &[o(5)], None, true, 0).take_off, vec![QueueId(1)]);
        pol.taken_off(&[QueueId(1)], 0);
        // Half of the 110 ms period off, then half on beside the higher work.
        let d = pol.decide(MS, &[low], &[o(5)], None, true, MS);
        assert!(d.put_back.is_empty());
        assert_eq!(d.wake_at, Some(55 * MS));
        let d = pol.decide(55 * MS, &[low], &[o(5)], None, true, 55 * MS);
        assert_eq!(d.starved, vec![QueueId(1)]);
        pol.put_back(&d.put_back, &d.starved, 55 * MS);
        let d = pol.decide(56 * MS, &[low], &[o(5)], None, true, 56 * MS);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(110 * MS));
        assert_eq!(
            pol.decide(110 * MS, &[low], &[o(5)], None, true, 110 * MS).take_off,
            vec![QueueId(1)]
        );
        // Strict in the same situation: 100 ms off, 10 on.
        let mut strict = policy();
        strict.taken_off(&[QueueId(1)], 0);
        assert_eq!(strict.decide(MS, &[low], &[o(5)], None, true, MS).wake_at, Some(100 * MS));
        // Live: another policy from now on.
        pol.set_sharing(Sharing::Weights { high: 3, low: 1 });
        assert_eq!(pol.sharing().share_permille, 250);
    }

    #[test]
    fn a_cap_takes_a_busy_queue_off_for_the_rest_of_each_period_with_no_higher_work() {
        let mut pol = Policy::with_sharing(PreemptSettings::default(), Sharing::Cap { pct: 40 });
        assert!(pol.acts_on_own_work());
        let busy = q(1, 0, 2, 2 * MS);
        // Busy from 0: on for 40 % of 110 ms = 44 ms.
        let d = pol.decide(0, &[busy], &[], None, true, 0);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(44 * MS));
        // Idle in between: the busy time starts again.
        assert!(pol.decide(20 * MS, &[q(1, 0, 0, 2 * MS)], &[], None, true, 0).take_off.is_empty());
        let d = pol.decide(30 * MS, &[busy], &[], None, true, 30 * MS);
        assert_eq!(d.wake_at, Some(74 * MS));
        let d = pol.decide(74 * MS, &[busy], &[], None, true, 74 * MS);
        assert_eq!(d.take_off, vec![QueueId(1)]);
        pol.taken_off(&d.take_off, 74 * MS);
        // Off for the rest of the period (66 ms), then back, busy time from then.
        let d = pol.decide(100 * MS, &[busy], &[], Some(450_000), true, 100 * MS);
        assert!(d.put_back.is_empty());
        assert_eq!(d.wake_at, Some(140 * MS));
        let d = pol.decide(140 * MS, &[busy], &[], Some(450_000), true, 140 * MS);
        assert_eq!(d.put_back, vec![QueueId(1)]);
        assert!(d.starved.is_empty());
        pol.put_back(&d.put_back, &d.starved, 140 * MS);
        assert_eq!(pol.decide(141 * MS, &[busy], &[], None, true, 0).wake_at, Some(184 * MS));
        // The budget delays the cap like any take-off; strict has no cap.
        let d = pol.decide(184 * MS, &[busy], &[], None, false, 190 * MS);
        assert!(d.take_off.is_empty());
        assert_eq!(d.wake_at, Some(190 * MS));
        assert!(!policy().acts_on_own_work());
        assert!(policy().decide(10_000 * MS, &[busy], &[], None, true, 0).take_off.is_empty());
    }

    #[test]
    fn the_slo_policy_compares_the_higher_work_beside_the_held_queue_and_without_it() {
        let mut pol =
            Policy::with_sharing(PreemptSettings::default(), Sharing::Slo { target_pct: 400 });
        let low = q(1, -5, 2, 2 * MS);
        let mut own_high = q(2, 5, 1, MS);
        own_high.pending = 1;
        let other = |ns| Other { key: 9, packet_ns: ns, ..o(5) };
        // The held queue's stretches as the policy makes them, every millisecond for `ms`; the
        // higher work's time per packet is `beside` while it was on the GPU beside it, 1 ms
        // while it was off.
        let mut now = 0;
        let mut on = true;
        let mut run = |pol: &mut Policy, ms: u64, beside: u64| {
            for _ in 0..ms {
                let ns = if on { beside } else { MS };
                let d = pol.decide(now, &[low, own_high], &[other(ns)], None, true, 0);
                if !d.take_off.is_empty() {
                    pol.taken_off(&d.take_off, now);
                    on = false;
                }
                if !d.put_back.is_empty() {
                    pol.put_back(&d.put_back, &d.starved, now);
                    on = true;
                }
                now += MS;
            }
        };
        // 3x beside it, within 4x: the share grows from strict's 5 %.
        run(&mut pol, 600, 3 * MS);
        assert_eq!(pol.sharing().ratio_pct, 300, "{:?}", pol.sharing());
        assert!(pol.sharing().share_permille > 100, "{:?}", pol.sharing());
        // 5x misses 4x: after two periods, nothing beside it but the minimum run after 20 bounds.
        run(&mut pol, 400, 5 * MS);
        assert_eq!(pol.sharing().ratio_pct, 500, "{:?}", pol.sharing());
        assert_eq!(pol.sharing().share_permille, 4, "{:?}", pol.sharing());
        assert_eq!(
            pol.deadline_after(now).map(|t| t > now + 1000 * MS),
            Some(true),
            "off up to 2 s"
        );
    }

    #[test]
    fn the_deadline_is_the_next_end_of_a_stretch_off_or_of_a_minimum_run() {
        let mut pol = policy();
        assert_eq!(pol.deadline_after(0), None);
        pol.taken_off(&[QueueId(1)], 5 * MS);
        assert_eq!(pol.deadline_after(5 * MS), Some(105 * MS), "the starvation bound");
        pol.put_back(&[QueueId(1)], &[QueueId(1)], 105 * MS);
        assert_eq!(pol.deadline_after(105 * MS), Some(115 * MS), "the minimum run");
        assert_eq!(pol.deadline_after(115 * MS), None, "past");
        pol.put_back(&[QueueId(2)], &[], 0);
        assert_eq!(pol.deadline_after(105 * MS), Some(115 * MS), "no run without the bound");
    }

    #[test]
    fn a_queue_that_left_the_board_while_off_is_put_back() {
        let mut pol = policy();
        pol.taken_off(&[QueueId(7)], 0);
        assert_eq!(pol.decide(1, &[], &[o(5)], None, true, 1).put_back, vec![QueueId(7)]);
    }
}
