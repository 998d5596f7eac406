//! Scalar ALU: SOP2, SOP1, SOPK and SOPC opcodes. SCC follows each opcode's definition in the
//! CDNA2 ISA (carry for add/sub, "result != 0" for logic and shifts, comparisons for SOPC/
//! `s_cmpk`).

use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::{sop1 as s1, sop2 as s2, sopc as sc, sopk as sk};
use crate::isa::decode::Inst;
use crate::isa::operand::{Ty, M0};
use crate::isa::wave::Wave;

fn rd(w: &Wave, i: &Inst, k: usize, ty: Ty, c: &Ctx) -> u64 {
    w.sread(i.src[k], i.literal, ty, &c.apertures)
}

/// A 32-bit two-source op: `f(a, b, scc) -> (result, scc)`.
fn op2_32(
    w: &mut Wave,
    i: &Inst,
    c: &Ctx,
    f: impl Fn(u32, u32, bool) -> (u32, Option<bool>),
) -> Result<Step, ExecError> {
    let (a, b) = (rd(w, i, 0, Ty::B32, c) as u32, rd(w, i, 1, Ty::B32, c) as u32);
    let (r, scc) = f(a, b, w.scc);
    w.set_s32(i.dst, r);
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(Step::Next)
}

fn op2_64(
    w: &mut Wave,
    i: &Inst,
    c: &Ctx,
    tb: Ty,
    f: impl Fn(u64, u64, bool) -> (u64, Option<bool>),
) -> Result<Step, ExecError> {
    let (a, b) = (rd(w, i, 0, Ty::B64, c), rd(w, i, 1, tb, c));
    let (r, scc) = f(a, b, w.scc);
    w.set_s64(i.dst, r);
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(Step::Next)
}

macro_rules! s32 {
    (|$a:ident, $b:ident, $s:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| op2_32(w, i, c, |$a: u32, $b: u32, $s: bool| $e))
    };
}
macro_rules! s64 {
    ($tb:ident, |$a:ident, $b:ident, $s:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            op2_64(w, i, c, Ty::$tb, |$a: u64, $b: u64, $s: bool| $e)
        })
    };
}

fn nz32(r: u32) -> (u32, Option<bool>) {
    (r, Some(r != 0))
}
fn nz64(r: u64) -> (u64, Option<bool>) {
    (r, Some(r != 0))
}

fn bfe32(a: u32, b: u32, signed: bool) -> u32 {
    let off = b & 31;
    let width = (b >> 16) & 0x7f;
    if width == 0 {
        return 0;
    }
    let width = width.min(32 - off);
    let x = (a >> off) as u64 & ((1u64 << width) - 1);
    if signed && width < 32 {
        ((x << (64 - width)) as i64 >> (64 - width)) as u32
    } else {
        x as u32
    }
}

fn bfe64(a: u64, b: u64, signed: bool) -> u64 {
    let off = b & 63;
    let width = ((b >> 16) & 0x7f).min(64 - off);
    if width == 0 {
        return 0;
    }
    let x = (a >> off) & if width == 64 { u64::MAX } else { (1 << width) - 1 };
    if signed && width < 64 {
        ((x << (64 - width)) as i64 >> (64 - width)) as u64
    } else {
        x
    }
}

