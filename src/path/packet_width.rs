//! How wide a queue's kernels are: the rounds of work-groups each dispatch needs on parts of the
//! GPU's CUs, summed per queue (the board's `rounds`). The live sizing expects from them how much
//! longer the latency-critical class's work would take on a reserve it has not tried
//! ([`crate::preempt::sizing::Sizes::expected_ratio`]).
//!
//! A dispatch of `g` work-groups on `c` CUs, each of which holds `k` of its work-groups at once,
//! runs in `ceil(g / (c k))` rounds ([`Occupancy::rounds`]); `k` is what a CU's wave slots and its
//! LDS allow the work-group (its waves, its group segment bytes: both in the packet). The VGPRs
//! and SGPRs a kernel uses can lower `k` further; they are in its code object, not in the packet,
//! so `k` is an upper bound and the rounds are lower bounds: the slowdown expected from them
//! errs towards none. A dispatch is counted at each eighth of the GPU ([`PARTS`]: `ceil(n e / 8)`
//! of its `n` CUs for `e` = 1..8, the last the whole GPU; an MI308X's XCC boundaries, 20, 40 and
//! 60 of 80 CUs, are eighths), when libxhsa takes it from the application's ring.
//!
//! [`ratio`] is the sums' answer for a size: the rounds there against the whole GPU's. Rounds are
//! not time (a kernel's fixed cost does not grow with its rounds, and a round of a wide GEMM
//! lasts longer than one of a norm), but a class whose kernels fill the GPU in one round each
//! takes about twice as long on half of it, and one whose kernels fill a tenth of it no longer:
//! llm-decode's decode steps count 1.58 at 40 of 80 CUs (measured 1.82-2.07x), BERT-base's
//! 1.41 (its host launches hide most of that: measured 1.00-1.30x).
//!
//! Pure: the device's figures and the packets are passed in.
#![forbid(unsafe_code)]

use crate::path::packet::{DispatchShape, Packet};
use xhsa_model::stats::WIDTH_PARTS;

/// The parts of the GPU a dispatch's rounds are counted at: eighths.
pub const PARTS: usize = WIDTH_PARTS;

/// What a CU holds at once, and how many CUs the GPU has.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Occupancy {
    pub cu_count: u32,
    /// Wave slots per CU (`simd_per_cu x max_waves_per_simd` in KFD's topology).
    pub waves_per_cu: u32,
    /// LDS bytes per CU.
    pub lds_bytes_per_cu: u32,
    /// Work-items per wave.
    pub wave_size: u32,
}

impl Occupancy {
    /// A gfx9 GPU of `cu_count` CUs as KFD describes gfx90a and gfx942: 4 SIMDs of 8 wave
    /// slots per CU, 64 KiB of LDS, waves of 64; what is used where the topology does not say.
    pub fn gfx9(cu_count: u32) -> Occupancy {
        Occupancy { cu_count, waves_per_cu: 32, lds_bytes_per_cu: 64 << 10, wave_size: 64 }
    }

    /// Work-groups of this shape a CU holds at once (wave slots and LDS; at least 1).
    pub fn per_cu(&self, s: &DispatchShape) -> u64 {
        let waves = s.workgroup_items().div_ceil(u64::from(self.wave_size.max(1))).max(1);
        let by_waves = u64::from(self.waves_per_cu) / waves;
        let by_lds = match u64::from(s.group_segment_bytes) {
            0 => u64::MAX,
            lds => u64::from(self.lds_bytes_per_cu) / lds,
        };
        by_waves.min(by_lds).max(1)
    }

    /// The rounds a dispatch of this shape needs on each part of the GPU (index `e - 1` for
    /// part `e`); zeros for one without work-groups.
    pub fn rounds(&self, s: &DispatchShape) -> [u64; PARTS] {
        let groups = s.workgroups();
        let per_cu = self.per_cu(s);
        let mut r = [0u64; PARTS];
        if groups == 0 || self.cu_count == 0 {
            return r;
        }
        for (i, slot) in r.iter_mut().enumerate() {
            let at_once = u64::from(part_cus(self.cu_count, i + 1)).saturating_mul(per_cu);
            *slot = groups.div_ceil(at_once);
        }
        r
    }
}

/// A queue's dispatches' rounds on each part of the GPU, summed (the board's `rounds`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Widths(pub [u64; PARTS]);

impl Widths {
    /// Counts the kernel dispatches among `packets` (other packets need no CUs).
    pub fn count(&mut self, o: &Occupancy, packets: &[Packet]) {
        for s in packets.iter().filter_map(Packet::dispatch_shape) {
            for (sum, r) in self.0.iter_mut().zip(o.rounds(&s)) {
                *sum = sum.saturating_add(r);
            }
        }
    }
}

/// The CUs of part `e` (1..=[`PARTS`]) of a GPU of `cu_count` CUs: `ceil(n e / PARTS)`, at
/// least 1.
pub fn part_cus(cu_count: u32, e: usize) -> u32 {
    let e = e.clamp(1, PARTS) as u64;
    (u64::from(cu_count) * e).div_ceil(PARTS as u64).max(1) as u32
}

