//! VGPR indexing mode (gfx9, the CDNA ISAs' "GPR indexing"): `s_set_gpr_idx_on` turns it on with
//! an index and the operands it applies to, `s_set_gpr_idx_idx` / `s_set_gpr_idx_mode` change
//! them, `s_set_gpr_idx_off` turns it off. While it is on, the VGPR operands of vector ALU
//! instructions in the enabled positions (source 0, 1, 2, the destination) name the register
//! `index` places further. LLVM emits it for an array in VGPRs read or written at an index
//! known only at run time (rocSOLVER's `getri_kernel_small` for gfx942).
//!
//! State, as the ISA keeps it: the index in M0[7:0], the enables in M0[15:12] (bit 0 source 0,
//! 1 source 1, 2 source 2, 3 destination), the switch in MODE (`MODE.gpr_idx_en`, bit 27).
//!
//! How it runs here: decoded blocks are reused, so an instruction cannot be decoded with its
//! index. The block decoder (`isa::dispatch`) gives each vector ALU instruction between an
//! `s_set_gpr_idx_on` and its `s_set_gpr_idx_off` the handler [`indexed`], which applies the
//! index from M0 when the mode is on and then runs the instruction's own handler. A region that
//! does not close in its block (a branch inside it) is refused at its `s_set_gpr_idx_on`
//! ([`unclosed`]): its instructions would run without the index.

use super::{handler, Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::{sop1, sopc, sopp};
use crate::isa::decode::{Family, Inst};
use crate::isa::operand::{is_vgpr, Ty, AGPR0, M0};
use crate::isa::wave::Wave;

/// `MODE.gpr_idx_en`.
pub const MODE_GPR_IDX_EN: u32 = 1 << 27;

/// Whether `i` turns the mode on (a region starts after it).
pub fn starts_region(i: &Inst) -> bool {
    i.family == Family::Sopc && i.op == sopc::S_SET_GPR_IDX_ON
}

/// Whether `i` turns the mode off (the region ends with it).
pub fn ends_region(i: &Inst) -> bool {
    i.family == Family::Sopp && i.op == sopp::S_SET_GPR_IDX_OFF
}

/// Whether the mode applies to `i`'s operands: the vector ALU's encodings.
pub fn applies_to(i: &Inst) -> bool {
    matches!(i.family, Family::Vop1 | Family::Vop2 | Family::Vopc | Family::Vop3 | Family::Vop3p)
}

fn set_m0(w: &mut Wave, keep: u32, bits: u32) {
    let m0 = &mut w.s[usize::from(M0)];
    *m0 = (*m0 & keep) | bits;
}

/// The SOPC, SOPP and SOP1 instructions of the mode.
pub fn handler_of(family: Family, op: u16) -> Option<Handler> {
    match (family, op) {
        // MODE.gpr_idx_en = 1; M0[7:0] = S0[7:0]; M0[15:12] = the raw SSRC1 field (SIMM4).
        (Family::Sopc, sopc::S_SET_GPR_IDX_ON) => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let index = w.sread(i.src[0], i.literal, Ty::B32, &c.apertures) as u32 & 0xff;
            let enables = u32::from(i.src[1]) & 0xf;
            set_m0(w, !0xf0ff, index | enables << 12);
            w.mode |= MODE_GPR_IDX_EN;
            Ok(Step::Next)
        }),
        (Family::Sopp, sopp::S_SET_GPR_IDX_OFF) => Some(|w: &mut Wave, _: &Inst, _: &mut Ctx| {
            w.mode &= !MODE_GPR_IDX_EN;
            Ok(Step::Next)
        }),
        // M0[15:12] = SIMM16[3:0].
        (Family::Sopp, sopp::S_SET_GPR_IDX_MODE) => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| {
            set_m0(w, !0xf000, (i.imm as u32 & 0xf) << 12);
            Ok(Step::Next)
        }),
        // M0[7:0] = S0[7:0].
        (Family::Sop1, sop1::S_SET_GPR_IDX_IDX) => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let index = w.sread(i.src[0], i.literal, Ty::B32, &c.apertures) as u32 & 0xff;
            set_m0(w, !0xff, index);
            Ok(Step::Next)
        }),
        _ => None,
    }
}

/// `i` with the index applied: each VGPR operand in an enabled position `index` registers
/// further; `None` if one would leave the VGPRs.
pub fn apply(i: &Inst, m0: u32) -> Option<Inst> {
    let index = (m0 & 0xff) as u16;
    let enables = (m0 >> 12) & 0xf;
    let mut j = i.clone();
    let shift = |code: &mut u16| -> Option<()> {
        if is_vgpr(*code) {
            *code += index;
            (*code < AGPR0).then_some(())
        } else {
            Some(())
        }
    };
    for k in 0..3 {
        if enables & (1 << k) != 0 {
            shift(&mut j.src[k])?;
        }
    }
    if enables & 8 != 0 {
        shift(&mut j.dst)?;
    }
    Some(j)
}

/// The handler of a vector ALU instruction inside a region: with the mode on, the instruction
/// with its index applied ([`apply`]) runs; with it off, the instruction as it is.
pub fn indexed(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    if w.mode & MODE_GPR_IDX_EN == 0 {
        let h = handler(i).ok_or(ExecError::Unimplemented)?;
        return h(w, i, c);
    }
    let m0 = w.s[usize::from(M0)];
    let j = apply(i, m0).ok_or_else(|| {
        ExecError::Illegal(format!(
            "VGPR index {} (M0 {m0:#x}) takes an operand past v255",
            m0 & 0xff
        ))
    })?;
    let h = handler(&j).ok_or(ExecError::Unimplemented)?;
    h(w, &j, c)
}

/// The handler of an `s_set_gpr_idx_on` whose region does not end in its block.
pub fn unclosed(_: &mut Wave, _: &Inst, _: &mut Ctx) -> Result<Step, ExecError> {
    Err(ExecError::Illegal(
        "a VGPR indexing region (s_set_gpr_idx_on ... s_set_gpr_idx_off) across a branch is not modelled".into(),
    ))
}
