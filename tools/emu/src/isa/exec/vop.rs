//! Vector ALU opcodes (VOP1, VOP2, VOP3 and VOP3P) and their semantics, by VOP3 opcode number
//! (VOP1/VOP2 opcodes at their e64 numbers). Comparisons are in `vcmp`, lane-crossing moves in
//! `vlane`.
//!
//! Precision: f32/f64 arithmetic, conversions, `sqrt` and `fma` are IEEE correctly rounded
//! (round to nearest even; denormals kept). The hardware's approximations (`v_rcp`, `v_rsq`,
//! `v_sqrt_f32`, `v_exp`, `v_log`, `v_sin`, `v_cos`: about 1 ulp) are computed here exactly
//! rounded from the host's libm, so a result can differ from a GPU's in the last bit; the
//! compiler's refinement sequences (division, f64 sqrt) converge to the same correctly rounded
//! results.

use super::valu::{d, db, f, fb, h, hb, lanes, vop};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::{vop3 as o, vop3p as p};
use crate::isa::decode::Inst;
use crate::isa::operand::Ty::{B16, B32, B64, F16, F32, F64, I64};
use crate::isa::wave::Wave;

macro_rules! op {
    ([$($t:ident),*] -> $dt:ident, |$a:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| vop(w, i, c, &[$($t),*], $dt, |$a: &[u64; 3], _l: usize| $e))
    };
    ([$($t:ident),*] -> $dt:ident, |$a:ident, $l:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| vop(w, i, c, &[$($t),*], $dt, |$a: &[u64; 3], $l: usize| $e))
    };
}

/// An accumulating op (`v_mac`, `v_fmac`): its third source is its destination.
macro_rules! acc {
    ([$($t:ident),*] -> $dt:ident, |$a:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let mut j = i.clone();
            j.src[2] = i.dst;
            j.abs &= 3;
            j.neg &= 3;
            vop(w, &j, c, &[$($t),*], $dt, |$a: &[u64; 3], _l: usize| $e)
        })
    };
}

fn u(x: u64) -> u32 {
    x as u32
}
fn i32_(x: u64) -> i32 {
    x as u32 as i32
}
fn ub(x: u32) -> u64 {
    u64::from(x)
}
fn ib(x: i32) -> u64 {
    u64::from(x as u32)
}
fn s24(x: u64) -> i64 {
    i64::from(((x as u32) << 8) as i32 >> 8)
}
fn u24(x: u64) -> u64 {
    x & 0xff_ffff
}

fn med3<T: PartialOrd + Copy>(a: T, b: T, c: T) -> T {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if c < lo {
        lo
    } else if c > hi {
        hi
    } else {
        c
    }
}

fn fmed3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return a.min(b).min(c);
    }
    med3(a, b, c)
}

/// frexp: (mantissa in [0.5, 1), exponent); zero, inf and NaN give (x, 0).
fn frexp64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        let (m, e) = frexp64(x * 2f64.powi(64));
        return (m, e - 64);
    }
    (f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52)), exp - 1022)
}

/// `x * 2^e` rounded once (the ISA's `ldexp`, `v_ldexp_f64`): zeros, infinities and NaNs are
/// kept whatever `e` is.
pub(super) fn ldexp64(x: f64, e: i32) -> f64 {
    // A normal x with a normal result (the common case): exact, by the exponent field.
    let bits = x.to_bits();
    let field = i64::from((bits >> 52 & 0x7ff) as u32);
    let t = field + i64::from(e);
    if (1..=2046).contains(&field) && (1..=2046).contains(&t) {
        return f64::from_bits((bits & !(0x7ff << 52)) | (t as u64) << 52);
    }
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // x = m * 2^k with m in [0.5, 1) exactly; the result is m * 2^(k + e).
    let (m, k) = frexp64(x);
    let t = k.saturating_add(e);
    if t > 1024 {
        return f64::INFINITY.copysign(x);
    }
    if t >= -1021 {
        // A normal result: exact, by the exponent field (m * 2 in [1, 2) has field 1023).
        return f64::from_bits((m.to_bits() & !(0x7ff << 52)) | (((t + 1022) as u64) << 52));
    }
    if t < -1074 {
        // Below half the smallest denormal (m < 1): zero.
        return 0f64.copysign(x);
    }
    // A denormal (or the smallest normal): one multiplication by the exact power 2^t rounds
    // once. 2^t is itself a denormal here, exact down to 2^-1074.
    m * f64::from_bits(if t >= -1022 { ((t + 1023) as u64) << 52 } else { 1 << (t + 1074) })
}

