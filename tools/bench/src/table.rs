//! Kernel tables: the flat description of one request (or batch, or task) of a workload, as
//! `tools/workloads/workload.hip` replays it and the model predictor simulates it.
//!
//! Text, one item per line, `#` starts a comment:
//!
//! ```text
//! model resnet18_bs8
//! items 8                 # images (or sequences, tasks) per request
//! unit img
//! kernel conv1 392 256 32768 41230 45000 165 0  # label workgroups threads lds-bytes wg-ns host-ns [util-permille bytes-per-wg]
//! ```
//!
//! The workload launches each `kernel` line as `xhsa_synthetic<<<workgroups, threads, lds>>>(wg_ns)`
//! on its stream, in order, issuing kernel `i` no earlier than the sum of the `host-ns` of
//! kernels `0..=i` after the request began: the application's own CPU time per operation
//! (PyTorch's Python, dispatcher and library call), in device ns.
//!
//! The two optional trailing columns are the kernel's contention profile
//! (docs/timing-model-contention.md): the thousandths of its CU's pipe one workgroup uses and
//! the HBM bytes one workgroup moves. A kernel with a non-zero profile is launched as
//! `xhsa_synthetic_p(wg_ns, util_permille, bytes_per_wg)`; lines without them (six or seven
//! columns) have a zero profile: never slowed, never slowing others.

use std::fmt::Write as _;

/// One kernel launch of the sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub label: String,
    pub workgroups: u64,
    pub threads: u32,
    pub lds: u32,
    pub wg_ns: u64,
    /// Host time the application spends before issuing this kernel (device ns).
    pub host_ns: u64,
    /// Thousandths of its CU's pipe one workgroup uses (0: none).
    pub util_permille: u32,
    /// HBM bytes one workgroup moves (0: none).
    pub bytes_per_wg: u64,
}

impl Kernel {
    /// Wave slots one workgroup occupies (wave64).
    pub fn waves(&self) -> u32 {
        self.threads.div_ceil(64).max(1)
    }

    /// Whether it has a contention profile.
    pub fn profiled(&self) -> bool {
        self.util_permille > 0 || self.bytes_per_wg > 0
    }
}

/// The kernel sequence of one request of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub model: String,
    /// Items (images, sequences, tasks) one request processes.
    pub items: u32,
    /// What an item is ("img", "seq", "task").
    pub unit: String,
    pub kernels: Vec<Kernel>,
}

/// Device shape the tables are computed for (the emulator's MI308X defaults).
pub const CUS: u64 = 80;
pub const WAVES_PER_CU: u32 = 32;
pub const LDS_PER_CU: u32 = 65536;

