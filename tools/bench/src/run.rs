//! Running one phase for real: the workload processes of the phase on a private emulated
//! device (`xhsa-emu run` with `XHSA_EMU_DEVICE_DIR` set to a fresh directory), started
//! together, told to go once every stream has warmed up, stopped after the window.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::phase::{Decoded, PhaseResult, StreamResult};
use crate::scenario::{Priority, Process, Stream};
use crate::table::Table;

/// How processes reach the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No scheduler: HIP, ROCr and the (emulated) device as they are; every stream a plain one,
    /// as PyTorch creates them.
    Native,
    /// libxhsa preloaded (`LD_PRELOAD`) into every workload process, with the scenario's
    /// priorities: a process whose streams share one class gets it as `XHSA_PRIORITY`
    /// ([`xhsa_level`]); a process with streams of different classes also creates each stream
    /// with that HIP stream priority (`hipStreamCreateWithPriority`). All processes of a phase
    /// share one board directory (`XHSA_BOARD_DIR`), private to the phase.
    Xhsa,
}

/// How libxhsa is loaded into a workload process in [`Mode::Xhsa`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// `LD_PRELOAD=libxhsa.so`.
    #[default]
    Preload,
    /// `HSA_TOOLS_LIB=libxhsa.so` (ROCr loads it during `hsa_init`).
    ToolsLib,
}

impl Load {
    /// The environment variable that loads libxhsa.
    pub fn var(self) -> &'static str {
        match self {
            Load::Preload => "LD_PRELOAD",
            Load::ToolsLib => "HSA_TOOLS_LIB",
        }
    }
}

/// The `XHSA_PRIORITY` level a scenario class maps to (XSched's range, higher is more urgent).
pub fn xhsa_level(p: Priority) -> i32 {
    match p {
        Priority::High => 10,
        Priority::Normal => 0,
        Priority::Low => -10,
    }
}

fn prio_name(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Xhsa => "xhsa",
        }
    }

    /// Environment the mode adds to a workload process.
    pub fn env(
        self,
        p: &Process,
        libxhsa: Option<&Path>,
        load: Load,
        board_dir: &Path,
    ) -> Vec<(String, String)> {
        match (self, libxhsa) {
            (Mode::Xhsa, Some(lib)) => {
                let mut env = vec![
                    (load.var().to_string(), lib.display().to_string()),
                    ("XHSA_BOARD_DIR".to_string(), board_dir.display().to_string()),
                    // libxhsa's messages and exit summary in the process logs; the user's own
                    // filter, when set, instead (e.g. `info,xhsa::preempt=debug`).
                    (
                        "XHSA_LOG".to_string(),
                        std::env::var("XHSA_LOG").unwrap_or_else(|_| "info".to_string()),
                    ),
                ];
                let first = p.streams[0].priority;
                if p.streams.iter().all(|s| s.priority == first) {
                    env.push(("XHSA_PRIORITY".to_string(), xhsa_level(first).to_string()));
                }
                env
            }
            _ => Vec::new(),
        }
    }

    /// The workload's `--stream` argument for stream `s` of process `p`.
    pub fn stream_arg(self, p: &Process, s: &Stream) -> String {
        let base = format!("{}:{}", s.role.as_str(), s.rate.unwrap_or(0.0));
        let mixed = p.streams.iter().any(|o| o.priority != s.priority);
        match self {
            Mode::Xhsa if mixed => format!("{base}:{}", prio_name(s.priority)),
            _ => base,
        }
    }
}

