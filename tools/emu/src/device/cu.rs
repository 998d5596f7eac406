//! Compute units and what one workgroup occupies on them.
//!
//! A CU holds `simds × waves_per_simd` wave slots and `lds_bytes` of LDS; a workgroup needs
//! `ceil(work-items / wave size)` wave slots and its group segment of LDS on one CU. Nothing
//! else (VGPRs, scratch) limits occupancy in this model.

/// The resources one workgroup of a kernel occupies on the CU it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgNeed {
    /// Wave slots (at least 1).
    pub waves: u32,
    /// Bytes of LDS (group segment).
    pub lds: u32,
}

impl WgNeed {
    /// What a workgroup of `work_items` work-items using `lds` bytes of LDS needs on a device
    /// with waves of `wave_size` lanes.
    pub fn new(work_items: u32, wave_size: u32, lds: u32) -> Self {
        WgNeed { waves: work_items.div_ceil(wave_size.max(1)).max(1), lds }
    }
}

/// A set of CUs, as `SET_CU_MASK` and `hsa_amd_queue_cu_set_mask` give it: bit `i` = CU `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CuMask([u64; 4]);

impl CuMask {
    /// The most CUs a mask can name.
    pub const MAX_CUS: usize = 256;

    /// All of the first `cus` CUs.
    pub fn all(cus: usize) -> Self {
        let mut m = CuMask([0; 4]);
        for i in 0..cus.min(Self::MAX_CUS) {
            m.set(i);
        }
        m
    }

    /// A mask from the 32-bit words of a KFD `SET_CU_MASK` request (`num_bits` valid bits).
    pub fn from_words(words: &[u32], num_bits: usize) -> Self {
        let mut m = CuMask([0; 4]);
        for i in 0..num_bits.min(words.len() * 32).min(Self::MAX_CUS) {
            if words[i / 32] >> (i % 32) & 1 == 1 {
                m.set(i);
            }
        }
        m
    }

    /// No CU.
    pub fn none() -> Self {
        CuMask([0; 4])
    }

    /// Whether the two masks share a CU.
    pub fn intersects(&self, other: &CuMask) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }

    pub fn set(&mut self, cu: usize) {
        self.0[cu / 64] |= 1 << (cu % 64);
    }

    pub fn contains(&self, cu: usize) -> bool {
        cu < Self::MAX_CUS && self.0[cu / 64] >> (cu % 64) & 1 == 1
    }

    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// This mask restricted to the first `cus` CUs.
    pub fn within(&self, cus: usize) -> Self {
        let all = Self::all(cus);
        CuMask([0, 1, 2, 3].map(|i| self.0[i] & all.0[i]))
    }
}

#[derive(Clone, Copy, Debug)]
struct Cu {
    free_waves: u32,
    free_lds: u32,
}

/// The free resources of every CU of the device.
#[derive(Clone, Debug)]
pub struct CuPool {
    cus: Vec<Cu>,
    waves_per_cu: u32,
    lds_per_cu: u32,
}

impl CuPool {
    pub fn new(cus: usize, waves_per_cu: u32, lds_per_cu: u32) -> Self {
        CuPool {
            cus: vec![Cu { free_waves: waves_per_cu, free_lds: lds_per_cu }; cus],
            waves_per_cu,
            lds_per_cu,
        }
    }

    pub fn len(&self) -> usize {
        self.cus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cus.is_empty()
    }

    /// Whether a workgroup with this need could ever run on one (empty) CU.
    pub fn can_ever_fit(&self, need: WgNeed) -> bool {
        need.waves <= self.waves_per_cu && need.lds <= self.lds_per_cu
    }

    /// How many more workgroups with this need fit on CU `cu` now.
    pub fn room(&self, cu: usize, need: WgNeed) -> u32 {
        let c = self.cus[cu];
        let by_waves = c.free_waves / need.waves.max(1);
        let by_lds = c.free_lds.checked_div(need.lds).unwrap_or(u32::MAX);
        by_waves.min(by_lds)
    }

    /// Whether one more workgroup with this need fits on CU `cu` now (`room > 0`, without
    /// divisions: the HWS asks this for every CU on every turn).
    pub fn fits(&self, cu: usize, need: WgNeed) -> bool {
        let c = self.cus[cu];
        c.free_waves >= need.waves.max(1) && c.free_lds >= need.lds
    }

    pub fn take(&mut self, cu: usize, need: WgNeed, count: u32) {
        let c = &mut self.cus[cu];
        c.free_waves -= need.waves * count;
        c.free_lds -= need.lds * count;
    }

    pub fn give(&mut self, cu: usize, need: WgNeed, count: u32) {
        let c = &mut self.cus[cu];
        c.free_waves += need.waves * count;
        c.free_lds += need.lds * count;
        debug_assert!(c.free_waves <= self.waves_per_cu && c.free_lds <= self.lds_per_cu);
    }

    /// Free wave slots of CU `cu` (for spreading work over the least loaded CUs).
    pub fn free_waves(&self, cu: usize) -> u32 {
        self.cus[cu].free_waves
    }

    /// Busy wave slots over the whole device.
    pub fn busy_waves(&self) -> u64 {
        self.cus.iter().map(|c| u64::from(self.waves_per_cu - c.free_waves)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_rounds_work_items_up_to_waves() {
        assert_eq!(WgNeed::new(64, 64, 0).waves, 1);
        assert_eq!(WgNeed::new(65, 64, 0).waves, 2);
        assert_eq!(WgNeed::new(1024, 64, 0).waves, 16);
        assert_eq!(WgNeed::new(0, 64, 0).waves, 1);
    }

    #[test]
    fn room_is_limited_by_waves_and_lds() {
        let mut p = CuPool::new(2, 32, 65536);
        assert_eq!(p.room(0, WgNeed { waves: 4, lds: 0 }), 8);
        assert_eq!(p.room(0, WgNeed { waves: 1, lds: 16384 }), 4);
        p.take(0, WgNeed { waves: 4, lds: 16384 }, 2);
        assert_eq!(p.room(0, WgNeed { waves: 4, lds: 16384 }), 2);
        assert_eq!(p.room(1, WgNeed { waves: 4, lds: 16384 }), 4);
        for need in [
            WgNeed { waves: 4, lds: 16384 },
            WgNeed { waves: 30, lds: 0 },
            WgNeed { waves: 1, lds: 40000 },
            WgNeed { waves: 0, lds: 0 },
        ] {
            for cu in 0..2 {
                assert_eq!(p.fits(cu, need), p.room(cu, need) > 0, "{need:?} on {cu}");
            }
        }
        p.give(0, WgNeed { waves: 4, lds: 16384 }, 2);
        assert_eq!(p.busy_waves(), 0);
    }

    #[test]
    fn masks_from_kfd_words() {
        let m = CuMask::from_words(&[0x0000_000f, 0x1], 40);
        assert_eq!(m.count(), 5);
        assert!(m.contains(3) && m.contains(32) && !m.contains(4));
        assert_eq!(CuMask::all(80).count(), 80);
        assert_eq!(CuMask::all(256).within(80), CuMask::all(80));
        // Bits beyond num_bits are ignored, as KFD ignores them.
        assert_eq!(CuMask::from_words(&[u32::MAX], 4).count(), 4);
    }
}