pub fn sop2(op: u16) -> Option<Handler> {
    match op {
        s2::S_ADD_U32 => s32!(|a, b, _s| {
            let r = u64::from(a) + u64::from(b);
            (r as u32, Some(r >> 32 != 0))
        }),
        s2::S_SUB_U32 => s32!(|a, b, _s| (a.wrapping_sub(b), Some(b > a))),
        s2::S_ADD_I32 => s32!(|a, b, _s| {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            (r as u32, Some(o))
        }),
        s2::S_SUB_I32 => s32!(|a, b, _s| {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            (r as u32, Some(o))
        }),
        s2::S_ADDC_U32 => s32!(|a, b, s| {
            let r = u64::from(a) + u64::from(b) + u64::from(s);
            (r as u32, Some(r >> 32 != 0))
        }),
        s2::S_SUBB_U32 => s32!(|a, b, s| (
            a.wrapping_sub(b).wrapping_sub(u32::from(s)),
            Some(u64::from(b) + u64::from(s) > u64::from(a))
        )),
        s2::S_MIN_I32 => {
            s32!(|a, b, _s| ((a as i32).min(b as i32) as u32, Some((a as i32) < (b as i32))))
        }
        s2::S_MIN_U32 => s32!(|a, b, _s| (a.min(b), Some(a < b))),
        s2::S_MAX_I32 => {
            s32!(|a, b, _s| ((a as i32).max(b as i32) as u32, Some((a as i32) > (b as i32))))
        }
        s2::S_MAX_U32 => s32!(|a, b, _s| (a.max(b), Some(a > b))),
        s2::S_CSELECT_B32 => s32!(|a, b, s| (if s { a } else { b }, None)),
        s2::S_CSELECT_B64 => s64!(B64, |a, b, s| (if s { a } else { b }, None)),
        s2::S_AND_B32 => s32!(|a, b, _s| nz32(a & b)),
        s2::S_AND_B64 => s64!(B64, |a, b, _s| nz64(a & b)),
        s2::S_OR_B32 => s32!(|a, b, _s| nz32(a | b)),
        s2::S_OR_B64 => s64!(B64, |a, b, _s| nz64(a | b)),
        s2::S_XOR_B32 => s32!(|a, b, _s| nz32(a ^ b)),
        s2::S_XOR_B64 => s64!(B64, |a, b, _s| nz64(a ^ b)),
        s2::S_ANDN2_B32 => s32!(|a, b, _s| nz32(a & !b)),
        s2::S_ANDN2_B64 => s64!(B64, |a, b, _s| nz64(a & !b)),
        s2::S_ORN2_B32 => s32!(|a, b, _s| nz32(a | !b)),
        s2::S_ORN2_B64 => s64!(B64, |a, b, _s| nz64(a | !b)),
        s2::S_NAND_B32 => s32!(|a, b, _s| nz32(!(a & b))),
        s2::S_NAND_B64 => s64!(B64, |a, b, _s| nz64(!(a & b))),
        s2::S_NOR_B32 => s32!(|a, b, _s| nz32(!(a | b))),
        s2::S_NOR_B64 => s64!(B64, |a, b, _s| nz64(!(a | b))),
        s2::S_XNOR_B32 => s32!(|a, b, _s| nz32(!(a ^ b))),
        s2::S_XNOR_B64 => s64!(B64, |a, b, _s| nz64(!(a ^ b))),
        s2::S_LSHL_B32 => s32!(|a, b, _s| nz32(a << (b & 31))),
        s2::S_LSHL_B64 => s64!(B32, |a, b, _s| nz64(a << (b & 63))),
        s2::S_LSHR_B32 => s32!(|a, b, _s| nz32(a >> (b & 31))),
        s2::S_LSHR_B64 => s64!(B32, |a, b, _s| nz64(a >> (b & 63))),
        s2::S_ASHR_I32 => s32!(|a, b, _s| nz32(((a as i32) >> (b & 31)) as u32)),
        s2::S_ASHR_I64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let (a, b) = (rd(w, i, 0, Ty::I64, c), rd(w, i, 1, Ty::B32, c));
            let r = ((a as i64) >> (b & 63)) as u64;
            w.set_s64(i.dst, r);
            w.scc = r != 0;
            Ok(Step::Next)
        }),
        s2::S_BFM_B32 => s32!(|a, b, _s| ((((1u64 << (a & 31)) - 1) as u32) << (b & 31), None)),
        s2::S_BFM_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let (a, b) = (rd(w, i, 0, Ty::B32, c), rd(w, i, 1, Ty::B32, c));
            w.set_s64(i.dst, (((1u128 << (a & 63)) - 1) as u64) << (b & 63));
            Ok(Step::Next)
        }),
        s2::S_MUL_I32 => s32!(|a, b, _s| ((a as i32).wrapping_mul(b as i32) as u32, None)),
        s2::S_MUL_HI_U32 => s32!(|a, b, _s| (((u64::from(a) * u64::from(b)) >> 32) as u32, None)),
        s2::S_MUL_HI_I32 => {
            s32!(|a, b, _s| (((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32, None))
        }
        s2::S_BFE_U32 => s32!(|a, b, _s| nz32(bfe32(a, b, false))),
        s2::S_BFE_I32 => s32!(|a, b, _s| nz32(bfe32(a, b, true))),
        s2::S_BFE_U64 => s64!(B32, |a, b, _s| nz64(bfe64(a, b, false))),
        s2::S_BFE_I64 => s64!(B32, |a, b, _s| nz64(bfe64(a, b, true))),
        s2::S_ABSDIFF_I32 => {
            s32!(|a, b, _s| nz32((a as i32).wrapping_sub(b as i32).unsigned_abs()))
        }
        s2::S_LSHL1_ADD_U32 | s2::S_LSHL2_ADD_U32 | s2::S_LSHL3_ADD_U32 | s2::S_LSHL4_ADD_U32 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                let n = u32::from(i.op - s2::S_LSHL1_ADD_U32 + 1);
                let (a, b) = (rd(w, i, 0, Ty::B32, c), rd(w, i, 1, Ty::B32, c));
                let r = (a << n) + b;
                w.set_s32(i.dst, r as u32);
                w.scc = r >> 32 != 0;
                Ok(Step::Next)
            })
        }
        s2::S_PACK_LL_B32_B16 => s32!(|a, b, _s| ((a & 0xffff) | (b << 16), None)),
        s2::S_PACK_LH_B32_B16 => s32!(|a, b, _s| ((a & 0xffff) | (b & 0xffff_0000), None)),
        s2::S_PACK_HH_B32_B16 => s32!(|a, b, _s| ((a >> 16) | (b & 0xffff_0000), None)),
        _ => None,
    }
}

