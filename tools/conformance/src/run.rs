//! Runs one suite in one mode under `xhsa-emu run --rocm VERSION --isa ISA` (the run's
//! [`Setup`]: 6.4 and gfx90a, or 7.2 and gfx942), with its time limit, reading GoogleTest's
//! output as it comes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::gtest::Report;
use crate::isa_stats::IsaStats;
use crate::suites::{Format, Suite};
pub use xhsa_emu::launcher::rocm::Rocm;

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
    /// The ROCm root the suites are installed in and run on.
    pub rocm: Rocm,
    /// The ISA the emulated GPU reports (`xhsa-emu run --isa`).
    pub isa: String,
}

/// The ISA a ROCm's test packages are run for by default: Debian's 6.4 packages are built for
/// gfx90a (among others, not gfx942); 7.2's carry gfx942, the MI308X's own.
pub fn default_isa(rocm: Rocm) -> &'static str {
    match rocm {
        Rocm::V7_2 => "gfx942",
        _ => "gfx90a",
    }
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
    /// In a libxhsa mode: how many times libxhsa took this program's queues off the GPU (the
    /// exit summaries' "N taken off", summed over the program's processes); `None` without a
    /// summary that reports preemption.
    pub taken_off: Option<u64>,
    /// With `taken_off`: the time its queues spent off the GPU, in all, microseconds.
    pub off_us: u64,
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

/// One emulated device and one libxhsa board shared by the programs run with it (the
/// contention run's pair): directories in the log directory (bound into the ROCm root), removed
/// when dropped.
#[derive(Debug)]
pub struct SharedGpu {
    /// `XHSA_EMU_DEVICE_DIR`: the programs' one device process.
    pub device_dir: PathBuf,
    /// `XHSA_BOARD_DIR`: libxhsa's board, through which each process's watcher sees the other's
    /// work.
    pub board_dir: PathBuf,
}

impl SharedGpu {
    /// Fresh owner-only directories under `log_dir`: `device-PID-N` and `board-PID-N` (short:
    /// the device's socket path must fit a Unix socket address).
    pub fn new(log_dir: &Path) -> std::io::Result<SharedGpu> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let device_dir = private_dir(log_dir, &format!("device-{pid}-{n}"))?;
        let board_dir = private_dir(log_dir, &format!("board-{pid}-{n}"))?;
        Ok(SharedGpu { device_dir, board_dir })
    }
}

impl Drop for SharedGpu {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.device_dir);
        let _ = std::fs::remove_dir_all(&self.board_dir);
    }
}

/// A fresh (emptied) owner-only directory `dir/name`.
fn private_dir(dir: &Path, name: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::create_dir_all(dir)?;
    let p = dir.join(name);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::DirBuilder::new().mode(0o700).create(&p)?;
    Ok(p)
}

/// What a run adds to the plain one (`RunOpts::default()`: none of it).
#[derive(Debug, Default, Clone, Copy)]
pub struct RunOpts<'a> {
    /// The logs are `DIR/SUITE.LABEL.log` and `.stderr`; default the mode's label.
    pub label: Option<&'a str>,
    /// Extra environment (e.g. `XHSA_PRIORITY`), after the suite's own.
    pub env: &'a [(String, String)],
    /// Run on this device and board instead of private ones.
    pub gpu: Option<&'a SharedGpu>,
    /// The program's time limit instead of the suite's (still multiplied by
    /// [`Setup::timeout_scale`]).
    pub timeout: Option<Duration>,
}

fn feed(report: &mut Report, format: Format, line: &str) {
    match format {
        Format::Gtest | Format::Sample { .. } => report.line(line),
        Format::Thrust => report.thrust_line(line),
    }
}

/// The program's output with `flag` (its list of tests), run on the emulator as the tests are
/// (it needs no GPU, but its libraries load as in a run).
fn listing(
    suite: &Suite,
    setup: &Setup,
    gpu: &SharedGpu,
    flag: &str,
) -> std::io::Result<std::process::Output> {
    Command::new(&setup.emu)
        .args(["run", "--rocm", &setup.rocm.to_string(), "--isa", &setup.isa, "--"])
        .arg(suite.program())
        .arg(flag)
        .env("XHSA_EMU_DEVICE_DIR", &gpu.device_dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
}

/// The tests of a Thrust program that the suite's filter selects, from the program's `--list`.
fn thrust_selection(suite: &Suite, setup: &Setup, gpu: &SharedGpu) -> std::io::Result<Vec<String>> {
    let out = listing(suite, setup, gpu, "--list")?;
    let names = crate::thrust::select(
        &crate::thrust::names(&String::from_utf8_lossy(&out.stdout)),
        &suite.filter,
    );
    if names.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: --list gave no test that '{}' selects (exit {})",
            suite.name, suite.filter, out.status
        )));
    }
    Ok(names)
}

