//! The shared device: one process (`xhsa-emu device`, started on demand by the first process
//! that opens the emulated KFD) owning the hardware scheduler and clock of every emulated GPU.
//! Client processes (one connection per process and GPU) create queues over the control socket
//! and post kernels through shared rings; the scheduler thread posts completions back when
//! device time reaches them and wakes the client through the futex in its shared area.
//!
//! A client is its connection, as a KFD process is its open `/dev/kfd`: the device keys clients
//! by connection and their queues by (connection, the client's queue key), never by pid, so
//! processes with the same pid in different PID namespaces (containers) are different clients.
//! The pid and PID namespace a client reports are for `xhsa-emu status` only. A client whose
//! connection closes (exit, crash, SIGKILL) has its queues removed and their CUs freed; the
//! others continue. With no clients left the device exits after [`IDLE_EXIT`], so nothing
//! lingers.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::paths;
use super::protocol::{join, Line};
use super::shm::{ClientArea, DeviceArea, DoneEntry, Shared};
use crate::config::Config;
use crate::cp::clock::Clock;
use crate::device::{CuMask, CuPool, Hws, KernelJob, Profile, QueueKey, WgNeed};
use crate::sys::{futex, sock};

/// How long the device outlives its last client.
pub const IDLE_EXIT: Duration = Duration::from_secs(3);

struct Client {
    /// What the client reported, for status: its pid in its own PID namespace, and that
    /// namespace's inode (0 if unknown).
    pid: i32,
    pidns: u64,
    gpu: usize,
    /// The epoch the client announced: only its job entries of this epoch are taken.
    epoch: u32,
    area: Shared<ClientArea>,
    backlog: VecDeque<DoneEntry>,
}

#[derive(Clone, Debug)]
struct QueueInfo {
    client: u64,
    /// The client's key of the queue (what its job entries and completions carry).
    local: QueueKey,
    gpu: usize,
    priority: u8,
    percentage: u32,
    suspended: bool,
}

impl QueueInfo {
    /// On the runlist (KFD's `is_active` as far as the device is concerned): percentage > 0
    /// and not suspended. Either one alone keeps the queue off.
    fn active(&self) -> bool {
        self.percentage > 0 && !self.suspended
    }
}

/// A queue leaving or rejoining the runlist on the HWS. KFD unmaps the queues with the CP's
/// preempt action, so a queue taken off has its running workgroups context-saved (CWSR; those
/// that end within `grace_ns` finish), and a queue mapped again resumes them first.
fn set_active(hws: &mut Hws, key: QueueKey, was: bool, is: bool, now: u64, grace_ns: u64) {
    match (was, is) {
        (true, false) => {
            hws.suspend(key, now, grace_ns);
        }
        (false, true) => {
            hws.resume(key, now);
        }
        _ => {}
    }
}

struct State {
    gpus: Vec<Hws>,
    clients: HashMap<u64, Client>,
    /// By device-wide key (the HWS's).
    queues: HashMap<QueueKey, QueueInfo>,
    /// (client, client's key) -> device-wide key.
    by_local: HashMap<(u64, QueueKey), QueueKey>,
    next_key: QueueKey,
    next_client: u64,
    idle_since: Option<Instant>,
}

pub struct Device {
    cfg: Arc<Config>,
    clock: Clock,
    dir: PathBuf,
    area: Shared<DeviceArea>,
    /// The area's descriptor, passed to every client.
    area_fd: OwnedFd,
    state: Mutex<State>,
    /// Signalled when the last client leaves (or a new one arrives).
    idle_changed: std::sync::Condvar,
}

impl Device {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        let w = &self.area.get().wake;
        w.fetch_add(1, Ordering::Release);
        futex::wake_all(w);
    }
}

