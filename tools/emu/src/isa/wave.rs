//! One wave64's architectural state: SGPRs (with VCC, TTMP, M0 and EXEC at their operand codes),
//! SCC, the program counter, VGPRs and AGPRs (register-major: 64 lanes of a register are
//! contiguous), and its per-lane private (scratch) memory.

use super::operand::{self, Ty, EXEC_HI, EXEC_LO, VCC_HI, VCC_LO};

pub const LANES: usize = 64;

/// Where a wave stands in the dispatch's cooperative run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveState {
    Running,
    /// Waiting at `s_barrier` for the other waves of the workgroup.
    Barrier,
    /// Gave its turn up: `s_sleep` (it waits for memory another wave or the host writes).
    Sleeping,
    /// Gave its turn up after a quantum of instructions (at a taken branch), so that waves it
    /// may be spinning on get to run.
    Preempted,
    /// Waiting at a GWS barrier (`ds_gws_barrier`) of resource `res` until that resource's
    /// barrier completes generation `generation`.
    Gws {
        res: u32,
        generation: u64,
    },
    Ended,
}

#[derive(Clone, Debug)]
pub struct Wave {
    /// Scalar registers by operand code 0-127 (s0-s101, flat_scratch, xnack_mask, vcc, ttmp,
    /// m0, exec).
    pub s: [u32; 128],
    pub scc: bool,
    pub pc: u64,
    pub v: Vec<u32>,
    pub a: Vec<u32>,
    pub state: WaveState,
    /// Index of the wave in its workgroup.
    pub id: u32,
    /// Per-lane private memory (`private_size` bytes per lane, lane-major), for scratch.
    pub private: Vec<u8>,
    pub private_size: u32,
    /// Instructions this wave executed.
    pub executed: u64,
    /// The MODE hardware register (`s_getreg`/`s_setreg` id 1): FP_ROUND [3:0], FP_DENORM
    /// [7:4], DX10_CLAMP [8], IEEE [9]; set from the descriptor's rsrc1. Kept for readers; the
    /// arithmetic always rounds to nearest even and keeps denormals.
    pub mode: u32,
}

impl Wave {
    pub fn new(vgprs: usize, agprs: usize, private_size: u32) -> Wave {
        Wave {
            s: [0; 128],
            scc: false,
            pc: 0,
            v: vec![0; vgprs * LANES],
            a: vec![0; agprs * LANES],
            state: WaveState::Running,
            id: 0,
            private: Vec::new(),
            private_size,
            executed: 0,
            mode: 0,
        }
    }

    pub fn exec(&self) -> u64 {
        u64::from(self.s[EXEC_LO as usize]) | u64::from(self.s[EXEC_HI as usize]) << 32
    }

    pub fn set_exec(&mut self, m: u64) {
        self.s[EXEC_LO as usize] = m as u32;
        self.s[EXEC_HI as usize] = (m >> 32) as u32;
    }

    pub fn vcc(&self) -> u64 {
        u64::from(self.s[VCC_LO as usize]) | u64::from(self.s[VCC_HI as usize]) << 32
    }

    /// A 64-bit scalar register pair starting at `code` (< 127).
    pub fn s64(&self, code: u16) -> u64 {
        let c = usize::from(code);
        u64::from(self.s[c]) | u64::from(self.s[(c + 1) & 127]) << 32
    }

    pub fn set_s64(&mut self, code: u16, v: u64) {
        self.set_s32(code, v as u32);
        self.set_s32(code + 1, (v >> 32) as u32);
    }

    /// Writes a scalar destination; writes to constants and reserved codes are dropped.
    pub fn set_s32(&mut self, code: u16, v: u32) {
        if code < 128 {
            self.s[usize::from(code)] = v;
        }
    }

    /// Reads a scalar source operand (a register, inline constant, literal or special source)
    /// of type `ty`; 64-bit types read a register pair.
    #[inline]
    pub fn sread(&self, code: u16, literal: u32, ty: Ty, apertures: &Apertures) -> u64 {
        if code < 128 {
            return if ty.is64() { self.s64(code) } else { u64::from(self.s[usize::from(code)]) };
        }
        if code <= 192 {
            // The non-negative integer constants, the most common scalar ones: the same bits
            // for every type.
            return u64::from(code - 128);
        }
        self.sread_other(code, literal, ty, apertures)
    }

