//! Scalar memory (SMEM): `s_load_dword*` (address = sbase pair + offset), `s_buffer_load_dword*`
//! (address = the buffer descriptor's base + offset), `s_store_dword*`, `s_memtime` /
//! `s_memrealtime` (the device clock: ns and the 100 MHz real-time counter), the scalar cache
//! hints (no effect), and the scalar atomics `s_atomic_*` / `s_buffer_atomic_*` (32- and 64-bit:
//! the data in sdata, for cmpswap the compare value after it; `glc` returns the old value into
//! sdata). Offsets: the immediate, plus the soffset SGPR when present.

use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::smem as o;
use crate::isa::decode::Inst;
use crate::isa::operand::Ty;
use crate::isa::wave::Wave;

fn address(w: &Wave, i: &Inst, c: &Ctx, buffer: bool) -> u64 {
    let base = w.s64(i.src[0]) & if buffer { 0xffff_ffff_ffff } else { u64::MAX };
    let mut off = i64::from(i.imm);
    if i.soe {
        off += i64::from(w.sread(i.src[1], 0, Ty::B32, &c.apertures) as u32);
    }
    base.wrapping_add_signed(off)
}

fn load(w: &mut Wave, i: &Inst, c: &mut Ctx, n: usize, buffer: bool) -> Result<Step, ExecError> {
    let a = address(w, i, c, buffer) & !3;
    let mut v = [0u32; 16];
    c.mem.read_dwords(a, &mut v[..n])?;
    for (k, x) in v[..n].iter().enumerate() {
        w.set_s32(i.dst + k as u16, *x);
    }
    Ok(Step::Next)
}

fn store(w: &mut Wave, i: &Inst, c: &mut Ctx, n: usize, buffer: bool) -> Result<Step, ExecError> {
    let a = address(w, i, c, buffer) & !3;
    let mut b = Vec::with_capacity(n * 4);
    for k in 0..n {
        b.extend_from_slice(&w.s[usize::from((i.dst + k as u16) & 127)].to_le_bytes());
    }
    c.mem.write(a, &b)?;
    Ok(Step::Next)
}

/// A scalar atomic: 0x40-0x4c / 0x60-0x6c the buffer forms, 0x80-0x8c / 0xa0-0xac the
/// address forms (32-bit, then 64-bit `_x2`), in the vector atomics' order.
fn atomic(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    use super::vmem::Atomic::*;
    let kind = [Swap, CmpSwap, Add, Sub, SMin, UMin, SMax, UMax, And, Or, Xor, Inc, Dec]
        [usize::from(i.op & 0xf)];
    let wide = i.op & 0x20 != 0;
    let buffer = i.op < 0x80;
    let n = if wide { 8 } else { 4 };
    let a = address(w, i, c, buffer) & !(n as u64 - 1);
    let reg = |k: u16| {
        if wide {
            w.s64(i.dst + 2 * k)
        } else {
            u64::from(w.s[usize::from((i.dst + k) & 127)])
        }
    };
    let (data, cmp) = (reg(0), if kind == CmpSwap { reg(1) } else { 0 });
    let old = c.mem.atomic(a, wide, |old| super::vmem::apply(kind, wide, old, data, cmp))?;
    if i.glc {
        if wide {
            w.set_s64(i.dst, old);
        } else {
            w.set_s32(i.dst, old as u32);
        }
    }
    Ok(Step::Next)
}

macro_rules! ld {
    ($n:expr, $buf:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| load(w, i, c, $n, $buf))
    };
}
macro_rules! st {
    ($n:expr, $buf:expr) => {
        Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| store(w, i, c, $n, $buf))
    };
}

pub fn smem(op: u16) -> Option<Handler> {
    match op {
        o::S_LOAD_DWORD => ld!(1, false),
        o::S_LOAD_DWORDX2 => ld!(2, false),
        o::S_LOAD_DWORDX4 => ld!(4, false),
        o::S_LOAD_DWORDX8 => ld!(8, false),
        o::S_LOAD_DWORDX16 => ld!(16, false),
        o::S_BUFFER_LOAD_DWORD => ld!(1, true),
        o::S_BUFFER_LOAD_DWORDX2 => ld!(2, true),
        o::S_BUFFER_LOAD_DWORDX4 => ld!(4, true),
        o::S_BUFFER_LOAD_DWORDX8 => ld!(8, true),
        o::S_BUFFER_LOAD_DWORDX16 => ld!(16, true),
        o::S_STORE_DWORD => st!(1, false),
        o::S_STORE_DWORDX2 => st!(2, false),
        o::S_STORE_DWORDX4 => st!(4, false),
        o::S_BUFFER_STORE_DWORD => st!(1, true),
        o::S_BUFFER_STORE_DWORDX2 => st!(2, true),
        o::S_BUFFER_STORE_DWORDX4 => st!(4, true),
        o::S_MEMTIME => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            w.set_s64(i.dst, (c.clock)());
            Ok(Step::Next)
        }),
        o::S_MEMREALTIME => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            w.set_s64(i.dst, (c.clock)() / 10);
            Ok(Step::Next)
        }),
        o::S_DCACHE_INV
        | o::S_DCACHE_WB
        | o::S_DCACHE_INV_VOL
        | o::S_DCACHE_WB_VOL
        | o::S_DCACHE_DISCARD
        | o::S_DCACHE_DISCARD_X2 => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next)),
        0x40..=0x4c | 0x60..=0x6c | 0x80..=0x8c | 0xa0..=0xac => Some(atomic),
        _ => None,
    }
}
