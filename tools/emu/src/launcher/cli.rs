//! The command line, parsed with clap. Usage errors (unknown flags, a missing command, values
//! out of range) exit with status 2 and name the accepted forms.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Accepted values of `--gpus`.
pub const GPUS: std::ops::RangeInclusive<u32> = 1..=8;
/// Accepted values of `--time-scale`.
pub const TIME_SCALE: std::ops::RangeInclusive<f64> = 1.0..=1000.0;

#[derive(Parser, Debug)]
#[command(
    name = "xhsa-emu",
    version,
    about = "Runs programs on an emulated AMD Instinct GPU (MI308X-shaped, gfx90a ISA) under the real ROCr",
    arg_required_else_help = true,
    after_help = "Forms:\n  xhsa-emu run [--config FILE] [--gpus N] [--time-scale X] [--] CMD [ARGS...]\n  xhsa-emu info [--config FILE] [--gpus N]"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run CMD with the emulator's libhsakmt.so.1 under ROCr; exits with CMD's status
    /// (128+signal if CMD is killed by a signal).
    #[command(
        after_help = "Forms:\n  xhsa-emu run [--config FILE] [--gpus N] [--time-scale X] [--rocm 5.2|6.4|7.2] [--isa gfx942|gfx90a] [--bind PATH]... -- CMD [ARGS...]\n  xhsa-emu run [OPTIONS] CMD [ARGS...]\nOptions go before CMD; everything from CMD on is passed to it unchanged."
    )]
    Run(RunArgs),
    /// Print the emulated device model and the KFD node list, as rocminfo would see them.
    Info(InfoArgs),
    /// List the processes and queues on the shared emulated device.
    Status,
    /// Serve the shared emulated device (started on demand by the emulated thunk).
    #[command(hide = true)]
    Device(DeviceServeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DeviceServeArgs {
    /// The device directory (default: the per-user one, or $XHSA_EMU_DEVICE_DIR).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Continue the device time of a device that went away: its CLOCK_MONOTONIC base and
    /// device-time base in ns (given by the clients that start a successor).
    #[arg(long, value_name = "MONO,DEV", hide = true, value_parser = parse_clock)]
    pub clock: Option<(u64, u64)>,
}

fn parse_clock(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once(',').ok_or("expected MONO,DEV")?;
    Ok((a.parse().map_err(|e| format!("{e}"))?, b.parse().map_err(|e| format!("{e}"))?))
}

/// Options shared by `run` and `info`.
#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// Device model configuration (TOML); default: $XHSA_EMU_CONFIG, else the MI308X defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Number of emulated GPUs (1 to 8).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_gpus)]
    pub gpus: u32,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Device time runs X times slower than real time (1.0 to 1000.0); default: the config's
    /// timing.time_scale (1.0).
    #[arg(long, value_name = "X", value_parser = parse_time_scale)]
    pub time_scale: Option<f64>,
    /// The ROCm userland CMD sees: 5.2 (the host's, default), 6.4 or 7.2 (the ROCm 6.4 or 7.2
    /// root built by `./x setup`, as CMD's filesystem; needs root).
    #[arg(long, value_name = "VERSION", value_parser = super::rocm::Rocm::parse)]
    pub rocm: Option<super::rocm::Rocm>,
    /// The ISA the emulated GPUs report under --rocm 6.4 or 7.2: gfx942 (default) or gfx90a.
    #[arg(long, value_name = "ISA", value_parser = super::rocm::parse_isa)]
    pub isa: Option<(u32, u32, u32)>,
    /// More host paths to show CMD at the same place inside the ROCm 6.4 or 7.2 root (repeatable);
    /// the working directory, $HOME, /tmp and the emulator's own files always are.
    #[arg(long, value_name = "PATH")]
    pub bind: Vec<PathBuf>,
    /// The command to run, and its arguments.
    #[arg(value_name = "CMD", required = true, num_args = 1.., trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

#[derive(Args, Debug, Clone)]
pub struct InfoArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
}

fn parse_gpus(s: &str) -> Result<u32, String> {
    let accepted = format!("accepted: a whole number from {} to {}", GPUS.start(), GPUS.end());
    match s.trim().parse::<u32>() {
        Ok(n) if GPUS.contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} GPUs is out of range; {accepted}")),
        Err(_) => Err(format!("not a number; {accepted}")),
    }
}

