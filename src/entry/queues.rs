//! Shadow queues at the edge: what every interposed queue function does, shared by both loading
//! modes ([`super::preload`] passes ROCr's next definition, [`super::tools_lib`] the saved table
//! entry as `real`).
//!
//! - `hsa_queue_create` creates the hardware queue through `real` and hands the application a
//!   shadow (its own `amd_queue_t`, ring and doorbell signal, in GPU-readable memory), unless
//!   the queue type is one libxhsa does not schedule or building the shadow fails: then the
//!   hardware queue itself (passthrough for that queue).
//! - Index functions on a shadow act on the shadow's indices; everything else passes through.
//! - A store to a shadow doorbell runs a forwarding pass on the caller's thread
//!   ([`crate::path::scheduler::Scheduler::pass`]); any other signal store passes through after one
//!   lock-free lookup.
//! - CU mask, priority, profiling and inactivate apply to the hardware queue; destroy drains.
//! - The hardware queue's errors reach the application's callback with the shadow pointer.
//!
//! Each interposed function here takes `real`, the definition it replaces (`None` when it was
//! not found: then it fails as the HSA function would, or does nothing), and is `unsafe` with
//! the contract of the HSA function of its name (see [`super::preload`]): `real` must be that
//! function, and the other arguments must meet that function's HSA contract.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use hsa_sys::hsa::{
    amd_queue_t, hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t,
    hsa_signal_t, hsa_signal_value_t, hsa_status_t, HSA_QUEUE_TYPE_MULTI, HSA_QUEUE_TYPE_SINGLE,
    HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};

use super::memory::{self, ProcessMemory};

// SAFETY: the schedulers are given only rings and queues `queue_create` registered (libxhsa's
// shadows and the hardware queues behind them), and forget a queue before `hsa_queue_destroy`
// frees it.
static MEMORY: ProcessMemory = unsafe { ProcessMemory::new() };
use super::rocr::{rocr, RocrHardware};
use super::{depth, global, inside, outermost, Global};
use crate::entry::addr_map::AddrMap;
use crate::path::aql_ring::AqlRing;
use crate::path::scheduler::{Drain, Scheduler};
use crate::path::shadow_queue::{HwQueue, ShadowQueue, TRACKING_START};
use crate::path::window::Nanos;
use crate::settings::fault::Point;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::StreamPriority;

pub(crate) type QueueCallback =
    Option<unsafe extern "C" fn(hsa_status_t, *mut hsa_queue_t, *mut c_void)>;
pub(crate) type QueueCreateFn = unsafe extern "C" fn(
    hsa_agent_t,
    u32,
    hsa_queue_type32_t,
    QueueCallback,
    *mut c_void,
    u32,
    u32,
    *mut *mut hsa_queue_t,
) -> hsa_status_t;
pub(crate) type QueueFn = unsafe extern "C" fn(*mut hsa_queue_t) -> hsa_status_t;
pub(crate) type LoadIndexFn = unsafe extern "C" fn(*const hsa_queue_t) -> u64;
pub(crate) type StoreIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64);
pub(crate) type CasIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64, u64) -> u64;
pub(crate) type AddIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64) -> u64;
pub(crate) type SignalStoreFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
pub(crate) type SetPriorityFn =
    unsafe extern "C" fn(*mut hsa_queue_t, hsa_amd_queue_priority_t) -> hsa_status_t;
pub(crate) type CuSetMaskFn =
    unsafe extern "C" fn(*const hsa_queue_t, u32, *const u32) -> hsa_status_t;
pub(crate) type CuGetMaskFn =
    unsafe extern "C" fn(*const hsa_queue_t, u32, *mut u32) -> hsa_status_t;
/// `hsa_amd_queue_get_info` (ROCm 6.x): queue, `hsa_queue_info_attribute_t`, value.
pub(crate) type QueueGetInfoFn =
    unsafe extern "C" fn(*mut hsa_queue_t, u32, *mut libc::c_void) -> hsa_status_t;
pub(crate) type ProfilerFn = unsafe extern "C" fn(*mut hsa_queue_t, libc::c_int) -> hsa_status_t;

/// Offsets in `amd_queue_t` (its first member is the `hsa_queue_t`).
pub(crate) const WRITE_INDEX: u64 = offset_of!(amd_queue_t, write_dispatch_id) as u64;
pub(crate) const READ_INDEX: u64 = offset_of!(amd_queue_t, read_dispatch_id) as u64;
const BASE_ADDRESS: u64 = offset_of!(hsa_queue_t, base_address) as u64;
const DOORBELL: u64 = offset_of!(hsa_queue_t, doorbell_signal) as u64;
const SIZE: u64 = offset_of!(hsa_queue_t, size) as u64;
const QUEUE_PROPERTIES: u64 = offset_of!(amd_queue_t, queue_properties) as u64;
const AMD_QUEUE_BYTES: usize = std::mem::size_of::<amd_queue_t>();
/// ROCr's `SharedQueue` puts its `core::Queue*` right after the `amd_queue_t` (§6.6 of the
/// design note): the shadow carries the hardware queue's, so a call libxhsa did not intercept
/// acts on the hardware queue instead of crashing. Only in the ROCr versions whose layout is
/// known ([`rocr_layout_known`]); under any other ROCr no queue is shadowed.
const CORE_QUEUE_WORD: u64 = AMD_QUEUE_BYTES as u64;
/// The shadow ring starts this far into the shadow's allocation.
const RING_OFFSET: u64 = 4096;

/// Shadow `hsa_queue_t` address → queue id.
static SHADOWS: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// Shadow doorbell signal handle → queue id.
static DOORBELLS: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// Shadow `hsa_queue_t` address → hardware `hsa_queue_t` address.
static HW_OF: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Hardware queue address → libxhsa queue id of a queue passed through without a shadow (shown
/// on the board only).
static UNSHADOWED: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// KFD queue id + 1 → queue id, for the trace's preemption track (`XHSA_TRACE` only).
static KFD_QUEUES: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);

/// The application's error callback of a queue libxhsa created.
#[derive(Clone, Copy)]
struct AppCallback {
    callback: QueueCallback,
    data: usize,
    /// The shadow the application holds; 0 while it holds the hardware queue.
    shadow: u64,
}

static CALLBACKS: LazyLock<Mutex<BTreeMap<u64, AppCallback>>> = LazyLock::new(Default::default);

