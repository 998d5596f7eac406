//! xhsa-bench: runs a scenario's workloads on one emulated GPU and reports HP latency and LP
//! throughput, alone and together.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use xhsa_bench::models::{self, Params};
use xhsa_bench::report::Report;
use xhsa_bench::run::{self, Load, Mode, Setup};
use xhsa_bench::scenario::{self, Role, Scenario};
use xhsa_bench::sim;
use xhsa_bench::table::Table;

#[derive(Parser)]
#[command(name = "xhsa-bench", version, about = "Calibrated workloads and scenarios on the (emulated) MI308X", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario: its HP job alone, its LP job alone, then both together, each on a fresh
    /// private emulated device; print a table and optionally write JSON. With `--mode xhsa` the
    /// alone phases stay native (the baseline) and the shared phase runs natively and with
    /// libxhsa, side by side.
    Run {
        /// A scenario name (see `xhsa-bench list`) or a path to a scenario .toml file.
        scenario: String,
        /// How the workloads reach the GPU.
        #[arg(long, value_enum, default_value_t = Mode::Native)]
        mode: Mode,
        /// Wall-clock seconds each phase is measured for (device seconds = this / time scale).
        #[arg(long, default_value_t = 20.0, value_parser = positive)]
        seconds: f64,
        /// Write the figures as JSON to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Device time runs this many times slower than real time (default: the scenario's).
        #[arg(long, value_name = "X", value_parser = positive)]
        time_scale: Option<f64>,
        /// Wall-clock seconds after the start of a phase before its window opens.
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
        /// No progress line.
        #[arg(long)]
        quiet: bool,
        /// The ROCm userland the workloads run on: 5.2 (the host's, gfx90a; default), 6.4 or
        /// 7.2 (the roots `./x setup` builds; workloads built by the root's hipcc for gfx942
        /// and run with `xhsa-emu run --rocm VERSION`).
        #[arg(long, value_name = "VERSION", default_value = "5.2", value_parser = ["5.2", "6.4", "7.2"])]
        rocm: String,
        /// Run each workload process in a container of its own, as Docker does: its own pid, IPC
        /// and mount namespaces and its own /dev/shm (`unshare`, needs root), with the phase's
        /// board and device directories shared as volumes.
        #[arg(long)]
        containers: bool,
        /// How `--mode xhsa` loads libxhsa: `preload` (`LD_PRELOAD`) or `tools-lib`
        /// (`HSA_TOOLS_LIB`).
        #[arg(long, value_enum, default_value_t = Load::Preload)]
        load: Load,
        /// Keep every phase's process logs (libxhsa's and the emulator's messages, libxhsa's exit
        /// summary) after a successful run, and say where (they are kept after a failure anyway);
        /// an LLM server's phases also keep `tokens.tsv`, each token's wall-clock end and device
        /// time, to line its slow decode steps up with the logs.
        #[arg(long)]
        keep_logs: bool,
        /// The emulated KFD's cost of one device-wide unmap and remap (UPDATE_QUEUE, SET_CU_MASK,
        /// debug-trap SUSPEND and RESUME), in microseconds of device time, instead of the
        /// MI308X defaults (450; resume 350), which are the users' sample output, not a
        /// measurement: run a scenario at 100 and 1000 to see what its figures rest on.
        #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=100_000))]
        unmap_us: Option<u64>,
        /// With `--mode xhsa`: a reserved CU partition for the latency-critical levels, given to
        /// every process as `XHSA_RESERVE` (`CUS@LEVEL`, e.g. `20@10`: the scenario's high
        /// streams run at level 10, its low ones at -10; `auto@LEVEL`; `none`). Without it
        /// libxhsa's default (`auto@1`).
        #[arg(long, value_name = "CUS@LEVEL", value_parser = parse_reserve)]
        reserve: Option<String>,
        /// With `--mode xhsa`: the sharing policy given to every process as `XHSA_POLICY`
        /// (`strict`, `weights:H:L`, `slo:K`, `cap:PCT`); it acts in the processes whose
        /// queues are held by higher work (the batch ones). Without it libxhsa's default
        /// (`slo:1.2`).
        #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
        policy: Option<xhsa_model::sharing::Sharing>,
    },
    /// Predict a scenario's figures from the emulator's HWS model in virtual time (ideal host).
    Predict {
        scenario: String,
        /// Device seconds each phase is measured for.
        #[arg(long, default_value_t = 30.0, value_parser = positive)]
        seconds: f64,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Device µs from a kernel's completion to its successor reaching the HWS (0: ideal).
        #[arg(long, default_value_t = 0.0)]
        hop_us: f64,
        /// CU pipe capacity U the kernels' contention profiles share (default: the device's
        /// `timing.cu_pipe_capacity`, tools/bench/device.toml); for sensitivity sweeps.
        #[arg(long, value_name = "U", value_parser = positive)]
        cu_pipe_capacity: Option<f64>,
    },
    /// List the scenarios and models.
    List,
    /// Show the models' kernel tables (or rewrite tools/workloads/models from the generator).
    Models {
        /// Print this model's full table.
        name: Option<String>,
        /// Regenerate tools/workloads/models/*.kernels.
        #[arg(long)]
        write: bool,
    },
}

