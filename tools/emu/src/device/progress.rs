//! How far a batch of workgroups has got, under processor sharing: its calibrated work left,
//! the slowdown it runs at, and the device time it ends at that pace.
//!
//! A batch that has never been slowed keeps the integer end time it was placed with
//! (`placed + run time`), and its work left is that integer difference: floats enter only once
//! a batch is actually re-timed, so a device without contention gives exactly the times of the
//! fixed-end model (docs/timing-model-contention.md, section 4.3, step 5).

/// The progress of one batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// When the batch ends at its present slowdown (device ns).
    pub end: u64,
    /// Calibrated ns of work left at `since`.
    left: f64,
    /// Progress is counted from here (later than now during a preemption pause).
    since: u64,
    /// Device ns per calibrated ns (>= 1).
    slow: f64,
    /// Times re-timed: heap entries with an older version are stale.
    pub version: u32,
}

/// `x` rounded up to whole ns, ignoring float noise far below one ns.
fn ceil_ns(x: f64) -> u64 {
    (x - 1e-7).ceil().max(0.0) as u64
}

impl Progress {
    /// A batch placed at `now` with `work_ns` calibrated ns to run.
    pub fn new(now: u64, work_ns: u64) -> Self {
        Progress { end: now + work_ns, left: work_ns as f64, since: now, slow: 1.0, version: 0 }
    }

    /// Never re-timed: `end` is the exact integer of the fixed-end model.
    fn exact(&self) -> bool {
        self.version == 0
    }

    pub fn slowdown(&self) -> f64 {
        self.slow
    }

    /// Calibrated ns left at `now`.
    fn left_at(&self, now: u64) -> f64 {
        let ran = now.saturating_sub(self.since) as f64;
        (self.left - ran / self.slow).max(0.0)
    }

    /// Calibrated ns left at `now`, in whole ns (what a preempted workgroup saves).
    pub fn remaining(&self, now: u64) -> u64 {
        if self.exact() {
            self.end.saturating_sub(now.max(self.since))
        } else {
            ceil_ns(self.left_at(now))
        }
    }

    /// From `now` on, the batch runs at slowdown `slow`; its end moves accordingly.
    pub fn retime(&mut self, now: u64, slow: f64) {
        self.left = self.left_at(now);
        self.since = self.since.max(now);
        self.slow = slow;
        self.end = self.since + ceil_ns(self.left * slow);
        self.version += 1;
    }

    /// The batch makes no progress for `cost_ns` from `now` (KFD unmapping every queue); it
    /// ends that much later.
    pub fn pause(&mut self, now: u64, cost_ns: u64) {
        self.left = self.left_at(now);
        self.since = self.since.max(now) + cost_ns;
        self.end = if self.exact() {
            self.since + self.left as u64
        } else {
            self.since + ceil_ns(self.left * self.slow)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowing_and_speeding_up_keeps_the_work() {
        let mut p = Progress::new(100, 1000);
        assert_eq!((p.end, p.remaining(600)), (1100, 500));
        p.retime(600, 2.0);
        assert_eq!(p.end, 1600);
        assert_eq!(p.remaining(1000), 300);
        p.retime(1000, 1.0);
        assert_eq!(p.end, 1300);
        assert_eq!(p.version, 2);
    }

    #[test]
    fn a_pause_shifts_the_end_exactly() {
        let mut p = Progress::new(0, 1000);
        p.pause(100, 450);
        assert_eq!(p.end, 1450);
        assert_eq!(p.remaining(200), 900);
        // Overdue (not yet stepped) batches end right after the pause, as before.
        let mut q = Progress::new(0, 10);
        q.pause(100, 450);
        assert_eq!(q.end, 550);
    }
}