fn fract64(x: f64) -> f64 {
    if !x.is_finite() {
        return if x.is_nan() { x } else { f64::NAN };
    }
    (x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
}

fn fract32(x: f32) -> f32 {
    if !x.is_finite() {
        return if x.is_nan() { x } else { f32::NAN };
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

fn ffbh(x: u32) -> u32 {
    if x == 0 {
        u32::MAX
    } else {
        x.leading_zeros()
    }
}

fn perm(s0: u32, s1: u32, sel: u32) -> u32 {
    let both = (u64::from(s0) << 32) | u64::from(s1);
    let mut out = 0u32;
    for k in 0..4 {
        let b = (sel >> (8 * k)) & 0xff;
        let byte = match b {
            0..=7 => ((both >> (8 * b)) & 0xff) as u32,
            8 => ((s1 >> 15) & 1) * 0xff,
            9 => ((s1 >> 31) & 1) * 0xff,
            10 => ((s0 >> 15) & 1) * 0xff,
            11 => ((s0 >> 31) & 1) * 0xff,
            12 => 0,
            _ => 0xff,
        };
        out |= byte << (8 * k);
    }
    out
}

fn mbcnt_mask(l: usize, hi: bool) -> u32 {
    let below: u64 = if l == 0 { 0 } else { u64::MAX >> (64 - l) };
    if hi {
        (below >> 32) as u32
    } else {
        below as u32
    }
}

/// Round half to even (`v_rndne`).
fn rndne64(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// The biased exponent field of an f64 (the ISA's `exponent()`).
pub(super) fn exponent64(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32
}

/// The biased exponent field of an f32.
fn exponent32(x: f32) -> i32 {
    ((x.to_bits() >> 23) & 0xff) as i32
}

/// `v_div_scale_f64` as the CDNA ISA's pseudocode defines it: S0 (the denominator S1 or the
/// numerator S2) scaled by 2^128 or 2^-128 where the quotient S2 / S1 or the reciprocal would
/// leave the range the Newton-Raphson refinement keeps its precision in; VCC set where
/// `v_div_fmas_f64` has to scale the quotient back. Returns (D, VCC bit).
pub(super) fn div_scale_f64(s0: f64, den: f64, num: f64) -> (f64, bool) {
    // The common case without the two divisions: both operands normal, the denominator below
    // 2^1022 (so 1/den >= 2^-1022 is normal) and num/den > 2^(en - ed - 1) >= 2^-1022 (normal):
    // none of the conditions before the last two holds.
    let (en, ed) = (exponent64(num), exponent64(den));
    if (1..=2046).contains(&en) && (1..=2044).contains(&ed) && (-1021..768).contains(&(en - ed)) {
        return if en <= 53 { (ldexp64(s0, 128), false) } else { (s0, false) };
    }
    div_scale_f64_full(s0, den, num)
}

/// [`div_scale_f64`] branch by branch, as the ISA's pseudocode goes.
fn div_scale_f64_full(s0: f64, den: f64, num: f64) -> (f64, bool) {
    let sub = |x: f64| x.is_subnormal();
    if num == 0.0 || den == 0.0 {
        (f64::NAN, false)
    } else if exponent64(num) - exponent64(den) >= 768 {
        // N/D near the largest double: only the denominator is scaled.
        (if s0 == den { ldexp64(s0, 128) } else { s0 }, true)
    } else if sub(den) {
        (ldexp64(s0, 128), false)
    } else if sub(1.0 / den) && sub(num / den) {
        (if s0 == den { ldexp64(s0, 128) } else { s0 }, true)
    } else if sub(1.0 / den) {
        (ldexp64(s0, -128), false)
    } else if sub(num / den) {
        // Only the numerator is scaled.
        (if s0 == num { ldexp64(s0, 128) } else { s0 }, true)
    } else if exponent64(num) <= 53 {
        // A tiny numerator: both are scaled.
        (ldexp64(s0, 128), false)
    } else {
        (s0, false)
    }
}

/// `v_div_scale_f32`: the same with 2^64 and the f32 limits (the reciprocal's denormal test is
/// on the f64 reciprocal, as the ISA writes it).
fn div_scale_f32(s0: f32, den: f32, num: f32) -> (f32, bool) {
    let sub = |x: f32| x.is_subnormal();
    let up = |x: f32| (f64::from(x) * 2f64.powi(64)) as f32;
    if num == 0.0 || den == 0.0 {
        (f32::NAN, false)
    } else if exponent32(num) - exponent32(den) >= 96 {
        (if s0 == den { up(s0) } else { s0 }, true)
    } else if sub(den) {
        (up(s0), false)
    } else if (1.0 / f64::from(den)).is_subnormal() && sub(num / den) {
        (if s0 == den { up(s0) } else { s0 }, true)
    } else if (1.0 / f64::from(den)).is_subnormal() {
        ((f64::from(s0) * 2f64.powi(-64)) as f32, false)
    } else if sub(num / den) {
        (if s0 == num { up(s0) } else { s0 }, true)
    } else if exponent32(num) <= 23 {
        (up(s0), false)
    } else {
        (s0, false)
    }
}

/// The scaling step of the division sequence (`v_div_scale`): D and VCC per lane from
/// [`div_scale_f64`] / [`div_scale_f32`].
pub(super) fn div_scale(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    wide: bool,
) -> Result<Step, ExecError> {
    let ty = if wide { F64 } else { F32 };
    let s: [super::valu::Src; 3] = std::array::from_fn(|k| super::valu::Src::new(w, i, k, ty, c));
    let exec = w.exec();
    let mut vcc = 0u64;
    for l in lanes(exec) {
        let (s0, s1, s2) = (s[0].get(w, l), s[1].get(w, l), s[2].get(w, l));
        let (r, v) = if wide {
            let (r, v) = div_scale_f64(d(s0), d(s1), d(s2));
            (db(r), v)
        } else {
            let (r, v) = div_scale_f32(f(s0), f(s1), f(s2));
            (fb(r), v)
        };
        if v {
            vcc |= 1 << l;
        }
        super::valu::write(w, i, ty, l, r);
    }
    w.set_s64(i.sdst, vcc);
    Ok(Step::Next)
}

/// `a + b` as a rounded sum and its exact error (Knuth's TwoSum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The sign (-1, 0, 1) of the exact `a * b + c - r`, for finite operands whose products and
/// sums stay in the normal range: `a * b = p + e` exactly, and the four terms are summed as a
/// nonoverlapping expansion (Shewchuk), whose most significant nonzero term has the sign.
fn fma_residual_sign(a: f64, b: f64, c: f64, r: f64) -> i32 {
    let p = a * b;
    let e = a.mul_add(b, -p);
    let mut exp: Vec<f64> = vec![p];
    for t in [e, c, -r] {
        let mut q = t;
        let mut next = Vec::with_capacity(exp.len() + 1);
        for &x in &exp {
            let (s, err) = two_sum(q, x);
            if err != 0.0 {
                next.push(err);
            }
            q = s;
        }
        next.push(q);
        exp = next;
    }
    match exp.iter().rev().find(|x| **x != 0.0) {
        Some(x) if *x > 0.0 => 1,
        Some(_) => -1,
        None => 0,
    }
}

/// `fma(a, b, c) * 2^k` rounded once (the hardware scales the fused result before its one
/// rounding). The fma rounded to 53 bits, then scaled, rounds the same way unless the scaled
/// value lands exactly halfway between two denormals (a tie that the first rounding may have
/// made); there the sign of the exact residual decides, not the even neighbour.
pub(super) fn fma_scaled(a: f64, b: f64, c: f64, k: i32) -> f64 {
    let r = a.mul_add(b, c);
    let scaled = ldexp64(r, k);
    if !r.is_finite() || r == 0.0 || !(scaled.is_subnormal() || scaled == 0.0) {
        return scaled;
    }
    let bits = r.abs().to_bits();
    let (e, m) = ((bits >> 52) as i32, bits & ((1 << 52) - 1));
    let (e, m) = if e == 0 { (1, m) } else { (e, m | 1 << 52) };
    // r = m * 2^(e - 1075); in units of the smallest denormal, r * 2^k = m * 2^-dropped.
    let dropped = (1 - e - k).max(0) as u32;
    if dropped == 0 || dropped > 53 || m & ((1 << dropped) - 1) != 1 << (dropped - 1) {
        return scaled;
    }
    let up = match fma_residual_sign(a, b, c, r) {
        0 => return scaled,
        s => (s > 0) == (r > 0.0),
    };
    let n = (m >> dropped) + u64::from(up);
    let mag = f64::from_bits(n); // n <= 2^52: a denormal, or the smallest normal
    if r < 0.0 {
        -mag
    } else {
        mag
    }
}

/// `fma(x, y, z) * 2^k` of f32 operands rounded once to f32: as [`fma_scaled`], with the f64
/// fma as the first rounding.
fn fma_scaled32(x: f32, y: f32, z: f32, k: i32) -> f32 {
    let (a, b, c) = (f64::from(x), f64::from(y), f64::from(z));
    let r = a.mul_add(b, c);
    let scaled = r * 2f64.powi(k); // exact: f32 operands scaled by 2^+-64 stay normal in f64
    let t = scaled as f32;
    if !r.is_finite() || f64::from(t) == scaled || t.is_infinite() {
        return t;
    }
    let toward = if scaled > f64::from(t) { t.next_up() } else { t.next_down() };
    if (f64::from(t) + f64::from(toward)) / 2.0 != scaled {
        return t;
    }
    match fma_residual_sign(a, b, c, r) {
        0 => t,
        s => {
            let up = s > 0; // the exact value is above r (and above the tie)
            let (lo, hi) = if f64::from(t) < f64::from(toward) { (t, toward) } else { (toward, t) };
            if up {
                hi
            } else {
                lo
            }
        }
    }
}

/// One lane of `v_div_fmas_f64` (see [`div_fmas`]).
fn div_fmas_f64(x: f64, y: f64, z: f64, vcc: bool) -> f64 {
    if !vcc {
        return x.mul_add(y, z);
    }
    fma_scaled(x, y, z, if exponent64(z) > 1023 { 128 } else { -128 })
}

/// `v_div_fmas`: fma, then in lanes whose VCC is set scaled by 2^128 (f32: 2^64) when S2's
/// exponent is above the bias (a quotient of at least 2, the denominator was scaled up) and by
/// 2^-128 (2^-64) otherwise (the numerator was scaled up), undoing `v_div_scale`'s scaling.
/// The ISA text's pseudocode writes a fixed 2^64 (f32: 2^32); that cannot undo a scaling by
/// 2^128 in either direction, and the division macro is correctly rounded on hardware only
/// with the direction taken from S2, as here.
fn div_fmas(w: &mut Wave, i: &Inst, c: &mut Ctx, wide: bool) -> Result<Step, ExecError> {
    let vcc = w.vcc();
    if wide {
        vop(w, i, c, &[F64, F64, F64], F64, |a, l| {
            db(div_fmas_f64(d(a[0]), d(a[1]), d(a[2]), vcc >> l & 1 == 1))
        })
    } else {
        vop(w, i, c, &[F32, F32, F32], F32, |a, l| {
            let (x, y, z) = (f(a[0]), f(a[1]), f(a[2]));
            if vcc >> l & 1 == 0 {
                return fb(x.mul_add(y, z));
            }
            fb(fma_scaled32(x, y, z, if exponent32(z) > 127 { 64 } else { -64 }))
        })
    }
}

/// `v_div_fixup`: S0 is the quotient estimate of S2 / S1; special operands give IEEE results.
pub(super) fn fixup64(q: f64, den: f64, num: f64) -> f64 {
    if den.is_nan() || num.is_nan() {
        return f64::NAN;
    }
    if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
        return f64::NAN;
    }
    let neg = den.is_sign_negative() != num.is_sign_negative();
    let sign = if neg { -1.0 } else { 1.0 };
    if den == 0.0 || num.is_infinite() {
        return sign * f64::INFINITY;
    }
    if den.is_infinite() || num == 0.0 {
        return sign * 0.0;
    }
    if q.is_nan() {
        return num / den;
    }
    if neg {
        -q.abs()
    } else {
        q.abs()
    }
}

/// 2/pi's fraction bits, the most significant first: 1216 of them, of which the hardware's
/// table for `v_trig_preop_f64` holds the first 1201 (computed with mpmath at 1500 bits; the
/// first words are the well-known 0xa2f9836e_4e441529...).
const TWO_OVER_PI: [u64; 19] = [
    0xa2f9_836e_4e44_1529,
    0xfc27_57d1_f534_ddc0,
    0xdb62_9599_3c43_9041,
    0xfe51_63ab_debb_c561,
    0xb724_6e3a_424d_d2e0,
    0x0649_2eea_09d1_921c,
    0xfe1d_eb1c_b129_a73e,
    0xe882_35f5_2ebb_4484,
    0xe99c_7026_b45f_7e41,
    0x3991_d639_8353_39f4,
    0x9c84_5f8b_bdf9_283b,
    0x1ff8_97ff_de05_980f,
    0xef2f_118b_5a0a_6d1f,
    0x6d36_7ecf_27cb_09b7,
    0x4f46_3f66_9e5f_ea2d,
    0x7527_bac7_ebe5_f17b,
    0x3d07_39f7_8a52_92ea,
    0x6bfb_5fb1_1f8d_5d08,
    0x5603_3046_fc7b_6bab,
];

/// `v_trig_preop_f64` (the ISA's pseudocode): 53 bits of 2/pi starting `sel[4:0] * 53` bits
/// into its fraction (further by the exponent of S0 above 1077), scaled to their place value
/// (by 2^128 more when S0's exponent is at least 1968), for Payne-Hanek argument reduction.
fn trig_preop(x: u64, sel: u32) -> f64 {
    let exp = ((x >> 52) & 0x7ff) as u32;
    let mut shift = (sel & 31) * 53;
    if exp > 1077 {
        shift += exp - 1077;
    }
    let mut bits = 0u64;
    for p in shift..shift + 53 {
        let bit = if p < 1201 { TWO_OVER_PI[p as usize / 64] >> (63 - p % 64) & 1 } else { 0 };
        bits = bits << 1 | bit;
    }
    let mut scale = -53 - shift as i32;
    if exp >= 1968 {
        scale += 128;
    }
    ldexp64(bits as f64, scale)
}

/// `v_dot2c_i32_i16`, `v_dot4c_i32_i8`, `v_dot8c_i32_i4` (VOP2): signed dot product of S0 and
/// S1 added to D.
fn dot_c(w: &mut Wave, i: &Inst, c: &mut Ctx, bits: u32) -> Result<Step, ExecError> {
    let mut j = i.clone();
    j.src[2] = i.dst;
    j.abs &= 3;
    j.neg &= 3;
    let plain = Inst::probe(crate::isa::decode::Family::Vop2, 0);
    vop(w, &j, c, &[B32, B32, B32], B32, |a, _| dot_int(a, &plain, bits, true))
}

/// The add/sub family with a carry out (and for some a carry in).
fn carry_op(w: &mut Wave, i: &Inst, c: &mut Ctx, kind: u8) -> Result<Step, ExecError> {
    let s0 = super::valu::Src::new(w, i, 0, B32, c);
    let s1 = super::valu::Src::new(w, i, 1, B32, c);
    let cin = if kind >= 3 { w.sread(i.src[2], i.literal, B64, &c.apertures) } else { 0 };
    let exec = w.exec();
    let mut cout = 0u64;
    for l in lanes(exec) {
        let (a, b) = (s0.get(w, l), s1.get(w, l));
        let ci = cin >> l & 1;
        let (r, carry) = match kind {
            0 => (a + b, (a + b) >> 32),
            1 => (a.wrapping_sub(b), u64::from(b > a)),
            2 => (b.wrapping_sub(a), u64::from(a > b)),
            3 => (a + b + ci, (a + b + ci) >> 32),
            4 => (a.wrapping_sub(b).wrapping_sub(ci), u64::from(b + ci > a)),
            _ => (b.wrapping_sub(a).wrapping_sub(ci), u64::from(a + ci > b)),
        };
        cout |= (carry & 1) << l;
        // clamp saturates: a carry out of an add gives all ones, a borrow of a subtract 0.
        let r = match (i.clamp, carry & 1, kind) {
            (true, 1, 0 | 3) => 0xffff_ffff,
            (true, 1, _) => 0,
            _ => r & 0xffff_ffff,
        };
        super::valu::write(w, i, B32, l, r);
    }
    w.set_s64(i.sdst, cout);
    Ok(Step::Next)
}

/// `v_mad_u64_u32` / `v_mad_i64_i32`: D64 = S0 * S1 + S2 (64-bit), carry out into sdst.
fn mad64(w: &mut Wave, i: &Inst, c: &mut Ctx, signed: bool) -> Result<Step, ExecError> {
    let s0 = super::valu::Src::new(w, i, 0, B32, c);
    let s1 = super::valu::Src::new(w, i, 1, B32, c);
    let s2 = super::valu::Src::new(w, i, 2, B64, c);
    let mut cout = 0u64;
    for l in lanes(w.exec()) {
        let (a, b, acc) = (s0.get(w, l), s1.get(w, l), s2.get(w, l));
        let r = if signed {
            let p =
                i128::from(a as u32 as i32) * i128::from(b as u32 as i32) + i128::from(acc as i64);
            if p > i128::from(i64::MAX) || p < i128::from(i64::MIN) {
                cout |= 1 << l;
            }
            p as u64
        } else {
            let p = u128::from(a) * u128::from(b) + u128::from(acc);
            if p >> 64 != 0 {
                cout |= 1 << l;
            }
            p as u64
        };
        super::valu::write(w, i, B64, l, r);
    }
    w.set_s64(i.sdst, cout);
    Ok(Step::Next)
}

/// `v_mul_legacy_f32`'s product (DX9 rule): +0 when either factor is ±0, whatever the other
/// (inf and NaN included); otherwise the IEEE product.
fn mul_legacy(x: f32, y: f32) -> f32 {
    if x == 0.0 || y == 0.0 {
        0.0
    } else {
        x * y
    }
}

/// f32 to a normalised 16-bit integer (`f32_to_snorm`/`f32_to_unorm` of the ISA's pseudocode):
/// clamped to [-1, 1] (signed) or [0, 1] (unsigned), scaled by 32767 or 65535, rounded to
/// nearest even; NaN gives 0. The ISA names the functions without defining their rounding or
/// NaN result; round to nearest even is the default rounding mode and what Mesa's `pack_snorm`/
/// `pack_unorm` (which it lowers to these instructions) specify.
fn norm16(x: f32, signed: bool) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let (lo, scale) = if signed { (-1.0, 32767.0) } else { (0.0, 65535.0) };
    let r = rndne64(f64::from(x.clamp(lo, 1.0)) * scale) as i32;
    u64::from(r as u16)
}

/// `f32_to_u8` of `v_cvt_pk_u8_f32`: saturated to [0, 255], rounded to nearest even (the
/// default rounding mode; the ISA does not say), NaN gives 0.
fn f32_to_u8(x: f32) -> u32 {
    if x.is_nan() {
        return 0;
    }
    rndne64(f64::from(x.clamp(0.0, 255.0))) as u32
}

fn absdiff(x: u32, y: u32) -> u32 {
    x.abs_diff(y)
}

/// The byte sum of absolute differences of `v_sad_u8` (`masked`: `v_msad_u8`, bytes whose
/// reference byte in `y` is 0 left out), without the accumulator.
fn sad8(x: u32, y: u32, masked: bool) -> u32 {
    (0..4)
        .map(|k| {
            let (a, b) = (x >> (8 * k) & 0xff, y >> (8 * k) & 0xff);
            if masked && b == 0 {
                0
            } else {
                absdiff(a, b)
            }
        })
        .sum()
}

/// `v_qsad_pk_u16_u8`/`v_mqsad_pk_u16_u8`: four SADs of the reference S1 against the 32-bit
/// windows of S0 starting at bytes 0-3, each added to its 16-bit field of S2 and truncated to
/// 16 bits (the ISA's `16'B(...)`).
fn qsad16(s0: u64, s1: u32, s2: u64, masked: bool) -> u64 {
    (0..4).fold(0, |r, k| {
        let acc = (s2 >> (16 * k)) as u32 & 0xffff;
        let v = sad8((s0 >> (8 * k)) as u32, s1, masked).wrapping_add(acc) & 0xffff;
        r | u64::from(v) << (16 * k)
    })
}

/// `v_mqsad_u32_u8`: as `v_mqsad_pk_u16_u8` with 32-bit accumulators (a 128-bit S2 and D).
fn mqsad32(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    if i.clamp {
        return Err(ExecError::Unimplemented);
    }
    let s0 = super::valu::Src::new(w, i, 0, B64, c);
    let s1 = super::valu::Src::new(w, i, 1, B32, c);
    // S2 and D are register quads: S2 a VGPR (or AGPR) quad, as the assembler requires; any
    // other operand is refused rather than guessed at.
    let code = i.src[2];
    if !crate::isa::operand::is_vgpr(code) && !crate::isa::operand::is_agpr(code) {
        return Err(ExecError::Unimplemented);
    }
    for l in lanes(w.exec()) {
        let (a, b) = (s0.get(w, l), s1.get(w, l) as u32);
        let mut out = [0u32; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let acc = w.reg(code + k as u16, l);
            *o = sad8((a >> (8 * k)) as u32, b, true).wrapping_add(acc);
        }
        for (k, o) in out.iter().enumerate() {
            w.set_reg(i.dst + k as u16, l, *o);
        }
    }
    Ok(Step::Next)
}

/// `fma` of three f16 values rounded once to f16: the f64 fma is exact whenever the result is
/// finite in f16, and is narrowed through f32 with round-to-odd so that the f16 rounding is
/// not a second rounding (rounding f64 to f32 to nearest first could make a tie).
fn fma16(x: f32, y: f32, z: f32) -> u32 {
    let r = f64::from(x).mul_add(f64::from(y), f64::from(z));
    hbits(f64_to_f32_odd(r))
}

/// f64 to f32 rounding to odd (truncate, then set the last bit when inexact).
fn f64_to_f32_odd(x: f64) -> f32 {
    if !x.is_finite() {
        return x as f32;
    }
    let mut r = x as f32;
    if f64::from(r).abs() > x.abs() {
        r = f32::from_bits(r.to_bits() - 1); // one step toward zero (same sign)
    }
    if f64::from(r) != x {
        r = f32::from_bits(r.to_bits() | 1);
    }
    r
}

/// `v_mad_f16`-style multiply-add: the product rounded to f16, then the sum (the f32
/// intermediates are exact or round innocuously: 24 >= 2 * 11 + 2 bits).
fn mad16(x: f32, y: f32, z: f32) -> u64 {
    hb(h(hb(x * y)) + z)
}

/// The gfx9 VOP3-only 16-bit multiply-adds (`v_mad_f16/u16/i16`, `v_fma_f16`,
/// `v_div_fixup_f16`): the result goes to D's low half with the high half kept (op_sel[3]
/// clear) or to the high half with the low half kept (set), as the CDNA ISA's notes on these
/// opcodes say (the VI-era `_legacy` forms and the VOP1/VOP2 16-bit ops zero the high half
/// instead). `int`: Some(signed) for the integer forms, whose `clamp` saturates to the 16-bit
/// range; float results take `omod`/`clamp` as usual.
fn vop16_keep(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    int: Option<bool>,
    g: fn(&[u64; 3]) -> i64,
) -> Result<Step, ExecError> {
    let ty = if int.is_some() { B16 } else { F16 };
    let s: [super::valu::Src; 3] = std::array::from_fn(|k| super::valu::Src::new(w, i, k, ty, c));
    let hi = i.op_sel >> 3 & 1 == 1;
    for l in lanes(w.exec()) {
        let a = [s[0].get(w, l) & 0xffff, s[1].get(w, l) & 0xffff, s[2].get(w, l) & 0xffff];
        let r = g(&a);
        let v = match int {
            None => super::valu::out_mod(i, F16, r as u64) as u32 & 0xffff,
            Some(true) if i.clamp => r.clamp(-32768, 32767) as u32 & 0xffff,
            Some(false) if i.clamp => r.clamp(0, 0xffff) as u32,
            Some(_) => r as u32 & 0xffff,
        };
        let old = w.reg(i.dst, l);
        w.set_reg(i.dst, l, if hi { (old & 0xffff) | v << 16 } else { (old & 0xffff_0000) | v });
    }
    Ok(Step::Next)
}

/// `v_mad_legacy_u16`/`v_mad_legacy_i16`: as `v_mad_u16`/`v_mad_i16` (clamp saturates), with
/// D's high half zeroed; op_sel (which the VI encoding did not have) is refused.
fn mad16_legacy(w: &mut Wave, i: &Inst, c: &mut Ctx, signed: bool) -> Result<Step, ExecError> {
    if i.op_sel != 0 {
        return Err(ExecError::Unimplemented);
    }
    let step = if signed {
        vop16_keep(w, i, c, Some(true), |a| s16(a[0]) * s16(a[1]) + s16(a[2]))?
    } else {
        vop16_keep(w, i, c, Some(false), |a| (a[0] * a[1] + a[2]) as i64)?
    };
    for l in lanes(w.exec()) {
        let v = w.reg(i.dst, l) & 0xffff;
        w.set_reg(i.dst, l, v);
    }
    Ok(step)
}

fn s16(x: u64) -> i64 {
    i64::from(x as u16 as i16)
}

/// Refuses `clamp` (its integer saturation is not specified for these opcodes), else `vop`.
macro_rules! noclamp {
    ([$($t:ident),*] -> $dt:ident, |$a:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            if i.clamp {
                return Err(ExecError::Unimplemented);
            }
            vop(w, i, c, &[$($t),*], $dt, |$a: &[u64; 3], _l: usize| $e)
        })
    };
}

