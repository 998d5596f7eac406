//! Kernels of one code object run over this process's memory, without ROCr, a queue or the
//! CP: the interpreter's own test and benchmark rig. The code object's PT_LOAD segments are
//! placed in a host buffer at their virtual addresses, kernel arguments and buffers are host
//! allocations, and a dispatch may touch only those ([`HostRig::run`] checks every access
//! against them, as the device model checks mapped memory).
//!
//! Not the device model: no timing, no signals, no packet processor.

use super::target::Target;
use super::{IsaError, Launch, Stats};
use crate::kernels::naming::{elf_mach, kernel_symbols};
use crate::kernels::Dispatch;
use crate::sys::bytes::{as_bytes, as_bytes_mut, Plain};
use crate::sys::devmem::{DeviceMemory, HostMemory};

/// A code object loaded at a host address.
pub struct CodeObject {
    image: Vec<u64>,
    kernels: Vec<(u64, String)>,
    target: Target,
    /// `e_ident[EI_ABIVERSION]`: 2 code object v4, 3 v5 (hidden kernel arguments after the
    /// explicit ones, where HIP's kernels read the workgroup size), 4 v6.
    abi_version: u8,
}

impl CodeObject {
    /// Loads an ELF code object's PT_LOAD segments; an error names what is wrong with it (also
    /// a machine other than gfx90a and gfx942).
    pub fn load(elf: &[u8]) -> Result<CodeObject, String> {
        let mach = elf_mach(elf).ok_or("not an AMDGPU ELF64 code object")?;
        let target = Target::from_mach(mach).ok_or_else(|| format!("code object for EF_AMDGPU_MACH {mach:#x}: the interpreter runs gfx90a (0x3f) and gfx942 (0x4c) code"))?;
        let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let u64_at = |o: usize| {
            elf.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        if elf.get(0..4) != Some(b"\x7fELF") {
            return Err("not an ELF file".into());
        }
        let short = || "truncated ELF header".to_string();
        let (phoff, phentsize, phnum) = (
            u64_at(0x20).ok_or_else(short)? as usize,
            usize::from(u16_at(0x36).ok_or_else(short)?),
            usize::from(u16_at(0x38).ok_or_else(short)?),
        );
        let mut segs = Vec::new();
        for k in 0..phnum {
            let p = phoff + k * phentsize;
            let ty = elf.get(p..p + 4).ok_or("truncated program header")?;
            if u32::from_le_bytes(ty.try_into().expect("4 bytes")) != 1 {
                continue;
            }
            let f = |o| u64_at(p + o).map(|x| x as usize).ok_or("truncated program header");
            let (off, vaddr, filesz, memsz) = (f(8)?, f(16)?, f(32)?, f(40)?);
            if elf.get(off..off + filesz).is_none()
                || filesz > memsz
                || vaddr.checked_add(memsz).is_none_or(|e| e > 1 << 32)
            {
                return Err(format!("PT_LOAD segment at offset {off:#x} ({filesz:#x} bytes at {vaddr:#x}) does not fit"));
            }
            segs.push((off, vaddr, filesz, memsz));
        }
        let size = segs.iter().map(|s| s.1 + s.3).max().ok_or("no PT_LOAD segment")?;
        let mut image = vec![0u64; size.div_ceil(8) + 1];
        let base = image.as_mut_ptr() as u64;
        for &(off, vaddr, filesz, _) in &segs {
            // SAFETY: `image` holds `size` bytes from `base`, and every segment ends within it
            // (`vaddr + filesz <= vaddr + memsz <= size`, checked above).
            unsafe { HostMemory::new() }.write(base + vaddr as u64, &elf[off..off + filesz]);
        }
        Ok(CodeObject { image, kernels: kernel_symbols(elf), target, abi_version: elf[8] })
    }

    /// The ISA the code object is built for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The host address the image is loaded at (instruction addresses are this plus their ELF
    /// virtual address).
    pub fn base(&self) -> u64 {
        self.image.as_ptr() as u64
    }

    /// The kernel descriptor address of the first kernel whose symbol contains `name_part`.
    pub fn kernel(&self, name_part: &str) -> Option<u64> {
        self.kernels.iter().find(|(_, n)| n.contains(name_part)).map(|(v, _)| self.base() + v)
    }

    /// The kernels' symbol names.
    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.kernels.iter().map(|(_, n)| n.as_str())
    }

