//! Vector comparisons (VOPC, and their VOP3 forms): `v_cmp_*` writes a lane mask to VCC (e32)
//! or an SGPR pair (e64), `v_cmpx_*` also to EXEC; inactive lanes get 0. Opcode layout (gfx9):
//! 0x10-0x15 `class` (f32, f64, f16; each with its cmpx), 0x20/0x40/0x60 + cond the f16/f32/f64
//! compares (16 conditions, cmpx at + 0x10), 0xa0/0xc0/0xe0 + cond the 16/32/64-bit integer
//! ones (8 conditions, signed then unsigned at + 8, cmpx at + 0x10).

use super::valu::Src;
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::Inst;
use crate::isa::operand::Ty;
use crate::isa::wave::{Wave, LANES};

/// The handler of a VOPC opcode (VOP3 numbering: < 0x100).
pub fn vopc(op: u16) -> Option<Handler> {
    match op {
        0x10..=0x15 | 0x20..=0x7f | 0xa0..=0xff => Some(compare),
        _ => None,
    }
}

/// The mask of lanes where `p` holds (bit l for lane l), over whole-wave source arrays.
#[inline(always)]
fn mask_of(a: &[u64; LANES], b: &[u64; LANES], p: impl Fn(u64, u64) -> bool) -> u64 {
    let mut m = 0u64;
    for l in 0..LANES {
        m |= u64::from(p(a[l], b[l])) << l;
    }
    m
}

/// The 16 float conditions: F, LT, EQ, LE, GT, LG, GE, O, U, NGE, NLG, NGT, NLE, NEQ, NLT,
/// TRU (the N forms are true when unordered); the condition is resolved once, outside the
/// lane loop.
fn float_mask(cond: u16, a: &[u64; LANES], b: &[u64; LANES], v: impl Fn(u64) -> f64 + Copy) -> u64 {
    let unordered = |x: u64, y: u64| v(x).is_nan() || v(y).is_nan();
    match cond {
        0 => 0,
        1 => mask_of(a, b, |x, y| v(x) < v(y)),
        2 => mask_of(a, b, |x, y| v(x) == v(y)),
        3 => mask_of(a, b, |x, y| v(x) <= v(y)),
        4 => mask_of(a, b, |x, y| v(x) > v(y)),
        5 => mask_of(a, b, |x, y| v(x) < v(y) || v(x) > v(y)),
        6 => mask_of(a, b, |x, y| v(x) >= v(y)),
        7 => mask_of(a, b, |x, y| !unordered(x, y)),
        8 => mask_of(a, b, unordered),
        9 => mask_of(a, b, |x, y| v(x) < v(y) || unordered(x, y)),
        10 => mask_of(a, b, |x, y| v(x) == v(y) || unordered(x, y)),
        11 => mask_of(a, b, |x, y| v(x) <= v(y) || unordered(x, y)),
        12 => mask_of(a, b, |x, y| v(x) > v(y) || unordered(x, y)),
        13 => mask_of(a, b, |x, y| v(x) != v(y)),
        14 => mask_of(a, b, |x, y| v(x) >= v(y) || unordered(x, y)),
        _ => u64::MAX,
    }
}

/// The 8 integer conditions F, LT, EQ, LE, GT, NE, GE, T on values `v` reads.
fn int_mask<T: PartialOrd>(
    cond: u16,
    a: &[u64; LANES],
    b: &[u64; LANES],
    v: impl Fn(u64) -> T + Copy,
) -> u64 {
    match cond & 7 {
        0 => 0,
        1 => mask_of(a, b, |x, y| v(x) < v(y)),
        2 => mask_of(a, b, |x, y| v(x) == v(y)),
        3 => mask_of(a, b, |x, y| v(x) <= v(y)),
        4 => mask_of(a, b, |x, y| v(x) > v(y)),
        5 => mask_of(a, b, |x, y| v(x) != v(y)),
        6 => mask_of(a, b, |x, y| v(x) >= v(y)),
        _ => u64::MAX,
    }
}

/// `v_cmp_class`: bit 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0,
/// 6 +0, 7 +denormal, 8 +normal, 9 +inf of the mask in S1, for the value's class in its own
/// format (`exp_bits`/`man_bits`: 5/10 f16, 8/23 f32, 11/52 f64).
fn class(bits: u64, exp_bits: u32, man_bits: u32, mask: u32) -> bool {
    let neg = bits >> (exp_bits + man_bits) & 1 == 1;
    let exp = (bits >> man_bits) & ((1 << exp_bits) - 1);
    let man = bits & ((1 << man_bits) - 1);
    let bit = if exp == (1 << exp_bits) - 1 {
        if man == 0 {
            if neg {
                2
            } else {
                9
            }
        } else if man >> (man_bits - 1) & 1 == 1 {
            1
        } else {
            0
        }
    } else if exp == 0 {
        match (man == 0, neg) {
            (true, true) => 5,
            (true, false) => 6,
            (false, true) => 4,
            (false, false) => 7,
        }
    } else if neg {
        3
    } else {
        8
    };
    mask >> bit & 1 == 1
}

