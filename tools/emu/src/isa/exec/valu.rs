//! The vector ALU's operand machinery, shared by every VOP opcode: reading a source for a lane
//! (register, scalar, inline constant or literal; SDWA selection; `abs`/`neg` on floats), the
//! DPP lane permutation and write masks, output modifiers (`omod`, `clamp`) and writing the
//! destination (32 or 64 bits, SDWA destination selection). An opcode's semantics is a pure
//! function of its lanes' source values ([`vop`]).

use super::{Ctx, ExecError, Step};
use crate::isa::decode::{Dpp, Family, Inst, Sdwa};
use crate::isa::operand::{self, Ty};
use crate::isa::wave::{Wave, LANES};

/// Where a source's bits come from, resolved once per instruction.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Const(u64),
    /// A 32-bit register: its lane 0 index in the VGPR (`false`) or AGPR (`true`) file.
    Lo(usize, bool),
    /// A 64-bit register pair.
    Pair(usize, bool),
}

/// One source operand, resolved for the instruction.
#[derive(Clone, Copy, Debug)]
pub struct Src {
    kind: Kind,
    /// Float modifiers as masks: `(bits & and) ^ xor`.
    and: u64,
    xor: u64,
    sel: Option<(u8, bool)>,
}

impl Src {
    /// Source `k` of `i` read as `ty`.
    #[inline(always)]
    pub fn new(w: &Wave, i: &Inst, k: usize, ty: Ty, ctx: &Ctx) -> Src {
        let code = i.src[k];
        // The common case first: a 32-bit VGPR with no modifier or selection.
        if (operand::VGPR0..operand::AGPR0).contains(&code)
            && !ty.is64()
            && (i.abs | i.neg | i.op_sel) == 0
            && i.sdwa.is_none()
        {
            let r = usize::from(code - operand::VGPR0);
            if (r + 1) * LANES <= w.v.len() {
                return Src { kind: Kind::Lo(r * LANES, false), and: u64::MAX, xor: 0, sel: None };
            }
        }
        Src::general(w, i, k, ty, ctx)
    }

    fn general(w: &Wave, i: &Inst, k: usize, ty: Ty, ctx: &Ctx) -> Src {
        let code = i.src[k];
        let kind = if code < operand::VGPR0 {
            Kind::Const(w.sread(code, i.literal, ty, &ctx.apertures))
        } else {
            let agpr = operand::is_agpr(code);
            let r = usize::from(code - if agpr { operand::AGPR0 } else { operand::VGPR0 });
            let file = if agpr { w.a.len() } else { w.v.len() } / LANES;
            let need = if ty.is64() { r + 2 } else { r + 1 };
            if need > file {
                Kind::Const(0) // a register the wave does not have reads 0
            } else if ty.is64() {
                Kind::Pair(r * LANES, agpr)
            } else {
                Kind::Lo(r * LANES, agpr)
            }
        };
        let sign = match ty {
            Ty::F32 => 1u64 << 31,
            Ty::F64 => 1u64 << 63,
            Ty::F16 => 1u64 << 15,
            _ => 0,
        };
        let and = if i.abs >> k & 1 == 1 { !sign } else { u64::MAX };
        let xor = if i.neg >> k & 1 == 1 { sign } else { 0 };
        let sel = i.sdwa.filter(|_| k < 2).map(|s: Sdwa| (s.src_sel[k], s.sext[k])).or_else(|| {
            // VOP3 16-bit operands: op_sel picks a source's high half.
            (i.family == Family::Vop3 && matches!(ty, Ty::F16 | Ty::B16) && i.op_sel >> k & 1 == 1)
                .then_some((5, false))
        });
        Src { kind, and, xor, sel }
    }

    /// The raw bits in lane `l`, before modifiers.
    #[inline(always)]
    pub fn raw(&self, w: &Wave, l: usize) -> u64 {
        match self.kind {
            Kind::Const(x) => x,
            Kind::Lo(b, false) => u64::from(w.v[b + l]),
            Kind::Lo(b, true) => u64::from(w.a[b + l]),
            Kind::Pair(b, false) => u64::from(w.v[b + l]) | u64::from(w.v[b + LANES + l]) << 32,
            Kind::Pair(b, true) => u64::from(w.a[b + l]) | u64::from(w.a[b + LANES + l]) << 32,
        }
    }

