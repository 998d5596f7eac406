//! Runs one suite in one mode under `xhsa-emu run --rocm 6.4 --isa gfx90a`, with its time limit,
//! reading GoogleTest's output as it comes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::gtest::Report;
use crate::isa_stats::IsaStats;
use crate::suites::Suite;

/// How the program meets libxhsa.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Native,
    LdPreload,
    HsaToolsLib,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Native, Mode::LdPreload, Mode::HsaToolsLib];

    pub fn label(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::LdPreload => "LD_PRELOAD",
            Mode::HsaToolsLib => "HSA_TOOLS_LIB",
        }
    }

    /// `native`, `preload`, `tools` (or the labels).
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" => Ok(Mode::Native),
            "preload" | "ld_preload" => Ok(Mode::LdPreload),
            "tools" | "hsa_tools_lib" => Ok(Mode::HsaToolsLib),
            o => Err(format!(
                "unknown mode '{o}'; accepted: native, preload (LD_PRELOAD), tools (HSA_TOOLS_LIB)"
            )),
        }
    }
}

/// What the emulator and libxhsa to use, and where logs go.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `xhsa-emu` (its `libhsakmt.so` beside it).
    pub emu: PathBuf,
    /// `libxhsa.so`, for the libxhsa modes.
    pub libxhsa: PathBuf,
    /// Each run's full output goes to `DIR/SUITE.MODE.log`.
    pub log_dir: PathBuf,
    /// Time limits are multiplied by this.
    pub timeout_scale: f64,
    /// Run with the emulator's debug log and count the interpreter's work ([`IsaStats`]).
    pub isa_stats: bool,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signalled(i32),
    /// Killed at its time limit.
    TimedOut,
}

/// One run of one suite in one mode.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub mode: Mode,
    pub report: Report,
    pub end: End,
    pub elapsed: Duration,
    /// In a libxhsa mode: libxhsa's exit summary was seen (it was loaded and ran).
    pub libxhsa_ran: bool,
    pub log: PathBuf,
    /// With [`Setup::isa_stats`]: the interpreter's work in the run.
    pub isa: Option<IsaStats>,
}

impl Outcome {
    /// The test in flight when the program stopped, when it was killed at its limit.
    pub fn timed_out(&self) -> Option<&str> {
        (self.end == End::TimedOut).then_some(self.report.running.as_deref()).flatten()
    }

    /// The test in flight when the program died by itself (a crash or an abort).
    pub fn crashed(&self) -> Option<&str> {
        (self.end != End::TimedOut).then_some(self.report.running.as_deref()).flatten()
    }

    /// Failed tests, with the one a crash happened in.
    pub fn failures(&self) -> Vec<String> {
        let mut v: Vec<String> = self.report.failed.iter().cloned().collect();
        v.extend(self.crashed().map(str::to_string));
        v
    }
}

fn end_of(st: ExitStatus) -> End {
    match (st.code(), st.signal()) {
        (Some(c), _) => End::Exited(c),
        (None, Some(s)) => End::Signalled(s),
        _ => End::Exited(-1),
    }
}

