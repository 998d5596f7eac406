//! Vector ALU encodings: VOP2 `0 op[30:25] vdst[24:17] vsrc1[16:9] src0[8:0]`, VOP1 `0111111
//! vdst[24:17] op[16:9] src0[8:0]`, VOPC `0111110 op[24:17] vsrc1[16:9] src0[8:0]`, each with
//! an optional DPP or SDWA word (src0 250 / 249); VOP3 (gfx9) `110100 op[25:16] clamp[15]
//! op_sel[14:11] abs[10:8] vdst[7:0]` (VOP3b: `sdst[14:8]` instead of op_sel/abs), second word
//! `neg[31:29] omod[28:27] src2[26:18] src1[17:9] src0[8:0]`; VOP3P `110100111 op[22:16]
//! clamp[15] op_sel_hi2[14] op_sel[13:11] neg_hi[10:8] vdst[7:0]`, second word `neg[31:29]
//! op_sel_hi[28:27] src2 src1 src0`.
//!
//! VOP3P-MAI (the `v_mfma_*` opcodes 0x40-0x7f but the two `v_accvgpr_*`) reuses the VOP3P
//! layout: `abid[14:11] cbsz[10:8]` and `acc_cd[15]` (C and D are AGPRs) in the first word;
//! `blgp[31:29] acc[28:27]` (A, B are AGPRs) in the second (LLVM's `VOP3Pe_MAI`).
//!
//! VOP3 numbers VOPC opcodes 0x000-0x0ff, VOP2 ones 0x100 + op, VOP1 ones 0x140 + op.

use super::names::{vop1, vop2, vop3, vop3p};
use super::{DecodeError, Dpp, Family, Inst, Mai, Sdwa};
use crate::isa::operand::{AGPR0, DPP, SDWA, VCC_LO, VGPR0};

/// The VOP3 opcode number of a VOP1/VOP2/VOPC opcode.
pub fn vop3_number(family: Family, op: u16) -> u16 {
    match family {
        Family::Vopc => op,
        Family::Vop2 => 0x100 + op,
        Family::Vop1 => 0x140 + op,
        _ => op,
    }
}

/// VOP3 opcodes with the VOP3b layout (a scalar destination beside the vector one).
pub fn is_vop3b(op: u16) -> bool {
    matches!(
        op,
        vop3::V_ADD_CO_U32
            | vop3::V_SUB_CO_U32
            | vop3::V_SUBREV_CO_U32
            | vop3::V_ADDC_CO_U32
            | vop3::V_SUBB_CO_U32
            | vop3::V_SUBBREV_CO_U32
            | vop3::V_DIV_SCALE_F32
            | vop3::V_DIV_SCALE_F64
            | vop3::V_MAD_U64_U32
            | vop3::V_MAD_I64_I32
    )
}

/// VOP3P opcodes of the MAI encoding (`v_mfma_*`).
pub fn is_mai(op: u16) -> bool {
    op >= 0x40 && !matches!(op, vop3p::V_ACCVGPR_READ_B32 | vop3p::V_ACCVGPR_WRITE_B32)
}

/// VOP2's v_madmk/v_madak carry a literal constant K although no source field says 255.
pub fn madmk_literal(i: &Inst) -> bool {
    i.family == Family::Vop2
        && matches!(
            i.op,
            vop2::V_MADMK_F32 | vop2::V_MADAK_F32 | vop2::V_MADMK_F16 | vop2::V_MADAK_F16
        )
}

pub fn vop_short(
    w: u32,
    word: &dyn Fn(usize) -> Result<u32, DecodeError>,
) -> Result<Inst, DecodeError> {
    let src0 = (w & 0x1ff) as u16;
    let vdst = ((w >> 17) & 0xff) as u16;
    let mut i = match w >> 25 {
        0x3f => {
            let op = ((w >> 9) & 0xff) as u16;
            let mut i = Inst::new(Family::Vop1, op, 4);
            // v_readfirstlane writes an SGPR; v_accvgpr_mov reads and writes AGPRs.
            i.dst = if op == vop1::V_READFIRSTLANE_B32 {
                vdst
            } else if op == vop1::V_ACCVGPR_MOV_B32 {
                AGPR0 + vdst
            } else {
                VGPR0 + vdst
            };
            i.src[0] = if op == vop1::V_ACCVGPR_MOV_B32 { AGPR0 + (src0 & 0xff) } else { src0 };
            i
        }
        0x3e => {
            let mut i = Inst::new(Family::Vopc, ((w >> 17) & 0xff) as u16, 4);
            i.dst = VCC_LO;
            i.src[0] = src0;
            i.src[1] = VGPR0 + ((w >> 9) & 0xff) as u16;
            i
        }
        _ => {
            let mut i = Inst::new(Family::Vop2, ((w >> 25) & 0x3f) as u16, 4);
            i.dst = VGPR0 + vdst;
            i.src[0] = src0;
            i.src[1] = VGPR0 + ((w >> 9) & 0xff) as u16;
            i
        }
    };
    // Implicit operands of the 32-bit forms: carries and masks in VCC.
    i.sdst = VCC_LO;
    i.src[2] = VCC_LO;
    if src0 == DPP {
        let d = word(1)?;
        i.len = 8;
        i.src[0] = VGPR0 + (d & 0xff) as u16;
        i.dpp = Some(Dpp {
            ctrl: ((d >> 8) & 0x1ff) as u16,
            bound_ctrl: d >> 19 & 1 == 1,
            bank_mask: ((d >> 24) & 0xf) as u8,
            row_mask: (d >> 28) as u8,
        });
        i.neg = ((d >> 20) & 1 | ((d >> 22) & 1) << 1) as u8;
        i.abs = ((d >> 21) & 1 | ((d >> 23) & 1) << 1) as u8;
    } else if src0 == SDWA {
        let d = word(1)?;
        i.len = 8;
        i.src[0] = if d >> 23 & 1 == 1 { (d & 0xff) as u16 } else { VGPR0 + (d & 0xff) as u16 };
        if i.family != Family::Vop1 && d >> 31 & 1 == 1 {
            i.src[1] -= VGPR0; // s1: vsrc1 names a scalar operand
        }
        i.sdwa = Some(Sdwa {
            dst_sel: ((d >> 8) & 7) as u8,
            dst_unused: ((d >> 11) & 3) as u8,
            src_sel: [((d >> 16) & 7) as u8, ((d >> 24) & 7) as u8],
            sext: [d >> 19 & 1 == 1, d >> 27 & 1 == 1],
        });
        i.neg = ((d >> 20) & 1 | ((d >> 28) & 1) << 1) as u8;
        i.abs = ((d >> 21) & 1 | ((d >> 29) & 1) << 1) as u8;
        if i.family == Family::Vopc {
            // VOPC SDWA: sdst[14:8] when sd[15], else VCC.
            if d >> 15 & 1 == 1 {
                i.dst = ((d >> 8) & 0x7f) as u16;
            }
            i.sdwa = i.sdwa.map(|s| Sdwa { dst_sel: 6, dst_unused: 0, ..s });
        } else {
            i.clamp = d >> 13 & 1 == 1;
            i.omod = ((d >> 14) & 3) as u8;
        }
    }
    Ok(i)
}