/// Everything a phase needs besides its processes.
pub struct Setup<'a> {
    pub emu: &'a Path,
    pub workload: &'a Path,
    pub tables: &'a HashMap<String, (PathBuf, Table)>,
    pub time_scale: f64,
    /// The emulator configuration (`xhsa-emu run --config`).
    pub device_config: &'a Path,
    pub mode: Mode,
    /// `libxhsa.so`, for [`Mode::Xhsa`].
    pub libxhsa: Option<&'a Path>,
    /// How libxhsa is loaded.
    pub load: Load,
    /// Wall-clock seconds after "go" before the window opens.
    pub warmup_s: f64,
    /// Wall-clock seconds of the window.
    pub seconds: f64,
    /// Where logs and the device directory go.
    pub work_dir: &'a Path,
    /// Where each phase's board directory goes (`LABEL/board` under it): a tmpfs where the
    /// processes share one (/dev/shm, libxhsa's default), as users deploy it; [`board_base`].
    pub board_base: &'a Path,
    pub label: &'a str,
    pub progress: bool,
    /// Run on the ROCm userland of this version's root (`xhsa-emu run --rocm 6.4` or `7.2`,
    /// gfx942); `None`: the host's ROCm 5.2 (gfx90a).
    pub root_rocm: Option<&'a str>,
    /// Each workload process in a container of its own ([`container_command`]).
    pub containers: bool,
    /// `XHSA_RESERVE` for every process of a phase under libxhsa.
    pub reserve: Option<String>,
    /// `XHSA_POLICY` for every process of a phase under libxhsa.
    pub policy: Option<xhsa_model::sharing::Sharing>,
}

/// What makes a process a container here, as Docker makes one: `unshare` gives it its own pid
/// (it is pid 1 there, its children count from 2), IPC and mount namespaces, and a fresh tmpfs
/// on `/dev/shm` (64 MiB, Docker's default); everything else of the host's file system stays
/// visible, as the volumes a `docker run -v` mounts (the phase's board and device directories).
const CONTAINER_SHELL: &str = "mount -t tmpfs -o size=64m,mode=1777 shm /dev/shm && exec \"$@\"";

/// `cmd`'s program and arguments run in a container of its own (see [`CONTAINER_SHELL`]).
pub fn container_command(cmd: &Command) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--ipc",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        CONTAINER_SHELL,
        "sh",
    ]);
    c.arg(cmd.get_program());
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

#[derive(Deserialize)]
struct Line {
    ev: String,
    stream: Option<usize>,
    t0: Option<u64>,
    t1: Option<u64>,
    /// An LLM server's request: when it was due, its first token, the end of each decode step.
    arrival: Option<u64>,
    first: Option<u64>,
    steps: Option<Vec<u64>>,
}

/// One request line's times in device seconds from "go": `(t0, t1)` and, for an LLM server's
/// request, its token times.
fn request_times(l: &Line, dev_s: impl Fn(u64) -> f64) -> Option<((f64, f64), Option<Decoded>)> {
    let (a, b) = (l.t0?, l.t1?);
    let decoded = match (l.arrival, l.first, &l.steps) {
        (Some(arrival), Some(first), Some(steps)) => Some(Decoded {
            arrival: dev_s(arrival),
            first: dev_s(first),
            steps: steps.iter().map(|&t| dev_s(t)).collect(),
        }),
        _ => None,
    };
    Some(((dev_s(a), dev_s(b)), decoded))
}

enum Msg {
    Line(usize, Line),
    Eof(usize),
}

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on the pid of a child this harness started and has not reaped.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// `CLOCK_MONOTONIC` in ns: the clock the workloads report in.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The workload program's arguments for process `p` (see tools/workloads/workload.hip).
pub fn workload_args(
    p: &Process,
    tables: &HashMap<String, (PathBuf, Table)>,
    time_scale: f64,
    mode: Mode,
) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = vec!["--table".into(), tables[&p.model].0.clone().into()];
    a.extend(["--time-scale".into(), time_scale.to_string().into()]);
    if let Some(d) = &p.decode {
        a.extend(["--step-table".into(), tables[&d.step_model].0.clone().into()]);
        a.extend(["--steps".into(), d.steps.to_string().into()]);
    }
    if p.streams.len() == 1 {
        a.push("--null-stream".into());
    }
    for s in &p.streams {
        a.extend(["--stream".into(), mode.stream_arg(p, s).into()]);
    }
    a
}

