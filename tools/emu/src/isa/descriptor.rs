//! The kernel descriptor (`<name>.kd`, 64 bytes) of code object v3+ for gfx90a, as LLVM's
//! AMDGPUUsage "Kernel Descriptor" describes it: what the CP reads to set up a wave.
//!
//! | offset | field |
//! |---|---|
//! | 0 | group_segment_fixed_size (u32) |
//! | 4 | private_segment_fixed_size (u32) |
//! | 8 | kernarg_size (u32) |
//! | 16 | kernel_code_entry_byte_offset (i64, from the descriptor's address) |
//! | 44 | compute_pgm_rsrc3 (gfx90a: ACCUM_OFFSET [5:0], TG_SPLIT [16]) |
//! | 48 | compute_pgm_rsrc1 (GRANULATED_WORKITEM_VGPR_COUNT [5:0], ...) |
//! | 52 | compute_pgm_rsrc2 (ENABLE_PRIVATE_SEGMENT [0], USER_SGPR_COUNT [5:1], ENABLE_SGPR_WORKGROUP_ID_X/Y/Z [7..9], ENABLE_SGPR_WORKGROUP_INFO [10], ENABLE_VGPR_WORKITEM_ID [12:11]) |
//! | 56 | kernel_code_properties (u16: ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER [0], DISPATCH_PTR [1], QUEUE_PTR [2], KERNARG_SEGMENT_PTR [3], DISPATCH_ID [4], FLAT_SCRATCH_INIT [5], PRIVATE_SEGMENT_SIZE [6], WAVEFRONT_SIZE32 [10]) |

use crate::kernels::Fault;

use super::memory::Memory;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// Address of the first instruction.
    pub entry: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    pub properties: u16,
}

pub mod props {
    pub const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    pub const DISPATCH_PTR: u16 = 1 << 1;
    pub const QUEUE_PTR: u16 = 1 << 2;
    pub const KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    pub const DISPATCH_ID: u16 = 1 << 4;
    pub const FLAT_SCRATCH_INIT: u16 = 1 << 5;
    pub const PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    pub const WAVEFRONT_SIZE32: u16 = 1 << 10;
}

impl Descriptor {
    /// Parses the 64 bytes of a descriptor at address `at`.
    pub fn parse(b: &[u8; 64], at: u64) -> Descriptor {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let entry_off = i64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        Descriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            entry: at.wrapping_add_signed(entry_off),
            rsrc3: u32_at(44),
            rsrc1: u32_at(48),
            rsrc2: u32_at(52),
            properties: u16::from_le_bytes([b[56], b[57]]),
        }
    }

    pub fn read(mem: &Memory, at: u64) -> Result<Descriptor, Fault> {
        let mut b = [0u8; 64];
        mem.read(at, &mut b)?;
        Ok(Descriptor::parse(&b, at))
    }

    /// VGPRs a wave has: (GRANULATED_WORKITEM_VGPR_COUNT + 1) * 8 on gfx90a (the unified
    /// register file's granule; it covers the AGPRs too).
    pub fn vgprs(&self) -> usize {
        ((self.rsrc1 & 0x3f) as usize + 1) * 8
    }

    /// First AGPR in the unified file: (ACCUM_OFFSET + 1) * 4.
    pub fn accum_offset(&self) -> usize {
        ((self.rsrc3 & 0x3f) as usize + 1) * 4
    }

    pub fn user_sgprs(&self) -> u32 {
        (self.rsrc2 >> 1) & 0x1f
    }

    pub fn private_segment(&self) -> bool {
        self.rsrc2 & 1 == 1
    }

    pub fn workgroup_id_enabled(&self, dim: usize) -> bool {
        self.rsrc2 >> (7 + dim) & 1 == 1
    }

    pub fn workgroup_info(&self) -> bool {
        self.rsrc2 >> 10 & 1 == 1
    }

    /// ENABLE_VGPR_WORKITEM_ID: 0 (x), 1 (x, y), 2 (x, y, z).
    pub fn workitem_ids(&self) -> u32 {
        (self.rsrc2 >> 11) & 3
    }

    /// The MODE register a wave starts with: rsrc1's FLOAT_ROUND_MODE_32/16_64 [15:12] and
    /// FLOAT_DENORM_MODE_32/16_64 [19:16] as FP_ROUND/FP_DENORM, DX10_CLAMP [21], IEEE_MODE [23].
    pub fn initial_mode(&self) -> u32 {
        ((self.rsrc1 >> 12) & 0xff) | ((self.rsrc1 >> 21) & 1) << 8 | ((self.rsrc1 >> 23) & 1) << 9
    }

    pub fn has(&self, prop: u16) -> bool {
        self.properties & prop != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields() {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&1024u32.to_le_bytes());
        b[16..24].copy_from_slice(&(-0x1000i64).to_le_bytes());
        b[44..48].copy_from_slice(&3u32.to_le_bytes());
        b[48..52].copy_from_slice(&0x00af_0081u32.to_le_bytes());
        b[52..56].copy_from_slice(&0x0000_0890u32.to_le_bytes());
        b[56..58].copy_from_slice(&0x000bu16.to_le_bytes());
        let d = Descriptor::parse(&b, 0x5000);
        assert_eq!(d.entry, 0x4000);
        assert_eq!(d.group_segment_fixed_size, 1024);
        assert_eq!(d.vgprs(), 16);
        assert_eq!(d.accum_offset(), 16);
        assert_eq!(d.user_sgprs(), 8);
        assert!(d.workgroup_id_enabled(0) && !d.workgroup_id_enabled(1));
        assert_eq!(d.workitem_ids(), 1);
        assert!(
            d.has(props::DISPATCH_PTR)
                && d.has(props::KERNARG_SEGMENT_PTR)
                && !d.has(props::QUEUE_PTR)
        );
    }
}
