//! The `xhsa-emu` launcher: runs a command on the emulated GPU(s) by putting the emulator's
//! thunk (`libhsakmt.so.1`) under the real ROCr, and describes the emulated device.
//!
//! `xhsa-emu run [--config FILE] [--gpus N] [--time-scale X] -- CMD [ARGS...]` sets up a private
//! runtime directory and the environment contract with the thunk (see [`env`]), runs CMD as a
//! child, forwards termination signals to it (see [`signals`]), removes the directory and exits
//! with CMD's status. `xhsa-emu info` prints the device model and the KFD node list.
//!
//! Diagnostics go to stderr; `run` never writes to stdout, so CMD's stdout is exactly its own.

pub mod child;
pub mod cli;
pub mod env;
pub mod info;
pub mod rocm;
pub mod runtime_dir;
pub mod sandbox;
pub mod signals;
pub mod thunk;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{Config, ConfigError};

/// Exit status of the launcher's own usage and setup errors (as clap's usage errors).
pub const EXIT_USAGE: u8 = 2;

/// The config file in effect: `--config FILE`, else `$XHSA_EMU_CONFIG` (what the thunk would
/// read), else none (the MI308X defaults).
pub fn config_path(flag: Option<&Path>) -> Option<PathBuf> {
    match flag {
        Some(p) => Some(p.to_path_buf()),
        None => std::env::var_os(env::CONFIG).filter(|v| !v.is_empty()).map(PathBuf::from),
    }
}

/// Loads and validates the config at `path` (defaults when `None`).
pub fn load_config(path: Option<&Path>) -> Result<Config, ConfigError> {
    match path {
        Some(p) => Config::from_file(p),
        None => Ok(Config::default()),
    }
}

/// Runs the parsed command line; the returned code is the process's exit status.
pub fn main(cli: cli::Cli) -> ExitCode {
    match cli.command {
        cli::Command::Run(args) => run(args),
        cli::Command::Info(args) => info(args),
        cli::Command::Status => status(),
        cli::Command::Device(args) => device(args),
    }
}

fn status() -> ExitCode {
    let dirs: Vec<std::path::PathBuf> =
        match std::env::var_os("XHSA_EMU_DEVICE_DIR").filter(|d| !d.is_empty()) {
            Some(d) => vec![d.into()],
            None => {
                let base = crate::shared::paths::base_dir();
                let mut v: Vec<_> = std::fs::read_dir(&base)
                    .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
                    .unwrap_or_default();
                v.sort();
                v
            }
        };
    let mut any = false;
    for dir in dirs {
        if let Ok(text) = crate::shared::client::status(&dir) {
            print!("{text}");
            any = true;
        }
    }
    if !any {
        println!("no emulated device is running");
    }
    ExitCode::SUCCESS
}

fn device(args: cli::DeviceServeArgs) -> ExitCode {
    let _ = tracing_subscriber_init();
    let dir = match args.dir {
        Some(d) => d,
        None => match crate::shared::paths::device_dir() {
            Ok(d) => d,
            Err(e) => return fail(format_args!("cannot open the device directory: {e}")),
        },
    };
    let (cfg, gpus) = match Config::from_env() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match crate::shared::server::serve(&dir, cfg, gpus, args.clock) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(format_args!("shared device: {e}")),
    }
}

