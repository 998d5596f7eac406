//! Per-queue counters, in the fixed `#[repr(C)]` layout `xhsa-top` reads.
//!
//! A [`QueueStats`] lives inside each board slot ([`crate::board::layout::Slot::stats`]), so
//! one mapping of the board gives a live view of every queue of every process on the GPU. The
//! layout is versioned by [`STATS_LAYOUT_VERSION`], which the board header records next to its
//! own version; a reader that finds another version must not interpret the bytes.
//!
//! Layout, version 2 (64 bytes, little endian, naturally aligned, no padding):
//!
//! | offset | type  | field             | meaning                                                   |
//! |-------:|-------|-------------------|-----------------------------------------------------------|
//! | 0      | `i32` | `priority`        | effective priority as [`Priority::rank`] (`level*4+stream`) |
//! | 4      | `u32` | `flags`           | [`FLAG_HELD`], [`FLAG_CONTENDED`], [`FLAG_PASSTHROUGH`]    |
//! | 8      | `u32` | `pending`         | packets held in libxhsa's ring now                        |
//! | 12     | `u32` | `in_flight`       | packets forwarded to the hardware and not completed       |
//! | 16     | `u64` | `submitted`       | packets the application submitted (doorbell) in total     |
//! | 24     | `u64` | `forwarded`       | packets forwarded to the hardware in total                |
//! | 32     | `u64` | `completed`       | packets seen completed in total                           |
//! | 40     | `u64` | `throttle_ns`     | total time held back by the window, nanoseconds           |
//! | 48     | `u64` | `throttle_events` | how many times the queue started being held back          |
//! | 56     | `u64` | `packet_ns`       | recent time per completed packet (ns), 0 if not measured  |
//!
//! Version 2 turned version 1's `reserved` word into `packet_ns`: what the owner measured from
//! its completions (the preemption watchers of other processes estimate from it how long the
//! work in flight would delay a higher priority).
#![forbid(unsafe_code)]

use crate::settings::priority::Priority;

/// Version of the [`QueueStats`] layout.
pub const STATS_LAYOUT_VERSION: u32 = 2;

/// `flags`: the queue was held back by the window at the last throttle observation
/// ([`crate::path::partition::Partition::observe`]).
pub const FLAG_HELD: u32 = 1 << 0;
/// `flags`: higher-priority work exists, the queue runs under the window.
pub const FLAG_CONTENDED: u32 = 1 << 1;
/// `flags`: the queue bypasses the rings (passthrough whitelist or `XHSA_DISABLE`).
pub const FLAG_PASSTHROUGH: u32 = 1 << 2;

/// The counters of one queue; see the module doc for the layout.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct QueueStats {
    /// [`Priority::rank`] of the effective priority.
    pub priority: i32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Packets held in libxhsa's ring.
    pub pending: u32,
    /// Packets in flight on the hardware.
    pub in_flight: u32,
    /// Packets submitted by the application.
    pub submitted: u64,
    /// Packets forwarded to the hardware.
    pub forwarded: u64,
    /// Packets completed.
    pub completed: u64,
    /// Time held back by the window, in nanoseconds.
    pub throttle_ns: u64,
    /// Number of times the queue started being held back.
    pub throttle_events: u64,
    /// Recent time per completed packet, nanoseconds; 0 while unmeasured.
    pub packet_ns: u64,
}

impl QueueStats {
    /// The decoded priority; `None` if the slot holds a value no priority encodes.
    pub fn priority(&self) -> Option<Priority> {
        Priority::from_rank(self.priority)
    }

    /// Whether the queue has packets pending or in flight.
    pub fn has_work(&self) -> bool {
        self.pending > 0 || self.in_flight > 0
    }

    /// Whether `flag` is set.
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
}

/// Saturating conversion for the 32-bit counters.
pub(crate) fn saturate_u32(n: u64) -> u32 {
    n.min(u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn layout_v2() {
        assert_eq!(STATS_LAYOUT_VERSION, 2);
        assert_eq!(size_of::<QueueStats>(), 64);
        assert_eq!(align_of::<QueueStats>(), 8);
        assert_eq!(offset_of!(QueueStats, priority), 0);
        assert_eq!(offset_of!(QueueStats, flags), 4);
        assert_eq!(offset_of!(QueueStats, pending), 8);
        assert_eq!(offset_of!(QueueStats, in_flight), 12);
        assert_eq!(offset_of!(QueueStats, submitted), 16);
        assert_eq!(offset_of!(QueueStats, forwarded), 24);
        assert_eq!(offset_of!(QueueStats, completed), 32);
        assert_eq!(offset_of!(QueueStats, throttle_ns), 40);
        assert_eq!(offset_of!(QueueStats, throttle_events), 48);
        assert_eq!(offset_of!(QueueStats, packet_ns), 56);
    }

    #[test]
    fn helpers() {
        let mut s = QueueStats { priority: Priority::HIGHEST.rank(), ..Default::default() };
        assert_eq!(s.priority(), Some(Priority::HIGHEST));
        assert!(!s.has_work());
        s.in_flight = 1;
        assert!(s.has_work());
        s.flags = FLAG_HELD | FLAG_CONTENDED;
        assert!(s.has_flag(FLAG_HELD) && s.has_flag(FLAG_CONTENDED) && !s.has_flag(FLAG_PASSTHROUGH));
        s.priority = 3; // level 0, stream 3: not a priority
        assert_eq!(s.priority(), None);
        assert_eq!(saturate_u32(u64::MAX), u32::MAX);
        assert_eq!(saturate_u32(7), 7);
    }
}
