//! One shadow queue: what libxhsa knows about it and the states it goes through.
//!
//! A shadow queue is the `hsa_queue_t` libxhsa hands the application in place of the hardware
//! queue it created behind it (docs/libxhsa-shadow-queues.md, option B). Its [`Mode`]:
//!
//! ```text
//!            degrade (internal failure)
//! Scheduled ───────────────────────────► Direct
//!     │  inactivate / HW error              │  inactivate / HW error
//!     ▼                                     ▼
//! Inactive, Failed ◄────────────────────────┘
//!     any mode ── hsa_queue_destroy ──► Closing (drain, wait, free)
//! ```
//!
//! - `Scheduled`: packets go through the priority rings and the level-1 window; each forwarding
//!   pass that writes packets of this queue appends a tracking barrier.
//! - `Direct`: passthrough after an internal failure — packets are copied to the hardware ring as
//!   they come (after the `backlog` libxhsa still held, so order is kept), without tracking
//!   unless some do not fit: then a tracking barrier whose completion writes the rest.
//! - `Inactive` / `Failed`: `hsa_queue_inactivate` or a hardware-queue error; doorbells are
//!   ignored and held packets were dropped, as a real queue drops unprocessed packets.
//! - `Closing`: `hsa_queue_destroy` is draining it.
//!
//! [`Tracking`] maps completions of the tracking barriers back to the packets they cover: the
//! queue's tracking signal starts at [`TRACKING_START`] and the packet processor decrements it
//! once per barrier, so `TRACKING_START - value` barriers completed, in order.
#![forbid(unsafe_code)]

use crate::path::aql_ring::AqlRing;
use crate::path::packet::Packet;
use crate::path::window::Seq;
use std::collections::VecDeque;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::StreamPriority;

/// Initial value of a tracking signal (far from 0, so no count of barriers reaches it).
pub const TRACKING_START: i64 = 1 << 40;

/// The states of a shadow queue; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Scheduled,
    Direct,
    Inactive,
    Failed,
    Closing,
}

/// The hardware queue behind a shadow: its `hsa_queue_t` address, its ring and doorbell.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HwQueue {
    /// Address of the hardware queue's `hsa_queue_t` (what ROCr's functions take).
    pub queue: u64,
    /// Its ring (`amd_queue` = `queue`).
    pub ring: AqlRing,
    /// Its doorbell signal handle.
    pub doorbell: u64,
}

/// Bookkeeping of one queue's tracking barriers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracking {
    /// The tracking signal's handle.
    pub signal: u64,
    issued: u64,
    seen: u64,
    /// (barrier number, last sequence number it covers), oldest first, not yet seen completed.
    covers: VecDeque<(u64, Seq)>,
    /// A completion handler is registered and has not run yet.
    pub armed: bool,
}

impl Tracking {
    /// No barrier issued yet on `signal` (whose value is [`TRACKING_START`]).
    pub fn new(signal: u64) -> Tracking {
        Tracking { signal, issued: 0, seen: 0, covers: VecDeque::new(), armed: false }
    }

    /// A barrier was written after the packet with sequence number `last` (`None`: a barrier
    /// that covers no scheduled packet, e.g. the final one at destroy). Returns its number
    /// (1 for the first).
    pub fn issue(&mut self, last: Option<Seq>) -> u64 {
        self.issued += 1;
        if let Some(seq) = last {
            self.covers.push_back((self.issued, seq));
        }
        self.issued
    }

    /// The signal's value is `value`: returns the highest sequence number newly known complete.
    pub fn observe(&mut self, value: i64) -> Option<Seq> {
        let done = (TRACKING_START.saturating_sub(value)).clamp(0, self.issued as i64) as u64;
        if done <= self.seen {
            return None;
        }
        self.seen = done;
        let mut last = None;
        while self.covers.front().is_some_and(|&(n, _)| n <= done) {
            last = self.covers.pop_front().map(|(_, s)| s);
        }
        last
    }

    /// Barriers issued.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Barriers issued and not seen completed.
    pub fn outstanding(&self) -> u64 {
        self.issued - self.seen
    }

    /// A handler waiting for "value below this" runs at the next completion.
    pub fn arm_below(&self) -> i64 {
        TRACKING_START - self.seen as i64
    }

    /// The signal's value once every barrier issued so far completed.
    pub fn target(&self) -> i64 {
        TRACKING_START - self.issued as i64
    }
}

