//! MUBUF (untyped buffer) instructions. The buffer resource (V#, four SGPRs): base [47:0],
//! stride [61:48], num_records (dword 2), swizzle/add_tid bits (dword 3). Address per lane:
//! base + soffset + offset + (offen: the VGPR offset) + (idxen: the VGPR index * stride), in
//! range when the offset (raw buffers) or index (strided ones) is below num_records.
//!
//! The private segment buffer the dispatch gives a wave (its s[0:3]) has its base at
//! `Apertures::private_buffer`; an access through it goes to the lane's private memory at the per-lane
//! offset soffset / 64 + VGPR offset + offset (the swizzled scratch layout puts a lane's
//! consecutive dwords 64 dwords apart, so a wave-level soffset is 64 times a lane offset).

use super::vmem::{self, Place};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::mubuf as o;
use crate::isa::decode::Inst;
use crate::isa::operand::Ty;
use crate::isa::wave::Wave;

pub fn mubuf(op: u16) -> Option<Handler> {
    match op {
        o::BUFFER_WBL2 | o::BUFFER_INVL2 | o::BUFFER_WBINVL1 | o::BUFFER_WBINVL1_VOL => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next)),
        _ => vmem::classify(op).map(|_| run as Handler),
    }
}

fn run(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    if i.lds {
        return Err(ExecError::Unimplemented);
    }
    let op = vmem::classify(i.op).ok_or(ExecError::Unimplemented)?;
    let r = i.src[2] & 127;
    let d0 = w.s[usize::from(r)];
    let d1 = w.s[usize::from((r + 1) & 127)];
    let num_records = u64::from(w.s[usize::from((r + 2) & 127)]);
    let base = u64::from(d0) | u64::from(d1 & 0xffff) << 32;
    let stride = u64::from((d1 >> 16) & 0x3fff);
    let soffset = w.sread(i.src[3], 0, Ty::B32, &c.apertures);
    let private = base >= c.apertures.private_buffer && base - c.apertures.private_buffer < 1 << 32;
    for l in super::valu::lanes(w.exec()) {
        let (mut index, mut voff) = (0u64, 0u64);
        match (i.idxen, i.offen) {
            (true, true) => {
                index = u64::from(w.reg(i.src[0], l));
                voff = u64::from(w.reg(i.src[0] + 1, l));
            }
            (true, false) => index = u64::from(w.reg(i.src[0], l)),
            (false, true) => voff = u64::from(w.reg(i.src[0], l)),
            _ => {}
        }
        let offset = voff + i.imm as u64;
        let place = if private {
            Place::Private((base - c.apertures.private_buffer + soffset / 64 + offset) as u32)
        } else {
            let in_range = if stride == 0 { offset < num_records } else { index < num_records };
            if in_range {
                Place::Global(base + soffset + offset + index * stride)
            } else {
                Place::Discard
            }
        };
        vmem::access(w, c, l, place, op, vmem::Regs { dst: i.dst, data: i.src[1], ret: i.glc })?;
    }
    Ok(Step::Next)
}
