//! The emulated KFD through `/dev/kfd` ioctls issued with `xhsa_ioctl::Kfd`, as libxhsa issues
//! them: UPDATE_QUEUE percentage 0 and back, DBG_TRAP suspend/resume with KFD's per-queue
//! status bits (the new-queue refusal included), the ops that clear EC_QUEUE_NEW, queue
//! snapshots, DESTROY_QUEUE of a suspended queue, and the `XHSA_EMU_FAULT` knob.
//!
//! Each scenario runs in a child process: this test binary run again with the emulator's thunk
//! (`target/<profile>/libhsakmt.so`, built by `cargo build -p xhsa-emu-thunk` or any workspace
//! build) preloaded, which makes `/dev/kfd` the emulated KFD, on a private shared device
//! (`XHSA_EMU_DEVICE_DIR`) started from this package's `xhsa-emu` binary. The child's queue is
//! a raw AQL ring in the child's own memory (registered as userptr memory); its kernel (a
//! descriptor and a lone `s_endpgm`) has no model and runs for the configured default
//! workgroup time.

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xhsa_emu::shared::client;
use xhsa_ioctl::abi::*;
use xhsa_ioctl::Kfd;

#[path = "support/raw_queue.rs"]
mod raw_queue;
#[path = "../../../tests/common/wait.rs"]
mod wait;
use raw_queue::{gpu, Queue, RING, RING_AT};

const BIN: &str = env!("CARGO_BIN_EXE_xhsa-emu");
const CHILD: &str = "XHSA_EMU_KFD_IOCTL_SCENARIO";
/// One workgroup's run time of the test kernel (the config's default workgroup time).
const WG_MS: u64 = 400;
const NEW: u64 = 1 << (EC_QUEUE_NEW - 1);
const INVALID: u32 = KFD_DBG_QUEUE_INVALID_MASK;
const ERROR: u32 = KFD_DBG_QUEUE_ERROR_MASK;

// ---------------------------------------------------------------------------------------------
// The parent side: run a scenario in a child under the thunk.

