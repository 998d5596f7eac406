//! The files KFD and amdgpu publish in sysfs for the emulated GPUs, as a ROCm 6.x userland
//! (thunk inside ROCr, libdrm, rocm-smi) reads them: the KFD topology under
//! `/sys/devices/virtual/kfd/kfd/topology` (`generation_id`, `system_properties`,
//! `nodes/N/{gpu_id,name,properties,mem_banks,caches,io_links,p2p_links}`) in the
//! `name value` line format of amdkfd's `kfd_topology.c`, and for each GPU a PCI device with
//! its DRM nodes (`drm/card<N>`, `drm/renderD<128+N>`) that libdrm finds through
//! `/sys/dev/char/226:<minor>`.
//!
//! What this is: the contents only, as relative paths and texts ([`Entry`]); the launcher puts
//! them where a process under `xhsa-emu run --rocm 6.4` sees them. Numbers come from the same
//! [`Node`]s the 5.2 thunk answers `hsaKmtGetNodeProperties` with.

use std::fmt::Write;

use super::topology::{heap, Node};

/// One file, directory or symbolic link of the tree, with its path relative to the tree's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir(String),
    File(String, String),
    Link(String, String),
}

/// The DRM character-device major (`DRM_MAJOR`).
pub const DRM_MAJOR: u32 = 226;
/// The first render-node minor (`renderD128`).
pub const RENDER_MINOR_BASE: u32 = 128;

/// `HSA_CAP_*` bits a gfx9.4.2+ dGPU (gfx90a, gfx942) reports in `capability`
/// (kfd_topology.c `kfd_topology_set_capabilities`, uapi `kfd_sysfs.h`): DoorbellType 2 (bits
/// 12-13, 64-bit AQL doorbells), WatchPointsTotalBits 2^2 (bits 8-11), SRAM EDC (bit 26), and
/// the debugger's: TRAP_DEBUG_SUPPORT, WAVE_LAUNCH_TRAP_OVERRIDE, WAVE_LAUNCH_MODE and
/// PRECISE_MEMORY_OPERATIONS (every gfx9 from 9.4.2), TRAP_DEBUG_FIRMWARE_SUPPORTED (MEC
/// firmware [`MEC_FW_VERSION`](super::topology::MEC_FW_VERSION) is past the versions KFD
/// requires). The thunk of ROCm 6.x enables the runtime (`AMDKFD_IOC_RUNTIME_ENABLE`) at start
/// and disables it at shutdown only when the firmware bit is set, as on a real MI308X.
pub const CAPABILITY: u32 = (2 << 12) | (1 << 26) | (2 << 8) | CAP_TRAP_DEBUG;
/// The debugger's bits of [`CAPABILITY`].
pub const CAP_TRAP_DEBUG: u32 = 0x0000_8000 | 0x0001_0000 | 0x0002_0000 | 0x0004_0000 | 0x2000_0000;
/// `debug_prop` of a gfx9 node: the address-watch mask bits (low bit 6, high bit 29).
pub const DEBUG_PROP: u64 = 6 | (29 << 4);
/// KFD's `generation_id` (incremented on hot plug; any value).
pub const GENERATION_ID: u32 = 1;
/// `platform_oem` "AMD" and `platform_id` "XHSA" (the CRAT's OEM fields).
pub const PLATFORM_OEM: u64 = 0x414d44;
pub const PLATFORM_ID: u64 = 0x58485341;

/// `gfx_target_version` of a (major, minor, stepping): 9.4.2 -> 90402.
pub fn gfx_target_version((major, minor, step): (u32, u32, u32)) -> u32 {
    major * 10000 + minor * 100 + step
}

/// The PCI address `0000:BB:DD.F` of a GPU from its KFD `location_id` (bus << 8 | devfn).
pub fn pci_slot(location_id: u32) -> String {
    format!("0000:{:02x}:{:02x}.{}", location_id >> 8, (location_id >> 3) & 0x1f, location_id & 7)
}

/// The sysfs directory of a GPU's PCI device, relative to `/sys/devices`.
pub fn pci_dir(n: &Node) -> String {
    let slot = pci_slot(n.location_id);
    format!("pci0000:{:02x}/{slot}", n.location_id >> 8)
}

fn line(out: &mut String, name: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "{name} {v}");
}

/// GWS barriers of a GPU node.
pub const GWS_PER_GPU: u32 = crate::isa::gws::RESOURCES as u32;