    /// The value in lane `l`, with SDWA selection and float modifiers applied.
    #[inline(always)]
    pub fn get(&self, w: &Wave, l: usize) -> u64 {
        let mut v = self.raw(w, l);
        if let Some((sel, sext)) = self.sel {
            v = u64::from(select(v as u32, sel, sext));
        }
        (v & self.and) ^ self.xor
    }

    #[inline(always)]
    fn modify(&self, v: u64) -> u64 {
        (v & self.and) ^ self.xor
    }

    /// All 64 lanes' values (inactive lanes too: they are computed and not written).
    #[inline(always)]
    pub fn fill(&self, w: &Wave, out: &mut [u64; LANES]) {
        match self.kind {
            Kind::Const(x) => out.fill(x),
            Kind::Lo(b, agpr) => {
                let f = if agpr { &w.a[b..b + LANES] } else { &w.v[b..b + LANES] };
                for (o, x) in out.iter_mut().zip(f) {
                    *o = u64::from(*x);
                }
            }
            Kind::Pair(b, agpr) => {
                let f = if agpr { &w.a[b..b + 2 * LANES] } else { &w.v[b..b + 2 * LANES] };
                let (lo, hi) = f.split_at(LANES);
                if self.sel.is_none() {
                    // The float modifiers with the join (wide where the CPU has it).
                    crate::sys::cpu::join_lanes(lo, hi, self.and, self.xor, out);
                    return;
                }
                crate::sys::cpu::join_lanes(lo, hi, u64::MAX, 0, out);
            }
        }
        if let Some((sel, sext)) = self.sel {
            // `select` with its field resolved once: one shift pair per lane.
            let (shift, bits) = match sel {
                0..=3 => (u32::from(sel) * 8, 8),
                4 | 5 => (u32::from(sel - 4) * 16, 16),
                _ => (0, 32),
            };
            if bits < 32 {
                let up = 32 - shift - bits;
                let down = 32 - bits;
                if sext {
                    for o in out.iter_mut() {
                        *o = u64::from((((*o as u32) << up) as i32 >> down) as u32);
                    }
                } else {
                    for o in out.iter_mut() {
                        *o = u64::from(((*o as u32) << up) >> down);
                    }
                }
            }
        }
        if self.and != u64::MAX || self.xor != 0 {
            for o in out.iter_mut() {
                *o = (*o & self.and) ^ self.xor;
            }
        }
    }
}

/// SDWA source selection: byte 0-3, word 0-1, or the dword; sign- or zero-extended.
pub fn select(v: u32, sel: u8, sext: bool) -> u32 {
    let (shift, bits) = match sel {
        0..=3 => (u32::from(sel) * 8, 8),
        4 | 5 => (u32::from(sel - 4) * 16, 16),
        _ => return v,
    };
    let x = (v >> shift) & ((1 << bits) - 1);
    if sext {
        (((x << (32 - bits)) as i32) >> (32 - bits)) as u32
    } else {
        x
    }
}

/// Active lanes of a mask, lowest first.
#[inline]
pub fn lanes(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(l)
    })
}

/// The lane DPP reads src0 from for lane `l`, or None when out of range.
pub fn dpp_source(d: &Dpp, l: usize) -> Option<usize> {
    let row = l & !15;
    let c = usize::from(d.ctrl);
    match c {
        0x000..=0x0ff => Some((l & !3) | ((c >> (2 * (l & 3))) & 3)),
        0x101..=0x10f => {
            let s = l + (c & 15);
            (s < row + 16).then_some(s)
        }
        0x111..=0x11f => (l & 15).checked_sub(c & 15).map(|x| row + x),
        0x121..=0x12f => Some(row + ((l & 15) + 16 - (c & 15)) % 16),
        0x130 => (l + 1 < LANES).then_some(l + 1),
        0x134 => Some((l + 1) % LANES),
        0x138 => l.checked_sub(1),
        0x13c => Some((l + LANES - 1) % LANES),
        0x140 => Some(row + 15 - (l & 15)),
        0x141 => Some((l & !7) + 7 - (l & 7)),
        0x142 => (row >= 16).then(|| row - 1),
        0x143 => (row >= 32).then_some(31),
        _ => None,
    }
}

/// Lanes DPP's row and bank masks let write.
pub fn dpp_write_mask(d: &Dpp) -> u64 {
    let mut m = 0u64;
    for l in 0..LANES {
        if d.row_mask >> (l / 16) & 1 == 1 && d.bank_mask >> ((l % 16) / 4) & 1 == 1 {
            m |= 1 << l;
        }
    }
    m
}

