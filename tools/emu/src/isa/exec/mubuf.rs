//! MUBUF (untyped buffer) instructions. The buffer resource (V#, four SGPRs): base [47:0],
//! stride [61:48], num_records (dword 2), swizzle/add_tid bits (dword 3). Address per lane:
//! base + soffset + offset + (offen: the VGPR offset) + (idxen: the VGPR index * stride), in
//! range when the offset, soffset included (raw buffers), or the index (strided ones) is below
//! num_records. Multi-dword loads and stores of raw buffers are range-checked per dword (a
//! dwordx4 that runs past num_records reads zeros / writes nothing for its dwords beyond it).
//! Out of range, loads read 0 and stores and atomics are dropped. Tensile's GEMM kernels rely
//! on both: they step through the rows of A and B with soffset and let the range check zero
//! the rows past the matrix (rocBLAS's NaN guard bytes past its buffers showed as NaN results
//! when soffset was left out).
//!
//! The private segment buffer the dispatch gives a wave (its s[0:3]) has its base at
//! `Apertures::private_buffer`; an access through it goes to the lane's private memory at the per-lane
//! offset soffset / 64 + VGPR offset + offset (the swizzled scratch layout puts a lane's
//! consecutive dwords 64 dwords apart, so a wave-level soffset is 64 times a lane offset).

use super::vmem::{self, Place};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::mubuf as o;
use crate::isa::decode::Inst;
use crate::isa::operand::Ty;
use crate::isa::wave::Wave;

pub fn mubuf(op: u16) -> Option<Handler> {
    match op {
        o::BUFFER_WBL2 | o::BUFFER_INVL2 | o::BUFFER_WBINVL1 | o::BUFFER_WBINVL1_VOL => {
            Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next))
        }
        _ => vmem::classify(op).map(|_| run as Handler),
    }
}

/// The buffer resource named by `i.src[2]` and the wave-level offsets, resolved once per
/// instruction.
struct Resource {
    base: u64,
    stride: u64,
    num_records: u64,
    soffset: u64,
    private: bool,
}

impl Resource {
    fn new(w: &Wave, i: &Inst, c: &Ctx) -> Resource {
        let r = i.src[2] & 127;
        let d0 = w.s[usize::from(r)];
        let d1 = w.s[usize::from((r + 1) & 127)];
        let base = u64::from(d0) | u64::from(d1 & 0xffff) << 32;
        Resource {
            base,
            stride: u64::from((d1 >> 16) & 0x3fff),
            num_records: u64::from(w.s[usize::from((r + 2) & 127)]),
            soffset: w.sread(i.src[3], 0, Ty::B32, &c.apertures),
            private: base >= c.apertures.private_buffer
                && base - c.apertures.private_buffer < 1 << 32,
        }
    }

    /// Where lane `l`'s access lands.
    fn place(&self, w: &Wave, i: &Inst, c: &Ctx, l: usize) -> Place {
        let (mut index, mut voff) = (0u64, 0u64);
        match (i.idxen, i.offen) {
            (true, true) => {
                index = u64::from(w.reg(i.src[0], l));
                voff = u64::from(w.reg(i.src[0] + 1, l));
            }
            (true, false) => index = u64::from(w.reg(i.src[0], l)),
            (false, true) => voff = u64::from(w.reg(i.src[0], l)),
            _ => {}
        }
        let offset = voff + i.imm as u64;
        if self.private {
            return Place::Private(
                (self.base - c.apertures.private_buffer + self.soffset / 64 + offset) as u32,
            );
        }
        let in_range = if self.stride == 0 {
            self.soffset + offset < self.num_records
        } else {
            index < self.num_records
        };
        if in_range {
            Place::Global(self.base + self.soffset + offset + index * self.stride)
        } else {
            Place::Discard
        }
    }
}

fn run(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    if i.lds {
        return Err(ExecError::Unimplemented);
    }
    let op = vmem::classify(i.op).ok_or(ExecError::Unimplemented)?;
    let res = Resource::new(w, i, c);
    // A raw buffer's multi-dword load or store: one dword at a time, each checked on its own.
    let per_dword = match op {
        vmem::MemOp::Load { bytes, .. } | vmem::MemOp::Store { bytes, hi: false }
            if bytes > 4 && res.stride == 0 && !res.private =>
        {
            Some(bytes / 4)
        }
        _ => None,
    };
    let mut j = per_dword.map(|_| i.clone());
    for l in super::valu::lanes(w.exec()) {
        if let (Some(n), Some(j)) = (per_dword, j.as_mut()) {
            for k in 0..n {
                j.imm = i.imm + 4 * i32::from(k);
                let place = res.place(w, j, c, l);
                let one = match op {
                    vmem::MemOp::Load { sign, d16, .. } => {
                        vmem::MemOp::Load { bytes: 4, sign, d16 }
                    }
                    _ => vmem::MemOp::Store { bytes: 4, hi: false },
                };
                let k = u16::from(k);
                vmem::access(
                    w,
                    c,
                    l,
                    place,
                    one,
                    vmem::Regs { dst: i.dst + k, data: i.src[1] + k, ret: i.glc },
                )?;
            }
            continue;
        }
        let place = res.place(w, i, c, l);
        vmem::access(w, c, l, place, op, vmem::Regs { dst: i.dst, data: i.src[1], ret: i.glc })?;
    }
    Ok(Step::Next)
}

