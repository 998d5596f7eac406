//! The gfx90a instruction decoder: one 32-, 64- or 96-bit instruction from its words into an
//! [`Inst`] with the fields of its encoding family, named from the opcode tables
//! ([`names`], generated from LLVM's disassembler). gfx942 has the same families and fields
//! with its own opcode tables ([`names942`], mapped to gfx90a's in [`gfx942`]; [`decode_for`]).
//! Whole families are decoded: every field of every opcode the family holds, whether or not the
//! interpreter executes that opcode.
//!
//! Family selection by the high bits of the first word (CDNA2 ISA "Microcode formats"):
//!
//! | bits | family |
//! |---|---|
//! | `0xxxxxxx` | VOP2 (`0111111x` VOP1, `0111110x` VOPC) |
//! | `10xxxxxx` | SOP2 (`1011` SOPK, `101111101` SOP1, `101111110` SOPC, `101111111` SOPP) |
//! | `110000` | SMEM |
//! | `110100` | VOP3 (`110100111` VOP3P) |
//! | `110110` | DS |
//! | `110111` | FLAT / GLOBAL / SCRATCH (by the `seg` field) |
//! | `111000` | MUBUF |
//! | `111010` | MTBUF |
//!
//! A source field of 255 takes a 32-bit literal from the next word; 249 (SDWA) and 250 (DPP) in
//! `src0` of VOP1/VOP2/VOPC take a modifier word instead.

pub mod ds;
pub mod flat;
pub mod gfx942;
pub mod mubuf;
pub mod names;
pub mod names942;
pub mod scalar;
pub mod vector;

use super::operand;
use super::target::Target;

/// An encoding family (FLAT's three segments are separate families: they have separate opcode
/// tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Sop2,
    Sopk,
    Sop1,
    Sopc,
    Sopp,
    Smem,
    Vop1,
    Vop2,
    Vopc,
    Vop3,
    Vop3p,
    Ds,
    Flat,
    Global,
    Scratch,
    Mubuf,
    Mtbuf,
}

impl Family {
    pub const ALL: [Family; 17] = [
        Family::Sop2,
        Family::Sopk,
        Family::Sop1,
        Family::Sopc,
        Family::Sopp,
        Family::Smem,
        Family::Vop1,
        Family::Vop2,
        Family::Vopc,
        Family::Vop3,
        Family::Vop3p,
        Family::Ds,
        Family::Flat,
        Family::Global,
        Family::Scratch,
        Family::Mubuf,
        Family::Mtbuf,
    ];

    /// The family's `(opcode, name)` table.
    pub fn table(self) -> &'static [(u16, &'static str)] {
        match self {
            Family::Sop2 => names::SOP2,
            Family::Sopk => names::SOPK,
            Family::Sop1 => names::SOP1,
            Family::Sopc => names::SOPC,
            Family::Sopp => names::SOPP,
            Family::Smem => names::SMEM,
            Family::Vop1 => names::VOP1,
            Family::Vop2 => names::VOP2,
            Family::Vopc => names::VOPC,
            Family::Vop3 => names::VOP3,
            Family::Vop3p => names::VOP3P,
            Family::Ds => names::DS,
            Family::Flat => names::FLAT,
            Family::Global => names::GLOBAL,
            Family::Scratch => names::SCRATCH,
            Family::Mubuf => names::MUBUF,
            Family::Mtbuf => names::MTBUF,
        }
    }

    /// The name of opcode `op` of this family, if gfx90a has it.
    pub fn name(self, op: u16) -> Option<&'static str> {
        let t = self.table();
        t.binary_search_by_key(&op, |e| e.0).ok().map(|i| t[i].1)
    }

    /// Whether the family's instructions are vector ALU ones (VOP*).
    pub fn is_valu(self) -> bool {
        matches!(self, Family::Vop1 | Family::Vop2 | Family::Vopc | Family::Vop3 | Family::Vop3p)
    }
}

/// DPP controls (the word after a VOP1/VOP2/VOPC instruction whose src0 is 250).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dpp {
    pub ctrl: u16,
    pub bound_ctrl: bool,
    pub row_mask: u8,
    pub bank_mask: u8,
}

/// SDWA controls (the word after a VOP1/VOP2/VOPC instruction whose src0 is 249).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sdwa {
    /// 0-3 bytes, 4-5 words, 6 dword.
    pub dst_sel: u8,
    /// 0 pad with zeros, 1 sign-extend, 2 preserve.
    pub dst_unused: u8,
    pub src_sel: [u8; 2],
    pub sext: [bool; 2],
}

/// The matrix (MAI) fields of a `v_mfma_*` instruction (VOP3P-MAI): `cbsz`/`abid` broadcast one
/// block of A to 2^cbsz blocks, `blgp` remaps B's lanes. Whether C/D and A/B are AGPRs is in the
/// operand codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mai {
    pub cbsz: u8,
    pub abid: u8,
    pub blgp: u8,
}

