//! Matrix fused multiply-add, `v_mfma_*` (CDNA2 ISA "Matrix Arithmetic Instructions"): one wave
//! computes `D = A x B + C` for `blocks` independent M x N x K products (M = N), with A, B, C
//! and D spread over the wave's lanes and registers.
//!
//! Layouts (the CDNA2 ISA's tables, as AMD's Matrix Instruction Calculator prints them for
//! every gfx90a opcode; the tests check each against a plain matrix multiply):
//!
//! - A[i][k] of block b: lane `i + M * (b + blocks * (k / E))`, element `k % E` of the lane's
//!   A registers, where E = M * K * blocks / 64 elements (of 8, 16, 32 or 64 bits) fill one
//!   lane, packed from bit 0 of the first register up. B[k][j] likewise with j for i.
//! - C/D[i][j] (32-bit results): for M = 4, register i of lane `4b + j`; otherwise, with G =
//!   64 / M lane groups and q = i / 4, register `b * M*M/64 + 4 * (q / G) + i % 4` of lane
//!   `j + M * (q % G)`. f64 results: register pair `2 * (i / 4)` of lane `j + M*b + 16 * (i % 4)`.
//!
//! Modifiers: `cbsz`/`abid` (multi-block opcodes) make every group of 2^cbsz blocks use A of
//! its block `abid`; `blgp` (all but f64) makes lane l read B from another lane (1: l % 32,
//! 2: 32 + l % 32, 3: (l + 16) % 64, 4-7: 16 * (blgp - 4) + l % 16). Values the hardware does
//! not define (cbsz on single-block opcodes, abid >= 2^cbsz, any of them on f64 opcodes) stop
//! the dispatch as not implemented.
//!
//! Arithmetic: f32, f16 and bf16 inputs are exact in f32; each D[i][j] is C[i][j] updated by one
//! f32 fused multiply-add per k in order (f64: f64 fmas; i8: wrapping i32 sums). The
//! hardware's internal summation order is not documented, so the last bit of a float result
//! can differ from a GPU's. The instruction reads and writes every lane: EXEC does not mask it.

use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::vop3p as p;
use crate::isa::decode::{Inst, Mai};
use crate::isa::operand::{self, Ty};
use crate::isa::wave::{Wave, LANES};

/// The element type of A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum In {
    F32,
    F16,
    Bf16,
    I8,
    F64,
}

impl In {
    pub fn bits(self) -> usize {
        match self {
            In::F32 => 32,
            In::F16 | In::Bf16 => 16,
            In::I8 => 8,
            In::F64 => 64,
        }
    }
}

/// An MFMA opcode's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub m: usize,
    pub k: usize,
    pub blocks: usize,
    pub ty: In,
}

impl Shape {
    /// Elements of A (and of B) one lane holds.
    pub fn per_lane(&self) -> usize {
        self.m * self.k * self.blocks / LANES
    }

    /// Registers of A (and of B) per lane.
    pub fn ab_regs(&self) -> usize {
        (self.per_lane() * self.ty.bits()).div_ceil(32)
    }

    /// Registers of C (and of D) per lane.
    pub fn cd_regs(&self) -> usize {
        self.m * self.m * self.blocks / LANES * if self.ty == In::F64 { 2 } else { 1 }
    }

    /// Lane and element of A[i][k] of block b (of B[k][j] with j for i).
    pub fn ab_at(&self, i: usize, k: usize, b: usize) -> (usize, usize) {
        let e = self.per_lane();
        (i + self.m * (b + self.blocks * (k / e)), k % e)
    }

    /// Register (the first of a pair for f64) and lane of C/D[i][j] of block b.
    pub fn cd_at(&self, i: usize, j: usize, b: usize) -> (usize, usize) {
        if self.ty == In::F64 {
            return (2 * (i / 4), j + self.m * b + 16 * (i % 4));
        }
        if self.m == 4 {
            return (i, j + 4 * b);
        }
        let g = LANES / self.m;
        let q = i / 4;
        (b * (self.m * self.m / LANES) + 4 * (q / g) + i % 4, j + self.m * (q % g))
    }
}