fn callbacks() -> std::sync::MutexGuard<'static, BTreeMap<u64, AppCallback>> {
    CALLBACKS.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn now_ns() -> Nanos {
    static START: LazyLock<Instant> = LazyLock::new(Instant::now);
    START.elapsed().as_nanos() as Nanos
}

/// Runs `f` on the scheduler of GPU `gpu` (blocking for its lock, or only if it is free when
/// `wait` is false), inside an intercepted call. A panic in `f` degrades every queue of that
/// GPU to passthrough, logged once. `None` when `f` did not run.
fn run<R>(
    gpu: usize,
    wait: bool,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let g = global();
    let gpu = g.gpus.get(gpu)?;
    // SAFETY: the scheduler holds only hardware queues and signals libxhsa created and destroys
    // them only after the scheduler forgot them; `tracking_done` reads its argument as a queue id.
    let hw = unsafe { RocrHardware::new(rocr()?, tracking_done) };
    inside(|| {
        let mut s = if wait {
            gpu.sched.lock().unwrap_or_else(|p| p.into_inner())
        } else {
            match gpu.sched.try_lock() {
                Ok(s) => s,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            }
        };
        let now = now_ns();
        match catch_unwind(AssertUnwindSafe(|| f(&mut s, &MEMORY, &hw, now))) {
            Ok(r) => {
                gpu.stalled.store(s.stalled(), Ordering::Relaxed);
                gpu.untracked.store(s.has_untracked(), Ordering::Relaxed);
                if let Some(t) = &gpu.trace {
                    trace_queues(t, &s, now);
                }
                Some(r)
            }
            Err(_) => {
                if !g.degraded.swap(true, Ordering::Relaxed) {
                    tracing::error!("xhsa: internal error in the scheduler; every queue passes through unscheduled from now on");
                }
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    s.degrade_all("libxhsa failed internally", &MEMORY, &hw)
                }));
                None
            }
        }
    })
}

/// `XHSA_TRACE`: records what the scheduler's use changed on the GPU's queue tracks (under the
/// scheduler's lock, so the tracer's own lock is free). A failure in the tracer turns tracing
/// off, logged once; the scheduler is not affected.
fn trace_queues(t: &Mutex<crate::trace::queue_track::QueueTracer>, s: &Scheduler, now: Nanos) {
    let Ok(mut t) = t.try_lock() else { return };
    if !t.recorder().sink().is_on() {
        return;
    }
    let views = s.queue_ids().into_iter().filter_map(|id| {
        let direct = s.queue(id).is_some_and(ShadowQueue::is_direct);
        Some(crate::trace::queue_track::QueueView { id, stats: s.stats(id, now)?, direct })
    });
    if catch_unwind(AssertUnwindSafe(|| t.observe(now, views))).is_err() {
        t.recorder().sink().disable();
        tracing::error!("xhsa: XHSA_TRACE: the tracer failed internally; nothing more is recorded (the file is closed at exit)");
    }
}

/// Marks the next priority change of queue `id` on the trace as the application's.
fn trace_application_priority(id: u64) {
    if let Some(t) = global().gpus.of_queue(id).and_then(|(_, g)| g.trace.as_ref()) {
        if let Ok(mut t) = t.try_lock() {
            t.application_priority(QueueId(id));
        }
    }
}

/// Marks the next priority change of queue `id` on the trace as an operator's. Called under
/// the scheduler's lock (as [`trace_application_priority`]), where the tracer's lock is free.
fn trace_operator_priority(id: u64) {
    if let Some(t) = global().gpus.of_queue(id).and_then(|(_, g)| g.trace.as_ref()) {
        if let Ok(mut t) = t.try_lock() {
            t.operator_priority(QueueId(id));
        }
    }
}

/// Runs `f` on the scheduler of GPU `gpu`, waiting for it; then the passes other threads asked
/// for meanwhile.
fn with_gpu<R>(
    gpu: usize,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let r = run(gpu, true, f);
    passes_wanted(gpu);
    r
}

/// Runs `f` on the scheduler of queue `id`'s GPU.
fn with_queue<R>(
    id: u64,
    f: impl FnOnce(&mut Scheduler, &ProcessMemory, &RocrHardware, Nanos) -> R,
) -> Option<R> {
    let (gpu, _) = global().gpus.of_queue(id)?;
    with_gpu(gpu, f)
}

/// A doorbell's forwarding pass on GPU `gpu`, never waiting: runs it if the scheduler is free,
/// else leaves it to the thread holding the scheduler (ROCr's async thread, the watcher or
/// another application thread), which runs it before letting go ([`passes_wanted`]). The
/// application's submission path thus never waits on a lock another thread holds.
fn doorbell_pass(gpu: usize) {
    let Some(g) = global().gpus.get(gpu) else { return };
    g.pass_wanted.store(true, Ordering::SeqCst);
    passes_wanted(gpu);
}

/// Runs the passes asked for while the scheduler of `gpu` was busy, as long as it is free, at
/// most [`PASSES_PER_CALL`](super::forwarder::PASSES_PER_CALL) of them; passes still wanted
/// after that go to the forwarder thread.
fn passes_wanted(gpu: usize) {
    passes(gpu, Some(super::forwarder::PASSES_PER_CALL));
}

/// The forwarder's: runs the passes asked for as long as the scheduler is free.
pub(crate) fn passes_until_done(gpu: usize) {
    passes(gpu, None);
}