fn compare(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let op = crate::isa::decode::vector::vop3_number(i.family, i.op);
    let (ty, cond, x) = match op {
        0x10..=0x15 => {
            ([Ty::F32, Ty::F64, Ty::F16][usize::from((op - 0x10) / 2)], 0xff, op & 1 == 1)
        }
        0x20..=0x7f => {
            ([Ty::F16, Ty::F32, Ty::F64][usize::from((op - 0x20) / 0x20)], op & 15, op & 0x10 != 0)
        }
        _ => (
            [Ty::B16, Ty::B32, Ty::I64][usize::from((op - 0xa0) / 0x20)],
            (op - 0xa0) % 0x20,
            op & 0x10 != 0,
        ),
    };
    let s0 = Src::new(w, i, 0, ty, c);
    let s1 = Src::new(w, i, 1, if cond == 0xff { Ty::B32 } else { ty }, c);
    let exec = w.exec();
    let [a, b, _, _] = &mut *c.lanes;
    s0.fill(w, a);
    s1.fill(w, b);
    let (a, b) = (&*a, &*b);
    let f16 = |x: u64| f64::from(crate::isa::fp16::f16_to_f32(x as u16));
    let f32_ = |x: u64| f64::from(f32::from_bits(x as u32));
    let f64_ = f64::from_bits;
    let signed = cond & 8 == 0;
    let m = match (ty, cond) {
        (Ty::F32, 0xff) => mask_of(a, b, |x, y| class(x & 0xffff_ffff, 8, 23, y as u32)),
        (Ty::F64, 0xff) => mask_of(a, b, |x, y| class(x, 11, 52, y as u32)),
        (_, 0xff) => mask_of(a, b, |x, y| class(x & 0xffff, 5, 10, y as u32)),
        (Ty::F32, _) => float_mask(cond, a, b, f32_),
        (Ty::F64, _) => float_mask(cond, a, b, f64_),
        (Ty::F16, _) => float_mask(cond, a, b, f16),
        (Ty::B16, _) if signed => int_mask(cond, a, b, |x| x as u16 as i16),
        (Ty::B16, _) => int_mask(cond, a, b, |x| x as u16),
        (Ty::B32, _) if signed => int_mask(cond, a, b, |x| x as u32 as i32),
        (Ty::B32, _) => int_mask(cond, a, b, |x| x as u32),
        (_, _) if signed => int_mask(cond, a, b, |x| x as i64),
        (_, _) => int_mask(cond, a, b, |x| x),
    } & exec;
    w.set_s64(i.dst, m);
    if x {
        w.set_exec(m);
    }
    Ok(Step::Next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_sees_each_format_s_own_denormals() {
        // f32 denormal 0x0000_0001: bit 7 (+denormal), not +normal as its f64 value would be.
        assert!(class(0x0000_0001, 8, 23, 1 << 7));
        assert!(class(0x8000_0001, 8, 23, 1 << 4));
        assert!(class(0x0001, 5, 10, 1 << 7), "f16 denormal");
        assert!(class(0x7fc0_0000, 8, 23, 1 << 1) && class(0x7f80_0001, 8, 23, 1 << 0));
        assert!(class(0xfff0_0000_0000_0000, 11, 52, 1 << 2));
        assert!(class(0x8000_0000, 8, 23, 1 << 5) && class(0x3f80_0000, 8, 23, 1 << 8));
        let a = [1.0f32.to_bits() as u64; LANES];
        let mut b = [2.0f32.to_bits() as u64; LANES];
        b[3] = f32::NAN.to_bits() as u64;
        let f = |x: u64| f64::from(f32::from_bits(x as u32));
        assert_eq!(float_mask(1, &a, &b, f), !(1 << 3), "LT false where unordered");
        let big = [3.0f32.to_bits() as u64; LANES];
        assert_eq!(float_mask(9, &big, &b, f), 1 << 3, "3 NGE 2 only where unordered");
        assert_eq!(float_mask(9, &a, &b, f), u64::MAX, "1 NGE 2");
        assert_eq!(int_mask(3, &a, &b, |x| x as u32), u64::MAX, "LE on the bits");
        assert_eq!(int_mask(4, &a, &b, |x| x as u32), 0, "GT on the bits");
    }
}
