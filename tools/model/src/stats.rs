//! Per-queue counters, in the fixed `#[repr(C)]` layout `xhsa-top` reads.
//!
//! A [`QueueStats`] lives inside each board slot (the board slot (`xhsa_board::layout::Slot::stats`)), so
//! one mapping of the board gives a live view of every queue of every process on the GPU. The
//! layout is versioned by [`STATS_LAYOUT_VERSION`], which the board header records next to its
//! own version; a reader that finds another version must not interpret the bytes.
//!
//! Layout, version 7 (240 bytes, little endian, naturally aligned, no padding):
//!
//! | offset | type  | field             | meaning                                                   |
//! |-------:|-------|-------------------|-----------------------------------------------------------|
//! | 0      | `i32` | `priority`        | effective priority as [`Priority::rank`] (`level*4+stream`) |
//! | 4      | `u32` | `flags`           | [`FLAG_HELD`], [`FLAG_CONTENDED`], [`FLAG_PASSTHROUGH`], [`FLAG_PAUSED`], [`FLAG_OVERRIDDEN`] |
//! | 8      | `u32` | `pending`         | packets held in libxhsa's ring now                        |
//! | 12     | `u32` | `in_flight`       | packets forwarded to the hardware and not completed       |
//! | 16     | `u64` | `submitted`       | packets the application submitted (doorbell) in total     |
//! | 24     | `u64` | `forwarded`       | packets forwarded to the hardware in total (dispatched)   |
//! | 32     | `u64` | `completed`       | packets seen completed in total                           |
//! | 40     | `u64` | `throttle_ns`     | total time held back by the window, nanoseconds           |
//! | 48     | `u64` | `throttle_events` | how many times the queue started being held back          |
//! | 56     | `u64` | `packet_ns`       | recent time per completed packet (ns), 0 if not measured  |
//! | 64     | `i32` | `requested`       | priority the application and the config asked for (rank), before an operator's override |
//! | 68     | `u32` | `state`           | [`QueueState`] as its number                              |
//! | 72     | `u64` | `preemptions`     | times the queue was taken off the GPU                     |
//! | 80     | `u64` | `preempted_ns`    | total time off the GPU (the current spell included)       |
//! | 88     | `[u32; 16]` | `latency`   | dispatch-to-completion histogram: bucket `i` counts packets that took `< 2^(i+4)` µs (the last one: the rest) |
//! | 152    | `u64` | `beat_ns`         | `CLOCK_MONOTONIC` ns when the owner last published or confirmed these counters |
//! | 160    | `u64` | `busy_ns`         | total time the queue had packets in flight (ns), counted at completions |
//! | 168    | `u64` | `own_packet_ns`   | time per completed packet (ns) over the busy periods without higher-priority work beside the queue, least of the last 1-2 s, 0 if not measured |
//! | 176    | `[u64; 8]` | `rounds`     | the rounds of work-groups the queue's kernel dispatches needed, summed: element `e - 1` on `ceil(n e / 8)` of the GPU's `n` CUs (the last: the whole GPU) |
//!
//! Version 2 turned version 1's `reserved` word into `packet_ns`: what the owner measured from
//! its completions (the preemption watchers of other processes estimate from it how long the
//! work in flight would delay a higher priority). Version 3 added everything from `requested` on,
//! for `xhsa-top` and `xhsactl`. Version 4 turned `reserved` into `beat_ns`: a process that
//! stops (SIGSTOP, a debugger, a hung runtime) stops confirming its counters, and readers count
//! its work only while it is fresh ([`QueueStats::has_work_at`]), so a stopped process holds
//! nobody back for longer than [`STALE_AFTER_NS`]. Version 5 added `busy_ns`: with `completed`
//! a counter pair, so a reader's mean time per packet and busy fraction over an interval are
//! differences of counters (`packet_ns` is a running estimate of the last few completions).
//! Version 6 added `own_packet_ns`: `packet_ns` counts the time a lower queue's packets wait for
//! higher-priority work, which is what the higher work's owner measures; how long the packets in
//! flight would delay that work once it has priority is their own time, measured while no higher
//! work was there (the owner's take-off decisions, `xhsa-top`'s JSON shows both). Version 7
//! added `rounds`: how wide the queue's kernels are, from which the live CU split expects how much
//! longer the latency-critical work would take on part of the GPU before it tries that part.
#![forbid(unsafe_code)]

use crate::priority::Priority;

/// Version of the [`QueueStats`] layout.
pub const STATS_LAYOUT_VERSION: u32 = 7;

/// How often an owner with work confirms its counters (`beat_ns`) at the least.
pub const BEAT_NS: u64 = 20_000_000;

/// How old an owner's confirmation may be before readers stop counting its work: four missed
/// beats, and below the default starvation bound (100 ms), so that a stopped process holds
/// others back no longer than one starvation period.
pub const STALE_AFTER_NS: u64 = 80_000_000;
const _: () = assert!(STALE_AFTER_NS >= 4 * BEAT_NS && STALE_AFTER_NS < 100_000_000);