/// One decoded instruction. Register fields hold operand codes ([`operand`]); which fields an
/// instruction uses is its family's layout:
///
/// - SOP*: `dst` sdst, `src[0..2]` ssrc0/ssrc1, `imm` simm16 (sign-extended).
/// - SMEM: `dst` sdata, `src[0]` sbase, `src[1]` soffset SGPR (when `soe` or not `imm_offset`),
///   `imm` the immediate offset.
/// - VOP*: `dst` vdst (an SGPR code for VOPC/readlane e64 destinations), `sdst` VOP3b's carry
///   out / VOPC e64's destination, `src[0..3]`, modifiers.
/// - DS: `dst` vdst, `src[0]` addr, `src[1]` data0, `src[2]` data1, `imm` offset0, `offset1`.
/// - FLAT/GLOBAL/SCRATCH: `dst` vdst, `src[0]` addr, `src[1]` data, `src[2]` saddr (0x7f: off),
///   `imm` offset.
/// - MUBUF/MTBUF: `dst` and `src[1]` vdata, `src[0]` vaddr, `src[2]` srsrc (first SGPR),
///   `src[3]` soffset, `imm` offset, `fmt` MTBUF's dfmt | nfmt << 4.
/// - VOP3P-MAI (`v_mfma_*`): `dst` D, `src[0..3]` A, B, C (AGPR codes where the `acc`/`acc_cd`
///   bits say), `mai` the broadcast fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub family: Family,
    pub op: u16,
    pub name: &'static str,
    /// Length in bytes (4, 8 or 12).
    pub len: u8,
    pub dst: u16,
    pub sdst: u16,
    pub src: [u16; 4],
    pub literal: u32,
    pub imm: i32,
    pub offset1: u8,
    /// VOP3 `|src|` bits; VOP3P `neg_hi`.
    pub abs: u8,
    pub neg: u8,
    pub op_sel: u8,
    pub op_sel_hi: u8,
    pub clamp: bool,
    pub omod: u8,
    /// VOP3-encoded form of a VOP1/VOP2/VOPC opcode (or a VOP3-only one).
    pub e64: bool,
    pub glc: bool,
    pub slc: bool,
    pub offen: bool,
    pub idxen: bool,
    pub gds: bool,
    pub lds: bool,
    /// SMEM: offset is an immediate.
    pub imm_offset: bool,
    /// SMEM: soffset SGPR present in addition (gfx9 `soe`).
    pub soe: bool,
    pub fmt: u8,
    pub dpp: Option<Dpp>,
    pub sdwa: Option<Sdwa>,
    pub mai: Option<Mai>,
    /// SCRATCH: the lane's `vaddr` is part of the address. gfx90a: when `saddr` is off (the
    /// address is `saddr` or `vaddr`); gfx942: its `sve` bit (both may be used, or neither).
    pub sve: bool,
    /// A gfx942 opcode gfx90a does not have: `op` is its gfx942 number and its handler comes
    /// from `exec::cdna3`. Otherwise `op` is the gfx90a number of the instruction, whichever
    /// target it was decoded for.
    pub cdna3: bool,
}

impl Inst {
    fn new(family: Family, op: u16, len: u8) -> Inst {
        Inst {
            family,
            op,
            name: "",
            len,
            dst: 0,
            sdst: 0,
            src: [0; 4],
            literal: 0,
            imm: 0,
            offset1: 0,
            abs: 0,
            neg: 0,
            op_sel: 0,
            op_sel_hi: 0,
            clamp: false,
            omod: 0,
            e64: false,
            glc: false,
            slc: false,
            offen: false,
            idxen: false,
            gds: false,
            lds: false,
            imm_offset: false,
            soe: false,
            fmt: 0,
            dpp: None,
            sdwa: None,
            mai: None,
            sve: false,
            cdna3: false,
        }
    }

    /// Whether any source field of the instruction names the literal (code 255).
    fn wants_literal(&self, nsrc: usize) -> bool {
        self.src[..nsrc].contains(&operand::LITERAL)
    }
}

/// Why words do not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The opcode number is not an instruction of its family on the target.
    UnknownOpcode { target: Target, family: Family, op: u16, word: u32 },
    /// No encoding family the interpreter decodes starts with these bits (e.g. EXP, MIMG,
    /// VINTRP).
    UnknownEncoding { word: u32 },
    /// The instruction runs past the words given.
    Truncated,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::UnknownOpcode { target, family, op, word } => {
                write!(f, "no {target} {family:?} opcode {op:#x} (word {word:#010x})")
            }
            DecodeError::UnknownEncoding { word } => {
                write!(f, "no gfx90a/gfx942 encoding family for word {word:#010x}")
            }
            DecodeError::Truncated => write!(f, "instruction truncated"),
        }
    }
}