fn op1_32(
    w: &mut Wave,
    i: &Inst,
    c: &Ctx,
    f: impl Fn(u32, bool) -> (u32, Option<bool>),
) -> Result<Step, ExecError> {
    let a = rd(w, i, 0, Ty::B32, c) as u32;
    let (r, scc) = f(a, w.scc);
    w.set_s32(i.dst, r);
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(Step::Next)
}

fn op1_64(
    w: &mut Wave,
    i: &Inst,
    c: &Ctx,
    f: impl Fn(u64, bool) -> (u64, Option<bool>),
) -> Result<Step, ExecError> {
    let a = rd(w, i, 0, Ty::B64, c);
    let (r, scc) = f(a, w.scc);
    w.set_s64(i.dst, r);
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(Step::Next)
}

macro_rules! u32op {
    (|$a:ident, $s:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| op1_32(w, i, c, |$a: u32, $s: bool| $e))
    };
}
macro_rules! u64op {
    (|$a:ident, $s:ident| $e:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| op1_64(w, i, c, |$a: u64, $s: bool| $e))
    };
}

/// `s_*_saveexec_b64`: D = EXEC; EXEC = f(S0, EXEC); SCC = EXEC != 0.
fn saveexec(w: &mut Wave, i: &Inst, c: &Ctx, f: fn(u64, u64) -> u64) -> Result<Step, ExecError> {
    let a = rd(w, i, 0, Ty::B64, c);
    let old = w.exec();
    let e = f(a, old);
    w.set_s64(i.dst, old);
    w.set_exec(e);
    w.scc = e != 0;
    Ok(Step::Next)
}

macro_rules! saveexec {
    (|$a:ident, $e:ident| $x:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| saveexec(w, i, c, |$a: u64, $e: u64| $x))
    };
}

fn wqm(x: u64, nibbles: u32) -> u64 {
    let mut r = 0;
    for k in 0..nibbles {
        if (x >> (4 * k)) & 0xf != 0 {
            r |= 0xf << (4 * k);
        }
    }
    r
}