/// A node's `properties` file, in amdkfd's `node_show` order. `num_xcc` is the XCC count a
/// GPU node reports (1 for a CPU node).
pub fn node_properties(n: &Node, num_xcc: u32, fw_version: u32) -> String {
    let gpu = n.simds > 0;
    let mut o = String::new();
    line(&mut o, "cpu_cores_count", n.cpu_cores);
    line(&mut o, "simd_count", n.simds);
    line(&mut o, "mem_banks_count", sysfs_banks(n).len());
    line(&mut o, "caches_count", if gpu { n.caches.len() } else { 0 });
    line(&mut o, "io_links_count", n.links.len());
    line(&mut o, "p2p_links_count", 0);
    line(&mut o, "cpu_core_id_base", n.ccompute_id_lo);
    line(&mut o, "simd_id_base", n.fcompute_id_lo);
    line(&mut o, "max_waves_per_simd", n.waves_per_simd);
    line(&mut o, "lds_size_in_kb", n.lds_kib);
    line(&mut o, "gds_size_in_kb", 0);
    // gfx9's 64 GWS barriers (amdgpu's gds.gws_size), which KFD gives GPUs that schedule with
    // HWS: gfx90a and gfx942 both (ROCr reports cooperative queues where this is not 0).
    line(&mut o, "num_gws", if gpu { GWS_PER_GPU } else { 0 });
    line(&mut o, "wave_front_size", n.wave_size);
    line(&mut o, "array_count", n.shader_banks * n.arrays);
    line(&mut o, "simd_arrays_per_engine", n.arrays);
    line(&mut o, "cu_per_simd_array", n.cus_per_array);
    line(&mut o, "simd_per_cu", n.simds_per_cu);
    line(&mut o, "max_slots_scratch_cu", n.scratch_slots_per_cu);
    line(&mut o, "gfx_target_version", if gpu { gfx_target_version(n.gfx) } else { 0 });
    line(&mut o, "vendor_id", n.vendor_id);
    line(&mut o, "device_id", n.device_id);
    line(&mut o, "location_id", n.location_id);
    line(&mut o, "domain", 0);
    line(&mut o, "drm_render_minor", if gpu { n.drm_minor } else { 0 });
    line(&mut o, "hive_id", 0);
    line(&mut o, "num_sdma_engines", n.sdma_engines);
    line(&mut o, "num_sdma_xgmi_engines", 0);
    line(&mut o, "num_sdma_queues_per_engine", n.sdma_queues_per_engine);
    line(&mut o, "num_cp_queues", n.cp_queues);
    line(&mut o, "max_engine_clk_fcompute", if gpu { n.max_clock_mhz } else { 0 });
    line(&mut o, "local_mem_size", 0);
    line(&mut o, "fw_version", if gpu { fw_version } else { 0 });
    line(&mut o, "capability", if gpu { CAPABILITY } else { 0 });
    line(&mut o, "debug_prop", if gpu { DEBUG_PROP } else { 0 });
    line(&mut o, "sdma_fw_version", if gpu { 9 } else { 0 });
    line(&mut o, "unique_id", if gpu { n.unique_id } else { 0 });
    line(&mut o, "num_xcc", if gpu { num_xcc } else { 1 });
    line(&mut o, "max_engine_clk_ccompute", n.max_clock_mhz);
    o
}

/// The memory banks KFD publishes: system memory for a CPU, VRAM for a GPU (the LDS, scratch
/// and SVM apertures the 5.2 thunk adds are computed by the thunk from the process apertures).
fn sysfs_banks(n: &Node) -> Vec<&super::topology::MemBank> {
    n.mem
        .iter()
        .filter(|m| matches!(m.heap, heap::SYSTEM | heap::FRAME_BUFFER_PRIVATE | 1))
        .collect()
}