/// An integer add or subtract whose VOP3 `clamp` saturates (the ISA's "supports saturation"
/// for `v_add/sub/subrev_u32`, `_u16` and `v_add/sub_i32`; LLVM selects these with clamp for
/// `uaddsat`/`usubsat`/`saddsat`/`ssubsat` and for `max(x - y, 0)`, e.g. rocPRIM's merge path):
/// `$e` is the exact result, saturated to the `$bits`-bit unsigned or signed (`$signed`) range
/// with clamp, else truncated.
macro_rules! sat {
    ([$($t:ident),*] -> $dt:ident, $bits:expr, $signed:expr, |$a:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let clamp = i.clamp;
            vop(w, i, c, &[$($t),*], $dt, move |$a: &[u64; 3], _l: usize| {
                saturate($e, $bits, $signed, clamp)
            })
        })
    };
}

/// `exact` truncated to `bits` bits, or with `clamp` saturated to the unsigned or signed range.
fn saturate(exact: i64, bits: u32, signed: bool, clamp: bool) -> u64 {
    let mask = (1u64 << bits) - 1;
    if !clamp {
        return exact as u64 & mask;
    }
    let (lo, hi) =
        if signed { (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1) } else { (0, mask as i64) };
    exact.clamp(lo, hi) as u64 & mask
}

