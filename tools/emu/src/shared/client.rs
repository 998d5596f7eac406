//! A process's side of the shared device: the control connection (one per GPU), started on
//! demand, and [`RemoteScheduler`], through which the process's packet processor hands kernels
//! to the device's HWS and receives their completions.
//!
//! The device may go away while the process runs: a device started inside a container dies
//! with that container's PID namespace when the container ends, whoever else uses it. The
//! connection then starts (or finds) a successor, continuing device time, and restores the
//! process onto it: its shared area (which the process owns), its queues with their
//! priority, percentage, suspension and CU mask, and (through the epoch) the kernels it had
//! posted and not seen complete, which the packet processor posts again.

use std::collections::{BTreeMap, VecDeque};
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use super::paths;
use super::protocol::Line;
use super::shm::{ClientArea, DeviceArea, JobEntry, Shared};
use crate::cp::clock::Clock;
use crate::device::{Completion, KernelJob, QueueKey, Scheduler};
use crate::sys::{futex, sock};

/// How long to wait for a device process that was just started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Queue keys of this process, unique across its connections.
static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

/// The control connection of this process to one GPU of the shared device.
pub struct Connection {
    gpu: u32,
    dir: PathBuf,
    link: Mutex<Link>,
    pub clock: Clock,
    /// This client's shared area (its wake word and rings): the process's own, passed to every
    /// device it connects to; lives as long as the process.
    pub area: &'static Shared<ClientArea>,
    area_fd: OwnedFd,
    /// The device's area (its wake word), replaced when the connection moves to a successor.
    device: RwLock<Arc<Shared<DeviceArea>>>,
    /// The epoch job entries are posted with; raised each time the connection is restored.
    epoch: AtomicU32,
    /// Closing it (when the connection is dropped) stops the watcher thread.
    _stop: OwnedFd,
}

/// The socket and what a successor device must be told to restore this client.
struct Link {
    r: BufReader<UnixStream>,
    w: UnixStream,
    client: u64,
    /// Incremented by each restore.
    generation: u64,
    queues: BTreeMap<QueueKey, QueueState>,
}

/// A queue as the device last acknowledged it.
#[derive(Clone, Debug, Default)]
struct QueueState {
    prio: u32,
    pct: u32,
    susp: bool,
    /// `bits=N words=..` of the last CU mask.
    mask: Option<String>,
}

/// An error reply: the errno KFD would return, and the device's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub errno: i32,
    pub message: String,
}

/// The inode of this process's PID namespace (0 if `/proc` does not say), which tells apart
/// processes of different containers that have the same pid.
fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// HELLO on a new connection: sends this client's area, returns the reader, the writer, the
/// client id, the device's clock and its area.
type Hello = (BufReader<UnixStream>, UnixStream, u64, Clock, Shared<DeviceArea>);

fn hello(stream: UnixStream, gpu: u32, epoch: u32, area: &OwnedFd) -> io::Result<Hello> {
    let line = format!(
        "HELLO pid={} pidns={} gpu={gpu} epoch={epoch}\n",
        std::process::id(),
        pid_namespace()
    );
    sock::send_with_fds(&stream, line.as_bytes(), &[area.as_fd()])?;
    let (line, mut fds) = sock::recv_line_with_fds(&stream)?;
    let l = Line::parse(&line)
        .filter(|l| l.verb == "OK")
        .ok_or_else(|| io::Error::other(format!("shared device refused: {}", line.trim())))?;
    let field = |k: &str| {
        l.args.get(k).cloned().ok_or_else(|| {
            io::Error::other(format!("shared device reply lacks {k}: {}", line.trim()))
        })
    };
    let clock = Clock {
        base_mono: field("base_mono")?.parse().map_err(io::Error::other)?,
        base_dev: field("base_dev")?.parse().map_err(io::Error::other)?,
        scale: field("scale")?.parse().map_err(io::Error::other)?,
    };
    let client = field("client")?.parse().map_err(io::Error::other)?;
    let fd = fds.pop().ok_or_else(|| io::Error::other("shared device reply lacks its area"))?;
    let device = Shared::map(&fd)?;
    let w = stream.try_clone()?;
    Ok((BufReader::new(stream), w, client, clock, device))
}

