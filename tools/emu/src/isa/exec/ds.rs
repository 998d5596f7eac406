//! LDS instructions (DS). Address per lane = the VGPR address + offset (offset1:offset0 as one
//! 16-bit offset; the `2`-address forms scale offset0 and offset1 by the element size, `st64`
//! ones by 64 elements). Atomics (0x00-0x15 and 0x40-0x5c without a result, 0x20-0x35 and
//! 0x60-0x7c returning the old value), lane permutes (`ds_swizzle_b32`, `ds_permute_b32`,
//! `ds_bpermute_b32`: a disabled source lane reads 0), `ds_append`/`ds_consume` on LDS, the GWS
//! barrier (`ds_gws_init`, `ds_gws_barrier`: the dispatch's scheduler keeps the resources, see
//! `dispatch.rs`). GDS memory and the GWS semaphores are not modelled.

use super::valu::lanes;
use super::vmem::{apply, Atomic};
use super::{Ctx, ExecError, GwsOp, Handler, Step};
use crate::isa::decode::names::ds as o;
use crate::isa::decode::Inst;
use crate::isa::wave::{Wave, LANES};

fn addr(w: &Wave, i: &Inst, l: usize) -> u32 {
    w.reg(i.src[0], l)
}

fn off16(i: &Inst) -> u32 {
    (u32::from(i.offset1) << 8) | i.imm as u32
}

fn get(w: &Wave, r: u16, l: usize, wide: bool) -> u64 {
    if wide {
        u64::from(w.reg(r, l)) | u64::from(w.reg(r + 1, l)) << 32
    } else {
        u64::from(w.reg(r, l))
    }
}

fn put(w: &mut Wave, r: u16, l: usize, v: u64, wide: bool) {
    w.set_reg(r, l, v as u32);
    if wide {
        w.set_reg(r + 1, l, (v >> 32) as u32);
    }
}

/// Reads `dwords` at `addr + off` into dst.
fn read(w: &mut Wave, i: &Inst, c: &mut Ctx, dwords: u16) -> Result<Step, ExecError> {
    let off = off16(i);
    if let (Some(ar), Some(dr)) = (w.vgprs_at(i.src[0], 1), w.vgprs_at(i.dst, usize::from(dwords)))
    {
        // VGPR address and destination, all there (the usual form): the lanes in place.
        for l in lanes(w.exec()) {
            let a = w.v[ar + l].wrapping_add(off);
            for k in 0..usize::from(dwords) {
                w.v[dr + k * LANES + l] = c.lds.read_u32(a.wrapping_add(4 * k as u32));
            }
        }
        return Ok(Step::Next);
    }
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        for k in 0..dwords {
            let v = c.lds.read_u32(a + 4 * u32::from(k));
            w.set_reg(i.dst + k, l, v);
        }
    }
    Ok(Step::Next)
}

fn write(w: &mut Wave, i: &Inst, c: &mut Ctx, dwords: u16) -> Result<Step, ExecError> {
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        for k in 0..dwords {
            c.lds.write_u32(a + 4 * u32::from(k), w.reg(i.src[1] + k, l));
        }
    }
    Ok(Step::Next)
}

/// `read2`/`write2`: two elements of `size` bytes at offset0 * scale and offset1 * scale.
fn two(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    wide: bool,
    st64: bool,
    is_write: bool,
) -> Result<Step, ExecError> {
    let size = if wide { 8 } else { 4 };
    let scale = if st64 { size * 64 } else { size };
    for l in lanes(w.exec()) {
        let a = addr(w, i, l);
        let a0 = a.wrapping_add(i.imm as u32 * scale);
        let a1 = a.wrapping_add(u32::from(i.offset1) * scale);
        if is_write {
            let (d0, d1) = (get(w, i.src[1], l, wide), get(w, i.src[2], l, wide));
            if wide {
                c.lds.write_u64(a0, d0);
                c.lds.write_u64(a1, d1);
            } else {
                c.lds.write_u32(a0, d0 as u32);
                c.lds.write_u32(a1, d1 as u32);
            }
        } else {
            let (v0, v1) = if wide {
                (c.lds.read_u64(a0), c.lds.read_u64(a1))
            } else {
                (u64::from(c.lds.read_u32(a0)), u64::from(c.lds.read_u32(a1)))
            };
            let step = if wide { 2 } else { 1 };
            put(w, i.dst, l, v0, wide);
            put(w, i.dst + step, l, v1, wide);
        }
    }
    Ok(Step::Next)
}