pub fn sop1(op: u16) -> Option<Handler> {
    match op {
        s1::S_MOV_B32 => u32op!(|a, _s| (a, None)),
        s1::S_MOV_B64 => u64op!(|a, _s| (a, None)),
        s1::S_CMOV_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            if w.scc {
                let a = rd(w, i, 0, Ty::B32, c) as u32;
                w.set_s32(i.dst, a);
            }
            Ok(Step::Next)
        }),
        s1::S_CMOV_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            if w.scc {
                let a = rd(w, i, 0, Ty::B64, c);
                w.set_s64(i.dst, a);
            }
            Ok(Step::Next)
        }),
        s1::S_NOT_B32 => u32op!(|a, _s| nz32(!a)),
        s1::S_NOT_B64 => u64op!(|a, _s| nz64(!a)),
        s1::S_WQM_B32 => u32op!(|a, _s| nz32(wqm(u64::from(a), 8) as u32)),
        s1::S_WQM_B64 => u64op!(|a, _s| nz64(wqm(a, 16))),
        s1::S_BREV_B32 => u32op!(|a, _s| (a.reverse_bits(), None)),
        s1::S_BREV_B64 => u64op!(|a, _s| (a.reverse_bits(), None)),
        s1::S_BCNT0_I32_B32 => u32op!(|a, _s| nz32(a.count_zeros())),
        s1::S_BCNT1_I32_B32 => u32op!(|a, _s| nz32(a.count_ones())),
        s1::S_BCNT0_I32_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let r = rd(w, i, 0, Ty::B64, c).count_zeros();
            w.set_s32(i.dst, r);
            w.scc = r != 0;
            Ok(Step::Next)
        }),
        s1::S_BCNT1_I32_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let r = rd(w, i, 0, Ty::B64, c).count_ones();
            w.set_s32(i.dst, r);
            w.scc = r != 0;
            Ok(Step::Next)
        }),
        s1::S_FF0_I32_B32 => {
            u32op!(|a, _s| (if a == u32::MAX { u32::MAX } else { (!a).trailing_zeros() }, None))
        }
        s1::S_FF1_I32_B32 => {
            u32op!(|a, _s| (if a == 0 { u32::MAX } else { a.trailing_zeros() }, None))
        }
        s1::S_FF1_I32_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let a = rd(w, i, 0, Ty::B64, c);
            w.set_s32(i.dst, if a == 0 { u32::MAX } else { a.trailing_zeros() });
            Ok(Step::Next)
        }),
        s1::S_FLBIT_I32_B32 => {
            u32op!(|a, _s| (if a == 0 { u32::MAX } else { a.leading_zeros() }, None))
        }
        s1::S_FLBIT_I32_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let a = rd(w, i, 0, Ty::B64, c);
            w.set_s32(i.dst, if a == 0 { u32::MAX } else { a.leading_zeros() });
            Ok(Step::Next)
        }),
        s1::S_FLBIT_I32 => u32op!(|a, _s| (
            if a == 0 || a == u32::MAX {
                u32::MAX
            } else if a >> 31 == 1 {
                (!a).leading_zeros()
            } else {
                a.leading_zeros()
            },
            None
        )),
        s1::S_SEXT_I32_I8 => u32op!(|a, _s| (a as u8 as i8 as i32 as u32, None)),
        s1::S_SEXT_I32_I16 => u32op!(|a, _s| (a as u16 as i16 as i32 as u32, None)),
        s1::S_BITSET0_B32 | s1::S_BITSET1_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let b = rd(w, i, 0, Ty::B32, c) & 31;
            let old = w.s[usize::from(i.dst & 127)];
            let r = if i.op == s1::S_BITSET1_B32 { old | 1 << b } else { old & !(1 << b) };
            w.set_s32(i.dst, r);
            Ok(Step::Next)
        }),
        s1::S_GETPC_B64 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            w.set_s64(i.dst, w.pc + u64::from(i.len));
            Ok(Step::Next)
        }),
        s1::S_SETPC_B64 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| Ok(Step::Jump(rd(w, i, 0, Ty::B64, c))))
        }
        s1::S_SWAPPC_B64 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let target = rd(w, i, 0, Ty::B64, c);
            w.set_s64(i.dst, w.pc + u64::from(i.len));
            Ok(Step::Jump(target))
        }),
        s1::S_AND_SAVEEXEC_B64 => saveexec!(|a, e| a & e),
        s1::S_OR_SAVEEXEC_B64 => saveexec!(|a, e| a | e),
        s1::S_XOR_SAVEEXEC_B64 => saveexec!(|a, e| a ^ e),
        s1::S_ANDN2_SAVEEXEC_B64 => saveexec!(|a, e| a & !e),
        s1::S_ORN2_SAVEEXEC_B64 => saveexec!(|a, e| a | !e),
        s1::S_NAND_SAVEEXEC_B64 => saveexec!(|a, e| !(a & e)),
        s1::S_NOR_SAVEEXEC_B64 => saveexec!(|a, e| !(a | e)),
        s1::S_XNOR_SAVEEXEC_B64 => saveexec!(|a, e| !(a ^ e)),
        s1::S_ANDN1_SAVEEXEC_B64 => saveexec!(|a, e| !a & e),
        s1::S_ORN1_SAVEEXEC_B64 => saveexec!(|a, e| !a | e),
        s1::S_ANDN1_WREXEC_B64 | s1::S_ANDN2_WREXEC_B64 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                let a = rd(w, i, 0, Ty::B64, c);
                let e = w.exec();
                let r = if i.op == s1::S_ANDN1_WREXEC_B64 { !a & e } else { a & !e };
                w.set_exec(r);
                w.set_s64(i.dst, r);
                w.scc = r != 0;
                Ok(Step::Next)
            })
        }
        s1::S_MOVRELS_B32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            let m0 = w.s[usize::from(M0)] as u16;
            let v = w.s[usize::from(i.src[0].wrapping_add(m0) & 127)];
            w.set_s32(i.dst, v);
            Ok(Step::Next)
        }),
        s1::S_MOVRELD_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let m0 = w.s[usize::from(M0)] as u16;
            let v = rd(w, i, 0, Ty::B32, c) as u32;
            w.set_s32(i.dst.wrapping_add(m0) & 127, v);
            Ok(Step::Next)
        }),
        s1::S_ABS_I32 => u32op!(|a, _s| nz32((a as i32).unsigned_abs())),
        s1::S_QUADMASK_B64 => u64op!(|a, _s| {
            let mut r = 0u64;
            for k in 0..16 {
                if (a >> (4 * k)) & 0xf != 0 {
                    r |= 1 << k;
                }
            }
            nz64(r)
        }),
        s1::S_BITREPLICATE_B64_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let a = rd(w, i, 0, Ty::B32, c);
            let mut r = 0u64;
            for k in 0..32 {
                r |= ((a >> k) & 1) * (3 << (2 * k));
            }
            w.set_s64(i.dst, r);
            Ok(Step::Next)
        }),
        _ => None,
    }
}