/// Runs one phase; returns the requests in device seconds from "go" and the window
/// `(from, to)` in device seconds.
pub fn phase(setup: &Setup, processes: &[Process]) -> Result<(PhaseResult, f64, f64), String> {
    let dir = setup.work_dir.join(setup.label);
    let dev = dir.join("device");
    std::fs::create_dir_all(&dev).map_err(|e| format!("{}: {e}", dev.display()))?;
    set_private(&dev)?;
    let board = setup.board_base.join(setup.label).join("board");
    std::fs::create_dir_all(&board).map_err(|e| format!("{}: {e}", board.display()))?;
    set_private(&board)?;
    let (tx, rx) = mpsc::channel();
    let mut procs = Vec::new();
    let mut streams_total = 0;
    for (i, p) in processes.iter().enumerate() {
        let (table_path, _) = &setup.tables[&p.model];
        let log = dir.join(format!("process{i}.log"));
        let logf = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(setup.emu);
        cmd.arg("run");
        if let Some(v) = setup.root_rocm {
            cmd.args(["--rocm", v]);
            // The workload reads its model table from the host's tree.
            if let Some(d) = table_path.parent() {
                cmd.arg("--bind").arg(d);
            }
        }
        cmd.arg("--config")
            .arg(setup.device_config)
            .arg("--time-scale")
            .arg(setup.time_scale.to_string())
            .arg("--")
            .arg(setup.workload);
        cmd.args(workload_args(p, setup.tables, setup.time_scale, setup.mode));
        cmd.env("XHSA_EMU_DEVICE_DIR", &dev);
        let reserve = setup.reserve.clone().filter(|_| setup.mode == Mode::Xhsa);
        let reserve = reserve.map(|r| ("XHSA_RESERVE".to_string(), r));
        let policy = setup.policy.filter(|_| setup.mode == Mode::Xhsa);
        let policy = policy.map(|p| ("XHSA_POLICY".to_string(), p.to_string()));
        for (k, v) in setup
            .mode
            .env(p, setup.libxhsa, setup.load, &board)
            .into_iter()
            .chain(reserve)
            .chain(policy)
        {
            cmd.env(k, v);
        }
        if setup.containers {
            cmd = container_command(&cmd);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::from(logf));
        let mut child =
            cmd.spawn().map_err(|e| format!("cannot start {}: {e}", setup.emu.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(l) = serde_json::from_str::<Line>(&line) {
                    if tx.send(Msg::Line(i, l)).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send(Msg::Eof(i));
        });
        streams_total += p.streams.len();
        procs.push(Proc { child, stdin, log });
    }
    drop(tx);
    let fail = |procs: &[Proc], i: usize, what: &str| {
        format!(
            "{}: process {i} ({}) {what}; its log ({}):\n{}",
            setup.label,
            processes[i].model,
            procs[i].log.display(),
            tail(&procs[i].log)
        )
    };
    // Warm-up: every stream of every process reports "warm".
    let mut warm = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while warm < streams_total {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Msg::Line(_, l)) if l.ev == "warm" => warm += 1,
            Ok(Msg::Line(..)) => {}
            Ok(Msg::Eof(i)) => return Err(fail(&procs, i, "exited before warming up")),
            Err(_) => {
                return Err(format!(
                    "{}: the workloads did not warm up within 120 s (logs in {})",
                    setup.label,
                    dir.display()
                ))
            }
        }
    }
    let go = monotonic_ns();
    let go_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    for p in &mut procs {
        if let Some(s) = p.stdin.as_mut() {
            let _ = writeln!(s, "go");
            let _ = s.flush();
        }
    }
    let scale = setup.time_scale;
    let dev_s = |t: u64| (t.saturating_sub(go)) as f64 / 1e9 / scale;
    type Reqs = Vec<Vec<(Vec<(f64, f64)>, Vec<Decoded>)>>;
    let mut reqs: Reqs =
        processes.iter().map(|p| vec![(Vec::new(), Vec::new()); p.streams.len()]).collect();
    let start = Instant::now();
    let stop_at = Duration::from_secs_f64(setup.warmup_s + setup.seconds);
    let mut last_print = Instant::now();
    let mut eof = vec![false; procs.len()];
    let handle = |m: Msg, reqs: &mut Reqs, eof: &mut Vec<bool>| -> Result<(), usize> {
        match m {
            Msg::Line(i, l) if l.ev == "req" => {
                if let (Some(s), Some((t, decoded))) = (l.stream, request_times(&l, dev_s)) {
                    if let Some((v, d)) = reqs[i].get_mut(s) {
                        v.push(t);
                        d.extend(decoded);
                    }
                }
                Ok(())
            }
            Msg::Line(..) => Ok(()),
            Msg::Eof(i) => {
                eof[i] = true;
                Err(i)
            }
        }
    };
    while start.elapsed() < stop_at {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => {
                if let Err(i) = handle(m, &mut reqs, &mut eof) {
                    return Err(fail(&procs, i, "exited during the run"));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if setup.progress && last_print.elapsed() > Duration::from_millis(500) {
            last_print = Instant::now();
            let n: usize = reqs.iter().flatten().map(|(v, _)| v.len()).sum();
            eprint!(
                "\r  {:<10} {:5.1}/{:.1} s wall   {n} requests done   ",
                setup.label,
                start.elapsed().as_secs_f64(),
                stop_at.as_secs_f64()
            );
        }
    }
    for p in &mut procs {
        if let Some(mut s) = p.stdin.take() {
            let _ = writeln!(s, "stop");
        }
    }
    // Let the requests in flight finish (a ResNet-50 bs1024 batch takes seconds when slowed).
    let deadline = Instant::now() + Duration::from_secs(180);
    while eof.iter().any(|e| !e) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(m) => {
                let _ = handle(m, &mut reqs, &mut eof);
            }
            Err(_) => break,
        }
    }
    for (i, p) in procs.iter_mut().enumerate() {
        let status = p.child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(fail(&procs, i, &format!("ended with {status}")));
        }
    }
    if setup.progress {
        eprintln!();
    }
    let mut streams = Vec::new();
    for (pi, p) in processes.iter().enumerate() {
        let table = &setup.tables[&p.model].1;
        for (si, s) in p.streams.iter().enumerate() {
            let (requests, decoded) = std::mem::take(&mut reqs[pi][si]);
            streams.push(StreamResult {
                process: pi,
                stream: si,
                role: s.role,
                model: p.model.clone(),
                items: table.items,
                unit: table.unit.clone(),
                requests,
                decoded,
            });
        }
    }
    let from = setup.warmup_s / scale;
    let to = (setup.warmup_s + setup.seconds) / scale;
    write_token_times(&dir.join("tokens.tsv"), &streams, go_unix_s, scale);
    let _ = std::fs::remove_dir_all(&dev);
    let _ = std::fs::remove_dir_all(&board);
    Ok((PhaseResult { streams, seconds: to }, from, to))
}