/// A shadow queue; see the module doc.
#[derive(Clone, Debug)]
pub struct ShadowQueue {
    pub id: QueueId,
    pub mode: Mode,
    /// The ring the application writes (`amd_queue` = the shadow `hsa_queue_t`).
    pub shadow: AqlRing,
    pub hw: HwQueue,
    pub tracking: Tracking,
    /// Packets taken from the application and not yet written to the hardware, outside the
    /// priority rings (`Direct` after a degradation, `Closing` while draining), oldest first.
    pub backlog: VecDeque<Packet>,
    /// The stream priority the application set.
    pub stream: StreamPriority,
    /// Packets taken from the shadow ring.
    pub taken: u64,
    /// Packets written to the hardware ring (the application's, not tracking barriers).
    pub forwarded: u64,
    /// The hardware queue reported an error.
    pub failed: bool,
    /// At destroy: whether libxhsa must forward what it holds and wait for it.
    pub drain: bool,
    /// The sequence number of the last packet forwarded without a tracking barrier after it
    /// (its completion, and that of the packets before it, is not observable until one is
    /// written).
    pub untracked: Option<crate::path::window::Seq>,
    /// The last packet written untracked that a tracking barrier now follows, until a completion
    /// through it is seen: till then the in-flight count may hold packets long done.
    pub confirming: Option<crate::path::window::Seq>,
    /// Time per packet on the hardware, from the completions seen.
    pub timing: crate::path::packet_time::PacketTime,
    /// Dispatch-to-completion times, from the completions seen.
    pub latency: crate::path::latency::Latency,
    /// The rounds of work-groups its dispatches needed on each part of the GPU, summed.
    pub widths: crate::path::packet_width::Widths,
}

impl ShadowQueue {
    /// Whether the in-flight count may hold packets that completed unseen (see
    /// [`Self::untracked`] and [`Self::confirming`]).
    pub fn unconfirmed(&self) -> bool {
        self.untracked.is_some() || self.confirming.is_some()
    }

    /// A tracking barrier was written after everything forwarded so far: the untracked packets
    /// wait for its completion to be confirmed.
    pub fn barrier_after_all(&mut self) {
        if let Some(last) = self.untracked.take() {
            self.confirming = Some(last);
        }
    }

    /// Completions through packet `seq` were seen.
    pub fn completed_through(&mut self, seq: crate::path::window::Seq) {
        if self.confirming.is_some_and(|c| c <= seq) {
            self.confirming = None;
        }
    }

    /// A new queue in `Scheduled` mode.
    pub fn new(id: QueueId, shadow: AqlRing, hw: HwQueue, tracking_signal: u64) -> ShadowQueue {
        ShadowQueue {
            id,
            mode: Mode::Scheduled,
            shadow,
            hw,
            tracking: Tracking::new(tracking_signal),
            backlog: VecDeque::new(),
            stream: StreamPriority::Normal,
            taken: 0,
            forwarded: 0,
            failed: false,
            drain: false,
            untracked: None,
            confirming: None,
            timing: Default::default(),
            latency: Default::default(),
            widths: Default::default(),
        }
    }

    /// Whether a doorbell store makes libxhsa take packets from the shadow ring.
    pub fn takes_doorbells(&self) -> bool {
        matches!(self.mode, Mode::Scheduled | Mode::Direct)
    }

    /// Whether the queue went to `Direct` (for the log: degrade once).
    pub fn is_direct(&self) -> bool {
        self.mode == Mode::Direct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_maps_barrier_completions_to_sequence_numbers() {
        let mut t = Tracking::new(7);
        assert_eq!(t.target(), TRACKING_START);
        assert_eq!(t.issue(Some(4)), 1); // packets 0..=4
        assert_eq!(t.issue(Some(6)), 2); // 5..=6
        assert_eq!(t.issue(None), 3); // covers nothing scheduled
        assert_eq!(t.issue(Some(9)), 4);
        assert_eq!(t.outstanding(), 4);
        assert_eq!(t.observe(TRACKING_START), None);
        assert_eq!(t.arm_below(), TRACKING_START);
        assert_eq!(t.observe(TRACKING_START - 1), Some(4));
        assert_eq!(t.observe(TRACKING_START - 1), None, "idempotent");
        assert_eq!(t.arm_below(), TRACKING_START - 1);
        assert_eq!(t.observe(TRACKING_START - 3), Some(6));
        assert_eq!(t.outstanding(), 1);
        // A value beyond what was issued is clamped.
        assert_eq!(t.observe(TRACKING_START - 100), Some(9));
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.target(), TRACKING_START - 4);
    }

    #[test]
    fn modes() {
        let ring = AqlRing { base: 0x1000, slots: 4, amd_queue: 0x100 };
        let hw = HwQueue {
            queue: 0x200,
            ring: AqlRing { base: 0x2000, slots: 4, amd_queue: 0x200 },
            doorbell: 9,
        };
        let mut q = ShadowQueue::new(QueueId(1), ring, hw, 5);
        assert!(q.takes_doorbells() && !q.is_direct());
        q.mode = Mode::Direct;
        assert!(q.takes_doorbells() && q.is_direct());
        for m in [Mode::Inactive, Mode::Failed, Mode::Closing] {
            q.mode = m;
            assert!(!q.takes_doorbells());
        }
    }
}