/// One request and its reply line; `Err` when the connection is lost.
fn exchange(link: &mut Link, req: &str) -> io::Result<Result<Line, Refused>> {
    writeln!(link.w, "{req}")?;
    let mut line = String::new();
    if link.r.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let Some(l) = Line::parse(&line) else {
        return Ok(Err(Refused { errno: libc::EIO, message: "empty reply".into() }));
    };
    Ok(if l.verb == "OK" {
        Ok(l)
    } else {
        Err(Refused {
            errno: l.get("errno").unwrap_or(libc::EIO),
            message: line.trim().to_string(),
        })
    })
}

impl Connection {
    /// Connects this process to GPU `gpu` of the shared device, starting the device process if
    /// none serves the device directory.
    pub fn open(gpu: u32) -> io::Result<Arc<Connection>> {
        let dir = paths::device_dir()?;
        let (area, area_fd) = Shared::<ClientArea>::create(c"xhsa-emu-client")?;
        area.get().init();
        let stream = connect_or_start(&dir, None)?;
        let (r, w, client, clock, device) = hello(stream, gpu, 1, &area_fd).map_err(|e| {
            if e.to_string().contains("layout or protocol version") {
                io::Error::other(format!("{e} (a device process from another xhsa-emu build serves this directory: let it exit, or use the same build everywhere)"))
            } else {
                e
            }
        })?;
        let (stop_r, stop_w) = sock::pipe()?;
        let conn = Arc::new(Connection {
            gpu,
            dir,
            link: Mutex::new(Link { r, w, client, generation: 0, queues: BTreeMap::new() }),
            clock,
            area: Box::leak(Box::new(area)),
            area_fd,
            device: RwLock::new(Arc::new(device)),
            epoch: AtomicU32::new(1),
            _stop: stop_w,
        });
        let weak = Arc::downgrade(&conn);
        std::thread::Builder::new()
            .name("xhsa-emu-devwatch".into())
            .spawn(move || watch(&weak, &stop_r))?;
        Ok(conn)
    }

    fn lock(&self) -> MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This connection's client id on the device it is connected to now.
    pub fn client(&self) -> u64 {
        self.lock().client
    }

    /// The epoch job entries are posted with now.
    pub fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Sends one control request and returns the device's `OK` reply. A `CREATE` without
    /// `key=` gets a new key of this process. If the device has gone away, the connection is
    /// restored on a successor first and the request sent there.
    pub fn request(&self, req: &str) -> Result<Line, Refused> {
        let mut req = req.to_string();
        if req.starts_with("CREATE ") && !req.contains(" key=") {
            req.push_str(&format!(" key={}", NEXT_KEY.fetch_add(1, Ordering::Relaxed)));
        }
        let lost = |e: io::Error| Refused {
            errno: libc::EIO,
            message: format!("shared device connection lost: {e}"),
        };
        let mut link = self.lock();
        let reply = match exchange(&mut link, &req) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(
                    "xhsa-emu: the shared device went away ({e}); moving to a successor"
                );
                self.restore(&mut link).map_err(lost)?;
                exchange(&mut link, &req).map_err(lost)?
            }
        };
        if let (Ok(l), Some(parsed)) = (&reply, Line::parse(&req)) {
            track(&mut link.queues, &parsed, l);
        }
        reply
    }

    /// Moves this client to a successor of the device that went away: starts one (continuing
    /// device time) unless another process already has, announces the next epoch, re-creates
    /// every queue as it was, then lets the packet processor post its outstanding kernels
    /// again (it sees the new epoch when woken).
    fn restore(&self, link: &mut Link) -> io::Result<()> {
        let stream = connect_or_start(&self.dir, Some(self.clock))?;
        let epoch = self.epoch() + 1;
        let (r, w, client, clock, device) = hello(stream, self.gpu, epoch, &self.area_fd)?;
        if clock.base_mono != self.clock.base_mono || clock.base_dev != self.clock.base_dev {
            tracing::warn!("xhsa-emu: the successor device keeps another device time (started afresh by another process); this process's timestamps may jump");
        }
        link.r = r;
        link.w = w;
        link.client = client;
        link.generation += 1;
        let queues: Vec<(QueueKey, QueueState)> =
            link.queues.iter().map(|(k, q)| (*k, q.clone())).collect();
        for (key, q) in &queues {
            let mask = q.mask.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            let req = format!(
                "CREATE key={key} gpu={} prio={} pct={} susp={}{mask}",
                self.gpu,
                q.prio,
                q.pct,
                u8::from(q.susp)
            );
            if let Err(e) = exchange(link, &req)? {
                tracing::error!(
                    "xhsa-emu: queue {key} could not be restored on the successor device: {}",
                    e.message
                );
            }
        }
        *self.device.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(device);
        self.epoch.store(epoch, Ordering::Release);
        tracing::warn!(
            client,
            queues = queues.len(),
            "xhsa-emu: moved to a successor shared device; queues restored"
        );
        let w = &self.area.get().wake;
        w.fetch_add(1, Ordering::Release);
        futex::wake_all(w);
        Ok(())
    }

    /// Wakes the device's scheduler thread.
    pub fn wake_device(&self) {
        let d = self.device.read().unwrap_or_else(|p| p.into_inner()).clone();
        let w = &d.get().wake;
        w.fetch_add(1, Ordering::Release);
        futex::wake_all(w);
    }
}

