//! Kernels: what a dispatch is, how it is named, and the CPU models of the kernels we know.
//!
//! A model has three parts: `run`, the kernel's memory effect computed on the CPU, `wg_ns`, the
//! run time of one workgroup (the timing model), and `profile`, what one workgroup demands of
//! its CU's pipe and of HBM (the contention model; zero for most kernels, see
//! docs/timing-model-contention.md). A config `[[kernel]]` profile overrides `wg_ns` and the
//! contention profile; a kernel without a model completes after the default workgroup time,
//! its memory effect computed by the ISA interpreter (`crate::isa`) unless a profile makes it
//! timing-only.

pub mod blit;
pub mod naming;
pub mod test_kernels;

use std::collections::HashMap;

use crate::device::Profile;
use crate::sys::devmem::DeviceMemory;

/// A kernel dispatch, as decoded from its AQL packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub kernel_object: u64,
    pub grid: [u32; 3],
    pub wg: [u16; 3],
    pub kernarg: u64,
    pub group_segment: u32,
    pub private_segment: u32,
}

impl Dispatch {
    /// Workgroups in the grid (partial workgroups at the edges count).
    pub fn workgroups(&self) -> u64 {
        self.workgroup_counts().iter().product()
    }

    /// Workgroups in the grid along x, y and z (partial workgroups at the edges count).
    pub fn workgroup_counts(&self) -> [u64; 3] {
        std::array::from_fn(|i| u64::from(self.grid[i]).div_ceil(u64::from(self.wg[i].max(1))))
    }

    pub fn work_items_per_wg(&self) -> u32 {
        self.wg.iter().map(|&w| u32::from(w.max(1))).product()
    }

    /// Work-items in the grid.
    pub fn work_items(&self) -> u64 {
        self.grid.iter().map(|&g| u64::from(g)).product()
    }
}

/// A device access outside mapped memory: the GPU's memory fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub addr: u64,
    pub write: bool,
}

/// What a kernel model sees: the dispatch, its kernel arguments and device memory, every
/// access checked against the process's mapped ranges.
pub struct KernelCtx<'a> {
    pub dispatch: &'a Dispatch,
    pub mem: &'a dyn DeviceMemory,
    pub accessible: &'a dyn Fn(u64, u64) -> bool,
}

impl KernelCtx<'_> {
    fn check(&self, addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        if (self.accessible)(addr, len) {
            Ok(())
        } else {
            Err(Fault { addr, write })
        }
    }

    pub fn arg_u32(&self, offset: u64) -> Result<u32, Fault> {
        let a = self.dispatch.kernarg + offset;
        self.check(a, 4, false)?;
        Ok(self.mem.read_u32(a))
    }

    pub fn arg_u64(&self, offset: u64) -> Result<u64, Fault> {
        let a = self.dispatch.kernarg + offset;
        self.check(a, 8, false)?;
        Ok(self.mem.read_u64(a))
    }

    pub fn arg_f32(&self, offset: u64) -> Result<f32, Fault> {
        Ok(f32::from_bits(self.arg_u32(offset)?))
    }

    /// Checks that `[addr, addr + len)` may be written.
    pub fn check_write(&self, addr: u64, len: u64) -> Result<(), Fault> {
        self.check(addr, len, true)
    }

    pub fn read_bytes(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.check(addr, buf.len() as u64, false)?;
        self.mem.read(addr, buf);
        Ok(())
    }

    pub fn write_bytes(&self, addr: u64, buf: &[u8]) -> Result<(), Fault> {
        self.check(addr, buf.len() as u64, true)?;
        self.mem.write(addr, buf);
        Ok(())
    }

    pub fn read_f32s(&self, addr: u64, n: usize) -> Result<Vec<f32>, Fault> {
        let mut b = vec![0u8; n * 4];
        self.read_bytes(addr, &mut b)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    pub fn write_f32s(&self, addr: u64, v: &[f32]) -> Result<(), Fault> {
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.write_bytes(addr, &b)
    }

    pub fn copy(&self, dst: u64, src: u64, len: u64) -> Result<(), Fault> {
        self.check(src, len, false)?;
        self.check(dst, len, true)?;
        self.mem.copy(dst, src, len);
        Ok(())
    }
}

/// The CPU model and timing model of one kernel.
#[derive(Clone, Copy)]
pub struct Model {
    pub name: &'static str,
    pub run: fn(&KernelCtx) -> Result<(), Fault>,
    /// Run time of one workgroup, in device nanoseconds.
    pub wg_ns: fn(&KernelCtx) -> Result<u64, Fault>,
    /// One workgroup's contention profile ([`no_profile`] for a kernel that is never slowed).
    pub profile: fn(&KernelCtx) -> Result<Profile, Fault>,
}

/// The contention profile of a kernel that neither slows nor is slowed by others.
pub fn no_profile(_: &KernelCtx) -> Result<Profile, Fault> {
    Ok(Profile::default())
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("name", &self.name).finish()
    }
}

/// Models by kernel symbol name (without the `.kd` suffix).
#[derive(Debug, Default)]
pub struct Registry {
    models: HashMap<&'static str, Model>,
}

impl Registry {
    /// All models built into the emulator.
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        for m in test_kernels::MODELS.iter().chain(blit::MODELS) {
            r.add(*m);
        }
        r
    }

    pub fn add(&mut self, m: Model) {
        self.models.insert(m.name, m);
    }

    pub fn get(&self, name: &str) -> Option<&Model> {
        self.models.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &&'static str> {
        self.models.keys()
    }
}

/// Cost of streaming `bytes` through one workgroup at the device's share of memory bandwidth
/// per CU (about 5.3 TB/s over 80 CUs on an MI308X, ≈ 66 bytes/ns per CU), at least 1 µs.
pub fn streaming_wg_ns(bytes: u64) -> u64 {
    (bytes / 66).max(1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgroups_round_up_per_dimension() {
        let d = Dispatch {
            kernel_object: 0,
            grid: [1000, 3, 1],
            wg: [256, 2, 1],
            kernarg: 0,
            group_segment: 0,
            private_segment: 0,
        };
        assert_eq!(d.workgroups(), 4 * 2);
        assert_eq!(d.work_items_per_wg(), 512);
        assert_eq!(d.work_items(), 3000);
    }

    #[test]
    fn builtin_registry_has_the_test_kernels() {
        let r = Registry::builtin();
        for n in [
            "xhsa_vadd",
            "xhsa_saxpy",
            "xhsa_matmul",
            "xhsa_synthetic",
            "xhsa_synthetic_p",
            "xhsa_null",
        ] {
            assert!(r.get(n).is_some(), "{n}");
        }
    }
}