/// Output modifiers of a float result: `omod` (x2, x4, /2), then `clamp` to [0, 1].
pub fn out_mod(i: &Inst, ty: Ty, v: u64) -> u64 {
    if i.omod == 0 && !i.clamp {
        return v;
    }
    match ty {
        Ty::F32 => {
            let mut x = f32::from_bits(v as u32);
            x *= [1.0, 2.0, 4.0, 0.5][usize::from(i.omod & 3)];
            if i.clamp {
                x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
            }
            u64::from(x.to_bits())
        }
        Ty::F64 => {
            let mut x = f64::from_bits(v);
            x *= [1.0, 2.0, 4.0, 0.5][usize::from(i.omod & 3)];
            if i.clamp {
                x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
            }
            x.to_bits()
        }
        Ty::F16 => {
            let mut x = crate::isa::fp16::f16_to_f32(v as u16);
            x *= [1.0, 2.0, 4.0, 0.5][usize::from(i.omod & 3)];
            if i.clamp {
                x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
            }
            u64::from(crate::isa::fp16::f32_to_f16(x))
        }
        _ => v,
    }
}

/// Writes lane `l` of a vector destination: 64-bit values to a register pair, 32-bit ones
/// through SDWA's destination selection when present.
#[inline]
pub fn write(w: &mut Wave, i: &Inst, ty: Ty, l: usize, v: u64) {
    if ty.is64() {
        w.set_reg(i.dst, l, v as u32);
        w.set_reg(i.dst + 1, l, (v >> 32) as u32);
        return;
    }
    let v = v as u32;
    if matches!(ty, Ty::F16 | Ty::B16) && i.sdwa.is_none() {
        // 16-bit results: the low half, the high half zeroed; VOP3 op_sel[3] writes the high
        // half instead and keeps the low one.
        let v = if i.family == Family::Vop3 && i.op_sel >> 3 & 1 == 1 {
            (w.reg(i.dst, l) & 0xffff) | (v << 16)
        } else {
            v & 0xffff
        };
        w.set_reg(i.dst, l, v);
        return;
    }
    let v = match i.sdwa {
        Some(s) if s.dst_sel < 6 => {
            let (shift, bits) = if s.dst_sel < 4 {
                (u32::from(s.dst_sel) * 8, 8)
            } else {
                (u32::from(s.dst_sel - 4) * 16, 16)
            };
            let field = (v & ((1 << bits) - 1)) << shift;
            let fmask = ((1u32 << bits) - 1) << shift;
            match s.dst_unused {
                2 => (w.reg(i.dst, l) & !fmask) | field,
                1 => {
                    // Sign-extend the field into the bits above it.
                    let top = field >> (shift + bits - 1) & 1;
                    let above = if shift + bits >= 32 { 0 } else { u32::MAX << (shift + bits) };
                    field | if top == 1 { above } else { 0 }
                }
                _ => field,
            }
        }
        _ => v,
    };
    w.set_reg(i.dst, l, v);
}