/// Decodes the gfx90a instruction at the start of `words` (at most 3 are read).
pub fn decode(words: &[u32]) -> Result<Inst, DecodeError> {
    decode_gfx90a(words, None)
}

/// Decodes the instruction at the start of `words` for `target`.
pub fn decode_for(target: Target, words: &[u32]) -> Result<Inst, DecodeError> {
    match target {
        Target::Gfx90a => decode(words),
        Target::Gfx942 => decode_gfx942(words),
    }
}

/// gfx942: the gfx90a fields of the words, with the gfx942 opcode's name and, when gfx90a has
/// the same instruction, its gfx90a number (the first word is decoded again with that number
/// where the two differ, so that every opcode-dependent field is the gfx90a one).
fn decode_gfx942(words: &[u32]) -> Result<Inst, DecodeError> {
    let w0 = *words.first().ok_or(DecodeError::Truncated)?;
    let raw = fields(words)?;
    let op = gfx942::op(raw.family, raw.op).ok_or(DecodeError::UnknownOpcode {
        target: Target::Gfx942,
        family: raw.family,
        op: raw.op,
        word: w0,
    })?;
    let mut inst = match op.gfx90a {
        Some(o) if o != raw.op => {
            let n = words.len().min(3);
            let mut w = [0u32; 3];
            w[..n].copy_from_slice(&words[..n]);
            w[0] = gfx942::with_opcode(raw.family, w0, o);
            decode_gfx90a(&w[..n], Some(op.name))?
        }
        Some(_) => decode_gfx90a(words, Some(op.name))?,
        None => {
            let mut i = raw;
            i.cdna3 = true;
            i.name = op.name;
            if i.family == Family::Vop3p
                && (op.name.starts_with("v_mfma") || op.name.starts_with("v_smfmac"))
                && i.mai.is_none()
            {
                // gfx942's xf32 MFMAs (0x3e, 0x3f) lie below gfx90a's MAI range.
                let w1 = words.get(1).copied().ok_or(DecodeError::Truncated)?;
                i = Inst { name: op.name, cdna3: true, ..vector::mai(w0, w1) };
            }
            i
        }
    };
    if inst.family == Family::Scratch {
        // gfx940's SCRATCH has no `lds` bit: bit 13 is `sve` (vaddr is used).
        inst.sve = inst.lds;
        inst.lds = false;
    }
    Ok(inst)
}

/// Decodes the fields of a gfx90a instruction (the name is left empty).
fn fields(words: &[u32]) -> Result<Inst, DecodeError> {
    let w0 = *words.first().ok_or(DecodeError::Truncated)?;
    let word = |i: usize| words.get(i).copied().ok_or(DecodeError::Truncated);
    let mut inst = match w0 >> 26 {
        0x30 => scalar::smem(w0, word(1)?),
        0x34 => vector::vop3(w0, word(1)?),
        0x36 => ds::ds(w0, word(1)?),
        0x37 => flat::flat(w0, word(1)?),
        0x38 => mubuf::mubuf(w0, word(1)?),
        0x3a => mubuf::mtbuf(w0, word(1)?),
        _ if w0 >> 31 == 0 => vector::vop_short(w0, &word)?,
        _ if w0 >> 30 == 0b10 => scalar::sop(w0),
        _ => return Err(DecodeError::UnknownEncoding { word: w0 }),
    };
    // The literal follows the instruction's own words.
    let nsrc = match inst.family {
        Family::Sop2 | Family::Sopc => 2,
        Family::Sop1 => 1,
        Family::Vop1 | Family::Vop2 | Family::Vopc => 1,
        _ => 0,
    };
    // s_setreg_imm32_b32 carries its 32-bit immediate as a literal too.
    let setreg_imm = inst.family == Family::Sopk && inst.op == names::sopk::S_SETREG_IMM32_B32;
    // (gfx942's v_fmamk_f32/v_fmaak_f32 are VOP2 0x17/0x18, gfx90a's v_madmk/madak_f32: the
    // literal K is read for both.)
    if inst.wants_literal(nsrc) || vector::madmk_literal(&inst) || setreg_imm {
        inst.literal = word(usize::from(inst.len / 4))?;
        inst.len += 4;
    }
    if inst.family == Family::Scratch {
        inst.sve = inst.src[2] == operand::SADDR_OFF;
    }
    Ok(inst)
}

/// A gfx90a instruction, named `name` (gfx942's name of the same instruction) or from the
/// gfx90a table.
fn decode_gfx90a(words: &[u32], name: Option<&'static str>) -> Result<Inst, DecodeError> {
    let mut inst = fields(words)?;
    let w0 = words[0];
    inst.name = match name {
        Some(n) => n,
        None => inst.family.name(inst.op).ok_or(DecodeError::UnknownOpcode {
            target: Target::Gfx90a,
            family: inst.family,
            op: inst.op,
            word: w0,
        })?,
    };
    Ok(inst)
}

