//! What the vector memory opcodes do, shared by FLAT/GLOBAL/SCRATCH and MUBUF (which number
//! their loads, stores and atomics alike: 0x10-0x25 loads and stores, 0x40-0x51 32-bit and
//! float atomics, 0x60-0x6c 64-bit atomics), and where a lane's access lands: global memory,
//! the workgroup's LDS (a flat address in the shared aperture) or the lane's private memory (a
//! flat address in the private aperture, SCRATCH, or a buffer over the private segment).

use super::{Ctx, ExecError};
use crate::isa::wave::Wave;
use crate::kernels::Fault;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atomic {
    Swap,
    CmpSwap,
    Add,
    Sub,
    SMin,
    UMin,
    SMax,
    UMax,
    And,
    Or,
    Xor,
    Inc,
    Dec,
    AddF32,
    PkAddF16,
    AddF64,
    MinF64,
    MaxF64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOp {
    /// `bytes` (1, 2, 4, 8, 12, 16); `sign` extends sub-dword loads; `d16` loads into one half
    /// of the destination (`Some(true)` the high half), keeping the other.
    Load {
        bytes: u8,
        sign: bool,
        d16: Option<bool>,
    },
    /// `hi`: store the high 16 bits of the data (`*_d16_hi`).
    Store {
        bytes: u8,
        hi: bool,
    },
    Atomic {
        op: Atomic,
        wide: bool,
    },
}

pub fn classify(op: u16) -> Option<MemOp> {
    use Atomic::*;
    let load = |bytes, sign, d16| Some(MemOp::Load { bytes, sign, d16 });
    let store = |bytes, hi| Some(MemOp::Store { bytes, hi });
    let at = |op, wide| Some(MemOp::Atomic { op, wide });
    match op {
        0x10 => load(1, false, None),
        0x11 => load(1, true, None),
        0x12 => load(2, false, None),
        0x13 => load(2, true, None),
        0x14 => load(4, false, None),
        0x15 => load(8, false, None),
        0x16 => load(12, false, None),
        0x17 => load(16, false, None),
        0x18 => store(1, false),
        0x19 => store(1, true),
        0x1a => store(2, false),
        0x1b => store(2, true),
        0x1c => store(4, false),
        0x1d => store(8, false),
        0x1e => store(12, false),
        0x1f => store(16, false),
        0x20 => load(1, false, Some(false)),
        0x21 => load(1, false, Some(true)),
        0x22 => load(1, true, Some(false)),
        0x23 => load(1, true, Some(true)),
        0x24 => load(2, false, Some(false)),
        0x25 => load(2, false, Some(true)),
        0x40..=0x4c | 0x60..=0x6c => {
            let k = [Swap, CmpSwap, Add, Sub, SMin, UMin, SMax, UMax, And, Or, Xor, Inc, Dec]
                [usize::from(op & 0xf)];
            at(k, op >= 0x60)
        }
        0x4d => at(AddF32, false),
        0x4e => at(PkAddF16, false),
        0x4f => at(AddF64, true),
        0x50 => at(MinF64, true),
        0x51 => at(MaxF64, true),
        _ => None,
    }
}

/// The new memory value of an atomic (`cmp` is used by CmpSwap only).
pub fn apply(op: Atomic, wide: bool, old: u64, data: u64, cmp: u64) -> u64 {
    use Atomic::*;
    let mask = if wide { u64::MAX } else { 0xffff_ffff };
    let (o, d) = (old & mask, data & mask);
    let signed = |x: u64| if wide { x as i64 } else { i64::from(x as u32 as i32) };
    let r = match op {
        Swap => d,
        CmpSwap => {
            if o == cmp & mask {
                d
            } else {
                o
            }
        }
        Add => o.wrapping_add(d),
        Sub => o.wrapping_sub(d),
        SMin => {
            if signed(o) < signed(d) {
                o
            } else {
                d
            }
        }
        UMin => o.min(d),
        SMax => {
            if signed(o) > signed(d) {
                o
            } else {
                d
            }
        }
        UMax => o.max(d),
        And => o & d,
        Or => o | d,
        Xor => o ^ d,
        Inc => {
            if o >= d {
                0
            } else {
                o + 1
            }
        }
        Dec => {
            if o == 0 || o > d {
                d
            } else {
                o - 1
            }
        }
        AddF32 => u64::from((f32::from_bits(o as u32) + f32::from_bits(d as u32)).to_bits()),
        PkAddF16 => {
            let h = |x: u64, s: u32| crate::isa::fp16::f16_to_f32((x >> s) as u16);
            let lo = crate::isa::fp16::f32_to_f16(h(o, 0) + h(d, 0));
            let hi = crate::isa::fp16::f32_to_f16(h(o, 16) + h(d, 16));
            u64::from(lo) | u64::from(hi) << 16
        }
        AddF64 => (f64::from_bits(o) + f64::from_bits(d)).to_bits(),
        MinF64 => f64::from_bits(o).min(f64::from_bits(d)).to_bits(),
        MaxF64 => f64::from_bits(o).max(f64::from_bits(d)).to_bits(),
    };
    r & mask
}

/// Where one lane's access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Global(u64),
    Lds(u32),
    Private(u32),
    /// Out of a buffer's range: loads read 0, stores and atomics are dropped.
    Discard,
}