fn passes(gpu: usize, limit: Option<u64>) {
    let Some(g) = global().gpus.get(gpu) else { return };
    let mut ran = 0u64;
    std::sync::atomic::fence(Ordering::SeqCst);
    while g.pass_wanted.load(Ordering::SeqCst) {
        if limit.is_some_and(|l| ran >= l) {
            super::forwarder::hand_off(gpu);
            break;
        }
        let done = run(gpu, false, |s, m, hw, now| {
            g.pass_wanted.store(false, Ordering::SeqCst);
            s.pass(m, hw, now)
        });
        if done.is_none() {
            // Busy: the holder sees the flag after it lets go (or rocr() is missing).
            break;
        }
        ran += 1;
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    if limit.is_some() {
        super::forwarder::MOST_PASSES_PER_CALL.fetch_max(ran, Ordering::Relaxed);
    }
}

/// The completion handler of tracking signals (ROCr's async thread); `arg` is the queue id.
///
/// # Safety
///
/// None beyond being called as an `hsa_amd_signal_async_handler`: `arg` is a queue id carried
/// as a pointer, never dereferenced.
unsafe extern "C" fn tracking_done(value: hsa_signal_value_t, arg: *mut c_void) -> bool {
    let id = QueueId(arg as u64);
    let _ = catch_unwind(|| with_queue(id.0, |s, m, hw, now| s.on_tracking(id, value, m, hw, now)));
    // Re-registered by the scheduler with a new value while barriers are outstanding.
    false
}

/// libxhsa's error callback on a hardware queue: the application's, with the queue pointer it
/// holds and its own data.
///
/// # Safety
///
/// Called by ROCr as the queue error callback libxhsa registered: `data` is the queue id
/// (never dereferenced), `source` the hardware queue. The application's callback is called as
/// ROCr would have called it, which `hsa_queue_create`'s caller made safe.
unsafe extern "C" fn hw_queue_error(
    status: hsa_status_t,
    source: *mut hsa_queue_t,
    data: *mut c_void,
) {
    let id = data as u64;
    let entry = catch_unwind(|| callbacks().get(&id).copied()).ok().flatten();
    let Some(e) = entry else { return };
    let shown = if e.shadow != 0 {
        let _ = catch_unwind(|| with_queue(id, |s, _, _, _| s.fail(QueueId(id))));
        e.shadow as *mut hsa_queue_t
    } else {
        source
    };
    if let Some(cb) = e.callback {
        // SAFETY: the application's callback with the arguments ROCr would have given it, the
        // queue being the one the application knows.
        unsafe { cb(status, shown, e.data as *mut c_void) };
    }
}

fn log_once(flag: &AtomicBool, f: impl FnOnce()) {
    if !flag.swap(true, Ordering::Relaxed) {
        f();
    }
}

/// `hsa_queue_create`: see the module doc.
///
/// # Safety
///
/// `real` is `None` or `hsa_queue_create`; the other arguments meet `hsa_queue_create`'s
/// contract: `queue` is null or valid for writing a queue pointer, `callback` is `None` or may
/// be called with the queue's errors and `data`.
// The arity is hsa_queue_create's C signature, plus `real`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn queue_create(
    real: Option<QueueCreateFn>,
    agent: hsa_agent_t,
    size: u32,
    kind: hsa_queue_type32_t,
    callback: QueueCallback,
    data: *mut c_void,
    private_size: u32,
    group_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    let g = global();
    let call = |cb: QueueCallback, d: *mut c_void, out: *mut *mut hsa_queue_t| {
        // SAFETY: `real` is hsa_queue_create and the caller's arguments meet its contract; a
        // callback libxhsa substitutes (hw_queue_error, with a queue id as data) meets it too.
        inside(|| unsafe { real(agent, size, kind, cb, d, private_size, group_size, out) })
    };
    if g.passthrough() || depth() > 0 || queue.is_null() {
        return call(callback, data, queue);
    }
    let cooperative = kind != HSA_QUEUE_TYPE_MULTI && kind != HSA_QUEUE_TYPE_SINGLE;
    if cooperative {
        static SAID: AtomicBool = AtomicBool::new(false);
        log_once(&SAID, || {
            tracing::info!(
                "xhsa: queues of type {kind} (cooperative) are passed through unscheduled"
            )
        });
    }
    if cooperative || !rocr_layout_known() {
        let status = call(callback, data, queue);
        outermost(|g| {
            // SAFETY: on success ROCr wrote the queue's pointer.
            let created = unsafe { queue.as_ref() }.filter(|q| !q.is_null());
            if let (HSA_STATUS_SUCCESS, Some(q)) = (status, created) {
                // SAFETY: the doorbell field of the amd_queue_t ROCr just created.
                g.seen.queue_created(unsafe { memory::read_u64(*q as u64 + DOORBELL) });
                show_unshadowed(g, agent, *q as u64, None);
            }
        });
        return status;
    }
    if let Some((lib, entry)) = whitelisted_caller(g) {
        // A passthrough library's own queue: the hardware queue itself, untouched.
        let status = call(callback, data, queue);
        outermost(|g| {
            // SAFETY: on success ROCr wrote the queue's pointer.
            let created = unsafe { queue.as_ref() }.filter(|q| !q.is_null());
            if let (HSA_STATUS_SUCCESS, Some(q)) = (status, created) {
                // SAFETY: the doorbell field of the amd_queue_t ROCr just created.
                g.seen.queue_created(unsafe { memory::read_u64(*q as u64 + DOORBELL) });
                WHITELISTED_QUEUES.fetch_add(1, Ordering::Relaxed);
                tracing::info!("xhsa: a queue created by {lib} passes through unscheduled (passthrough entry {entry:?})");
                show_unshadowed(g, agent, *q as u64, Some(&lib));
            }
        });
        return status;
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (cb, cb_data): (QueueCallback, *mut c_void) = if callback.is_some() {
        callbacks().insert(id, AppCallback { callback, data: data as usize, shadow: 0 });
        (Some(hw_queue_error), id as *mut c_void)
    } else {
        (None, std::ptr::null_mut())
    };
    let mut hw: *mut hsa_queue_t = std::ptr::null_mut();
    let status = call(cb, cb_data, &mut hw);
    if status != HSA_STATUS_SUCCESS || hw.is_null() {
        callbacks().remove(&id);
        return status;
    }
    let built = catch_unwind(AssertUnwindSafe(|| build_shadow(g, id, agent, hw as u64, size)))
        .unwrap_or_else(|_| Err("internal error".into()));
    let handed = match built {
        Ok(shadow) => {
            if let Some(e) = callbacks().get_mut(&id) {
                e.shadow = shadow;
            }
            shadow
        }
        Err(why) => {
            static SAID: AtomicBool = AtomicBool::new(false);
            log_once(&SAID, || {
                tracing::error!("xhsa: could not build a shadow queue ({why}); such queues are passed through unscheduled")
            });
            hw as u64
        }
    };
    // SAFETY: the doorbell field of the queue handed out: the shadow just built or ROCr's own.
    g.seen.queue_created(unsafe { memory::read_u64(handed + DOORBELL) });
    // SAFETY: the caller's out-parameter, non-null (checked above).
    unsafe { *queue = handed as *mut hsa_queue_t };
    HSA_STATUS_SUCCESS
}

/// Whether the running ROCr is a version whose private queue layout libxhsa knows (the shadow
/// copies the word after `amd_queue_t`, [`CORE_QUEUE_WORD`]; `api_table::shared_queue_layout_known`),
/// asked once. When it is not, one warning says so and every queue is passed through unshadowed.
fn rocr_layout_known() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        // Without ROCr's functions no shadow can be built anyway; build_shadow says why.
        let Some(r) = rocr() else { return true };
        let id = inside(|| r.build_id());
        match crate::entry::api_table::shared_queue_layout_known(id.as_deref()) {
            Ok(v) => {
                tracing::debug!(
                    "xhsa: ROCr {v} (build {:?}): known queue layout",
                    id.unwrap_or_default()
                );
                true
            }
            Err(why) => {
                tracing::warn!(
                    "xhsa: {why}; its queues are passed through unshadowed and unscheduled"
                );
                false
            }
        }
    })
}

