//! FLAT, GLOBAL and SCRATCH encoding (gfx9): `110111 op[24:18] slc[17] glc[16] seg[15:14]
//! lds[13] offset[12:0]`, second word `vdst[31:24] acc[23] saddr[22:16] data[15:8]
//! addr[7:0]`. `seg` 0 is FLAT (12-bit unsigned offset), 1 SCRATCH, 2 GLOBAL (13-bit signed);
//! saddr 0x7f is "off" (the address is the 64-bit VGPR pair), else an SGPR pair base plus a
//! 32-bit VGPR offset.

use super::{sext, Family, Inst};
use crate::isa::operand::{AGPR0, VGPR0};

pub fn flat(w0: u32, w1: u32) -> Inst {
    let family = match (w0 >> 14) & 3 {
        0 => Family::Flat,
        1 => Family::Scratch,
        _ => Family::Global,
    };
    let mut i = Inst::new(family, ((w0 >> 18) & 0x7f) as u16, 8);
    i.slc = w0 >> 17 & 1 == 1;
    i.glc = w0 >> 16 & 1 == 1;
    i.lds = w0 >> 13 & 1 == 1;
    i.imm = if family == Family::Flat { (w0 & 0xfff) as i32 } else { sext(w0 & 0x1fff, 13) };
    let data_base = if w1 >> 23 & 1 == 1 { AGPR0 } else { VGPR0 };
    i.src[0] = VGPR0 + (w1 & 0xff) as u16;
    i.src[1] = data_base + ((w1 >> 8) & 0xff) as u16;
    i.src[2] = ((w1 >> 16) & 0x7f) as u16;
    i.dst = data_base + ((w1 >> 24) & 0xff) as u16;
    i
}
