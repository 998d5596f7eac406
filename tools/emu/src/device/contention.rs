//! Contention between co-resident workgroups (docs/timing-model-contention.md, section 4):
//! what one workgroup of a kernel demands of its CU's pipe and of the device's HBM, the loads
//! those demands add up to, and the slowdown a workgroup sees from them.
//!
//! Per CU `c` the pipe has capacity `U`; the demand `D_c` is the sum of the utilisations of the
//! workgroups resident on it, and its slowdown `s_c = max(1, D_c / U)`. Device-wide, HBM has
//! capacity `B` bytes/ns; memory-using workgroups demand `bytes / wg_ns` each, and
//! `s_hbm = max(1, D_hbm / B)`. A batch of workgroups runs at `1 / max(s_c over its CUs (if it
//! uses the pipe), s_hbm (if it uses HBM))` of its calibrated speed: the most oversubscribed
//! resource it uses sets its pace, and nothing ever runs faster than calibrated.
//!
//! Loads are integers in millionths (utilisation, bytes/ns), so that adding and removing
//! demands never drifts: a load that returns to where it was is exactly where it was, and a
//! device at exactly its capacity is not slowed by rounding.

use super::cu::CuMask;

/// What one workgroup of a kernel demands while it runs at its calibrated speed. The default,
/// zero, is a kernel that is never slowed and never slows others (the timing of the emulator
/// before this model existed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Profile {
    /// Fraction of one CU's issue/MFMA capacity one workgroup uses (0.0 to 1.0).
    pub cu_util: f32,
    /// DRAM bytes one workgroup moves over its run.
    pub hbm_bytes: u64,
}

impl Profile {
    pub fn is_zero(&self) -> bool {
        self.cu_util <= 0.0 && self.hbm_bytes == 0
    }
}

/// The shared resources' capacities (`timing.cu_pipe_capacity`, `timing.hbm_bytes_per_ns`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capacity {
    /// Capacity `U` of one CU's pipe, in workgroup utilisations.
    pub cu_pipe: f64,
    /// Achievable HBM bandwidth `B`, bytes per ns (MI308X: 5300 peak x 0.70).
    pub hbm_bytes_per_ns: f64,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity { cu_pipe: 1.0, hbm_bytes_per_ns: 3710.0 }
    }
}

/// Fixed-point scale of loads (millionths).
const MICRO: f64 = 1e6;

/// One workgroup's demand in fixed point, computed once per kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    /// Pipe utilisation, millionths.
    pub util: u64,
    /// HBM bandwidth at calibrated speed, millionths of a byte per ns.
    pub bw: u64,
}

impl Demand {
    /// The demand of a workgroup of `profile` whose calibrated run time is `wg_ns`. The
    /// bandwidth uses the kernel's nominal run time, not a jittered one: the generator sizes a
    /// memory kernel so that its full rounds stay under the device's bandwidth, and jitter
    /// must not push a kernel alone over it.
    pub fn of(profile: Profile, wg_ns: u64) -> Demand {
        let util = (f64::from(profile.cu_util.max(0.0)) * MICRO).round() as u64;
        let bw = if profile.hbm_bytes == 0 {
            0
        } else {
            (profile.hbm_bytes as f64 * MICRO / wg_ns.max(1) as f64).round().max(1.0) as u64
        };
        Demand { util, bw }
    }

    pub fn is_zero(&self) -> bool {
        self.util == 0 && self.bw == 0
    }
}

/// The loads of one device: per-CU pipe demand and HBM demand, and which of them changed a
/// slowdown since the last [`Loads::take_dirty`]. Which batches sit where is the caller's: it
/// re-times the batches on the dirty CUs (and the HBM users, if HBM is dirty).
#[derive(Debug)]
pub struct Loads {
    cap_cu: u64,
    cap_hbm: u64,
    cu: Vec<u64>,
    hbm: u64,
    dirty_cus: CuMask,
    hbm_dirty: bool,
}

/// What changed since the last look: CUs whose slowdown may differ, and whether HBM's may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub cus: CuMask,
    pub hbm: bool,
}

impl Loads {
    pub fn new(cus: usize, cap: Capacity) -> Self {
        Loads {
            cap_cu: (cap.cu_pipe * MICRO).round().max(1.0) as u64,
            cap_hbm: (cap.hbm_bytes_per_ns * MICRO).round().max(1.0) as u64,
            cu: vec![0; cus],
            hbm: 0,
            dirty_cus: CuMask::none(),
            hbm_dirty: false,
        }
    }