/// `hwreg(id, offset, size)` of `s_getreg`/`s_setreg`: id [5:0], offset [10:6], size - 1
/// [15:11].
fn hwreg(simm: i32) -> (u32, u32, u32) {
    let s = simm as u32 & 0xffff;
    (s & 0x3f, (s >> 6) & 0x1f, ((s >> 11) & 0x1f) + 1)
}

const HW_REG_MODE: u32 = 1;
/// SH_MEM_BASES (gfx9/CDNA): PRIVATE_BASE [15:0] and SHARED_BASE [31:16], the apertures' address
/// bits [63:48]. Code that takes a stack object's flat address reads it (LLVM's
/// `hwreg(HW_REG_SH_MEM_BASES, 0, 16)`, shifted into the high dword: every kernel with a
/// dynamic stack, as at -O0).
const HW_REG_SH_MEM_BASES: u32 = 15;

/// SOPK: the 16-bit immediate is sign-extended for signed ops, zero-extended for unsigned.
pub fn sopk(op: u16) -> Option<Handler> {
    fn cmp(
        w: &mut Wave,
        i: &Inst,
        f: fn(u32, u32) -> bool,
        signed: bool,
    ) -> Result<Step, ExecError> {
        let a = w.s[usize::from(i.dst & 127)];
        let k = if signed { i.imm as u32 } else { i.imm as u32 & 0xffff };
        w.scc = f(a, k);
        Ok(Step::Next)
    }
    match op {
        sk::S_MOVK_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            w.set_s32(i.dst, i.imm as u32);
            Ok(Step::Next)
        }),
        sk::S_CMOVK_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            if w.scc {
                w.set_s32(i.dst, i.imm as u32);
            }
            Ok(Step::Next)
        }),
        sk::S_CMPK_EQ_I32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a == b, true))
        }
        sk::S_CMPK_LG_I32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a != b, true))
        }
        sk::S_CMPK_GT_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            cmp(w, i, |a, b| (a as i32) > (b as i32), true)
        }),
        sk::S_CMPK_GE_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            cmp(w, i, |a, b| (a as i32) >= (b as i32), true)
        }),
        sk::S_CMPK_LT_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            cmp(w, i, |a, b| (a as i32) < (b as i32), true)
        }),
        sk::S_CMPK_LE_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            cmp(w, i, |a, b| (a as i32) <= (b as i32), true)
        }),
        sk::S_CMPK_EQ_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a == b, false))
        }
        sk::S_CMPK_LG_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a != b, false))
        }
        sk::S_CMPK_GT_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a > b, false))
        }
        sk::S_CMPK_GE_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a >= b, false))
        }
        sk::S_CMPK_LT_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a < b, false))
        }
        sk::S_CMPK_LE_U32 => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| cmp(w, i, |a, b| a <= b, false))
        }
        sk::S_ADDK_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            let a = w.s[usize::from(i.dst & 127)] as i32;
            let (r, o) = a.overflowing_add(i.imm);
            w.set_s32(i.dst, r as u32);
            w.scc = o;
            Ok(Step::Next)
        }),
        sk::S_MULK_I32 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            let a = w.s[usize::from(i.dst & 127)] as i32;
            w.set_s32(i.dst, a.wrapping_mul(i.imm) as u32);
            Ok(Step::Next)
        }),
        // Hardware registers: MODE (id 1) is kept per wave, SH_MEM_BASES (id 15) holds the
        // apertures; the others read 0 (no trap, status or ID state is modelled) and writes to
        // them are dropped.
        sk::S_GETREG_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let (id, offset, size) = hwreg(i.imm);
            let reg = match id {
                HW_REG_MODE => u64::from(w.mode),
                HW_REG_SH_MEM_BASES => (c.apertures.shared >> 48) << 16 | c.apertures.private >> 48,
                _ => 0,
            };
            let v = (reg >> offset) & ((1u64 << size) - 1);
            w.set_s32(i.dst, v as u32);
            Ok(Step::Next)
        }),
        sk::S_SETREG_B32 | sk::S_SETREG_IMM32_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let (id, offset, size) = hwreg(i.imm);
            let v = if i.op == sk::S_SETREG_IMM32_B32 {
                i.literal
            } else {
                w.sread(i.dst, 0, Ty::B32, &c.apertures) as u32
            };
            if id == HW_REG_MODE {
                let mask = (((1u64 << size) - 1) << offset) as u32;
                w.mode = (w.mode & !mask) | ((v << offset) & mask);
            }
            Ok(Step::Next)
        }),
        sk::S_CALL_B64 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            let ret = w.pc + u64::from(i.len);
            w.set_s64(i.dst, ret);
            Ok(Step::Jump(ret.wrapping_add_signed(i64::from(i.imm) * 4)))
        }),
        _ => None,
    }
}

