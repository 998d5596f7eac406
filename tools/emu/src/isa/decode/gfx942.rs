//! gfx942 (CDNA3) opcodes in terms of the gfx90a ones the interpreter's handlers are written
//! for. The encoding families and their fields are gfx90a's; the opcode tables are gfx942's own
//! ([`names942`], generated like [`super::names`] from llvm-mc 21 `-mcpu=gfx942`). Each gfx942 opcode
//! is either
//!
//! - **the same instruction as a gfx90a opcode**: same name in the same family, or one of the
//!   renamed MFMAs ([`MFMA_RENAMES`]).
//!   The decoder gives it the gfx90a opcode number (usually the same number; the 1k bf16
//!   MFMAs moved from VOP3P 0x63-0x67 to 0x5d-0x61) and its gfx942 name, so every gfx90a
//!   handler applies unchanged; or
//! - **gfx942's own** (`Inst::cdna3`): `op` stays the gfx942 number and the handler, if any,
//!   comes from `exec::cdna3`.
//!
//! gfx90a opcodes that gfx942 does not have (e.g. `v_mac_f32`, `v_mad_f32`, `buffer_wbinvl1`)
//! are not in the gfx942 tables, so they do not decode for gfx942.

use std::sync::OnceLock;

#[cfg(test)]
use super::names;
use super::{names942, Family};

/// gfx942 MFMA names whose instruction is a gfx90a one under another name (the block count
/// `_2b`/`_4b`/`_16b` spelled out, the 1k bf16 forms without `_1k`), and that gfx90a name. The
/// operands, layouts and modifiers are the same, except that on gfx940 the f64 opcodes' `blgp`
/// field is `neg` (the gfx90a handler refuses any modifier on f64 MFMAs as not implemented).
pub const MFMA_RENAMES: [(&str, &str); 20] = [
    ("v_mfma_f32_32x32x1_2b_f32", "v_mfma_f32_32x32x1f32"),
    ("v_mfma_f32_16x16x1_4b_f32", "v_mfma_f32_16x16x1f32"),
    ("v_mfma_f32_4x4x1_16b_f32", "v_mfma_f32_4x4x1f32"),
    ("v_mfma_f32_32x32x2_f32", "v_mfma_f32_32x32x2f32"),
    ("v_mfma_f32_16x16x4_f32", "v_mfma_f32_16x16x4f32"),
    ("v_mfma_f32_32x32x4_2b_f16", "v_mfma_f32_32x32x4f16"),
    ("v_mfma_f32_16x16x4_4b_f16", "v_mfma_f32_16x16x4f16"),
    ("v_mfma_f32_4x4x4_16b_f16", "v_mfma_f32_4x4x4f16"),
    ("v_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8f16"),
    ("v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16f16"),
    ("v_mfma_i32_32x32x4_2b_i8", "v_mfma_i32_32x32x4i8"),
    ("v_mfma_i32_16x16x4_4b_i8", "v_mfma_i32_16x16x4i8"),
    ("v_mfma_i32_4x4x4_16b_i8", "v_mfma_i32_4x4x4i8"),
    ("v_mfma_f32_32x32x4_2b_bf16", "v_mfma_f32_32x32x4bf16_1k"),
    ("v_mfma_f32_16x16x4_4b_bf16", "v_mfma_f32_16x16x4bf16_1k"),
    ("v_mfma_f32_4x4x4_16b_bf16", "v_mfma_f32_4x4x4bf16_1k"),
    ("v_mfma_f32_32x32x8_bf16", "v_mfma_f32_32x32x8bf16_1k"),
    ("v_mfma_f32_16x16x16_bf16", "v_mfma_f32_16x16x16bf16_1k"),
    ("v_mfma_f64_16x16x4_f64", "v_mfma_f64_16x16x4f64"),
    ("v_mfma_f64_4x4x4_4b_f64", "v_mfma_f64_4x4x4f64"),
];

/// A gfx942 opcode: its name, and the gfx90a opcode number of the same instruction if gfx90a
/// has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op942 {
    pub name: &'static str,
    pub gfx90a: Option<u16>,
}

/// The family's gfx942 `(opcode, name)` table.
pub fn table(f: Family) -> &'static [(u16, &'static str)] {
    match f {
        Family::Sop2 => names942::SOP2,
        Family::Sopk => names942::SOPK,
        Family::Sop1 => names942::SOP1,
        Family::Sopc => names942::SOPC,
        Family::Sopp => names942::SOPP,
        Family::Smem => names942::SMEM,
        Family::Vop1 => names942::VOP1,
        Family::Vop2 => names942::VOP2,
        Family::Vopc => names942::VOPC,
        Family::Vop3 => names942::VOP3,
        Family::Vop3p => names942::VOP3P,
        Family::Ds => names942::DS,
        Family::Flat => names942::FLAT,
        Family::Global => names942::GLOBAL,
        Family::Scratch => names942::SCRATCH,
        Family::Mubuf => names942::MUBUF,
        Family::Mtbuf => names942::MTBUF,
    }
}