/// A flat address: LDS or private inside their apertures, else global.
pub fn flat_place(addr: u64, c: &Ctx) -> Place {
    let a = c.apertures;
    if addr >= a.shared && addr - a.shared < 1 << 32 {
        Place::Lds((addr - a.shared) as u32)
    } else if addr >= a.private && addr - a.private < 1 << 32 {
        Place::Private((addr - a.private) as u32)
    } else {
        Place::Global(addr)
    }
}

pub fn read(w: &mut Wave, c: &Ctx, l: usize, p: Place, buf: &mut [u8]) -> Result<(), Fault> {
    match p {
        Place::Global(a) => c.mem.read(a, buf),
        Place::Lds(a) => {
            c.lds.read(a, buf);
            Ok(())
        }
        Place::Private(a) => {
            let m = w.private_mut(l);
            let s = a as usize;
            match m.get(s..s + buf.len()) {
                Some(src) => buf.copy_from_slice(src),
                None => buf.fill(0),
            }
            Ok(())
        }
        Place::Discard => {
            buf.fill(0);
            Ok(())
        }
    }
}

pub fn write(w: &mut Wave, c: &mut Ctx, l: usize, p: Place, data: &[u8]) -> Result<(), Fault> {
    match p {
        Place::Global(a) => c.mem.write(a, data),
        Place::Lds(a) => {
            c.lds.write(a, data);
            Ok(())
        }
        Place::Private(a) => {
            let m = w.private_mut(l);
            let s = a as usize;
            if let Some(dst) = m.get_mut(s..s + data.len()) {
                dst.copy_from_slice(data);
            }
            Ok(())
        }
        Place::Discard => Ok(()),
    }
}

/// The registers of a memory instruction: loads write `dst`, stores and atomics read `data`,
/// atomics return the old value into `dst` when `ret` (glc).
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pub dst: u16,
    pub data: u16,
    pub ret: bool,
}

/// The register value of a sub-dword load (memory or LDS): `bytes` (1 or 2, little-endian)
/// zero- or sign-extended (`sign`) into the whole register (`d16` None), or into its low
/// (`Some(false)`) or high (`Some(true)`) half. A `d16` load does not keep the register's other
/// half: it is zeroed. The emulated MI200/MI300 report SRAM ECC on (`gfx90a:sramecc+`), and with
/// it D16 loads do not preserve the unused bits (LLVM: `d16PreservesUnusedBits()` is false
/// when SRAMECC is enabled, so hipcc combines two halves with `v_perm` there, not with
/// `*_d16_hi`); Tensile's half-precision GEMM kernels load two halves with
/// `buffer_load_short_d16` and `buffer_load_short_d16_hi` into two registers and `v_or` them,
/// which needs the zeros (rocBLAS f16 gemm_small gave -90.375 where the CPU gives -90).
pub fn subdword(bytes: &[u8], sign: bool, d16: Option<bool>) -> u32 {
    let v = match (bytes, sign) {
        ([b], false) => u32::from(*b),
        ([b], true) => *b as i8 as i32 as u32,
        ([lo, hi, ..], false) => u32::from(u16::from_le_bytes([*lo, *hi])),
        ([lo, hi, ..], true) => i16::from_le_bytes([*lo, *hi]) as i32 as u32,
        ([], _) => 0,
    };
    match d16 {
        None => v,
        Some(false) => v & 0xffff,
        Some(true) => v << 16,
    }
}

