//! Lane-crossing and register-file moves: `v_readlane_b32`, `v_writelane_b32`,
//! `v_readfirstlane_b32` (a VGPR lane to or from an SGPR), `v_swap_b32`, `v_accvgpr_mov_b32`.

use super::valu::{lanes, Src};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::{vop1, vop3 as o};
use crate::isa::decode::Inst;
use crate::isa::operand::{self, Ty};
use crate::isa::wave::Wave;

// VOP1 opcodes without a VOP3 form, at their VOP3-space numbers.
const READFIRSTLANE: u16 = 0x140 + vop1::V_READFIRSTLANE_B32;
const SWAP: u16 = 0x140 + vop1::V_SWAP_B32;
const ACCVGPR_MOV: u16 = 0x140 + vop1::V_ACCVGPR_MOV_B32;

pub fn lane_op(op: u16) -> Option<Handler> {
    match op {
        o::V_READLANE_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let lane = (w.sread(i.src[1], i.literal, Ty::B32, &c.apertures) & 63) as usize;
            let v = Src::new(w, i, 0, Ty::B32, c).raw(w, lane) as u32;
            w.set_s32(i.dst, v);
            Ok(Step::Next)
        }),
        o::V_WRITELANE_B32 => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let lane = (w.sread(i.src[1], i.literal, Ty::B32, &c.apertures) & 63) as usize;
            let v = w.sread(i.src[0], i.literal, Ty::B32, &c.apertures) as u32;
            w.set_reg(i.dst, lane, v);
            Ok(Step::Next)
        }),
        READFIRSTLANE => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let exec = w.exec();
            let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
            let v = Src::new(w, i, 0, Ty::B32, c).raw(w, lane) as u32;
            w.set_s32(i.dst, v);
            Ok(Step::Next)
        }),
        SWAP => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            if !operand::is_vgpr(i.src[0]) {
                return Err(ExecError::Illegal("v_swap_b32 needs a VGPR source".into()));
            }
            for l in lanes(w.exec()) {
                let (a, b) = (w.reg(i.dst, l), w.reg(i.src[0], l));
                w.set_reg(i.dst, l, b);
                w.set_reg(i.src[0], l, a);
            }
            Ok(Step::Next)
        }),
        ACCVGPR_MOV | o::V_ACCVGPR_READ_B32 | o::V_ACCVGPR_WRITE_B32 => {
            Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                super::valu::vop(w, i, c, &[Ty::B32], Ty::B32, |a, _| a[0])
            })
        }
        _ => None,
    }
}