/// A VOP1/VOP2/VOP3 opcode's handler (VOP3 numbering).
pub fn valu(op: u16) -> Option<Handler> {
    match op {
        // VOP2 (0x100 + op)
        // VOP3's abs/neg apply to both sources as 32-bit float modifiers (sign bit 31): the
        // compiler selects `x` or `-x` with one `v_cndmask_b32_e64 d, x, -x, s` (rocSPARSE's
        // conjugate; read as plain bits before, the conjugate was lost).
        o::V_CNDMASK_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let m = w.sread(i.src[2], i.literal, B64, &c.apertures);
            vop(w, i, c, &[F32, F32], B32, |a, l| if m >> l & 1 == 1 { a[1] } else { a[0] })
        }),
        o::V_ADD_F32 => op!([F32, F32] -> F32, |a| fb(f(a[0]) + f(a[1]))),
        o::V_SUB_F32 => op!([F32, F32] -> F32, |a| fb(f(a[0]) - f(a[1]))),
        o::V_SUBREV_F32 => op!([F32, F32] -> F32, |a| fb(f(a[1]) - f(a[0]))),
        o::V_FMAC_F64 => acc!([F64, F64, F64] -> F64, |a| db(d(a[0]).mul_add(d(a[1]), d(a[2])))),
        o::V_MUL_F32 => op!([F32, F32] -> F32, |a| fb(f(a[0]) * f(a[1]))),
        o::V_MUL_I32_I24 => {
            op!([B32, B32] -> B32, |a| (s24(a[0]) * s24(a[1])) as u64 & 0xffff_ffff)
        }
        o::V_MUL_HI_I32_I24 => {
            op!([B32, B32] -> B32, |a| ((s24(a[0]) * s24(a[1])) >> 32) as u64 & 0xffff_ffff)
        }
        o::V_MUL_U32_U24 => op!([B32, B32] -> B32, |a| (u24(a[0]) * u24(a[1])) & 0xffff_ffff),
        o::V_MUL_HI_U32_U24 => op!([B32, B32] -> B32, |a| (u24(a[0]) * u24(a[1])) >> 32),
        o::V_MIN_F32 => op!([F32, F32] -> F32, |a| fb(f(a[0]).min(f(a[1])))),
        o::V_MAX_F32 => op!([F32, F32] -> F32, |a| fb(f(a[0]).max(f(a[1])))),
        o::V_MIN_I32 => op!([B32, B32] -> B32, |a| ib(i32_(a[0]).min(i32_(a[1])))),
        o::V_MAX_I32 => op!([B32, B32] -> B32, |a| ib(i32_(a[0]).max(i32_(a[1])))),
        o::V_MIN_U32 => op!([B32, B32] -> B32, |a| a[0].min(a[1])),
        o::V_MAX_U32 => op!([B32, B32] -> B32, |a| a[0].max(a[1])),
        o::V_LSHRREV_B32 => op!([B32, B32] -> B32, |a| ub(u(a[1]) >> (a[0] & 31))),
        o::V_ASHRREV_I32 => op!([B32, B32] -> B32, |a| ib(i32_(a[1]) >> (a[0] & 31))),
        o::V_LSHLREV_B32 => op!([B32, B32] -> B32, |a| ub(u(a[1]) << (a[0] & 31))),
        o::V_AND_B32 => op!([B32, B32] -> B32, |a| a[0] & a[1]),
        o::V_OR_B32 => op!([B32, B32] -> B32, |a| a[0] | a[1]),
        o::V_XOR_B32 => op!([B32, B32] -> B32, |a| a[0] ^ a[1]),
        o::V_XNOR_B32 => op!([B32, B32] -> B32, |a| !(a[0] ^ a[1]) & 0xffff_ffff),
        0x137 => acc!([B32, B32, F32] -> F32, |a| dot2_f16(a, None)),
        0x138 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_c(w, i, c, 16)),
        0x139 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_c(w, i, c, 8)),
        0x13a => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_c(w, i, c, 4)),
        o::V_MAC_F32 => acc!([F32, F32, F32] -> F32, |a| fb(f(a[0]) * f(a[1]) + f(a[2]))),
        o::V_FMAC_F32 => acc!([F32, F32, F32] -> F32, |a| fb(f(a[0]).mul_add(f(a[1]), f(a[2])))),
        // v_madmk_f32 (VOP2 0x17): D = S0 * K + S1; v_madak_f32 (0x18): D = S0 * S1 + K.
        0x117 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = f32::from_bits(i.literal);
            vop(w, i, c, &[F32, F32], F32, |a, _| fb(f(a[0]) * k + f(a[1])))
        }),
        0x118 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = f32::from_bits(i.literal);
            vop(w, i, c, &[F32, F32], F32, |a, _| fb(f(a[0]) * f(a[1]) + k))
        }),
        o::V_ADD_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 0)),
        o::V_SUB_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 1)),
        o::V_SUBREV_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 2)),
        o::V_ADDC_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 3)),
        o::V_SUBB_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 4)),
        o::V_SUBBREV_CO_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| carry_op(w, i, c, 5)),
        o::V_ADD_F16 => op!([F16, F16] -> F16, |a| hb(h(a[0]) + h(a[1]))),
        o::V_SUB_F16 => op!([F16, F16] -> F16, |a| hb(h(a[0]) - h(a[1]))),
        o::V_SUBREV_F16 => op!([F16, F16] -> F16, |a| hb(h(a[1]) - h(a[0]))),
        o::V_MUL_F16 => op!([F16, F16] -> F16, |a| hb(h(a[0]) * h(a[1]))),
        o::V_MAX_F16 => op!([F16, F16] -> F16, |a| hb(h(a[0]).max(h(a[1])))),
        o::V_MIN_F16 => op!([F16, F16] -> F16, |a| hb(h(a[0]).min(h(a[1])))),
        o::V_ADD_U16 => sat!([B16, B16] -> B16, 16, false, |a| a[0] as i64 + a[1] as i64),
        o::V_SUB_U16 => sat!([B16, B16] -> B16, 16, false, |a| a[0] as i64 - a[1] as i64),
        o::V_SUBREV_U16 => sat!([B16, B16] -> B16, 16, false, |a| a[1] as i64 - a[0] as i64),
        o::V_MUL_LO_U16 => op!([B16, B16] -> B16, |a| (a[0] * a[1]) & 0xffff),
        o::V_LSHLREV_B16 => op!([B16, B16] -> B16, |a| (a[1] << (a[0] & 15)) & 0xffff),
        o::V_LSHRREV_B16 => op!([B16, B16] -> B16, |a| (a[1] & 0xffff) >> (a[0] & 15)),
        o::V_ASHRREV_I16 => {
            op!([B16, B16] -> B16, |a| u64::from(((a[1] as i16) >> (a[0] & 15)) as u16))
        }
        o::V_MAX_U16 => op!([B16, B16] -> B16, |a| (a[0] & 0xffff).max(a[1] & 0xffff)),
        o::V_MIN_U16 => op!([B16, B16] -> B16, |a| (a[0] & 0xffff).min(a[1] & 0xffff)),
        o::V_MAX_I16 => {
            op!([B16, B16] -> B16, |a| u64::from((a[0] as i16).max(a[1] as i16) as u16))
        }
        o::V_MIN_I16 => {
            op!([B16, B16] -> B16, |a| u64::from((a[0] as i16).min(a[1] as i16) as u16))
        }
        o::V_ADD_U32 => sat!([B32, B32] -> B32, 32, false, |a| a[0] as i64 + a[1] as i64),
        o::V_SUB_U32 => sat!([B32, B32] -> B32, 32, false, |a| a[0] as i64 - a[1] as i64),
        o::V_SUBREV_U32 => sat!([B32, B32] -> B32, 32, false, |a| a[1] as i64 - a[0] as i64),
        // VOP1 (0x140 + op)
        o::V_NOP => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next)),
        o::V_MOV_B32 => op!([B32] -> B32, |a| a[0]),
        o::V_CVT_I32_F64 => op!([F64] -> B32, |a| ib(d(a[0]) as i32)),
        o::V_CVT_F64_I32 => op!([B32] -> F64, |a| db(f64::from(i32_(a[0])))),
        o::V_CVT_F32_I32 => op!([B32] -> F32, |a| fb(i32_(a[0]) as f32)),
        o::V_CVT_F32_U32 => op!([B32] -> F32, |a| fb(u(a[0]) as f32)),
        o::V_CVT_U32_F32 => op!([F32] -> B32, |a| ub(f(a[0]) as u32)),
        o::V_CVT_I32_F32 => op!([F32] -> B32, |a| ib(f(a[0]) as i32)),
        o::V_CVT_F16_F32 => op!([F32] -> F16, |a| hb(f(a[0]))),
        o::V_CVT_F32_F16 => op!([F16] -> F32, |a| fb(h(a[0]))),
        o::V_CVT_RPI_I32_F32 => op!([F32] -> B32, |a| ib((f(a[0]) + 0.5).floor() as i32)),
        o::V_CVT_FLR_I32_F32 => op!([F32] -> B32, |a| ib(f(a[0]).floor() as i32)),
        o::V_CVT_F32_F64 => op!([F64] -> F32, |a| fb(d(a[0]) as f32)),
        o::V_CVT_F64_F32 => op!([F32] -> F64, |a| db(f64::from(f(a[0])))),
        o::V_CVT_F32_UBYTE0 => op!([B32] -> F32, |a| fb((a[0] & 0xff) as f32)),
        o::V_CVT_F32_UBYTE1 => op!([B32] -> F32, |a| fb(((a[0] >> 8) & 0xff) as f32)),
        o::V_CVT_F32_UBYTE2 => op!([B32] -> F32, |a| fb(((a[0] >> 16) & 0xff) as f32)),
        o::V_CVT_F32_UBYTE3 => op!([B32] -> F32, |a| fb(((a[0] >> 24) & 0xff) as f32)),
        o::V_CVT_U32_F64 => op!([F64] -> B32, |a| ub(d(a[0]) as u32)),
        o::V_CVT_F64_U32 => op!([B32] -> F64, |a| db(f64::from(u(a[0])))),
        o::V_TRUNC_F64 => op!([F64] -> F64, |a| db(d(a[0]).trunc())),
        o::V_CEIL_F64 => op!([F64] -> F64, |a| db(d(a[0]).ceil())),
        o::V_RNDNE_F64 => op!([F64] -> F64, |a| db(rndne64(d(a[0])))),
        o::V_FLOOR_F64 => op!([F64] -> F64, |a| db(d(a[0]).floor())),
        o::V_FRACT_F32 => op!([F32] -> F32, |a| fb(fract32(f(a[0])))),
        o::V_TRUNC_F32 => op!([F32] -> F32, |a| fb(f(a[0]).trunc())),
        o::V_CEIL_F32 => op!([F32] -> F32, |a| fb(f(a[0]).ceil())),
        o::V_RNDNE_F32 => op!([F32] -> F32, |a| fb(rndne64(f64::from(f(a[0]))) as f32)),
        o::V_FLOOR_F32 => op!([F32] -> F32, |a| fb(f(a[0]).floor())),
        o::V_EXP_F32 => op!([F32] -> F32, |a| fb(f(a[0]).exp2())),
        o::V_LOG_F32 => op!([F32] -> F32, |a| fb(f(a[0]).log2())),
        o::V_RCP_F32 | o::V_RCP_IFLAG_F32 => op!([F32] -> F32, |a| fb(1.0 / f(a[0]))),
        o::V_RSQ_F32 => op!([F32] -> F32, |a| fb((1.0 / f64::from(f(a[0])).sqrt()) as f32)),
        o::V_RCP_F64 => op!([F64] -> F64, |a| db(1.0 / d(a[0]))),
        o::V_RSQ_F64 => op!([F64] -> F64, |a| db(1.0 / d(a[0]).sqrt())),
        o::V_SQRT_F32 => op!([F32] -> F32, |a| fb(f(a[0]).sqrt())),
        o::V_SQRT_F64 => op!([F64] -> F64, |a| db(d(a[0]).sqrt())),
        o::V_SIN_F32 => {
            op!([F32] -> F32, |a| fb((f64::from(f(a[0])) * std::f64::consts::TAU).sin() as f32))
        }
        o::V_COS_F32 => {
            op!([F32] -> F32, |a| fb((f64::from(f(a[0])) * std::f64::consts::TAU).cos() as f32))
        }
        o::V_NOT_B32 => op!([B32] -> B32, |a| !a[0] & 0xffff_ffff),
        o::V_BFREV_B32 => op!([B32] -> B32, |a| ub(u(a[0]).reverse_bits())),
        o::V_FFBH_U32 => op!([B32] -> B32, |a| ub(ffbh(u(a[0])))),
        o::V_FFBL_B32 => {
            op!([B32] -> B32, |a| ub(if u(a[0]) == 0 { u32::MAX } else { u(a[0]).trailing_zeros() }))
        }
        o::V_FFBH_I32 => op!([B32] -> B32, |a| {
            let x = u(a[0]);
            ub(if x == 0 || x == u32::MAX { u32::MAX } else if x >> 31 == 1 { (!x).leading_zeros() } else { x.leading_zeros() })
        }),
        o::V_FREXP_EXP_I32_F64 => op!([F64] -> B32, |a| ib(frexp64(d(a[0])).1)),
        o::V_FREXP_MANT_F64 => op!([F64] -> F64, |a| db(frexp64(d(a[0])).0)),
        o::V_FRACT_F64 => op!([F64] -> F64, |a| db(fract64(d(a[0])))),
        o::V_FREXP_EXP_I32_F32 => op!([F32] -> B32, |a| ib(frexp64(f64::from(f(a[0]))).1)),
        o::V_FREXP_MANT_F32 => op!([F32] -> F32, |a| fb(frexp64(f64::from(f(a[0]))).0 as f32)),
        o::V_CVT_F16_U16 => op!([B16] -> F16, |a| hb((a[0] & 0xffff) as f32)),
        o::V_CVT_F16_I16 => op!([B16] -> F16, |a| hb(f32::from(a[0] as i16))),
        o::V_CVT_U16_F16 => op!([F16] -> B16, |a| u64::from(h(a[0]) as u16)),
        o::V_CVT_I16_F16 => op!([F16] -> B16, |a| u64::from(h(a[0]) as i16 as u16)),
        o::V_RCP_F16 => op!([F16] -> F16, |a| hb(1.0 / h(a[0]))),
        o::V_SQRT_F16 => op!([F16] -> F16, |a| hb(h(a[0]).sqrt())),
        o::V_RSQ_F16 => op!([F16] -> F16, |a| hb(1.0 / h(a[0]).sqrt())),
        o::V_LOG_F16 => op!([F16] -> F16, |a| hb(h(a[0]).log2())),
        o::V_EXP_F16 => op!([F16] -> F16, |a| hb(h(a[0]).exp2())),
        o::V_FLOOR_F16 => op!([F16] -> F16, |a| hb(h(a[0]).floor())),
        o::V_CEIL_F16 => op!([F16] -> F16, |a| hb(h(a[0]).ceil())),
        o::V_TRUNC_F16 => op!([F16] -> F16, |a| hb(h(a[0]).trunc())),
        o::V_RNDNE_F16 => op!([F16] -> F16, |a| hb(rndne64(f64::from(h(a[0]))) as f32)),
        o::V_FRACT_F16 => op!([F16] -> F16, |a| hb(fract32(h(a[0])))),
        o::V_SIN_F16 => {
            op!([F16] -> F16, |a| hb((f64::from(h(a[0])) * std::f64::consts::TAU).sin() as f32))
        }
        o::V_COS_F16 => {
            op!([F16] -> F16, |a| hb((f64::from(h(a[0])) * std::f64::consts::TAU).cos() as f32))
        }
        // VOP1 16-bit results (high half zeroed): f16 to snorm/unorm 16, and v_sat_pk_u8_i16
        // (both signed halves of S0 saturated to [0, 255], packed into the low 16 bits).
        o::V_CVT_NORM_I16_F16 => op!([F16] -> B16, |a| norm16(h(a[0]), true)),
        o::V_CVT_NORM_U16_F16 => op!([F16] -> B16, |a| norm16(h(a[0]), false)),
        o::V_SAT_PK_U8_I16 => op!([B32] -> B16, |a| {
            let sat8 = |x: u64| (x as u16 as i16).clamp(0, 255) as u64;
            sat8(a[0]) | sat8(a[0] >> 16) << 8
        }),
        o::V_LDEXP_F16 => {
            op!([F16, B32] -> F16, |a| hb((f64::from(h(a[0])) * 2f64.powi(i32_(a[1]).clamp(-64, 64))) as f32))
        }
        // VOP3-only
        o::V_MAD_F32 => op!([F32, F32, F32] -> F32, |a| fb(f(a[0]) * f(a[1]) + f(a[2]))),
        o::V_MAD_I32_I24 => {
            op!([B32, B32, B32] -> B32, |a| (s24(a[0]) * s24(a[1]) + i64::from(i32_(a[2]))) as u64 & 0xffff_ffff)
        }
        o::V_MAD_U32_U24 => {
            op!([B32, B32, B32] -> B32, |a| (u24(a[0]) * u24(a[1]) + a[2]) & 0xffff_ffff)
        }
        o::V_BFE_U32 => op!([B32, B32, B32] -> B32, |a| {
            let (off, wd) = (a[1] & 31, a[2] & 31);
            if wd == 0 { 0 } else { (a[0] >> off) & ((1 << wd) - 1) }
        }),
        o::V_BFE_I32 => op!([B32, B32, B32] -> B32, |a| {
            let (off, wd) = (a[1] & 31, a[2] & 31);
            if wd == 0 { 0 } else { ib(((u(a[0]) >> off) << (32 - wd)) as i32 >> (32 - wd)) }
        }),
        o::V_BFI_B32 => {
            op!([B32, B32, B32] -> B32, |a| (a[0] & a[1]) | (!a[0] & a[2] & 0xffff_ffff))
        }
        o::V_FMA_F32 => op!([F32, F32, F32] -> F32, |a| fb(f(a[0]).mul_add(f(a[1]), f(a[2])))),
        o::V_FMA_F64 => op!([F64, F64, F64] -> F64, |a| db(d(a[0]).mul_add(d(a[1]), d(a[2])))),
        o::V_FMA_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| i64::from(fma16(h(a[0]), h(a[1]), h(a[2]))))
        }),
        o::V_MAD_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| mad16(h(a[0]), h(a[1]), h(a[2])) as i64)
        }),
        o::V_MAD_U16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(false), |a| (a[0] * a[1] + a[2]) as i64)
        }),
        o::V_MAD_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| s16(a[0]) * s16(a[1]) + s16(a[2]))
        }),
        // gfx9's VOP3-only 16-bit minimum, maximum and median of three (LLVM selects them for
        // 8/16-bit min/max chains, e.g. rocPRIM's block scans of `unsigned char` with `maximum`)
        // and the signed 16-bit add/sub (clamp saturates): as the multiply-adds above, op_sel
        // picks the source halves and the destination half, and the other half of D is kept.
        o::V_MIN3_U16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(false), |a| a[0].min(a[1]).min(a[2]) as i64)
        }),
        o::V_MAX3_U16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(false), |a| a[0].max(a[1]).max(a[2]) as i64)
        }),
        o::V_MED3_U16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(false), |a| med3(a[0], a[1], a[2]) as i64)
        }),
        o::V_MIN3_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| s16(a[0]).min(s16(a[1])).min(s16(a[2])))
        }),
        o::V_MAX3_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| s16(a[0]).max(s16(a[1])).max(s16(a[2])))
        }),
        o::V_MED3_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| med3(s16(a[0]), s16(a[1]), s16(a[2])))
        }),
        o::V_MIN3_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| hb(h(a[0]).min(h(a[1])).min(h(a[2]))) as i64)
        }),
        o::V_MAX3_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| hb(h(a[0]).max(h(a[1])).max(h(a[2]))) as i64)
        }),
        o::V_MED3_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| hb(fmed3(h(a[0]), h(a[1]), h(a[2]))) as i64)
        }),
        o::V_ADD_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| s16(a[0]) + s16(a[1]))
        }),
        o::V_SUB_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, Some(true), |a| s16(a[0]) - s16(a[1]))
        }),
        // The VI-era forms (`_legacy` on gfx9): the same sums into D's low half with the high half
        // zeroed (the VI rule; LLVM's zeroesHigh16BitsOfDest relies on it for these); no op_sel.
        o::V_MAD_LEGACY_U16 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| mad16_legacy(w, i, c, false))
        }
        o::V_MAD_LEGACY_I16 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| mad16_legacy(w, i, c, true))
        }
        o::V_DIV_FIXUP_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop16_keep(w, i, c, None, |a| {
                hb(fixup64(f64::from(h(a[0])), f64::from(h(a[1])), f64::from(h(a[2]))) as f32)
                    as i64
            })
        }),
        // D.i32 = S0.i16 * S1.i16 + S2.i32.
        o::V_MAD_I32_I16 => {
            op!([B16, B16, B32] -> B32, |a| (s16(a[0]) * s16(a[1]) + i64::from(i32_(a[2]))) as u64 & 0xffff_ffff)
        }
        o::V_ALIGNBIT_B32 => {
            op!([B32, B32, B32] -> B32, |a| ((a[0] << 32 | a[1]) >> (a[2] & 31)) & 0xffff_ffff)
        }
        o::V_ALIGNBYTE_B32 => {
            op!([B32, B32, B32] -> B32, |a| ((a[0] << 32 | a[1]) >> (8 * (a[2] & 3))) & 0xffff_ffff)
        }
        o::V_MIN3_F32 => op!([F32, F32, F32] -> F32, |a| fb(f(a[0]).min(f(a[1])).min(f(a[2])))),
        o::V_MIN3_I32 => {
            op!([B32, B32, B32] -> B32, |a| ib(i32_(a[0]).min(i32_(a[1])).min(i32_(a[2]))))
        }
        o::V_MIN3_U32 => op!([B32, B32, B32] -> B32, |a| a[0].min(a[1]).min(a[2])),
        o::V_MAX3_F32 => op!([F32, F32, F32] -> F32, |a| fb(f(a[0]).max(f(a[1])).max(f(a[2])))),
        o::V_MAX3_I32 => {
            op!([B32, B32, B32] -> B32, |a| ib(i32_(a[0]).max(i32_(a[1])).max(i32_(a[2]))))
        }
        o::V_MAX3_U32 => op!([B32, B32, B32] -> B32, |a| a[0].max(a[1]).max(a[2])),
        o::V_MED3_F32 => op!([F32, F32, F32] -> F32, |a| fb(fmed3(f(a[0]), f(a[1]), f(a[2])))),
        o::V_MED3_I32 => {
            op!([B32, B32, B32] -> B32, |a| ib(med3(i32_(a[0]), i32_(a[1]), i32_(a[2]))))
        }
        o::V_MED3_U32 => op!([B32, B32, B32] -> B32, |a| med3(a[0], a[1], a[2])),
        o::V_DIV_FIXUP_F32 => {
            op!([F32, F32, F32] -> F32, |a| fb(fixup64(f64::from(f(a[0])), f64::from(f(a[1])), f64::from(f(a[2]))) as f32))
        }
        o::V_DIV_FIXUP_F64 => {
            op!([F64, F64, F64] -> F64, |a| db(fixup64(d(a[0]), d(a[1]), d(a[2]))))
        }
        o::V_DIV_SCALE_F32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| div_scale(w, i, c, false)),
        o::V_DIV_SCALE_F64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| div_scale(w, i, c, true)),
        o::V_DIV_FMAS_F32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| div_fmas(w, i, c, false)),
        o::V_DIV_FMAS_F64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| div_fmas(w, i, c, true)),
        o::V_MAD_U64_U32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| mad64(w, i, c, false)),
        o::V_MAD_I64_I32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| mad64(w, i, c, true)),
        o::V_ADD_F64 => op!([F64, F64] -> F64, |a| db(d(a[0]) + d(a[1]))),
        o::V_MUL_F64 => op!([F64, F64] -> F64, |a| db(d(a[0]) * d(a[1]))),
        o::V_MIN_F64 => op!([F64, F64] -> F64, |a| db(d(a[0]).min(d(a[1])))),
        o::V_MAX_F64 => op!([F64, F64] -> F64, |a| db(d(a[0]).max(d(a[1])))),
        o::V_TRIG_PREOP_F64 => op!([F64, B32] -> F64, |a| db(trig_preop(a[0], u(a[1])))),
        o::V_LDEXP_F64 => op!([F64, B32] -> F64, |a| db(ldexp64(d(a[0]), i32_(a[1])))),
        o::V_LDEXP_F32 => {
            op!([F32, B32] -> F32, |a| fb(ldexp64(f64::from(f(a[0])), i32_(a[1])) as f32))
        }
        o::V_MUL_LO_U32 => op!([B32, B32] -> B32, |a| (a[0] * a[1]) & 0xffff_ffff),
        o::V_MUL_HI_U32 => op!([B32, B32] -> B32, |a| (a[0] * a[1]) >> 32),
        o::V_MUL_HI_I32 => {
            op!([B32, B32] -> B32, |a| ((i64::from(i32_(a[0])) * i64::from(i32_(a[1]))) >> 32) as u64 & 0xffff_ffff)
        }
        o::V_LSHLREV_B64 => op!([B32, B64] -> B64, |a| a[1] << (a[0] & 63)),
        o::V_LSHRREV_B64 => op!([B32, B64] -> B64, |a| a[1] >> (a[0] & 63)),
        o::V_ASHRREV_I64 => op!([B32, I64] -> B64, |a| ((a[1] as i64) >> (a[0] & 63)) as u64),
        o::V_BCNT_U32_B32 => {
            op!([B32, B32] -> B32, |a| (u64::from(u(a[0]).count_ones()) + a[1]) & 0xffff_ffff)
        }
        o::V_MBCNT_LO_U32_B32 => {
            op!([B32, B32] -> B32, |a, l| (u64::from((u(a[0]) & mbcnt_mask(l, false)).count_ones()) + a[1]) & 0xffff_ffff)
        }
        o::V_MBCNT_HI_U32_B32 => {
            op!([B32, B32] -> B32, |a, l| (u64::from((u(a[0]) & mbcnt_mask(l, true)).count_ones()) + a[1]) & 0xffff_ffff)
        }
        o::V_BFM_B32 => {
            op!([B32, B32] -> B32, |a| ub(((1u64 << (a[0] & 31)) - 1) as u32) << (a[1] & 31) & 0xffff_ffff)
        }
        o::V_LSHL_ADD_U32 => {
            op!([B32, B32, B32] -> B32, |a| ((a[0] << (a[1] & 31)) + a[2]) & 0xffff_ffff)
        }
        o::V_ADD_LSHL_U32 => {
            op!([B32, B32, B32] -> B32, |a| (((a[0] + a[1]) & 0xffff_ffff) << (a[2] & 31)) & 0xffff_ffff)
        }
        o::V_ADD3_U32 => op!([B32, B32, B32] -> B32, |a| (a[0] + a[1] + a[2]) & 0xffff_ffff),
        o::V_LSHL_OR_B32 => {
            op!([B32, B32, B32] -> B32, |a| ((a[0] << (a[1] & 31)) & 0xffff_ffff) | a[2])
        }
        o::V_AND_OR_B32 => op!([B32, B32, B32] -> B32, |a| (a[0] & a[1]) | a[2]),
        o::V_OR3_B32 => op!([B32, B32, B32] -> B32, |a| a[0] | a[1] | a[2]),
        o::V_XAD_U32 => op!([B32, B32, B32] -> B32, |a| ((a[0] ^ a[1]) + a[2]) & 0xffff_ffff),
        o::V_PERM_B32 => op!([B32, B32, B32] -> B32, |a| ub(perm(u(a[0]), u(a[1]), u(a[2])))),
        o::V_ADD_I32 => {
            sat!([B32, B32] -> B32, 32, true, |a| i64::from(i32_(a[0])) + i64::from(i32_(a[1])))
        }
        o::V_SUB_I32 => {
            sat!([B32, B32] -> B32, 32, true, |a| i64::from(i32_(a[0])) - i64::from(i32_(a[1])))
        }
        o::V_CVT_PKRTZ_F16_F32 => op!([F32, F32] -> B32, |a| {
            let rtz = |x: f32| {
                let r = hb(x);
                // Round toward zero: step back when rounding went away from zero.
                if (h(r).abs() > x.abs()) && x.is_finite() { r - 1 } else { r }
            };
            rtz(f(a[0])) | rtz(f(a[1])) << 16
        }),
        o::V_PACK_B32_F16 => op!([F16, F16] -> B32, |a| (a[0] & 0xffff) | (a[1] & 0xffff) << 16),
        o::V_MAD_U32_U16 => {
            op!([B16, B16, B32] -> B32, |a| ((a[0] & 0xffff) * (a[1] & 0xffff) + a[2]) & 0xffff_ffff)
        }
        // Legacy multiplies (DX9: 0 * anything = +0), the add after it IEEE.
        o::V_MUL_LEGACY_F32 => op!([F32, F32] -> F32, |a| fb(mul_legacy(f(a[0]), f(a[1])))),
        o::V_MAD_LEGACY_F32 => {
            op!([F32, F32, F32] -> F32, |a| fb(mul_legacy(f(a[0]), f(a[1])) + f(a[2])))
        }
        // Packing conversions: S0 into the low half, S1 into the high half.
        o::V_CVT_PKNORM_I16_F32 => {
            op!([F32, F32] -> B32, |a| norm16(f(a[0]), true) | norm16(f(a[1]), true) << 16)
        }
        o::V_CVT_PKNORM_U16_F32 => {
            op!([F32, F32] -> B32, |a| norm16(f(a[0]), false) | norm16(f(a[1]), false) << 16)
        }
        o::V_CVT_PKNORM_I16_F16 => {
            op!([F16, F16] -> B32, |a| norm16(h(a[0]), true) | norm16(h(a[1]), true) << 16)
        }
        o::V_CVT_PKNORM_U16_F16 => {
            op!([F16, F16] -> B32, |a| norm16(h(a[0]), false) | norm16(h(a[1]), false) << 16)
        }
        // Saturating (Mesa lowers its clamping pack_uint_2x16/pack_sint_2x16 to these).
        o::V_CVT_PK_U16_U32 => {
            op!([B32, B32] -> B32, |a| a[0].min(0xffff) | a[1].min(0xffff) << 16)
        }
        o::V_CVT_PK_I16_I32 => op!([B32, B32] -> B32, |a| {
            let s = |x: u64| u64::from(i32_(x).clamp(-32768, 32767) as u16);
            s(a[0]) | s(a[1]) << 16
        }),
        // D = S2 with byte S1[1:0] replaced by S0 converted to u8.
        o::V_CVT_PK_U8_F32 => op!([F32, B32, B32] -> B32, |a| {
            let sh = 8 * (a[1] & 3);
            (a[2] & !(0xff << sh) & 0xffff_ffff) | u64::from(f32_to_u8(f(a[0]))) << sh
        }),
        // Sums of absolute differences; the 32-bit sums wrap ("overflow into the upper bits is
        // allowed").
        o::V_SAD_U8 => {
            noclamp!([B32, B32, B32] -> B32, |a| ub(sad8(u(a[0]), u(a[1]), false).wrapping_add(u(a[2]))))
        }
        o::V_SAD_HI_U8 => {
            noclamp!([B32, B32, B32] -> B32, |a| ub((sad8(u(a[0]), u(a[1]), false) << 16).wrapping_add(u(a[2]))))
        }
        o::V_SAD_U16 => noclamp!([B32, B32, B32] -> B32, |a| {
            let (x, y) = (u(a[0]), u(a[1]));
            ub(absdiff(x & 0xffff, y & 0xffff).wrapping_add(absdiff(x >> 16, y >> 16)).wrapping_add(u(a[2])))
        }),
        o::V_SAD_U32 => {
            noclamp!([B32, B32, B32] -> B32, |a| ub(absdiff(u(a[0]), u(a[1])).wrapping_add(u(a[2]))))
        }
        o::V_MSAD_U8 => {
            noclamp!([B32, B32, B32] -> B32, |a| ub(sad8(u(a[0]), u(a[1]), true).wrapping_add(u(a[2]))))
        }
        o::V_QSAD_PK_U16_U8 => {
            noclamp!([B64, B32, B64] -> B64, |a| qsad16(a[0], u(a[1]), a[2], false))
        }
        o::V_MQSAD_PK_U16_U8 => {
            noclamp!([B64, B32, B64] -> B64, |a| qsad16(a[0], u(a[1]), a[2], true))
        }
        o::V_MQSAD_U32_U8 => Some(mqsad32),
        // f16 multiply-adds: v_mac_f16 (D = S0 * S1 + D), v_madmk_f16 (VOP2 0x24: D = S0 * K +
        // S1), v_madak_f16 (0x25: D = S0 * S1 + K), K the literal's low 16 bits.
        o::V_MAC_F16 => acc!([F16, F16, F16] -> F16, |a| mad16(h(a[0]), h(a[1]), h(a[2]))),
        0x124 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = h(u64::from(i.literal));
            vop(w, i, c, &[F16, F16], F16, |a, _| mad16(h(a[0]), k, h(a[1])))
        }),
        0x125 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = h(u64::from(i.literal));
            vop(w, i, c, &[F16, F16], F16, |a, _| mad16(h(a[0]), h(a[1]), k))
        }),
        // v_pk_fmac_f16 (VOP2 0x3c): each half of D = fma(S0's half, S1's half, D's half).
        0x13c => acc!([B32, B32, B32] -> B32, |a| {
            let half = |x: u64, k: u32| hf((x as u32 >> (16 * k)) & 0xffff);
            u64::from(fma16(half(a[0], 0), half(a[1], 0), half(a[2], 0)) | fma16(half(a[0], 1), half(a[1], 1), half(a[2], 1)) << 16)
        }),
        _ => None,
    }
}