/// Runs the shared device in this process until it has been idle for [`IDLE_EXIT`]. `clock`
/// continues the device time of a device that went away (its clients start the successor
/// with it); `None` starts device time now.
pub fn serve(dir: &Path, cfg: Config, gpus: u32, clock_arg: Option<(u64, u64)>) -> io::Result<()> {
    let sock = paths::socket(dir);
    if UnixStream::connect(&sock).is_ok() {
        return Ok(()); // another device already serves this directory
    }
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)?;
    let (area, area_fd) = Shared::<DeviceArea>::create(c"xhsa-emu-device")?;
    let d = &cfg.device;
    let pools = (0..gpus.max(1))
        .map(|_| {
            Hws::new(CuPool::new(d.cus() as usize, d.waves_per_cu(), d.lds_kib * 1024))
                .with_slots(d.cp_queues as usize, cfg.kfd.hws_quantum_us * 1000)
                .with_jitter(cfg.timing.wg_jitter)
                .with_capacity(cfg.timing.capacity())
        })
        .collect();
    let mut clock = Clock::new(cfg.timing.time_scale);
    if let Some((base_mono, base_dev)) = clock_arg {
        clock.base_mono = base_mono;
        clock.base_dev = base_dev;
    }
    let dev = Arc::new(Device {
        clock,
        dir: dir.to_path_buf(),
        area,
        area_fd,
        state: Mutex::new(State {
            gpus: pools,
            clients: HashMap::new(),
            queues: HashMap::new(),
            by_local: HashMap::new(),
            next_key: 1,
            next_client: 1,
            idle_since: Some(Instant::now()),
        }),
        cfg: Arc::new(cfg),
        idle_changed: std::sync::Condvar::new(),
    });
    tracing::info!(dir = %dir.display(), gpus, "xhsa-emu device serving");
    let s = dev.clone();
    std::thread::Builder::new().name("xhsa-emu-hws".into()).spawn(move || schedule(&s))?;
    let s = dev.clone();
    std::thread::Builder::new().name("xhsa-emu-idle".into()).spawn(move || idle_watch(&s))?;
    for conn in listener.incoming() {
        match conn {
            Ok(c) => {
                let s = dev.clone();
                std::thread::Builder::new()
                    .name("xhsa-emu-client".into())
                    .spawn(move || serve_client(&s, c))?;
            }
            Err(e) => tracing::warn!("xhsa-emu device: accept failed: {e}"),
        }
    }
    Ok(())
}