/// Runs a lane-wise operation: `f(sources, lane)` for every active lane (EXEC, and DPP's masks
/// and source lanes), results written to the destination of type `dty` with output modifiers.
///
/// Whole-wave loops: each source is read for all 64 lanes (SDWA selection and float modifiers
/// applied), DPP permutes src0's lanes, the operation runs on every lane (inactive ones are
/// computed and dropped), then the active lanes are written; the loops vectorise, and a plain
/// 32- or 64-bit VGPR destination is written as a block.
#[inline(always)]
pub fn vop(
    w: &mut Wave,
    i: &Inst,
    ctx: &mut Ctx,
    tys: &[Ty],
    dty: Ty,
    f: impl Fn(&[u64; 3], usize) -> u64,
) -> Result<Step, ExecError> {
    let exec = w.exec();
    let none = Src { kind: Kind::Const(0), and: u64::MAX, xor: 0, sel: None };
    let mut s = [none; 3];
    for (k, &t) in tys.iter().enumerate() {
        s[k] = Src::new(w, i, k, t, ctx);
    }
    let n = tys.len();
    if i.dpp.is_none()
        && i.sdwa.is_none()
        && i.omod == 0
        && !i.clamp
        && matches!(dty, Ty::B32 | Ty::F32)
        && !operand::is_agpr(i.dst)
    {
        // 64-bit sources are never plain: a VGPR pair, and a scalar pair or constant too (its
        // splat below is 32 bits wide; `v_cvt_i32_f64 v1, s[0:1]` read s0 alone).
        let plain = s[..n].iter().zip(tys).all(|(x, t)| {
            !t.is64()
                && x.sel.is_none()
                && x.and == u64::MAX
                && x.xor == 0
                && !matches!(x.kind, Kind::Pair(..))
        });
        let r = usize::from(i.dst.wrapping_sub(operand::VGPR0)) * LANES;
        if plain && r + LANES <= w.v.len() {
            // The common case, 32-bit registers and constants in, a 32-bit VGPR out: the
            // operation reads the register files in place (constants from a splat) and
            // writes a 32-bit block, with no 64-bit staging of sources.
            static ZERO: [u32; LANES] = [0; LANES];
            let [c0, c1, c2, res] = &mut *ctx.lanes32;
            let splat = [&mut *c0, &mut *c1, &mut *c2];
            for (k, x) in s[..n].iter().enumerate() {
                if let Kind::Const(c) = x.kind {
                    splat[k].fill(c as u32);
                }
            }
            {
                let src = |k: usize| -> &[u32] {
                    match s[k].kind {
                        _ if k >= n => &ZERO,
                        Kind::Lo(b, false) => &w.v[b..b + LANES],
                        Kind::Lo(b, true) => &w.a[b..b + LANES],
                        _ => &splat[k][..],
                    }
                };
                let (x0, x1, x2) = (src(0), src(1), src(2));
                for (l, o) in res.iter_mut().enumerate() {
                    *o = f(&[u64::from(x0[l]), u64::from(x1[l]), u64::from(x2[l])], l) as u32;
                }
            }
            let d = &mut w.v[r..r + LANES];
            if exec == u64::MAX {
                d.copy_from_slice(&res[..]);
            } else {
                blend(d, exec, &res[..]);
            }
            return Ok(Step::Next);
        }
    }
    let [v0, v1, v2, out] = &mut *ctx.lanes;
    for (k, v) in [&mut *v0, &mut *v1, &mut *v2].into_iter().enumerate().take(n) {
        s[k].fill(w, v);
    }
    let mut mask = exec;
    if let Some(d) = &i.dpp {
        // src0 from the lane DPP names, if that lane is active; else 0 (bound_ctrl) or the lane
        // is not written.
        mask &= dpp_write_mask(d);
        let zero = s[0].modify(0);
        let src = *v0;
        for (l, x) in v0.iter_mut().enumerate() {
            match dpp_source(d, l).filter(|&sl| exec >> sl & 1 == 1) {
                Some(sl) => *x = src[sl],
                None if d.bound_ctrl => *x = zero,
                None => mask &= !(1 << l),
            }
        }
    }
    for (l, o) in out.iter_mut().enumerate() {
        *o = f(&[v0[l], v1[l], v2[l]], l);
    }
    if i.omod != 0 || i.clamp {
        for o in out.iter_mut() {
            *o = out_mod(i, dty, *o);
        }
    }
    let half = matches!(dty, Ty::F16 | Ty::B16);
    let block = match i.sdwa {
        Some(sd) => sd.dst_sel == 6,
        None => !half,
    } && !operand::is_agpr(i.dst);
    if !block {
        for l in lanes(mask) {
            write(w, i, dty, l, out[l]);
        }
        return Ok(Step::Next);
    }
    let r = usize::from(i.dst.wrapping_sub(operand::VGPR0)) * LANES;
    let wide = dty.is64();
    if r + if wide { 2 * LANES } else { LANES } > w.v.len() {
        return Ok(Step::Next);
    }
    if wide {
        let (lo, hi) = w.v[r..r + 2 * LANES].split_at_mut(LANES);
        let lo: &mut [u32; LANES] = lo.try_into().expect("64 lanes");
        let hi: &mut [u32; LANES] = hi.try_into().expect("64 lanes");
        if mask == u64::MAX {
            crate::sys::cpu::split_lanes(out, lo, hi);
        } else {
            let (mut l32, mut h32) = ([0u32; LANES], [0u32; LANES]);
            crate::sys::cpu::split_lanes(out, &mut l32, &mut h32);
            blend(lo, mask, &l32);
            blend(hi, mask, &h32);
        }
    } else if mask == u64::MAX {
        for (d, o) in w.v[r..r + LANES].iter_mut().zip(out.iter()) {
            *d = *o as u32;
        }
    } else {
        let lo: [u32; LANES] = std::array::from_fn(|l| out[l] as u32);
        blend(&mut w.v[r..r + LANES], mask, &lo);
    }
    Ok(Step::Next)
}

