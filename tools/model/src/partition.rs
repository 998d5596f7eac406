//! CU partitions: a reserved share of a GPU's CUs for latency-critical levels (`XHSA_RESERVE`),
//! which CUs each side gets, and the partition ids the board carries.
//!
//! - [`Reserve`]: the setting `CUS@LEVEL` — queues of level ≥ `LEVEL` run on a reserved
//!   partition of about `CUS` CUs, every other queue on the rest; `CUS@LEVEL:STREAM` (`high`,
//!   `normal` or `low`) counts the application's HIP stream priority too: queues of priority ≥
//!   (`LEVEL`, `STREAM`) in libxhsa's order (level first, then stream priority), e.g. `20@0:high`
//!   for the high-priority streams of processes at the default level.
//! - [`Split`]: the two sides on one GPU, as CU masks in the form `hsa_amd_queue_cu_set_mask`
//!   and KFD's `SET_CU_MASK` take.
//! - [`PartitionId`] encoding: the whole GPU is id 0; a side of a split names the split (its CU
//!   count and level) and the side, so two processes with the same setting publish the same ids
//!   and [`overlaps`] can tell that their sides are disjoint without any coordination. Ids of
//!   different settings are treated as overlapping: the conservative answer.
//!
//! Which CU a mask bit means (amdkfd's `mqd_symmetrically_map_cu_mask`): on a part with several
//! XCCs under one KFD node (GC 9.4.3, the MI300 series in SPX mode) bit `i` is CU `i / n` of XCC
//! `i % n`, `n` the node's XCC count; on a single-XCC part the bits go round the shader engines.
//! A side of a split is made of whole XCCs where there are several (each XCC has its own L2:
//! a partition of whole XCCs shares no cache with the other), taken from the last XCC down;
//! `CUS` is rounded to whole XCCs, keeping at least one on each side.
//!
//! What it is not: nothing here reads the GPU's topology or sets a mask (libxhsa does, per
//! hardware queue), and the live sizing of partitions is not here.
#![forbid(unsafe_code)]

use crate::ids::PartitionId;
use crate::priority::{Level, Priority, StreamPriority};
use std::fmt;

/// The accepted form of `XHSA_RESERVE` and the config's `reserve`, for messages.
pub const ACCEPTED_RESERVE: &str =
    "CUS@LEVEL or CUS@LEVEL:STREAM: a CU count of at least 1 (or auto: sized live from measured \
     demand), a level in -256..=255 and optionally a stream priority (high, normal, low), e.g. \
     20@10 (queues of level 10 and above run on 20 reserved CUs, the others on the rest), \
     20@0:high (HIP's high-priority streams of processes at level 0, and everything above) or \
     auto@10; or none (one partition, the whole GPU)";

/// The reserve in force when neither `XHSA_RESERVE` nor the config's `reserve` says one: a
/// partition sized live for the queues of processes above the default level (`XHSA_PRIORITY`
/// 1 and up). It stays the whole GPU unless such queues are busy beside lower work and a
/// measured split gives the lower work more while keeping them within the policy's target.
pub const DEFAULT_RESERVE: Reserve =
    Reserve { cus: 0, auto: true, from: Priority::new(Level::ABOVE_DEFAULT, StreamPriority::Low) };

/// A reserved partition for the latency-critical queues: `cus` CUs for queues of priority
/// ≥ `from`; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reserve {
    /// CUs asked for (rounded per GPU by [`Split::plan`]); with `auto`, the size in force.
    pub cus: u32,
    /// `auto@LEVEL`: sized live from measured demand (libxhsa's `preempt::sizing`; the size in
    /// force is on the board).
    pub auto: bool,
    /// The lowest priority that runs on the reserved side (`CUS@LEVEL`: any stream priority of
    /// `LEVEL`).
    pub from: Priority,
}

