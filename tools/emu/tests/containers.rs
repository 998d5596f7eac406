//! Two "containers" on one emulated GPU: each process runs under `xhsa-emu run` in its own PID,
//! IPC and mount namespaces (`unshare --pid --fork --mount-proc --ipc --mount`, as Docker gives
//! a container) with its own tmpfs on `/dev/shm`, sharing only the device directory, as two
//! containers that mount the same directory do. In both, the launcher is pid 1 and the
//! workload pid 2: the device must tell them apart by their connections, not their pids.
//!
//! A starts first, so the device process is started from A's namespace. B starts a kernel of
//! two rounds; A exits in the middle of it, which ends A's PID namespace and every process in
//! it, the device included (as when a container ends). B's kernel must still complete and B
//! must go on running kernels on new queues: B's connection moves to a successor device and
//! restores B's queues and outstanding kernels there.
//!
//! Needs root and util-linux `unshare`; without them the test fails, saying so. The workloads
//! are this test binary run again (`child`), issuing KFD ioctls with `xhsa_ioctl::Kfd` on a
//! raw AQL queue in their own memory (as `kfd_ioctl.rs` does); the kernel is a lone
//! `s_endpgm` that runs for the configured default workgroup time.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xhsa_emu::shared::client;
use xhsa_ioctl::Kfd;

#[path = "support/raw_queue.rs"]
mod raw_queue;
#[path = "../../../tests/common/wait.rs"]
mod wait;
use raw_queue::Queue;

const BIN: &str = env!("CARGO_BIN_EXE_xhsa-emu");
const ROLE: &str = "XHSA_EMU_CONTAINER_ROLE";
const SYNC: &str = "XHSA_EMU_CONTAINER_SYNC";
/// One workgroup's run time of the test kernel (the config's default workgroup time).
const WG_MS: u64 = 300;
/// Workgroups of 4 waves that fill the 80 CUs once (32 wave slots per CU).
const ROUND: u32 = 640;

// ---------------------------------------------------------------------------------------------
// The parent side.

/// `target/<profile>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// A process in its own namespaces, its standard output read line by line.
struct Container {
    name: &'static str,
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Container {
    /// Runs this test binary's `child` as `role` under `xhsa-emu run` in new PID, IPC and mount
    /// namespaces with a private `/dev/shm`.
    fn start(name: &'static str, dir: &Path) -> Container {
        let script = "mount -t tmpfs tmpfs /dev/shm && exec \"$@\"";
        let test = std::env::current_exe().unwrap();
        let mut c = Command::new("unshare");
        c.args([
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--ipc",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(BIN)
        .args(["run", "--config"])
        .arg(dir.join("emu.toml"))
        .arg("--")
        .arg(&test)
        .args(["child", "--exact", "--nocapture", "--test-threads", "1"])
        .env(ROLE, name)
        .env(SYNC, dir)
        .env("XHSA_EMU_BIN", BIN)
        .env("XHSA_EMU_DEVICE_DIR", dir.join("device"))
        .env("XHSA_EMU_LOG", "warn")
        .env_remove("LD_PRELOAD")
        .env_remove("XHSA_EMU_GPUS")
        .env_remove("XHSA_EMU_TIME_SCALE")
        .env_remove("XHSA_EMU_FAULT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn unshare");
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let stderr = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
        Container { name, child, lines, seen: Vec::new(), stderr }
    }

    /// The first line satisfying `pred` within `limit`.
    fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            let left = limit.saturating_sub(t0.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return Ok(l);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("{}: no {what} within {limit:?}", self.name))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!("{}: exited before {what}", self.name))
                }
            }
        }
    }

    /// The value of a `KEY=VALUE` word seen so far.
    fn value(&self, key: &str) -> Option<String> {
        value(&self.seen.join("\n"), key)
    }

    /// Waits for the exit within `limit` (killing the namespace after it), and returns whether
    /// it succeeded, with a report.
    fn finish(mut self, limit: Duration) -> (bool, String) {
        let status = wait::wait_until(limit, || self.child.try_wait().unwrap());
        if status.is_none() {
            // unshare --kill-child takes the namespace's init with it.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.seen.extend(self.lines.try_iter());
        let err = self.stderr.join().unwrap_or_default();
        let head = match status {
            Some(s) => format!("exited: {s}"),
            None => format!("HUNG: still running after {limit:?}, killed"),
        };
        let ok = status.is_some_and(|s| s.success());
        (
            ok,
            format!(
                "=== {} {head}\n--- stdout\n{}\n--- stderr\n{err}",
                self.name,
                self.seen.join("\n")
            ),
        )
    }
}

/// The value of the first `KEY=VALUE` word of `text` (libtest prints `test child ... ` before
/// the child's first line).
fn value(text: &str, key: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')).map(String::from))
}