/// The spread sample of a GoogleTest program's tests ([`crate::sample`]), from its
/// `--gtest_list_tests`.
fn gtest_sample(
    suite: &Suite,
    setup: &Setup,
    gpu: &SharedGpu,
    per_group: u32,
) -> std::io::Result<Vec<String>> {
    let out = listing(suite, setup, gpu, "--gtest_list_tests")?;
    let groups = crate::sample::groups(&String::from_utf8_lossy(&out.stdout));
    let names = crate::sample::spread(&groups, &suite.filter, per_group as usize);
    if names.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}: --gtest_list_tests gave no test that '{}' selects (exit {})",
            suite.name, suite.filter, out.status
        )));
    }
    Ok(names)
}

/// Runs `suite` in `mode`.
pub fn run(suite: &Suite, mode: Mode, setup: &Setup) -> std::io::Result<Outcome> {
    run_with(suite, mode, setup, RunOpts::default())
}

/// Runs `suite` in `mode` with `opts`.
pub fn run_with(
    suite: &Suite,
    mode: Mode,
    setup: &Setup,
    opts: RunOpts,
) -> std::io::Result<Outcome> {
    std::fs::create_dir_all(&setup.log_dir)?;
    let label = opts.label.unwrap_or(mode.label());
    let log_path = setup.log_dir.join(format!("{}.{label}.log", suite.name));
    let mut log = std::fs::File::create(&log_path)?;
    // A private emulated device and libxhsa board unless the caller shares one: the default
    // device is shared per user and configuration, and another build's device process could
    // serve the run; the default board (/dev/shm) is every libxhsa process's of the user, and
    // another's work there would throttle and preempt this run's queues.
    let private;
    let gpu = match opts.gpu {
        Some(g) => g,
        None => {
            private = SharedGpu::new(&setup.log_dir)?;
            &private
        }
    };

    let mut cmd = Command::new(&setup.emu);
    cmd.args(["run", "--rocm", &setup.rocm.to_string(), "--isa", &setup.isa]);
    if let Some(dir) = setup.libxhsa.parent() {
        cmd.arg("--bind").arg(dir);
    }
    cmd.arg("--bind").arg(&setup.log_dir);
    cmd.arg("--").arg(suite.program());
    let mut sampled = None;
    match suite.format {
        Format::Gtest => {
            cmd.arg(format!("--gtest_filter={}", suite.filter)).arg("--gtest_color=no");
        }
        Format::Sample { per_group } => {
            let names = gtest_sample(suite, setup, gpu, per_group)?;
            sampled = Some(names.len());
            let filter = names.join(":");
            let file = setup.log_dir.join(format!("{}.{label}.flags", suite.name));
            std::fs::write(&file, crate::sample::flagfile(&filter))?;
            writeln!(
                log,
                "# {} tests sampled, at most {per_group} a test suite of those {} selects",
                names.len(),
                suite.filter
            )?;
            // On the command line when it fits one argument: rocBLAS's test program sets its
            // own filter after GoogleTest has read a flag file, and then runs every test.
            if filter.len() < crate::sample::MAX_ARGUMENT {
                cmd.arg(format!("--gtest_filter={filter}"));
            } else {
                cmd.arg(format!("--gtest_flagfile={}", file.display()));
            }
            cmd.arg("--gtest_color=no");
        }
        Format::Thrust => {
            let names = thrust_selection(suite, setup, gpu)?;
            writeln!(log, "# {} tests selected by {}", names.len(), suite.filter)?;
            cmd.arg(crate::thrust::SIZES).arg("--verbose").args(names);
        }
    }
    cmd.env("XHSA_EMU_DEVICE_DIR", &gpu.device_dir);
    cmd.env("XHSA_BOARD_DIR", &gpu.board_dir);
    // rocFFT keeps the kernels it compiles at run time in an SQLite file under $HOME, shared
    // with every other rocFFT program of the user: each run gets a fresh one of its own (a run
    // once failed its first plan, `rocfft_plan_create failed`, while other programs ran).
    let rtc_cache = setup.log_dir.join(format!("{}.{label}.rocfft-cache.db", suite.name));
    let _ = std::fs::remove_file(&rtc_cache);
    cmd.env("ROCFFT_RTC_CACHE_PATH", &rtc_cache);
    // MIOpen keeps the kernels it compiles (and its find results) under $HOME/.cache/miopen
    // and $HOME/.config/miopen: a second run would find the first one's binaries and compile
    // nothing. Each run gets empty directories of its own.
    for (var, what) in
        [("MIOPEN_CUSTOM_CACHE_DIR", "miopen-cache"), ("MIOPEN_USER_DB_PATH", "miopen-db")]
    {
        let dir = setup.log_dir.join(format!("{}.{label}.{what}", suite.name));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        cmd.env(var, &dir);
    }
    for (k, v) in suite.env.iter().chain(opts.env) {
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
    let limit = opts.timeout.unwrap_or(suite.timeout).mul_f64(setup.timeout_scale.max(0.01));
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
                feed(&mut report, suite.format, &line);
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
        feed(&mut report, suite.format, &line);
    }
    drop(rx);
    // The reader ends with the pipe (not waited for: see above).
    drop(reader);
    let elapsed = start.elapsed();
    let end = if timed_out { End::TimedOut } else { end_of(status) };
    writeln!(log, "# end: {end:?} after {:.1} s", elapsed.as_secs_f64())?;
    // A program that ran other tests than the sample (one that does not take a flag file's
    // filter runs all of them) is said so, not counted as the sample.
    if let (Some(want), Some(ran)) = (sampled, report.announced) {
        if want != ran {
            let msg = format!(
                "{}: the program announced {ran} tests for a sample of {want}: it did not take the sample's filter",
                suite.name
            );
            writeln!(log, "# {msg}")?;
            tracing::warn!("{msg}");
        }
    }
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let summary = Summary::parse(&stderr);
    let libxhsa_ran = mode != Mode::Native && summary.seen;
    let isa = setup.isa_stats.then(|| IsaStats::parse(&stderr));
    Ok(Outcome {
        mode,
        report,
        end,
        elapsed,
        libxhsa_ran,
        taken_off: (mode != Mode::Native).then_some(summary.taken_off).flatten(),
        off_us: summary.off_us,
        log: log_path,
        isa,
    })
}

