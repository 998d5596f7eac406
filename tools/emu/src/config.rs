//! The device model's configuration: an MI308X-shaped GPU by default, every figure overridable
//! from a TOML file (`xhsa-emu run --config FILE`).
//!
//! Unknown keys and out-of-range values are errors that name the key and the accepted range.

use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// Everything the emulator models, with the MI308X defaults.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
#[derive(Default)]
pub struct Config {
    pub device: DeviceShape,
    pub timing: Timing,
    pub kfd: KfdCosts,
    pub interpreter: Interpreter,
    /// Per-kernel timing profiles, by kernel symbol name (without `.kd`).
    #[serde(rename = "kernel")]
    pub kernels: Vec<KernelProfile>,
}

/// The shape of the GPU, as KFD's topology reports it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceShape {
    pub marketing_name: String,
    pub xccs: u32,
    pub cus_per_xcc: u32,
    pub simds_per_cu: u32,
    pub waves_per_simd: u32,
    pub wave_size: u32,
    pub lds_kib: u32,
    pub cp_queues: u32,
    pub sdma_engines: u32,
    pub sdma_queues_per_engine: u32,
    pub vram_gib: u64,
    /// Engine clock reported to the runtime.
    pub max_engine_clock_mhz: u32,
    /// Frequency of the GPU timestamp counter (signal start/end timestamps).
    pub gpu_counter_mhz: u32,
}

impl DeviceShape {
    pub fn cus(&self) -> u32 {
        self.xccs * self.cus_per_xcc
    }

    pub fn simds(&self) -> u32 {
        self.cus() * self.simds_per_cu
    }

    pub fn waves_per_cu(&self) -> u32 {
        self.simds_per_cu * self.waves_per_simd
    }
}

impl Default for DeviceShape {
    fn default() -> Self {
        DeviceShape {
            marketing_name: "AMD Instinct MI308X (xhsa-emu, emulated, gfx90a ISA)".into(),
            xccs: 4,
            cus_per_xcc: 20,
            simds_per_cu: 4,
            waves_per_simd: 8,
            wave_size: 64,
            lds_kib: 64,
            cp_queues: 120,
            sdma_engines: 2,
            sdma_queues_per_engine: 8,
            vram_gib: 192,
            max_engine_clock_mhz: 2100,
            gpu_counter_mhz: 100,
        }
    }
}

/// How time passes on the device.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    /// Device time runs this many times slower than real time (>= 1 gives the host's timers
    /// more room; 1 = real time).
    pub time_scale: f64,
    /// Run time of one workgroup of a kernel that has no model and no profile.
    pub default_wg_ns: u64,
    /// SDMA copy bandwidth, bytes per microsecond (≈ MB/s).
    pub sdma_bytes_per_us: u64,
    /// Workgroup run times vary uniformly by up to this fraction either way (0 to 0.9), so a
    /// kernel's workgroups do not all finish at one instant.
    pub wg_jitter: f64,
    /// Capacity `U` of one CU's pipe that co-resident workgroups' utilisations share (their
    /// contention profiles; docs/timing-model-contention.md). 0.1 to 10.
    pub cu_pipe_capacity: f64,
    /// Achievable HBM bandwidth that memory-bound workgroups share, bytes per ns (MI308X:
    /// 5300 peak x 0.70 reached by streaming kernels). 1 to 100000.
    pub hbm_bytes_per_ns: f64,
}

impl Timing {
    /// The capacities contention profiles are measured against.
    pub fn capacity(&self) -> crate::device::Capacity {
        crate::device::Capacity {
            cu_pipe: self.cu_pipe_capacity,
            hbm_bytes_per_ns: self.hbm_bytes_per_ns,
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        let cap = crate::device::Capacity::default();
        Timing {
            time_scale: 1.0,
            default_wg_ns: 2_000,
            sdma_bytes_per_us: 50_000,
            wg_jitter: 0.0,
            cu_pipe_capacity: cap.cu_pipe,
            hbm_bytes_per_ns: cap.hbm_bytes_per_ns,
        }
    }
}

/// The host side of kernel execution (the ISA interpreter): not a property of the GPU.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Interpreter {
    /// Host threads that execute kernel code, per GPU: a dispatch's workgroups are shared out
    /// among them. 0 (the default) = one per host core (at most 4).
    pub threads: u32,
}