/// Sub-dword reads: `bytes` 1 or 2, sign-extended or not, into the whole register or one half.
fn read_small(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    bytes: usize,
    sign: bool,
    d16: Option<bool>,
) -> Result<Step, ExecError> {
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        let mut b = [0u8; 2];
        c.lds.read(a, &mut b[..bytes]);
        let v = super::vmem::subdword(&b[..bytes], sign, d16);
        w.set_reg(i.dst, l, v);
    }
    Ok(Step::Next)
}

fn write_small(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    bytes: usize,
    hi: bool,
) -> Result<Step, ExecError> {
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        let v = w.reg(i.src[1], l) >> if hi { 16 } else { 0 };
        c.lds.write(a, &v.to_le_bytes()[..bytes]);
    }
    Ok(Step::Next)
}

/// The atomic behind a DS opcode: (op, wide, returns).
fn atomic_of(op: u16) -> Option<(Atomic, bool, bool)> {
    use Atomic::*;
    let base = [Add, Sub, Sub, Inc, Dec, SMin, SMax, UMin, UMax, And, Or, Xor];
    let (k, wide, ret) = match op {
        0x00..=0x0b => (op, false, false),
        0x20..=0x2b => (op - 0x20, false, true),
        0x40..=0x4b => (op - 0x40, true, false),
        0x60..=0x6b => (op - 0x60, true, true),
        o::DS_WRXCHG_RTN_B32 => return Some((Swap, false, true)),
        o::DS_WRXCHG_RTN_B64 => return Some((Swap, true, true)),
        o::DS_CMPST_B32 => return Some((CmpSwap, false, false)),
        o::DS_CMPST_RTN_B32 => return Some((CmpSwap, false, true)),
        o::DS_CMPST_B64 => return Some((CmpSwap, true, false)),
        o::DS_CMPST_RTN_B64 => return Some((CmpSwap, true, true)),
        o::DS_ADD_F32 => return Some((AddF32, false, false)),
        o::DS_ADD_RTN_F32 => return Some((AddF32, false, true)),
        o::DS_ADD_F64 => return Some((AddF64, true, false)),
        o::DS_ADD_RTN_F64 => return Some((AddF64, true, true)),
        o::DS_MIN_F64 => return Some((MinF64, true, false)),
        o::DS_MAX_F64 => return Some((MaxF64, true, false)),
        o::DS_MIN_RTN_F64 => return Some((MinF64, true, true)),
        o::DS_MAX_RTN_F64 => return Some((MaxF64, true, true)),
        _ => return None,
    };
    Some((base[usize::from(k)], wide, ret))
}

fn atomic(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let (op, wide, ret) = atomic_of(i.op).ok_or(ExecError::Unimplemented)?;
    let rsub =
        matches!(i.op, o::DS_RSUB_U32 | o::DS_RSUB_RTN_U32 | o::DS_RSUB_U64 | o::DS_RSUB_RTN_U64);
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        let old = if wide { c.lds.read_u64(a) } else { u64::from(c.lds.read_u32(a)) };
        // cmpst: data0 is the compare value, data1 the new one.
        let (d, cmp) = if op == Atomic::CmpSwap {
            (get(w, i.src[2], l, wide), get(w, i.src[1], l, wide))
        } else {
            (get(w, i.src[1], l, wide), 0)
        };
        let new = if rsub {
            if wide {
                d.wrapping_sub(old)
            } else {
                d.wrapping_sub(old) & 0xffff_ffff
            }
        } else {
            apply(op, wide, old, d, cmp)
        };
        if wide {
            c.lds.write_u64(a, new);
        } else {
            c.lds.write_u32(a, new as u32);
        }
        if ret {
            put(w, i.dst, l, old, wide);
        }
    }
    Ok(Step::Next)
}

/// `ds_min/max_f32` (and `_rtn`): IEEE min/max of the old value and data0.
fn minmax_f32(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let max = matches!(i.op, o::DS_MAX_F32 | o::DS_MAX_RTN_F32);
    let ret = i.op >= 0x20;
    for l in lanes(w.exec()) {
        let a = addr(w, i, l).wrapping_add(off16(i));
        let old = c.lds.read_u32(a);
        let (x, y) = (f32::from_bits(old), f32::from_bits(w.reg(i.src[1], l)));
        c.lds.write_u32(a, if max { x.max(y) } else { x.min(y) }.to_bits());
        if ret {
            w.set_reg(i.dst, l, old);
        }
    }
    Ok(Step::Next)
}

fn permute(w: &mut Wave, i: &Inst, backward: bool) -> Result<Step, ExecError> {
    let exec = w.exec();
    let mut out = [0u32; 64];
    for l in lanes(exec) {
        let target = (addr(w, i, l).wrapping_add(off16(i)) / 4 % 64) as usize;
        if backward {
            // bpermute: lane l reads data0 of lane `target`.
            out[l] = if exec >> target & 1 == 1 { w.reg(i.src[1], target) } else { 0 };
        } else {
            // permute: lane l writes its data0 to lane `target`.
            out[target] = w.reg(i.src[1], l);
        }
    }
    for l in lanes(exec) {
        w.set_reg(i.dst, l, out[l]);
    }
    Ok(Step::Next)
}