/// The dimensions of MFMA opcode `op` (VOP3P numbering).
pub fn shape(op: u16) -> Option<Shape> {
    let s = |m, k, blocks, ty| Some(Shape { m, k, blocks, ty });
    match op {
        p::V_MFMA_F32_32X32X1F32 => s(32, 1, 2, In::F32),
        p::V_MFMA_F32_16X16X1F32 => s(16, 1, 4, In::F32),
        p::V_MFMA_F32_4X4X1F32 => s(4, 1, 16, In::F32),
        p::V_MFMA_F32_32X32X2F32 => s(32, 2, 1, In::F32),
        p::V_MFMA_F32_16X16X4F32 => s(16, 4, 1, In::F32),
        p::V_MFMA_F32_32X32X4F16 => s(32, 4, 2, In::F16),
        p::V_MFMA_F32_16X16X4F16 => s(16, 4, 4, In::F16),
        p::V_MFMA_F32_4X4X4F16 => s(4, 4, 16, In::F16),
        p::V_MFMA_F32_32X32X8F16 => s(32, 8, 1, In::F16),
        p::V_MFMA_F32_16X16X16F16 => s(16, 16, 1, In::F16),
        p::V_MFMA_I32_32X32X4I8 => s(32, 4, 2, In::I8),
        p::V_MFMA_I32_16X16X4I8 => s(16, 4, 4, In::I8),
        p::V_MFMA_I32_4X4X4I8 => s(4, 4, 16, In::I8),
        p::V_MFMA_I32_32X32X8I8 => s(32, 8, 1, In::I8),
        p::V_MFMA_I32_16X16X16I8 => s(16, 16, 1, In::I8),
        p::V_MFMA_F32_32X32X4BF16_1K => s(32, 4, 2, In::Bf16),
        p::V_MFMA_F32_16X16X4BF16_1K => s(16, 4, 4, In::Bf16),
        p::V_MFMA_F32_4X4X4BF16_1K => s(4, 4, 16, In::Bf16),
        p::V_MFMA_F32_32X32X8BF16_1K => s(32, 8, 1, In::Bf16),
        p::V_MFMA_F32_16X16X16BF16_1K => s(16, 16, 1, In::Bf16),
        p::V_MFMA_F32_32X32X2BF16 => s(32, 2, 2, In::Bf16),
        p::V_MFMA_F32_16X16X2BF16 => s(16, 2, 4, In::Bf16),
        p::V_MFMA_F32_4X4X2BF16 => s(4, 2, 16, In::Bf16),
        p::V_MFMA_F32_32X32X4BF16 => s(32, 4, 1, In::Bf16),
        p::V_MFMA_F32_16X16X8BF16 => s(16, 8, 1, In::Bf16),
        p::V_MFMA_F64_16X16X4F64 => s(16, 4, 1, In::F64),
        p::V_MFMA_F64_4X4X4F64 => s(4, 4, 4, In::F64),
        _ => None,
    }
}

/// The lane `blgp` makes lane `l` read B from.
pub fn blgp_lane(l: usize, blgp: u8) -> usize {
    match blgp {
        0 => l,
        1 => l % 32,
        2 => 32 + l % 32,
        3 => (l + 16) % LANES,
        _ => 16 * usize::from(blgp - 4) + l % 16,
    }
}

/// The handler of an MFMA opcode.
pub fn mfma(op: u16) -> Option<Handler> {
    let s = shape(op)?;
    Some(match s.ty {
        In::F32 | In::F16 | In::Bf16 => |w: &mut Wave, i: &Inst, c: &mut Ctx| run::<f32>(w, i, c),
        In::I8 => |w: &mut Wave, i: &Inst, c: &mut Ctx| run::<i32>(w, i, c),
        In::F64 => |w: &mut Wave, i: &Inst, c: &mut Ctx| run::<f64>(w, i, c),
    })
}

