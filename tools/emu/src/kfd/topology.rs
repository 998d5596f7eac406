//! The topology KFD publishes (on a real system under `/sys/class/kfd/kfd/topology`): one CPU
//! node and the emulated GPUs, their memory banks, caches and IO links. Numbers come from the
//! config (MI308X by default); the ISA is gfx90a because ROCr 5.2 and clang 15 cannot target
//! the MI308X's gfx942.

use crate::config::Config;

/// Heap types of `hsakmttypes.h`.
pub mod heap {
    pub const SYSTEM: u32 = 0;
    pub const FRAME_BUFFER_PRIVATE: u32 = 2;
    pub const GPU_LDS: u32 = 4;
    pub const GPU_SCRATCH: u32 = 5;
}

/// `HsaCacheType` bits.
pub mod cache_type {
    pub const DATA: u32 = 1;
    pub const INSTRUCTION: u32 = 2;
    pub const CPU: u32 = 4;
    pub const HSACU: u32 = 8;
}

/// gfx9 apertures as KFD sets them (`kfd_flat_memory.c`).
pub const LDS_APERTURE: u64 = 1 << 48;
pub const SCRATCH_APERTURE: u64 = 2 << 48;
/// `HSA_IOLINKTYPE_PCIEXPRESS`.
pub const IOLINK_PCIE: u32 = 2;
/// The GPU's gfx target: 9.0.10 = gfx90a.
pub const GFX_VERSION: (u32, u32, u32) = (9, 0, 10);
/// MEC firmware version reported in `EngineId.uCode` (only gfx7/8 logic reads it).
pub const MEC_UCODE: u32 = 0x4a;
/// MEC firmware version in the sysfs `fw_version` a ROCm 6.x thunk reads (recent enough that
/// no firmware workaround of ROCr applies).
pub const MEC_FW_VERSION: u32 = 185;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemBank {
    pub heap: u32,
    pub size: u64,
    pub base: u64,
    pub width_bits: u32,
    pub clock_mhz: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    pub level: u32,
    pub size_kib: u32,
    pub line: u32,
    pub kind: u32,
    pub processor_id: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoLink {
    pub kind: u32,
    pub from: u32,
    pub to: u32,
    pub weight: u32,
}

/// One node: a CPU (`cpu_cores > 0`) or a GPU (`simds > 0`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Node {
    pub cpu_cores: u32,
    pub simds: u32,
    pub simds_per_cu: u32,
    pub waves_per_simd: u32,
    pub wave_size: u32,
    pub lds_kib: u32,
    pub shader_banks: u32,
    pub arrays: u32,
    pub cus_per_array: u32,
    pub scratch_slots_per_cu: u32,
    pub gfx: (u32, u32, u32),
    pub vendor_id: u16,
    pub device_id: u16,
    pub location_id: u32,
    pub local_mem: u64,
    pub max_clock_mhz: u32,
    pub drm_minor: i32,
    pub marketing_name: String,
    pub amd_name: String,
    pub sdma_engines: u32,
    pub sdma_queues_per_engine: u32,
    pub cp_queues: u32,
    pub unique_id: u64,
    pub ccompute_id_lo: u32,
    pub fcompute_id_lo: u32,
    /// KFD's gpu_id (0 for the CPU node).
    pub gpu_id: u32,
    pub mem: Vec<MemBank>,
    pub caches: Vec<Cache>,
    pub links: Vec<IoLink>,
}

/// KFD's gpu_id for emulated GPU `index` (a hash on real systems; any non-zero value).
pub fn gpu_id(index: u32) -> u32 {
    0x4e50 + index
}

/// `gfx90a` from (9, 0, 10).
pub fn gfx_name((major, minor, step): (u32, u32, u32)) -> String {
    format!("gfx{major}{minor}{step:x}")
}

/// The gfx942 target (9.4.2): the MI308X's own ISA, reported under ROCm 6.x.
pub const GFX942: (u32, u32, u32) = (9, 4, 2);

/// The nodes: CPU node 0, then `gpus` GPU nodes reporting gfx90a (what ROCm 5.2 can target).
pub fn nodes(cfg: &Config, gpus: u32, host_ram: u64, cpu_cores: u32) -> Vec<Node> {
    nodes_for(cfg, gpus, host_ram, cpu_cores, GFX_VERSION)
}