/// The gfx90a opcode of the instruction gfx942 calls `name` in family `f`. (gfx942's VOP3 table
/// also has the e64 forms of `v_dot2c_f32_f16`, `v_dot2c_i32_i16`, `v_dot4c_i32_i8`,
/// `v_dot8c_i32_i4` and `v_pk_fmac_f16`, which gfx90a's VOP3 table, from LLVM 15, lacks: they
/// count as gfx942's own, not implemented, as their clamp and op_sel are not handled.)
fn gfx90a_equivalent(f: Family, name: &str) -> Option<u16> {
    let name = MFMA_RENAMES.iter().find(|r| r.0 == name).map_or(name, |r| r.1);
    f.table().iter().find(|e| e.1 == name).map(|e| e.0)
}

/// Every family's gfx942 opcodes, by opcode (built once).
fn ops() -> &'static [Vec<(u16, Op942)>] {
    static OPS: OnceLock<Vec<Vec<(u16, Op942)>>> = OnceLock::new();
    OPS.get_or_init(|| {
        Family::ALL
            .iter()
            .map(|&f| {
                table(f)
                    .iter()
                    .map(|&(op, name)| (op, Op942 { name, gfx90a: gfx90a_equivalent(f, name) }))
                    .collect()
            })
            .collect()
    })
}

/// gfx942's opcode `op` of family `f`, if it has one.
pub fn op(f: Family, op: u16) -> Option<Op942> {
    let k = Family::ALL.iter().position(|&x| x == f).expect("every family is in ALL");
    let t = &ops()[k];
    t.binary_search_by_key(&op, |e| e.0).ok().map(|i| t[i].1)
}

/// The first instruction word with its opcode field set to `op` (the family's own field).
pub fn with_opcode(f: Family, w0: u32, op: u16) -> u32 {
    let (shift, bits) = match f {
        Family::Sop2 => (23, 7),
        Family::Sopk => (23, 5),
        Family::Sop1 => (8, 8),
        Family::Sopc | Family::Sopp | Family::Vop3p => (16, 7),
        Family::Smem => (18, 8),
        Family::Vop1 => (9, 8),
        Family::Vop2 => (25, 6),
        Family::Vopc | Family::Ds => (17, 8),
        Family::Vop3 => (16, 10),
        Family::Flat | Family::Global | Family::Scratch | Family::Mubuf => (18, 7),
        Family::Mtbuf => (15, 4),
    };
    let mask = ((1u32 << bits) - 1) << shift;
    (w0 & !mask) | ((u32::from(op) << shift) & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_renamed_and_own_opcodes() {
        // Same name, same number.
        assert_eq!(op(Family::Vop2, 0x34), Some(Op942 { name: "v_add_u32", gfx90a: Some(0x34) }));
        // Renamed MFMA, renumbered: v_mfma_f32_32x32x8_bf16 is gfx90a's 32x32x8bf16_1k (0x66).
        assert_eq!(
            op(Family::Vop3p, 0x60),
            Some(Op942 { name: "v_mfma_f32_32x32x8_bf16", gfx90a: Some(0x66) })
        );
        assert_eq!(op(Family::Vop3p, 0x40).unwrap().gfx90a, Some(0x40));
        // gfx942's own.
        assert_eq!(op(Family::Vop1, 0x38), Some(Op942 { name: "v_mov_b64", gfx90a: None }));
        assert_eq!(op(Family::Vop3, 0x208), Some(Op942 { name: "v_lshl_add_u64", gfx90a: None }));
        assert_eq!(op(Family::Vop2, 0x17), Some(Op942 { name: "v_fmamk_f32", gfx90a: None }));
        // The e64 form of a VOP2 opcode gfx90a's VOP3 table does not list: gfx942's own.
        assert_eq!(op(Family::Vop3, 0x137), Some(Op942 { name: "v_dot2c_f32_f16", gfx90a: None }));
        // Removed on gfx940: v_mac_f32 (VOP2 0x16), v_mad_f32 (VOP3 0x1c1), buffer_wbinvl1.
        assert_eq!(op(Family::Vop2, 0x16), None);
        assert_eq!(op(Family::Vop3, 0x1c1), None);
        assert_eq!(op(Family::Mubuf, names::mubuf::BUFFER_WBINVL1), None);
        // Every rename names a gfx90a opcode and a gfx942 one.
        for (new, old) in MFMA_RENAMES {
            assert!(table(Family::Vop3p).iter().any(|e| e.1 == new), "{new}");
            assert!(names::VOP3P.iter().any(|e| e.1 == old), "{old}");
        }
    }

    #[test]
    fn opcode_fields() {
        // v_mfma_f32_32x32x8_bf16 a[0:15], v[0:1], v[2:3], a[0:15] -> gfx90a's 0x66.
        assert_eq!(with_opcode(Family::Vop3p, 0xD3E0_8000, 0x66), 0xD3E6_8000);
        assert_eq!(with_opcode(Family::Vop1, 0x7E00_7002, 0x1), 0x7E00_0202);
    }
}