impl Reserve {
    /// Parses a setting: `none` (or `off`: no reserve, `Some(None)`) or [`Reserve::parse`]'s
    /// forms; `None` when it is neither.
    pub fn parse_setting(text: &str) -> Option<Option<Reserve>> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("off") {
            return Some(None);
        }
        Reserve::parse(t).map(Some)
    }

    /// Parses `CUS@LEVEL` or `CUS@LEVEL:STREAM` (spaces around the parts allowed, the stream
    /// priority in any case); `None` when it is not that form.
    pub fn parse(text: &str) -> Option<Reserve> {
        let (cus, from) = text.trim().split_once('@')?;
        let auto = cus.trim().eq_ignore_ascii_case("auto");
        let cus: u32 = if auto { 0 } else { cus.trim().parse().ok().filter(|&c| c >= 1)? };
        let (level, stream) = match from.split_once(':') {
            None => (from, StreamPriority::Low),
            Some((level, stream)) => (
                level,
                match stream.trim().to_ascii_lowercase().as_str() {
                    "high" => StreamPriority::High,
                    "normal" => StreamPriority::Normal,
                    "low" => StreamPriority::Low,
                    _ => return None,
                },
            ),
        };
        let level = Level::new(level.trim().parse().ok()?)?;
        Some(Reserve { cus, auto, from: Priority::new(level, stream) })
    }

    /// The same setting with `cus` CUs in force (a live size).
    pub fn sized(self, cus: u32) -> Reserve {
        Reserve { cus, ..self }
    }

    /// Whether a queue of `priority` runs on the reserved side.
    pub fn is_reserved(&self, priority: Priority) -> bool {
        priority >= self.from
    }
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cus = if self.auto { "auto".to_string() } else { self.cus.to_string() };
        match self.from.stream() {
            StreamPriority::Low => write!(f, "{cus}@{}", self.from.level()),
            StreamPriority::Normal => write!(f, "{cus}@{}:normal", self.from.level()),
            StreamPriority::High => write!(f, "{cus}@{}:high", self.from.level()),
        }
    }
}

/// One side of a split.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The reserved CUs, for levels ≥ the reserve's level.
    Reserved,
    /// Every other CU, for every other queue.
    Shared,
}

/// A GPU's CUs split in two by a [`Reserve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The setting it was planned from.
    pub reserve: Reserve,
    /// CUs the reserved side really has (after rounding).
    pub reserved_cus: u32,
    /// CUs of the GPU.
    pub cu_count: u32,
    /// Mask of the reserved side (bit `i` of word `i / 32` for mask bit `i`).
    pub reserved: Vec<u32>,
    /// Mask of the shared side.
    pub shared: Vec<u32>,
}

/// Why a reserve cannot be applied to a GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Fewer than two CUs per side possible.
    TooFewCus { cu_count: u32, xccs: u32 },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::TooFewCus { cu_count, xccs } => write!(
                f,
                "a GPU of {cu_count} CUs in {xccs} XCC(s) cannot be split into two partitions"
            ),
        }
    }
}

impl Split {
    /// Splits a GPU of `cu_count` CUs in `xccs` XCCs (1 when unknown) by `reserve`; see the module
    /// doc for which CUs each side gets.
    pub fn plan(reserve: Reserve, cu_count: u32, xccs: u32) -> Result<Split, PlanError> {
        let xccs = xccs.max(1);
        let too_few = PlanError::TooFewCus { cu_count, xccs };
        if cu_count < 2 || !cu_count.is_multiple_of(xccs) {
            return Err(too_few);
        }
        let words = cu_count.div_ceil(32) as usize;
        let mut reserved = vec![0u32; words];
        let mut shared = vec![0u32; words];
        let reserved_cus = if xccs > 1 {
            let per_xcc = cu_count / xccs;
            // Whole XCCs, nearest to what was asked, at least one each side.
            let k = ((reserve.cus + per_xcc / 2) / per_xcc).clamp(1, xccs - 1);
            for bit in 0..cu_count {
                let side = if bit % xccs >= xccs - k { &mut reserved } else { &mut shared };
                side[(bit / 32) as usize] |= 1 << (bit % 32);
            }
            k * per_xcc
        } else {
            let k = reserve.cus.clamp(1, cu_count - 1);
            for bit in 0..cu_count {
                let side = if bit >= cu_count - k { &mut reserved } else { &mut shared };
                side[(bit / 32) as usize] |= 1 << (bit % 32);
            }
            k
        };
        Ok(Split { reserve, reserved_cus, cu_count, reserved, shared })
    }