    /// Workgroups with demand `d` on `placements` (CU, workgroups) become resident.
    pub fn add(&mut self, d: Demand, placements: &[(usize, u32)]) {
        self.change(d, placements, true);
    }

    /// They leave (finished, removed or preempted).
    pub fn remove(&mut self, d: Demand, placements: &[(usize, u32)]) {
        self.change(d, placements, false);
    }

    fn change(&mut self, d: Demand, placements: &[(usize, u32)], up: bool) {
        if d.util > 0 {
            for &(cu, k) in placements {
                let before = self.cu[cu];
                let by = d.util * u64::from(k);
                let after = if up { before + by } else { before - by };
                self.cu[cu] = after;
                // s_c changed unless it was and stays exactly 1.
                if before > self.cap_cu || after > self.cap_cu {
                    self.dirty_cus.set(cu);
                }
            }
        }
        if d.bw > 0 {
            let by = d.bw * placements.iter().map(|&(_, k)| u64::from(k)).sum::<u64>();
            let before = self.hbm;
            self.hbm = if up { before + by } else { before - by };
            if before > self.cap_hbm || self.hbm > self.cap_hbm {
                self.hbm_dirty = true;
            }
        }
    }

    /// What changed a slowdown since the last call, if anything did.
    pub fn take_dirty(&mut self) -> Option<Dirty> {
        let d = Dirty {
            cus: std::mem::replace(&mut self.dirty_cus, CuMask::none()),
            hbm: std::mem::take(&mut self.hbm_dirty),
        };
        (d.hbm || d.cus.count() > 0).then_some(d)
    }

    /// The slowdown (>= 1, device ns per calibrated ns) of a batch with demand `d` on
    /// `placements`: the worst of its CUs' pipes (if it uses the pipe) and HBM (if it uses it).
    pub fn slowdown(&self, d: Demand, placements: &[(usize, u32)]) -> f64 {
        let mut s = 1.0f64;
        if d.util > 0 {
            let worst = placements.iter().map(|&(cu, _)| self.cu[cu]).max().unwrap_or(0);
            if worst > self.cap_cu {
                s = worst as f64 / self.cap_cu as f64;
            }
        }
        if d.bw > 0 && self.hbm > self.cap_hbm {
            s = s.max(self.hbm as f64 / self.cap_hbm as f64);
        }
        s
    }
}

impl Dirty {
    /// Whether a batch with demand `d` on the CUs `cus` may have a new slowdown.
    pub fn concerns(&self, d: Demand, cus: &CuMask) -> bool {
        (d.util > 0 && self.cus.intersects(cus)) || (d.bw > 0 && self.hbm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demands_under_capacity_slow_nothing() {
        let mut l = Loads::new(2, Capacity::default());
        let d = Demand::of(Profile { cu_util: 0.5, hbm_bytes: 0 }, 1000);
        l.add(d, &[(0, 1)]);
        l.add(d, &[(0, 1)]);
        assert_eq!(l.slowdown(d, &[(0, 1)]), 1.0);
        assert_eq!(l.take_dirty(), None, "exactly at capacity: no slowdown changed");
        l.add(d, &[(0, 1)]);
        let dirty = l.take_dirty().unwrap();
        assert!(
            dirty.concerns(d, &CuMask::from_words(&[1], 2))
                && !dirty.concerns(d, &CuMask::from_words(&[2], 2))
        );
        assert_eq!(l.slowdown(d, &[(0, 1), (1, 1)]), 1.5);
        l.remove(d, &[(0, 1)]);
        assert!(l.take_dirty().is_some());
        assert_eq!(l.slowdown(d, &[(0, 1)]), 1.0);
    }

    #[test]
    fn hbm_is_shared_by_memory_users_only() {
        let mut l = Loads::new(1, Capacity { cu_pipe: 1.0, hbm_bytes_per_ns: 1000.0 });
        let m = Demand::of(Profile { cu_util: 0.0, hbm_bytes: 900_000 }, 1000);
        let g = Demand::of(Profile { cu_util: 0.1, hbm_bytes: 0 }, 1000);
        l.add(m, &[(0, 1)]);
        l.add(m, &[(0, 1)]);
        l.add(g, &[(0, 1)]);
        assert_eq!(l.slowdown(m, &[(0, 1)]), 1.8);
        assert_eq!(l.slowdown(g, &[(0, 1)]), 1.0);
        let dirty = l.take_dirty().unwrap();
        assert!(
            dirty.hbm && dirty.concerns(m, &CuMask::none()) && !dirty.concerns(g, &CuMask::none())
        );
        assert!(Demand::of(Profile::default(), 5).is_zero());
    }
}