/// Performs `op` for lane `l` at `p`.
pub fn access(
    w: &mut Wave,
    c: &mut Ctx,
    l: usize,
    p: Place,
    op: MemOp,
    r: Regs,
) -> Result<(), ExecError> {
    let Regs { dst, data, ret } = r;
    match op {
        MemOp::Load { bytes, sign, d16 } => {
            let mut b = [0u8; 16];
            let n = usize::from(bytes);
            read(w, c, l, p, &mut b[..n])?;
            if n >= 4 {
                for k in 0..n / 4 {
                    w.set_reg(
                        dst + k as u16,
                        l,
                        u32::from_le_bytes(b[k * 4..k * 4 + 4].try_into().expect("4 bytes")),
                    );
                }
            } else {
                let v = subdword(&b[..n], sign, d16);
                w.set_reg(dst, l, v);
            }
        }
        MemOp::Store { bytes, hi } => {
            let n = usize::from(bytes);
            let mut b = [0u8; 16];
            for k in 0..n.div_ceil(4) {
                b[k * 4..k * 4 + 4].copy_from_slice(&w.reg(data + k as u16, l).to_le_bytes());
            }
            if hi {
                let v = w.reg(data, l) >> 16;
                b[..4].copy_from_slice(&v.to_le_bytes());
            }
            write(w, c, l, p, &b[..n])?;
        }
        MemOp::Atomic { op, wide } => {
            let n = if wide { 8 } else { 4 };
            let get = |w: &Wave, r: u16| {
                if wide {
                    u64::from(w.reg(r, l)) | u64::from(w.reg(r + 1, l)) << 32
                } else {
                    u64::from(w.reg(r, l))
                }
            };
            let d = get(w, data);
            let cmp =
                if op == Atomic::CmpSwap { get(w, data + if wide { 2 } else { 1 }) } else { 0 };
            let old = if let Place::Global(a) = p {
                // Global memory is shared with the other interpreter threads and the host.
                c.mem.atomic(a, wide, |old| apply(op, wide, old, d, cmp))?
            } else {
                let mut b = [0u8; 8];
                read(w, c, l, p, &mut b[..n])?;
                let old = u64::from_le_bytes(b);
                write(w, c, l, p, &apply(op, wide, old, d, cmp).to_le_bytes()[..n])?;
                old
            };
            if ret {
                w.set_reg(dst, l, old as u32);
                if wide {
                    w.set_reg(dst + 1, l, (old >> 32) as u32);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdword_loads_extend_and_d16_zeroes_the_other_half() {
        assert_eq!(subdword(&[0x80], false, None), 0x80);
        assert_eq!(subdword(&[0x80], true, None), 0xffff_ff80);
        assert_eq!(subdword(&[0x34, 0x92], false, None), 0x9234);
        assert_eq!(subdword(&[0x34, 0x92], true, None), 0xffff_9234);
        assert_eq!(subdword(&[0x34, 0x12], false, Some(false)), 0x0000_1234);
        assert_eq!(subdword(&[0x34, 0x12], false, Some(true)), 0x1234_0000);
        assert_eq!(
            subdword(&[0xff], true, Some(false)),
            0x0000_ffff,
            "the sign fills only its half"
        );
        assert_eq!(
            subdword(&[0xff], true, Some(true)),
            0xffff_0000,
            "the sign fills only its half"
        );
    }

    #[test]
    fn atomics() {
        assert_eq!(apply(Atomic::Inc, false, 5, 5, 0), 0);
        assert_eq!(apply(Atomic::Inc, false, 4, 5, 0), 5);
        assert_eq!(apply(Atomic::Dec, false, 0, 7, 0), 7);
        assert_eq!(apply(Atomic::SMin, false, 0xffff_ffff, 1, 0), 0xffff_ffff);
        assert_eq!(apply(Atomic::CmpSwap, false, 3, 9, 3), 9);
        assert_eq!(apply(Atomic::CmpSwap, false, 4, 9, 3), 4);
        assert_eq!(
            apply(Atomic::AddF64, true, 1.5f64.to_bits(), 2.0f64.to_bits(), 0),
            3.5f64.to_bits()
        );
        assert_eq!(classify(0x14), Some(MemOp::Load { bytes: 4, sign: false, d16: None }));
        assert_eq!(classify(0x62), Some(MemOp::Atomic { op: Atomic::Add, wide: true }));
    }
}