/// `flags`: the queue was held back by the window at the last throttle observation
/// (libxhsa's `path::partition::Partition::observe`).
pub const FLAG_HELD: u32 = 1 << 0;
/// `flags`: higher-priority work exists, the queue runs under the window.
pub const FLAG_CONTENDED: u32 = 1 << 1;
/// `flags`: the queue bypasses the rings (passthrough whitelist or `XHSA_DISABLE`).
pub const FLAG_PASSTHROUGH: u32 = 1 << 2;
/// `flags`: an operator paused the queue's process (`xhsactl pause`).
pub const FLAG_PAUSED: u32 = 1 << 3;
/// `flags`: an operator set the queue's priority (`xhsactl set-priority`).
pub const FLAG_OVERRIDDEN: u32 = 1 << 4;
/// `flags`: the queue's `in_flight` counts packets written while libxhsa did not track
/// completions, which may have completed long ago: no tracking barrier after them has
/// completed yet (an idle queue's last packets, written while its process was alone).
pub const FLAG_UNCONFIRMED: u32 = 1 << 5;

/// Parts of the GPU (eighths) a queue's `rounds` are counted at.
pub const WIDTH_PARTS: usize = 8;

/// Buckets of the dispatch-to-completion histogram.
pub const LATENCY_BUCKETS: usize = 16;

/// The upper bound (exclusive) of latency bucket `i` in microseconds; `None` for the last one.
pub fn latency_bucket_limit_us(i: usize) -> Option<u64> {
    (i + 1 < LATENCY_BUCKETS).then(|| 1u64 << (i + 4))
}

/// The bucket of a dispatch-to-completion time of `ns` nanoseconds.
pub fn latency_bucket(ns: u64) -> usize {
    let us = ns / 1000;
    (0..LATENCY_BUCKETS - 1).find(|&i| us < 1u64 << (i + 4)).unwrap_or(LATENCY_BUCKETS - 1)
}

/// What a queue is doing, as `xhsa-top` shows it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum QueueState {
    /// On the GPU and forwarded as it comes (idle queues too).
    #[default]
    Running,
    /// Packets held back in libxhsa (by the window, or a pause of a queue KFD cannot suspend).
    Held,
    /// Taken off the GPU through KFD.
    Preempted,
    /// Not scheduled by libxhsa: its packets go straight through (`XHSA_DISABLE`).
    Passthrough,
    /// Passthrough after an internal failure of libxhsa.
    Degraded,
}

impl QueueState {
    /// Every state, in number order.
    pub const ALL: [QueueState; 5] = [
        QueueState::Running,
        QueueState::Held,
        QueueState::Preempted,
        QueueState::Passthrough,
        QueueState::Degraded,
    ];

    /// Its number in the board.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The state of number `code`; `None` for a number no state has.
    pub fn from_code(code: u32) -> Option<QueueState> {
        Self::ALL.get(code as usize).copied()
    }

    /// Its name, as `xhsa-top` and `xhsactl` print it.
    pub fn name(self) -> &'static str {
        match self {
            QueueState::Running => "running",
            QueueState::Held => "held",
            QueueState::Preempted => "preempted",
            QueueState::Passthrough => "passthrough",
            QueueState::Degraded => "degraded",
        }
    }
}

impl std::fmt::Display for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// [`Priority::rank`] of the priority the application and the config asked for.
    pub requested: i32,
    /// [`QueueState::code`].
    pub state: u32,
    /// Times the queue was taken off the GPU.
    pub preemptions: u64,
    /// Time off the GPU, nanoseconds.
    pub preempted_ns: u64,
    /// Dispatch-to-completion histogram ([`latency_bucket`]).
    pub latency: [u32; LATENCY_BUCKETS],
    /// `CLOCK_MONOTONIC` nanoseconds when the owner last published or confirmed the counters.
    pub beat_ns: u64,
    /// Total time with packets in flight, nanoseconds, counted at completions.
    pub busy_ns: u64,
    /// Time per completed packet over the busy periods without higher-priority work beside the
    /// queue, nanoseconds: the least of its smoothed values over the last one to two seconds
    /// (same-priority work of other processes slows the packets too; it typically yields when
    /// higher work comes); 0 while unmeasured.
    pub own_packet_ns: u64,
    /// Rounds of work-groups the kernel dispatches needed, summed, on each eighth of the GPU
    /// (the last: the whole GPU).
    pub rounds: [u64; WIDTH_PARTS],
}

/// A queue's packets' own time as far as measured: `own_ns` (time per packet over busy periods
/// without higher-priority work beside the queue) once measured, else `all_ns` (time per packet
/// with those waits, an upper bound); 0 while neither is. The one rule for libxhsa's scheduler
/// (its own estimates) and for readers of the board (`own_packet_ns`, `packet_ns`).
pub fn own_time_or_all(own_ns: u64, all_ns: u64) -> u64 {
    if own_ns > 0 {
        own_ns
    } else {
        all_ns
    }
}

impl QueueStats {
    /// The decoded priority; `None` if the slot holds a value no priority encodes.
    pub fn priority(&self) -> Option<Priority> {
        Priority::from_rank(self.priority)
    }