/// `--reserve`: `CUS@LEVEL`, `auto@LEVEL` or `none`, as libxhsa's `XHSA_RESERVE` takes it;
/// the setting's text in its canonical form.
fn parse_reserve(text: &str) -> Result<String, String> {
    match xhsa_model::partition::Reserve::parse_setting(text) {
        Some(Some(r)) => Ok(r.to_string()),
        Some(None) => Ok("none".to_string()),
        None => Err(format!("expected {}", xhsa_model::partition::ACCEPTED_RESERVE)),
    }
}

/// `--policy`: as libxhsa's `XHSA_POLICY` takes it.
fn parse_policy(text: &str) -> Result<xhsa_model::sharing::Sharing, String> {
    xhsa_model::sharing::Sharing::parse(text)
        .ok_or_else(|| format!("expected {}", xhsa_model::sharing::ACCEPTED_POLICY))
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// The repository: `XHSA_BENCH_ROOT`, else two levels above this binary's directory
/// (target/release), else where this crate was built from.
fn root() -> PathBuf {
    if let Some(p) = std::env::var_os("XHSA_BENCH_ROOT") {
        return PathBuf::from(p);
    }
    if let Some(r) = exe_dir().and_then(|d| d.parent()?.parent().map(Path::to_path_buf)) {
        if r.join("tools/bench/scenarios").is_dir() {
            return r;
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn exe_dir() -> Option<PathBuf> {
    let e = std::env::current_exe().ok()?;
    std::fs::canonicalize(&e).unwrap_or(e).parent().map(Path::to_path_buf)
}

fn models_dir() -> PathBuf {
    root().join("tools/workloads/models")
}

/// The emulator configuration the scenarios run on.
fn device_config() -> PathBuf {
    root().join("tools/bench/device.toml")
}

/// The device configuration `base` with every device-wide unmap's cost set to `us`, written
/// into `dir`; checked by the emulator's own parser before any phase starts.
fn with_unmap_cost(base: &Path, dir: &Path, us: u64) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(base).map_err(|e| format!("{}: {e}", base.display()))?;
    if text.lines().any(|l| l.trim() == "[kfd]") {
        return Err(format!(
            "{} has a [kfd] section already; --unmap-us would override it: edit one of them",
            base.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("device-unmap-{us}us.toml"));
    let out = format!(
        "{text}\n# --unmap-us {us}\n[kfd]\nsuspend_us = {us}\nresume_us = {us}\nupdate_queue_us = {us}\nset_cu_mask_us = {us}\n"
    );
    std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    let cfg = xhsa_emu::config::Config::from_file(&path).map_err(|e| e.to_string())?;
    if cfg.kfd.update_queue_us != us || cfg.kfd.suspend_us != us {
        return Err(format!("{}: the unmap cost did not take", path.display()));
    }
    Ok(path)
}

/// Its timing (workgroup jitter, contention capacities), for `predict`.
fn device_timing() -> Result<xhsa_emu::config::Timing, String> {
    xhsa_emu::config::Config::from_file(&device_config())
        .map(|c| c.timing)
        .map_err(|e| e.to_string())
}

fn scenarios_dir() -> PathBuf {
    root().join("tools/bench/scenarios")
}

fn model_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(models_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension().is_some_and(|x| x == "kernels"))
                .then(|| p.file_stem()?.to_str().map(str::to_string))
                .flatten()
        })
        .collect();
    v.sort();
    v
}

fn load_tables(s: &Scenario) -> Result<HashMap<String, (PathBuf, Table)>, String> {
    let mut m = HashMap::new();
    for model in s.processes.iter().flat_map(|p| p.models()) {
        if m.contains_key(model) {
            continue;
        }
        let path = models_dir().join(format!("{model}.kernels"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let t = Table::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        m.insert(model.to_string(), (path, t));
    }
    Ok(m)
}

fn write_json(path: &Option<PathBuf>, r: &Report) -> Result<(), String> {
    if let Some(p) = path {
        let text = serde_json::to_string_pretty(&r.json()).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Parses the command line; an unknown flag gets the list of the flags that exist.
fn parse() -> Cli {
    let args: Vec<String> = std::env::args().collect();
    match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::UnknownArgument | clap::error::ErrorKind::InvalidSubcommand
            ) =>
        {
            let cmd = Cli::command();
            let sub = args.iter().skip(1).find_map(|a| cmd.find_subcommand(a));
            let listed = sub.map(|s| {
                let flags: Vec<String> = s
                    .get_arguments()
                    .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                    .collect();
                format!("flags of `{}`: {}", s.get_name(), flags.join(", "))
            });
            let subs: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
            eprint!("{}", e.render());
            eprintln!("{}", listed.unwrap_or_else(|| format!("commands: {}", subs.join(", "))));
            std::process::exit(2);
        }
        Err(e) => e.exit(),
    }
}

fn main() -> ExitCode {
    let cli = parse();
    match go(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xhsa-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn go(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::List => {
            println!("scenarios ({}):", scenarios_dir().display());
            let names = model_names();
            for n in scenario::list(&scenarios_dir()) {
                let d = scenario::load(&scenarios_dir(), &n, &names)
                    .map(|s| s.description)
                    .unwrap_or_else(|e| format!("(invalid: {e})"));
                println!("  {n:<12} {d}");
            }
            println!("models ({}):", models_dir().display());
            for n in names {
                println!("  {n}");
            }
            Ok(())
        }
        Cmd::Models { name, write } => models_cmd(name, write),
        Cmd::Predict { scenario, seconds, json, hop_us, cu_pipe_capacity } => {
            let s = scenario::load(&scenarios_dir(), &scenario, &model_names())?;
            let tables = load_tables(&s)?;
            let tables: HashMap<String, Table> =
                tables.into_iter().map(|(k, (_, t))| (k, t)).collect();
            let timing = device_timing()?;
            let mut capacity = timing.capacity();
            if let Some(u) = cu_pipe_capacity {
                capacity.cu_pipe = u;
            }
            let host = sim::Host {
                hop_ns: (hop_us * 1e3) as u64,
                wg_jitter: timing.wg_jitter,
                capacity,
                ..Default::default()
            };
            // Two device seconds of warm-up before the window, as flat-out jobs settle.
            let warm = 2.0;
            let phase = |role: Option<Role>| {
                let r = sim::run(&s.phase(role), &tables, warm + seconds, host);
                r.summarize(warm, warm + seconds)
            };
            let has_lp = s.has(Role::Lp);
            let report = Report {
                scenario: s.name.clone(),
                description: s.description.clone(),
                mode: "native".into(),
                source: "predict".into(),
                time_scale: 1.0,
                hp_alone: phase(Some(Role::Hp)),
                lp_alone: has_lp.then(|| phase(Some(Role::Lp))),
                together: has_lp.then(|| phase(None)),
                native_together: None,
            };
            print!("{}", report.table());
            write_json(&json, &report)
        }
        Cmd::Run {
            scenario,
            mode,
            seconds,
            json,
            time_scale,
            warmup,
            quiet,
            rocm,
            containers,
            load,
            keep_logs,
            unmap_us,
            reserve,
            policy,
        } => {
            if let Some(r) = &reserve {
                if mode != Mode::Xhsa {
                    return Err("--reserve needs --mode xhsa (it is a setting of libxhsa)".into());
                }
                println!("libxhsa: XHSA_RESERVE={r} in every process (--reserve)");
            }
            if let Some(p) = policy {
                if mode != Mode::Xhsa {
                    return Err("--policy needs --mode xhsa (it is a setting of libxhsa)".into());
                }
                println!("libxhsa: XHSA_POLICY={p} in every process (--policy)");
            }
            // The ROCm userland of a root beside the host (`xhsa-emu run --rocm VERSION`), or the
            // host's 5.2.
            let root_rocm: Option<&str> = (rocm != "5.2").then_some(rocm.as_str());
            let s = scenario::load(&scenarios_dir(), &scenario, &model_names())?;
            let tables = load_tables(&s)?;
            let scale = time_scale.unwrap_or(s.time_scale);
            if !(1.0..=1000.0).contains(&scale) {
                return Err(format!("--time-scale {scale} is out of range 1-1000"));
            }
            let dir = exe_dir().ok_or("cannot locate this binary's directory")?;
            let emu = dir.join("xhsa-emu");
            if !emu.exists() {
                return Err(format!(
                    "{} not found: build the emulator with `cargo build --release --workspace`",
                    emu.display()
                ));
            }
            let workload = run::build_workload(
                &root().join("tools/workloads"),
                &root().join("tests/kernels"),
                &dir.join("workloads"),
                root_rocm.map(|v| (emu.as_path(), v)),
            )?;
            let libxhsa = dir.join("libxhsa.so");
            if mode == Mode::Xhsa && !libxhsa.exists() {
                return Err(format!(
                    "{} not found: build libxhsa with `cargo build --release --workspace`",
                    libxhsa.display()
                ));
            }
            let run_name = format!("xhsa-bench-{}", std::process::id());
            let work = std::env::temp_dir().join(&run_name);
            let boards = run::board_base(&work, containers, &run_name);
            let dev_cfg = match unmap_us {
                None => device_config(),
                Some(us) => {
                    println!("device-wide unmap and remap cost: {us} us of device time (--unmap-us; the MI308X default is 450)");
                    with_unmap_cost(&device_config(), &work, us)?
                }
            };
            let setup = |label: &'static str, mode: Mode| Setup {
                emu: &emu,
                workload: &workload,
                tables: &tables,
                time_scale: scale,
                device_config: &dev_cfg,
                mode,
                libxhsa: Some(&libxhsa),
                load,
                warmup_s: warmup,
                seconds,
                work_dir: &work,
                board_base: &boards,
                label,
                progress: !quiet,
                root_rocm,
                containers,
                reserve: reserve.clone(),
                policy,
            };
            let has_lp = s.has(Role::Lp);
            // The alone phases are native in every mode: they are the baseline a scheduler is
            // measured against. With a scheduler, the shared phase runs twice: native, then
            // under the mode, so one invocation prints both side by side.
            let phase =
                |label: &'static str, role: Option<Role>, mode: Mode| -> Result<_, String> {
                    let (r, from, to) = run::phase(&setup(label, mode), &s.phase(role))?;
                    Ok(r.summarize(from, to))
                };
            let result = (|| -> Result<Report, String> {
                let hp_alone = phase("hp-alone", Some(Role::Hp), Mode::Native)?;
                let lp_alone = if has_lp {
                    Some(phase("lp-alone", Some(Role::Lp), Mode::Native)?)
                } else {
                    None
                };
                let native_together = if has_lp && mode != Mode::Native {
                    Some(phase("together-native", None, Mode::Native)?)
                } else {
                    None
                };
                let together = if has_lp {
                    Some(phase("together", None, mode)?)
                } else if mode != Mode::Native {
                    // No lp job: the scheduler's own cost on the hp job alone.
                    Some(phase("hp-alone-mode", Some(Role::Hp), mode)?)
                } else {
                    None
                };
                Ok(Report {
                    scenario: s.name.clone(),
                    description: s.description.clone(),
                    mode: mode.as_str().into(),
                    source: "run".into(),
                    time_scale: scale,
                    hp_alone,
                    lp_alone,
                    together,
                    native_together,
                })
            })();
            if boards != work {
                let _ = std::fs::remove_dir_all(&boards);
            }
            match result {
                Ok(report) => {
                    if keep_logs {
                        eprintln!("xhsa-bench: the phases' process logs are in {}", work.display());
                    } else {
                        let _ = std::fs::remove_dir_all(&work);
                    }
                    print!("{}", report.table());
                    write_json(&json, &report)
                }
                Err(e) => Err(format!("{e}\n(logs kept in {})", work.display())),
            }
        }
    }
}

fn models_cmd(name: Option<String>, write: bool) -> Result<(), String> {
    let p = Params::default();
    if write {
        let dir = models_dir();
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for n in models::NAMES {
            let t = models::build(n, &p).expect("built-in");
            let path = dir.join(format!("{n}.kernels"));
            std::fs::write(&path, t.render(&models::header(n, &p)))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            println!("wrote {}", path.display());
        }
        return Ok(());
    }
    if let Some(n) = name {
        let path = models_dir().join(format!("{n}.kernels"));
        let text = std::fs::read_to_string(&path)
            .map_err(|_| format!("unknown model {n:?}; models: {}", model_names().join(", ")))?;
        print!("{text}");
        return Ok(());
    }
    println!(
        "{:<20} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}  (from {})",
        "model",
        "kernels",
        "alone ms",
        "GPU ms",
        "GEMM ms",
        "host ms",
        "max wgs",
        models_dir().display()
    );
    for n in model_names() {
        let path = models_dir().join(format!("{n}.kernels"));
        let t = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|s| Table::parse(&s))?;
        let gemm: u64 =
            t.kernels.iter().filter(|k| k.lds > 0).map(xhsa_bench::table::alone_ns).sum();
        println!(
            "{:<20} {:>8} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10}",
            n,
            t.kernels.len(),
            t.alone_ns() as f64 / 1e6,
            t.gpu_ns() as f64 / 1e6,
            gemm as f64 / 1e6,
            t.host_ns() as f64 / 1e6,
            t.kernels.iter().map(|k| k.workgroups).max().unwrap_or(0)
        );
    }
    Ok(())
}

#[cfg(test)]
mod unmap_tests {
    #[test]
    fn unmap_us_sets_every_unmap_cost_of_the_bench_device() {
        let dir = std::env::temp_dir().join(format!("xhsa-bench-unmap-{}", std::process::id()));
        let p = super::with_unmap_cost(&super::device_config(), &dir, 100).unwrap();
        let c = xhsa_emu::config::Config::from_file(&p).unwrap();
        assert_eq!(
            (c.kfd.suspend_us, c.kfd.resume_us, c.kfd.update_queue_us, c.kfd.set_cu_mask_us),
            (100, 100, 100, 100)
        );
        let base = xhsa_emu::config::Config::from_file(&super::device_config()).unwrap();
        assert_eq!(c.timing.wg_jitter, base.timing.wg_jitter, "the rest of the device is kept");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