pub fn sopc(op: u16) -> Option<Handler> {
    fn cmp(
        w: &mut Wave,
        i: &Inst,
        c: &Ctx,
        ty: Ty,
        f: fn(u64, u64) -> bool,
    ) -> Result<Step, ExecError> {
        let (a, b) = (
            rd(w, i, 0, ty, c),
            rd(w, i, 1, if ty == Ty::B64 && i.op < sc::S_CMP_EQ_U64 { Ty::B32 } else { ty }, c),
        );
        w.scc = f(a, b);
        Ok(Step::Next)
    }
    macro_rules! c {
        ($ty:ident, |$a:ident, $b:ident| $e:expr) => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| cmp(w, i, c, Ty::$ty, |$a: u64, $b: u64| $e))
        };
    }
    match op {
        sc::S_CMP_EQ_I32 | sc::S_CMP_EQ_U32 => c!(B32, |a, b| a == b),
        sc::S_CMP_LG_I32 | sc::S_CMP_LG_U32 => c!(B32, |a, b| a != b),
        sc::S_CMP_GT_I32 => c!(B32, |a, b| (a as u32 as i32) > (b as u32 as i32)),
        sc::S_CMP_GE_I32 => c!(B32, |a, b| (a as u32 as i32) >= (b as u32 as i32)),
        sc::S_CMP_LT_I32 => c!(B32, |a, b| (a as u32 as i32) < (b as u32 as i32)),
        sc::S_CMP_LE_I32 => c!(B32, |a, b| (a as u32 as i32) <= (b as u32 as i32)),
        sc::S_CMP_GT_U32 => c!(B32, |a, b| a > b),
        sc::S_CMP_GE_U32 => c!(B32, |a, b| a >= b),
        sc::S_CMP_LT_U32 => c!(B32, |a, b| a < b),
        sc::S_CMP_LE_U32 => c!(B32, |a, b| a <= b),
        sc::S_BITCMP0_B32 => c!(B32, |a, b| (a >> (b & 31)) & 1 == 0),
        sc::S_BITCMP1_B32 => c!(B32, |a, b| (a >> (b & 31)) & 1 == 1),
        sc::S_BITCMP0_B64 => c!(B64, |a, b| (a >> (b & 63)) & 1 == 0),
        sc::S_BITCMP1_B64 => c!(B64, |a, b| (a >> (b & 63)) & 1 == 1),
        sc::S_CMP_EQ_U64 => c!(B64, |a, b| a == b),
        sc::S_CMP_LG_U64 => c!(B64, |a, b| a != b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hwreg_fields() {
        // hwreg(HW_REG_MODE, 4, 4)
        assert_eq!(hwreg(0x1901), (HW_REG_MODE, 4, 4));
        assert_eq!(hwreg(0xf801), (HW_REG_MODE, 0, 32));
    }
}