/// `target/<profile>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The thunk, after checking that it is newer than every source it was built from (cargo's
/// dep-info `libhsakmt.d` lists them): `cargo test -p xhsa-emu` does not build it.
fn thunk() -> PathBuf {
    let so = target_dir().join("libhsakmt.so");
    let rebuild = "cargo build --release -p xhsa-emu-thunk (or any workspace build)";
    let built = std::fs::metadata(&so)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is missing: build it first: {rebuild}", so.display()));
    let deps = std::fs::read_to_string(target_dir().join("libhsakmt.d")).unwrap_or_default();
    let sources = deps
        .lines()
        .next()
        .and_then(|l| l.split_once(": "))
        .map_or("", |(_, s)| s)
        .replace("\\ ", "\u{0}");
    for src in sources.split_whitespace().map(|p| PathBuf::from(p.replace('\u{0}', " "))) {
        if let Ok(t) = std::fs::metadata(&src).and_then(|m| m.modified()) {
            assert!(
                built >= t,
                "{} is older than {}: rebuild it: {rebuild}",
                so.display(),
                src.display()
            );
        }
    }
    so
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xhsa-emu-kfd-ioctl-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `scenario` in a child and returns its output (panics with it if the child failed).
fn scenario(name: &str, fault: Option<&str>) -> Output {
    // One at a time: the scenarios time things on a shared, possibly small machine.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = temp_dir(name);
    let cfg = dir.join("emu.toml");
    std::fs::write(&cfg, format!("[timing]\ndefault_wg_ns = {}\n", WG_MS * 1_000_000)).unwrap();
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["child", "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD, name)
        .env("LD_PRELOAD", thunk())
        .env("XHSA_EMU_BIN", BIN)
        .env("XHSA_EMU_DEVICE_DIR", dir.join("device"))
        .env("XHSA_EMU_CONFIG", &cfg)
        .env("XHSA_EMU_LOG", "warn")
        .env_remove("XHSA_EMU_GPUS")
        .env_remove("XHSA_EMU_TIME_SCALE")
        .env_remove("XHSA_EMU_FAULT");
    if let Some(f) = fault {
        c.env("XHSA_EMU_FAULT", f);
    }
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(o) => o.expect("wait for the child"),
        Err(_) => {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let o = rx.recv().unwrap().unwrap();
            panic!("scenario {name} hung\n{}", report(&o));
        }
    };
    assert!(out.status.success(), "scenario {name} failed\n{}", report(&out));
    eprintln!("{}", report(&out));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn report(o: &Output) -> String {
    format!(
        "--- status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn update_queue_percentage_0_saves_the_running_workgroups_and_100_resumes_them() {
    scenario("pct0", None);
}

#[test]
fn suspend_refuses_a_new_queue_until_a_debug_op_clears_it_and_snapshots_report_the_queues() {
    scenario("new_queue", None);
}

#[test]
fn destroy_queue_of_a_suspended_queue_blocks_until_it_is_resumed() {
    scenario("destroy_blocks", None);
}

#[test]
fn dbg_trap_checks_come_in_kfds_order() {
    scenario("checks", None);
}

#[test]
fn fault_preempt_fail_fails_the_unmap_after_n_successes() {
    scenario("fault_fail", Some("preempt_fail:1"));
}

#[test]
fn fault_preempt_timeout_stalls_then_fails_and_logs_kfds_message() {
    let out = scenario("fault_timeout", Some("preempt_timeout:0:300"));
    let err = String::from_utf8_lossy(&out.stderr);
    let msg = "The cp might be in an unrecoverable state due to an unsuccessful queues preemption";
    assert_eq!(err.matches(msg).count(), 2, "one message per timed-out preemption\n{err}");
}

#[test]
fn a_malformed_fault_value_is_reported_once_and_ignored() {
    let out = scenario("fault_malformed", Some("preempt_sometimes"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("XHSA_EMU_FAULT=\"preempt_sometimes\" is not valid").count(),
        1,
        "{err}"
    );
    assert!(err.contains("preempt_fail[:N] or preempt_timeout[:N[:MS]]"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The child side.

/// The entry the parent runs in the child (does nothing in an ordinary test run).
#[test]
fn child() {
    let Ok(name) = std::env::var(CHILD) else { return };
    match name.as_str() {
        "pct0" => pct0(),
        "new_queue" => new_queue(),
        "destroy_blocks" => destroy_blocks(),
        "checks" => checks(),
        "fault_fail" => fault_fail(),
        "fault_timeout" => fault_timeout(),
        "fault_malformed" => fault_malformed(),
        other => panic!("unknown scenario {other}"),
    }
}

fn errno(e: xhsa_ioctl::KfdError) -> i32 {
    e.errno as i32
}

fn me() -> u32 {
    std::process::id()
}

fn device_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("XHSA_EMU_DEVICE_DIR").expect("XHSA_EMU_DEVICE_DIR"))
}

/// `xhsa-emu status` of our device, once `pred` holds (within 5 s).
fn status_when(what: &str, pred: impl Fn(&str) -> bool) -> String {
    let status = || client::status(&device_dir()).expect("device status");
    wait::wait_until(Duration::from_secs(5), || Some(status()).filter(|s| pred(s)))
        .unwrap_or_else(|| panic!("{what}: not seen; status:\n{}", status()))
}

/// The status line of queue `id`'s device queue (the only queue of ours with that state).
fn queue_lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| l.trim_start().starts_with("queue ")).collect()
}

/// A pipe's write end for DBG_TRAP ENABLE's `dbg_fd`, and its read end.
fn pipe() -> (i32, i32) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

/// Bytes waiting in the pipe's read end (drained).
fn drain(fd: i32) -> usize {
    let mut buf = [0u8; 64];
    // SAFETY: reading into a local buffer from our own non-blocking descriptor.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    n.max(0) as usize
}

/// Opens the KFD, enables the runtime and (with `debug`) a debug session reporting `mask`.
fn open(debug: Option<(u64, i32)>) -> Kfd {
    let kfd = Kfd::open().expect("open /dev/kfd (the emulated KFD)");
    assert_eq!(kfd.get_version().unwrap().minor_version, 17);
    kfd.runtime_enable(0x1000, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK).expect("RUNTIME_ENABLE");
    if let Some((mask, fd)) = debug {
        // SAFETY: `fd` is an open descriptor of this process for the duration of the call.
        let info = kfd
            .dbg_trap_enable(me(), mask, unsafe { BorrowedFd::borrow_raw(fd) })
            .expect("DBG_TRAP ENABLE");
        assert_eq!((info.r_debug, info.runtime_state), (0x1000, DEBUG_RUNTIME_STATE_ENABLED));
    }
    kfd
}

fn pct0() {
    let kfd = open(None);
    let q = Queue::create(&kfd, 80);
    // 80 workgroups of 4 waves, one per CU.
    status_when("the kernel running", |s| s.contains("gpu 0: 320 of 2560 wave slots busy"));
    // Half-way through its workgroups.
    std::thread::sleep(Duration::from_millis(WG_MS / 2));
    q.update(&kfd, 0, 7).expect("UPDATE_QUEUE percentage 0");
    // Off the CUs at once, their progress saved.
    let s = client::status(&device_dir()).unwrap();
    assert!(s.contains("gpu 0: 0 of 2560 wave slots busy"), "{s}");
    let l = queue_lines(&s);
    assert!(
        l.len() == 1
            && l[0]
                .contains("inactive (percentage 0), 1 kernel(s) outstanding, 80 workgroups saved"),
        "{s}"
    );
    std::thread::sleep(Duration::from_millis(WG_MS + 100));
    assert_eq!(q.completed(), 0, "no progress while inactive");
    let t = Instant::now();
    q.update(&kfd, 100, 7).expect("UPDATE_QUEUE percentage 100");
    let s = status_when("the saved workgroups back", |s| {
        s.contains("gpu 0: 320 of 2560 wave slots busy")
    });
    assert!(
        queue_lines(&s)[0].contains("active, 1 kernel(s) outstanding") && !s.contains("saved"),
        "{s}"
    );
    let completed = wait::holds_within(Duration::from_secs(5), || q.completed() > 0);
    assert!(completed, "the kernel never completed after percentage 100");
    // What was left when it was saved (about half), not a fresh start.
    assert!(t.elapsed() < Duration::from_millis(WG_MS - 20), "{:?}", t.elapsed());
    // A priority update of an active queue only re-prioritises it.
    q.update(&kfd, 100, 12).expect("UPDATE_QUEUE priority");
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains("priority 12, active"));
    // KFD reports an unknown queue id as EFAULT (pqm_update_queue_properties).
    let bogus = q.with_id(999);
    assert_eq!(bogus.update(&kfd, 0, 7).map_err(errno), Err(libc::EFAULT));
    assert_eq!(kfd.set_cu_mask(999, &[1]).map_err(errno), Err(libc::EFAULT));
    // GWS (pqm_set_gws): one queue of the process per GPU holds them; unknown queue and
    // taking back what nobody holds are EINVAL.
    assert_eq!(kfd.alloc_queue_gws(999, 1).map_err(errno), Err(libc::EINVAL));
    assert_eq!(kfd.alloc_queue_gws(q.id, 0).map_err(errno), Err(libc::EINVAL));
    assert_eq!(kfd.alloc_queue_gws(q.id, 1).map_err(errno), Ok(0));
    let other = Queue::create(&kfd, 0);
    assert_eq!(kfd.alloc_queue_gws(other.id, 1).map_err(errno), Err(libc::EBUSY));
    assert_eq!(kfd.alloc_queue_gws(q.id, 0).map_err(errno), Ok(0));
    assert_eq!(kfd.alloc_queue_gws(other.id, 1).map_err(errno), Ok(0));
    kfd.destroy_queue(other.id).expect("DESTROY_QUEUE");
    kfd.destroy_queue(q.id).expect("DESTROY_QUEUE");
}

fn new_queue() {
    let (rd, wr) = pipe();
    let kfd = open(Some((0, wr)));
    // A second session is refused.
    // SAFETY: `wr` is open.
    let again = kfd.dbg_trap_enable(me(), 0, unsafe { BorrowedFd::borrow_raw(wr) });
    assert_eq!(again.map_err(errno).err(), Some(libc::EALREADY));
    let q = Queue::create(&kfd, 0);

    // The snapshot: one queue, new.
    assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut []).unwrap(), 1);
    let mut e = [QueueSnapshotEntry::default(); 2];
    assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut e).unwrap(), 1);
    assert_eq!(
        (e[0].queue_id, e[0].gpu_id, e[0].ring_base_address, e[0].ring_size),
        (q.id, gpu(), q.addr(RING_AT), RING as u32)
    );
    assert_eq!((e[0].queue_type, e[0].exception_status), (KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, NEW));
    assert_eq!((e[0].write_pointer_address, e[0].read_pointer_address), (q.addr(56), q.addr(128)));
    assert_eq!(e[1], QueueSnapshotEntry::default(), "only the queues that exist are written");

    // A new queue is refused with the invalid bit, as is an id naming no queue.
    let mut ids = [q.id, 999];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 0);
    assert_eq!(ids, [q.id | INVALID, 999 | INVALID]);
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains(", active,"));

    // QUERY_EXCEPTION_INFO clears EC_QUEUE_NEW; then the queue can be suspended.
    assert_eq!(
        kfd.dbg_trap_query_exception_info(me(), q.id, EC_QUEUE_NEW, true, &mut []).unwrap(),
        0
    );
    let again = kfd.dbg_trap_query_exception_info(me(), q.id, EC_QUEUE_NEW, true, &mut []);
    assert_eq!(again.map_err(errno).err(), Some(libc::ENODATA));
    assert_eq!(
        kfd.dbg_trap_query_exception_info(me(), 999, EC_QUEUE_NEW, true, &mut [])
            .map_err(errno)
            .err(),
        Some(libc::EINVAL)
    );
    let mut ids = [q.id, 999];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    assert_eq!(ids, [q.id, 999 | INVALID]);
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains(", suspended,"));
    // Already suspended counts, as in KFD.
    let mut ids = [q.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    assert_eq!(ids, [q.id]);
    assert_eq!(kfd.dbg_trap_resume_queues(me(), &mut ids).unwrap(), 1);
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains(", active,"));

    // A second queue: the snapshot lists the newest first; its exception mask clears NEW on
    // the entries written.
    let q2 = Queue::create(&kfd, 0);
    let mut e = [QueueSnapshotEntry::default(); 1];
    assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), NEW, &mut e).unwrap(), 2);
    assert_eq!((e[0].queue_id, e[0].exception_status), (q2.id, NEW));
    let mut e = [QueueSnapshotEntry::default(); 2];
    kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut e).unwrap();
    assert_eq!(
        [(e[0].queue_id, e[0].exception_status), (e[1].queue_id, e[1].exception_status)],
        [(q2.id, 0), (q.id, 0)]
    );

    // QUERY_DEBUG_EVENT reports only what the session subscribed to.
    assert_eq!(kfd.dbg_trap_query_debug_event(me(), NEW).map_err(errno).err(), Some(libc::EAGAIN));
    kfd.dbg_trap_set_exceptions_enabled(me(), NEW).unwrap();
    let _ = drain(rd);
    let q3 = Queue::create(&kfd, 0);
    assert_eq!(drain(rd), 1, "CREATE_QUEUE pokes the debugger's fd for a subscribed EC_QUEUE_NEW");
    let ev = kfd.dbg_trap_query_debug_event(me(), NEW).unwrap();
    assert_eq!((ev.queue_id, ev.gpu_id, ev.exception_status), (q3.id, gpu(), NEW));
    assert_eq!(kfd.dbg_trap_query_debug_event(me(), NEW).map_err(errno).err(), Some(libc::EAGAIN));
    let mut ids = [q3.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    // Destroying raises EC_DEVICE_QUEUE_DELETE on the GPU.
    kfd.dbg_trap_resume_queues(me(), &mut ids).unwrap();
    kfd.destroy_queue(q3.id).unwrap();
    kfd.dbg_trap_set_exceptions_enabled(me(), 1 << (EC_DEVICE_QUEUE_DELETE - 1)).unwrap();
    let ev = kfd.dbg_trap_query_debug_event(me(), !0).unwrap();
    assert_eq!(
        (ev.queue_id, ev.gpu_id, ev.exception_status),
        (0, gpu(), 1 << (EC_DEVICE_QUEUE_DELETE - 1))
    );

    // A suspend clears its exception mask on the listed queues when one of them was suspended:
    // here q (suspendable) and a fresh q4 (new, refused) together.
    let q4 = Queue::create(&kfd, 0);
    let mut ids = [q4.id, q.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, NEW, 0).unwrap(), 1);
    assert_eq!(ids, [q4.id | INVALID, q.id]);
    let mut ids = [q4.id];
    assert_eq!(
        kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(),
        1,
        "q4's EC_QUEUE_NEW was cleared by the previous suspend"
    );

    // DISABLE resumes everything and clears every exception; afterwards the debug ops are
    // refused with EINVAL, DISABLE included.
    let q5 = Queue::create(&kfd, 0);
    kfd.dbg_trap_disable(me()).unwrap();
    let s = client::status(&device_dir()).unwrap();
    assert!(queue_lines(&s).iter().all(|l| l.contains(", active,")), "{s}");
    let mut ids = [q5.id];
    assert_eq!(
        kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).map_err(errno).err(),
        Some(libc::EINVAL)
    );
    assert_eq!(kfd.dbg_trap_disable(me()).map_err(errno).err(), Some(libc::EINVAL));
    // SAFETY: `wr` is open.
    kfd.dbg_trap_enable(me(), 0, unsafe { BorrowedFd::borrow_raw(wr) }).unwrap();
    let mut e = [QueueSnapshotEntry::default(); 4];
    assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut e).unwrap(), 4);
    assert!(e.iter().all(|e| e.exception_status == 0), "DISABLE cleared EC_QUEUE_NEW too: {e:?}");
    let mut ids = [q5.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    kfd.dbg_trap_disable(me()).unwrap();
    for id in [q.id, q2.id, q4.id, q5.id] {
        kfd.destroy_queue(id).unwrap();
    }
}

