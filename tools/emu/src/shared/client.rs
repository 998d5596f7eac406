//! A process's side of the shared device: the control connection (one per GPU), started on
//! demand, and [`RemoteScheduler`], through which the process's packet processor hands kernels
//! to the device's HWS and receives their completions.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::paths;
use super::protocol::Line;
use super::shm::{ClientArea, DeviceArea, JobEntry, Shared};
use crate::cp::clock::Clock;
use crate::device::{Completion, KernelJob, QueueKey, Scheduler};
use crate::sys::futex;

/// How long to wait for a device process that was just started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The control connection of this process to one GPU of the shared device.
pub struct Connection {
    io: Mutex<(BufReader<UnixStream>, UnixStream)>,
    pub client: u64,
    pub clock: Clock,
    /// This client's shared area (its wake word and rings); lives as long as the process.
    pub area: &'static Shared<ClientArea>,
    device: Shared<DeviceArea>,
}

/// An error reply: the errno KFD would return, and the device's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub errno: i32,
    pub message: String,
}

impl Connection {
    /// Connects this process to GPU `gpu` of the shared device, starting the device process if
    /// none serves the device directory.
    pub fn open(gpu: u32) -> io::Result<Connection> {
        let dir = paths::device_dir()?;
        let stream = connect_or_start(&dir)?;
        let mut w = stream.try_clone()?;
        let mut r = BufReader::new(stream);
        writeln!(w, "HELLO pid={} gpu={gpu}", std::process::id())?;
        let mut line = String::new();
        r.read_line(&mut line)?;
        let l = Line::parse(&line).filter(|l| l.verb == "OK").ok_or_else(|| io::Error::other(format!("shared device refused: {}", line.trim())))?;
        let field = |k: &str| l.args.get(k).cloned().ok_or_else(|| io::Error::other(format!("shared device reply lacks {k}: {}", line.trim())));
        let clock = Clock {
            base_mono: field("base_mono")?.parse().map_err(io::Error::other)?,
            base_dev: field("base_dev")?.parse().map_err(io::Error::other)?,
            scale: field("scale")?.parse().map_err(io::Error::other)?,
        };
        let area: Shared<ClientArea> = Shared::map(Path::new(&field("area")?), false)?;
        if !area.get().valid() {
            return Err(io::Error::other(
                "shared device area has the wrong layout or protocol version (a device process from another xhsa-emu build serves this directory: let it exit, or use the same build everywhere)",
            ));
        }
        let device = Shared::map(&paths::device_area(&dir), false)?;
        let client = field("client")?.parse().map_err(io::Error::other)?;
        Ok(Connection { io: Mutex::new((r, w)), client, clock, area: Box::leak(Box::new(area)), device })
    }

    /// Sends one control request and returns the device's `OK` reply.
    pub fn request(&self, req: &str) -> Result<Line, Refused> {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        let (r, w) = &mut *io;
        let lost = |e: io::Error| Refused { errno: libc::EIO, message: format!("shared device connection lost: {e}") };
        writeln!(w, "{req}").map_err(lost)?;
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => return Err(lost(io::ErrorKind::UnexpectedEof.into())),
            Err(e) => return Err(lost(e)),
            Ok(_) => {}
        }
        let l = Line::parse(&line).ok_or_else(|| Refused { errno: libc::EIO, message: "empty reply".into() })?;
        if l.verb == "OK" {
            Ok(l)
        } else {
            Err(Refused { errno: l.get("errno").unwrap_or(libc::EIO), message: line.trim().to_string() })
        }
    }

    /// Wakes the device's scheduler thread.
    pub fn wake_device(&self) {
        let w = &self.device.get().wake;
        w.fetch_add(1, Ordering::Release);
        futex::wake_all(w);
    }
}

