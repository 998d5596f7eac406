//! The level-1 window: how many packets a queue may have in flight on the hardware.
//!
//! **Rule.** A queue of priority `p` is *contended* while some queue of a higher priority — in
//! this process or in any other on the same GPU (the board) — has packets pending in libxhsa or in
//! flight on the hardware. A contended queue may forward a packet only while it has fewer than
//! `W` in flight, so it never holds more than `W` once higher-priority work exists. An
//! uncontended queue is not throttled at all: it may forward everything it holds (up to the
//! capacity of its hardware queue, see [`Limit`]).
//!
//! **W** is `XHSA_WINDOW` (or `window` in the config file): default [`WindowSize::DEFAULT`] = 2,
//! accepted range `1..=1024`. Smaller is more responsive for high priorities and costs the
//! throttled low priority more idle gaps; 1 is the strictest level-1 setting.
//!
//! What level 1 cannot do: recall a packet already on the hardware. Packets a queue forwarded
//! while it was uncontended stay in flight when higher-priority work arrives; the queue then
//! forwards nothing new until its in-flight count is below `W` again. Shortening that tail is the
//! job of levels 2-3 (KFD queue priority, suspend/resume). Conversely a contended queue is never
//! stopped entirely: it keeps up to `W` packets running, so no priority starves (which is also why
//! XSched's `-256`, "no execute", is just the lowest priority here).
//!
//! **Completions** arrive in order per queue: libxhsa's tracking barrier (see
//! [`crate::path::packet::Packet::tracking_barrier`]) follows the packets it covers on the same
//! hardware queue, so its signal firing means every packet up to it completed.
//! [`QueueWindow::complete_through`] takes the sequence number of the last packet covered.
//!
//! **Throttle time** is the time a queue spent *held back*: holding pending packets while the
//! window forbade forwarding. Time is passed in by the caller ([`Nanos`], any monotonic origin);
//! nothing here reads a clock.
#![forbid(unsafe_code)]

use std::fmt;
use xhsa_model::priority::Priority;
use xhsa_model::window_size::WindowSize;

/// Nanoseconds on a monotonic clock chosen by the caller.
pub type Nanos = u64;

/// A packet's position in its queue: the first packet pushed is 0.
pub type Seq = u64;

/// How many packets a queue may have in flight right now.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Uncontended: no throttling.
    Unlimited,
    /// Contended: at most this many (W).
    AtMost(u32),
}

impl Limit {
    /// Whether one more packet may be forwarded by a queue with `in_flight` packets in flight.
    pub fn allows(self, in_flight: u32) -> bool {
        match self {
            Limit::Unlimited => true,
            Limit::AtMost(w) => in_flight < w,
        }
    }

    /// Whether this limit throttles at all.
    pub fn is_throttling(self) -> bool {
        matches!(self, Limit::AtMost(_))
    }
}

/// The window rule: a queue of priority `own` while the highest priority with work anywhere is
/// `highest_with_work` (the queue itself may be part of that).
pub fn limit(window: WindowSize, own: Priority, highest_with_work: Option<Priority>) -> Limit {
    match highest_with_work {
        Some(highest) if highest > own => Limit::AtMost(window.get()),
        _ => Limit::Unlimited,
    }
}

/// A completion report that does not fit what was forwarded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CompletionError {
    /// `complete(n)` with more packets than are in flight.
    MoreThanInFlight {
        /// The count reported.
        reported: u64,
        /// The count in flight.
        in_flight: u64,
    },
    /// `complete_through(seq)` for a packet not forwarded yet.
    NotForwarded {
        /// The sequence number reported.
        seq: Seq,
        /// Packets forwarded so far (sequence numbers `0..forwarded`).
        forwarded: u64,
    },
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompletionError::MoreThanInFlight { reported, in_flight } => {
                write!(f, "{reported} completions reported with {in_flight} packets in flight")
            }
            CompletionError::NotForwarded { seq, forwarded } => {
                write!(f, "completion of packet {seq} reported, but only packets 0..{forwarded} were forwarded")
            }
        }
    }
}

impl std::error::Error for CompletionError {}

/// One queue's in-flight and throttle accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueWindow {
    forwarded: u64,
    completed: u64,
    held_since: Option<Nanos>,
    throttle_ns: u64,
    throttle_events: u64,
}

impl QueueWindow {
    /// A queue that has forwarded nothing.
    pub fn new() -> QueueWindow {
        QueueWindow::default()
    }

    /// Packets forwarded and not yet completed.
    pub fn in_flight(&self) -> u64 {
        self.forwarded - self.completed
    }

    /// Packets forwarded so far; the next one forwarded gets this sequence number.
    pub fn forwarded(&self) -> u64 {
        self.forwarded
    }

    /// Packets completed so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Whether one more packet may go, under `limit` and a hardware queue with room for
    /// `capacity` packets in flight.
    pub fn may_forward(&self, limit: Limit, capacity: u32) -> bool {
        let in_flight = self.in_flight();
        in_flight < capacity as u64 && limit.allows(in_flight.min(u32::MAX as u64) as u32)
    }

    /// Records one packet forwarded; returns its sequence number.
    pub fn on_forward(&mut self) -> Seq {
        let seq = self.forwarded;
        self.forwarded += 1;
        seq
    }