/// Lane masks of every byte value: `BYTE_MASKS[b][k]` is all ones where bit `k` of `b` is set.
const BYTE_MASKS: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            if b >> k & 1 == 1 {
                t[b][k] = u32::MAX;
            }
            k += 1;
        }
        b += 1;
    }
    t
};

/// Writes the lanes of `src` whose bit in `mask` is set into `d` (64 lanes each): a blend
/// through per-byte lane masks (vectorises without variable shifts), not a walk over the set
/// bits. Fixed-size chunks: over slices' `chunks_exact` the compiler kept it scalar.
#[inline(always)]
pub fn blend(d: &mut [u32], mask: u64, src: &[u32]) {
    let d: &mut [u32; LANES] = (&mut d[..LANES]).try_into().expect("64 lanes");
    let src: &[u32; LANES] = src[..LANES].try_into().expect("64 lanes");
    let (d, _) = d.as_chunks_mut::<8>();
    let (src, _) = src.as_chunks::<8>();
    for (c, (dc, sc)) in d.iter_mut().zip(src).enumerate() {
        let m = &BYTE_MASKS[(mask >> (8 * c)) as u8 as usize];
        // Every load before the store: the vectoriser does not know `d` and `src` are apart.
        let (x, y) = (*dc, *sc);
        let mut r = [0u32; 8];
        for k in 0..8 {
            r[k] = (x[k] & !m[k]) | (y[k] & m[k]);
        }
        *dc = r;
    }
}

/// Float views of operand bits.
#[inline]
pub fn f(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
#[inline]
pub fn fb(x: f32) -> u64 {
    u64::from(x.to_bits())
}
#[inline]
pub fn d(x: u64) -> f64 {
    f64::from_bits(x)
}
#[inline]
pub fn db(x: f64) -> u64 {
    x.to_bits()
}
#[inline]
pub fn h(x: u64) -> f32 {
    crate::isa::fp16::f16_to_f32(x as u16)
}
#[inline]
pub fn hb(x: f32) -> u64 {
    u64::from(crate::isa::fp16::f32_to_f16(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpp_permutations() {
        let d = |ctrl| Dpp { ctrl, bound_ctrl: false, row_mask: 0xf, bank_mask: 0xf };
        // quad_perm:[1,0,3,2]
        let q = d(0b10_11_00_01);
        assert_eq!((0..4).map(|l| dpp_source(&q, l).unwrap()).collect::<Vec<_>>(), [1, 0, 3, 2]);
        assert_eq!(dpp_source(&d(0x111), 16), None); // row_shr:1 at a row start
        assert_eq!(dpp_source(&d(0x111), 17), Some(16));
        assert_eq!(dpp_source(&d(0x101), 15), None); // row_shl:1 at a row end
        assert_eq!(dpp_source(&d(0x121), 16), Some(31)); // row_ror:1
        assert_eq!(dpp_source(&d(0x142), 20), Some(15)); // row_bcast:15
        assert_eq!(dpp_source(&d(0x143), 40), Some(31)); // row_bcast:31
        assert_eq!(dpp_source(&d(0x140), 3), Some(12)); // row_mirror
        assert_eq!(
            dpp_write_mask(&Dpp { ctrl: 0, bound_ctrl: false, row_mask: 0b1010, bank_mask: 0xf }),
            0xffff_0000_ffff_0000
        );
    }

    #[test]
    fn blend_writes_the_masked_lanes_only() {
        let src: [u32; LANES] = std::array::from_fn(|l| 1000 + l as u32);
        for mask in [0u64, u64::MAX, 0x8000_0000_0000_0001, 0x00ff_0f00_f0f0_1234, 1 << 37] {
            let mut d: [u32; LANES] = std::array::from_fn(|l| l as u32);
            blend(&mut d, mask, &src);
            for (l, &x) in d.iter().enumerate() {
                assert_eq!(
                    x,
                    if mask >> l & 1 == 1 { 1000 + l as u32 } else { l as u32 },
                    "mask {mask:#x} lane {l}"
                );
            }
        }
    }

    #[test]
    fn sdwa_selection() {
        assert_eq!(select(0x8180_7f01, 1, false), 0x7f);
        assert_eq!(select(0x8180_7f01, 2, true), 0xffff_ff80);
        assert_eq!(select(0x8180_7f01, 5, false), 0x8180);
        assert_eq!(select(0x8180_7f01, 6, true), 0x8180_7f01);
    }
}