#[test]
fn two_containers_with_the_same_pids_share_one_device_and_one_leaving_does_not_disturb_the_other() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test makes PID, IPC and mount namespaces and mounts a tmpfs: it must run as root"
    );
    let v = Command::new("unshare").arg("--version").output();
    assert!(
        v.as_ref().is_ok_and(|o| o.status.success()),
        "util-linux `unshare` is needed (apt-get install util-linux): {v:?}"
    );
    let thunk = target_dir().join("libhsakmt.so");
    assert!(thunk.exists(), "{} is missing: build it first: cargo build --release -p xhsa-emu-thunk (or any workspace build)", thunk.display());

    let dir = std::env::temp_dir().join(format!("xhsa-emu-containers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("emu.toml"),
        format!("[timing]\ndefault_wg_ns = {}\n", WG_MS * 1_000_000),
    )
    .unwrap();
    let t0 = Instant::now();

    let mut a = Container::start("A", &dir);
    if let Err(e) = a.wait_for("A_READY", Duration::from_secs(20), |l| l == "A_READY") {
        panic!("{e}\n{}", a.finish(Duration::ZERO).1);
    }
    let mut b = Container::start("B", &dir);
    if let Err(e) = b.wait_for("B_RUNNING", Duration::from_secs(20), |l| l == "B_RUNNING") {
        std::fs::write(dir.join("a-go"), b"").unwrap();
        panic!("{e}\n{}\n{}", b.finish(Duration::ZERO).1, a.finish(Duration::from_secs(5)).1);
    }
    // Both connected: what the device sees.
    let both = client::status(&dir.join("device")).unwrap_or_else(|e| format!("(no status: {e})"));
    // A leaves while B's kernel runs.
    std::fs::write(dir.join("a-go"), b"").unwrap();
    let (a_ok, a_report) = a.finish(Duration::from_secs(10));
    let left_at = t0.elapsed();
    let b_done = b.wait_for("B_DONE", Duration::from_secs(20), |l| l == "B_DONE");
    let (b_pid, b_ns) = (b.value("PID"), b.value("PIDNS"));
    let (b_ok, b_report) = b.finish(Duration::from_secs(5));
    let report = format!("{a_report}\n{b_report}\n=== device status while both ran\n{both}");
    eprintln!("{report}\nA left at {left_at:?}, all done at {:?}", t0.elapsed());

    assert!(a_ok, "A failed\n{report}");
    let (a_pid, a_ns) = (value(&a_report, "PID"), value(&a_report, "PIDNS"));
    assert!(a_pid.is_some() && a_pid == b_pid, "both workloads should have the same pid in their own namespaces: A {a_pid:?}, B {b_pid:?}\n{report}");
    assert!(
        a_ns.is_some() && b_ns.is_some() && a_ns != b_ns,
        "the workloads should be in different PID namespaces: A {a_ns:?}, B {b_ns:?}\n{report}"
    );
    assert!(
        b_done.is_ok() && b_ok,
        "B must finish its kernel and go on after A left: {:?}\n{report}",
        b_done.err()
    );
    // The device saw two processes, told apart although their pids are equal.
    let procs: Vec<&str> =
        both.lines().filter(|l| l.trim_start().starts_with("process ")).collect();
    assert!(
        both.contains("processes: 2") && procs.len() == 2,
        "the device should list two processes\n{both}"
    );
    let pid = a_pid.unwrap();
    for (ns, who) in [(a_ns.unwrap(), "A"), (b_ns.unwrap(), "B")] {
        assert!(
            procs.iter().any(|l| l.contains(&format!("process {pid} in pid namespace {ns} "))),
            "{who} (pid {pid}, pid namespace {ns}) not listed\n{both}"
        );
    }
    // The device was A's (started from A's namespace) and ended with it; B moved on.
    assert!(
        b_report.contains("moved to a successor shared device"),
        "B should have moved to a successor device\n{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// The child side.

/// The entry the parent runs in each container (does nothing in an ordinary test run).
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let sync = PathBuf::from(std::env::var_os(SYNC).expect(SYNC));
    println!("PID={}", std::process::id());
    println!("PIDNS={}", std::fs::metadata("/proc/self/ns/pid").expect("/proc/self/ns/pid").ino());
    let kfd = Kfd::open().expect("open /dev/kfd (the emulated KFD)");
    assert_eq!(kfd.get_version().unwrap().minor_version, 17);
    match role.as_str() {
        "A" => {
            run_kernel(&kfd, 80, "A's kernel");
            println!("A_READY");
            wait_for_file(&sync.join("a-go"));
        }
        "B" => {
            // Two rounds of the CUs: A leaves during the first.
            let q = Queue::create(&kfd, 2 * ROUND);
            println!("B_RUNNING");
            q.wait("B's kernel begun before A left");
            kfd.destroy_queue(q.id).expect("DESTROY_QUEUE");
            for i in 0..3 {
                run_kernel(&kfd, 80, &format!("B's kernel {i} after A left"));
            }
            // The launcher's runtime directory is still B's (rocminfo runs its `lsmod`).
            let lsmod = Command::new("lsmod").output().expect("run lsmod");
            assert!(
                String::from_utf8_lossy(&lsmod.stdout).contains("amdgpu"),
                "lsmod of B's runtime directory: {lsmod:?}"
            );
            println!("B_DONE");
        }
        other => panic!("unknown role {other}"),
    }
}

fn wait_for_file(f: &Path) {
    let appeared = wait::holds_within(Duration::from_secs(30), || f.exists());
    assert!(appeared, "{} never appeared", f.display());
}

/// A queue holding one dispatch of `workgroups` workgroups: waits for it, destroys the queue.
fn run_kernel(kfd: &Kfd, workgroups: u32, what: &str) {
    let q = Queue::create(kfd, workgroups);
    q.wait(what);
    kfd.destroy_queue(q.id).expect("DESTROY_QUEUE");
}