/// An accumulator type: f32 (f32, f16 and bf16 inputs), i32 (i8 inputs) or f64.
trait Acc: Copy + Default {
    /// The type C and D are read as.
    const TY: Ty;
    /// An input element's bits as this type.
    fn input(ty: In, bits: u64) -> Self;
    fn from_bits(bits: u64) -> Self;
    fn to_bits(self) -> u64;
    /// `self + a * b`.
    fn mac(self, a: Self, b: Self) -> Self;
}

impl Acc for f32 {
    const TY: Ty = Ty::F32;
    fn input(ty: In, bits: u64) -> f32 {
        match ty {
            In::F16 => crate::isa::fp16::f16_to_f32(bits as u16),
            In::Bf16 => f32::from_bits((bits as u32 & 0xffff) << 16),
            _ => f32::from_bits(bits as u32),
        }
    }
    fn from_bits(bits: u64) -> f32 {
        f32::from_bits(bits as u32)
    }
    fn to_bits(self) -> u64 {
        u64::from(f32::to_bits(self))
    }
    fn mac(self, a: f32, b: f32) -> f32 {
        a.mul_add(b, self)
    }
}

impl Acc for i32 {
    const TY: Ty = Ty::B32;
    fn input(_: In, bits: u64) -> i32 {
        i32::from(bits as u8 as i8)
    }
    fn from_bits(bits: u64) -> i32 {
        bits as u32 as i32
    }
    fn to_bits(self) -> u64 {
        u64::from(self as u32)
    }
    fn mac(self, a: i32, b: i32) -> i32 {
        self.wrapping_add(a.wrapping_mul(b))
    }
}

impl Acc for f64 {
    const TY: Ty = Ty::F64;
    fn input(_: In, bits: u64) -> f64 {
        f64::from_bits(bits)
    }
    fn from_bits(bits: u64) -> f64 {
        f64::from_bits(bits)
    }
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
    fn mac(self, a: f64, b: f64) -> f64 {
        a.mul_add(b, self)
    }
}

/// Up to two consecutive registers of operand `code` in lane `l` (a scalar or constant operand
/// is the same in every lane).
fn read(w: &Wave, i: &Inst, c: &Ctx, code: u16, regs: usize, ty: Ty, l: usize) -> u64 {
    if code < operand::VGPR0 {
        return w.sread(code, i.literal, ty, &c.apertures);
    }
    let lo = u64::from(w.reg(code, l));
    if regs > 1 {
        lo | u64::from(w.reg(code + 1, l)) << 32
    } else {
        lo
    }
}

/// Checks the broadcast fields against what the opcode defines.
fn modifiers(s: &Shape, m: Mai) -> Result<(), ExecError> {
    let broadcast_ok = m.cbsz == 0 && m.abid == 0
        || s.ty != In::F64
            && s.blocks > 1
            && (1usize << m.cbsz) <= s.blocks
            && usize::from(m.abid) < 1 << m.cbsz;
    if !broadcast_ok || (s.ty == In::F64 && m.blgp != 0) {
        return Err(ExecError::Unimplemented);
    }
    Ok(())
}