/// A VOP3P instruction in the MAI layout (`v_mfma_*`).
pub fn mai(w0: u32, w1: u32) -> Inst {
    let src = [(w1 & 0x1ff) as u16, ((w1 >> 9) & 0x1ff) as u16, ((w1 >> 18) & 0x1ff) as u16, 0];
    let vdst = (w0 & 0xff) as u16;
    let mut i = Inst::new(Family::Vop3p, ((w0 >> 16) & 0x7f) as u16, 8);
    // A 9-bit source of 256 + n is v_n, or a_n when its acc bit is set.
    let acc =
        |k: usize, set: bool| if set && src[k] >= VGPR0 { src[k] - VGPR0 + AGPR0 } else { src[k] };
    let acc_cd = w0 >> 15 & 1 == 1;
    i.src[0] = acc(0, w1 >> 27 & 1 == 1);
    i.src[1] = acc(1, w1 >> 28 & 1 == 1);
    i.src[2] = acc(2, acc_cd);
    i.dst = if acc_cd { AGPR0 + vdst } else { VGPR0 + vdst };
    i.mai = Some(Mai {
        cbsz: ((w0 >> 8) & 7) as u8,
        abid: ((w0 >> 11) & 0xf) as u8,
        blgp: (w1 >> 29) as u8,
    });
    i.e64 = true;
    i
}

pub fn vop3(w0: u32, w1: u32) -> Inst {
    let src = [(w1 & 0x1ff) as u16, ((w1 >> 9) & 0x1ff) as u16, ((w1 >> 18) & 0x1ff) as u16, 0];
    let vdst = (w0 & 0xff) as u16;
    if w0 >> 23 == 0x1a7 {
        let op = ((w0 >> 16) & 0x7f) as u16;
        let mut i = Inst::new(Family::Vop3p, op, 8);
        i.src = src;
        i.dst = VGPR0 + vdst;
        if is_mai(op) {
            return mai(w0, w1);
        }
        match op {
            vop3p::V_ACCVGPR_READ_B32 => i.src[0] = AGPR0 + (src[0] & 0xff),
            vop3p::V_ACCVGPR_WRITE_B32 => i.dst = AGPR0 + vdst,
            _ => {}
        }
        i.clamp = w0 >> 15 & 1 == 1;
        i.op_sel = (((w0 >> 11) & 7) | ((w0 >> 14) & 1) << 3) as u8; // bit 3: op_sel_hi of src2
        i.abs = ((w0 >> 8) & 7) as u8; // neg_hi
        i.neg = ((w1 >> 29) & 7) as u8;
        i.op_sel_hi = (((w1 >> 27) & 3) | ((w0 >> 14) & 1) << 2) as u8;
        i.e64 = true;
        return i;
    }
    let op = ((w0 >> 16) & 0x3ff) as u16;
    let mut i = Inst::new(Family::Vop3, op, 8);
    i.e64 = true;
    i.src = src;
    i.clamp = w0 >> 15 & 1 == 1;
    i.neg = ((w1 >> 29) & 7) as u8;
    i.omod = ((w1 >> 27) & 3) as u8;
    if is_vop3b(op) {
        i.sdst = ((w0 >> 8) & 0x7f) as u16;
        i.dst = VGPR0 + vdst;
    } else {
        i.abs = ((w0 >> 8) & 7) as u8;
        i.op_sel = ((w0 >> 11) & 0xf) as u8;
        // VOPC and lane reads write a scalar destination.
        i.dst = if op < 0x100 || op == vop3::V_READLANE_B32 { vdst } else { VGPR0 + vdst };
        if op < 0x100 {
            i.sdst = vdst;
        }
        if matches!(op, vop3::V_ACCVGPR_READ_B32) {
            i.src[0] = AGPR0 + (src[0] & 0xff);
        }
        if matches!(op, vop3::V_ACCVGPR_WRITE_B32) {
            i.dst = AGPR0 + vdst;
        }
    }
    i
}
