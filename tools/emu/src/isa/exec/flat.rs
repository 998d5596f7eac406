//! FLAT, GLOBAL and SCRATCH memory instructions. Addresses per lane: FLAT the 64-bit VGPR pair
//! plus the offset (LDS or private when inside their apertures); GLOBAL the same, or with
//! `saddr` the SGPR pair plus the 32-bit VGPR; SCRATCH the lane's private offset: `saddr`'s SGPR
//! and/or the VGPR (`Inst::sve`: gfx90a uses one of the two, gfx942 either, both or neither)
//! plus the offset. Atomics return the old value when `glc` (gfx942: sc0) is set.

use super::vmem::{self, MemOp, Place};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::{Family, Inst};
use crate::isa::operand::{Ty, SADDR_OFF};
use crate::isa::wave::Wave;

pub fn flat(family: Family, op: u16) -> Option<Handler> {
    let m = vmem::classify(op)?;
    if family == Family::Scratch && matches!(m, MemOp::Atomic { .. }) {
        return None;
    }
    if family == Family::Flat
        && matches!(m, MemOp::Atomic { op: vmem::Atomic::AddF32 | vmem::Atomic::PkAddF16, .. })
    {
        return None;
    }
    Some(run)
}

pub(super) fn run(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let op = vmem::classify(i.op).ok_or(ExecError::Unimplemented)?;
    if i.lds {
        // gfx90a's loads into LDS (the `lds` bit) are not modelled.
        return Err(ExecError::Unimplemented);
    }
    let exec = w.exec();
    let off = i64::from(i.imm);
    let saddr = (i.src[2] != SADDR_OFF).then(|| {
        w.sread(
            i.src[2],
            0,
            if i.family == Family::Scratch { Ty::B32 } else { Ty::B64 },
            &c.apertures,
        )
    });
    let ret = i.glc;
    for l in super::valu::lanes(exec) {
        let place = match i.family {
            Family::Scratch => {
                let v = if i.sve { u64::from(w.reg(i.src[0], l)) } else { 0 };
                Place::Private(saddr.unwrap_or(0).wrapping_add(v).wrapping_add_signed(off) as u32)
            }
            Family::Global => {
                let a = match saddr {
                    Some(s) => s.wrapping_add(u64::from(w.reg(i.src[0], l))),
                    None => u64::from(w.reg(i.src[0], l)) | u64::from(w.reg(i.src[0] + 1, l)) << 32,
                };
                Place::Global(a.wrapping_add_signed(off))
            }
            _ => {
                let a = u64::from(w.reg(i.src[0], l)) | u64::from(w.reg(i.src[0] + 1, l)) << 32;
                vmem::flat_place(a.wrapping_add_signed(off), c)
            }
        };
        vmem::access(w, c, l, place, op, vmem::Regs { dst: i.dst, data: i.src[1], ret })?;
    }
    Ok(Step::Next)
}