/// An LLM server's token times, for lining its slow decode steps up with the processes' logs
/// (kept with `--keep-logs`): one line per token, its end in Unix seconds of wall-clock time
/// (the logs' timestamps are UTC) and its own time in device milliseconds (TTFT for the first
/// token). Nothing is written without LLM requests; a write error only loses the file.
fn write_token_times(path: &Path, streams: &[StreamResult], go_unix_s: f64, scale: f64) {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (si, s) in streams.iter().enumerate() {
        for (ri, r) in s.decoded.iter().enumerate() {
            let wall = |dev_s: f64| go_unix_s + dev_s * scale;
            let _ = writeln!(
                out,
                "{si}\t{ri}\t0\t{:.6}\t{:.3}",
                wall(r.first),
                (r.first - r.arrival) * 1e3
            );
            let starts = std::iter::once(r.first).chain(r.steps.iter().copied());
            for (k, (a, b)) in starts.zip(r.steps.iter().copied()).enumerate() {
                let _ =
                    writeln!(out, "{si}\t{ri}\t{}\t{:.6}\t{:.3}", k + 1, wall(b), (b - a) * 1e3);
            }
        }
    }
    if !out.is_empty() {
        let head = "# stream\trequest\ttoken (0: the first, its TTFT)\tend (Unix s, wall clock)\tdevice ms\n";
        let _ = std::fs::write(path, format!("{head}{out}"));
    }
}

/// Where a run's board directories go: under `/dev/shm`, libxhsa's default (a tmpfs, so the
/// board's pages are never written back to a disk), unless the processes run in containers,
/// which each mount a /dev/shm of their own and share the board as a volume of the host's
/// (`work_dir`, as `docker run -v` would), or the host has no /dev/shm.
pub fn board_base(work_dir: &Path, containers: bool, run: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if containers || !shm.is_dir() {
        work_dir.to_path_buf()
    } else {
        shm.join(run)
    }
}