    fn range(&self) -> (u64, u64) {
        (self.base(), self.image.len() as u64 * 8)
    }
}

/// A code object and the host buffers its dispatches use.
pub struct HostRig {
    code: CodeObject,
    buffers: Vec<Vec<u64>>,
    /// Compute units of the pretended device (how many workgroups are resident at once);
    /// 80 (an MI308X) unless set.
    pub cus: u32,
    /// The `s_sendmsg` interrupts the last dispatch raised (M0[7:0] of each).
    pub interrupts: Vec<u32>,
    /// Threads a dispatch's workgroups are shared out among ([`super::run_part`], as the
    /// device model's interpreter threads share them); 1 unless set.
    pub threads: u32,
    /// The packet's group segment size (LDS bytes per workgroup, the kernel's static LDS plus
    /// the dynamic `extern __shared__` it is launched with); 0 (the static size) unless set.
    pub group_segment: u32,
    /// The packet's private segment size (scratch bytes per work-item, at least the kernel's
    /// fixed size): what HIP passes for kernels with a dynamic stack (calls, as at -O0); 0 (the
    /// descriptor's fixed size) unless set.
    pub private_segment: u32,
}

impl HostRig {
    pub fn new(code: CodeObject) -> HostRig {
        HostRig {
            code,
            buffers: Vec::new(),
            cus: 80,
            interrupts: Vec::new(),
            threads: 1,
            group_segment: 0,
            private_segment: 0,
        }
    }

    pub fn code(&self) -> &CodeObject {
        &self.code
    }

    /// A zeroed buffer of `bytes`; returns its address.
    pub fn alloc(&mut self, bytes: usize) -> u64 {
        self.buffers.push(vec![0u64; bytes.div_ceil(8).max(1)]);
        self.buffers.last().expect("just pushed").as_ptr() as u64
    }

    /// A buffer holding `data`; returns its address.
    pub fn upload<T: Plain>(&mut self, data: &[T]) -> u64 {
        let src = as_bytes(data);
        let a = self.alloc(src.len());
        // SAFETY: `a` is the buffer of `src.len()` bytes just allocated by this rig.
        unsafe { HostMemory::new() }.write(a, src);
        a
    }

    /// `n` values of T from the rig's buffer at `addr`.
    ///
    /// # Panics
    /// If `addr..addr + n * size_of::<T>()` is not inside one of this rig's buffers.
    pub fn download<T: Plain>(&self, addr: u64, n: usize) -> Vec<T> {
        let bytes = (n * std::mem::size_of::<T>()) as u64;
        assert!(
            self.ranges().iter().any(|&(s, l)| addr >= s && addr + bytes <= s + l),
            "download of {bytes} bytes at {addr:#x}: not a buffer of this rig"
        );
        let mut v = vec![T::default(); n];
        let dst = as_bytes_mut(&mut v);
        // SAFETY: the range is one of this rig's buffers (checked above).
        unsafe { HostMemory::new() }.read(addr, dst);
        v
    }

    fn ranges(&self) -> Vec<(u64, u64)> {
        let mut r: Vec<(u64, u64)> =
            self.buffers.iter().map(|b| (b.as_ptr() as u64, b.len() as u64 * 8)).collect();
        r.push(self.code.range());
        r
    }