/// The library that created each shadow queue, when the config has `[[library]]` rules.
static CREATORS: LazyLock<Mutex<BTreeMap<u64, String>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

/// The library creating queue `id` (for the config's `[[library]]` priority rules; only looked
/// up when there are any), remembered for later priority changes.
fn creating_library(g: &Global, id: u64) -> Option<String> {
    if g.settings.config.library_rules.is_empty() {
        return None;
    }
    let lib = super::origin::calling_library()?;
    CREATORS.lock().unwrap_or_else(|e| e.into_inner()).insert(id, lib.clone());
    Some(lib)
}

/// Queues handed to passthrough libraries unshadowed.
pub(crate) static WHITELISTED_QUEUES: AtomicU64 = AtomicU64::new(0);

/// The library calling `hsa_queue_create` and the passthrough entry it matches, if it does.
fn whitelisted_caller(g: &Global) -> Option<(String, String)> {
    if g.settings.passthrough.is_empty() {
        return None;
    }
    let lib = super::origin::calling_library()?;
    let entry = g.settings.passthrough.matches(&lib)?.to_string();
    Some((lib, entry))
}

/// Sets up the passthrough whitelist by code object on GPU `gpu`'s scheduler (when it names
/// any library).
fn init_kernel_filter(gpu: usize) {
    let g = global();
    if g.settings.passthrough.is_empty() {
        return;
    }
    let filter =
        crate::path::scheduler::KernelFilter(std::sync::Arc::new(super::origin::kernel_decision));
    with_gpu(gpu, |s, _, _, _| s.set_passthrough_kernels(filter));
}

/// Attaches the board of GPU `gpu` (KFD node `node`) to its scheduler and starts its
/// preemption watcher, once per GPU (see docs/board.md); the whitelist by code object is set up
/// there too. Without a board the GPU's scheduler schedules this process's queues only, after
/// one log line saying why.
fn attach_board(g: &Global, gpu: usize, node: Option<u32>) {
    let Some(this) = g.gpus.get(gpu) else { return };
    if this.board_tried.swap(true, Ordering::AcqRel) {
        return;
    }
    init_kernel_filter(gpu);
    let Some(node) = node else {
        tracing::warn!("xhsa: the GPU's KFD node id is unknown, so no board: only this process's queues are scheduled against each other");
        return;
    };
    let place = match crate::board::link::place_from_settings(&g.settings) {
        Ok(place) => place,
        Err(e) => {
            tracing::error!(
                "xhsa: {e}; no board: only this process's queues are scheduled against each other"
            );
            return;
        }
    };
    match crate::board::link::BoardLink::open(&place, node) {
        Ok(link) => {
            tracing::info!("xhsa: board {}", link.path().display());
            let link = std::sync::Arc::new(link);
            let waker = link.clone();
            with_gpu(gpu, |s, _, _, _| {
                s.attach_board(link.clone());
                s.set_notifier(crate::path::scheduler::Notifier(std::sync::Arc::new(move || {
                    waker.notify()
                })));
            });
            start_preemption(g, gpu, link);
        }
        Err(e) => tracing::warn!(
            "xhsa: {e}; no board: only this process's queues are scheduled against each other"
        ),
    }
}

/// Starts the process's watcher over the board of GPU `gpu`: preemption when it is on, through
/// the runtime's KFD descriptor when the interposer saw it, else through one of libxhsa's own
/// ([`super::unseen_kfd`]); and in every case the housekeeping and the controllers' requests
/// (`xhsactl`).
fn start_preemption(g: &Global, gpu: usize, link: std::sync::Arc<crate::board::link::BoardLink>) {
    let Some(this) = g.gpus.get(gpu) else { return };
    let mut settings = g.preempt_settings;
    let port: Box<dyn crate::preempt::KfdPort> =
        if settings.mode == crate::preempt::PreemptMode::Off {
            tracing::info!("xhsa: XHSA_PREEMPT=off: level 1 only");
            Box::new(crate::preempt::mechanism::NoKfd)
        } else if let Some(port) = g
            .seen
            .kfd_fd()
            .map(|fd| {
                // SAFETY: `fd` is the descriptor the runtime's CREATE_QUEUE ioctl was made on, open while
                // its queues exist; libxhsa never closes it.
                Box::new(unsafe { super::kfd_port::RuntimeKfd::borrow(fd) })
                    as Box<dyn crate::preempt::KfdPort>
            })
            .or_else(super::unseen_kfd::port)
        {
            match &g.trace {
                // XHSA_TRACE: the KFD calls and each queue's time off the GPU on the trace.
                Some(sink) => Box::new(crate::trace::kfd::TracedKfd::new(
                    port,
                    sink.recorder(),
                    gpu.min(u16::MAX as usize) as u16,
                    Box::new(|kfd_id| KFD_QUEUES.get(u64::from(kfd_id) + 1).map(QueueId)),
                )),
                None => port,
            }
        } else {
            settings.mode = crate::preempt::PreemptMode::Off;
            Box::new(crate::preempt::mechanism::NoKfd)
        };
    let pre =
        std::sync::Arc::new(crate::preempt::Preemption::new(settings, port, Box::new(now_ns)));
    pre.set_control(std::sync::Arc::new(move |q, c| control(gpu, q, c)));
    pre.set_track_untracked(std::sync::Arc::new(move || {
        if global().gpus.get(gpu).is_some_and(|g| g.untracked.load(Ordering::Relaxed)) {
            doorbell_pass(gpu);
        }
    }));
    if this.preempt.set(pre.clone()).is_ok()
        && crate::preempt::watcher::spawn(pre, link)
        && settings.mode != crate::preempt::PreemptMode::Off
    {
        tracing::info!(
            "xhsa: preemption {} (starvation bound {} ms, budget {} %)",
            settings.mode,
            settings.max_preempted_ns / 1_000_000,
            settings.budget_pct
        );
    }
}

