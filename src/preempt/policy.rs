//! When a queue of this process is taken off the GPU and when it comes back: pure decisions over
//! what the board says, with time passed in.
//!
//! **Take off** a running queue `q` when all of these hold:
//! - higher-priority work exists: some other queue (of this process or of any other process on
//!   the GPU, from the board) with a higher priority has packets pending or in flight, in a CU
//!   partition that overlaps `q`'s (work on disjoint CUs, the two sides of an `XHSA_RESERVE`
//!   split, never takes the other side's queues off; [`xhsa_model::partition::overlaps`]);
//! - `q` has packets in flight on the hardware (held packets are the level-1 window's business);
//! - its work in flight would delay that work by more than a preemption costs: `in_flight ×
//!   packet_ns` (measured, [`crate::path::packet_time`]) above the measured cost of taking it off
//!   (either unknown counts as worth it);
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
//! longer, costs at most twice what knowing the pause's length in advance would.
//!
//! A queue an operator **paused** (`xhsactl pause`) is taken off as soon as it has packets in
//! flight, whatever the cost and the budget, and stays off, without the starvation bound, until
//! it is resumed; its work counts as no one's higher work.
#![forbid(unsafe_code)]

use super::settings::PreemptSettings;
use crate::path::window::Nanos;
use std::collections::BTreeMap;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::partition::overlaps;
use xhsa_model::priority::Priority;

/// A queue of another process with work, as the board shows it: its priority and CU partition.
pub type Other = (Priority, PartitionId);

/// One queue of this process as the board shows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mine {
    pub id: QueueId,
    pub priority: Priority,
    pub pending: u32,
    pub in_flight: u32,
    /// Measured time per packet (0: unknown).
    pub packet_ns: u64,
    /// Whether KFD knows the queue (it can be taken off at all).
    pub preemptable: bool,
    /// An operator paused it (`xhsactl pause`): off the GPU until resumed, whatever else runs.
    pub paused: bool,
    /// Its CU partition.
    pub partition: PartitionId,
}

impl Mine {
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
}

/// What to do now, and when to look again at the latest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub take_off: Vec<QueueId>,
    pub put_back: Vec<QueueId>,
    /// The starvation bound put these back: they get their minimum run.
    pub starved: Vec<QueueId>,
    /// Look again by then even if nothing is published.
    pub wake_at: Option<Nanos>,
}

/// The policy's memory: each queue's state.
#[derive(Clone, Debug)]
pub struct Policy {
    settings: PreemptSettings,
    states: BTreeMap<QueueId, State>,
    /// Queues off the GPU with no higher work left: since when (the round trip's wait).
    idle_since: BTreeMap<QueueId, Nanos>,
}

impl Policy {
    pub fn new(settings: PreemptSettings) -> Policy {
        Policy { settings, states: BTreeMap::new(), idle_since: BTreeMap::new() }
    }

    /// The state of `q` (running when unknown).
    pub fn state(&self, q: QueueId) -> State {
        self.states.get(&q).copied().unwrap_or(State::Running { exempt_until: 0 })
    }

    /// The queues off the GPU.
    pub fn off(&self) -> Vec<QueueId> {
        self.states
            .iter()
            .filter(|(_, s)| matches!(s, State::Off { .. }))
            .map(|(q, _)| *q)
            .collect()
    }

    /// `queues` were taken off at `now`.
    pub fn taken_off(&mut self, queues: &[QueueId], now: Nanos) {
        for q in queues {
            self.states.insert(*q, State::Off { since: now });
            self.idle_since.remove(q);
        }
    }

    /// `queues` were put back at `now`; `starved` ones get their minimum run.
    pub fn put_back(&mut self, queues: &[QueueId], starved: &[QueueId], now: Nanos) {
        for q in queues {
            let exempt_until = if starved.contains(q) { now + self.settings.min_run_ns } else { 0 };
            self.states.insert(*q, State::Running { exempt_until });
            self.idle_since.remove(q);
        }
    }

