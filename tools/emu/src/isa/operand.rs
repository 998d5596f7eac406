//! Operand codes: what a source or destination field of an instruction names.
//!
//! One number space for every family: 0-255 are the scalar source codes of the gfx9 encodings
//! (SGPRs, VCC, M0, EXEC, inline constants, the literal, ...), 256-511 the VGPRs v0-v255 (a
//! 9-bit VOP source field, or 256 + an 8-bit VGPR field), 512-767 the AGPRs a0-a255 (the `acc`
//! bit of memory and MAI instructions, `v_accvgpr_*`). Facts: the CDNA2 ISA's "Scalar operands"
//! table and LLVM's AMDGPU operand decoding (llvm-mc-15 -disassemble is the check in tests).

/// The first VGPR code.
pub const VGPR0: u16 = 256;
/// The first AGPR code.
pub const AGPR0: u16 = 512;

pub const FLAT_SCR_LO: u16 = 102;
pub const XNACK_MASK_LO: u16 = 104;
pub const VCC_LO: u16 = 106;
pub const VCC_HI: u16 = 107;
pub const TTMP0: u16 = 108;
pub const M0: u16 = 124;
pub const EXEC_LO: u16 = 126;
pub const EXEC_HI: u16 = 127;
pub const ZERO: u16 = 128;
pub const SHARED_BASE: u16 = 235;
pub const SHARED_LIMIT: u16 = 236;
pub const PRIVATE_BASE: u16 = 237;
pub const PRIVATE_LIMIT: u16 = 238;
pub const POPS_EXITING_WAVE_ID: u16 = 239;
pub const SDWA: u16 = 249;
pub const DPP: u16 = 250;
pub const VCCZ: u16 = 251;
pub const EXECZ: u16 = 252;
pub const SCC: u16 = 253;
pub const LDS_DIRECT: u16 = 254;
pub const LITERAL: u16 = 255;
/// SGPR `null`-like "off" of FLAT/GLOBAL/SCRATCH `saddr` (0x7f).
pub const SADDR_OFF: u16 = 0x7f;

/// How an operand's bits are read: its width, and whether inline constants are floats (and of
/// which format) or integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// 16-bit integer (inline constants as 16-bit values).
    B16,
    B32,
    F32,
    F16,
    B64,
    /// Signed 64-bit: a literal is sign-extended.
    I64,
    F64,
}

impl Ty {
    pub fn is64(self) -> bool {
        matches!(self, Ty::B64 | Ty::I64 | Ty::F64)
    }
}

/// Whether the code is a scalar register (SGPR, VCC, TTMP, M0, EXEC, ...), i.e. 0-127.
pub fn is_sreg(code: u16) -> bool {
    code < 128
}

pub fn is_vgpr(code: u16) -> bool {
    (VGPR0..AGPR0).contains(&code)
}

pub fn is_agpr(code: u16) -> bool {
    (AGPR0..AGPR0 + 256).contains(&code)
}

/// The value of an inline constant code (128-208, 240-248) for an operand of type `ty`, or
/// None when the code is no inline constant.
pub fn inline_constant(code: u16, ty: Ty) -> Option<u64> {
    let int = match code {
        128..=192 => Some(i64::from(code) - 128),
        193..=208 => Some(192 - i64::from(code)),
        _ => None,
    };
    if let Some(i) = int {
        return Some(match ty {
            Ty::B64 | Ty::I64 | Ty::F64 => i as u64,
            // 16-bit operands take the low 16 bits; 32-bit ones the low 32 (zero above).
            Ty::F16 | Ty::B16 => u64::from(i as u16),
            Ty::B32 | Ty::F32 => u64::from(i as u32),
        });
    }
    let f: f64 = match code {
        240 => 0.5,
        241 => -0.5,
        242 => 1.0,
        243 => -1.0,
        244 => 2.0,
        245 => -2.0,
        246 => 4.0,
        247 => -4.0,
        248 => {
            // 1 / (2 pi), with the bit patterns the hardware uses.
            return Some(match ty {
                Ty::F64 => 0x3fc4_5f30_6dc9_c882,
                Ty::F16 | Ty::B16 => 0x3118,
                Ty::B64 | Ty::I64 => 0x3fc4_5f30_6dc9_c882,
                Ty::B32 | Ty::F32 => 0x3e22_f983,
            });
        }
        _ => return None,
    };
    Some(match ty {
        Ty::F64 | Ty::B64 | Ty::I64 => f.to_bits(),
        Ty::F16 | Ty::B16 => u64::from(crate::isa::fp16::f32_to_f16(f as f32)),
        Ty::B32 | Ty::F32 => u64::from((f as f32).to_bits()),
    })
}

/// A 32-bit literal as an operand of type `ty`: a 64-bit float takes it as its high half, a
/// signed 64-bit integer sign-extends it, other 64-bit operands zero-extend it.
pub fn literal(lit: u32, ty: Ty) -> u64 {
    match ty {
        Ty::F64 => u64::from(lit) << 32,
        Ty::I64 => i64::from(lit as i32) as u64,
        _ => u64::from(lit),
    }
}

/// The assembler's name of an operand code (for messages and tests).
pub fn name(code: u16) -> String {
    match code {
        0..=101 => format!("s{code}"),
        FLAT_SCR_LO => "flat_scratch_lo".into(),
        103 => "flat_scratch_hi".into(),
        XNACK_MASK_LO => "xnack_mask_lo".into(),
        105 => "xnack_mask_hi".into(),
        VCC_LO => "vcc_lo".into(),
        VCC_HI => "vcc_hi".into(),
        108..=123 => format!("ttmp{}", code - TTMP0),
        M0 => "m0".into(),
        EXEC_LO => "exec_lo".into(),
        EXEC_HI => "exec_hi".into(),
        128..=192 => format!("{}", code - 128),
        193..=208 => format!("-{}", code - 192),
        SHARED_BASE => "src_shared_base".into(),
        SHARED_LIMIT => "src_shared_limit".into(),
        PRIVATE_BASE => "src_private_base".into(),
        PRIVATE_LIMIT => "src_private_limit".into(),
        POPS_EXITING_WAVE_ID => "src_pops_exiting_wave_id".into(),
        240..=248 => ["0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494"]
            [usize::from(code - 240)]
        .into(),
        VCCZ => "src_vccz".into(),
        EXECZ => "src_execz".into(),
        SCC => "src_scc".into(),
        LDS_DIRECT => "src_lds_direct".into(),
        LITERAL => "literal".into(),
        256..=511 => format!("v{}", code - VGPR0),
        512..=767 => format!("a{}", code - AGPR0),
        _ => format!("reserved{code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_constants_by_type() {
        assert_eq!(inline_constant(128, Ty::B32), Some(0));
        assert_eq!(inline_constant(192, Ty::B32), Some(64));
        assert_eq!(inline_constant(193, Ty::B32), Some(0xffff_ffff));
        assert_eq!(inline_constant(208, Ty::I64), Some((-16i64) as u64));
        assert_eq!(inline_constant(240, Ty::F32), Some(0x3f00_0000));
        assert_eq!(inline_constant(242, Ty::F64), Some(1.0f64.to_bits()));
        assert_eq!(inline_constant(244, Ty::F16), Some(0x4000));
        assert_eq!(inline_constant(209, Ty::B32), None);
        assert_eq!(literal(0x4004_0000, Ty::F64), 2.5f64.to_bits());
        assert_eq!(literal(0xffff_fff0, Ty::I64), (-16i64) as u64);
        assert_eq!(literal(0xffff_fff0, Ty::B64), 0xffff_fff0);
    }
}