    /// The reserved sizes a GPU of `cu_count` CUs in `xccs` XCCs can have: whole XCCs, at least
    /// one each side, on a multi-XCC part; eighths of the CUs on a single-XCC one (any count
    /// can be masked there: finer steps let the live sizing stop nearer what the critical class
    /// needs, and a search going down them costs no back-off).
    pub fn sizes(cu_count: u32, xccs: u32) -> Vec<u32> {
        let xccs = xccs.max(1);
        if cu_count < 2 || !cu_count.is_multiple_of(xccs) {
            return Vec::new();
        }
        if xccs > 1 {
            (1..xccs).map(|k| k * (cu_count / xccs)).collect()
        } else {
            let mut v: Vec<u32> =
                (1..8).map(|e| (cu_count * e / 8).clamp(1, cu_count - 1)).collect();
            v.dedup();
            v
        }
    }

    /// Every CU of the GPU (both sides).
    pub fn all(&self) -> Vec<u32> {
        self.reserved.iter().zip(&self.shared).map(|(r, s)| r | s).collect()
    }

    /// The mask of `side`.
    pub fn mask(&self, side: Side) -> &[u32] {
        match side {
            Side::Reserved => &self.reserved,
            Side::Shared => &self.shared,
        }
    }

    /// The side a queue of `priority` runs on.
    pub fn side_for(&self, priority: Priority) -> Side {
        if self.reserve.is_reserved(priority) {
            Side::Reserved
        } else {
            Side::Shared
        }
    }

    /// The board's id of `side` of this split: the split bit, the side bit, the reserved CU count
    /// (bits 11..=29), the stream priority (bits 9..=10) and the level + 256 (bits 0..=8).
    pub fn id(&self, side: Side) -> PartitionId {
        let cus = self.reserved_cus.min(SPLIT_CUS_MAX);
        let level = (self.reserve.from.level().get() + 256) as u32;
        let stream = self.reserve.from.stream() as u32;
        let side = match side {
            Side::Reserved => SIDE_BIT,
            Side::Shared => 0,
        };
        PartitionId(SPLIT_BIT | side | (cus << 11) | (stream << 9) | level)
    }
}

/// Set in every id of a split's side (0 is the whole GPU).
const SPLIT_BIT: u32 = 1 << 31;
/// Set in a reserved side's id.
const SIDE_BIT: u32 = 1 << 30;
/// The CU count an id can carry (bits 11..=29).
const SPLIT_CUS_MAX: u32 = (1 << 19) - 1;

impl PartitionId {
    /// The whole GPU: no split.
    pub const WHOLE: PartitionId = PartitionId(0);

    /// Whether it is a side of a split, and which.
    pub fn side(self) -> Option<Side> {
        if self.0 & SPLIT_BIT == 0 {
            None
        } else if self.0 & SIDE_BIT != 0 {
            Some(Side::Reserved)
        } else {
            Some(Side::Shared)
        }
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.side() {
            None => f.write_str("whole"),
            Some(side) => {
                let cus = (self.0 >> 11) & SPLIT_CUS_MAX;
                let level = (self.0 & 0x1ff) as i32 - 256;
                let stream = match (self.0 >> 9) & 3 {
                    2 => ":high",
                    1 => ":normal",
                    _ => "",
                };
                let name = if side == Side::Reserved { "reserved" } else { "shared" };
                write!(f, "{name} ({cus}@{level}{stream})")
            }
        }
    }
}