/// Source `k` of a packed 32-bit op: a register pair, or an inline constant as a 32-bit float in
/// the low dword and zero in the high one (the compiler selects the low dword for both halves
/// with `op_sel_hi` when it wants the constant in both: `v_pk_fma_f32 v[0:1], v[0:1], 2.0, 1.0
/// op_sel_hi:[1,0,0]`).
fn pk_src(w: &Wave, i: &Inst, k: usize, c: &Ctx) -> super::valu::Src {
    let constant = crate::isa::operand::inline_constant(i.src[k], F32).is_some();
    super::valu::Src::new(w, i, k, if constant { F32 } else { B64 }, c)
}

/// Packed 32-bit float ops (gfx90a `v_pk_*_f32`): each half picks its source registers of a
/// pair by `op_sel` (low result) and `op_sel_hi` (high result).
fn pk_f32(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    n: usize,
    g: fn(&[f32; 3]) -> f32,
) -> Result<Step, ExecError> {
    // Sources past `n` are resolved too (never read): an array, not a per-instruction Vec.
    let s: [super::valu::Src; 3] = std::array::from_fn(|k| pk_src(w, i, k, c));
    for l in lanes(w.exec()) {
        let mut r = 0u64;
        for half in 0..2 {
            let mut a = [0f32; 3];
            for k in 0..n {
                let v = s[k].raw(w, l);
                let sel = if half == 0 { i.op_sel >> k & 1 } else { i.op_sel_hi >> k & 1 };
                let mut x = (v >> (32 * sel)) as u32;
                let neg = if half == 0 { i.neg } else { i.abs };
                if neg >> k & 1 == 1 {
                    x ^= 1 << 31;
                }
                a[k] = f32::from_bits(x);
            }
            r |= u64::from(g(&a).to_bits()) << (32 * half);
        }
        super::valu::write(w, i, B64, l, r);
    }
    Ok(Step::Next)
}