/// The KFD topology tree, relative to `/sys/devices/virtual/kfd/kfd`.
pub fn kfd_tree(nodes: &[Node], num_xcc: u32, fw_version: u32) -> Vec<Entry> {
    let mut v = vec![
        Entry::Dir("topology".into()),
        Entry::File("topology/generation_id".into(), format!("{GENERATION_ID}\n")),
        Entry::File(
            "topology/system_properties".into(),
            format!("platform_oem {PLATFORM_OEM}\nplatform_id {PLATFORM_ID}\nplatform_rev 1\n"),
        ),
        Entry::Dir("topology/nodes".into()),
    ];
    for (i, n) in nodes.iter().enumerate() {
        let d = format!("topology/nodes/{i}");
        v.push(Entry::Dir(d.clone()));
        v.push(Entry::File(format!("{d}/gpu_id"), format!("{}\n", n.gpu_id)));
        let name = if n.simds > 0 { super::topology::gfx_name(n.gfx) } else { String::new() };
        v.push(Entry::File(format!("{d}/name"), format!("{name}\n")));
        v.push(Entry::File(format!("{d}/properties"), node_properties(n, num_xcc, fw_version)));
        v.push(Entry::Dir(format!("{d}/mem_banks")));
        for (b, m) in sysfs_banks(n).into_iter().enumerate() {
            v.push(Entry::Dir(format!("{d}/mem_banks/{b}")));
            let mut o = String::new();
            line(&mut o, "heap_type", m.heap);
            line(&mut o, "size_in_bytes", m.size);
            line(&mut o, "flags", 0);
            line(&mut o, "width", m.width_bits);
            line(&mut o, "mem_clk_max", m.clock_mhz);
            v.push(Entry::File(format!("{d}/mem_banks/{b}/properties"), o));
        }
        v.push(Entry::Dir(format!("{d}/caches")));
        if n.simds > 0 {
            for (c, k) in n.caches.iter().enumerate() {
                v.push(Entry::Dir(format!("{d}/caches/{c}")));
                let mut o = String::new();
                line(&mut o, "processor_id_low", k.processor_id);
                line(&mut o, "level", k.level);
                line(&mut o, "size", k.size_kib);
                line(&mut o, "cache_line_size", k.line);
                line(&mut o, "cache_lines_per_tag", 1);
                line(&mut o, "association", 16);
                line(&mut o, "latency", 0);
                line(&mut o, "type", k.kind);
                // One cache instance per CU for L1, one per XCC above: a sibling map of the
                // CUs it serves (a comma list of bits, as KFD prints it).
                let cus = (n.simds / n.simds_per_cu.max(1)) as usize;
                let map: Vec<&str> = (0..cus).map(|_| "1").collect();
                let _ = writeln!(o, "sibling_map {}", map.join(","));
                v.push(Entry::File(format!("{d}/caches/{c}/properties"), o));
            }
        }
        v.push(Entry::Dir(format!("{d}/io_links")));
        for (l, k) in n.links.iter().enumerate() {
            v.push(Entry::Dir(format!("{d}/io_links/{l}")));
            let mut o = String::new();
            line(&mut o, "type", k.kind);
            line(&mut o, "version_major", 0);
            line(&mut o, "version_minor", 0);
            line(&mut o, "node_from", k.from);
            line(&mut o, "node_to", k.to);
            line(&mut o, "weight", k.weight);
            line(&mut o, "min_latency", 0);
            line(&mut o, "max_latency", 0);
            line(&mut o, "min_bandwidth", 0);
            line(&mut o, "max_bandwidth", 0);
            line(&mut o, "recommended_transfer_size", 0);
            line(&mut o, "recommended_sdma_engine_id_mask", 0);
            line(&mut o, "flags", 1);
            v.push(Entry::File(format!("{d}/io_links/{l}/properties"), o));
        }
        v.push(Entry::Dir(format!("{d}/p2p_links")));
    }
    v
}