/// Asks the shared device in `dir` for its status text (`xhsa-emu status`).
pub fn status(dir: &Path) -> io::Result<String> {
    let s = UnixStream::connect(paths::socket(dir))?;
    let mut w = s.try_clone()?;
    writeln!(w, "STATUS")?;
    let mut out = String::new();
    for line in BufReader::new(s).lines() {
        let line = line?;
        if line == "END" {
            break;
        }
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

fn connect_or_start(dir: &Path) -> io::Result<UnixStream> {
    let sock = paths::socket(dir);
    if let Ok(s) = UnixStream::connect(&sock) {
        return Ok(s);
    }
    // One starter at a time: others wait on the lock, then find the device running.
    let lock = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(dir.join("start.lock"))?;
    // SAFETY: flock on a descriptor we own; released when `lock` is closed.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    if let Ok(s) = UnixStream::connect(&sock) {
        return Ok(s);
    }
    let bin = device_binary()?;
    let log = OpenOptions::new().create(true).append(true).mode(0o600).open(paths::log(dir))?;
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("device").arg("--dir").arg(dir).env_remove("LD_PRELOAD").stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: setsid is async-signal-safe; the device outlives its starter's session.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| io::Error::other(format!("cannot start the shared device {}: {e}", bin.display())))?;
    let start = Instant::now();
    loop {
        if let Ok(s) = UnixStream::connect(&sock) {
            // The device is a daemon: reap it in the background so it never lingers as a zombie.
            std::thread::spawn(move || child.wait());
            return Ok(s);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(io::Error::other(format!("the shared device exited at start ({status}); see {}", paths::log(dir).display())));
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(io::Error::other(format!("the shared device did not start within {START_TIMEOUT:?}; see {}", paths::log(dir).display())));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `xhsa-emu` binary that runs the device: `$XHSA_EMU_BIN`, else beside the library or
/// executable this code is part of.
fn device_binary() -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os("XHSA_EMU_BIN") {
        return Ok(PathBuf::from(p));
    }
    // SAFETY: Dl_info is plain data; all-zero is a valid value for dladdr to overwrite.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address inside a loaded object (this function).
    let found = unsafe { libc::dladdr(device_binary as *const () as *const libc::c_void, &mut info) } != 0 && !info.dli_fname.is_null();
    let me = if found {
        // SAFETY: dli_fname is a NUL-terminated path owned by the dynamic linker.
        PathBuf::from(unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
    } else {
        std::env::current_exe()?
    };
    let me = std::fs::canonicalize(&me).unwrap_or(me);
    let bin = me.parent().map(|d| d.join("xhsa-emu")).ok_or_else(|| io::Error::other("cannot locate xhsa-emu"))?;
    if bin.exists() {
        Ok(bin)
    } else {
        Err(io::Error::other(format!("{} not found; set XHSA_EMU_BIN to the xhsa-emu binary", bin.display())))
    }
}

/// The device's HWS seen from a process: kernels go out through the shared ring, completions
/// come back through it. Queue management travels over the control connection instead (see
/// `kfd`), so those calls are no-ops here.
pub struct RemoteScheduler {
    conn: Arc<Connection>,
    ready: VecDeque<Completion>,
}

impl RemoteScheduler {
    pub fn new(conn: Arc<Connection>) -> Self {
        RemoteScheduler { conn, ready: VecDeque::new() }
    }
}

impl Scheduler for RemoteScheduler {
    fn add_queue(&mut self, _key: QueueKey, _priority: u8) {}
    fn remove_queue(&mut self, _key: QueueKey) {}
    fn set_runnable(&mut self, _key: QueueKey, _runnable: bool) {}

    fn submit(&mut self, key: QueueKey, job: KernelJob, now: u64) {
        let e = JobEntry {
            key,
            waves: job.need.waves,
            lds: job.need.lds,
            _pad: 0,
            tag: job.tag,
            workgroups: job.workgroups,
            wg_ns: job.wg_ns,
            submit_ns: now,
            util_micro: (f64::from(job.profile.cu_util.clamp(0.0, 1.0)) * 1e6).round() as u32,
            _pad2: 0,
            hbm_bytes: job.profile.hbm_bytes,
        };
        let mut waited = Duration::ZERO;
        while !self.conn.area.get().post_job(e) {
            // The device drains the ring whenever it runs; give it the CPU.
            self.conn.wake_device();
            std::thread::sleep(Duration::from_micros(100));
            waited += Duration::from_micros(100);
            if waited == Duration::from_secs(5) {
                tracing::error!("xhsa-emu: the shared device has not taken a kernel for 5 s; is the device process alive?");
            }
        }
        self.conn.wake_device();
    }

    fn step(&mut self, _now: u64) -> Option<(u64, Vec<Completion>)> {
        // The device posts a completion only once device time has reached it.
        while let Some(d) = self.conn.area.get().take_done() {
            self.ready.push_back(Completion { queue: d.key, tag: d.tag, start_ns: d.start_ns, end_ns: d.end_ns });
        }
        let t = self.ready.front()?.end_ns;
        let mut group = Vec::new();
        while self.ready.front().is_some_and(|c| c.end_ns == t) {
            group.push(self.ready.pop_front().expect("front exists"));
        }
        Some((t, group))
    }

    fn sync(&mut self, _now: u64) {}

    fn next_event(&self) -> Option<u64> {
        None
    }
}