impl Interpreter {
    /// The worker threads to start: `threads`, or one per host core for 0.
    pub fn workers(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, crate::cp::executor::MAX_WORKERS),
            n => n as usize,
        }
    }
}

/// What KFD's queue operations cost the whole device on an HWS GPU (unmap/remap of all queues).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct KfdCosts {
    pub suspend_us: u64,
    pub resume_us: u64,
    pub update_queue_us: u64,
    pub set_cu_mask_us: u64,
    /// With more queues holding work than the CP has queue slots, HWS maps them in turns of
    /// this length.
    pub hws_quantum_us: u64,
    /// How long KFD waits for the HWS to confirm a preemption before it gives up (amdgpu's
    /// `queue_preemption_timeout_ms`); only reached when `XHSA_EMU_FAULT` makes one time out.
    pub preemption_timeout_ms: u64,
}

impl Default for KfdCosts {
    fn default() -> Self {
        // The users' MI308X measurements: suspend ~400-500 us, resume ~300-400 us.
        // The preemption timeout is amdgpu's module parameter default.
        KfdCosts {
            suspend_us: 450,
            resume_us: 350,
            update_queue_us: 450,
            set_cu_mask_us: 450,
            hws_quantum_us: 10_000,
            preemption_timeout_ms: 9000,
        }
    }
}

/// A timing profile for one kernel name.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KernelProfile {
    pub name: String,
    /// Run time of one of its workgroups.
    pub wg_ns: u64,
    /// Fraction of its CU's pipe one workgroup uses (0.0 to 1.0; default 0: never slowed by
    /// other workgroups on its CU).
    #[serde(default)]
    pub util: f64,
    /// HBM bytes one workgroup moves (default 0: never slowed by bandwidth contention).
    #[serde(default)]
    pub hbm_bytes_per_wg: u64,
}

impl KernelProfile {
    /// Its contention profile.
    pub fn contention(&self) -> crate::device::Profile {
        crate::device::Profile { cu_util: self.util as f32, hbm_bytes: self.hbm_bytes_per_wg }
    }
}