fn swizzle(w: &mut Wave, i: &Inst) -> Result<Step, ExecError> {
    let exec = w.exec();
    let off = off16(i) as usize;
    let mut out = [0u32; 64];
    for l in lanes(exec) {
        let src = if off & 0x8000 != 0 {
            (l & !3) | ((off >> (2 * (l & 3))) & 3)
        } else {
            let (and, or, xor) = (off & 0x1f, (off >> 5) & 0x1f, (off >> 10) & 0x1f);
            (l & !31) | ((((l & 31) & and) | or) ^ xor)
        };
        // The value comes from the ADDR field's VGPR (LLVM's DS_1A_RET form: `ds_swizzle_b32
        // vdst, vaddr offset:...`); DATA0 is not read.
        out[l] = if exec >> src & 1 == 1 { w.reg(i.src[0], src) } else { 0 };
    }
    for l in lanes(exec) {
        w.set_reg(i.dst, l, out[l]);
    }
    Ok(Step::Next)
}

/// `ds_append` / `ds_consume` (LDS form): the 32-bit counter at M0 + offset grows (shrinks)
/// by the number of active lanes; every active lane gets the value before. The address is an
/// interpretation: the CDNA ISA texts say M0's base is added for GDS and only the offset
/// addresses LDS, but LLVM (the compiler whose code this runs) puts the LDS pointer in M0 and
/// the constant part in the offset for both, so the counter is taken at M0 + offset (the two
/// agree when M0 is 0). GDS is not modelled.
fn append(w: &mut Wave, i: &Inst, c: &mut Ctx, consume: bool) -> Result<Step, ExecError> {
    if i.gds {
        return Err(ExecError::Unimplemented);
    }
    let exec = w.exec();
    if exec == 0 {
        return Ok(Step::Next);
    }
    let a = w.s[usize::from(crate::isa::operand::M0)].wrapping_add(off16(i));
    let old = c.lds.read_u32(a);
    let n = exec.count_ones();
    c.lds.write_u32(a, if consume { old.wrapping_sub(n) } else { old.wrapping_add(n) });
    for l in lanes(exec) {
        w.set_reg(i.dst, l, old);
    }
    Ok(Step::Next)
}

/// `ds_gws_init` / `ds_gws_barrier`: resource (offset + M0[21:16]) mod 64, count from the first
/// active lane's data0. A wave with no lane active does nothing.
fn gws(w: &mut Wave, i: &Inst, barrier: bool) -> Result<Step, ExecError> {
    let exec = w.exec();
    if exec == 0 {
        return Ok(Step::Next);
    }
    let res = (off16(i) + ((w.s[usize::from(crate::isa::operand::M0)] >> 16) & 0x3f)) & 0x3f;
    let value = w.reg(i.src[1], exec.trailing_zeros() as usize);
    Ok(Step::Gws(if barrier { GwsOp::Barrier { res, value } } else { GwsOp::Init { res, value } }))
}

/// Whether `op` is one of the GWS instructions (their encoding sets the gds bit).
pub fn is_gws(op: u16) -> bool {
    (o::DS_GWS_SEMA_RELEASE_ALL..=o::DS_GWS_BARRIER).contains(&op)
}

macro_rules! h {
    (|$w:ident, $i:ident, $c:ident| $e:expr) => {
        Some(|$w: &mut Wave, $i: &Inst, $c: &mut Ctx| $e)
    };
}