/// Carries out a controller's request (`xhsactl`) for queue `q` of GPU `gpu`, on the watcher's
/// thread; returns the `ACK_*` status and its detail.
fn control(gpu: usize, q: QueueId, c: xhsa_board::layout::Control) -> (u32, i32) {
    use xhsa_board::layout::{
        ACK_ABOVE_CAP, ACK_APPLIED, ACK_BAD_LEVEL, ACK_UNKNOWN_OP, OP_CLEAR_PRIORITY, OP_PAUSE,
        OP_RESUME, OP_SET_PRIORITY,
    };
    let g = global();
    match c.op {
        OP_SET_PRIORITY | OP_CLEAR_PRIORITY => {
            let level = if c.op == OP_SET_PRIORITY {
                let Some(level) = xhsa_model::priority::Level::new(i64::from(c.level)) else {
                    return (ACK_BAD_LEVEL, 0);
                };
                if let Err(cap) = g.settings.control_allows(c.uid, level) {
                    tracing::warn!("xhsa: queue {q}: uid {} asked for level {}, above control_max_level {}: refused", c.uid, c.level, cap.get());
                    return (ACK_ABOVE_CAP, cap.get());
                }
                Some(level)
            } else {
                None
            };
            // Marked under the scheduler's lock, just before the change: the tracer observes
            // after every use of the scheduler, so a mark made before taking the lock could be
            // used up by another thread's observation and the change put down as libxhsa's.
            let changed = with_gpu(gpu, |s, _, _, _| {
                trace_operator_priority(q.0);
                s.set_override(q, level).map(|p| (p, s.queue(q).map(|x| x.hw.queue)))
            });
            match changed {
                Some(Some((p, hw))) => {
                    if let (Some(r), Some(hw)) = (rocr(), hw) {
                        inside(|| r.set_hw_priority(hw, p.hardware()));
                    }
                    tracing::info!("xhsa: queue {q}: priority {p} set by uid {}", c.uid);
                    (ACK_APPLIED, p.level().get())
                }
                _ => (ACK_UNKNOWN_OP, 0),
            }
        }
        OP_PAUSE | OP_RESUME => {
            let paused = c.op == OP_PAUSE;
            let done = with_gpu(gpu, |s, m, hw, now| {
                s.set_paused(q, paused, now);
                if !paused {
                    s.pass(m, hw, now);
                }
            });
            tracing::info!(
                "xhsa: queue {q}: {} by uid {}",
                if paused { "paused" } else { "resumed" },
                c.uid
            );
            if done.is_some() {
                (ACK_APPLIED, 0)
            } else {
                (ACK_UNKNOWN_OP, 0)
            }
        }
        _ => (ACK_UNKNOWN_OP, 0),
    }
}

/// Lets the preemption watcher take the hardware queue of `id` off the GPU when it must.
fn register_preemptable(g: &Global, gpu: usize, id: u64, hw_ring: &AqlRing) {
    let Some(pre) = g.gpus.get(gpu).and_then(|x| x.preempt.get()) else { return };
    let Some(k) = g.seen.kfd_queue_at(hw_ring.base) else {
        if !super::unseen_kfd::register(pre, id, hw_ring.base) {
            tracing::debug!(
                "xhsa: queue {id}: no KFD queue seen at ring {:#x}; it cannot be preempted",
                hw_ring.base
            );
        }
        return;
    };
    if let (Some(kfd_id), Some(ring_bytes), Some(priority), Some(percentage)) =
        (k.id(), k.ring_bytes, k.priority, k.percentage)
    {
        if g.trace.is_some() {
            // KFD reuses the ids of destroyed queues: the newest owner replaces the old entry.
            KFD_QUEUES.insert(u64::from(kfd_id) + 1, id);
        }
        pre.add(crate::preempt::Target {
            queue: QueueId(id),
            kfd_id,
            ring_base: hw_ring.base,
            ring_bytes,
            priority,
            percentage,
        });
    }
}