/// A configuration that could not be read or does not make sense.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text)
            .map_err(|e| ConfigError(format!("invalid emulator config: {}", e.message())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Self::from_toml(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Checks every figure against the range the model supports.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let d = &self.device;
        let range = |name: &str, v: u64, lo: u64, hi: u64| {
            if v < lo || v > hi {
                Err(ConfigError(format!(
                    "device.{name} = {v} is out of range; accepted: {lo}..={hi}"
                )))
            } else {
                Ok(())
            }
        };
        range("xccs", d.xccs.into(), 1, 8)?;
        range("cus_per_xcc", d.cus_per_xcc.into(), 1, 32)?;
        range("cus (xccs x cus_per_xcc)", d.cus().into(), 1, 256)?;
        range("simds_per_cu", d.simds_per_cu.into(), 1, 4)?;
        range("waves_per_simd", d.waves_per_simd.into(), 1, 16)?;
        if d.wave_size != 32 && d.wave_size != 64 {
            return Err(ConfigError(format!(
                "device.wave_size = {} is not supported; accepted: 32, 64",
                d.wave_size
            )));
        }
        range("lds_kib", d.lds_kib.into(), 16, 160)?;
        range("cp_queues", d.cp_queues.into(), 1, 1024)?;
        range("sdma_engines", d.sdma_engines.into(), 0, 16)?;
        range("sdma_queues_per_engine", d.sdma_queues_per_engine.into(), 1, 16)?;
        range("vram_gib", d.vram_gib, 1, 4096)?;
        range("max_engine_clock_mhz", d.max_engine_clock_mhz.into(), 100, 10_000)?;
        range("gpu_counter_mhz", d.gpu_counter_mhz.into(), 1, 10_000)?;
        if d.marketing_name.is_empty() || d.marketing_name.len() > 63 {
            return Err(ConfigError("device.marketing_name must be 1 to 63 bytes".into()));
        }
        let t = &self.timing;
        if !(t.time_scale.is_finite() && (1.0..=1000.0).contains(&t.time_scale)) {
            return Err(ConfigError(format!(
                "timing.time_scale = {} is out of range; accepted: 1.0 to 1000.0",
                t.time_scale
            )));
        }
        if !(0.0..=0.9).contains(&t.wg_jitter) {
            return Err(ConfigError(format!(
                "timing.wg_jitter = {} is out of range; accepted: 0.0 to 0.9",
                t.wg_jitter
            )));
        }
        if !(t.cu_pipe_capacity.is_finite() && (0.1..=10.0).contains(&t.cu_pipe_capacity)) {
            return Err(ConfigError(format!(
                "timing.cu_pipe_capacity = {} is out of range; accepted: 0.1 to 10.0 (workgroup utilisations one CU's pipe holds at full speed)",
                t.cu_pipe_capacity
            )));
        }
        if !(t.hbm_bytes_per_ns.is_finite() && (1.0..=100_000.0).contains(&t.hbm_bytes_per_ns)) {
            return Err(ConfigError(format!(
                "timing.hbm_bytes_per_ns = {} is out of range; accepted: 1.0 to 100000.0 (achievable HBM bytes per ns, e.g. 3710 = 5.3 TB/s x 0.70)",
                t.hbm_bytes_per_ns
            )));
        }
        let max = crate::cp::executor::MAX_WORKERS as u32;
        if self.interpreter.threads > max {
            return Err(ConfigError(format!("interpreter.threads = {} is out of range; accepted: 0 (one per host core) to {max}", self.interpreter.threads)));
        }
        let k = &self.kfd;
        if !(1..=3_600_000).contains(&k.preemption_timeout_ms) {
            return Err(ConfigError(format!(
                "kfd.preemption_timeout_ms = {} is out of range; accepted: 1..=3600000",
                k.preemption_timeout_ms
            )));
        }
        if t.sdma_bytes_per_us == 0 {
            return Err(ConfigError("timing.sdma_bytes_per_us must be at least 1".into()));
        }
        for k in &self.kernels {
            if k.name.is_empty() {
                return Err(ConfigError("[[kernel]] entry without a name".into()));
            }
            if !(k.util.is_finite() && (0.0..=1.0).contains(&k.util)) {
                return Err(ConfigError(format!(
                    "[[kernel]] {}: util = {} is out of range; accepted: 0.0 to 1.0",
                    k.name, k.util
                )));
            }
        }
        Ok(())
    }

    /// The configuration a launched process receives through the environment
    /// (`XHSA_EMU_CONFIG`, `XHSA_EMU_TIME_SCALE`, `XHSA_EMU_GPUS`), with the number of GPUs.
    pub fn from_env() -> Result<(Config, u32), ConfigError> {
        let mut cfg = match std::env::var_os("XHSA_EMU_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Config::from_file(Path::new(&p))?,
            None => Config::default(),
        };
        if let Ok(s) = std::env::var("XHSA_EMU_TIME_SCALE") {
            cfg.timing.time_scale = s.parse().map_err(|_| {
                ConfigError(format!(
                    "XHSA_EMU_TIME_SCALE={s:?} is not a number (accepted: 1.0 to 1000.0)"
                ))
            })?;
        }
        cfg.validate()?;
        let gpus = match std::env::var("XHSA_EMU_GPUS") {
            Ok(s) => match s.parse::<u32>() {
                Ok(n) if (1..=8).contains(&n) => n,
                _ => {
                    return Err(ConfigError(format!(
                        "XHSA_EMU_GPUS={s:?} is invalid (accepted: 1 to 8)"
                    )))
                }
            },
            Err(_) => 1,
        };
        Ok((cfg, gpus))
    }

    /// The profile for a kernel name, if the config has one.
    pub fn profile(&self, kernel: &str) -> Option<&KernelProfile> {
        self.kernels.iter().find(|k| k.name == kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_an_mi308x() {
        let c = Config::default();
        assert_eq!(c.device.cus(), 80);
        assert_eq!(c.device.simds(), 320);
        assert_eq!(c.device.waves_per_cu(), 32);
        assert_eq!(c.device.cp_queues, 120);
        assert_eq!(c.device.vram_gib, 192);
        c.validate().unwrap();
    }

    #[test]
    fn a_file_overrides_what_it_names() {
        let c = Config::from_toml(
            "[device]\nxccs = 2\n[timing]\ntime_scale = 4.0\n[[kernel]]\nname = \"k\"\nwg_ns = 7\n",
        )
        .unwrap();
        assert_eq!(c.device.cus(), 40);
        assert_eq!(c.timing.time_scale, 4.0);
        assert_eq!(c.profile("k").map(|p| p.wg_ns), Some(7));
        assert_eq!(c.device.cp_queues, 120);
    }

    #[test]
    fn bad_values_name_the_key_and_the_accepted_forms() {
        let e = Config::from_toml("[device]\nwave_size = 48\n").unwrap_err();
        assert!(e.0.contains("device.wave_size") && e.0.contains("32, 64"), "{e}");
        let e = Config::from_toml("[device]\ncus = 80\n").unwrap_err();
        assert!(e.0.contains("unknown field") && e.0.contains("cus_per_xcc"), "{e}");
        let e = Config::from_toml("[timing]\ntime_scale = 0.5\n").unwrap_err();
        assert!(e.0.contains("timing.time_scale"), "{e}");
        let e = Config::from_toml("[timing]\ncu_pipe_capacity = 0.0\n").unwrap_err();
        assert!(e.0.contains("timing.cu_pipe_capacity") && e.0.contains("0.1 to 10.0"), "{e}");
        let e = Config::from_toml("[timing]\nhbm_bytes_per_ns = -5.0\n").unwrap_err();
        assert!(e.0.contains("timing.hbm_bytes_per_ns") && e.0.contains("1.0 to 100000.0"), "{e}");
        let e = Config::from_toml("[kfd]\npreemption_timeout_ms = 0\n").unwrap_err();
        assert!(e.0.contains("kfd.preemption_timeout_ms") && e.0.contains("1..=3600000"), "{e}");
        assert_eq!(
            Config::from_toml("[kfd]\npreemption_timeout_ms = 50\n")
                .unwrap()
                .kfd
                .preemption_timeout_ms,
            50
        );
        assert_eq!(Config::default().kfd.preemption_timeout_ms, 9000);
        let e = Config::from_toml("[[kernel]]\nname = \"k\"\nwg_ns = 7\nutil = 1.5\n").unwrap_err();
        assert!(e.0.contains("util") && e.0.contains("0.0 to 1.0"), "{e}");
        let c = Config::from_toml("[timing]\ncu_pipe_capacity = 1.2\nhbm_bytes_per_ns = 4000\n[[kernel]]\nname = \"k\"\nwg_ns = 7\nutil = 0.4\nhbm_bytes_per_wg = 65536\n").unwrap();
        assert_eq!(
            c.timing.capacity(),
            crate::device::Capacity { cu_pipe: 1.2, hbm_bytes_per_ns: 4000.0 }
        );
        assert_eq!(
            c.profile("k").unwrap().contention(),
            crate::device::Profile { cu_util: 0.4, hbm_bytes: 65536 }
        );
        let e = Config::from_toml("[interpreter]\nthreads = 9\n").unwrap_err();
        assert!(
            e.0.contains("interpreter.threads = 9") && e.0.contains("0 (one per host core) to 4"),
            "{e}"
        );
    }

    #[test]
    fn interpreter_threads_are_the_configured_number_or_one_per_core() {
        assert_eq!(
            Config::from_toml("[interpreter]\nthreads = 3\n").unwrap().interpreter.workers(),
            3
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(
            Config::from_toml("[interpreter]\nthreads = 0\n").unwrap().interpreter.workers(),
            cores.clamp(1, 4)
        );
    }
}
