//! What preemptions cost, measured, and how much of the device's time they may take.
//!
//! Every KFD call that takes queues off the GPU or puts them back unmaps every queue of the
//! device on an HWS GPU (every process stalls for it), so its cost is measured — the duration of
//! each call, smoothed per mechanism and direction ([`Cost`]) — and the calls that take queues
//! off are rate limited ([`Budget`]): within any window of [`BUDGET_WINDOW_NS`] they may use at
//! most `XHSA_PREEMPT_BUDGET` percent of it. Putting queues back is never limited (a queue is
//! never left off the GPU for want of budget); its time is counted all the same.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;
use std::collections::VecDeque;

/// The window of the rate limit.
pub const BUDGET_WINDOW_NS: Nanos = 1_000_000_000;

/// A smoothed duration; `None` until measured.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    ns: Option<Nanos>,
    samples: u32,
}

impl Cost {
    /// Adds a measured duration (weight 1/4 once there is an estimate).
    pub fn record(&mut self, ns: Nanos) {
        self.ns = Some(match self.ns {
            None => ns,
            Some(old) => (old * 3 + ns) / 4,
        });
        self.samples = self.samples.saturating_add(1);
    }

    /// The estimate.
    pub fn get(&self) -> Option<Nanos> {
        self.ns
    }

    /// How many durations were recorded.
    pub fn samples(&self) -> u32 {
        self.samples
    }
}

/// The rate limit; see the module doc.
#[derive(Clone, Debug)]
pub struct Budget {
    pct: u32,
    /// (start, duration) of the calls within the window, oldest first.
    calls: VecDeque<(Nanos, Nanos)>,
}

impl Budget {
    /// A budget of `pct` percent of every window.
    pub fn new(pct: u32) -> Budget {
        Budget { pct: pct.clamp(1, 100), calls: VecDeque::new() }
    }

    fn allowance(&self) -> Nanos {
        BUDGET_WINDOW_NS / 100 * Nanos::from(self.pct)
    }

    fn forget_before(&mut self, now: Nanos) {
        let start = now.saturating_sub(BUDGET_WINDOW_NS);
        while self.calls.front().is_some_and(|&(t, d)| t + d <= start) {
            self.calls.pop_front();
        }
    }

    /// Time the calls took within the window ending at `now`.
    pub fn spent(&mut self, now: Nanos) -> Nanos {
        self.forget_before(now);
        let start = now.saturating_sub(BUDGET_WINDOW_NS);
        self.calls.iter().map(|&(t, d)| (t + d).min(now).saturating_sub(t.max(start))).sum()
    }

    /// Whether a call expected to take `expected` fits now.
    pub fn allows(&mut self, now: Nanos, expected: Nanos) -> bool {
        self.spent(now) + expected <= self.allowance()
    }

    /// When a call expected to take `expected` will fit, if not now (the oldest calls leave
    /// the window one by one).
    pub fn next_allowed(&mut self, now: Nanos, expected: Nanos) -> Nanos {
        if self.allows(now, expected) {
            return now;
        }
        for &(t, d) in &self.calls {
            let at = t + d + BUDGET_WINDOW_NS;
            let mut probe = self.clone();
            if probe.allows(at, expected) {
                return at;
            }
        }
        now + BUDGET_WINDOW_NS
    }

    /// A call started at `start` and took `duration`.
    pub fn record(&mut self, start: Nanos, duration: Nanos) {
        self.calls.push_back((start, duration));
        self.forget_before(start + duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn costs_are_smoothed() {
        let mut c = Cost::default();
        assert_eq!(c.get(), None);
        c.record(400);
        assert_eq!((c.get(), c.samples()), (Some(400), 1));
        c.record(800);
        assert_eq!(c.get(), Some(500));
    }

    #[test]
    fn the_budget_limits_time_per_window_and_frees_up() {
        let mut b = Budget::new(10); // 100 ms per second
        assert!(b.allows(0, 50 * MS));
        b.record(0, 60 * MS);
        assert!(b.allows(100 * MS, 40 * MS));
        assert!(!b.allows(100 * MS, 41 * MS));
        b.record(100 * MS, 40 * MS);
        assert_eq!(b.spent(500 * MS), 100 * MS);
        assert!(!b.allows(500 * MS, MS));
        // The first call leaves the window at 1060 ms.
        let at = b.next_allowed(500 * MS, 10 * MS);
        assert_eq!(at, 1_060 * MS);
        assert!(b.allows(at, 10 * MS));
        assert_eq!(b.spent(2_000 * MS), 0);
    }
}