/// Builds and registers the shadow of hardware queue `hw`; returns its address.
fn build_shadow(
    g: &Global,
    id: u64,
    agent: hsa_agent_t,
    hw: u64,
    size: u32,
) -> Result<u64, String> {
    if g.faults.hit(Point::ShadowCreate) {
        return Err("injected by XHSA_FAULT_INJECT".into());
    }
    let r = rocr().ok_or("a ROCr function libxhsa needs was not found")?;
    if size == 0 || !size.is_power_of_two() {
        return Err(format!("unexpected queue size {size}"));
    }
    // SAFETY: fields of the amd_queue_t ROCr just created for this shadow, which nobody writes
    // (ROCr set them at creation).
    let (hw_size, hw_base, hw_doorbell) = unsafe {
        (
            memory::read_u32(hw + SIZE) as u64,
            memory::read_u64(hw + BASE_ADDRESS),
            memory::read_u64(hw + DOORBELL),
        )
    };
    let hw_ring = AqlRing { base: hw_base, slots: hw_size, amd_queue: hw };
    let hwq = HwQueue { queue: hw, ring: hw_ring, doorbell: hw_doorbell };
    if hw_size == 0 || !hw_size.is_power_of_two() || hw_ring.base == 0 {
        return Err(format!(
            "the hardware queue has an unexpected ring ({hw_size} slots at {:#x})",
            hw_ring.base
        ));
    }
    let bytes = RING_OFFSET as usize + size as usize * crate::path::packet::PACKET_SIZE;
    let mem = inside(|| r.alloc_gpu_visible(agent, bytes))
        .ok_or("no GPU-readable fine-grained system memory")?;
    let Some(doorbell) = inside(|| r.signal_create(0)) else {
        inside(|| r.free(mem));
        return Err("hsa_signal_create failed".into());
    };
    let Some(tracking) = inside(|| r.signal_create(TRACKING_START)) else {
        inside(|| {
            r.signal_destroy(doorbell);
            r.free(mem);
        });
        return Err("hsa_signal_create failed".into());
    };
    // The hardware queue's amd_queue_t (type, features, id, apertures, max CU/wave ids,
    // properties), then the shadow's own ring, doorbell, size and indices.
    // SAFETY: `mem` is the shadow's allocation (AMD_QUEUE_BYTES of amd_queue_t, then `size`
    // packets at RING_OFFSET), just made and known to nobody else; `hw` is ROCr's live
    // amd_queue_t of AMD_QUEUE_BYTES, whose fields read here ROCr set at creation.
    unsafe {
        memory::copy(hw, mem, AMD_QUEUE_BYTES);
        memory::write_u64(mem + CORE_QUEUE_WORD, memory::read_u64(hw + CORE_QUEUE_WORD));
        memory::invalidate_ring(mem + RING_OFFSET, size as u64);
        memory::write_u64(mem + BASE_ADDRESS, mem + RING_OFFSET);
        memory::write_u64(mem + DOORBELL, doorbell);
        memory::write_u32(mem + SIZE, size);
        memory::write_u64(mem + WRITE_INDEX, 0);
        memory::write_u64(mem + READ_INDEX, 0);
    }
    let shadow = AqlRing { base: mem + RING_OFFSET, slots: size as u64, amd_queue: mem };
    let node = inside(|| r.node_id(agent));
    let gpu = g.gpus.for_node(node).map(|(i, _)| i);
    if let Some(gpu) = gpu {
        attach_board(g, gpu, node);
    }
    let library = creating_library(g, id);
    let priority = g.settings.priority_for(StreamPriority::Normal, &g.identity, library.as_deref());
    let added = gpu.is_some_and(|gpu| {
        super::gpus::GPU_OF.insert(id, gpu as u64 + 1)
            && with_gpu(gpu, |s, _, _, _| {
                s.add(ShadowQueue::new(QueueId(id), shadow, hwq, tracking), priority)
            }) == Some(true)
    });
    if added && SHADOWS.insert(mem, id) && HW_OF.insert(mem, hw) && DOORBELLS.insert(doorbell, id) {
        register_preemptable(g, gpu.unwrap_or(0), id, &hw_ring);
        let hw_priority = priority.hardware();
        if hw_priority != StreamPriority::Normal && !inside(|| r.set_hw_priority(hw, hw_priority)) {
            tracing::warn!("xhsa: queue {id}: ROCr refused hardware priority {hw_priority:?}; it keeps the default");
        }
        tracing::debug!("xhsa: queue {id}: shadow {mem:#x} ({size} packets) over hardware queue {hw:#x} ({hw_size} packets), {priority:?}");
        return Ok(mem);
    }
    SHADOWS.remove(mem);
    HW_OF.remove(mem);
    DOORBELLS.remove(doorbell);
    with_queue(id, |s, _, _, now| s.remove(QueueId(id), now));
    super::gpus::GPU_OF.remove(id);
    inside(|| {
        r.signal_destroy(doorbell);
        r.signal_destroy(tracking);
        r.free(mem);
    });
    Err("too many queues".into())
}

/// How long `hsa_queue_destroy` waits for the hardware to take and complete what libxhsa held.
const DESTROY_PATIENCE: Duration = Duration::from_secs(30);

/// `hsa_queue_destroy`.
///
/// # Safety
///
/// `real` is `None` or `hsa_queue_destroy`; `queue` was returned by `hsa_queue_create`, is not
/// destroyed, and no other thread uses it during or after the call.
pub(crate) unsafe fn queue_destroy(real: Option<QueueFn>, queue: *mut hsa_queue_t) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    if let Some(id) = SHADOWS.get(queue as u64) {
        let r = catch_unwind(AssertUnwindSafe(|| destroy_shadow(real, queue as u64, QueueId(id))));
        return r.unwrap_or(HSA_STATUS_ERROR);
    }
    outermost(|g| {
        if !queue.is_null() {
            // SAFETY: the caller's queue, not destroyed yet (hsa_queue_destroy's contract).
            g.seen.queue_destroyed(unsafe { memory::read_u64(queue as u64 + DOORBELL) });
        }
    });
    if let Some(id) = UNSHADOWED.get(queue as u64) {
        UNSHADOWED.remove(queue as u64);
        let _ = catch_unwind(|| with_queue(id, |s, _, _, _| s.remove_unshadowed(QueueId(id))));
        super::gpus::GPU_OF.remove(id);
    }
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
    inside(|| unsafe { real(queue) })
}

/// Shows a queue libxhsa passes through without a shadow on its GPU's board (state
/// `passthrough`), so that the monitor sees every queue; `library` created it.
fn show_unshadowed(g: &Global, agent: hsa_agent_t, queue: u64, library: Option<&str>) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let Some(r) = rocr() else { return };
        let node = inside(|| r.node_id(agent));
        let Some((gpu, _)) = g.gpus.for_node(node) else { return };
        attach_board(g, gpu, node);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if super::gpus::GPU_OF.insert(id, gpu as u64 + 1) && UNSHADOWED.insert(queue, id) {
            let priority = g.settings.priority_for(StreamPriority::Normal, &g.identity, library);
            with_gpu(gpu, |s, _, _, _| s.add_unshadowed(QueueId(id), priority));
        }
    }));
    if r.is_err() {
        tracing::debug!("xhsa: a passthrough queue could not be shown on the board");
    }
}