/// What libxhsa's exit summaries (`XHSA_LOG=info`, one per process that ran the runtime) say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// A summary was seen: libxhsa was loaded and ran.
    pub seen: bool,
    /// The sum of their "preemption: N taken off"; `None` when none reports preemption (off,
    /// or no GPU's watcher started).
    pub taken_off: Option<u64>,
    /// The sum of their "N us off in all".
    pub off_us: u64,
}

impl Summary {
    /// Reads the summaries out of a program's standard error.
    pub fn parse(stderr: &str) -> Summary {
        let mut s = Summary::default();
        for line in stderr.lines() {
            let Some(i) = line.find("INFO xhsa: ") else { continue };
            let rest = &line[i..];
            if !rest.contains("HSA queues created") {
                continue;
            }
            s.seen = true;
            let Some((_, pre)) = rest.split_once("; preemption: ") else { continue };
            // "N taken off, N put back, N off now, N us off in all[, ...]"
            let n = pre.split_once(" taken off").and_then(|(n, _)| n.trim().parse::<u64>().ok());
            if let Some(n) = n {
                s.taken_off = Some(s.taken_off.unwrap_or(0) + n);
            }
            let us = pre
                .split_once(" us off in all")
                .and_then(|(h, _)| h.rsplit(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            s.off_us += us.unwrap_or(0);
        }
        s
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_summaries_are_summed_over_processes() {
        let one = " INFO xhsa: 1 HSA queues created, 0 destroyed, 1083 doorbell stores, 0 priority calls; KFD queues: [0@0x7f65016d2000(ioctl)]; shadow queues: 1 created, 9 packets taken, 9 packets forwarded, 0 held, 0 in flight, 0 ns throttled, 0 degraded; passthrough libraries: 0 queues, 0 dispatches; at most 1 passes per application call; preemption: 76 taken off, 76 put back, 0 off now, 6588560 us off in all, wake to KFD call P50 3663 us P99 131962 us (76)";
        let child = "2026-11-27T10:00:00Z  INFO xhsa: 0 HSA queues created, 0 destroyed, 0 doorbell stores, 0 priority calls; KFD queues: []; preemption: 3 taken off, 3 put back, 0 off now, 10 us off in all";
        let s = Summary::parse(&format!("noise\n{one}\n{child}\n"));
        assert_eq!(s, Summary { seen: true, taken_off: Some(79), off_us: 6588570 });
        // Preemption off: the summary has no preemption part.
        let off = " INFO xhsa: 2 HSA queues created, 0 destroyed, 24 doorbell stores, 0 priority calls; KFD queues: []; shadow queues: 2 created";
        assert_eq!(Summary::parse(off), Summary { seen: true, taken_off: None, off_us: 0 });
        // Other libxhsa lines are not a summary.
        let other = " INFO xhsa: queue 1: controller request op 1 level 2 from uid 0: status 0";
        assert_eq!(Summary::parse(other), Summary::default());
    }
}