    /// The oldest `n` packets in flight completed.
    pub fn complete(&mut self, n: u64) -> Result<(), CompletionError> {
        if n > self.in_flight() {
            return Err(CompletionError::MoreThanInFlight {
                reported: n,
                in_flight: self.in_flight(),
            });
        }
        self.completed += n;
        Ok(())
    }

    /// Every packet up to and including `seq` completed. Idempotent: reporting an older `seq`
    /// again changes nothing. Returns how many packets this report completed.
    pub fn complete_through(&mut self, seq: Seq) -> Result<u64, CompletionError> {
        if seq >= self.forwarded {
            return Err(CompletionError::NotForwarded { seq, forwarded: self.forwarded });
        }
        let newly = (seq + 1).saturating_sub(self.completed);
        self.completed += newly;
        Ok(newly)
    }

    /// Throttle accounting: at `now` the queue is (`held`) or is not held back.
    pub fn observe(&mut self, now: Nanos, held: bool) {
        match (held, self.held_since) {
            (true, None) => {
                self.held_since = Some(now);
                self.throttle_events += 1;
            }
            (false, Some(since)) => {
                self.throttle_ns += now.saturating_sub(since);
                self.held_since = None;
            }
            _ => {}
        }
    }

    /// Whether the last observation found the queue held back.
    pub fn is_held(&self) -> bool {
        self.held_since.is_some()
    }

    /// Total time held back up to `now` (the current hold included).
    pub fn throttle_ns(&self, now: Nanos) -> u64 {
        self.throttle_ns + self.held_since.map_or(0, |since| now.saturating_sub(since))
    }

    /// How many times the queue started being held back.
    pub fn throttle_events(&self) -> u64 {
        self.throttle_events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_model::priority::{Level, StreamPriority};

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    #[test]
    fn window_size_range_and_default() {
        assert_eq!(WindowSize::default().get(), 2);
        assert_eq!(WindowSize::new(1).map(WindowSize::get), Some(1));
        assert_eq!(WindowSize::new(1024).map(WindowSize::get), Some(1024));
        assert_eq!(WindowSize::new(0), None);
        assert_eq!(WindowSize::new(1025), None);
    }

    #[test]
    fn only_higher_work_throttles() {
        let w = WindowSize::new(3).unwrap();
        assert_eq!(limit(w, p(0), None), Limit::Unlimited);
        assert_eq!(
            limit(w, p(0), Some(p(0))),
            Limit::Unlimited,
            "equal priority does not throttle"
        );
        assert_eq!(limit(w, p(0), Some(p(-5))), Limit::Unlimited);
        assert_eq!(limit(w, p(0), Some(p(1))), Limit::AtMost(3));
        // A higher stream priority at the same level is higher work too.
        let high_stream = p(0).with_stream(StreamPriority::High);
        assert_eq!(limit(w, p(0), Some(high_stream)), Limit::AtMost(3));
        assert!(Limit::AtMost(3).allows(2));
        assert!(!Limit::AtMost(3).allows(3));
        assert!(Limit::Unlimited.allows(u32::MAX));
        assert!(!Limit::Unlimited.is_throttling());
    }

    #[test]
    fn in_flight_follows_forwards_and_completions() {
        let mut q = QueueWindow::new();
        assert_eq!(q.on_forward(), 0);
        assert_eq!(q.on_forward(), 1);
        assert_eq!(q.on_forward(), 2);
        assert_eq!(q.in_flight(), 3);
        assert!(!q.may_forward(Limit::AtMost(3), u32::MAX));
        assert!(q.may_forward(Limit::Unlimited, u32::MAX));
        assert!(!q.may_forward(Limit::Unlimited, 3), "capacity bounds even an unthrottled queue");
        q.complete(1).unwrap();
        assert_eq!(q.in_flight(), 2);
        assert!(q.may_forward(Limit::AtMost(3), u32::MAX));
        assert_eq!(
            q.complete(3),
            Err(CompletionError::MoreThanInFlight { reported: 3, in_flight: 2 })
        );
        assert_eq!(q.in_flight(), 2, "a bad report changes nothing");
        assert_eq!(q.complete_through(1), Ok(1));
        assert_eq!(q.complete_through(1), Ok(0), "idempotent");
        assert_eq!(q.complete_through(0), Ok(0), "older reports are no-ops");
        assert_eq!(
            q.complete_through(3),
            Err(CompletionError::NotForwarded { seq: 3, forwarded: 3 })
        );
        assert_eq!(q.complete_through(2), Ok(1));
        assert_eq!((q.forwarded(), q.completed(), q.in_flight()), (3, 3, 0));
        assert!(CompletionError::NotForwarded { seq: 3, forwarded: 3 }
            .to_string()
            .contains("0..3"));
    }

    #[test]
    fn throttle_time_accumulates_only_while_held() {
        let mut q = QueueWindow::new();
        q.observe(100, false);
        assert_eq!(q.throttle_ns(200), 0);
        q.observe(200, true);
        assert!(q.is_held());
        assert_eq!(q.throttle_ns(250), 50);
        q.observe(300, true); // still held: the hold started at 200
        q.observe(400, false);
        assert_eq!(q.throttle_ns(1000), 200);
        q.observe(500, true);
        q.observe(450, false); // a clock going backwards never subtracts
        assert_eq!(q.throttle_ns(2000), 200);
        assert_eq!(q.throttle_events(), 2);
    }
}