fn destroy_shadow(real: QueueFn, shadow: u64, id: QueueId) -> hsa_status_t {
    let Some(r) = rocr() else { return HSA_STATUS_ERROR };
    let hw = HW_OF.get(shadow).unwrap_or(0);
    // SAFETY: the doorbell field of a shadow libxhsa built and has not freed.
    let doorbell = unsafe { memory::read_u64(shadow + DOORBELL) };
    // A queue off the GPU goes back first (its last packets must run; KFD blocks destroying a
    // suspended queue) and is never taken off again.
    if let Some(pre) = global().gpus.of_queue(id.0).and_then(|(_, g)| g.preempt.get()) {
        pre.forget(id);
    }
    with_queue(id.0, |s, m, _, now| s.close(id, m, now));
    let deadline = Instant::now() + DESTROY_PATIENCE;
    let wait = loop {
        match with_queue(id.0, |s, m, hw, _| s.drain_step(id, m, hw)) {
            Some(Drain::Done { wait_for }) => break wait_for,
            Some(Drain::NeedRoom) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            _ => {
                tracing::warn!("xhsa: {id}: the hardware queue stayed full; destroying it with packets still held");
                break None;
            }
        }
    };
    if let Some((signal, target)) = wait {
        loop {
            if inside(|| r.signal_wait_at_most(signal, target, 100)) <= target {
                break;
            }
            let failed = with_queue(id.0, |s, _, _, _| s.queue(id).is_some_and(|q| q.failed))
                .unwrap_or(true);
            if failed {
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!("xhsa: {id}: its last packets did not complete within {DESTROY_PATIENCE:?}; destroying it anyway");
                break;
            }
        }
    }
    // The last completion handler normally runs right after the final barrier; give it a moment,
    // so that the tracking signal is not destroyed while ROCr's async thread still holds a
    // handler on it (a signal with a pending handler is leaked instead, see below).
    let armed = || {
        with_queue(id.0, |s, _, _, _| s.queue(id).is_some_and(|q| q.tracking.armed && !q.failed))
            .unwrap_or(false)
    };
    let settle = Instant::now() + Duration::from_millis(200);
    while armed() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(1));
    }
    SHADOWS.remove(shadow);
    HW_OF.remove(shadow);
    DOORBELLS.remove(doorbell);
    callbacks().remove(&id.0);
    let removed = with_queue(id.0, |s, _, _, now| s.remove(id, now)).flatten();
    super::gpus::GPU_OF.remove(id.0);
    // SAFETY: the hardware queue libxhsa created for this shadow; nothing of libxhsa uses it now.
    let status = inside(|| unsafe { real(hw as *mut hsa_queue_t) });
    inside(|| {
        r.signal_destroy(doorbell);
        match &removed {
            // Observed under ROCr 5.2.3 (xhsa-emu): destroying a signal that still has an async
            // handler registered (the tracking barrier of a failed queue never completes) was
            // followed, intermittently, by a later hsa_queue_destroy blocking forever in ROCr's
            // queue teardown. Such a signal is leaked (one per failed or inactivated queue).
            Some(q) if q.tracking.armed => tracing::debug!(
                "xhsa: {id}: tracking signal kept (a completion handler is still registered)"
            ),
            Some(q) => r.signal_destroy(q.tracking.signal),
            None => {}
        }
        r.free(shadow);
    });
    global().seen.queue_destroyed(doorbell);
    status
}

/// `hsa_queue_inactivate`.
///
/// # Safety
///
/// `real` is `None` or `hsa_queue_inactivate`; `queue` was returned by `hsa_queue_create` and is
/// not destroyed.
pub(crate) unsafe fn queue_inactivate(
    real: Option<QueueFn>,
    queue: *mut hsa_queue_t,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    let target = match SHADOWS.get(queue as u64) {
        Some(id) => {
            // Back on the GPU first and forgotten: an inactive queue is never taken off again,
            // and KFD may give its id to a new queue.
            if let Some(pre) = global().gpus.of_queue(id).and_then(|(_, g)| g.preempt.get()) {
                pre.forget(QueueId(id));
            }
            with_queue(id, |s, _, _, _| s.inactivate(QueueId(id)));
            HW_OF.get(queue as u64).unwrap_or(0) as *mut hsa_queue_t
        }
        None => queue,
    };
    // SAFETY: the caller's queue, or the hardware queue behind its shadow.
    inside(|| unsafe { real(target) })
}

/// The queue ROCr should see: the hardware queue behind a shadow, or the queue itself.
fn hw_of(queue: u64) -> u64 {
    HW_OF.get(queue).unwrap_or(queue)
}

/// A queue-index load.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn load_index(
    real: Option<LoadIndexFn>,
    queue: *const hsa_queue_t,
    field: u64,
    order: Ordering,
) -> u64 {
    if SHADOWS.contains(queue as u64) {
        // SAFETY: an index field of a live shadow (the caller's queue, # Safety).
        let v = unsafe { memory::index(queue as u64 + field) }.load(order);
        if field == READ_INDEX {
            if let Some((gpu, g)) =
                SHADOWS.get(queue as u64).and_then(|id| global().gpus.of_queue(id))
            {
                if g.stalled.load(Ordering::Relaxed) {
                    doorbell_pass(gpu);
                }
            }
        }
        return v;
    }
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
    real.map_or(0, |f| unsafe { f(queue) })
}

/// `hsa_queue_store_write_index_*`.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn store_write_index(
    real: Option<StoreIndexFn>,
    queue: *const hsa_queue_t,
    value: u64,
    order: Ordering,
) {
    if SHADOWS.contains(queue as u64) {
        // SAFETY: the write index of a live shadow (the caller's queue, # Safety).
        unsafe { memory::index(queue as u64 + WRITE_INDEX) }.store(value, order);
        return;
    }
    if let Some(f) = real {
        // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
        unsafe { f(queue, value) }
    }
}

/// `hsa_queue_cas_write_index_*`: returns the value found.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn cas_write_index(
    real: Option<CasIndexFn>,
    queue: *const hsa_queue_t,
    expected: u64,
    value: u64,
    order: Ordering,
) -> u64 {
    if SHADOWS.contains(queue as u64) {
        let failure = match order {
            Ordering::AcqRel | Ordering::Acquire => Ordering::Acquire,
            _ => Ordering::Relaxed,
        };
        // SAFETY: the write index of a live shadow (the caller's queue, # Safety).
        let r = unsafe { memory::index(queue as u64 + WRITE_INDEX) }
            .compare_exchange(expected, value, order, failure);
        return r.unwrap_or_else(|found| found);
    }
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
    real.map_or(0, |f| unsafe { f(queue, expected, value) })
}

/// `hsa_queue_add_write_index_*`: returns the previous value.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn add_write_index(
    real: Option<AddIndexFn>,
    queue: *const hsa_queue_t,
    value: u64,
    order: Ordering,
) -> u64 {
    if SHADOWS.contains(queue as u64) {
        // SAFETY: the write index of a live shadow (the caller's queue, # Safety).
        return unsafe { memory::index(queue as u64 + WRITE_INDEX) }.fetch_add(value, order);
    }
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
    real.map_or(0, |f| unsafe { f(queue, value) })
}