/// Enables a session and a queue that can be suspended.
fn suspendable(kfd: &Kfd, workgroups: u32) -> Queue {
    let q = Queue::create(kfd, workgroups);
    kfd.dbg_trap_query_exception_info(me(), q.id, EC_QUEUE_NEW, true, &mut [])
        .expect("clear EC_QUEUE_NEW");
    q
}

fn destroy_blocks() {
    let (_rd, wr) = pipe();
    let kfd = open(Some((0, wr)));
    // Released by a RESUME_QUEUES, then by a DBG_TRAP DISABLE (which resumes everything).
    for by_disable in [false, true] {
        let q = suspendable(&kfd, 0);
        let mut ids = [q.id];
        assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
        let (tx, rx) = mpsc::channel();
        let id = q.id;
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = kfd.destroy_queue(id);
                tx.send((r.map_err(errno), Instant::now())).unwrap();
            });
            assert!(
                rx.recv_timeout(Duration::from_millis(300)).is_err(),
                "DESTROY_QUEUE of a suspended queue returned at once"
            );
            // Other ioctls go on meanwhile.
            assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut []).unwrap(), 1);
            let released = Instant::now();
            if by_disable {
                kfd.dbg_trap_disable(me()).unwrap();
            } else {
                let mut ids = [id];
                assert_eq!(kfd.dbg_trap_resume_queues(me(), &mut ids).unwrap(), 1);
            }
            let (r, at) = rx
                .recv_timeout(Duration::from_secs(5))
                .expect("DESTROY_QUEUE still blocked after the resume");
            assert_eq!(r, Ok(()));
            assert!(at >= released);
        });
        assert_eq!(
            kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut []).map_err(errno),
            if by_disable { Err(libc::EINVAL) } else { Ok(0) }
        );
    }
    // The process going away (CloseKFD, here the thunk's hsaKmtCloseKFD): the wait ends with
    // EINTR, KFD's interrupted wait.
    // SAFETY: `wr` is open.
    kfd.dbg_trap_enable(me(), 0, unsafe { BorrowedFd::borrow_raw(wr) }).unwrap();
    let q = suspendable(&kfd, 0);
    let mut ids = [q.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| kfd.destroy_queue(q.id).map_err(errno));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished());
        // SAFETY: dlsym with a NUL-terminated name; the preloaded thunk defines it.
        let close = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"hsaKmtCloseKFD".as_ptr()) };
        assert!(!close.is_null(), "the thunk is not preloaded");
        // SAFETY: hsaKmtCloseKFD takes no argument and returns an HSAKMT_STATUS.
        let close: extern "C" fn() -> i32 = unsafe { std::mem::transmute(close) };
        assert_eq!(close(), 0);
        assert_eq!(waiter.join().unwrap(), Err(libc::EINTR));
    });
}

