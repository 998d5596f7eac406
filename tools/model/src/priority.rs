//! Priorities: the operator's *level* and the application's *stream priority*, combined into one
//! totally ordered [`Priority`].
//!
//! - The **level** is XSched's priority, with XSched's range and meaning (`XSCHED_AUTO_XQUEUE_PRIORITY`,
//!   XpuOS/xsched `include/xsched/types.h` and `protocol/include/xsched/protocol/def.h`): a signed
//!   integer, **higher is more urgent**, `-256..=255`, default `0` (XSched: `PRIORITY_MIN = -255`,
//!   `PRIORITY_DEFAULT = 0`, `PRIORITY_MAX = 255`, and `-256` is `PRIORITY_NO_EXECUTE`). libxhsa
//!   accepts the whole `-256..=255` so that any XSched setting carries over; `-256` is simply the
//!   lowest level (libxhsa's level-1 window never holds a queue back completely, see
//!   libxhsa's `path::window`), not "never execute".
//! - The **stream priority** is what the application asked of the HSA queue through
//!   `hsa_amd_queue_set_priority` (HIP does this for `hipStreamCreateWithPriority`):
//!   `HSA_AMD_QUEUE_PRIORITY_LOW = 0`, `NORMAL = 1` (the default), `HIGH = 2`.
//!
//! Order: by level first, then by stream priority. The operator places processes relative to each
//! other; the application orders its own streams within its level (see
//! [`crate::settings::config::effective_priority`] for where the level comes from).
//!
//! On the board a priority is stored as its [`rank`](Priority::rank), an `i32` that orders the same
//! way: `level * 4 + stream` (stream 0..=2).
#![forbid(unsafe_code)]

use std::fmt;

/// The stream priority the application set on an HSA queue (`hsa_amd_queue_priority_t`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamPriority {
    /// `HSA_AMD_QUEUE_PRIORITY_LOW` (0).
    Low = 0,
    /// `HSA_AMD_QUEUE_PRIORITY_NORMAL` (1): every queue starts here.
    #[default]
    Normal = 1,
    /// `HSA_AMD_QUEUE_PRIORITY_HIGH` (2).
    High = 2,
}

impl StreamPriority {
    /// Maps the raw `hsa_amd_queue_priority_t` value; `None` for a value HSA does not define (the
    /// edge then returns `HSA_STATUS_ERROR_INVALID_ARGUMENT` like ROCr would).
    pub fn from_hsa(raw: u32) -> Option<StreamPriority> {
        match raw {
            0 => Some(StreamPriority::Low),
            1 => Some(StreamPriority::Normal),
            2 => Some(StreamPriority::High),
            _ => None,
        }
    }

    /// The raw `hsa_amd_queue_priority_t` value.
    pub fn to_hsa(self) -> u32 {
        self as u32
    }
}

/// An operator priority level: XSched's range `-256..=255`, higher is more urgent, default 0.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Level(i16);

impl Level {
    /// The lowest level (XSched's `PRIORITY_NO_EXECUTE`, which libxhsa treats as just the lowest).
    pub const MIN: Level = Level(-256);
    /// The highest level (XSched's `PRIORITY_MAX`).
    pub const MAX: Level = Level(255);
    /// The default level (XSched's `PRIORITY_DEFAULT`).
    pub const DEFAULT: Level = Level(0);
    /// The first level above the default: the lowest a process marked more urgent than the
    /// rest has.
    pub const ABOVE_DEFAULT: Level = Level(1);

    /// The level `value`, or `None` outside `-256..=255`.
    pub fn new(value: i64) -> Option<Level> {
        if (Level::MIN.0 as i64..=Level::MAX.0 as i64).contains(&value) {
            Some(Level(value as i16))
        } else {
            None
        }
    }

    /// The level nearest to `value` within `-256..=255`.
    pub fn saturating(value: i64) -> Level {
        Level(value.clamp(Level::MIN.0 as i64, Level::MAX.0 as i64) as i16)
    }