/// Records what an acknowledged request did to this client's queues, for a restore.
fn track(queues: &mut BTreeMap<QueueKey, QueueState>, req: &Line, reply: &Line) {
    let key = req.get::<QueueKey>("key");
    match req.verb.as_str() {
        "CREATE" => {
            if let Some(k) = reply.get::<QueueKey>("key") {
                let mask = req.args.get("bits").map(|b| {
                    format!("bits={b} words={}", req.args.get("words").map_or("", String::as_str))
                });
                queues.insert(
                    k,
                    QueueState {
                        prio: req.get("prio").unwrap_or(0),
                        pct: req.get("pct").unwrap_or(100),
                        susp: req.get::<u8>("susp").is_some_and(|s| s != 0),
                        mask,
                    },
                );
            }
        }
        "DESTROY" => {
            if let Some(k) = key {
                queues.remove(&k);
            }
        }
        "UPDATE" => {
            if let Some(q) = key.and_then(|k| queues.get_mut(&k)) {
                q.prio = req.get("prio").unwrap_or(q.prio);
                q.pct = req.get("pct").unwrap_or(q.pct);
                if let Some(s) = req.get::<u8>("susp") {
                    q.susp = s != 0;
                }
            }
        }
        "CUMASK" => {
            if let Some(q) = key.and_then(|k| queues.get_mut(&k)) {
                q.mask = Some(format!(
                    "bits={} words={}",
                    req.args.get("bits").map_or("0", String::as_str),
                    req.args.get("words").map_or("", String::as_str)
                ));
            }
        }
        "SUSPEND" | "RESUME" => {
            let keys: Vec<QueueKey> = req.list("keys").unwrap_or_default();
            let status: Vec<u32> = reply.list("status").unwrap_or_default();
            for (k, st) in keys.iter().zip(status) {
                if let (0, Some(q)) = (st, queues.get_mut(k)) {
                    q.susp = req.verb == "SUSPEND";
                }
            }
        }
        _ => {}
    }
}

