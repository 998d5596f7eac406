//! DS (LDS/GDS) encoding: `110110 acc[25] op[24:17] gds[16] offset1[15:8] offset0[7:0]`, second
//! word `vdst[31:24] data1[23:16] data0[15:8] addr[7:0]`. The gfx90a `acc` bit makes vdst and
//! the data operands AGPRs.

use super::{Family, Inst};
use crate::isa::operand::{AGPR0, VGPR0};

pub fn ds(w0: u32, w1: u32) -> Inst {
    let mut i = Inst::new(Family::Ds, ((w0 >> 17) & 0xff) as u16, 8);
    let data_base = if w0 >> 25 & 1 == 1 { AGPR0 } else { VGPR0 };
    i.gds = w0 >> 16 & 1 == 1;
    i.offset1 = ((w0 >> 8) & 0xff) as u8;
    i.imm = (w0 & 0xff) as i32;
    i.src[0] = VGPR0 + (w1 & 0xff) as u16;
    i.src[1] = data_base + ((w1 >> 8) & 0xff) as u16;
    i.src[2] = data_base + ((w1 >> 16) & 0xff) as u16;
    i.dst = data_base + ((w1 >> 24) & 0xff) as u16;
    i
}