/// [`nodes`] with the GPUs reporting the ISA `gfx` (major, minor, stepping).
pub fn nodes_for(
    cfg: &Config,
    gpus: u32,
    host_ram: u64,
    cpu_cores: u32,
    gfx: (u32, u32, u32),
) -> Vec<Node> {
    let d = &cfg.device;
    let mut out = Vec::new();
    let cpu_links =
        (0..gpus).map(|g| IoLink { kind: IOLINK_PCIE, from: 0, to: g + 1, weight: 20 }).collect();
    out.push(Node {
        cpu_cores: cpu_cores.max(1),
        ccompute_id_lo: 0,
        marketing_name: "xhsa-emu host CPU".into(),
        max_clock_mhz: 2000,
        local_mem: 0,
        mem: vec![MemBank {
            heap: heap::SYSTEM,
            size: host_ram,
            base: 0,
            width_bits: 64,
            clock_mhz: 3200,
        }],
        caches: vec![
            Cache {
                level: 1,
                size_kib: 32,
                line: 64,
                kind: cache_type::DATA | cache_type::CPU,
                processor_id: 0,
            },
            Cache {
                level: 2,
                size_kib: 1024,
                line: 64,
                kind: cache_type::DATA | cache_type::CPU,
                processor_id: 0,
            },
            Cache {
                level: 3,
                size_kib: 32768,
                line: 64,
                kind: cache_type::DATA | cache_type::CPU,
                processor_id: 0,
            },
        ],
        links: cpu_links,
        ..Default::default()
    });
    for g in 0..gpus {
        let node = g + 1;
        let fcompute = 0x8000_0000 + g * 0x1000;
        let vram = d.vram_gib << 30;
        out.push(Node {
            simds: d.simds(),
            simds_per_cu: d.simds_per_cu,
            waves_per_simd: d.waves_per_simd,
            wave_size: d.wave_size,
            lds_kib: d.lds_kib,
            shader_banks: d.xccs,
            arrays: 1,
            cus_per_array: d.cus_per_xcc,
            scratch_slots_per_cu: d.waves_per_cu(),
            gfx,
            vendor_id: 0x1002,
            device_id: 0x74a2,
            location_id: 0x0c00 + g * 0x100,
            local_mem: vram,
            max_clock_mhz: d.max_engine_clock_mhz,
            drm_minor: 128 + g as i32,
            marketing_name: d.marketing_name.clone(),
            amd_name: gfx_name(gfx).to_uppercase(),
            sdma_engines: d.sdma_engines,
            sdma_queues_per_engine: d.sdma_queues_per_engine,
            cp_queues: d.cp_queues,
            unique_id: 0x5848_5341_0000_0000 | u64::from(node),
            fcompute_id_lo: fcompute,
            gpu_id: gpu_id(g),
            mem: vec![
                MemBank {
                    heap: heap::FRAME_BUFFER_PRIVATE,
                    size: vram,
                    base: 0,
                    width_bits: 8192,
                    clock_mhz: 2600,
                },
                MemBank {
                    heap: heap::GPU_LDS,
                    size: u64::from(d.lds_kib) << 10,
                    base: LDS_APERTURE,
                    width_bits: 0,
                    clock_mhz: 0,
                },
                MemBank {
                    heap: heap::GPU_SCRATCH,
                    size: 4 << 30,
                    base: SCRATCH_APERTURE,
                    width_bits: 0,
                    clock_mhz: 0,
                },
            ],
            caches: vec![
                Cache {
                    level: 1,
                    size_kib: 16,
                    line: 128,
                    kind: cache_type::DATA | cache_type::HSACU,
                    processor_id: fcompute,
                },
                Cache {
                    level: 2,
                    size_kib: 4096,
                    line: 128,
                    kind: cache_type::DATA | cache_type::HSACU,
                    processor_id: fcompute,
                },
                Cache {
                    level: 3,
                    size_kib: 262_144,
                    line: 64,
                    kind: cache_type::DATA | cache_type::HSACU,
                    processor_id: fcompute,
                },
            ],
            links: vec![IoLink { kind: IOLINK_PCIE, from: node, to: 0, weight: 20 }],
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mi308x_node_under_a_cpu_node() {
        let n = nodes(&Config::default(), 1, 24 << 30, 2);
        assert_eq!(n.len(), 2);
        assert!(n[0].cpu_cores > 0 && n[0].simds == 0);
        let g = &n[1];
        assert_eq!(g.simds / g.simds_per_cu, 80);
        assert_eq!(g.gfx, (9, 0, 10));
        assert!(g.mem.iter().any(|m| m.heap == heap::GPU_LDS && m.base != 0));
        assert!(g.mem.iter().any(|m| m.heap == heap::GPU_SCRATCH && m.base != 0));
        assert!(g.caches.iter().all(|c| c.kind & cache_type::HSACU != 0));
        assert_eq!(g.links[0].to, 0);
        assert_eq!(n[0].links.len(), 1);
    }
}