impl Table {
    pub fn parse(text: &str) -> Result<Table, String> {
        let (mut model, mut items, mut unit, mut kernels) = (None, None, None, Vec::new());
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = |what: &str| format!("line {}: {what}: {raw:?}", n + 1);
            match f[0] {
                "model" if f.len() == 2 => model = Some(f[1].to_string()),
                "items" if f.len() == 2 => {
                    items = Some(
                        f[1].parse::<u32>()
                            .map_err(|_| bad("items is not a number"))?,
                    )
                }
                "unit" if f.len() == 2 => unit = Some(f[1].to_string()),
                "kernel" if matches!(f.len(), 6 | 7 | 9) => {
                    let num = |i: usize| {
                        f[i].parse::<u64>().map_err(|_| {
                            bad("expected `kernel LABEL WORKGROUPS THREADS LDS WG_NS [HOST_NS [UTIL_PERMILLE BYTES_PER_WG]]`")
                        })
                    };
                    let host_ns = if f.len() >= 7 { num(6)? } else { 0 };
                    let (util, bytes) = if f.len() == 9 { (num(7)?, num(8)?) } else { (0, 0) };
                    if util > 1000 {
                        return Err(bad("util-permille out of range (0-1000)"));
                    }
                    let k = Kernel {
                        label: f[1].to_string(),
                        workgroups: num(2)?,
                        threads: num(3)? as u32,
                        lds: num(4)? as u32,
                        wg_ns: num(5)?,
                        host_ns,
                        util_permille: util as u32,
                        bytes_per_wg: bytes,
                    };
                    if k.workgroups == 0
                        || k.threads == 0
                        || k.threads > 1024
                        || k.lds > LDS_PER_CU
                        || k.wg_ns == 0
                    {
                        return Err(bad("out of range (workgroups >= 1, threads 1-1024, lds <= 65536, wg_ns >= 1)"));
                    }
                    kernels.push(k);
                }
                "kernel" => return Err(bad("expected `kernel LABEL WORKGROUPS THREADS LDS WG_NS [HOST_NS [UTIL_PERMILLE BYTES_PER_WG]]` (6, 7 or 9 fields)")),
                _ => return Err(bad("unknown line (expected model, items, unit or kernel)")),
            }
        }
        let model = model.ok_or("no `model` line")?;
        if kernels.is_empty() {
            return Err(format!("model {model}: no kernels"));
        }
        Ok(Table {
            model,
            items: items.unwrap_or(1),
            unit: unit.unwrap_or_else(|| "item".into()),
            kernels,
        })
    }

    /// The text form, with a comment header.
    pub fn render(&self, header: &str) -> String {
        let mut s = String::new();
        for l in header.lines() {
            let _ = writeln!(s, "# {l}");
        }
        let _ = writeln!(s, "model {}\nitems {}\nunit {}", self.model, self.items, self.unit);
        let _ = writeln!(s, "# kernel LABEL WORKGROUPS THREADS LDS_BYTES WG_NS HOST_NS [UTIL_PERMILLE BYTES_PER_WG]   # alone on the GPU: rounds x wg_ns");
        for k in &self.kernels {
            let profile = if k.profiled() {
                format!(" {} {}", k.util_permille, k.bytes_per_wg)
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "kernel {} {} {} {} {} {}{}   # {:.1} us",
                k.label,
                k.workgroups,
                k.threads,
                k.lds,
                k.wg_ns,
                k.host_ns,
                profile,
                alone_ns(k) as f64 / 1e3
            );
        }
        s
    }

    /// GPU time of one request with the GPU to itself (kernels back to back).
    pub fn gpu_ns(&self) -> u64 {
        self.kernels.iter().map(alone_ns).sum()
    }

    /// Host time of one request (the application's time per operation, summed).
    pub fn host_ns(&self) -> u64 {
        self.kernels.iter().map(|k| k.host_ns).sum()
    }

    /// Latency of one request alone: each kernel starts when the host has issued it and the
    /// previous one has finished.
    pub fn alone_ns(&self) -> u64 {
        let (mut issued, mut end) = (0u64, 0u64);
        for k in &self.kernels {
            issued += k.host_ns;
            end = end.max(issued) + alone_ns(k);
        }
        end
    }
}

/// Workgroups of a kernel that fit on the device at once.
pub fn concurrent(k: &Kernel) -> u64 {
    let by_waves = WAVES_PER_CU / k.waves();
    let by_lds = LDS_PER_CU.checked_div(k.lds).unwrap_or(u32::MAX);
    CUS * u64::from(by_waves.min(by_lds).max(1))
}

/// Time of one kernel alone: full rounds of the device, each `wg_ns`.
pub fn alone_ns(k: &Kernel) -> u64 {
    k.workgroups.div_ceil(concurrent(k)) * k.wg_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = Table {
            model: "m".into(),
            items: 8,
            unit: "img".into(),
            kernels: vec![Kernel {
                label: "a".into(),
                workgroups: 200,
                threads: 256,
                lds: 32768,
                wg_ns: 1000,
                host_ns: 500,
                util_permille: 0,
                bytes_per_wg: 0,
            }],
        };
        let back = Table::parse(&t.render("hello\nworld")).unwrap();
        assert_eq!(back, t);
        // 2 workgroups per CU by LDS: 160 at once, so 2 rounds, after 500 ns of host time.
        assert_eq!(back.gpu_ns(), 2000);
        assert_eq!(back.alone_ns(), 2500);
        let mut p = t.clone();
        p.kernels[0].util_permille = 165;
        p.kernels[0].bytes_per_wg = 4096;
        assert_eq!(Table::parse(&p.render("")).unwrap(), p);
    }

    #[test]
    fn old_lines_have_a_zero_profile() {
        let t = Table::parse(
            "model x\nkernel a 1 64 0 100\nkernel b 1 64 0 100 5\nkernel c 1 64 0 100 5 300 4096\n",
        )
        .unwrap();
        let p: Vec<(u32, u64)> =
            t.kernels.iter().map(|k| (k.util_permille, k.bytes_per_wg)).collect();
        assert_eq!(p, vec![(0, 0), (0, 0), (300, 4096)]);
        let e = Table::parse("model x\nkernel a 1 64 0 100 5 300\n").unwrap_err();
        assert!(e.contains("9 fields"), "{e}");
        assert!(Table::parse("model x\nkernel a 1 64 0 100 5 1001 0\n").is_err());
    }

    #[test]
    fn errors_name_the_line() {
        let e = Table::parse("model x\nkernel a 1 2\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(Table::parse("items 3\n").is_err());
    }
}