fn checks() {
    let kfd = Kfd::open().unwrap();
    let q = Queue::create(&kfd, 0);
    let mut ids = [q.id];
    // Neither the debug trap nor the runtime enabled: KFD checks the debug trap first.
    assert_eq!(
        kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).map_err(errno).err(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut []).map_err(errno).err(),
        Some(libc::EINVAL)
    );
    assert_eq!(kfd.dbg_trap_disable(me()).map_err(errno).err(), Some(libc::EINVAL));
    let (_rd, wr) = pipe();
    // SAFETY: `wr` is open.
    let info = kfd.dbg_trap_enable(me(), 0, unsafe { BorrowedFd::borrow_raw(wr) }).unwrap();
    assert_eq!(info.runtime_state, DEBUG_RUNTIME_STATE_DISABLED);
    // Debug trap on, runtime off: the hardware ops are refused with EPERM, the others work.
    assert_eq!(
        kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).map_err(errno).err(),
        Some(libc::EPERM)
    );
    assert_eq!(kfd.dbg_trap_resume_queues(me(), &mut ids).map_err(errno).err(), Some(libc::EPERM));
    assert_eq!(ids, [q.id], "a refused call leaves the array alone");
    assert_eq!(kfd.dbg_trap_get_queue_snapshot(me(), 0, &mut []).unwrap(), 1);
    // Another process is refused (not a ptrace child).
    assert_eq!(
        kfd.dbg_trap_get_queue_snapshot(1, 0, &mut []).map_err(errno).err(),
        Some(libc::EPERM)
    );
    kfd.dbg_trap_disable(me()).unwrap();
    // (KFD's RUNTIME_ENABLE waits for the debugger while a session is on: enable it before.)
    kfd.runtime_enable(0, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK).unwrap();
    // SAFETY: `wr` is open.
    let info = kfd.dbg_trap_enable(me(), 0, unsafe { BorrowedFd::borrow_raw(wr) }).unwrap();
    assert_eq!(info.runtime_state, DEBUG_RUNTIME_STATE_ENABLED);
    // The DISABLE cleared EC_QUEUE_NEW with every other exception.
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 1);
    assert_eq!(ids, [q.id]);
    kfd.dbg_trap_disable(me()).unwrap();
    // A dbg_fd that is not open: EBADF (through the raw call: a BorrowedFd must be open).
    let mut rinfo = RuntimeInfo::default();
    let enable = DbgTrapEnableArgs {
        exception_mask: 0,
        rinfo_ptr: &mut rinfo as *mut RuntimeInfo as u64,
        rinfo_size: 16,
        dbg_fd: 9999,
    };
    let mut args = DbgTrapArgs::new(me(), DbgTrapOp::Enable(enable));
    // SAFETY: rinfo_ptr points at a 16-byte RuntimeInfo that outlives the call.
    assert_eq!(unsafe { kfd.ioctl(&mut args) }.map_err(errno).err(), Some(libc::EBADF));
    kfd.destroy_queue(q.id).unwrap();
}