/// Runs `suite` in `mode`.
pub fn run(suite: &Suite, mode: Mode, setup: &Setup) -> std::io::Result<Outcome> {
    std::fs::create_dir_all(&setup.log_dir)?;
    let log_path = setup.log_dir.join(format!("{}.{}.log", suite.name, mode.label()));
    let mut log = std::fs::File::create(&log_path)?;
    // A private emulated device: the default one is shared per user and configuration, and
    // another build's device process could serve the run.
    let device_dir = setup.log_dir.join(format!("device-{}-{}", std::process::id(), suite.name));
    std::fs::create_dir_all(&device_dir)?;

    let mut cmd = Command::new(&setup.emu);
    cmd.args(["run", "--rocm", "6.4", "--isa", "gfx90a"]);
    if let Some(dir) = setup.libxhsa.parent() {
        cmd.arg("--bind").arg(dir);
    }
    cmd.arg("--bind").arg(&setup.log_dir);
    cmd.arg("--").arg(suite.program());
    cmd.arg(format!("--gtest_filter={}", suite.filter)).arg("--gtest_color=no");
    cmd.env("XHSA_EMU_DEVICE_DIR", &device_dir);
    // rocFFT keeps the kernels it compiles at run time in an SQLite file under $HOME, shared
    // with every other rocFFT program of the user: each run gets a fresh one of its own (a run
    // once failed its first plan, `rocfft_plan_create failed`, while other programs ran).
    let rtc_cache = setup.log_dir.join(format!("{}.{}.rocfft-cache.db", suite.name, mode.label()));
    let _ = std::fs::remove_file(&rtc_cache);
    cmd.env("ROCFFT_RTC_CACHE_PATH", &rtc_cache);
    for (k, v) in &suite.env {
        cmd.env(k, v);
    }
    if setup.isa_stats {
        cmd.env("XHSA_EMU_LOG", "debug");
    }
    match mode {
        Mode::Native => {}
        Mode::LdPreload => {
            cmd.env("LD_PRELOAD", &setup.libxhsa).env("XHSA_LOG", "info");
        }
        Mode::HsaToolsLib => {
            cmd.env("HSA_TOOLS_LIB", &setup.libxhsa).env("XHSA_LOG", "info");
        }
    }
    writeln!(log, "# {:?}", cmd)?;
    let stderr_path = log_path.with_extension("stderr");
    cmd.stdout(Stdio::piped()).stderr(std::fs::File::create(&stderr_path)?).stdin(Stdio::null());
    // Its own process group, so that the time limit stops the program and everything it started.
    cmd.process_group(0);

    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let limit = suite.timeout.mul_f64(setup.timeout_scale.max(0.01));
    let deadline = start + limit;
    let mut report = Report::default();
    let mut timed_out = false;
    // Lines until the pipe closes; the exit is looked at twice a second besides, in case
    // something the program started holds its standard output open after it has ended.
    let mut exited: Option<ExitStatus> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(500))) {
            Ok(line) => {
                writeln!(log, "{line}")?;
                report.line(&line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                timed_out = true;
                stop(&mut child);
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if exited.is_some() {
                    break; // ended half a second ago and the pipe is still open
                }
                exited = child.try_wait()?;
            }
        }
    }
    let status = match exited {
        Some(s) => s,
        None => child.wait()?,
    };
    // Lines still queued (after a kill, the pipe's remains).
    while let Ok(line) = rx.try_recv() {
        writeln!(log, "{line}")?;
        report.line(&line);
    }
    drop(rx);
    // The reader ends with the pipe (not waited for: see above).
    drop(reader);
    let elapsed = start.elapsed();
    let end = if timed_out { End::TimedOut } else { end_of(status) };
    writeln!(log, "# end: {end:?} after {:.1} s", elapsed.as_secs_f64())?;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let libxhsa_ran = mode != Mode::Native
        && stderr.contains("INFO xhsa:")
        && stderr.contains("HSA queues created");
    let isa = setup.isa_stats.then(|| IsaStats::parse(&stderr));
    let _ = std::fs::remove_dir_all(&device_dir);
    Ok(Outcome { mode, report, end, elapsed, libxhsa_ran, log: log_path, isa })
}

/// SIGTERM to the program's process group (`xhsa-emu run` forwards it and tidies up), then
/// SIGKILL after a grace period. Polls the exit every 100 ms meanwhile.
fn stop(child: &mut std::process::Child) {
    let pgid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on the child's own process group (made with process_group(0)); no
    // memory is involved.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: as above; the group may be gone already (ESRCH is ignored).
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// The built artifacts beside the running program (`target/release/`): `xhsa-emu` and
/// `libxhsa.so`.
pub fn artifact(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().map(|d| d.join(name)).unwrap_or_else(|| Path::new(name).to_path_buf())
}
