//! Scalar encodings: SOP2, SOPK, SOP1, SOPC, SOPP (the `10` prefix) and SMEM.
//!
//! SOP2 `10 op[29:23] sdst[22:16] ssrc1[15:8] ssrc0[7:0]`; SOPK `1011 op[27:23] sdst[22:16]
//! simm16`; SOP1 `101111101 sdst[22:16] op[15:8] ssrc0[7:0]`; SOPC `101111110 op[22:16]
//! ssrc1[15:8] ssrc0[7:0]`; SOPP `101111111 op[22:16] simm16`. SMEM (gfx9) `110000 op[25:18]
//! imm[17] glc[16] nv[15] soe[14] sdata[12:6] sbase[5:0]` (sbase in SGPR pairs), second word
//! `soffset[31:25] offset[20:0]`.

use super::{sext, Family, Inst};

pub fn sop(w: u32) -> Inst {
    let simm = sext(w & 0xffff, 16);
    match w >> 23 {
        0x17d => {
            let mut i = Inst::new(Family::Sop1, ((w >> 8) & 0xff) as u16, 4);
            i.dst = ((w >> 16) & 0x7f) as u16;
            i.src[0] = (w & 0xff) as u16;
            i
        }
        0x17e => {
            let mut i = Inst::new(Family::Sopc, ((w >> 16) & 0x7f) as u16, 4);
            i.src[0] = (w & 0xff) as u16;
            i.src[1] = ((w >> 8) & 0xff) as u16;
            i
        }
        0x17f => {
            let mut i = Inst::new(Family::Sopp, ((w >> 16) & 0x7f) as u16, 4);
            i.imm = simm;
            i
        }
        _ if w >> 28 == 0xb => {
            let op = ((w >> 23) & 0x1f) as u16;
            let mut i = Inst::new(Family::Sopk, op, 4);
            i.dst = ((w >> 16) & 0x7f) as u16;
            i.imm = simm;
            i
        }
        _ => {
            let mut i = Inst::new(Family::Sop2, ((w >> 23) & 0x7f) as u16, 4);
            i.dst = ((w >> 16) & 0x7f) as u16;
            i.src[0] = (w & 0xff) as u16;
            i.src[1] = ((w >> 8) & 0xff) as u16;
            i
        }
    }
}

pub fn smem(w0: u32, w1: u32) -> Inst {
    let mut i = Inst::new(Family::Smem, ((w0 >> 18) & 0xff) as u16, 8);
    i.dst = ((w0 >> 6) & 0x7f) as u16;
    i.src[0] = ((w0 & 0x3f) << 1) as u16;
    i.imm_offset = w0 >> 17 & 1 == 1;
    i.glc = w0 >> 16 & 1 == 1;
    i.soe = w0 >> 14 & 1 == 1;
    if i.imm_offset {
        i.imm = sext(w1 & 0x1f_ffff, 21);
        if i.soe {
            i.src[1] = ((w1 >> 25) & 0x7f) as u16;
        }
    } else {
        // Without imm the offset field names an SGPR.
        i.soe = true;
        i.src[1] = (w1 & 0x7f) as u16;
    }
    i
}
