//! How long a queue's packets take on the hardware, measured from its completions: the time the
//! queue had work in flight, divided by the packets that completed in it, smoothed; and that
//! time in total (the board's `busy_ns`, which with `completed` gives readers exact means over
//! any interval). The
//! preemption watchers (this process's and, through the board's `packet_ns`, the other
//! processes') use it to estimate how long a lower-priority queue's work in flight would delay
//! a higher priority, and so whether a preemption is worth its cost.
//!
//! Beside it, the time per packet over the busy periods during which no higher-priority work
//! shared the queue's CUs (the scheduler says so at each pass, [`PacketTime::contended`]): the
//! packets' **own** time. The first includes the time they waited for the higher work (a batch
//! queue beside an inference server's kernels: 60 µs per packet for kernels of 15 µs), which is
//! what the higher work's owner and the SLO measure; what a take-off would save the higher work
//! is the second: how long the lower queue's packets in flight run once that work has priority.
//!
//! Work of the same priority (another process's batch job beside this one) slows the packets
//! too, and is not told apart: the smoothed own time of BERT-base's 15 us kernels beside
//! ResNet-50 bs1024's GEMM tiles measures 0.25 to 11 ms of wall time per packet, moving with how
//! many tiles share the CUs at the time. When higher work comes, those peers typically yield too
//! (their take-offs), so the packets in flight then run nearer their least contended time: the
//! own time given out is the **least** smoothed value of the last one to two periods of
//! [`LEAST_OVER_NS`].
//!
//! Time is passed in ([`Nanos`]); nothing here reads a clock. The estimates are upper bounds of
//! the packets' own time when completions are observed late (a pass that counts them after the
//! fact), which errs towards preempting.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;

/// How long a least own time is remembered: the estimate is the least of the current and the
/// previous period of this length (one to two seconds of history).
pub const LEAST_OVER_NS: Nanos = 1_000_000_000;

/// The least of a value over the current and the previous period of [`LEAST_OVER_NS`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct RecentLeast {
    /// When the current period began.
    start: Nanos,
    /// The least value in the current period; 0: none.
    current: u64,
    /// The least value in the previous period; 0: none.
    previous: u64,
}

impl RecentLeast {
    fn note(&mut self, now: Nanos, value: u64) {
        let since = now.saturating_sub(self.start);
        if since >= 2 * LEAST_OVER_NS {
            // Nothing noted in the last period: nothing remembered.
            *self = RecentLeast { start: now, current: 0, previous: 0 };
        } else if since >= LEAST_OVER_NS {
            *self = RecentLeast { start: now, current: 0, previous: self.current };
        }
        self.current = least(self.current, value);
    }

    fn get(&self) -> u64 {
        least(self.current, self.previous)
    }
}

/// The lesser of two values where 0 means none.
fn least(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

/// The running estimate of one queue; see the module doc.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketTime {
    /// Since when the queue has had packets in flight (`None` while it has none).
    busy_since: Option<Nanos>,
    /// Smoothed nanoseconds per packet; 0 until the first completion.
    ns: u64,
    /// Total busy time counted at completions.
    busy: u64,
    /// Higher-priority work was seen during the current busy period.
    contended: bool,
    /// Smoothed nanoseconds per packet over the uncontended busy periods; 0 until one.
    own_ns: u64,
    /// The least recent `own_ns`.
    own_least: RecentLeast,
}

impl PacketTime {
    /// Packets were forwarded; `in_flight_before` is how many were in flight before them.
    pub fn forwarded(&mut self, now: Nanos, in_flight_before: u64) {
        if in_flight_before == 0 || self.busy_since.is_none() {
            self.busy_since = Some(now);
            self.contended = false;
        }
    }

    /// Higher-priority work shares the queue's CUs now: the current busy period (if any) gives
    /// no sample of the packets' own time.
    pub fn contended(&mut self) {
        if self.busy_since.is_some() {
            self.contended = true;
        }
    }

    /// `n` packets completed at `now`; `in_flight_after` remain in flight.
    pub fn completed(&mut self, now: Nanos, n: u64, in_flight_after: u64) {
        if n == 0 {
            return;
        }
        if let Some(since) = self.busy_since {
            let busy = now.saturating_sub(since);
            self.busy = self.busy.saturating_add(busy);
            let sample = busy / n;
            // Exponential smoothing with weight 1/4 for the new sample.
            self.ns = smooth(self.ns, sample);
            if !self.contended {
                self.own_ns = smooth(self.own_ns, sample);
                self.own_least.note(now, self.own_ns);
            }
        }
        self.busy_since = (in_flight_after > 0).then_some(now);
        self.contended = false;
    }

    /// Nanoseconds per packet, 0 while nothing completed.
    pub fn per_packet(&self) -> u64 {
        self.ns
    }

    /// Nanoseconds per packet over the busy periods without higher-priority work, the least
    /// smoothed value of the last one to two [`LEAST_OVER_NS`] (see the module doc; every new
    /// smoothed value is noted, so the least is never older than the last); 0 while none
    /// completed.
    pub fn own_per_packet(&self) -> u64 {
        self.own_least.get()
    }