/// The watcher of a connection: blocks until the device's end of the socket closes, then
/// restores the connection on a successor (unless a request already did). Ends when the
/// connection is dropped.
fn watch(conn: &Weak<Connection>, stop: &OwnedFd) {
    loop {
        let (sock, generation) = {
            let Some(c) = conn.upgrade() else { return };
            let link = c.lock();
            let Ok(s) = link.w.try_clone() else { return };
            (s, link.generation)
        };
        if !sock::wait_hangup(sock.as_fd(), stop.as_fd()) {
            return;
        }
        drop(sock);
        let Some(c) = conn.upgrade() else { return };
        let mut link = c.lock();
        if link.generation != generation {
            continue;
        }
        tracing::warn!("xhsa-emu: the shared device went away; moving to a successor");
        if let Err(e) = c.restore(&mut link) {
            tracing::error!(
                "xhsa-emu: cannot reach a successor shared device: {e}; trying again in 1 s"
            );
            drop(link);
            std::thread::sleep(Duration::from_secs(1));
        }
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

/// Connects to the device serving `dir`, starting it if none does; `clock` is the device time
/// a successor continues.
fn connect_or_start(dir: &Path, clock: Option<Clock>) -> io::Result<UnixStream> {
    let sock = paths::socket(dir);
    if let Ok(s) = UnixStream::connect(&sock) {
        return Ok(s);
    }
    // One starter at a time: others wait on the lock, then find the device running.
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(paths::start_lock(dir))?;
    // Released when `lock` is closed.
    let _ = rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive);
    if let Ok(s) = UnixStream::connect(&sock) {
        return Ok(s);
    }
    let bin = device_binary()?;
    let log = OpenOptions::new().create(true).append(true).mode(0o600).open(paths::log(dir))?;
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("device").arg("--dir").arg(dir);
    if let Some(c) = clock {
        cmd.arg("--clock").arg(format!("{},{}", c.base_mono, c.base_dev));
    }
    cmd.env_remove("LD_PRELOAD")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // The device outlives its starter's session.
    crate::sys::process::new_session(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| {
        io::Error::other(format!("cannot start the shared device {}: {e}", bin.display()))
    })?;
    let start = Instant::now();
    loop {
        if let Ok(s) = UnixStream::connect(&sock) {
            // The device is a daemon: reap it in the background so it never lingers as a zombie.
            std::thread::spawn(move || child.wait());
            return Ok(s);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(io::Error::other(format!(
                "the shared device exited at start ({status}); see {}",
                paths::log(dir).display()
            )));
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(io::Error::other(format!(
                "the shared device did not start within {START_TIMEOUT:?}; see {}",
                paths::log(dir).display()
            )));
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
    let me = match crate::sys::process::object_containing(device_binary as *const () as usize) {
        Some(p) => p,
        None => std::env::current_exe()?,
    };
    let me = std::fs::canonicalize(&me).unwrap_or(me);
    let bin = me
        .parent()
        .map(|d| d.join("xhsa-emu"))
        .ok_or_else(|| io::Error::other("cannot locate xhsa-emu"))?;
    if bin.exists() {
        Ok(bin)
    } else {
        Err(io::Error::other(format!(
            "{} not found; set XHSA_EMU_BIN to the xhsa-emu binary",
            bin.display()
        )))
    }
}

/// The device's HWS seen from a process: kernels go out through the shared ring, completions
/// come back through it. Queue management travels over the control connection instead (see
/// `kfd`), so those calls are no-ops here, except that a removed queue's kernels are no longer
/// outstanding.
pub struct RemoteScheduler {
    conn: Arc<Connection>,
    ready: VecDeque<Completion>,
    /// Kernels posted and not seen complete, by (queue, tag): posted again when the connection
    /// moves to a successor device.
    outstanding: BTreeMap<(QueueKey, u64), JobEntry>,
    /// The connection epoch last seen.
    epoch: u32,
}

impl RemoteScheduler {
    pub fn new(conn: Arc<Connection>) -> Self {
        let epoch = conn.epoch();
        RemoteScheduler { conn, ready: VecDeque::new(), outstanding: BTreeMap::new(), epoch }
    }

    fn post(&self, e: JobEntry) {
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
}

impl Scheduler for RemoteScheduler {
    fn add_queue(&mut self, _key: QueueKey, _priority: u8) {}
    fn remove_queue(&mut self, key: QueueKey) {
        self.outstanding.retain(|(k, _), _| *k != key);
    }
    fn set_runnable(&mut self, _key: QueueKey, _runnable: bool) {}

    fn submit(&mut self, key: QueueKey, job: KernelJob, now: u64) {
        let e = JobEntry {
            key,
            waves: job.need.waves,
            lds: job.need.lds,
            epoch: self.conn.epoch(),
            tag: job.tag,
            workgroups: job.workgroups,
            wg_ns: job.wg_ns,
            submit_ns: now,
            util_micro: (f64::from(job.profile.cu_util.clamp(0.0, 1.0)) * 1e6).round() as u32,
            _pad2: 0,
            hbm_bytes: job.profile.hbm_bytes,
        };
        self.outstanding.insert((key, job.tag), e);
        self.post(e);
    }

    fn step(&mut self, _now: u64) -> Option<(u64, Vec<Completion>)> {
        // The epoch first: every completion the previous device posted is in the ring by the
        // time a restore raises it.
        let epoch = self.conn.epoch();
        // The device posts a completion only once device time has reached it.
        while let Some(d) = self.conn.area.get().take_done() {
            if self.outstanding.remove(&(d.key, d.tag)).is_some() {
                self.ready.push_back(Completion {
                    queue: d.key,
                    tag: d.tag,
                    start_ns: d.start_ns,
                    end_ns: d.end_ns,
                });
            }
        }
        if epoch != self.epoch {
            self.epoch = epoch;
            let mut again: Vec<JobEntry> = self
                .outstanding
                .values_mut()
                .filter(|e| e.epoch != epoch)
                .map(|e| {
                    e.epoch = epoch;
                    *e
                })
                .collect();
            again.sort_by_key(|e| e.submit_ns);
            if !again.is_empty() {
                tracing::warn!(
                    kernels = again.len(),
                    "xhsa-emu: kernels outstanding on the device that went away posted again"
                );
            }
            for e in again {
                self.post(e);
            }
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