/// How much longer a class whose dispatches summed `rounds` (index `e - 1`: at part `e`) takes
/// on `cus` of the GPU's `cu_count` CUs than on all of them, by its rounds: at a part, the
/// part's sum against the whole GPU's; between two parts, interpolated in `1 / cus` (time goes
/// so with the CUs where the kernels fill them); below the first, that part's scaled so. `None`
/// without rounds on the whole GPU or for a size that is not a reserve.
pub fn ratio(rounds: &[f64; PARTS], cu_count: u32, cus: u32) -> Option<f64> {
    let whole = rounds[PARTS - 1];
    if whole <= 0.0 || !whole.is_finite() || cus == 0 || cus >= cu_count {
        return None;
    }
    let at = |e: usize| (f64::from(part_cus(cu_count, e)), rounds[e - 1] / whole);
    let x = |c: f64| f64::from(cu_count) / c;
    let above = (1..=PARTS).find(|&e| part_cus(cu_count, e) >= cus)?;
    let (c_hi, r_hi) = at(above);
    let r = if part_cus(cu_count, above) == cus {
        r_hi
    } else if above == 1 {
        r_hi * c_hi / f64::from(cus)
    } else {
        let (c_lo, r_lo) = at(above - 1);
        let f = (x(f64::from(cus)) - x(c_hi)) / (x(c_lo) - x(c_hi));
        r_hi + (r_lo - r_hi) * f
    };
    Some(r.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(groups: u32, items: u16, lds: u32) -> DispatchShape {
        DispatchShape {
            workgroup: [items, 1, 1],
            grid: [groups * u32::from(items), 1, 1],
            group_segment_bytes: lds,
        }
    }

    #[test]
    fn a_cu_holds_what_its_wave_slots_and_lds_allow() {
        let o = Occupancy::gfx9(80);
        // 256 work-items: 4 waves of 64, 8 to a CU's 32 slots.
        assert_eq!(o.per_cu(&shape(1, 256, 0)), 8);
        // 10 KiB of LDS each: 6 fit in 64 KiB.
        assert_eq!(o.per_cu(&shape(1, 256, 10_240)), 6);
        // More waves or LDS than a CU has (a malformed packet): still one at a time.
        assert_eq!(o.per_cu(&shape(1, 4096, 0)), 1);
        assert_eq!(o.per_cu(&shape(1, 64, 1 << 20)), 1);
        // 100 work-items: 2 waves.
        assert_eq!(o.per_cu(&shape(1, 100, 0)), 16);
    }

    #[test]
    fn rounds_are_counted_at_each_eighth_of_the_gpu() {
        let o = Occupancy::gfx9(80);
        assert_eq!(
            (1..=PARTS).map(|e| part_cus(80, e)).collect::<Vec<_>>(),
            [10, 20, 30, 40, 50, 60, 70, 80]
        );
        // 480 work-groups of 6 to a CU: 480 at once on 80 CUs, 240 on 40.
        assert_eq!(o.rounds(&shape(480, 256, 10_240)), [8, 4, 3, 2, 2, 2, 2, 1]);
        // 32 work-groups fit in any part.
        assert_eq!(o.rounds(&shape(32, 256, 0)), [1; PARTS]);
        assert_eq!(o.rounds(&shape(0, 256, 0)), [0; PARTS]);
        // A GPU whose CUs are not a multiple of 8: parts round up.
        assert_eq!(part_cus(38, 1), 5);
        assert_eq!(part_cus(38, PARTS), 38);
    }

    #[test]
    fn the_ratio_is_the_rounds_against_the_whole_gpu_interpolated_between_parts() {
        let o = Occupancy::gfx9(80);
        let mut sums = [0.0; PARTS];
        for s in [shape(480, 256, 10_240), shape(32, 256, 0)] {
            for (sum, r) in sums.iter_mut().zip(o.rounds(&s)) {
                *sum += r as f64;
            }
        }
        // A wide kernel and a narrow one: (2 + 1) / (1 + 1) on half the GPU.
        assert_eq!(ratio(&sums, 80, 40), Some(1.5));
        assert_eq!(ratio(&sums, 80, 10), Some(4.5));
        // 35 CUs: between 30 (2.0) and 40 (1.5) in 80 / cus.
        let r = ratio(&sums, 80, 35).unwrap();
        let f = (80.0 / 35.0 - 2.0) / (80.0 / 30.0 - 2.0);
        assert!((r - (1.5 + 0.5 * f)).abs() < 1e-9, "{r}");
        // Below the first part: scaled with the CUs; never below 1.
        assert_eq!(ratio(&sums, 80, 5), Some(9.0));
        assert_eq!(ratio(&[1.0; PARTS], 80, 20), Some(1.0));
        // Not a reserve, or nothing counted: no figure.
        assert_eq!(ratio(&sums, 80, 80), None);
        assert_eq!(ratio(&sums, 80, 0), None);
        assert_eq!(ratio(&[0.0; PARTS], 80, 40), None);
    }
}
