//! The latency-critical class's demand pattern over the long run, for the live sizing
//! ([`super::sizing`]): how much of the time it keeps the GPU busy, and whether it has been
//! watched long enough for that figure to mean anything.
//!
//! A size's own figures cover a few seconds; a class paced by its requests (an LLM server:
//! a request is a burst of work, busy through its prefill and decode steps, then idle until
//! the next one arrives) looks like a class that keeps the GPU busy in any window shorter than
//! its cycle. Its pattern is **known** once it went through [`CYCLES_KNOWN`] idle periods (of
//! [`IDLE_MIN_NS`] at least: a hiccup is no idle period) and came back (its duty then covers
//! whole cycles), or, never idle since its first work, stayed busy at every look for
//! [`BUSY_STRETCH_NS`] (a server under steady load, requests back to back). A class seen busy
//! that then goes idle is a burst after all: its pattern is unknown again until its cycles are
//! seen, or until it stays busy for [`DUTY_TAU_NS`] (steady again: a server that restarted).
//! While it is unknown the sizing makes no trial: it cannot tell which of the two it serves,
//! and a trial on a burst costs the burst its tail. The **duty** is the fraction of the time
//! the class had packets in flight, over the time since its first idle period began (a process
//! often starts with a backlog, its first requests back to back, and a first burst taken for a
//! steady class is slowed by the sizing's trials: neither says how busy it keeps the GPU), older
//! intervals fading with [`DUTY_TAU_NS`].
//!
//! Pure: busy fractions and spans are passed in.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;

/// Intervals fade out of the duty with this time constant.
pub const DUTY_TAU_NS: Nanos = 60_000_000_000;
/// A look interval in which the class was busy less than this fraction of the time is idle.
pub const IDLE_BELOW: f64 = 0.05;
/// A class busy at every look this long, never idle, keeps the GPU busy itself (as long as a
/// size's figures take to count, [`super::sizing::MIN_MEASURED_NS`]). A burst of an LLM
/// server can last longer (a request's prefill and a few hundred decode steps, or the first
/// requests of a server that starts with a backlog) and is then taken for a steady class until
/// it goes idle; a steady server (bert6's) would pay for a longer stretch with its tail, under
/// the sharing policy's time sharing until its reserve comes (a 10 s stretch: P99 1.8-1.9x).
pub const BUSY_STRETCH_NS: Nanos = 2_000_000_000;
/// A class that went idle this many times and came back has shown its cycle.
pub const CYCLES_KNOWN: u32 = 3;
/// Idle looks in a row must cover this long to be an idle period.
pub const IDLE_MIN_NS: Nanos = 500_000_000;

/// What the looks at the board showed of the critical class so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Duty {
    /// Busy time and span, faded ([`DUTY_TAU_NS`]); both 0 until the class's first work, and
    /// counted again from the start of its first idle period.
    busy_ns: f64,
    span_ns: f64,
    /// The busy stretch going on (since the last idle period).
    stretch_ns: Nanos,
    /// Idle looks in a row so far.
    idle_ns: Nanos,
    /// Idle periods the class came back from.
    cycles: u32,
    /// The class is in an idle period now; it has had one since its first work.
    idle: bool,
    idled: bool,
}

impl Duty {
    /// The class was busy `busy` (a fraction) of the `span_ns` between two looks. Intervals
    /// before its first work are not counted (a process starting up is not idle work), nor
    /// empty spans or fractions that are not numbers.
    pub fn observe(&mut self, busy: f64, span_ns: Nanos) {
        let started = self.span_ns > 0.0;
        if span_ns == 0 || !busy.is_finite() || (!started && busy < IDLE_BELOW) {
            return;
        }
        let busy = busy.clamp(0.0, 1.0);
        let span = span_ns as f64;
        let keep = (-span / DUTY_TAU_NS as f64).exp();
        self.busy_ns = self.busy_ns * keep + busy * span;
        self.span_ns = self.span_ns * keep + span;
        if busy < IDLE_BELOW {
            self.idle_ns = self.idle_ns.saturating_add(span_ns);
            if self.idle_ns >= IDLE_MIN_NS {
                if !self.idled {
                    // The first idle period: the duty counts from its start.
                    self.busy_ns = 0.0;
                    self.span_ns = self.idle_ns as f64;
                }
                self.idle = true;
                self.idled = true;
                self.stretch_ns = 0;
            }
        } else {
            self.idle_ns = 0;
            if std::mem::take(&mut self.idle) {
                self.cycles += 1;
            }
            self.stretch_ns = self.stretch_ns.saturating_add(span_ns);
        }
    }

    /// Whether the class's pattern has been seen: [`CYCLES_KNOWN`] cycles, or a busy stretch
    /// of [`BUSY_STRETCH_NS`] with no idle period since its first work ([`DUTY_TAU_NS`] after
    /// one).
    pub fn known(&self) -> bool {
        let stretch = if self.idled { DUTY_TAU_NS } else { BUSY_STRETCH_NS };
        self.cycles >= CYCLES_KNOWN || self.stretch_ns >= stretch
    }