fn run<T: Acc>(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let s = shape(i.op).ok_or(ExecError::Unimplemented)?;
    let m = i.mai.unwrap_or(Mai { cbsz: 0, abid: 0, blgp: 0 });
    modifiers(&s, m)?;
    let (mm, kk, nb) = (s.m, s.k, s.blocks);
    let (e, bits, regs) = (s.per_lane(), s.ty.bits(), s.ab_regs());
    let in_ty = if s.ty == In::F64 { Ty::F64 } else { Ty::B32 };
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    // A as a[b][i][k] and B as bm[b][j][k] (k innermost for the dot products).
    let mut a = vec![T::default(); nb * mm * kk];
    let mut bm = vec![T::default(); nb * mm * kk];
    for l in 0..LANES {
        let (row, g) = (l % mm, l / mm);
        let (b, kg) = (g % nb, g / nb);
        let va = read(w, i, c, i.src[0], regs, in_ty, l);
        let vb = read(w, i, c, i.src[1], regs, in_ty, blgp_lane(l, m.blgp));
        for x in 0..e {
            let k = kg * e + x;
            a[(b * mm + row) * kk + k] = T::input(s.ty, (va >> (x * bits)) & mask);
            bm[(b * mm + row) * kk + k] = T::input(s.ty, (vb >> (x * bits)) & mask);
        }
    }
    let wide = s.ty == In::F64;
    let cregs = if wide { 2 } else { 1 };
    let mut d = vec![T::default(); nb * mm * mm];
    for b in 0..nb {
        let ab = (b >> m.cbsz << m.cbsz) + usize::from(m.abid);
        for r in 0..mm {
            let arow = &a[(ab * mm + r) * kk..(ab * mm + r + 1) * kk];
            for col in 0..mm {
                let bcol = &bm[(b * mm + col) * kk..(b * mm + col + 1) * kk];
                let (reg, l) = s.cd_at(r, col, b);
                let code = if i.src[2] < operand::VGPR0 { i.src[2] } else { i.src[2] + reg as u16 };
                let mut acc = T::from_bits(read(w, i, c, code, cregs, T::TY, l));
                for (x, y) in arow.iter().zip(bcol) {
                    acc = acc.mac(*x, *y);
                }
                d[(b * mm + r) * mm + col] = acc;
            }
        }
    }
    for b in 0..nb {
        for r in 0..mm {
            for col in 0..mm {
                let (reg, l) = s.cd_at(r, col, b);
                let v = d[(b * mm + r) * mm + col].to_bits();
                w.set_reg(i.dst + reg as u16, l, v as u32);
                if wide {
                    w.set_reg(i.dst + reg as u16 + 1, l, (v >> 32) as u32);
                }
            }
        }
    }
    Ok(Step::Next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every C/D element has its own register and lane, and every register and lane holds one.
    #[test]
    fn layouts_are_one_to_one() {
        for op in 0x40..0x70 {
            let Some(s) = shape(op) else { continue };
            let mut seen = vec![false; s.cd_regs() * LANES];
            for b in 0..s.blocks {
                for i in 0..s.m {
                    for j in 0..s.m {
                        let (r, l) = s.cd_at(i, j, b);
                        let step = if s.ty == In::F64 { 2 } else { 1 };
                        assert!(
                            r % step == 0 && r < s.cd_regs() && l < LANES,
                            "{op:#x} D[{i}][{j}].{b}"
                        );
                        assert!(
                            !std::mem::replace(&mut seen[r / step * LANES + l], true),
                            "{op:#x} D[{i}][{j}].{b} twice"
                        );
                    }
                }
            }
            assert_eq!(
                seen.iter().filter(|x| **x).count() * if s.ty == In::F64 { 2 } else { 1 },
                s.cd_regs() * LANES,
                "{op:#x}"
            );
            let mut ab = vec![false; LANES * s.per_lane()];
            for b in 0..s.blocks {
                for i in 0..s.m {
                    for k in 0..s.k {
                        let (l, e) = s.ab_at(i, k, b);
                        assert!(
                            !std::mem::replace(&mut ab[l * s.per_lane() + e], true),
                            "{op:#x} A[{i}][{k}].{b} twice"
                        );
                    }
                }
            }
            assert!(ab.iter().all(|x| *x), "{op:#x}: A leaves a lane element unused");
        }
    }

    #[test]
    fn blgp_patterns() {
        assert_eq!([0, 40].map(|l| blgp_lane(l, 1)), [0, 8]);
        assert_eq!([0, 40].map(|l| blgp_lane(l, 2)), [32, 40]);
        assert_eq!([0, 50].map(|l| blgp_lane(l, 3)), [16, 2]);
        assert_eq!([3, 63].map(|l| blgp_lane(l, 5)), [19, 31]);
        assert_eq!([3, 63].map(|l| blgp_lane(l, 7)), [51, 63]);
    }
}