/// A typed buffer format (MTBUF's `dfmt`/`nfmt`): components of `bits` bits each, and how
/// they read as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub comps: usize,
    pub bits: u32,
    pub nfmt: Nfmt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nfmt {
    Unorm,
    Snorm,
    Uscaled,
    Sscaled,
    Uint,
    Sint,
    Float,
}

impl Format {
    /// The format of `fmt` (`dfmt | nfmt << 4`): gfx9's BUF_DATA_FORMAT 1 8, 2 16, 3 8_8, 4 32,
    /// 5 16_16, 10 8_8_8_8, 11 32_32, 12 16_16_16_16, 13 32_32_32, 14 32_32_32_32 (the packed
    /// 10/11-bit formats and the invalid ones: None), BUF_NUM_FORMAT 0 unorm, 1 snorm, 2
    /// uscaled, 3 sscaled, 4 uint, 5 sint, 7 float (16- and 32-bit only); 32-bit components
    /// only as uint, sint or float.
    pub fn new(fmt: u8) -> Option<Format> {
        let (comps, bits) = match fmt & 0xf {
            1 => (1, 8),
            2 => (1, 16),
            3 => (2, 8),
            4 => (1, 32),
            5 => (2, 16),
            10 => (4, 8),
            11 => (2, 32),
            12 => (4, 16),
            13 => (3, 32),
            14 => (4, 32),
            _ => return None,
        };
        let nfmt = match fmt >> 4 {
            0 if bits < 32 => Nfmt::Unorm,
            1 if bits < 32 => Nfmt::Snorm,
            2 if bits < 32 => Nfmt::Uscaled,
            3 if bits < 32 => Nfmt::Sscaled,
            4 => Nfmt::Uint,
            5 => Nfmt::Sint,
            7 if bits >= 16 => Nfmt::Float,
            _ => return None,
        };
        Some(Format { comps, bits, nfmt })
    }

    fn float_like(self) -> bool {
        !matches!(self.nfmt, Nfmt::Uint | Nfmt::Sint)
    }

    fn sext(self, raw: u32) -> i32 {
        ((raw << (32 - self.bits)) as i32) >> (32 - self.bits)
    }

    /// A component's stored bits as the 32-bit register value a load gives.
    pub fn load(self, raw: u32) -> u32 {
        let max = ((1u64 << self.bits) - 1) as f64;
        let smax = ((1u64 << (self.bits - 1)) - 1) as f64;
        match self.nfmt {
            Nfmt::Unorm => (f64::from(raw) / max) as f32,
            Nfmt::Snorm => (f64::from(self.sext(raw)) / smax).max(-1.0) as f32,
            Nfmt::Uscaled => raw as f32,
            Nfmt::Sscaled => self.sext(raw) as f32,
            Nfmt::Uint => return raw,
            Nfmt::Sint => return self.sext(raw) as u32,
            Nfmt::Float if self.bits == 16 => crate::isa::fp16::f16_to_f32(raw as u16),
            Nfmt::Float => return raw,
        }
        .to_bits()
    }

    /// A 32-bit register value as the component's stored bits (norms clamp and round to
    /// nearest even; scaled and integer values saturate or truncate to the component).
    pub fn store(self, v: u32) -> u32 {
        let mask = ((1u64 << self.bits) - 1) as u32;
        let f = f32::from_bits(v);
        let rne = |x: f64| {
            let r = x.round();
            if (x - x.trunc()).abs() == 0.5 {
                2.0 * (x / 2.0).round()
            } else {
                r
            }
        };
        let smax = ((1u64 << (self.bits - 1)) - 1) as f64;
        match self.nfmt {
            Nfmt::Unorm => rne(f64::from(f).clamp(0.0, 1.0) * f64::from(mask)) as u32,
            Nfmt::Snorm => (rne(f64::from(f).clamp(-1.0, 1.0) * smax) as i32 as u32) & mask,
            Nfmt::Uscaled => (f64::from(f).clamp(0.0, f64::from(mask)) as u32) & mask,
            Nfmt::Sscaled => (f64::from(f).clamp(-smax - 1.0, smax) as i32 as u32) & mask,
            Nfmt::Uint | Nfmt::Sint => v & mask,
            Nfmt::Float if self.bits == 16 => u32::from(crate::isa::fp16::f32_to_f16(f)),
            Nfmt::Float => v,
        }
    }

    /// The value a load gives for a component the format lacks: 0 for x, y, z, 1 for w.
    fn default(self, comp: usize) -> u32 {
        match (comp, self.float_like()) {
            (3, true) => 1.0f32.to_bits(),
            (3, false) => 1,
            _ => 0,
        }
    }
}