/// Exits the process once it has had no client for [`IDLE_EXIT`]; sleeps on a condition
/// variable meanwhile (woken when clients come and go), never polls.
fn idle_watch(dev: &Device) {
    let mut st = dev.lock();
    loop {
        match st.idle_since {
            None => st = dev.idle_changed.wait(st).unwrap_or_else(|p| p.into_inner()),
            Some(t) if t.elapsed() >= IDLE_EXIT => break,
            Some(t) => {
                st = dev
                    .idle_changed
                    .wait_timeout(st, IDLE_EXIT - t.elapsed())
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        }
    }
    let _ = std::fs::remove_file(paths::socket(&dev.dir));
    tracing::info!("xhsa-emu device: idle, exiting");
    std::process::exit(0);
}

/// The scheduler thread: takes posted kernels, runs every GPU's HWS to the current device time
/// and hands completions to their owners.
fn schedule(dev: &Device) {
    crate::sys::process::finest_timer_slack();
    loop {
        let seen = dev.area.get().wake.load(Ordering::Acquire);
        let now = dev.clock.now();
        let next = {
            let mut st = dev.lock();
            let st = &mut *st;
            // Kernels in the order they were fetched, each placed at its own time.
            let mut jobs = Vec::new();
            for (&cid, c) in &st.clients {
                while let Some(j) = c.area.get().take_job() {
                    // An entry of an earlier epoch was posted to a device that went away; the
                    // client posts it again with its current epoch.
                    if j.epoch == c.epoch {
                        jobs.push((cid, j));
                    }
                }
            }
            jobs.sort_by_key(|(_, j)| j.submit_ns);
            let mut woken = Vec::new();
            for (cid, j) in jobs {
                let Some(&key) = st.by_local.get(&(cid, j.key)) else { continue };
                let g = st.queues[&key].gpu;
                run_to(
                    &mut st.gpus[g],
                    &st.queues,
                    &mut st.clients,
                    j.submit_ns.min(now),
                    &mut woken,
                );
                let late = st.gpus[g].now().saturating_sub(j.submit_ns);
                if late > 0 {
                    tracing::debug!(
                        key,
                        late_ns = late,
                        "xhsa-emu device: kernel placed after its fetch time"
                    );
                }
                let profile = Profile {
                    cu_util: (f64::from(j.util_micro) / 1e6) as f32,
                    hbm_bytes: j.hbm_bytes,
                };
                let job = KernelJob {
                    tag: j.tag,
                    workgroups: j.workgroups,
                    need: WgNeed { waves: j.waves, lds: j.lds },
                    wg_ns: j.wg_ns,
                    profile,
                };
                st.gpus[g].submit(key, job, j.submit_ns);
            }
            // The HWS clock stays at its last event: a kernel posted later is placed at the
            // device time its packet was fetched, not when this thread happened to wake.
            for g in 0..st.gpus.len() {
                let (gpus, queues, clients) = (&mut st.gpus, &st.queues, &mut st.clients);
                run_to(&mut gpus[g], queues, clients, now, &mut woken);
            }
            for (&cid, c) in st.clients.iter_mut() {
                while let Some(&d) = c.backlog.front() {
                    if !c.area.get().post_done(d) {
                        break;
                    }
                    c.backlog.pop_front();
                    // The client may have drained its ring and gone to sleep since these
                    // completions were held back: it must be woken for them too.
                    woken.push(cid);
                }
            }
            woken.sort_unstable();
            woken.dedup();
            for cid in woken {
                if let Some(c) = st.clients.get(&cid) {
                    let w = &c.area.get().wake;
                    w.fetch_add(1, Ordering::Release);
                    futex::wake_all(w);
                }
            }
            let backlog = st.clients.values().any(|c| !c.backlog.is_empty());
            let next = st.gpus.iter().filter_map(Hws::next_event).min();
            if backlog {
                Some(next.map_or(now + 100_000, |n| n.min(now + 100_000)))
            } else {
                next
            }
        };
        let timeout = next.map(|t| dev.clock.until(t));
        if timeout.is_some_and(|d| d.is_zero()) {
            continue;
        }
        futex::wait(&dev.area.get().wake, seen, timeout);
    }
}

/// Steps one GPU's HWS to `t`, routing completions to the clients that own the queues.
fn run_to(
    hws: &mut Hws,
    queues: &HashMap<QueueKey, QueueInfo>,
    clients: &mut HashMap<u64, Client>,
    t: u64,
    woken: &mut Vec<u64>,
) {
    while let Some((_, done)) = hws.step(t) {
        for c in done {
            let Some(q) = queues.get(&c.queue) else { continue };
            let Some(cl) = clients.get_mut(&q.client) else { continue };
            let d = DoneEntry {
                key: q.local,
                _pad: 0,
                tag: c.tag,
                start_ns: c.start_ns,
                end_ns: c.end_ns,
            };
            if !cl.backlog.is_empty() || !cl.area.get().post_done(d) {
                cl.backlog.push_back(d);
            }
            woken.push(q.client);
        }
    }
}

fn reply(w: &mut UnixStream, s: &str) -> io::Result<()> {
    w.write_all(s.as_bytes())?;
    w.write_all(b"\n")
}

fn err(errno: i32, msg: &str) -> String {
    format!("ERR errno={errno} {msg}")
}

fn serve_client(dev: &Device, stream: UnixStream) {
    // The first line may carry a descriptor (HELLO's shared area): read it unbuffered.
    let Ok((first, mut fds)) = sock::recv_line_with_fds(&stream) else { return };
    let Ok(mut w) = stream.try_clone() else { return };
    let mut r = BufReader::new(stream);
    let mut line = first;
    let mut me: Option<u64> = None;
    let mut first = true;
    loop {
        if !first {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        first = false;
        let Some(req) = Line::parse(&line) else { continue };
        let out = match (req.verb.as_str(), me) {
            ("HELLO", None) => match hello(dev, &req, fds.pop()) {
                Ok((id, text)) => {
                    // The reply carries the device's area.
                    if sock::send_with_fds(
                        &w,
                        format!("{text}\n").as_bytes(),
                        &[dev.area_fd.as_fd()],
                    )
                    .is_err()
                    {
                        disconnect(dev, id);
                        return;
                    }
                    me = Some(id);
                    continue;
                }
                Err(e) => err(libc::EINVAL, &e),
            },
            ("STATUS", _) => status(dev),
            (_, None) => err(libc::EINVAL, "HELLO first"),
            (verb, Some(id)) => {
                request(dev, id, verb, &req).unwrap_or_else(|(errno, m)| err(errno, &m))
            }
        };
        if reply(&mut w, &out).is_err() {
            break;
        }
    }
    if let Some(id) = me {
        disconnect(dev, id);
    }
}

/// `HELLO pid=P pidns=N gpu=G epoch=E` with the client's shared area attached: registers a new
/// client (every connection is one, whatever pid it reports).
fn hello(dev: &Device, req: &Line, area: Option<OwnedFd>) -> Result<(u64, String), String> {
    let pid: i32 = req.get("pid").ok_or("HELLO needs pid=")?;
    let gpu: usize = req.get("gpu").ok_or("HELLO needs gpu=")?;
    let pidns: u64 = req.get("pidns").unwrap_or(0);
    let epoch: u32 = req.get("epoch").unwrap_or(0);
    let area =
        area.ok_or("HELLO needs the client's shared area (a descriptor sent with the line)")?;
    let area: Shared<ClientArea> =
        Shared::map(&area).map_err(|e| format!("cannot map the client's area: {e}"))?;
    if !area.get().valid() {
        return Err(
            "the client's area has the wrong layout or protocol version (another xhsa-emu build)"
                .into(),
        );
    }
    let mut st = dev.lock();
    if gpu >= st.gpus.len() {
        return Err(format!("gpu {gpu} does not exist: this device has {} (start every process with the same --gpus)", st.gpus.len()));
    }
    let id = st.next_client;
    st.next_client += 1;
    st.clients.insert(id, Client { pid, pidns, gpu, epoch, area, backlog: VecDeque::new() });
    st.idle_since = None;
    dev.idle_changed.notify_all();
    let c = dev.clock;
    tracing::info!(client = id, pid, pidns, gpu, "xhsa-emu device: client connected");
    Ok((
        id,
        format!(
            "OK client={id} base_mono={} base_dev={} scale={} gpus={}",
            c.base_mono,
            c.base_dev,
            c.scale,
            st.gpus.len()
        ),
    ))
}

fn disconnect(dev: &Device, id: u64) {
    let mut st = dev.lock();
    let keys: Vec<QueueKey> =
        st.queues.iter().filter(|(_, q)| q.client == id).map(|(k, _)| *k).collect();
    for k in &keys {
        if let Some(q) = st.queues.remove(k) {
            st.by_local.remove(&(id, q.local));
            st.gpus[q.gpu].remove_queue(*k);
        }
    }
    if let Some(c) = st.clients.remove(&id) {
        tracing::info!(
            client = id,
            pid = c.pid,
            pidns = c.pidns,
            queues = keys.len(),
            "xhsa-emu device: client gone; its queues removed"
        );
    }
    if st.clients.is_empty() {
        st.idle_since = Some(Instant::now());
        dev.idle_changed.notify_all();
    }
    drop(st);
    dev.wake();
}

type ReqResult = Result<String, (i32, String)>;

/// A CU mask given as `bits=N words=HEX,HEX..`, if `bits` is there.
fn cu_mask(req: &Line) -> Result<Option<CuMask>, (i32, String)> {
    let Some(bits) = req.get::<usize>("bits") else { return Ok(None) };
    let words: Vec<u32> = req
        .args
        .get("words")
        .filter(|w| !w.is_empty())
        .map(|w| w.split(',').map(|x| u32::from_str_radix(x, 16)).collect::<Result<_, _>>())
        .transpose()
        .map_err(|_| (libc::EINVAL, "bad words=".to_string()))?
        .unwrap_or_default();
    Ok(Some(CuMask::from_words(&words, bits)))
}

fn need<T: std::str::FromStr>(req: &Line, k: &str) -> Result<T, (i32, String)> {
    req.get(k).ok_or((libc::EINVAL, format!("{} needs {k}=", req.verb)))
}

/// Pauses the whole device for a KFD unmap/remap of all queues, then sleeps the real time it
/// takes so that the ioctl returns when KFD's would.
fn preempt_all(dev: &Device, st: &mut State, gpu: usize, cost_us: u64) -> Duration {
    let cost = cost_us * 1000;
    st.gpus[gpu].preempt_all(dev.clock.now(), cost);
    dev.clock.real(cost)
}

fn request(dev: &Device, id: u64, verb: &str, req: &Line) -> ReqResult {
    let k = &dev.cfg.kfd;
    let mut st = dev.lock();
    let gpu = st.clients.get(&id).map(|c| c.gpu).ok_or((libc::EINVAL, "unknown client".into()))?;
    let mut stall = Duration::ZERO;
    // The device-wide key of this client's queue `local`.
    let owned = |st: &State, local: QueueKey| {
        st.by_local.get(&(id, local)).copied().ok_or((libc::EINVAL, format!("no queue {local}")))
    };
    let out = match verb {
        "CREATE" => {
            // `key`: the client's key for the queue. `susp` and a CU mask (`bits`, `words`)
            // restore a queue the client had on a device that went away (no cost charged).
            let local: QueueKey = need(req, "key")?;
            let prio: u8 = need(req, "prio")?;
            let pct: u32 = need(req, "pct")?;
            let suspended = req.get::<u8>("susp").is_some_and(|s| s != 0);
            let mask = cu_mask(req)?;
            if st.by_local.contains_key(&(id, local)) {
                return Err((libc::EEXIST, format!("queue {local} exists")));
            }
            let mapped = st.queues.values().filter(|q| q.gpu == gpu).count();
            let limit = (dev.cfg.device.cp_queues
                + dev.cfg.device.sdma_engines * dev.cfg.device.sdma_queues_per_engine)
                as usize
                * 8;
            if mapped >= limit {
                return Err((libc::ENOSPC, "too many queues on this device".into()));
            }
            let key = st.next_key;
            st.next_key += 1;
            let q =
                QueueInfo { client: id, local, gpu, priority: prio, percentage: pct, suspended };
            st.gpus[gpu].add_queue(key, prio);
            st.gpus[gpu].set_runnable(key, q.active());
            if let Some(m) = mask {
                st.gpus[gpu].set_cu_mask(key, m);
            }
            st.queues.insert(key, q);
            st.by_local.insert((id, local), key);
            format!("OK key={local}")
        }
        "DESTROY" => {
            let local: QueueKey = need(req, "key")?;
            let key = owned(&st, local)?;
            st.queues.remove(&key);
            st.by_local.remove(&(id, local));
            st.gpus[gpu].remove_queue(key);
            "OK".into()
        }
        "UPDATE" => {
            let key: QueueKey = need(req, "key")?;
            let prio: u8 = need(req, "prio")?;
            let pct: u32 = need(req, "pct")?;
            // KFD's view of the queue's suspension (a suspend whose unmap failed left it
            // running; this remap takes it off).
            let susp: Option<bool> = req.get::<u8>("susp").map(|s| s != 0);
            let key = owned(&st, key)?;
            stall = preempt_all(dev, &mut st, gpu, k.update_queue_us);
            update_queue(&mut st, key, prio, pct, susp, dev.clock.now());
            "OK".into()
        }
        "CUMASK" => {
            let key: QueueKey = need(req, "key")?;
            let mask = cu_mask(req)?.ok_or((libc::EINVAL, "CUMASK needs bits=".to_string()))?;
            let key = owned(&st, key)?;
            stall = preempt_all(dev, &mut st, gpu, k.set_cu_mask_us);
            st.gpus[gpu].set_cu_mask(key, mask);
            "OK".into()
        }
        "SUSPEND" | "RESUME" => {
            let keys: Vec<QueueKey> =
                req.list("keys").ok_or((libc::EINVAL, "bad keys=".to_string()))?;
            let grace_ns: u64 = req.get("grace_ns").unwrap_or(0);
            let suspend = verb == "SUSPEND";
            if !keys.is_empty() {
                // KFD runs the unmap/remap only when it has a queue to act on.
                stall = preempt_all(
                    dev,
                    &mut st,
                    gpu,
                    if suspend { k.suspend_us } else { k.resume_us },
                );
            }
            let (n, status) =
                suspend_queues(&mut st, id, &keys, suspend, dev.clock.now(), grace_ns);
            format!("OK n={n} status={}", join(&status))
        }
        other => return Err((libc::EINVAL, format!("unknown request {other}"))),
    };
    drop(st);
    dev.wake();
    if !stall.is_zero() {
        std::thread::sleep(stall);
    }
    Ok(out)
}

/// UPDATE of a queue's priority and percentage (after the device-wide unmap): a queue whose
/// percentage drops to 0 leaves the runlist with its waves saved, one raised from 0 comes back.
fn update_queue(
    st: &mut State,
    key: QueueKey,
    prio: u8,
    pct: u32,
    suspended: Option<bool>,
    now: u64,
) {
    let Some(q) = st.queues.get_mut(&key) else { return };
    let was = q.active();
    q.priority = prio;
    q.percentage = pct;
    q.suspended = suspended.unwrap_or(q.suspended);
    let (is, gpu) = (q.active(), q.gpu);
    st.gpus[gpu].set_priority(key, prio);
    set_active(&mut st.gpus[gpu], key, was, is, now, 0);
}

/// SUSPEND / RESUME of client `id`'s queues `keys` (its own keys; after the device-wide
/// unmap). A queue already in the asked state counts as handled, as in KFD's
/// `suspend_single_queue` / `resume_single_queue`. Returns how many were handled and a status
/// per key (0 handled, 1 no such queue).
fn suspend_queues(
    st: &mut State,
    id: u64,
    keys: &[QueueKey],
    suspend: bool,
    now: u64,
    grace_ns: u64,
) -> (u32, Vec<u32>) {
    let mut n = 0;
    let mut status = Vec::with_capacity(keys.len());
    for &local in keys {
        let key = st.by_local.get(&(id, local)).copied().unwrap_or(QueueKey::MAX);
        match st.queues.get_mut(&key) {
            Some(q) => {
                let was = q.active();
                q.suspended = suspend;
                let (is, gpu) = (q.active(), q.gpu);
                set_active(
                    &mut st.gpus[gpu],
                    key,
                    was,
                    is,
                    now,
                    if suspend { grace_ns } else { 0 },
                );
                n += 1;
                status.push(0);
            }
            None => status.push(1),
        }
    }
    (n, status)
}

/// One queue's line of `xhsa-emu status`.
fn queue_line(hws: &Hws, key: QueueKey, q: &QueueInfo) -> String {
    let state = match (q.suspended, q.percentage == 0) {
        (true, true) => "suspended and inactive (percentage 0)",
        (true, false) => "suspended",
        (false, true) => "inactive (percentage 0)",
        (false, false) => "active",
    };
    let saved = match hws.saved(key) {
        0 => String::new(),
        n => format!(", {n} workgroups saved"),
    };
    // A CU mask (SET_CU_MASK) other than every CU: how many, and which.
    let all = hws.cus();
    let mask = match hws.cu_mask(key) {
        Some(m) if m.count() as usize != all => {
            let cus: Vec<String> =
                (0..all).filter(|&c| m.contains(c)).map(|c| c.to_string()).collect();
            format!(", CU mask {} of {all} CUs [{}]", m.count(), cus.join(","))
        }
        _ => String::new(),
    };
    format!(
        "    queue {}: priority {}, {state}, {} kernel(s) outstanding{saved}{mask}\n",
        q.local,
        q.priority,
        hws.outstanding(key)
    )
}

fn status(dev: &Device) -> String {
    let st = dev.lock();
    let mut out = String::new();
    let c = &dev.cfg.device;
    out.push_str(&format!(
        "device {}: {} GPU(s), {} CUs each, device time {:.3} s, time scale {}\n",
        dev.dir.display(),
        st.gpus.len(),
        c.cus(),
        dev.clock.now() as f64 / 1e9,
        dev.clock.scale
    ));
    for (g, h) in st.gpus.iter().enumerate() {
        let total = u64::from(c.cus() * c.waves_per_cu());
        out.push_str(&format!("gpu {g}: {} of {total} wave slots busy\n", h.busy_waves()));
    }
    let mut clients: Vec<_> = st.clients.iter().collect();
    clients.sort_by_key(|(id, _)| **id);
    out.push_str(&format!("processes: {}\n", clients.len()));
    for (id, cl) in clients {
        let ns =
            if cl.pidns == 0 { String::new() } else { format!(" in pid namespace {}", cl.pidns) };
        out.push_str(&format!("  process {}{ns} (client {id}) on gpu {}\n", cl.pid, cl.gpu));
        let mut qs: Vec<_> = st.queues.iter().filter(|(_, q)| q.client == *id).collect();
        qs.sort_by_key(|(k, _)| **k);
        for (k, q) in qs {
            out.push_str(&queue_line(&st.gpus[q.gpu], *k, q));
        }
    }
    out.push_str("END");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One GPU of one CU (32 wave slots), with queue `key` of client 1 at priority 5.
    fn state(keys: &[QueueKey]) -> State {
        let mut hws = Hws::new(CuPool::new(1, 32, 65536));
        let mut queues = HashMap::new();
        let mut by_local = HashMap::new();
        for &k in keys {
            hws.add_queue(k, 5);
            queues.insert(
                k,
                QueueInfo {
                    client: 1,
                    local: k,
                    gpu: 0,
                    priority: 5,
                    percentage: 100,
                    suspended: false,
                },
            );
            by_local.insert((1, k), k);
        }
        State {
            gpus: vec![hws],
            clients: HashMap::new(),
            queues,
            by_local,
            next_key: 10,
            next_client: 2,
            idle_since: None,
        }
    }

    /// One workgroup filling the CU for `wg_ns`.
    fn full_cu(tag: u64, wg_ns: u64) -> KernelJob {
        KernelJob {
            tag,
            workgroups: 1,
            need: WgNeed { waves: 32, lds: 0 },
            wg_ns,
            profile: Profile::default(),
        }
    }

    #[test]
    fn percentage_0_saves_the_running_workgroups_and_a_percentage_back_resumes_them() {
        let mut st = state(&[1]);
        st.gpus[0].submit(1, full_cu(7, 1000), 0);
        st.gpus[0].advance(400);
        update_queue(&mut st, 1, 5, 0, None, 400);
        // Off the CU with 600 ns of work saved, not left to finish.
        assert_eq!((st.gpus[0].saved(1), st.gpus[0].busy_waves()), (1, 0));
        assert!(st.gpus[0].advance(10_000).is_empty());
        let line = queue_line(&st.gpus[0], 1, &st.queues[&1]);
        assert!(
            line.contains("inactive (percentage 0), 1 kernel(s) outstanding, 1 workgroups saved"),
            "{line}"
        );
        update_queue(&mut st, 1, 5, 100, None, 10_000);
        let c = st.gpus[0].advance(20_000);
        assert_eq!((c[0].tag, c[0].end_ns), (7, 10_600));
        assert_eq!(st.gpus[0].saved(1), 0);
        assert!(queue_line(&st.gpus[0], 1, &st.queues[&1])
            .contains("active, 0 kernel(s) outstanding\n"));
    }

    #[test]
    fn a_priority_update_leaves_an_active_queue_running() {
        let mut st = state(&[1]);
        st.gpus[0].submit(1, full_cu(7, 1000), 0);
        st.gpus[0].advance(400);
        update_queue(&mut st, 1, 12, 100, None, 400);
        assert_eq!((st.gpus[0].saved(1), st.gpus[0].busy_waves()), (0, 32));
        assert_eq!(st.gpus[0].advance(2000)[0].end_ns, 1000);
        assert_eq!(st.queues[&1].priority, 12);
    }

    #[test]
    fn a_queue_suspended_and_deactivated_runs_only_when_neither_holds() {
        let mut st = state(&[1]);
        st.gpus[0].submit(1, full_cu(7, 1000), 0);
        st.gpus[0].advance(100);
        assert_eq!(suspend_queues(&mut st, 1, &[1], true, 100, 0), (1, vec![0]));
        update_queue(&mut st, 1, 5, 0, None, 200);
        assert_eq!(st.gpus[0].saved(1), 1);
        let line = queue_line(&st.gpus[0], 1, &st.queues[&1]);
        assert!(
            line.contains("suspended and inactive (percentage 0)")
                && line.ends_with("1 workgroups saved\n"),
            "{line}"
        );
        // Resumed but still at percentage 0: stays off.
        assert_eq!(suspend_queues(&mut st, 1, &[1], false, 300, 0), (1, vec![0]));
        assert!(st.gpus[0].advance(5_000).is_empty());
        assert_eq!(st.gpus[0].saved(1), 1);
        // Percentage back while suspended again: still off.
        suspend_queues(&mut st, 1, &[1], true, 5_000, 0);
        update_queue(&mut st, 1, 5, 100, None, 5_000);
        assert!(st.gpus[0].advance(9_000).is_empty());
        assert!(
            queue_line(&st.gpus[0], 1, &st.queues[&1]).contains("queue 1: priority 5, suspended, ")
        );
        suspend_queues(&mut st, 1, &[1], false, 9_000, 0);
        let c = st.gpus[0].advance(20_000);
        // 900 ns were left when it was saved at 100.
        assert_eq!((c[0].tag, c[0].end_ns), (7, 9_900));
    }

    #[test]
    fn a_queue_already_in_the_asked_state_counts_and_a_foreign_key_does_not() {
        let mut st = state(&[1, 2]);
        st.queues.get_mut(&2).unwrap().client = 9;
        st.by_local.remove(&(1, 2));
        st.by_local.insert((9, 2), 2);
        assert_eq!(suspend_queues(&mut st, 1, &[1, 2, 3], true, 0, 0), (1, vec![0, 1, 1]));
        assert_eq!(suspend_queues(&mut st, 1, &[1], true, 0, 0), (1, vec![0]));
        assert_eq!(suspend_queues(&mut st, 1, &[1], false, 0, 0), (1, vec![0]));
        assert_eq!(suspend_queues(&mut st, 1, &[1], false, 0, 0), (1, vec![0]));
        assert!(!st.queues[&2].suspended);
    }

    #[test]
    fn an_update_takes_the_kfd_view_of_suspension() {
        let mut st = state(&[1]);
        st.gpus[0].submit(1, full_cu(7, 1000), 0);
        st.gpus[0].advance(100);
        // KFD marked the queue suspended but its unmap failed: this remap takes it off.
        update_queue(&mut st, 1, 5, 100, Some(true), 100);
        assert_eq!((st.gpus[0].saved(1), st.queues[&1].suspended), (1, true));
        update_queue(&mut st, 1, 5, 100, Some(false), 200);
        assert_eq!(st.gpus[0].advance(5_000)[0].end_ns, 1100);
    }
}