/// The PCI devices of the GPUs with their DRM nodes, relative to `/sys/devices`, and the
/// `/sys/dev/char` links to them (relative to `/sys/dev/char`), as `(devices, char_links)`.
/// GPU `g` (0-based, in node order) has `card<g>` (minor g) and `renderD<128+g>`.
pub fn drm_tree(nodes: &[Node]) -> (Vec<Entry>, Vec<Entry>) {
    let mut dev = Vec::new();
    let mut chr = Vec::new();
    for (g, n) in nodes.iter().filter(|n| n.simds > 0).enumerate() {
        let root = format!("pci0000:{:02x}", n.location_id >> 8);
        if !dev.contains(&Entry::Dir(root.clone())) {
            dev.push(Entry::Dir(root));
        }
        let p = pci_dir(n);
        let slot = pci_slot(n.location_id);
        dev.push(Entry::Dir(p.clone()));
        dev.push(Entry::File(format!("{p}/vendor"), format!("{:#06x}\n", n.vendor_id)));
        dev.push(Entry::File(format!("{p}/device"), format!("{:#06x}\n", n.device_id)));
        dev.push(Entry::File(format!("{p}/subsystem_vendor"), format!("{:#06x}\n", n.vendor_id)));
        dev.push(Entry::File(format!("{p}/subsystem_device"), "0x0c34\n".into()));
        dev.push(Entry::File(format!("{p}/revision"), "0x00\n".into()));
        dev.push(Entry::File(format!("{p}/class"), "0x120000\n".into()));
        dev.push(Entry::File(
            format!("{p}/uevent"),
            format!(
                "DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID={:04X}:{:04X}\nPCI_SUBSYS_ID={:04X}:0C34\nPCI_SLOT_NAME={slot}\nMODALIAS=pci:v00001002d0000{:04X}sv00001002sd00000C34bc12sc00i00\n",
                n.vendor_id, n.device_id, n.vendor_id, n.device_id
            ),
        ));
        dev.push(Entry::Link(format!("{p}/subsystem"), "../../../bus/pci".into()));
        dev.push(Entry::Dir(format!("{p}/drm")));
        let render = RENDER_MINOR_BASE + g as u32;
        for (name, minor) in [(format!("card{g}"), g as u32), (format!("renderD{render}"), render)]
        {
            let d = format!("{p}/drm/{name}");
            dev.push(Entry::Dir(d.clone()));
            dev.push(Entry::File(format!("{d}/dev"), format!("{DRM_MAJOR}:{minor}\n")));
            dev.push(Entry::File(
                format!("{d}/uevent"),
                format!("MAJOR={DRM_MAJOR}\nMINOR={minor}\nDEVNAME=dri/{name}\n"),
            ));
            dev.push(Entry::Link(format!("{d}/device"), "../../../".to_string() + &slot));
            dev.push(Entry::Link(format!("{d}/subsystem"), "../../../../../class/drm".into()));
            chr.push(Entry::Link(format!("{DRM_MAJOR}:{minor}"), format!("../../devices/{d}")));
        }
    }
    (dev, chr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::kfd::topology;

    fn file<'a>(t: &'a [Entry], path: &str) -> &'a str {
        t.iter()
            .find_map(|e| match e {
                Entry::File(p, s) if p == path => Some(s.as_str()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {path}"))
    }

    fn prop(text: &str, name: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {name}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn an_mi308x_as_gfx942_in_kfd_form() {
        let nodes = topology::nodes_for(&Config::default(), 1, 24 << 30, 2, (9, 4, 2));
        let t = kfd_tree(&nodes, 4, 185);
        let p = file(&t, "topology/nodes/1/properties");
        assert_eq!(prop(p, "gfx_target_version"), 90402);
        assert_eq!(prop(p, "simd_count") / prop(p, "simd_per_cu"), 80);
        assert_eq!(prop(p, "drm_render_minor"), 128);
        assert_eq!(prop(p, "num_xcc"), 4);
        assert_eq!(prop(p, "mem_banks_count"), 1, "VRAM only: LDS and scratch are the thunk's");
        assert_eq!(
            prop(file(&t, "topology/nodes/1/mem_banks/0/properties"), "size_in_bytes"),
            192 << 30
        );
        assert_eq!(
            file(&t, "topology/nodes/1/gpu_id").trim().parse::<u32>().unwrap(),
            topology::gpu_id(0)
        );
        assert_eq!(file(&t, "topology/nodes/1/name").trim(), "gfx942");
        let cpu = file(&t, "topology/nodes/0/properties");
        assert_eq!(prop(cpu, "simd_count"), 0);
        assert_eq!(prop(cpu, "cpu_cores_count"), 2);
        assert_eq!(prop(file(&t, "topology/nodes/0/io_links/0/properties"), "node_to"), 1);
    }

    #[test]
    fn each_gpu_has_a_pci_device_with_card_and_render_nodes() {
        let nodes = topology::nodes_for(&Config::default(), 2, 24 << 30, 2, (9, 4, 2));
        let (dev, chr) = drm_tree(&nodes);
        assert!(chr.contains(&Entry::Link(
            "226:128".into(),
            "../../devices/pci0000:0c/0000:0c:00.0/drm/renderD128".into()
        )));
        assert!(chr.contains(&Entry::Link(
            "226:129".into(),
            "../../devices/pci0000:0d/0000:0d:00.0/drm/renderD129".into()
        )));
        assert_eq!(file(&dev, "pci0000:0c/0000:0c:00.0/drm/renderD128/dev"), "226:128\n");
        assert!(file(&dev, "pci0000:0d/0000:0d:00.0/uevent").contains("PCI_SLOT_NAME=0000:0d:00.0"));
        assert!(dev.contains(&Entry::Link(
            "pci0000:0c/0000:0c:00.0/drm/renderD128/device".into(),
            "../../../0000:0c:00.0".into()
        )));
    }
}
