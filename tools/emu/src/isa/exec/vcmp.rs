//! Vector comparisons (VOPC, and their VOP3 forms): `v_cmp_*` writes a lane mask to VCC (e32)
//! or an SGPR pair (e64), `v_cmpx_*` also to EXEC; inactive lanes get 0. Opcode layout (gfx9):
//! 0x10-0x15 `class` (f32, f64, f16; each with its cmpx), 0x20/0x40/0x60 + cond the f16/f32/f64
//! compares (16 conditions, cmpx at + 0x10), 0xa0/0xc0/0xe0 + cond the 16/32/64-bit integer
//! ones (8 conditions, signed then unsigned at + 8, cmpx at + 0x10).

use super::valu::{lanes, Src};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::Inst;
use crate::isa::operand::Ty;
use crate::isa::wave::Wave;

/// The handler of a VOPC opcode (VOP3 numbering: < 0x100).
pub fn vopc(op: u16) -> Option<Handler> {
    match op {
        0x10..=0x15 | 0x20..=0x7f | 0xa0..=0xff => Some(compare),
        _ => None,
    }
}

/// The 16 float conditions: F, LT, EQ, LE, GT, LG, GE, O, U, NGE, NLG, NGT, NLE, NEQ, NLT,
/// TRU (the N forms are true when unordered).
fn float_cond(cond: u16, a: f64, b: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let o = a.partial_cmp(&b);
    match cond {
        0 => false,
        1 => o == Some(Less),
        2 => o == Some(Equal),
        3 => matches!(o, Some(Less | Equal)),
        4 => o == Some(Greater),
        5 => matches!(o, Some(Less | Greater)),
        6 => matches!(o, Some(Greater | Equal)),
        7 => o.is_some(),
        8 => o.is_none(),
        9 => !matches!(o, Some(Greater | Equal)),
        10 => !matches!(o, Some(Less | Greater)),
        11 => o != Some(Greater),
        12 => !matches!(o, Some(Less | Equal)),
        13 => o != Some(Equal),
        14 => o != Some(Less),
        _ => true,
    }
}

fn int_cond<T: PartialOrd>(cond: u16, a: T, b: T) -> bool {
    match cond & 7 {
        0 => false,
        1 => a < b,
        2 => a == b,
        3 => a <= b,
        4 => a > b,
        5 => a != b,
        6 => a >= b,
        _ => true,
    }
}

fn class(x: f64, is_snan: bool, mask: u32) -> bool {
    let bit = if x.is_nan() {
        if is_snan { 0 } else { 1 }
    } else if x.is_infinite() {
        if x < 0.0 { 2 } else { 9 }
    } else if x == 0.0 {
        if x.is_sign_negative() { 5 } else { 6 }
    } else if x.is_subnormal() {
        if x < 0.0 { 4 } else { 7 }
    } else if x < 0.0 {
        3
    } else {
        8
    };
    mask >> bit & 1 == 1
}

fn compare(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let op = crate::isa::decode::vector::vop3_number(i.family, i.op);
    let (ty, cond, x) = match op {
        0x10..=0x15 => ([Ty::F32, Ty::F64, Ty::F16][usize::from((op - 0x10) / 2)], 0xff, op & 1 == 1),
        0x20..=0x7f => ([Ty::F16, Ty::F32, Ty::F64][usize::from((op - 0x20) / 0x20)], op & 15, op & 0x10 != 0),
        _ => ([Ty::B16, Ty::B32, Ty::I64][usize::from((op - 0xa0) / 0x20)], (op - 0xa0) % 0x20, op & 0x10 != 0),
    };
    let s0 = Src::new(w, i, 0, ty, c);
    let s1 = Src::new(w, i, 1, if cond == 0xff { Ty::B32 } else { ty }, c);
    let exec = w.exec();
    let mut m = 0u64;
    for l in lanes(exec) {
        let (a, b) = (s0.get(w, l), s1.get(w, l));
        let r = match (ty, cond) {
            (Ty::F32, 0xff) => class(f64::from(f32::from_bits(a as u32)), (a as u32) & 0x7fc0_0000 == 0x7f80_0000 && (a as u32) & 0x3f_ffff != 0, b as u32),
            (Ty::F64, 0xff) => class(f64::from_bits(a), a & 0x7ff8_0000_0000_0000 == 0x7ff0_0000_0000_0000 && a & 0xf_ffff_ffff_ffff != 0, b as u32),
            (Ty::F16, 0xff) => class(f64::from(crate::isa::fp16::f16_to_f32(a as u16)), (a as u16) & 0x7e00 == 0x7c00 && (a as u16) & 0x1ff != 0, b as u32),
            (Ty::F32, _) => float_cond(cond, f64::from(f32::from_bits(a as u32)), f64::from(f32::from_bits(b as u32))),
            (Ty::F64, _) => float_cond(cond, f64::from_bits(a), f64::from_bits(b)),
            (Ty::F16, _) => float_cond(cond, f64::from(crate::isa::fp16::f16_to_f32(a as u16)), f64::from(crate::isa::fp16::f16_to_f32(b as u16))),
            (Ty::B16, _) if cond & 8 != 0 => int_cond(cond, a as u16, b as u16),
            (Ty::B16, _) => int_cond(cond, a as u16 as i16, b as u16 as i16),
            (Ty::B32, _) if cond & 8 != 0 => int_cond(cond, a as u32, b as u32),
            (Ty::B32, _) => int_cond(cond, a as u32 as i32, b as u32 as i32),
            (_, _) if cond & 8 != 0 => int_cond(cond, a, b),
            (_, _) => int_cond(cond, a as i64, b as i64),
        };
        m |= u64::from(r) << l;
    }
    w.set_s64(i.dst, m);
    if x {
        w.set_exec(m);
    }
    Ok(Step::Next)
}