fn fault_fail() {
    let (_rd, wr) = pipe();
    let kfd = open(Some((0, wr)));
    let q = suspendable(&kfd, 0);
    // Preemption 0 succeeds; making the queue active again is no preemption.
    q.update(&kfd, 0, 7).expect("the first preemption succeeds");
    q.update(&kfd, 100, 7).expect("activation is no preemption");
    // Preemption 1 fails with EIO and changes nothing.
    assert_eq!(q.update(&kfd, 0, 7).map_err(errno), Err(libc::EIO));
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains("priority 7, active"));
    q.update(&kfd, 100, 9).expect("a priority update is no preemption");
    // SUSPEND: the ioctl succeeds with no queue suspended and the error bit on the queue; KFD
    // keeps the queue marked suspended (the device still runs it).
    let mut ids = [q.id, 999];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 0);
    assert_eq!(ids, [q.id | ERROR, 999 | INVALID]);
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains(", active,"));
    // The next remap (any UPDATE_QUEUE) follows KFD's view and takes it off.
    q.update(&kfd, 100, 9).expect("no preemption: KFD counts the queue inactive already");
    assert!(
        queue_lines(&client::status(&device_dir()).unwrap())[0].contains("priority 9, suspended,")
    );
    // Marked suspended: a RESUME counts it, and then it can be destroyed without blocking.
    let mut ids = [q.id];
    assert_eq!(kfd.dbg_trap_resume_queues(me(), &mut ids).unwrap(), 1);
    assert!(queue_lines(&client::status(&device_dir()).unwrap())[0].contains(", active,"));
    kfd.destroy_queue(q.id).unwrap();
}