/// Whether work in partition `a` can occupy CUs that work in partition `b` needs: always, except
/// for the two sides of one split (the same id but for the side). Ids of different splits (two
/// processes with different settings) overlap: nothing proves them disjoint.
pub fn overlaps(a: PartitionId, b: PartitionId) -> bool {
    match (a.side(), b.side()) {
        (Some(sa), Some(sb)) => sa == sb || (a.0 & !SIDE_BIT) != (b.0 & !SIDE_BIT),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(words: &[u32]) -> Vec<u32> {
        (0..words.len() as u32 * 32)
            .filter(|&b| words[(b / 32) as usize] & (1 << (b % 32)) != 0)
            .collect()
    }

    #[test]
    fn an_auto_reserve_parses_and_a_gpu_offers_its_sizes() {
        let r = Reserve::parse("auto@10:high").unwrap();
        assert!(r.auto);
        assert_eq!(r.to_string(), "auto@10:high");
        assert_eq!(Reserve::parse(&r.to_string()), Some(r));
        assert!(!Reserve::parse("20@10").unwrap().auto);
        assert_eq!(Reserve::parse("Auto@0").unwrap().sized(40).cus, 40);
        assert_eq!(Reserve::parse("auto@0").unwrap().sized(40).to_string(), "auto@0");
        assert_eq!(Split::sizes(80, 4), [20, 40, 60]);
        assert_eq!(Split::sizes(104, 1), [13, 26, 39, 52, 65, 78, 91]);
        assert_eq!(Split::sizes(80, 1), [10, 20, 30, 40, 50, 60, 70]);
        assert_eq!(Split::sizes(2, 1), [1]);
        assert!(Split::sizes(81, 4).is_empty());
        let s = Split::plan(Reserve::parse("auto@0").unwrap().sized(40), 80, 4).unwrap();
        assert_eq!(s.reserved_cus, 40);
        assert_eq!(bits(&s.all()), (0..80).collect::<Vec<_>>());
    }

    #[test]
    fn none_turns_the_default_reserve_off_and_the_default_is_auto_above_the_default_level() {
        assert_eq!(Reserve::parse_setting("none"), Some(None));
        assert_eq!(Reserve::parse_setting(" OFF "), Some(None));
        assert_eq!(Reserve::parse_setting("20@10"), Some(Reserve::parse("20@10")));
        assert_eq!(Reserve::parse_setting("nothing"), None);
        assert_eq!(Reserve::parse("none"), None, "not a reserve");
        assert_eq!(DEFAULT_RESERVE.to_string(), "auto@1");
        assert_eq!(Reserve::parse("auto@1"), Some(DEFAULT_RESERVE));
        assert!(
            DEFAULT_RESERVE.is_reserved(Priority::new(Level::new(1).unwrap(), StreamPriority::Low))
        );
        assert!(!DEFAULT_RESERVE.is_reserved(Priority::new(Level::DEFAULT, StreamPriority::High)));
    }

    #[test]
    fn the_setting_parses_and_bad_forms_are_refused() {
        let r = Reserve::parse(" 20 @ 10 ").unwrap();
        assert_eq!((r.cus, r.from.level().get()), (20, 10));
        assert_eq!(Reserve::parse("8@-256").unwrap().from.level(), Level::MIN);
        for bad in [
            "",
            "20",
            "@10",
            "20@",
            "0@10",
            "-4@10",
            "20@256",
            "20@x",
            "x@10",
            "20@10@1",
            "20@0:",
            "20@0:urgent",
            "20@:high",
        ] {
            assert_eq!(Reserve::parse(bad), None, "{bad:?}");
        }
        assert_eq!(r.to_string(), "20@10");
        let h = Reserve::parse("20@0: HIGH").unwrap();
        assert_eq!(h.to_string(), "20@0:high");
        let at = |l: i64, s| Priority::new(Level::new(l).unwrap(), s);
        assert!(
            h.is_reserved(at(0, StreamPriority::High)) && h.is_reserved(at(1, StreamPriority::Low))
        );
        assert!(!h.is_reserved(at(0, StreamPriority::Normal)));
        assert!(
            r.is_reserved(at(10, StreamPriority::Low))
                && !r.is_reserved(at(9, StreamPriority::High))
        );
    }

    #[test]
    fn a_multi_xcc_gpu_is_split_into_whole_xccs_as_kfd_maps_the_bits() {
        // MI308X: 80 CUs, 4 XCCs; KFD gives bit i to XCC i % 4.
        let s = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        assert_eq!(s.reserved_cus, 20);
        let reserved = bits(&s.reserved);
        assert_eq!(reserved.len(), 20);
        assert!(reserved.iter().all(|b| b % 4 == 3), "the last XCC: {reserved:?}");
        let shared = bits(&s.shared);
        assert_eq!(shared.len(), 60);
        assert!(shared.iter().all(|b| b % 4 != 3));
        assert_eq!(s.reserved.len(), 3, "80 bits in 3 words");
        // Rounded to whole XCCs, at least one each side.
        assert_eq!(Split::plan(Reserve::parse("13@1").unwrap(), 80, 4).unwrap().reserved_cus, 20);
        assert_eq!(Split::plan(Reserve::parse("31@1").unwrap(), 80, 4).unwrap().reserved_cus, 40);
        assert_eq!(Split::plan(Reserve::parse("1@1").unwrap(), 80, 4).unwrap().reserved_cus, 20);
        assert_eq!(Split::plan(Reserve::parse("80@1").unwrap(), 80, 4).unwrap().reserved_cus, 60);
    }

    #[test]
    fn a_single_xcc_gpu_is_split_by_cu() {
        let s = Split::plan(Reserve::parse("24@0").unwrap(), 104, 1).unwrap();
        assert_eq!((bits(&s.reserved).len(), bits(&s.shared).len()), (24, 80));
        assert_eq!(
            Split::plan(Reserve::parse("500@0").unwrap(), 104, 1).unwrap().reserved_cus,
            103
        );
        assert!(Split::plan(Reserve::parse("1@0").unwrap(), 1, 1).is_err());
        assert!(Split::plan(Reserve::parse("1@0").unwrap(), 81, 4).is_err());
    }

    #[test]
    fn sides_of_one_split_are_disjoint_and_everything_else_overlaps() {
        let a = Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap();
        let (ar, ash) = (a.id(Side::Reserved), a.id(Side::Shared));
        assert_ne!(ar, ash);
        assert_eq!((ar.side(), ash.side()), (Some(Side::Reserved), Some(Side::Shared)));
        assert!(!overlaps(ar, ash) && !overlaps(ash, ar));
        assert!(overlaps(ar, ar) && overlaps(ash, ash));
        assert!(overlaps(PartitionId::WHOLE, ar) && overlaps(ash, PartitionId::WHOLE));
        // Another setting: nothing proves its sides disjoint from these.
        let b = Split::plan(Reserve::parse("40@10").unwrap(), 80, 4).unwrap();
        assert!(overlaps(b.id(Side::Reserved), ash) && overlaps(b.id(Side::Shared), ar));
        let c = Split::plan(Reserve::parse("20@5").unwrap(), 80, 4).unwrap();
        assert!(overlaps(c.id(Side::Reserved), ash));
        let at = |l| Priority::at_level(Level::new(l).unwrap());
        assert_eq!(a.side_for(at(10)), Side::Reserved);
        assert_eq!(a.side_for(at(9)), Side::Shared);
        let h = Split::plan(Reserve::parse("20@10:high").unwrap(), 80, 4).unwrap();
        assert!(overlaps(h.id(Side::Reserved), ash), "another threshold: another split");
        assert_eq!(h.id(Side::Shared).to_string(), "shared (20@10:high)");
        assert_eq!(ar.to_string(), "reserved (20@10)");
        assert_eq!(ash.to_string(), "shared (20@10)");
        assert_eq!(PartitionId::WHOLE.to_string(), "whole");
    }
}