/// Packed 16-bit ops: each half of the result from the halves `op_sel`/`op_sel_hi` pick.
fn pk16(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    n: usize,
    float: bool,
    g: fn(&[u32; 3]) -> u32,
) -> Result<Step, ExecError> {
    let s: [super::valu::Src; 3] =
        std::array::from_fn(|k| super::valu::Src::new(w, i, k, if float { F16 } else { B16 }, c));
    // An integer inline constant is a 32-bit value here (-2 is 0xfffffffe): op_sel_hi picks its
    // upper 16 bits (LLVM encodes the v2i16 <-2, -1> as the inline -2 with op_sel_hi set).
    // (Integer ops only: the f16 ops keep the constant in the low half, as before.)
    let int_const: [Option<u32>; 3] = std::array::from_fn(|k| match i.src[k] {
        c @ 128..=208 if !float => crate::isa::operand::inline_constant(c, B32).map(|v| v as u32),
        _ => None,
    });
    for l in lanes(w.exec()) {
        let mut r = 0u32;
        for half in 0..2 {
            let mut a = [0u32; 3];
            for k in 0..n {
                let v = int_const[k].unwrap_or_else(|| s[k].raw(w, l) as u32);
                let sel = if half == 0 { i.op_sel >> k & 1 } else { i.op_sel_hi >> k & 1 };
                let mut x = (v >> (16 * u32::from(sel))) & 0xffff;
                let neg = if half == 0 { i.neg } else { i.abs };
                if float && neg >> k & 1 == 1 {
                    x ^= 0x8000;
                }
                a[k] = x;
            }
            r |= (g(&a) & 0xffff) << (16 * half);
        }
        super::valu::write(w, i, B32, l, u64::from(r));
    }
    Ok(Step::Next)
}

/// The elements of a dot product's packed source (`n` of `bits` bits each, signed or not),
/// after VOP3P's half selection for 16-bit elements: the low element from the half `op_sel`
/// picks, the high one from the half `op_sel_hi` picks.
fn dot_elems(v: u32, k: usize, i: &Inst, bits: u32, signed: bool) -> [i64; 8] {
    let v = if bits == 16 && i.family == crate::isa::decode::Family::Vop3p {
        let half = |sel: u8| (v >> (16 * u32::from(sel >> k & 1))) & 0xffff;
        half(i.op_sel) | half(i.op_sel_hi) << 16
    } else {
        v
    };
    let mut e = [0i64; 8];
    for (x, o) in e.iter_mut().enumerate().take((32 / bits) as usize) {
        let f = (v >> (bits * x as u32)) & ((1u32 << (bits - 1)) << 1).wrapping_sub(1);
        *o = if signed {
            i64::from(((f << (32 - bits)) as i32) >> (32 - bits))
        } else {
            i64::from(f)
        };
    }
    e
}

/// An integer dot product `sum(S0[x] * S1[x]) + S2` of `bits`-bit elements; `clamp` saturates.
fn dot_int(a: &[u64; 3], i: &Inst, bits: u32, signed: bool) -> u64 {
    let (x, y) =
        (dot_elems(a[0] as u32, 0, i, bits, signed), dot_elems(a[1] as u32, 1, i, bits, signed));
    let acc = if signed { i64::from(a[2] as u32 as i32) } else { i64::from(a[2] as u32) };
    let sum = x.iter().zip(&y).map(|(p, q)| p * q).sum::<i64>() + acc;
    let r = if !i.clamp {
        sum
    } else if signed {
        sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
    } else {
        sum.clamp(0, i64::from(u32::MAX))
    };
    u64::from(r as u32)
}

/// `v_dot2_f32_f16`/`v_dot2c_f32_f16`: `S0.f16[0] * S1.f16[0] + S0.f16[1] * S1.f16[1] + S2.f32`,
/// rounded once to f32. `p`: the VOP3P instruction, whose `op_sel`/`op_sel_hi` pick the halves
/// and `neg_lo`/`neg_hi` negate them (S2's `neg` is applied by its source); None for VOP2.
fn dot2_f16(a: &[u64; 3], p: Option<&Inst>) -> u64 {
    let half = |k: usize, hi: bool| {
        let v = a[k] as u32;
        let (sel, neg) = match p {
            None => (u32::from(hi), false),
            Some(i) if hi => (u32::from(i.op_sel_hi >> k & 1), i.abs >> k & 1 == 1),
            Some(i) => (u32::from(i.op_sel >> k & 1), i.neg >> k & 1 == 1),
        };
        let x = f64::from(hf((v >> (16 * sel)) & 0xffff));
        if neg {
            -x
        } else {
            x
        }
    };
    let r = (half(0, false) * half(1, false) + half(0, true) * half(1, true) + f64::from(f(a[2])))
        as f32;
    fb(if p.is_some_and(|i| i.clamp) {
        if r.is_nan() {
            0.0
        } else {
            r.clamp(0.0, 1.0)
        }
    } else {
        r
    })
}

/// `v_fma_mix*`: each source an f32 (op_sel_hi clear) or the f16 half op_sel picks (set),
/// `neg_hi` as `|x|` and `neg_lo` as `-x`; D = fma in f32, then (`mixlo`/`mixhi`) rounded to
/// f16 into one half of D, keeping the other.
fn fma_mix(w: &mut Wave, i: &Inst, c: &mut Ctx, out: Option<bool>) -> Result<Step, ExecError> {
    let f16 = |k: usize| i.op_sel_hi >> k & 1 == 1;
    let s: [super::valu::Src; 3] =
        std::array::from_fn(|k| super::valu::Src::new(w, i, k, if f16(k) { F16 } else { F32 }, c));
    for l in lanes(w.exec()) {
        let mut x = [0f32; 3];
        for k in 0..3 {
            let v = s[k].raw(w, l) as u32;
            let mut y = if f16(k) {
                hf((v >> (16 * u32::from(i.op_sel >> k & 1))) & 0xffff)
            } else {
                f32::from_bits(v)
            };
            if i.abs >> k & 1 == 1 {
                y = y.abs();
            }
            if i.neg >> k & 1 == 1 {
                y = -y;
            }
            x[k] = y;
        }
        let mut r = x[0].mul_add(x[1], x[2]);
        if i.clamp {
            r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
        }
        let v = match out {
            None => r.to_bits(),
            Some(hi) => {
                let old = w.reg(i.dst, l);
                let h = hbits(r);
                if hi {
                    (old & 0xffff) | h << 16
                } else {
                    (old & 0xffff_0000) | h
                }
            }
        };
        super::valu::write(w, i, B32, l, u64::from(v));
    }
    Ok(Step::Next)
}

/// A signed 16-bit value saturated to its range, as the half's bits.
fn s16sat(x: i32) -> u32 {
    x.clamp(-32768, 32767) as u16 as u32
}

fn hf(x: u32) -> f32 {
    h(u64::from(x))
}
fn hbits(x: f32) -> u32 {
    hb(x) as u32
}

/// `v_dot4*`/`v_dot8*` (VOP3P): 8- and 4-bit elements take no half selection; an `op_sel` or
/// `op_sel_hi` other than the defaults (0 and all set) has no defined meaning and is refused.
fn dot_packed(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    bits: u32,
    signed: bool,
) -> Result<Step, ExecError> {
    if i.op_sel & 7 != 0 || i.op_sel_hi != 7 || i.neg != 0 || i.abs != 0 {
        return Err(ExecError::Unimplemented);
    }
    vop(w, i, c, &[B32, B32, B32], B32, |a, _| dot_int(a, i, bits, signed))
}

