//! How long the higher work pauses, and so how long a queue taken off for it waits before it
//! goes back ([`super::policy`]'s round-trip wait, learned).
//!
//! A queue taken off for higher-priority work goes back when that work has been gone for a
//! while. Putting it back at once costs a round trip (it goes back and is taken off again, two
//! device-wide unmaps, the second on the higher work's path) whenever the higher work only
//! paused: an LLM server's host code between two decode steps. Waiting costs the batch queue
//! the time it waits. Without knowledge of the pauses the wait is the ski-rental rule's: as
//! long as the round trip costs. With the pauses seen (the last [`KEPT`], once [`MIN_SEEN`]
//! are), the wait covers the longest recent pause shorter than a round trip, and a quarter
//! more, never beyond the round trip's wait; with none shorter, there is no wait. A server whose
//! pauses all last tens of milliseconds (a request every 50 ms) gets no wait: the batch job
//! goes back as soon as the request is done. One that pauses briefly between decode steps and
//! for seconds between requests gets a wait just longer than its step pauses, and never less:
//! a round trip's second unmap lands on the latency-critical work's next step, so the wait is
//! not traded against the batch job's time (a first version that chose the wait minimising
//! the batch job's expected cost over the pauses seen left the longest step pauses uncovered:
//! nine decode steps of 256 paid an unmap, TPOT P99 1.32x against 1.17-1.18x).
//!
//! A pause is the time from the moment no higher work is left (pending or in flight) to the
//! moment some is there again, as the watcher's looks see it; a look that finds it there ends
//! the pause whether or not the queue was taken off meanwhile (the pauses are the higher
//! work's, not this process's).
//!
//! Pure: time is passed in.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;
use std::collections::VecDeque;

/// Pauses kept: the most recent ones.
pub const KEPT: usize = 32;
/// Pauses seen before they decide the wait.
pub const MIN_SEEN: usize = 8;

/// The recent pauses of the higher work above one queue; see the module doc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pauses {
    recent: VecDeque<Nanos>,
    /// No higher work since then (a pause going on).
    quiet_since: Option<Nanos>,
    /// Higher work was seen at least once (a pause needs work before it).
    seen_work: bool,
}

impl Pauses {
    /// A look at `now`: whether higher work is there.
    pub fn observe(&mut self, now: Nanos, higher: bool) {
        match (higher, self.quiet_since) {
            (true, Some(since)) => {
                self.quiet_since = None;
                if self.recent.len() == KEPT {
                    self.recent.pop_front();
                }
                self.recent.push_back(now.saturating_sub(since));
            }
            (true, None) => self.seen_work = true,
            (false, None) if self.seen_work => self.quiet_since = Some(now),
            _ => {}
        }
    }

    /// The pauses seen, oldest first.
    #[cfg(test)]
    pub fn recent(&self) -> impl Iterator<Item = Nanos> + '_ {
        self.recent.iter().copied()
    }

    /// How long to wait before putting a queue back, given what a round trip costs.
    pub fn wait(&self, round_trip: Nanos) -> Nanos {
        if self.recent.len() < MIN_SEEN || round_trip == 0 {
            return round_trip;
        }
        let longest_short = self.recent.iter().copied().filter(|&p| p < round_trip).max();
        // A pause a little longer than the longest one seen should not cost a round trip: a
        // quarter more, never beyond the round trip's wait.
        longest_short.map_or(0, |p| p.saturating_add(p / 4).min(round_trip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Nanos = 1_000;
    const MS: Nanos = 1_000_000;

    /// Higher work in bursts of `busy`, separated by the `pauses` given, from time 0.
    fn seen(pauses: &[Nanos], busy: Nanos) -> Pauses {
        let mut p = Pauses::default();
        let mut t = 0;
        for &pause in pauses {
            p.observe(t, true);
            t += busy;
            p.observe(t, false);
            t += pause;
        }
        p.observe(t, true);
        p
    }

    #[test]
    fn until_enough_pauses_are_seen_the_wait_is_the_round_trip() {
        let rt = 10 * MS;
        assert_eq!(Pauses::default().wait(rt), rt);
        assert_eq!(seen(&[50 * MS; MIN_SEEN - 1], 3 * MS).wait(rt), rt);
        assert_eq!(seen(&[50 * MS; MIN_SEEN], 3 * MS).wait(rt), 0, "now enough");
    }

    #[test]
    fn pauses_all_longer_than_a_round_trip_need_no_wait() {
        // A request every 50 ms, each 3 ms of work: the batch job goes back at once.
        let p = seen(&[47 * MS; 20], 3 * MS);
        assert_eq!(p.recent().count(), 20);
        assert!(p.recent().all(|x| x == 47 * MS));
        assert_eq!(p.wait(9 * MS), 0);
    }

    #[test]
    fn short_pauses_between_steps_are_waited_through_with_a_margin() {
        // 31 steps' pauses of 150-300 us and one long pause between requests, in each request.
        let mut pauses = Vec::new();
        for _ in 0..2 {
            pauses.extend((0..15).map(|i| 150 * US + i * 10 * US));
            pauses.push(16_000 * MS);
        }
        let p = seen(&pauses, 6 * MS);
        let w = p.wait(9 * MS);
        assert!(w >= 290 * US, "the longest step pause is covered: {w}");
        assert!(w <= 290 * US + 290 * US / 4, "and not much more: {w}");
    }

    #[test]
    fn pauses_near_the_round_trip_keep_the_round_trips_wait() {
        // Pauses as long as the round trip itself: no shorter wait is cheaper, and the wait
        // never exceeds the round trip.
        let rt = 10 * MS;
        let p = seen(&[9 * MS; 16], MS);
        let w = p.wait(rt);
        assert!(w <= rt);
        assert!(w >= 9 * MS, "{w}");
    }

    #[test]
    fn a_single_short_pause_among_long_ones_is_covered() {
        let rt = 10 * MS;
        // One short pause in sixteen: the latency-critical work's next step would pay the
        // round trip, so the wait covers it.
        let rare: Vec<Nanos> = (0..16).map(|i| if i == 3 { MS } else { 100 * MS }).collect();
        assert_eq!(seen(&rare, MS).wait(rt), MS + MS / 4);
        // Pauses of 2-8 ms: the longest is covered, whatever the spread below it.
        let spread: Vec<Nanos> = (0..16).map(|i| 2 * MS + (i % 4) * 2 * MS).collect();
        assert_eq!(seen(&spread, MS).wait(rt), 10 * MS, "8 ms + a quarter, capped at 10 ms");
    }

    #[test]
    fn only_the_most_recent_pauses_count_and_quiet_before_any_work_is_no_pause() {
        let mut p = Pauses::default();
        p.observe(0, false);
        p.observe(5 * MS, false);
        p.observe(10 * MS, true);
        assert_eq!(p.recent().count(), 0, "no work before: a process starting, not a pause");
        let p = seen(&[MS; 40], MS);
        assert_eq!(p.recent().count(), KEPT);
        // The pattern changes: long pauses replace the short ones as they come.
        let mut q = seen(&[300 * US; KEPT], MS);
        assert!(q.wait(9 * MS) >= 300 * US);
        let mut t = 1_000 * MS;
        for _ in 0..KEPT {
            q.observe(t, false);
            t += 60 * MS;
            q.observe(t, true);
            t += 3 * MS;
        }
        assert_eq!(q.wait(9 * MS), 0);
    }
}