    /// [`Wave::sread`] of the codes above 127.
    fn sread_other(&self, code: u16, literal: u32, ty: Ty, apertures: &Apertures) -> u64 {
        if let Some(c) = operand::inline_constant(code, ty) {
            return c;
        }
        let v32 = match code {
            operand::LITERAL => return operand::literal(literal, ty),
            operand::SCC => u64::from(self.scc),
            operand::VCCZ => u64::from(self.vcc() == 0),
            operand::EXECZ => u64::from(self.exec() == 0),
            operand::SHARED_BASE => apertures.shared >> 32,
            operand::SHARED_LIMIT => (apertures.shared + 0xffff_ffff) >> 32,
            operand::PRIVATE_BASE => apertures.private >> 32,
            operand::PRIVATE_LIMIT => (apertures.private + 0xffff_ffff) >> 32,
            _ => 0,
        };
        if ty.is64()
            && matches!(
                code,
                operand::SHARED_BASE
                    | operand::PRIVATE_BASE
                    | operand::SHARED_LIMIT
                    | operand::PRIVATE_LIMIT
            )
        {
            // As 64-bit operands the aperture sources are the whole base (the hardware gives
            // the high half in the high dword).
            return v32 << 32;
        }
        v32
    }

    /// VGPR `r`'s lane `l` (r is a register index, not a code).
    #[inline]
    pub fn vr(&self, r: usize, l: usize) -> u32 {
        self.v.get(r * LANES + l).copied().unwrap_or(0)
    }

    #[inline]
    pub fn set_vr(&mut self, r: usize, l: usize, x: u32) {
        if let Some(p) = self.v.get_mut(r * LANES + l) {
            *p = x;
        }
    }

    /// Lane `l` of a vector-register code (VGPR or AGPR).
    #[inline]
    pub fn reg(&self, code: u16, l: usize) -> u32 {
        if operand::is_agpr(code) {
            self.a.get(usize::from(code - operand::AGPR0) * LANES + l).copied().unwrap_or(0)
        } else {
            self.vr(usize::from(code.wrapping_sub(operand::VGPR0)), l)
        }
    }

    /// Where VGPRs `code .. code + n` start in `v` (lane 0 of the first), when `code` is a
    /// VGPR and the wave has all `n` of them.
    #[inline]
    pub fn vgprs_at(&self, code: u16, n: usize) -> Option<usize> {
        let r = usize::from(code.checked_sub(operand::VGPR0)?);
        (operand::is_vgpr(code) && (r + n) * LANES <= self.v.len()).then_some(r * LANES)
    }

    #[inline]
    pub fn set_reg(&mut self, code: u16, l: usize, x: u32) {
        if operand::is_agpr(code) {
            if let Some(p) = self.a.get_mut(usize::from(code - operand::AGPR0) * LANES + l) {
                *p = x;
            }
        } else {
            self.set_vr(usize::from(code.wrapping_sub(operand::VGPR0)), l, x);
        }
    }

    /// The private memory of lane `l`, allocated on first use.
    pub fn private_mut(&mut self, l: usize) -> &mut [u8] {
        let n = self.private_size as usize;
        if self.private.is_empty() {
            self.private = vec![0; n * LANES];
        }
        &mut self.private[l * n..(l + 1) * n]
    }
}

/// The flat apertures the hardware exposes through `src_shared_base`/`src_private_base`: a
/// flat address inside `[shared, shared + 4 GiB)` is an LDS address, one inside `[private,
/// private + 4 GiB)` a private (scratch) one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Apertures {
    pub shared: u64,
    pub private: u64,
    /// Base of the private segment buffer resource a wave gets in s[0:3]: a 48-bit address no
    /// host mapping can have (above x86-64's 47-bit user space), so buffer accesses through it
    /// are recognised as private ones.
    pub private_buffer: u64,
}

impl Default for Apertures {
    /// gfx9's 64-bit apertures as KFD reports them (`hsaKmtGetProcessApertures`: LDS at
    /// 0x1000000000000, scratch at 0x2000000000000).
    fn default() -> Self {
        Apertures {
            shared: crate::kfd::topology::LDS_APERTURE,
            private: crate::kfd::topology::SCRATCH_APERTURE,
            private_buffer: 0xf000_0000_0000,
        }
    }
}