    /// Whether the queue has packets pending or in flight, and is not paused (a paused queue's
    /// work holds nobody back).
    pub fn has_work(&self) -> bool {
        (self.pending > 0 || self.in_flight > 0) && !self.has_flag(FLAG_PAUSED)
    }

    /// [`has_work`](Self::has_work), as a reader at `now_ns` (`CLOCK_MONOTONIC`) counts it: only
    /// while the owner confirmed the counters within [`STALE_AFTER_NS`]. The work of a process
    /// that stopped running (SIGSTOP, a debugger) holds nobody back for longer.
    pub fn has_work_at(&self, now_ns: u64) -> bool {
        self.has_work() && self.confirmed_at(now_ns)
    }

    /// Whether the owner confirmed these counters at most [`STALE_AFTER_NS`] before `now_ns`.
    pub fn confirmed_at(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.beat_ns) <= STALE_AFTER_NS
    }

    /// The decoded state (`running` for a number no state has).
    pub fn state(&self) -> QueueState {
        QueueState::from_code(self.state).unwrap_or_default()
    }

    /// The decoded requested priority.
    pub fn requested(&self) -> Option<Priority> {
        Priority::from_rank(self.requested)
    }

    /// Whether `flag` is set.
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
}

/// Saturating conversion for the 32-bit counters.
pub fn saturate_u32(n: u64) -> u32 {
    n.min(u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn the_own_time_is_used_once_measured_else_the_time_with_waits() {
        assert_eq!(own_time_or_all(0, 0), 0);
        assert_eq!(own_time_or_all(0, 87_000), 87_000);
        assert_eq!(own_time_or_all(15_000, 87_000), 15_000);
    }

    #[test]
    fn layout_v7() {
        assert_eq!(STATS_LAYOUT_VERSION, 7);
        assert_eq!(size_of::<QueueStats>(), 240);
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
        assert_eq!(offset_of!(QueueStats, requested), 64);
        assert_eq!(offset_of!(QueueStats, state), 68);
        assert_eq!(offset_of!(QueueStats, preemptions), 72);
        assert_eq!(offset_of!(QueueStats, preempted_ns), 80);
        assert_eq!(offset_of!(QueueStats, latency), 88);
        assert_eq!(offset_of!(QueueStats, beat_ns), 152);
        assert_eq!(offset_of!(QueueStats, busy_ns), 160);
        assert_eq!(offset_of!(QueueStats, own_packet_ns), 168);
        assert_eq!(offset_of!(QueueStats, rounds), 176);
    }

    #[test]
    fn work_counts_only_while_its_owner_confirms_it() {
        let s = QueueStats { in_flight: 3, beat_ns: 1_000_000_000, ..Default::default() };
        assert!(s.has_work_at(1_000_000_000));
        assert!(s.has_work_at(1_000_000_000 + STALE_AFTER_NS));
        assert!(
            !s.has_work_at(1_000_000_001 + STALE_AFTER_NS),
            "a stopped owner's work goes stale"
        );
        assert!(s.has_work_at(0), "a beat ahead of the reader's clock is fresh");
        assert!(
            !QueueStats { beat_ns: 1_000_000_000, ..Default::default() }.has_work_at(1_000_000_000),
            "no work is no work"
        );
    }

    #[test]
    fn latency_buckets_double_from_16_us() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(15_999), 0);
        assert_eq!(latency_bucket(16_000), 1);
        assert_eq!(latency_bucket(31_999), 1);
        assert_eq!(latency_bucket(1_000_000), 6, "1 ms: [512, 1024) us");
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
        assert_eq!(latency_bucket_limit_us(0), Some(16));
        assert_eq!(latency_bucket_limit_us(LATENCY_BUCKETS - 2), Some(1 << 18));
        assert_eq!(latency_bucket_limit_us(LATENCY_BUCKETS - 1), None);
    }

    #[test]
    fn states_round_trip_by_number_and_name() {
        for s in QueueState::ALL {
            assert_eq!(QueueState::from_code(s.code()), Some(s));
        }
        assert_eq!(QueueState::from_code(5), None);
        let names: Vec<&str> = QueueState::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["running", "held", "preempted", "passthrough", "degraded"]);
    }

    #[test]
    fn helpers() {
        let mut s = QueueStats { priority: Priority::HIGHEST.rank(), ..Default::default() };
        assert_eq!(s.priority(), Some(Priority::HIGHEST));
        assert!(!s.has_work());
        s.in_flight = 1;
        assert!(s.has_work());
        s.flags = FLAG_HELD | FLAG_CONTENDED;
        assert!(
            s.has_flag(FLAG_HELD) && s.has_flag(FLAG_CONTENDED) && !s.has_flag(FLAG_PASSTHROUGH)
        );
        s.priority = 3; // level 0, stream 3: not a priority
        assert_eq!(s.priority(), None);
        assert_eq!(saturate_u32(u64::MAX), u32::MAX);
        assert_eq!(saturate_u32(7), 7);
    }
}