    /// The fraction of the time the class kept the GPU busy, once its pattern is known.
    pub fn fraction(&self) -> Option<f64> {
        (self.known() && self.span_ns > 0.0).then(|| self.busy_ns / self.span_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    const LOOK: Nanos = 500 * MS;

    /// `n` looks with the class busy `busy` of each.
    fn looks(d: &mut Duty, n: u64, busy: f64) {
        for _ in 0..n {
            d.observe(busy, LOOK);
        }
    }

    #[test]
    fn a_class_busy_at_every_look_is_known_after_the_stretch() {
        let mut d = Duty::default();
        looks(&mut d, 4, 0.0); // starting up: not counted
        let stretch = BUSY_STRETCH_NS / LOOK;
        looks(&mut d, stretch - 1, 0.9);
        assert!(!d.known() && d.fraction().is_none(), "{d:?}");
        looks(&mut d, 1, 0.9);
        assert!(d.known(), "{d:?}");
        let f = d.fraction().unwrap();
        assert!((f - 0.9).abs() < 1e-9, "the start-up looks do not count: {f}");
    }

    #[test]
    fn a_class_paced_by_bursts_is_known_after_its_cycles_with_its_duty_over_them() {
        // An LLM server as llm-decode runs it: a request every 16 s keeps it busy 5 s; it starts
        // with a backlog (two requests back to back, 10.5 s busy). Every window shorter than
        // the cycle looks busy; the duty over its cycles is ~0.31.
        let mut d = Duty::default();
        let burst = |d: &mut Duty| {
            looks(d, 10, 1.0);
            looks(d, 22, 0.0);
        };
        looks(&mut d, 21, 1.0);
        assert!(d.known(), "busy for the stretch, never idle: taken for a steady class");
        looks(&mut d, 22, 0.0);
        assert!(!d.known(), "then idle: a burst, its pattern unknown until its cycles are seen");
        burst(&mut d);
        burst(&mut d);
        assert!(!d.known(), "two idle periods came back from: {d:?}");
        looks(&mut d, 1, 1.0);
        assert!(d.known());
        let f = d.fraction().unwrap();
        // Two bursts over two cycles and the idle period before them, seen at the start of
        // the next: 10.5 s in 43.5 s.
        assert!((0.2..0.3).contains(&f), "the backlog at the start does not count: {f}");
        for _ in 0..6 {
            burst(&mut d);
        }
        let f = d.fraction().unwrap();
        assert!((0.25..0.36).contains(&f), "{f}");
    }

    #[test]
    fn the_duty_counts_from_the_first_idle_period() {
        // Idle right after a warm-up: the backlog's 10.5 s comes after the first idle period
        // and counts; over three cycles the class is still one paced by its requests.
        let mut d = Duty::default();
        looks(&mut d, 1, 0.2);
        looks(&mut d, 1, 0.0);
        looks(&mut d, 21, 1.0);
        looks(&mut d, 18, 0.0);
        looks(&mut d, 10, 1.0);
        looks(&mut d, 22, 0.0);
        assert!(!d.known(), "{d:?}");
        looks(&mut d, 1, 1.0);
        let f = d.fraction().unwrap();
        assert!((0.35..0.5).contains(&f), "{f}");
        // A first burst of 40 s (trials slowed it) before the first idle period is left out:
        // counted, it would make the class look busy (0.6).
        let mut d = Duty::default();
        looks(&mut d, 80, 1.0);
        looks(&mut d, 22, 0.0);
        for _ in 0..2 {
            looks(&mut d, 10, 1.0);
            looks(&mut d, 22, 0.0);
        }
        looks(&mut d, 1, 1.0);
        let f = d.fraction().unwrap();
        assert!((0.2..0.3).contains(&f), "{f}");
    }

    #[test]
    fn a_hiccup_is_no_idle_period_and_a_long_busy_stretch_makes_a_burst_steady_again() {
        // A settling look of 100 ms without work (a re-partition's unmaps) in a steady stream.
        let mut d = Duty::default();
        looks(&mut d, BUSY_STRETCH_NS / LOOK, 0.9);
        d.observe(0.0, 100 * MS);
        looks(&mut d, 1, 0.9);
        assert!(d.known() && !d.idled, "{d:?}");
        // A real idle period (a restart), then busy for the stretch: not known (a burst, as
        // far as the sizing can tell) until busy for DUTY_TAU_NS.
        looks(&mut d, IDLE_MIN_NS / LOOK, 0.0);
        looks(&mut d, BUSY_STRETCH_NS / LOOK, 0.9);
        assert!(!d.known(), "{d:?}");
        looks(&mut d, DUTY_TAU_NS / LOOK - BUSY_STRETCH_NS / LOOK - 1, 0.9);
        assert!(!d.known(), "{d:?}");
        looks(&mut d, 1, 0.9);
        assert!(d.known(), "{d:?}");
    }

    #[test]
    fn old_intervals_fade_so_the_duty_follows_a_change_of_demand() {
        let mut d = Duty::default();
        looks(&mut d, BUSY_STRETCH_NS / LOOK, 1.0);
        assert!(d.fraction().unwrap() > 0.99);
        // Three time constants at 20 % busy (never idle): the duty is near 20 %.
        looks(&mut d, 3 * DUTY_TAU_NS / LOOK, 0.2);
        let f = d.fraction().unwrap();
        assert!((0.2..0.25).contains(&f), "{f}");
    }

    #[test]
    fn empty_spans_and_out_of_range_fractions_do_not_disturb_it() {
        let mut d = Duty::default();
        d.observe(1.0, 0);
        assert_eq!(d, Duty::default());
        looks(&mut d, BUSY_STRETCH_NS / LOOK, 7.0);
        assert_eq!(d.fraction(), Some(1.0));
        let before = d.clone();
        d.observe(f64::NAN, LOOK);
        assert_eq!(d, before, "a fraction that is not a number is no interval");
    }
}