pub fn mtbuf(op: u16) -> Option<Handler> {
    (op < 16).then_some(typed as Handler)
}

/// MTBUF: `tbuffer_{load,store}_format_{x,xy,xyz,xyzw}` (ops 0-7) and their `d16` forms (8-15,
/// two 16-bit values per register: f16 for float-like formats, the low 16 bits of integers),
/// converting between the instruction's format in memory and 32-bit (16-bit) register values.
fn typed(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let fmt = Format::new(i.fmt).ok_or(ExecError::Unimplemented)?;
    let store = i.op & 4 != 0;
    let d16 = i.op & 8 != 0;
    let n = usize::from(i.op & 3) + 1;
    let bytes = fmt.comps * fmt.bits as usize / 8;
    let half_float = fmt.nfmt == Nfmt::Float && fmt.bits == 16;
    let res = Resource::new(w, i, c);
    for l in super::valu::lanes(w.exec()) {
        let place = res.place(w, i, c, l);
        let mut b = [0u8; 16];
        // Component k's bits at bit k * bits of the element (little-endian).
        let get = |b: &[u8; 16], k: usize| {
            ((u128::from_le_bytes(*b) >> (k * fmt.bits as usize)) & ((1u128 << fmt.bits) - 1))
                as u32
        };
        if store {
            vmem::read(w, c, l, place, &mut b[..bytes])?;
            for k in 0..n.min(fmt.comps) {
                let stored = if d16 {
                    let h = (w.reg(i.src[1] + (k / 2) as u16, l) >> (16 * (k % 2))) & 0xffff;
                    if half_float {
                        h
                    } else if fmt.float_like() {
                        fmt.store(crate::isa::fp16::f16_to_f32(h as u16).to_bits())
                    } else {
                        fmt.store(h)
                    }
                } else {
                    fmt.store(w.reg(i.src[1] + k as u16, l))
                };
                let bit = k * fmt.bits as usize;
                let mask = ((1u128 << fmt.bits) - 1) << bit;
                let all = u128::from_le_bytes(b);
                b = ((all & !mask) | (u128::from(stored) << bit)).to_le_bytes();
            }
            vmem::write(w, c, l, place, &b[..bytes])?;
        } else {
            vmem::read(w, c, l, place, &mut b[..bytes])?;
            let vals: Vec<u32> = (0..n)
                .map(|k| if k < fmt.comps { fmt.load(get(&b, k)) } else { fmt.default(k) })
                .collect();
            if d16 {
                for (k, v) in vals.iter().enumerate() {
                    let h = if half_float && k < fmt.comps {
                        get(&b, k) // f16 in memory and register: the bits as they are
                    } else if fmt.float_like() {
                        u32::from(crate::isa::fp16::f32_to_f16(f32::from_bits(*v)))
                    } else {
                        v & 0xffff
                    };
                    // A register whose high half no component fills gets zero there (D16
                    // loads do not keep the unused bits with SRAM ECC: see vmem::subdword).
                    let r = i.dst + (k / 2) as u16;
                    let old = if k % 2 == 0 { 0 } else { w.reg(r, l) & 0xffff };
                    w.set_reg(r, l, if k % 2 == 0 { h } else { old | h << 16 });
                }
            } else {
                for (k, v) in vals.iter().enumerate() {
                    w.set_reg(i.dst + k as u16, l, *v);
                }
            }
        }
    }
    Ok(Step::Next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_formats_convert_both_ways() {
        let f = |d: u8, n: u8| Format::new(d | n << 4).unwrap();
        let unorm8 = f(10, 0);
        assert_eq!((unorm8.comps, unorm8.bits), (4, 8));
        assert_eq!(f32::from_bits(unorm8.load(255)), 1.0);
        assert_eq!(f32::from_bits(unorm8.load(51)), 0.2);
        assert_eq!(unorm8.store(0.2f32.to_bits()), 51);
        assert_eq!(unorm8.store(7.0f32.to_bits()), 255);
        let snorm16 = f(2, 1);
        assert_eq!(f32::from_bits(snorm16.load(0x8000)), -1.0);
        assert_eq!(snorm16.store((-0.5f32).to_bits()), 0xc000);
        assert_eq!(f(5, 5).load(0xfffe), (-2i32) as u32);
        assert_eq!(f(3, 3).store((-3.0f32).to_bits()), 0xfd);
        assert_eq!(f32::from_bits(f(12, 7).load(0x3c00)), 1.0);
        assert_eq!(f(4, 7).load(0x4049_0fdb), 0x4049_0fdb);
        assert_eq!(Format::new(4), None, "32-bit unorm");
        assert_eq!(Format::new(6 | 7 << 4), None, "10_11_11 not implemented");
        assert_eq!(f(1, 0).default(3), 1.0f32.to_bits());
        assert_eq!(f(1, 4).default(3), 1);
    }
}