fn set_private(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// FNV-1a of the given byte strings: the cache key of a workload build.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Builds the workload program with hipcc into `out_dir` (cached by the sources' hash and the
/// ROCm) and returns its path: the host's hipcc for gfx90a, or with `root` (the `xhsa-emu`
/// launcher and a ROCm version) that root's hipcc for gfx942 (`xhsa-emu run --rocm V -- hipcc`).
pub fn build_workload(
    workloads: &Path,
    kernels_dir: &Path,
    out_dir: &Path,
    root: Option<(&Path, &str)>,
) -> Result<PathBuf, String> {
    let src = workloads.join("workload.hip");
    let inc = kernels_dir.join("xhsa_kernels.hip");
    let a = std::fs::read(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    let b = std::fs::read(&inc).map_err(|e| format!("{}: {e}", inc.display()))?;
    let tag = root.map_or(String::new(), |(_, v)| format!("rocm{}-", v.replace('.', "")));
    let bin = out_dir.join(format!("workload-{tag}{:016x}", fnv1a(&[&a, &b])));
    if bin.exists() {
        return Ok(bin);
    }
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let arch = if root.is_some() { "gfx942" } else { "gfx90a" };
    eprintln!(
        "xhsa-bench: building {} with hipcc --offload-arch={arch}{}",
        src.display(),
        root.map_or(String::new(), |(_, v)| format!(" (ROCm {v})"))
    );
    let tmp = out_dir.join(format!("workload.tmp{}", std::process::id()));
    let mut cmd = match root {
        Some((emu, v)) => {
            let mut c = Command::new(emu);
            c.args(["run", "--rocm", v, "--bind"])
                .arg(workloads)
                .arg("--bind")
                .arg(kernels_dir)
                .arg("--bind")
                .arg(out_dir)
                .args(["--", "hipcc"]);
            c
        }
        None => Command::new("hipcc"),
    };
    let out = cmd
        .args([format!("--offload-arch={arch}").as_str(), "-O2", "-w", "-std=c++17", "-pthread"])
        .arg("-I")
        .arg(kernels_dir)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| {
            format!("cannot run hipcc: {e} (install hipcc, see tools/debian-packages.txt)")
        })?;
    if !out.status.success() {
        return Err(format!(
            "hipcc failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::rename(&tmp, &bin).map_err(|e| e.to_string())?;
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scenario::Role;

    fn stream(role: Role, priority: Priority) -> Stream {
        Stream { role, rate: Some(20.0), priority }
    }

    #[test]
    fn boards_go_to_dev_shm_unless_the_processes_run_in_containers() {
        let work = Path::new("/tmp/xhsa-bench-7");
        assert_eq!(board_base(work, true, "xhsa-bench-7"), work);
        if Path::new("/dev/shm").is_dir() {
            assert_eq!(board_base(work, false, "xhsa-bench-7"), Path::new("/dev/shm/xhsa-bench-7"));
        }
    }

    #[test]
    fn xhsa_mode_gives_each_process_its_priority() {
        let lib = Path::new("/x/libxhsa.so");
        let board = Path::new("/tmp/b");
        let hp = Process {
            model: "m".into(),
            streams: vec![stream(Role::Hp, Priority::High)],
            decode: None,
        };
        assert!(Mode::Native.env(&hp, Some(lib), Load::Preload, board).is_empty());
        let env = Mode::Xhsa.env(&hp, Some(lib), Load::Preload, board);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("LD_PRELOAD"), Some("/x/libxhsa.so"));
        assert_eq!(get("XHSA_BOARD_DIR"), Some("/tmp/b"));
        assert_eq!(get("XHSA_PRIORITY"), Some("10"));
        assert_eq!(
            Mode::Xhsa.stream_arg(&hp, &hp.streams[0]),
            "hp:20",
            "one class: a plain stream"
        );
        // Mixed classes in one process: no process level, HIP stream priorities instead.
        let mixed = Process {
            model: "m".into(),
            streams: vec![stream(Role::Hp, Priority::High), stream(Role::Lp, Priority::Low)],
            decode: None,
        };
        let env = Mode::Xhsa.env(&mixed, Some(lib), Load::ToolsLib, board);
        assert!(!env.iter().any(|(k, _)| k == "XHSA_PRIORITY"));
        assert!(
            env.iter().any(|(k, v)| k == "HSA_TOOLS_LIB" && v == "/x/libxhsa.so")
                && !env.iter().any(|(k, _)| k == "LD_PRELOAD")
        );
        assert_eq!(Mode::Xhsa.stream_arg(&mixed, &mixed.streams[0]), "hp:20:high");
        assert_eq!(Mode::Xhsa.stream_arg(&mixed, &mixed.streams[1]), "lp:20:low");
        assert_eq!(
            Mode::Native.stream_arg(&mixed, &mixed.streams[1]),
            "lp:20",
            "native streams are plain, as PyTorch's"
        );
        assert!(
            xhsa_level(Priority::High) > xhsa_level(Priority::Normal)
                && xhsa_level(Priority::Normal) > xhsa_level(Priority::Low)
        );
    }

    #[test]
    fn request_lines_carry_an_llm_servers_token_times() {
        // Time scale 10, "go" at 1 s of host time: device seconds = (t - 1e9) / 1e9 / 10.
        let dev_s = |t: u64| t.saturating_sub(1_000_000_000) as f64 / 1e9 / 10.0;
        let plain: Line =
            serde_json::from_str(r#"{"ev":"req","stream":0,"t0":2000000000,"t1":2500000000}"#)
                .unwrap();
        assert_eq!(request_times(&plain, dev_s), Some(((0.1, 0.15), None)));
        let llm: Line = serde_json::from_str(
            r#"{"ev":"req","stream":0,"t0":2000000000,"t1":3000000000,"arrival":1900000000,"first":2400000000,"steps":[2700000000,3000000000]}"#,
        )
        .unwrap();
        let (t, d) = request_times(&llm, dev_s).unwrap();
        assert_eq!(t, (0.1, 0.2));
        let d = d.unwrap();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(near(d.arrival, 0.09) && near(d.first, 0.14), "{d:?}");
        assert!(d.steps.len() == 2 && near(d.steps[0], 0.17) && near(d.steps[1], 0.2), "{d:?}");
        let partial: Line = serde_json::from_str(r#"{"ev":"req","stream":0,"t0":5}"#).unwrap();
        assert_eq!(request_times(&partial, dev_s), None);
    }

    #[test]
    fn an_llm_server_gets_its_step_table_and_steps() {
        let table =
            |m: &str| Table { model: m.into(), items: 1, unit: "req".into(), kernels: vec![] };
        let tables: HashMap<String, (PathBuf, Table)> = ["pre", "step", "train"]
            .map(|m| (m.to_string(), (PathBuf::from(format!("/t/{m}.kernels")), table(m))))
            .into();
        let server = Process {
            model: "pre".into(),
            streams: vec![stream(Role::Hp, Priority::High)],
            decode: Some(crate::scenario::Decode { step_model: "step".into(), steps: 3 }),
        };
        assert_eq!(server.models().collect::<Vec<_>>(), ["pre", "step"]);
        let args = |p: &Process| -> Vec<String> {
            workload_args(p, &tables, 20.0, Mode::Native)
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            args(&server),
            [
                "--table",
                "/t/pre.kernels",
                "--time-scale",
                "20",
                "--step-table",
                "/t/step.kernels",
                "--steps",
                "3",
                "--null-stream",
                "--stream",
                "hp:20",
            ]
        );
        let trainer = Process {
            model: "train".into(),
            streams: vec![Stream { role: Role::Lp, rate: None, priority: Priority::Low }],
            decode: None,
        };
        assert_eq!(
            args(&trainer),
            [
                "--table",
                "/t/train.kernels",
                "--time-scale",
                "20",
                "--null-stream",
                "--stream",
                "lp:0"
            ]
        );
    }

    #[test]
    fn fnv_changes_with_any_part() {
        assert_ne!(fnv1a(&[b"a", b"b"]), fnv1a(&[b"ab", b""]));
        assert_eq!(fnv1a(&[b"x"]), fnv1a(&[b"x"]));
    }
}