/// A VOP3P opcode's handler.
pub fn vop3p(op: u16) -> Option<Handler> {
    macro_rules! pk {
        ($n:expr, $float:expr, |$a:ident| $e:expr) => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                pk16(w, i, c, $n, $float, |$a: &[u32; 3]| $e)
            })
        };
    }
    macro_rules! pk_sat {
        (|$a:ident| $wrap:expr, |$b:ident| $sat:expr) => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                let g: fn(&[u32; 3]) -> u32 =
                    if i.clamp { |$b: &[u32; 3]| $sat } else { |$a: &[u32; 3]| $wrap };
                pk16(w, i, c, 2, false, g)
            })
        };
    }
    match op {
        p::V_PK_FMA_F32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            pk_f32(w, i, c, 3, |a| a[0].mul_add(a[1], a[2]))
        }),
        p::V_PK_MUL_F32 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| pk_f32(w, i, c, 2, |a| a[0] * a[1]))
        }
        p::V_PK_ADD_F32 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| pk_f32(w, i, c, 2, |a| a[0] + a[1]))
        }
        // D.lo = src0's dword op_sel[0], D.hi = src1's dword op_sel[1] (bits moved unchanged).
        p::V_PK_MOV_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let s0 = pk_src(w, i, 0, c);
            let s1 = pk_src(w, i, 1, c);
            for l in lanes(w.exec()) {
                let lo = s0.raw(w, l) >> (32 * u32::from(i.op_sel & 1)) & 0xffff_ffff;
                let hi = s1.raw(w, l) >> (32 * u32::from(i.op_sel >> 1 & 1)) & 0xffff_ffff;
                super::valu::write(w, i, B64, l, lo | hi << 32);
            }
            Ok(Step::Next)
        }),
        // clamp saturates each half (unsigned or signed 16-bit range).
        p::V_PK_ADD_U16 => pk_sat!(|a| a[0].wrapping_add(a[1]), |a| (a[0] + a[1]).min(0xffff)),
        p::V_PK_SUB_U16 => pk_sat!(|a| a[0].wrapping_sub(a[1]), |a| a[0].saturating_sub(a[1])),
        p::V_PK_ADD_I16 => pk_sat!(|a| a[0].wrapping_add(a[1]), |a| s16sat(
            i32::from(a[0] as u16 as i16) + i32::from(a[1] as u16 as i16)
        )),
        p::V_PK_SUB_I16 => pk_sat!(|a| a[0].wrapping_sub(a[1]), |a| s16sat(
            i32::from(a[0] as u16 as i16) - i32::from(a[1] as u16 as i16)
        )),
        p::V_PK_MUL_LO_U16 => pk!(2, false, |a| a[0].wrapping_mul(a[1])),
        p::V_PK_LSHLREV_B16 => pk!(2, false, |a| a[1] << (a[0] & 15)),
        p::V_PK_LSHRREV_B16 => pk!(2, false, |a| a[1] >> (a[0] & 15)),
        p::V_PK_ASHRREV_I16 => {
            pk!(2, false, |a| u32::from(((a[1] as u16 as i16) >> (a[0] & 15)) as u16))
        }
        p::V_PK_MAX_U16 => pk!(2, false, |a| a[0].max(a[1])),
        p::V_PK_MIN_U16 => pk!(2, false, |a| a[0].min(a[1])),
        p::V_PK_MAX_I16 => {
            pk!(2, false, |a| u32::from((a[0] as u16 as i16).max(a[1] as u16 as i16) as u16))
        }
        p::V_PK_MIN_I16 => {
            pk!(2, false, |a| u32::from((a[0] as u16 as i16).min(a[1] as u16 as i16) as u16))
        }
        p::V_PK_MAD_U16 => pk!(3, false, |a| a[0].wrapping_mul(a[1]).wrapping_add(a[2])),
        p::V_PK_MAD_I16 => pk!(3, false, |a| a[0].wrapping_mul(a[1]).wrapping_add(a[2])),
        p::V_PK_FMA_F16 => pk!(3, true, |a| hbits(hf(a[0]).mul_add(hf(a[1]), hf(a[2])))),
        p::V_PK_ADD_F16 => pk!(2, true, |a| hbits(hf(a[0]) + hf(a[1]))),
        p::V_PK_MUL_F16 => pk!(2, true, |a| hbits(hf(a[0]) * hf(a[1]))),
        p::V_PK_MIN_F16 => pk!(2, true, |a| hbits(hf(a[0]).min(hf(a[1])))),
        p::V_PK_MAX_F16 => pk!(2, true, |a| hbits(hf(a[0]).max(hf(a[1])))),
        p::V_ACCVGPR_READ_B32 | p::V_ACCVGPR_WRITE_B32 => op!([B32] -> B32, |a| a[0]),
        p::V_DOT2_F32_F16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop(w, i, c, &[B32, B32, F32], F32, |a, _| dot2_f16(a, Some(i)))
        }),
        p::V_DOT2_I32_I16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop(w, i, c, &[B32, B32, B32], B32, |a, _| dot_int(a, i, 16, true))
        }),
        p::V_DOT2_U32_U16 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            vop(w, i, c, &[B32, B32, B32], B32, |a, _| dot_int(a, i, 16, false))
        }),
        p::V_DOT4_I32_I8 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_packed(w, i, c, 8, true))
        }
        p::V_DOT4_U32_U8 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_packed(w, i, c, 8, false))
        }
        p::V_DOT8_I32_I4 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_packed(w, i, c, 4, true))
        }
        p::V_DOT8_U32_U4 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| dot_packed(w, i, c, 4, false))
        }
        p::V_FMA_MIX_F32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| fma_mix(w, i, c, None)),
        p::V_FMA_MIXLO_F16 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| fma_mix(w, i, c, Some(false)))
        }
        p::V_FMA_MIXHI_F16 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| fma_mix(w, i, c, Some(true)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::decode::Family;
    use crate::isa::lds::Lds;
    use crate::isa::memory::Memory;
    use crate::isa::operand;
    use crate::sys::devmem::fake::FakeMemory;

    /// f64 sources that are not VGPRs (an SGPR pair, an inline constant, the literal, which
    /// is an f64's high dword) of opcodes with 32-bit results: the whole 64-bit value is read.
    /// The 32-bit VALU path once splatted such a constant's low dword, so `v_cvt_i32_f64 v1,
    /// s[0:1]` of 2.0 (low dword 0) gave 0: rocSOLVER's bdsqr reads its block count that way
    /// and never iterated (BDSQR/GESVD in double: info = n - 2, every test of size 15 and up).
    /// Integer `clamp` saturates. The first case is rocPRIM's merge path
    /// (`v_sub_u32_e64 v7, v1, s6 clamp`, encoding D1358007 00000D01 from its gfx90a code
    /// object): `max(diagonal - size_b, 0)`; without saturation lane 0 got 0xfffffffc and the
    /// merge read past its inputs (rocThrust's merge and async sort).
    #[test]
    fn integer_clamp_saturates_adds_and_subtracts() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let i = crate::isa::decode::decode(&[0xD135_8007, 0x0000_0D01]).unwrap();
        assert!(i.clamp && i.e64);
        let mut w = Wave::new(8, 0, 0);
        w.set_exec(u64::MAX);
        w.s[6] = 4;
        for l in 0..crate::isa::wave::LANES {
            w.set_reg(operand::VGPR0 + 1, l, 16 * l as u32);
        }
        valu(i.op).expect("implemented")(&mut w, &i, &mut ctx).unwrap();
        assert_eq!(w.reg(operand::VGPR0 + 7, 0), 0, "0 - 4 saturates to 0");
        assert_eq!(w.reg(operand::VGPR0 + 7, 1), 12);
        // Each saturating opcode at its bounds, with and without clamp: (op, a, b, clamped,
        // wrapped).
        let cases: [(u16, u32, u32, u32, u32); 12] = [
            (o::V_ADD_U32, 0xffff_fff0, 0x20, 0xffff_ffff, 0x10),
            (o::V_SUB_U32, 3, 5, 0, 0xffff_fffe),
            (o::V_SUBREV_U32, 5, 3, 0, 0xffff_fffe),
            (o::V_ADD_I32, 0x7fff_fff0, 0x20, 0x7fff_ffff, 0x8000_0010),
            (o::V_SUB_I32, 0x8000_0000, 1, 0x8000_0000, 0x7fff_ffff),
            (o::V_ADD_U16, 0xfff0, 0x20, 0xffff, 0x10),
            (o::V_SUB_U16, 3, 5, 0, 0xfffe),
            (o::V_SUBREV_U16, 5, 3, 0, 0xfffe),
            (o::V_ADD_CO_U32, 0xffff_fff0, 0x20, 0xffff_ffff, 0x10),
            (o::V_SUB_CO_U32, 3, 5, 0, 0xffff_fffe),
            (o::V_SUBREV_CO_U32, 5, 3, 0, 0xffff_fffe),
            (o::V_ADD_I32, 5, 7, 12, 12),
        ];
        for (op, a, b, clamped, wrapped) in cases {
            for clamp in [true, false] {
                let mut i = Inst::probe(Family::Vop3, op);
                i.e64 = true;
                i.clamp = clamp;
                i.dst = operand::VGPR0 + 2;
                i.sdst = 10;
                i.src = [operand::VGPR0, operand::VGPR0 + 1, 0, 0];
                let mut w = Wave::new(4, 0, 0);
                w.set_exec(u64::MAX);
                w.set_reg(operand::VGPR0, 3, a);
                w.set_reg(operand::VGPR0 + 1, 3, b);
                valu(op).expect("implemented")(&mut w, &i, &mut ctx).unwrap();
                let want = if clamp { clamped } else { wrapped };
                assert_eq!(w.reg(i.dst, 3), want, "{op:#x} {a:#x}, {b:#x} clamp {clamp}");
            }
        }
    }

    /// A packed 16-bit integer op reads an integer inline constant as its 32-bit value, so
    /// op_sel_hi picks the sign extension: rocPRIM's reduce_by_key computes two item indices
    /// with `v_pk_sub_u16 v62, v66, -2 op_sel_hi:[0,1]` (D38B403E 10018542, from its gfx90a
    /// code object), low half x + 2 and high half x + 1. Read as the 16-bit 0xfffe with a zero
    /// high half, the high index was x and an item past the input counted as a segment head
    /// (reduce_by_key and run_length_encode with struct keys: 2 unique keys of 1).
    #[test]
    fn packed_integer_ops_read_an_inline_constant_as_32_bits() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let i = crate::isa::decode::decode(&[0xD38B_403E, 0x1001_8542]).unwrap();
        assert_eq!((i.name, i.op_sel & 3, i.op_sel_hi & 3), ("v_pk_sub_u16", 0, 2));
        let mut w = Wave::new(70, 0, 0);
        w.set_exec(u64::MAX);
        w.set_reg(operand::VGPR0 + 66, 5, 0x0ef1);
        vop3p(i.op).expect("implemented")(&mut w, &i, &mut ctx).unwrap();
        assert_eq!(w.reg(operand::VGPR0 + 62, 5), 0x0ef2_0ef3, "high x + 1, low x + 2");
    }

    #[test]
    fn f64_scalar_sources_of_32_bit_results_are_read_whole() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let values = [2.0f64, -3.75, 1e9 + 0.5, 4_000_000_000.0, 0.1];
        type Want = fn(f64) -> u32;
        let ops: [(u16, Want); 4] = [
            (o::V_CVT_I32_F64, |x| x as i32 as u32),
            (o::V_CVT_U32_F64, |x| x as u32),
            (o::V_CVT_F32_F64, |x| (x as f32).to_bits()),
            (o::V_FREXP_EXP_I32_F64, |x| frexp64(x).1 as u32),
        ];
        for (op, want) in ops {
            let h = valu(op).expect("implemented");
            for (e64, family) in [(false, Family::Vop1), (true, Family::Vop3)] {
                let mut i = Inst::probe(family, op);
                i.e64 = e64;
                i.dst = operand::VGPR0 + 1;
                for &x in &values {
                    // An SGPR pair.
                    let mut w = Wave::new(4, 0, 0);
                    w.set_exec(u64::MAX);
                    w.set_s64(4, x.to_bits());
                    i.src = [4, 0, 0, 0];
                    h(&mut w, &i, &mut ctx).unwrap();
                    assert_eq!(w.reg(i.dst, 0), want(x), "{op:#x} e64 {e64} of s[4:5] = {x}");
                    assert_eq!(w.reg(i.dst, 63), want(x));
                }
                // The inline constant 2.0 (code 244) and -4.0 (247): as f64s.
                for (code, x) in [(244u16, 2.0f64), (247, -4.0)] {
                    let mut w = Wave::new(4, 0, 0);
                    w.set_exec(u64::MAX);
                    i.src = [code, 0, 0, 0];
                    h(&mut w, &i, &mut ctx).unwrap();
                    assert_eq!(w.reg(i.dst, 5), want(x), "{op:#x} e64 {e64} of constant {x}");
                }
                // A literal is an f64's high dword: 0x40080000 is 3.0.
                let mut w = Wave::new(4, 0, 0);
                w.set_exec(u64::MAX);
                i.src = [operand::LITERAL, 0, 0, 0];
                i.literal = 0x4008_0000;
                h(&mut w, &i, &mut ctx).unwrap();
                assert_eq!(w.reg(i.dst, 0), want(3.0), "{op:#x} e64 {e64} of a literal");
            }
        }
    }

    // Expected bits from mpmath (2/pi at 1500 bits, segments cut as the ISA's pseudocode says).
    #[test]
    fn trig_preop_takes_segments_of_two_over_pi() {
        let one = 1.0f64.to_bits();
        let big = 2f64.powi(100).to_bits(); // exponent 1123: 46 more bits in
        let cases = [
            (one, 0, 0x3fe4_5f30_6dc9_c882u64),
            (one, 1, 0x3c94_a7f0_9d5f_47d4),
            (one, 2, 0x394a_6ee0_6db1_4acc),
            (big, 0, 0x3cb5_29fc_2757_d1e0),
            (big, 3, 0x32f6_3abd_ebbc_5618),
        ];
        for (x, sel, want) in cases {
            assert_eq!(trig_preop(x, sel).to_bits(), want, "x {x:#x} sel {sel}");
        }
        // Past the table's 1201 bits only zeros remain.
        assert_eq!(trig_preop(one, 31), 0.0);
    }

    /// `v_ldexp_f64` is `S0 * 2^S1` rounded once: infinities, zeros and NaNs stay whatever the
    /// exponent (the interpreter once multiplied in two steps by 2^(S1/2): inf * 0 = NaN for
    /// ldexp(inf, -2000), 0 * inf for ldexp(0, 2200), found by tools/emu/isa-gen/trace_check.py
    /// on fp64_math built with -ffp-contract=fast), and a denormal result is rounded once.
    /// Normal operands with normal results (the exponent-field shortcut): the exact product by
    /// the power of two, computed in two exact steps.
    #[test]
    fn ldexp_f64_of_normal_values_is_the_exact_product() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x & !(0x7ff << 52) | (1 + (x >> 40) % 2046) << 52);
            let e = (x % 4400) as i32 - 2200;
            let (e1, e2) = (e / 2, e - e / 2);
            let half = v * 2f64.powi(e1);
            let want = half * 2f64.powi(e2);
            if half.is_normal() && want.is_normal() {
                assert_eq!(ldexp64(v, e).to_bits(), want.to_bits(), "{v:e} * 2^{e}");
            }
        }
        assert_eq!(ldexp64(1.5, -1022), 1.5 * 2f64.powi(-1022));
        assert_eq!(ldexp64(1.0, -1023), 2f64.powi(-1023)); // a denormal result: the full path
        assert_eq!(ldexp64(1.0, 1024), f64::INFINITY);
    }

    #[test]
    fn ldexp_f64_rounds_once_and_keeps_infinities_and_zeros() {
        for e in [-3000, -2000, -1100, -5, 0, 5, 1100, 2000, 3000, i32::MIN, i32::MAX] {
            for x in [f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0] {
                let r = ldexp64(x, e);
                assert_eq!(r.to_bits(), x.to_bits(), "ldexp({x}, {e})");
            }
            assert!(ldexp64(f64::NAN, e).is_nan());
        }
        // (1 + 2^-15 + 2^-52) 2^-1000 * 2^-60: just above the tie between the denormals 2^14
        // and 2^14 + 1 (units of 2^-1074): up. In two steps of 2^-30 the first rounding drops
        // the 2^-52 and the second sees a tie, which goes to the even 2^14.
        let x = (1.0 + 2f64.powi(-15) + 2f64.powi(-52)) * 2f64.powi(-1000);
        assert_eq!(ldexp64(x, -60).to_bits(), (1 << 14) + 1);
        assert_eq!(ldexp64(-x, -60).to_bits(), 1 << 63 | ((1 << 14) + 1));
        // Against one multiplication by the exact power 2^e (one rounding), over the range.
        let pow2 = |e: i32| {
            f64::from_bits(if e >= -1022 { ((e + 1023) as u64) << 52 } else { 1 << (e + 1074) })
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let x = f64::from_bits((seed & !(0x7ffu64 << 52)) | (((seed >> 20) % 2047) << 52));
            let e = ((seed >> 40) % 2098) as i32 - 1074;
            assert_eq!(ldexp64(x, e).to_bits(), (x * pow2(e)).to_bits(), "ldexp({x:e}, {e})");
        }
        assert_eq!(ldexp64(1.5, 1024), f64::INFINITY);
        assert_eq!(ldexp64(1.5, 1023), 1.5 * 2f64.powi(1023));
        assert_eq!(ldexp64(0.75, 1024), 0.75 * 2f64.powi(1023) * 2.0);
        assert_eq!(ldexp64(2f64.powi(-1074), 1074 + 1023), 2f64.powi(1023));
    }

    /// The shortcut without divisions gives what the branches give, on operands whose
    /// exponents lie all over the range and at the shortcut's edges (either operand as S0).
    #[test]
    fn div_scale_f64_shortcut_agrees_with_the_branches() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0u64, 1, 2, 52, 53, 54, 700, 1023, 1800, 2043, 2044, 2045, 2046, 2047];
        for round in 0..200_000 {
            let operand = |r: u64| {
                let e = if r.is_multiple_of(3) {
                    edges[(r >> 8) as usize % edges.len()]
                } else {
                    r >> 20 & 0x7ff
                };
                f64::from_bits((r & (1 << 63 | ((1 << 52) - 1))) | e << 52)
            };
            let (den, num) = (operand(next()), operand(next()));
            let s0 = if round % 2 == 0 { den } else { num };
            let (a, b) = (div_scale_f64(s0, den, num), div_scale_f64_full(s0, den, num));
            assert!(
                a.1 == b.1 && (a.0.to_bits() == b.0.to_bits() || (a.0.is_nan() && b.0.is_nan())),
                "den {den:e} num {num:e} s0 {s0:e}: {a:?} vs {b:?}"
            );
        }
    }

    /// Every branch of the CDNA ISA's V_DIV_SCALE_F64 pseudocode, with S0 the denominator and
    /// with S0 the numerator: (S0 is den, num, den, want D with S0 = den, want D with S0 = num,
    /// want VCC).
    #[test]
    fn div_scale_f64_follows_the_isa_pseudocode() {
        let p = |e: i32| 2f64.powi(e);
        let up = |x: f64| x * p(64) * p(64);
        let down = |x: f64| x * p(-64) * p(-64);
        #[allow(clippy::type_complexity)]
        let cases: [(&str, f64, f64, Option<(f64, f64)>, bool); 8] = [
            // An ordinary quotient: nothing is scaled.
            ("ordinary", 7.0, 3.0, Some((7.0, 3.0)), false),
            // exponent(S2) - exponent(S1) >= 768: only the denominator, VCC.
            ("near max", p(-100), p(700), Some((up(p(-100)), p(700))), true),
            // A denormal denominator: both scaled, no VCC.
            ("denormal den", p(-1030), p(-300), Some((up(p(-1030)), up(p(-300)))), false),
            // 1/den and num/den both denormal: only the denominator, VCC.
            (
                "tiny rcp and quotient",
                1.5 * p(1023),
                p(-40),
                Some((up(1.5 * p(1023)), p(-40))),
                true,
            ),
            // 1/den denormal alone: both scaled down.
            ("tiny rcp", 1.5 * p(1023), p(1000), Some((down(1.5 * p(1023)), down(p(1000)))), false),
            // A denormal quotient: only the numerator, VCC.
            ("denormal quotient", p(30), p(-1000), Some((p(30), up(p(-1000)))), true),
            // exponent(S2) <= 53 (a numerator below 2^-970) with a normal quotient: both.
            ("tiny numerator", p(-20), p(-980), Some((up(p(-20)), up(p(-980)))), false),
            // A zero numerator: NaN.
            ("zero", 3.0, 0.0, None, false),
        ];
        for (name, den, num, want, vcc) in cases {
            let (d_den, v_den) = div_scale_f64(den, den, num);
            let (d_num, v_num) = div_scale_f64(num, den, num);
            match want {
                Some((wd, wn)) => {
                    assert_eq!((d_den, d_num), (wd, wn), "{name}: D with S0 = den, num");
                }
                None => assert!(d_den.is_nan() && d_num.is_nan(), "{name}: NaN"),
            }
            assert_eq!((v_den, v_num), (vcc, vcc), "{name}: VCC");
        }
    }

    /// LLVM's f64 division macro (v_div_scale x2, v_rcp, two Newton steps, v_div_fmas,
    /// v_div_fixup), as the compiler emits it for `a / b`, on the handlers' arithmetic.
    fn div_macro(a: f64, b: f64) -> f64 {
        let (den, _) = div_scale_f64(b, b, a);
        let (num, vcc) = div_scale_f64(a, b, a);
        let mut r = 1.0 / den;
        let t = (-den).mul_add(r, 1.0);
        r = r.mul_add(t, r);
        let t = (-den).mul_add(r, 1.0);
        r = r.mul_add(t, r);
        let q = num * r;
        let e = (-den).mul_add(q, num);
        fixup64(div_fmas_f64(e, r, q, vcc), b, a)
    }

    /// With the ISA's scaling the macro divides correctly rounded, denormal quotients too (the
    /// interpreter once scaled both operands there and left the refinement among denormals:
    /// -0x0.0000000003a0bp-1022 / -18 came out an ulp low).
    #[test]
    fn the_division_macro_is_correctly_rounded_with_denormal_quotients() {
        let lane = f64::from_bits(0x8000_0000_0003_a0b0 >> 4 | 1 << 63);
        assert_eq!(div_macro(lane, -18.0), lane / -18.0, "the lane of fp64_lanes");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut denormal = 0;
        for _ in 0..20000 {
            let (u, v) = (next(), next());
            // Numerators from denormal to 2^-900, denominators 2^-60..2^140: many quotients
            // are denormals.
            let a = f64::from_bits(u % (0x7bu64 << 52));
            let b = f64::from_bits((0x3c3u64 + (v >> 54) % 200) << 52 | v & ((1 << 52) - 1));
            let b = if v & 1 == 1 { -b } else { b };
            let want = a / b;
            denormal += usize::from(want.is_subnormal());
            assert_eq!(div_macro(a, b).to_bits(), want.to_bits(), "{a:e} / {b:e}");
        }
        assert!(denormal > 1000, "only {denormal} denormal quotients");
    }

    /// The fused result is scaled before its one rounding: where the fma rounded to 53 bits
    /// is exactly halfway between two denormals, the exact value decides, not the even one.
    #[test]
    fn div_fmas_scaling_rounds_once() {
        let u = f64::EPSILON; // 2^-52
        let base = 2f64.powi(-895);
        // (1 + u) 2^-895 + 2^-955 is above the 53-bit (1 + u) 2^-895, whose scaling by 2^-128
        // is the tie between the denormals 2^51 and 2^51 + 1 (units of 2^-1074): up.
        let x = fma_scaled((1.0 + u) * base, 1.0, 2f64.powi(-955), -128);
        assert_eq!(x.to_bits(), (1 << 51) + 1);
        let x = fma_scaled(-(1.0 + u) * base, 1.0, -(2f64.powi(-955)), -128);
        assert_eq!(x.to_bits(), (1 << 63) | ((1 << 51) + 1));
        // (1 + 3u) 2^-895 - 2^-955: below the tie between 2^51 + 1 and 2^51 + 2: down.
        let x = fma_scaled((1.0 + 3.0 * u) * base, 1.0, -(2f64.powi(-955)), -128);
        assert_eq!(x.to_bits(), (1 << 51) + 1);
        // An exact tie stays with the even neighbour; a result that is not a denormal is the
        // plain scaled fma.
        assert_eq!(fma_scaled((1.0 + u) * base, 1.0, 0.0, -128).to_bits(), 1 << 51);
        assert_eq!(fma_scaled(1.5, 2.0, 1.0, 128), 4.0 * 2f64.powi(128));
        assert_eq!(fma_scaled(1.5, 2.0, 1.0, -128), 4.0 * 2f64.powi(-128));
        // f32: (1 + 2^-23) 2^-63, scaled by 2^-64, is the tie between the denormals 2^22 and
        // 2^22 + 1 (units of 2^-149); 2^-149 more is lost in the f64 fma's rounding but puts
        // the exact value above it: up. (1 + 3 2^-23) 2^-63 - 2^-149: below 2^22 + 1.5: down.
        let e = f32::EPSILON;
        let tie = (1.0 + e) * 2f32.powi(-63);
        assert_eq!(fma_scaled32(tie, 1.0, 0.0, -64).to_bits(), 1 << 22, "an exact tie: even");
        let tiny = f32::from_bits(1);
        assert_eq!(fma_scaled32(tie, 1.0, tiny, -64).to_bits(), (1 << 22) + 1);
        assert_eq!(fma_scaled32(-tie, 1.0, -tiny, -64).to_bits(), 1 << 31 | ((1 << 22) + 1));
        let tie3 = (1.0 + 3.0 * e) * 2f32.powi(-63);
        assert_eq!(fma_scaled32(tie3, 1.0, -tiny, -64).to_bits(), (1 << 22) + 1);
        assert_eq!(fma_scaled32(tie3, 1.0, 0.0, -64).to_bits(), (1 << 22) + 2);
    }
}