pub fn ds(op: u16) -> Option<Handler> {
    if atomic_of(op).is_some() {
        return Some(atomic);
    }
    match op {
        o::DS_NOP => h!(|_w, _i, _c| Ok(Step::Next)),
        o::DS_MIN_F32 | o::DS_MAX_F32 | o::DS_MIN_RTN_F32 | o::DS_MAX_RTN_F32 => Some(minmax_f32),
        o::DS_WRITE_B32 => h!(|w, i, c| write(w, i, c, 1)),
        o::DS_WRITE_B64 => h!(|w, i, c| write(w, i, c, 2)),
        o::DS_WRITE_B96 => h!(|w, i, c| write(w, i, c, 3)),
        o::DS_WRITE_B128 => h!(|w, i, c| write(w, i, c, 4)),
        o::DS_READ_B32 => h!(|w, i, c| read(w, i, c, 1)),
        o::DS_READ_B64 => h!(|w, i, c| read(w, i, c, 2)),
        o::DS_READ_B96 => h!(|w, i, c| read(w, i, c, 3)),
        o::DS_READ_B128 => h!(|w, i, c| read(w, i, c, 4)),
        o::DS_WRITE2_B32 => h!(|w, i, c| two(w, i, c, false, false, true)),
        o::DS_WRITE2ST64_B32 => h!(|w, i, c| two(w, i, c, false, true, true)),
        o::DS_WRITE2_B64 => h!(|w, i, c| two(w, i, c, true, false, true)),
        o::DS_WRITE2ST64_B64 => h!(|w, i, c| two(w, i, c, true, true, true)),
        o::DS_READ2_B32 => h!(|w, i, c| two(w, i, c, false, false, false)),
        o::DS_READ2ST64_B32 => h!(|w, i, c| two(w, i, c, false, true, false)),
        o::DS_READ2_B64 => h!(|w, i, c| two(w, i, c, true, false, false)),
        o::DS_READ2ST64_B64 => h!(|w, i, c| two(w, i, c, true, true, false)),
        o::DS_WRITE_B8 => h!(|w, i, c| write_small(w, i, c, 1, false)),
        o::DS_WRITE_B16 => h!(|w, i, c| write_small(w, i, c, 2, false)),
        o::DS_WRITE_B8_D16_HI => h!(|w, i, c| write_small(w, i, c, 1, true)),
        o::DS_WRITE_B16_D16_HI => h!(|w, i, c| write_small(w, i, c, 2, true)),
        o::DS_READ_I8 => h!(|w, i, c| read_small(w, i, c, 1, true, None)),
        o::DS_READ_U8 => h!(|w, i, c| read_small(w, i, c, 1, false, None)),
        o::DS_READ_I16 => h!(|w, i, c| read_small(w, i, c, 2, true, None)),
        o::DS_READ_U16 => h!(|w, i, c| read_small(w, i, c, 2, false, None)),
        o::DS_READ_U8_D16 => h!(|w, i, c| read_small(w, i, c, 1, false, Some(false))),
        o::DS_READ_U8_D16_HI => h!(|w, i, c| read_small(w, i, c, 1, false, Some(true))),
        o::DS_READ_I8_D16 => h!(|w, i, c| read_small(w, i, c, 1, true, Some(false))),
        o::DS_READ_I8_D16_HI => h!(|w, i, c| read_small(w, i, c, 1, true, Some(true))),
        o::DS_READ_U16_D16 => h!(|w, i, c| read_small(w, i, c, 2, false, Some(false))),
        o::DS_READ_U16_D16_HI => h!(|w, i, c| read_small(w, i, c, 2, false, Some(true))),
        o::DS_PERMUTE_B32 => h!(|w, i, _c| permute(w, i, false)),
        o::DS_BPERMUTE_B32 => h!(|w, i, _c| permute(w, i, true)),
        o::DS_SWIZZLE_B32 => h!(|w, i, _c| swizzle(w, i)),
        o::DS_APPEND => h!(|w, i, c| append(w, i, c, false)),
        o::DS_CONSUME => h!(|w, i, c| append(w, i, c, true)),
        o::DS_GWS_INIT => h!(|w, i, _c| gws(w, i, false)),
        o::DS_GWS_BARRIER => h!(|w, i, _c| gws(w, i, true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::lds::Lds;
    use crate::isa::memory::Memory;
    use crate::isa::operand;
    use crate::sys::devmem::fake::FakeMemory;

    /// rocPRIM's warp sort of two-lane warps: `ds_swizzle_b32 v3, v2 offset:swizzle(SWAP,1)`
    /// (encoding D87A041F 03000002 from its gfx90a code object) swaps v2 between neighbouring
    /// lanes. The value is the ADDR field's register; DATA0 (v0 here, the element's address)
    /// was read instead, and every rocPRIM warp-sort test failed (192 of 192).
    #[test]
    fn swizzle_reads_the_addr_register() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let i = crate::isa::decode::decode(&[0xD87A_041F, 0x0300_0002]).unwrap();
        assert_eq!(
            (i.name, i.src[0], i.src[1]),
            ("ds_swizzle_b32", operand::VGPR0 + 2, operand::VGPR0)
        );
        let mut w = Wave::new(4, 0, 0);
        w.set_exec(u64::MAX);
        for l in 0..LANES {
            w.set_reg(operand::VGPR0, l, 0xdead_0000 + l as u32);
            w.set_reg(operand::VGPR0 + 2, l, 100 + l as u32);
        }
        ds(i.op).expect("implemented")(&mut w, &i, &mut ctx).unwrap();
        for l in 0..LANES {
            assert_eq!(w.reg(operand::VGPR0 + 3, l), 100 + (l ^ 1) as u32, "lane {l}");
        }
    }
}