/// The device process logs (to its log file) through `tracing`, filtered by `XHSA_EMU_LOG`.
fn tracing_subscriber_init() -> Result<(), ()> {
    let filter = std::env::var("XHSA_EMU_LOG").unwrap_or_else(|_| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .map_err(|_| ())
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("xhsa-emu: {msg}");
    ExitCode::from(EXIT_USAGE)
}

fn info(args: cli::InfoArgs) -> ExitCode {
    let path = config_path(args.device.config.as_deref());
    let cfg = match load_config(path.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let host = info::Host::detect();
    print!("{}", info::render(&cfg, path.as_deref(), args.device.gpus, &host));
    ExitCode::SUCCESS
}

/// Prepares the world of a ROCm root (see [`sandbox`]) for a command run with `--rocm 6.4` or
/// `--rocm 7.2`.
fn enter_root(
    stack: rocm::Rocm,
    args: &cli::RunArgs,
    cfg: &Config,
    gfx: (u32, u32, u32),
    rt: &runtime_dir::RuntimeDir,
    thunk: &Path,
    me: Option<&Path>,
) -> Result<sandbox::Sandbox, String> {
    let root = rocm::root_from_env(stack)?;
    let host = info::Host::detect();
    let nodes = crate::kfd::topology::nodes_for(cfg, args.device.gpus, host.ram, host.cpus, gfx);
    // gfx942 parts report their XCCs (MI308X: 4); a gfx90a part has one.
    let num_xcc = if gfx == crate::kfd::topology::GFX942 { cfg.device.xccs } else { 1 };
    let gen = sandbox::generate(&nodes, num_xcc, crate::kfd::topology::MEC_FW_VERSION);
    let mut binds: Vec<PathBuf> = vec![rt.path().to_path_buf()];
    binds.extend(std::env::current_dir().ok());
    binds.extend(std::env::var_os("HOME").map(PathBuf::from));
    binds.extend(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from));
    // A shared device directory named explicitly (e.g. the one containers share) may lie outside
    // the places above; its socket is the device's only rendezvous.
    if std::env::var_os("XHSA_EMU_DEVICE_DIR").is_some_and(|d| !d.is_empty()) {
        binds.extend(crate::shared::paths::device_dir().ok());
    }
    binds.extend(thunk.parent().map(Path::to_path_buf));
    binds.extend(me.and_then(Path::parent).map(Path::to_path_buf));
    for var in ["LD_PRELOAD", "HSA_TOOLS_LIB"] {
        if let Some(v) = std::env::var_os(var) {
            for part in v.to_string_lossy().split([':', ' ']).filter(|p| p.starts_with('/')) {
                binds.extend(Path::new(part).parent().map(Path::to_path_buf));
            }
        }
    }
    if let Some(c) = args.device.config.as_deref().and_then(|c| std::path::absolute(c).ok()) {
        binds.extend(c.parent().map(Path::to_path_buf));
    }
    binds.extend(args.bind.iter().filter_map(|b| std::path::absolute(b).ok()));
    sandbox::Sandbox::enter(&root, &binds, &gen)
}

fn run(args: cli::RunArgs) -> ExitCode {
    // The config is checked here, before CMD starts, so a bad value is reported once, by name,
    // instead of by every process the command starts.
    let path = config_path(args.device.config.as_deref());
    if let Err(e) = load_config(path.as_deref()) {
        return fail(e);
    }
    let config_abs = match path.as_deref().map(std::path::absolute).transpose() {
        Ok(p) => p,
        Err(e) => return fail(format_args!("cannot resolve the config path: {e}")),
    };
    let thunk = match thunk::locate() {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let rt = match runtime_dir::RuntimeDir::create(&thunk) {
        Ok(rt) => rt,
        Err(e) => return fail(format_args!("cannot set up the runtime directory: {e}")),
    };
    let stack = args.rocm.unwrap_or(rocm::Rocm::V5_2);
    let gfx = match rocm::isa(stack, args.isa) {
        Ok(g) => g,
        Err(e) => return fail(e),
    };
    let settings = env::Settings {
        gpus: args.device.gpus,
        time_scale: args.time_scale,
        config: config_abs.clone(),
        isa: crate::kfd::topology::gfx_name(gfx),
    };
    let mut vars = env::child_env(&rt, &settings, |k| std::env::var_os(k));
    // The thunk starts the shared device with this binary when none is running.
    let me = std::env::current_exe().ok();
    if let Some(me) = &me {
        vars.push(("XHSA_EMU_BIN".into(), me.clone().into_os_string()));
    }
    // Debian's MIOpen 7.2 package ships without the sources of its GCN assembly kernels (the
    // `.s` files its assembly solvers build at run time), so a convolution find fails on the
    // first of them ("Failed to load kernel source") instead of using another solver: those
    // solvers are turned off, unless the command's environment chooses (docs/emulator.md).
    if matches!(stack, rocm::Rocm::V7_2)
        && std::env::var_os("MIOPEN_DEBUG_GCN_ASM_KERNELS").is_none()
    {
        vars.push(("MIOPEN_DEBUG_GCN_ASM_KERNELS".into(), "0".into()));
    }
    // Debian's MIOpen 6.4 compiles its naive convolutions with `-isystem /usr/include`, which
    // breaks libstdc++'s `#include_next <math.h>` in sid's root, and its find fails on them
    // instead of using another solver: those solvers are turned off, each unless the command's
    // environment chooses (the other solvers' compiler path is linked by tools/rocm-root.sh).
    if matches!(stack, rocm::Rocm::V6_4) {
        for dir in ["FWD", "BWD", "WRW"] {
            let var = format!("MIOPEN_DEBUG_CONV_DIRECT_NAIVE_CONV_{dir}");
            if std::env::var_os(&var).is_none() {
                vars.push((var.into(), "0".into()));
            }
        }
    }
    // ROCr 6.4 shares IPC memory in its legacy mode unless HSA_ENABLE_IPC_MODE_LEGACY=0 (its
    // flag.h: "Legacy mode by default"): AMD's DKMS-only AMDKFD_IOC_IPC_EXPORT_HANDLE and
    // IMPORT_HANDLE, which the upstream amdkfd the emulator models does not have. ROCr 7.x
    // defaults to DMA-bufs, which the emulated KFD serves; 6.4 is put on that path too, unless
    // the command's environment chooses (docs/emulator.md, "IPC between processes").
    if matches!(stack, rocm::Rocm::V6_4) && std::env::var_os("HSA_ENABLE_IPC_MODE_LEGACY").is_none()
    {
        vars.push(("HSA_ENABLE_IPC_MODE_LEGACY".into(), "0".into()));
    }
    let sandbox = match stack {
        rocm::Rocm::V5_2 => None,
        rocm::Rocm::V6_4 | rocm::Rocm::V7_2 => {
            let cfg = load_config(config_abs.as_deref()).unwrap_or_default();
            match enter_root(stack, &args, &cfg, gfx, &rt, &thunk, me.as_deref()) {
                Ok(s) => Some(s),
                Err(e) => {
                    let _ = rt.remove();
                    return fail(e);
                }
            }
        }
    };
    let status = child::run(&args.command, &vars, sandbox.as_ref());
    // Removed before exiting: `ExitCode` is returned, so `rt` is dropped on every path, but an
    // explicit close reports a failure to remove it.
    if let Err(e) = rt.remove() {
        eprintln!("xhsa-emu: warning: cannot remove the runtime directory: {e}");
    }
    match status {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("xhsa-emu: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