    /// The integer value.
    pub fn get(self) -> i32 {
        self.0 as i32
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The effective priority of a queue: a level and a stream priority, ordered by level first.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority {
    level: Level,
    stream: StreamPriority,
}

impl Priority {
    /// The lowest priority there is.
    pub const LOWEST: Priority = Priority { level: Level::MIN, stream: StreamPriority::Low };
    /// The highest priority there is.
    pub const HIGHEST: Priority = Priority { level: Level::MAX, stream: StreamPriority::High };

    /// Combines a level and a stream priority.
    pub const fn new(level: Level, stream: StreamPriority) -> Priority {
        Priority { level, stream }
    }

    /// The level at the normal stream priority.
    pub const fn at_level(level: Level) -> Priority {
        Priority { level, stream: StreamPriority::Normal }
    }

    /// The operator level.
    pub fn level(self) -> Level {
        self.level
    }

    /// The application's stream priority.
    pub fn stream(self) -> StreamPriority {
        self.stream
    }

    /// The same level with another stream priority.
    pub fn with_stream(self, stream: StreamPriority) -> Priority {
        Priority { stream, ..self }
    }

    /// The priority libxhsa gives the *hardware* queue behind a shadow (through ROCr's
    /// `hsa_amd_queue_set_priority`, i.e. KFD's queue priority, which the hardware scheduler
    /// uses to pick whose workgroups take freed compute units first). Only three values exist
    /// there, so the operator's level decides where it says something: a level above the
    /// default makes the queue `High`, one below makes it `Low`, whatever the application asked;
    /// at the default level the application's stream priority stands, as without libxhsa.
    pub fn hardware(self) -> StreamPriority {
        match self.level.get() {
            l if l > 0 => StreamPriority::High,
            l if l < 0 => StreamPriority::Low,
            _ => self.stream,
        }
    }

    /// The board encoding, `level * 4 + stream`: ordered like `Priority`.
    pub fn rank(self) -> i32 {
        self.level.get() * 4 + self.stream as i32
    }

    /// Decodes a [`rank`](Priority::rank); `None` for a value no priority encodes (a corrupt or
    /// foreign board slot).
    pub fn from_rank(rank: i32) -> Option<Priority> {
        let level = Level::new(rank.div_euclid(4) as i64)?;
        let stream = StreamPriority::from_hsa(rank.rem_euclid(4) as u32)?;
        Some(Priority { level, stream })
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stream = match self.stream {
            StreamPriority::Low => "low",
            StreamPriority::Normal => "normal",
            StreamPriority::High => "high",
        };
        write!(f, "{}/{}", self.level, stream)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_level_decides_the_hardware_priority_where_it_is_not_the_default() {
        use super::*;
        let at = |l: i64, s: StreamPriority| Priority::new(Level::new(l).unwrap(), s);
        assert_eq!(at(10, StreamPriority::Low).hardware(), StreamPriority::High);
        assert_eq!(at(-1, StreamPriority::High).hardware(), StreamPriority::Low);
        for s in [StreamPriority::Low, StreamPriority::Normal, StreamPriority::High] {
            assert_eq!(at(0, s).hardware(), s, "default level: the application's choice stands");
        }
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn level_range_is_xscheds() {
        assert_eq!(Level::new(-256), Some(Level::MIN));
        assert_eq!(Level::new(255), Some(Level::MAX));
        assert_eq!(Level::new(0), Some(Level::DEFAULT));
        assert_eq!(Level::new(-257), None);
        assert_eq!(Level::new(256), None);
        assert_eq!(Level::saturating(1000), Level::MAX);
        assert_eq!(Level::saturating(-1000), Level::MIN);
        assert_eq!(Level::default(), Level::DEFAULT);
    }

    #[test]
    fn stream_priority_maps_hsa_values() {
        assert_eq!(StreamPriority::from_hsa(0), Some(StreamPriority::Low));
        assert_eq!(StreamPriority::from_hsa(1), Some(StreamPriority::Normal));
        assert_eq!(StreamPriority::from_hsa(2), Some(StreamPriority::High));
        assert_eq!(StreamPriority::from_hsa(3), None);
        for s in [StreamPriority::Low, StreamPriority::Normal, StreamPriority::High] {
            assert_eq!(StreamPriority::from_hsa(s.to_hsa()), Some(s));
        }
        assert_eq!(StreamPriority::default(), StreamPriority::Normal);
    }

    #[test]
    fn level_dominates_stream() {
        let one = Level::new(1).unwrap();
        let low_at_one = Priority::new(one, StreamPriority::Low);
        let high_at_zero = Priority::new(Level::DEFAULT, StreamPriority::High);
        assert!(low_at_one > high_at_zero);
        assert!(Priority::at_level(one) > low_at_one);
        assert_eq!(Priority::default(), Priority::at_level(Level::DEFAULT));
        assert_eq!(Priority::HIGHEST.to_string(), "255/high");
        assert_eq!(Priority::from_rank(3), None);
        assert_eq!(Priority::from_rank(Priority::LOWEST.rank()), Some(Priority::LOWEST));
    }

    fn priority() -> impl Strategy<Value = Priority> {
        (-256i64..=255, 0u32..3).prop_map(|(l, s)| {
            Priority::new(Level::new(l).unwrap(), StreamPriority::from_hsa(s).unwrap())
        })
    }

    proptest! {
        #[test]
        fn rank_round_trips_and_orders(a in priority(), b in priority()) {
            prop_assert_eq!(Priority::from_rank(a.rank()), Some(a));
            prop_assert_eq!(a.cmp(&b), a.rank().cmp(&b.rank()));
        }
    }
}
