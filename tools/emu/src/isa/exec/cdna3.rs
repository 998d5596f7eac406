//! gfx942 (CDNA3) opcodes that gfx90a does not have (`Inst::cdna3`; `op` is the gfx942 number),
//! from AMD's CDNA3 ISA reference. Every gfx942 opcode gfx90a has too runs on gfx90a's handler.
//!
//! - `v_mov_b64` (VOP1 0x38, VOP3 0x178): a 64-bit move (a 32-bit literal is zero-extended, as
//!   for the other b64 operands here).
//! - `v_lshl_add_u64` (VOP3 0x208): `D = (S0 << S1) + S2` on 64 bits; the ISA defines shifts
//!   of 0 to 4 only (LLVM emits it for those), so a lane with a larger S1 stops the dispatch as
//!   not implemented.
//! - `v_fmamk_f32` (VOP2 0x17: `D = S0 * K + S1`), `v_fmaak_f32` (0x18: `D = S0 * S1 + K`),
//!   fused, K the literal: they replace gfx90a's unfused `v_madmk/madak_f32` at the same numbers.
//! - `buffer_inv` (MUBUF 0x29): invalidates caches; memory is coherent here, so nothing to do.
//! - `flat_atomic_add_f32`, `flat_atomic_pk_add_f16` (FLAT 0x4d, 0x4e): gfx90a has them as
//!   GLOBAL opcodes only; the same semantics through a flat address.

use std::cell::Cell;

use super::valu::{f, fb, vop};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names942::{flat as fl, mubuf as mb, vop1 as o1, vop2 as o2, vop3 as o3};
use crate::isa::decode::{Family, Inst};
use crate::isa::operand::Ty::{B32, B64, F32};
use crate::isa::wave::Wave;

/// The handler of a gfx942-only opcode, if it is implemented.
pub fn handler(i: &Inst) -> Option<Handler> {
    match (i.family, i.op) {
        (Family::Vop1, o1::V_MOV_B64) | (Family::Vop3, o3::V_MOV_B64) => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| vop(w, i, c, &[B64], B64, |a, _| a[0]))
        }
        (Family::Vop3, o3::V_LSHL_ADD_U64) => Some(lshl_add_u64),
        (Family::Vop2, o2::V_FMAMK_F32) => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = f32::from_bits(i.literal);
            vop(w, i, c, &[F32, F32], F32, |a, _| fb(f(a[0]).mul_add(k, f(a[1]))))
        }),
        (Family::Vop2, o2::V_FMAAK_F32) => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let k = f32::from_bits(i.literal);
            vop(w, i, c, &[F32, F32], F32, |a, _| fb(f(a[0]).mul_add(f(a[1]), k)))
        }),
        (Family::Mubuf, mb::BUFFER_INV) => {
            Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next))
        }
        (Family::Flat, fl::FLAT_ATOMIC_ADD_F32 | fl::FLAT_ATOMIC_PK_ADD_F16) => {
            Some(super::flat::run)
        }
        _ => None,
    }
}

fn lshl_add_u64(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let wide = Cell::new(false);
    let exec = w.exec();
    let step = vop(w, i, c, &[B64, B32, B64], B64, |a, l| {
        if a[1] > 4 && exec >> l & 1 == 1 {
            wide.set(true);
        }
        (a[0] << (a[1] & 7)).wrapping_add(a[2])
    })?;
    if wide.get() {
        return Err(ExecError::Unimplemented);
    }
    Ok(step)
}
