//! MUBUF and MTBUF encodings (gfx9): MUBUF `111000 op[24:18] slc[17] lds[16] glc[14] idxen[13]
//! offen[12] offset[11:0]`; MTBUF `111010 nfmt[25:23] dfmt[22:19] op[18:15] glc[14] idxen[13]
//! offen[12] offset[11:0]`; second word (both) `soffset[31:24] acc[23] slc[22] (MTBUF)
//! srsrc[20:16] (in SGPR quads) vdata[15:8] vaddr[7:0]`.

use super::{Family, Inst};
use crate::isa::operand::{AGPR0, VGPR0};

fn common(mut i: Inst, w0: u32, w1: u32) -> Inst {
    i.glc = w0 >> 14 & 1 == 1;
    i.idxen = w0 >> 13 & 1 == 1;
    i.offen = w0 >> 12 & 1 == 1;
    i.imm = (w0 & 0xfff) as i32;
    let data_base = if w1 >> 23 & 1 == 1 { AGPR0 } else { VGPR0 };
    i.src[0] = VGPR0 + (w1 & 0xff) as u16;
    i.src[1] = data_base + ((w1 >> 8) & 0xff) as u16;
    i.dst = i.src[1];
    i.src[2] = (((w1 >> 16) & 0x1f) << 2) as u16;
    i.src[3] = (w1 >> 24) as u16;
    i
}

pub fn mubuf(w0: u32, w1: u32) -> Inst {
    let mut i = Inst::new(Family::Mubuf, ((w0 >> 18) & 0x7f) as u16, 8);
    i.slc = w0 >> 17 & 1 == 1;
    i.lds = w0 >> 16 & 1 == 1;
    common(i, w0, w1)
}

pub fn mtbuf(w0: u32, w1: u32) -> Inst {
    let mut i = Inst::new(Family::Mtbuf, ((w0 >> 15) & 0xf) as u16, 8);
    i.fmt = (((w0 >> 19) & 0xf) | (((w0 >> 23) & 0x7) << 4)) as u8;
    i.slc = w1 >> 22 & 1 == 1;
    common(i, w0, w1)
}