/// Sign-extends the low `bits` bits of `v`.
pub(crate) fn sext(v: u32, bits: u32) -> i32 {
    ((v << (32 - bits)) as i32) >> (32 - bits)
}

impl Inst {
    /// A blank instruction of `family` and `op` (for asking whether an opcode is implemented).
    pub fn probe(family: Family, op: u16) -> Inst {
        Inst::new(family, op, 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Encodings from llvm-objdump-15 --mcpu=gfx90a of a hipcc-built vector add.
    #[test]
    fn decodes_a_vector_add() {
        let i = decode(&[0xC0020002, 0x00000004]).unwrap();
        assert_eq!((i.name, i.dst, i.src[0], i.imm, i.len), ("s_load_dword", 0, 4, 4, 8));
        let i = decode(&[0x8600FF00, 0x0000FFFF]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.src[1], i.literal, i.len),
            ("s_and_b32", 0, 0, 255, 0xffff, 8)
        );
        let i = decode(&[0x7D880002]).unwrap();
        assert_eq!((i.name, i.src[0], i.src[1]), ("v_cmp_gt_i32", 2, 256));
        let i = decode(&[0xBE80206A]).unwrap();
        assert_eq!((i.name, i.dst, i.src[0]), ("s_and_saveexec_b64", 0, 106));
        let i = decode(&[0xBF880019]).unwrap();
        assert_eq!((i.name, i.imm), ("s_cbranch_execz", 25));
        let i = decode(&[0xD28F0000, 0x00020082]).unwrap();
        assert_eq!((i.name, i.dst, i.src[0], i.src[1]), ("v_lshlrev_b64", 256, 130, 256));
        let i = decode(&[0x38060303]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.src[1], i.src[2]),
            ("v_addc_co_u32", 259, 259, 257, 106)
        );
        let i = decode(&[0xDC508000, 0x067F0004]).unwrap();
        assert_eq!(
            (i.family, i.name, i.dst, i.src[0], i.src[2]),
            (Family::Global, "global_load_dword", 262, 260, 0x7f)
        );
        let i = decode(&[0xD8700200, 0x02000001]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.imm, i.offset1),
            ("ds_read2st64_b32", 258, 257, 0, 2)
        );
        let i = decode(&[0xBF810000]).unwrap();
        assert_eq!(i.name, "s_endpgm");
        // s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0xf (llvm-mc-15 -show-encoding)
        let i = decode(&[0xBA001901, 0x0000000F]).unwrap();
        assert_eq!((i.name, i.len, i.literal, i.imm), ("s_setreg_imm32_b32", 8, 0xf, 0x1901));
        assert_eq!(decode(&[0x7E0202FA]), Err(DecodeError::Truncated));
    }

    // VOP3P-MAI encodings from llvm-mc-15 -mcpu=gfx90a -show-encoding.
    #[test]
    fn decodes_matrix_instructions() {
        use crate::isa::operand::{AGPR0, VGPR0};
        // v_mfma_f64_16x16x4f64 a[0:7], v[0:1], v[2:3], a[0:7]
        let i = decode(&[0xD3EE8000, 0x04020500]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.src[1], i.src[2]),
            ("v_mfma_f64_16x16x4f64", AGPR0, VGPR0, VGPR0 + 2, AGPR0)
        );
        assert_eq!(i.mai, Some(Mai { cbsz: 0, abid: 0, blgp: 0 }));
        // v_mfma_f32_32x32x1f32 a[0:31], a0, v1, a[0:31] cbsz:1 abid:1 blgp:2
        let i = decode(&[0xD3C08900, 0x4C020300]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.src[1], i.src[2]),
            ("v_mfma_f32_32x32x1f32", AGPR0, AGPR0, VGPR0 + 1, AGPR0)
        );
        assert_eq!(i.mai, Some(Mai { cbsz: 1, abid: 1, blgp: 2 }));
        // v_mfma_f32_32x32x1f32 v[0:31], v0, a1, v[0:31]
        let i = decode(&[0xD3C00000, 0x14020300]).unwrap();
        assert_eq!((i.dst, i.src[0], i.src[1], i.src[2]), (VGPR0, VGPR0, AGPR0 + 1, VGPR0));
        // v_mfma_f32_16x16x16f16 a[0:3], v[0:1], v[2:3], 1.0
        let i = decode(&[0xD3CD8000, 0x03CA0500]).unwrap();
        assert_eq!(
            (i.name, i.dst, i.src[0], i.src[1], i.src[2]),
            ("v_mfma_f32_16x16x16f16", AGPR0, VGPR0, VGPR0 + 2, 242)
        );
    }
}