    /// Dispatches the kernel whose name contains `name` with `args` (8-byte kernarg slots)
    /// over `grid` work-items in workgroups of `wg`.
    pub fn run(
        &mut self,
        name: &str,
        args: &[u64],
        grid: [u32; 3],
        wg: [u16; 3],
    ) -> Result<Stats, IsaError> {
        let ko = self.code.kernel(name).ok_or_else(|| IsaError::Illegal {
            pc: 0,
            message: format!("no kernel named like {name:?} in the code object"),
        })?;
        let mut hidden = [0u64; 32];
        if self.code.abi_version >= 3 {
            // Code object v5+: the hidden arguments follow the explicit ones (8-byte slots here):
            // block counts (u32 x3) at 0, group sizes (u16 x3) at 12, remainders (u16 x3) at 18,
            // grid dimensions (u16) at 64 (AMDGPUUsage "Code Object V5 Metadata").
            let mut b = [0u8; 256];
            for k in 0..3 {
                let wgk = u32::from(wg[k].max(1));
                b[4 * k..4 * k + 4].copy_from_slice(&grid[k].div_ceil(wgk).to_le_bytes());
                b[12 + 2 * k..14 + 2 * k].copy_from_slice(&wg[k].to_le_bytes());
                b[18 + 2 * k..20 + 2 * k].copy_from_slice(&((grid[k] % wgk) as u16).to_le_bytes());
            }
            let dims: u16 = if grid[2] > 1 {
                3
            } else if grid[1] > 1 {
                2
            } else {
                1
            };
            b[64..66].copy_from_slice(&dims.to_le_bytes());
            for (k, h) in hidden.iter_mut().enumerate() {
                *h = u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            }
        }
        let kernarg = self.upload(&[args, &hidden[..]].concat());
        let mut packet = [0u8; 64];
        packet[0..2].copy_from_slice(&(2u16 | 3 << 9 | 3 << 11).to_le_bytes());
        packet[2..4].copy_from_slice(
            &(if grid[2] > 1 {
                3u16
            } else if grid[1] > 1 {
                2
            } else {
                1
            })
            .to_le_bytes(),
        );
        for k in 0..3 {
            packet[4 + 2 * k..6 + 2 * k].copy_from_slice(&wg[k].to_le_bytes());
            packet[12 + 4 * k..16 + 4 * k].copy_from_slice(&grid[k].to_le_bytes());
        }
        packet[24..28].copy_from_slice(&self.private_segment.to_le_bytes());
        packet[28..32].copy_from_slice(&self.group_segment.to_le_bytes());
        packet[32..40].copy_from_slice(&ko.to_le_bytes());
        packet[40..48].copy_from_slice(&kernarg.to_le_bytes());
        let packet_addr = self.upload(&packet);
        let d = Dispatch {
            kernel_object: ko,
            grid,
            wg,
            kernarg,
            group_segment: self.group_segment,
            private_segment: self.private_segment,
        };
        let ranges = self.ranges();
        let accessible = |a: u64, l: u64| {
            ranges.iter().any(|&(s, n)| a >= s && a.checked_add(l).is_some_and(|e| e <= s + n))
        };
        let launch = Launch {
            dispatch: d,
            packet: packet_addr,
            queue: 0,
            dispatch_id: 1,
            cus: self.cus,
            lds_per_cu: 64 * 1024,
            target: self.code.target,
        };
        let raised = std::sync::Mutex::new(Vec::new());
        let interrupt = |id: u32| raised.lock().unwrap_or_else(|p| p.into_inner()).push(id);
        let parts = self.threads.max(1);
        // SAFETY: the kernel's accesses reach memory only through `accessible`, which admits
        // only this rig's buffers (and its code object's image), all live for the run.
        let host = unsafe { HostMemory::new() };
        let res = std::thread::scope(|s| {
            let threads: Vec<_> = (0..parts)
                .map(|k| {
                    let (launch, accessible, interrupt, host) =
                        (&launch, &accessible, &interrupt, &host);
                    s.spawn(move || {
                        super::run_part(
                            launch,
                            host,
                            accessible,
                            &super::Services { clock: &|| 0, interrupt },
                            k,
                            parts,
                        )
                    })
                })
                .collect();
            let mut sum = Ok(Stats::default());
            for t in threads {
                super::add_part(
                    &mut sum,
                    t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            sum
        });
        self.interrupts = raised.into_inner().unwrap_or_else(|p| p.into_inner());
        res
    }
}