fn fault_timeout() {
    let (_rd, wr) = pipe();
    let kfd = open(Some((0, wr)));
    let q = suspendable(&kfd, 0);
    let t = Instant::now();
    // The fence times out: the call stalls for the timeout, then KFD reports the queue reset.
    assert_eq!(q.update(&kfd, 0, 7).map_err(errno), Err(libc::EACCES));
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    // From then on UPDATE_QUEUE is refused with EACCES, at once.
    let t = Instant::now();
    assert_eq!(q.update(&kfd, 100, 3).map_err(errno), Err(libc::EACCES));
    assert!(t.elapsed() < Duration::from_millis(250), "{:?}", t.elapsed());
    // SUSPEND stalls too and reports the failure per queue.
    let t = Instant::now();
    let mut ids = [q.id];
    assert_eq!(kfd.dbg_trap_suspend_queues(me(), &mut ids, 0, 0).unwrap(), 0);
    assert_eq!(ids, [q.id | ERROR]);
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    let mut ids = [q.id];
    assert_eq!(kfd.dbg_trap_resume_queues(me(), &mut ids).unwrap(), 1);
    kfd.destroy_queue(q.id).unwrap();
}

fn fault_malformed() {
    let kfd = open(None);
    let q = Queue::create(&kfd, 0);
    q.update(&kfd, 0, 7).expect("no fault is injected");
    q.update(&kfd, 100, 7).unwrap();
    kfd.destroy_queue(q.id).unwrap();
}
