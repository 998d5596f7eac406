//! The ISA a code object is built for, which the decoder and the wave set-up follow: gfx90a
//! (CDNA2, the interpreter's first target) or gfx942 (CDNA3, the MI308X's own ISA, what ROCm
//! 6.x builds for the emulated GPU by default).
//!
//! What differs on gfx942 (gfx940 family), as far as the interpreter is concerned:
//!
//! - **Opcodes**: its own tables ([`crate::isa::decode::names942`], from llvm-mc 21), mostly
//!   gfx90a's numbers; new ones (`v_mov_b64`, `v_lshl_add_u64`, `v_fmamk/fmaak_f32`, fp8/bf8
//!   conversions, the xf32/fp8/i8 MFMAs and `v_smfmac_*`, `buffer_inv`, packed bf16 atomics,
//!   `global/scratch_load_lds_*`), removed ones (`v_mac_f32`, `v_mad_f32`, `v_mad_legacy_f32`,
//!   `v_madmk/madak_f32`, the non-1k bf16 MFMAs, `buffer_wbinvl1*`), renamed MFMAs (`_2b`,
//!   `_4b`, `_16b` block counts; the 1k bf16 ones renumbered). See `decode/gfx942.rs`.
//! - **Cache policy bits** sc0/sc1/nt sit where gfx90a has glc/scc/slc; an atomic returns the
//!   pre-operation value when sc0 (gfx90a's glc) is set, so the decoded `glc` means the same.
//!   Memory is coherent here, so the other bits have no effect on either target.
//! - **Architected flat scratch**: the kernel descriptor may not ask for the private segment
//!   buffer or flat scratch init SGPRs, the SPI sets FLAT_SCRATCH itself, and no private segment
//!   wave offset SGPR is set up; SCRATCH instructions have an `sve` bit (bit 13, gfx90a's `lds`)
//!   saying whether `vaddr` is used, and may use `saddr` and `vaddr` together.

use crate::kernels::naming::{MACH_GFX90A, MACH_GFX942};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    #[default]
    Gfx90a,
    Gfx942,
}

impl Target {
    /// The target of a code object's `EF_AMDGPU_MACH`, if the interpreter runs that ISA.
    pub fn from_mach(mach: u32) -> Option<Target> {
        match mach {
            MACH_GFX90A => Some(Target::Gfx90a),
            MACH_GFX942 => Some(Target::Gfx942),
            _ => None,
        }
    }

    /// The target named `gfx90a` or `gfx942`.
    pub fn from_name(name: &str) -> Option<Target> {
        [Target::Gfx90a, Target::Gfx942].into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx90a => "gfx90a",
            Target::Gfx942 => "gfx942",
        }
    }

    /// Whether the SPI sets FLAT_SCRATCH up itself (no private segment buffer, flat scratch
    /// init or wave offset SGPRs).
    pub fn architected_flat_scratch(self) -> bool {
        self == Target::Gfx942
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