/// `hsa_queue_store_read_index_*`: illegal on hardware queues (ROCr asserts); on a shadow it is
/// ignored with a warning.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn store_read_index(
    real: Option<StoreIndexFn>,
    queue: *const hsa_queue_t,
    value: u64,
) {
    if SHADOWS.contains(queue as u64) {
        static SAID: AtomicBool = AtomicBool::new(false);
        log_once(&SAID, || {
            tracing::warn!("xhsa: hsa_queue_store_read_index on a queue's read index is not allowed on hardware queues; ignored")
        });
        return;
    }
    if let Some(f) = real {
        // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
        unsafe { f(queue, value) }
    }
}

/// `hsa_signal_store_*` and `hsa_signal_silent_store_*`.
///
/// # Safety
///
/// `real` is `None` or the HSA function this call replaces; `signal` was created by the runtime
/// and is not destroyed.
pub(crate) unsafe fn signal_store(
    real: Option<SignalStoreFn>,
    signal: hsa_signal_t,
    value: hsa_signal_value_t,
) {
    if let Some(id) = DOORBELLS.get(signal.handle) {
        let g = global();
        g.seen.doorbell_stores.fetch_add(1, Ordering::Relaxed);
        if let Some((gpu, _)) = g.gpus.of_queue(id) {
            doorbell_pass(gpu);
        }
        return;
    }
    outermost(|g| g.seen.signal_store(signal.handle));
    if let Some(real) = real {
        // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
        inside(|| unsafe { real(signal, value) });
    }
}

/// `hsa_amd_queue_set_priority`: the hardware queue gets it (KFD priority), and the shadow's
/// stream priority in libxhsa's rings.
///
/// # Safety
///
/// `real` is `None` or `hsa_amd_queue_set_priority`; `queue` was returned by `hsa_queue_create`
/// and is not destroyed.
pub(crate) unsafe fn set_priority(
    real: Option<SetPriorityFn>,
    queue: *mut hsa_queue_t,
    priority: hsa_amd_queue_priority_t,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    outermost(|g| g.seen.priority_call());
    let id = SHADOWS.get(queue as u64);
    // A shadow's hardware queue gets the hardware side of its effective priority (the operator's
    // level can override the application's choice, `Priority::hardware`); a value HSA does not
    // define goes to ROCr as it is, to be refused there.
    let effective = match (id, StreamPriority::from_hsa(priority)) {
        (Some(_), Some(stream)) => {
            let g = global();
            let library = id.and_then(|id| {
                CREATORS.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
            });
            Some(g.settings.priority_for(stream, &g.identity, library.as_deref()))
        }
        _ => None,
    };
    let hw_priority = effective.map_or(priority, |p| p.hardware().to_hsa());
    // SAFETY: the caller's queue or the hardware queue behind it.
    let status = inside(|| unsafe { real(hw_of(queue as u64) as *mut hsa_queue_t, hw_priority) });
    if let (HSA_STATUS_SUCCESS, Some(p)) = (status, StreamPriority::from_hsa(hw_priority)) {
        super::unseen_kfd::hw_priority_set(hw_of(queue as u64), p);
    }
    if let (Some(id), HSA_STATUS_SUCCESS, Some(p)) = (id, status, effective) {
        with_queue(id, |s, _, _, _| {
            trace_application_priority(id);
            s.set_priority(QueueId(id), p)
        });
    }
    status
}

/// `hsa_amd_queue_cu_set_mask`: on the hardware queue.
///
/// # Safety
///
/// `real` is `None` or `hsa_amd_queue_cu_set_mask`; `queue` was returned by `hsa_queue_create`
/// and is not destroyed; `mask` holds `count` bits readable for the call.
pub(crate) unsafe fn cu_set_mask(
    real: Option<CuSetMaskFn>,
    queue: *const hsa_queue_t,
    count: u32,
    mask: *const u32,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    // SAFETY: the caller's arguments, with the hardware queue behind a shadow.
    inside(|| unsafe { real(hw_of(queue as u64) as *const hsa_queue_t, count, mask) })
}

/// `hsa_amd_queue_cu_get_mask`: from the hardware queue.
///
/// # Safety
///
/// `real` is `None` or `hsa_amd_queue_cu_get_mask`; `queue` was returned by `hsa_queue_create`
/// and is not destroyed; `mask` has room for `count` bits, writable for the call.
pub(crate) unsafe fn cu_get_mask(
    real: Option<CuGetMaskFn>,
    queue: *const hsa_queue_t,
    count: u32,
    mask: *mut u32,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    // SAFETY: the caller's arguments, with the hardware queue behind a shadow (alive while the
    // shadow is).
    inside(|| unsafe { real(hw_of(queue as u64) as *const hsa_queue_t, count, mask) })
}

/// `hsa_amd_queue_get_info` (ROCm 6.x): asked of the hardware queue behind a shadow, whose agent
/// and doorbell these are (ROCr would read a shadow as one of its own queues).
///
/// # Safety
///
/// `real` is `None` or `hsa_amd_queue_get_info`; `queue` was returned by `hsa_queue_create` and
/// is not destroyed; `value` is writable for the attribute's type.
pub(crate) unsafe fn queue_get_info(
    real: Option<QueueGetInfoFn>,
    queue: *mut hsa_queue_t,
    attribute: u32,
    value: *mut libc::c_void,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    // SAFETY: the caller's arguments, with the hardware queue behind a shadow (alive while the
    // shadow is).
    inside(|| unsafe { real(hw_of(queue as u64) as *mut hsa_queue_t, attribute, value) })
}

/// `hsa_amd_profiling_set_profiler_enabled`: on the hardware queue (whose `amd_queue_t` the
/// packet processor reads); the profiling bit is mirrored into the shadow.
///
/// # Safety
///
/// `real` is `None` or `hsa_amd_profiling_set_profiler_enabled`; `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
pub(crate) unsafe fn set_profiler_enabled(
    real: Option<ProfilerFn>,
    queue: *mut hsa_queue_t,
    enable: libc::c_int,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    let shadow = queue as u64;
    let hw = hw_of(shadow);
    // SAFETY: the caller's queue, or the hardware queue behind its shadow (alive while the
    // shadow is).
    let status = inside(|| unsafe { real(hw as *mut hsa_queue_t, enable) });
    if hw != shadow && status == HSA_STATUS_SUCCESS {
        // SAFETY: the properties word of the caller's live shadow and of the hardware queue
        // behind it (ROCr just updated it and the shadow mirrors it).
        unsafe {
            memory::write_u32(shadow + QUEUE_PROPERTIES, memory::read_u32(hw + QUEUE_PROPERTIES))
        };
    }
    status
}