fn parse_time_scale(s: &str) -> Result<f64, String> {
    let accepted = format!(
        "accepted: a number from {:.1} to {:.1} (1.0 = real time)",
        TIME_SCALE.start(),
        TIME_SCALE.end()
    );
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && TIME_SCALE.contains(&x) => Ok(x),
        Ok(x) => Err(format!("{x} is out of range; {accepted}")),
        Err(_) => Err(format!("not a number; {accepted}")),
    }
}

/// Parses the process's arguments; on a usage error prints it (with the accepted forms) and
/// exits 2, on `--help`/`--version` prints and exits 0.
pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

/// [`parse`] over explicit arguments (the first is the program name).
pub fn parse_from<I, T>(args: I) -> Cli
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let usage_error =
                !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
            let _ = e.print();
            if usage_error
                && !matches!(e.kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
            {
                eprintln!("\nAccepted forms:\n  xhsa-emu run [--config FILE] [--gpus N] [--time-scale X] [--rocm 5.2|6.4|7.2] [--isa gfx942|gfx90a] [--bind PATH]... [--] CMD [ARGS...]\n  xhsa-emu info [--config FILE] [--gpus N]\n  xhsa-emu --help");
            }
            std::process::exit(if usage_error { 2 } else { 0 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn try_parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xhsa-emu").chain(args.iter().copied()))
    }

    fn run_args(args: &[&str]) -> RunArgs {
        match try_parse(args).unwrap().command {
            Command::Run(r) => r,
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn run_takes_the_command_with_or_without_a_separator() {
        let r = run_args(&["run", "--gpus", "2", "--", "sh", "-c", "exit 7"]);
        assert_eq!(r.device.gpus, 2);
        assert_eq!(r.command, ["sh", "-c", "exit 7"]);
        let r = run_args(&["run", "--time-scale", "4", "sh", "-c", "exit 7", "--gpus", "3"]);
        assert_eq!(r.time_scale, Some(4.0));
        assert_eq!(r.device.gpus, 1);
        assert_eq!(r.command, ["sh", "-c", "exit 7", "--gpus", "3"]);
    }

    #[test]
    fn ranges_are_enforced() {
        assert!(try_parse(&["run", "--gpus", "0", "true"]).is_err());
        assert!(try_parse(&["run", "--gpus", "9", "true"]).is_err());
        assert!(try_parse(&["run", "--time-scale", "0.1", "true"]).is_err());
        assert!(try_parse(&["run", "--time-scale", "NaN", "true"]).is_err());
        assert!(try_parse(&["run", "--time-scale", "inf", "true"]).is_err());
        assert_eq!(
            run_args(&["run", "--gpus", "8", "--time-scale", "1000", "true"]).device.gpus,
            8
        );
        let e = try_parse(&["run", "--gpus", "0", "true"]).unwrap_err().to_string();
        assert!(e.contains("1 to 8"), "{e}");
    }

    #[test]
    fn a_command_is_required_and_unknown_flags_are_refused() {
        assert!(try_parse(&["run"]).is_err());
        assert!(try_parse(&["run", "--gpus", "2"]).is_err());
        assert!(try_parse(&["run", "--bogus", "true"]).is_err());
        assert!(try_parse(&["info", "--time-scale", "2"]).is_err());
        assert!(try_parse(&["run", "--rocm", "6.3", "true"])
            .unwrap_err()
            .to_string()
            .contains("accepted: 5.2"));
        assert!(try_parse(&["run", "--isa", "gfx1100", "true"])
            .unwrap_err()
            .to_string()
            .contains("gfx942"));
        let r = run_args(&["run", "--rocm", "6.4", "--isa", "gfx90a", "--bind", "/opt", "true"]);
        assert_eq!(
            (r.rocm, r.isa, r.bind.len()),
            (Some(super::super::rocm::Rocm::V6_4), Some((9, 0, 10)), 1)
        );
        assert_eq!(
            run_args(&["run", "--rocm", "7.2", "true"]).rocm,
            Some(super::super::rocm::Rocm::V7_2)
        );
    }
}