    /// The packets' own time as far as measured: [`Self::own_per_packet`], or while no
    /// uncontended period was measured [`Self::per_packet`] (an upper bound); 0 while nothing
    /// completed: [`xhsa_model::stats::own_time_or_all`], the rule the board's readers apply to
    /// `own_packet_ns` and `packet_ns` (`preempt::policy::Mine::own_packet_ns`).
    pub fn own_or_all(&self) -> u64 {
        xhsa_model::stats::own_time_or_all(self.own_per_packet(), self.ns)
    }

    /// Total time the queue had packets in flight, up to its last completion.
    pub fn busy_ns(&self) -> u64 {
        self.busy
    }
}

/// Exponential smoothing with weight 1/4 for the new sample (the first sample as it is).
fn smooth(old: u64, sample: u64) -> u64 {
    if old == 0 {
        sample.max(1)
    } else {
        ((old * 3 + sample) / 4).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_divided_among_the_completed_packets() {
        let mut t = PacketTime::default();
        assert_eq!(t.per_packet(), 0);
        t.forwarded(1_000, 0);
        t.forwarded(1_500, 2); // more packets while busy: the busy period goes on
        t.completed(5_000, 4, 0); // 4 packets in 4 us
        assert_eq!(t.per_packet(), 1_000);
        // Idle time between bursts does not count.
        t.forwarded(100_000, 0);
        t.completed(102_000, 1, 1);
        assert_eq!(t.per_packet(), (1_000 * 3 + 2_000) / 4);
        t.completed(104_000, 1, 0); // measured from the previous completion
        assert_eq!(t.per_packet(), (1_250 * 3 + 2_000) / 4);
        t.completed(200_000, 0, 0);
        assert_eq!(t.per_packet(), 1_437, "no completion, no sample");
        // The busy periods in total: 4 us, then 2 us and 2 us; the idle 95 us not counted.
        assert_eq!(t.busy_ns(), 8_000);
    }

    #[test]
    fn busy_periods_beside_higher_work_give_no_sample_of_the_own_time() {
        let mut t = PacketTime::default();
        t.forwarded(0, 0);
        t.completed(2_000, 2, 0); // alone: 1 us per packet
        assert_eq!((t.per_packet(), t.own_per_packet()), (1_000, 1_000));
        t.contended(); // idle: nothing to mark
        t.forwarded(10_000, 0);
        t.contended(); // higher work came: the packets wait for it
        t.completed(18_000, 2, 1); // 4 us each, the time waited included
        assert_eq!(t.per_packet(), (1_000 * 3 + 4_000) / 4);
        assert_eq!(t.own_per_packet(), 1_000, "a contended period is no sample of the own time");
        // The period after that completion starts uncontended (the next pass marks it again
        // if the higher work is still there).
        t.completed(21_000, 1, 0);
        assert_eq!(t.own_ns, (1_000 * 3 + 3_000) / 4);
        assert_eq!(t.own_per_packet(), 1_000, "the least of the period");
    }

    #[test]
    fn the_own_time_given_is_the_least_of_the_last_one_to_two_periods() {
        const S: Nanos = LEAST_OVER_NS;
        let mut t = PacketTime::default();
        let at = |t: &mut PacketTime, now: Nanos, per: u64| {
            t.forwarded(now, 0);
            t.completed(now + per, 1, 0);
        };
        at(&mut t, 0, 1_000); // 1 us per packet
        assert_eq!(t.own_per_packet(), 1_000);
        // A same-priority peer's long kernels slow the packets: the smoothed value climbs, the
        // estimate stays at the least of the period.
        for i in 1..=20 {
            at(&mut t, i * 1_000_000, 40_000);
        }
        assert!(t.own_ns > 30_000, "smoothed {}", t.own_ns);
        assert_eq!(t.own_per_packet(), 1_000);
        // The next period still remembers the previous one's least...
        at(&mut t, S + 1_000, 40_000);
        assert_eq!(t.own_per_packet(), 1_000);
        // ...and the one after it only its own and the previous period's.
        at(&mut t, 2 * S + 2_000, 40_000);
        let climbed = t.own_per_packet();
        assert!(climbed > 30_000, "least of the last two periods: {climbed}");
        // A faster stretch is taken at once.
        for i in 0..8 {
            at(&mut t, 2 * S + 10_000_000 + i * 1_000_000, 2_000);
        }
        assert!(t.own_per_packet() < 10_000, "{}", t.own_per_packet());
        assert!(t.own_per_packet() <= t.own_ns);
        // After two idle periods nothing is remembered: the next value is taken as it is.
        at(&mut t, 10 * S, 50_000);
        assert_eq!(t.own_per_packet(), t.own_ns);
        // Contended periods are no sample of it either.
        let before = t.own_per_packet();
        t.forwarded(10 * S + 1_000_000, 0);
        t.contended();
        t.completed(10 * S + 1_000_000 + 100, 1, 0);
        assert_eq!(t.own_per_packet(), before);
    }

    #[test]
    fn completions_without_a_forward_seen_give_no_sample() {
        let mut t = PacketTime::default();
        t.completed(10, 3, 0);
        assert_eq!(t.per_packet(), 0);
    }
}