    /// Forgets a queue (destroyed).
    pub fn forget(&mut self, q: QueueId) {
        self.states.remove(&q);
        self.idle_since.remove(&q);
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
            others.iter().any(|(p, part)| *p > q.priority && overlaps(*part, q.partition))
                || mine.iter().any(|m| {
                    m.id != q.id
                        && m.has_work()
                        && m.priority > q.priority
                        && overlaps(m.partition, q.partition)
                })
        };
        let wake =
            |d: &mut Decision, at: Nanos| d.wake_at = Some(d.wake_at.map_or(at, |w| w.min(at)));
        for q in mine {
            match self.state(q.id) {
                State::Off { since } => {
                    if q.paused {
                        continue;
                    }
                    if !higher_work(q) {
                        // The round trip's wait (module doc): twice the measured cost.
                        let wait = cost.unwrap_or(0).saturating_mul(2);
                        let idle = *self.idle_since.entry(q.id).or_insert(now);
                        if now.saturating_sub(idle) >= wait {
                            d.put_back.push(q.id);
                        } else {
                            wake(&mut d, idle + wait);
                        }
                        continue;
                    }
                    self.idle_since.remove(&q.id);
                    if now.saturating_sub(since) >= self.settings.max_preempted_ns {
                        d.put_back.push(q.id);
                        d.starved.push(q.id);
                    } else {
                        wake(&mut d, since + self.settings.max_preempted_ns);
                    }
                }
                State::Running { exempt_until } => {
                    if q.paused && q.preemptable && q.in_flight > 0 {
                        d.take_off.push(q.id);
                        continue;
                    }
                    if !q.preemptable || q.in_flight == 0 || !higher_work(q) {
                        continue;
                    }
                    if now < exempt_until {
                        wake(&mut d, exempt_until);
                        continue;
                    }
                    let delay = u64::from(q.in_flight).saturating_mul(q.packet_ns);
                    let worth = q.packet_ns == 0 || cost.is_none_or(|c| delay > c);
                    if !worth {
                        continue;
                    }
                    if !budget_ok {
                        wake(&mut d, budget_at);
                        continue;
                    }
                    d.take_off.push(q.id);
                }
            }
        }
        // Queues that disappeared from the board while off are put back too.
        for q in self.off() {
            if !mine.iter().any(|m| m.id == q) {
                d.put_back.push(q);
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
    fn o(level: i64) -> (Priority, PartitionId) {
        (p(level), PartitionId::WHOLE)
    }

    fn q(id: u64, level: i64, in_flight: u32, packet_ns: u64) -> Mine {
        Mine {
            id: QueueId(id),
            priority: p(level),
            pending: 0,
            in_flight,
            packet_ns,
            preemptable: true,
            paused: false,
            partition: PartitionId::WHOLE,
        }
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
        let d = pol.decide(0, &[batch, own_high], &[(p(10), reserved)], None, true, 0);
        assert!(d.take_off.is_empty(), "{d:?}");
        // Higher work on its own side, or on the whole GPU (another setting): yes.
        assert_eq!(pol.decide(0, &[batch], &[(p(0), shared)], None, true, 0).take_off.len(), 1);
        assert_eq!(pol.decide(0, &[batch], &[o(10)], None, true, 0).take_off.len(), 1);
        // Off for shared-side work, it comes back when only reserved-side work is left.
        pol.taken_off(&[QueueId(1)], 0);
        let d = pol.decide(MS, &[batch, own_high], &[(p(10), reserved)], None, true, MS);
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
    fn a_queue_that_left_the_board_while_off_is_put_back() {
        let mut pol = policy();
        pol.taken_off(&[QueueId(7)], 0);
        assert_eq!(pol.decide(1, &[], &[o(5)], None, true, 1).put_back, vec![QueueId(7)]);
    }
}
