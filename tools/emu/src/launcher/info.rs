//! `xhsa-emu info`: the device model in a readable form, and the KFD node list as rocminfo
//! would see it under the emulator.

use std::fmt::Write;
use std::path::Path;

use crate::config::Config;
use crate::kfd::topology::{self, heap, Node};

/// The host figures the CPU node reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub ram: u64,
    pub cpus: u32,
}

impl Host {
    pub fn detect() -> Host {
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        let si = rustix::system::sysinfo();
        let ram = si.totalram as u64 * u64::from(si.mem_unit.max(1));
        Host { ram, cpus }
    }
}

/// `gfx90a` from (9, 0, 10).
pub fn gfx_name(gfx: (u32, u32, u32)) -> String {
    topology::gfx_name(gfx)
}

fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB && n.trailing_zeros() >= 30 {
        format!("{} GiB", n / GIB)
    } else if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else if n >= MIB {
        format!("{} MiB", n / MIB)
    } else {
        format!("{} KiB", n / 1024)
    }
}

/// The whole `info` report.
pub fn render(cfg: &Config, config_path: Option<&Path>, gpus: u32, host: &Host) -> String {
    let d = &cfg.device;
    let t = &cfg.timing;
    let k = &cfg.kfd;
    let gfx = gfx_name(topology::GFX_VERSION);
    let mut o = String::new();
    let source = config_path
        .map_or_else(|| "built-in MI308X defaults".to_string(), |p| p.display().to_string());
    let _ = writeln!(
        o,
        "xhsa-emu device model (config: {source}), {gpus} GPU{}",
        if gpus == 1 { "" } else { "s" }
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "GPU: {}", d.marketing_name);
    let row = |o: &mut String, key: &str, val: String| {
        let _ = writeln!(o, "  {key:<24}{val}");
    };
    row(
        &mut o,
        "ISA",
        format!("{gfx} (the MI308X is gfx942, but ROCr 5.2 / clang 15 cannot target it)"),
    );
    row(
        &mut o,
        "compute units",
        format!("{} XCCs x {} CUs per XCC = {} CUs", d.xccs, d.cus_per_xcc, d.cus()),
    );
    row(&mut o, "SIMDs per CU", format!("{} ({} SIMDs)", d.simds_per_cu, d.simds()));
    row(
        &mut o,
        "waves per SIMD",
        format!("{} ({} waves per CU)", d.waves_per_simd, d.waves_per_cu()),
    );
    row(&mut o, "wave size", d.wave_size.to_string());
    row(&mut o, "LDS", format!("{} KiB per CU", d.lds_kib));
    row(&mut o, "CP queues", d.cp_queues.to_string());
    row(
        &mut o,
        "SDMA",
        format!("{} engines x {} queues", d.sdma_engines, d.sdma_queues_per_engine),
    );
    row(&mut o, "VRAM", format!("{} GiB", d.vram_gib));
    row(&mut o, "engine clock", format!("{} MHz", d.max_engine_clock_mhz));
    row(&mut o, "GPU counter", format!("{} MHz", d.gpu_counter_mhz));
    let _ = writeln!(o);
    let _ = writeln!(o, "Timing:");
    row(
        &mut o,
        "time scale",
        format!(
            "{:?} (device time runs {}x slower than real time; `run --time-scale X` overrides)",
            t.time_scale, t.time_scale
        ),
    );
    row(
        &mut o,
        "default workgroup time",
        format!("{} ns (kernels without a model or profile)", t.default_wg_ns),
    );
    row(&mut o, "workgroup jitter", format!("+-{:.0} %", t.wg_jitter * 100.0));
    row(
        &mut o,
        "CU pipe capacity",
        format!("{} (utilisation co-resident workgroups share at full speed)", t.cu_pipe_capacity),
    );
    row(
        &mut o,
        "HBM bandwidth",
        format!("{} bytes/ns shared by memory-bound workgroups", t.hbm_bytes_per_ns),
    );
    row(
        &mut o,
        "SDMA bandwidth",
        format!(
            "{} bytes/us ({:.1} GB/s)",
            t.sdma_bytes_per_us,
            t.sdma_bytes_per_us as f64 / 1000.0
        ),
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "KFD costs (whole device: HWS unmaps and remaps all queues):");
    row(&mut o, "suspend queues", format!("{} us", k.suspend_us));
    row(&mut o, "resume queues", format!("{} us", k.resume_us));
    row(&mut o, "update queue", format!("{} us", k.update_queue_us));
    row(&mut o, "set CU mask", format!("{} us", k.set_cu_mask_us));
    row(
        &mut o,
        "preemption timeout",
        format!(
            "{} ms (reached only when XHSA_EMU_FAULT makes a preemption time out)",
            k.preemption_timeout_ms
        ),
    );
    let _ = writeln!(o);
    if cfg.kernels.is_empty() {
        let _ = writeln!(o, "Kernel profiles: none");
    } else {
        let _ = writeln!(o, "Kernel profiles:");
        for p in &cfg.kernels {
            row(
                &mut o,
                &p.name,
                format!(
                    "{} ns per workgroup, util {}, {} HBM bytes per workgroup",
                    p.wg_ns, p.util, p.hbm_bytes_per_wg
                ),
            );
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "KFD topology (the agents rocminfo lists):");
    for (i, n) in topology::nodes(cfg, gpus, host.ram, host.cpus).iter().enumerate() {
        render_node(&mut o, i, n);
    }
    o
}

fn render_node(o: &mut String, index: usize, n: &Node) {
    let links: Vec<String> = n.links.iter().map(|l| format!("node {}", l.to)).collect();
    let links =
        if links.is_empty() { "none".to_string() } else { format!("PCIe to {}", links.join(", ")) };
    let row = |o: &mut String, key: &str, val: String| {
        let _ = writeln!(o, "    {key:<22}{val}");
    };
    if n.simds == 0 {
        let _ = writeln!(o, "  node {index}: CPU");
        row(o, "name", n.marketing_name.clone());
        row(o, "cores", n.cpu_cores.to_string());
        let ram: u64 = n.mem.iter().filter(|m| m.heap == heap::SYSTEM).map(|m| m.size).sum();
        row(o, "system memory", bytes(ram));
    } else {
        let cus = n.simds / n.simds_per_cu.max(1);
        let _ = writeln!(o, "  node {index}: GPU");
        row(o, "name", gfx_name(n.gfx));
        row(o, "marketing name", n.marketing_name.clone());
        row(o, "gpu_id", format!("{} (0x{:x})", n.gpu_id, n.gpu_id));
        row(
            o,
            "device id",
            format!(
                "0x{:04x}:0x{:04x}, location 0x{:04x}, render minor {}",
                n.vendor_id, n.device_id, n.location_id, n.drm_minor
            ),
        );
        row(
            o,
            "compute units",
            format!(
                "{cus} ({} shader engines x {} CUs)",
                n.shader_banks,
                n.cus_per_array * n.arrays
            ),
        );
        row(o, "SIMDs per CU", n.simds_per_cu.to_string());
        row(o, "waves per SIMD", n.waves_per_simd.to_string());
        row(o, "wavefront size", n.wave_size.to_string());
        row(o, "max clock", format!("{} MHz", n.max_clock_mhz));
        row(o, "local memory", bytes(n.local_mem));
        row(o, "LDS", format!("{} KiB", n.lds_kib));
        row(
            o,
            "queues",
            format!(
                "{} CP, {} SDMA engines x {}",
                n.cp_queues, n.sdma_engines, n.sdma_queues_per_engine
            ),
        );
        let caches: Vec<String> = n
            .caches
            .iter()
            .map(|c| format!("L{} {}", c.level, bytes(u64::from(c.size_kib) << 10)))
            .collect();
        row(o, "caches", caches.join(", "));
    }
    row(o, "IO links", links);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_report_names_the_shape() {
        let host = Host { ram: 24 << 30, cpus: 2 };
        let s = render(&Config::default(), None, 2, &host);
        assert!(s.contains("4 XCCs x 20 CUs per XCC = 80 CUs"), "{s}");
        assert!(s.contains("gfx90a") && s.contains("gfx942"), "{s}");
        assert!(
            s.contains("node 0: CPU") && s.contains("node 1: GPU") && s.contains("node 2: GPU"),
            "{s}"
        );
        assert!(s.contains("24 GiB") && s.contains("192 GiB"), "{s}");
        assert!(s.contains("Kernel profiles: none"));
    }

    #[test]
    fn profiles_and_overrides_show() {
        let cfg =
            Config::from_toml("[device]\nxccs = 2\n[[kernel]]\nname = \"gemm\"\nwg_ns = 9000\n")
                .unwrap();
        let s = render(&cfg, Some(Path::new("/etc/emu.toml")), 1, &Host { ram: 1 << 30, cpus: 1 });
        assert!(
            s.contains("= 40 CUs")
                && s.contains("gemm")
                && s.contains("9000 ns")
                && s.contains("/etc/emu.toml"),
            "{s}"
        );
    }

    #[test]
    fn gfx_names() {
        assert_eq!(gfx_name((9, 0, 10)), "gfx90a");
        assert_eq!(gfx_name((9, 4, 2)), "gfx942");
    }
}
