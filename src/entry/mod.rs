//! The edge of libxhsa: the symbols the runtime and the dynamic linker call, and the
//! bookkeeping they keep. The FFI here is `unsafe` (raw pointers from C, function pointers from
//! `dlsym` and the API tables) and kept thin: each entry point records what it saw through the
//! safe [`seen`] state and calls the real function exactly once, whatever happens in libxhsa.
//!
//! The FFI:
//! - [`tools_lib`]: `OnLoad` for `HSA_TOOLS_LIB`, patching the version-checked API tables.
//! - [`preload`]: the `hsa_*` functions interposed under `LD_PRELOAD`.
//! - [`kfd`]: `hsaKmtCreateQueue` (ROCm 5.x) and `ioctl` (`AMDKFD_IOC_CREATE_QUEUE`, ROCm 6.x),
//!   for the KFD queue ids.
//! - [`queues`]: what each interposed queue function does (shadow queues), shared by both modes.
//! - [`rocr`]: the ROCr functions libxhsa calls itself, and the scheduler's hardware through them.
//! - [`memory`]: the only raw reads and writes of queue memory.
//! - `origin`: which library a queue's creator or a dispatched kernel comes from (`dladdr`).
//! - `kfd_port`: libxhsa's own KFD calls for preemption, on the runtime's `/dev/kfd`.
//! - `gpus`: one scheduler per GPU the process uses; `topology`: a GPU's CUs and XCCs (sysfs).
//!
//! The safe bookkeeping of the edge (each `#![forbid(unsafe_code)]`, unit-tested without a
//! runtime):
//! - [`seen`]: what the interception saw (queues, doorbell stores, priority calls, KFD queues).
//! - [`api_table`]: the API tables `OnLoad` receives and which entries may be replaced.
//! - [`addr_map`]: the lock-free lookup of shadow queues and doorbells on every call.
//!
//! What it is not: no scheduling decision (those are safe code in [`crate::path`],
//! [`crate::board`] and [`crate::preempt`], which the edge drives).
//!
//! Loaded both ways at once, an application call passes the preloaded symbol and then the
//! patched table entry; a per-thread depth counter makes only the outer one act (a call on a
//! shadow queue or doorbell is handled entirely by the first and never reaches the second).

pub mod addr_map;
pub mod api_table;
mod clock;
pub mod code_objects;
mod completions;
mod forwarder;
mod gpus;
pub mod kfd;
mod kfd_port;
mod lifecycle;
mod log;
mod memory;
mod origin;
pub mod preload;
pub mod queue_layout;
pub(crate) mod queues;
mod rocr;
pub mod seen;
mod symbol;
pub mod tools_lib;
mod topology;
mod unseen_kfd;

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::entry::seen::{Interception, Loading};
use crate::preempt::PreemptSettings;
use crate::settings::fault::{FaultPlan, ENV_FAULT_INJECT};
use xhsa_model::settings::config::{ProcessIdentity, Settings};

/// Process-wide state of libxhsa.
pub(crate) struct Global {
    pub settings: Settings,
    pub seen: Interception,
    /// An internal failure happened: create no more shadows, and existing ones pass through.
    pub degraded: AtomicBool,
    /// The level-1 scheduler of the process's shadow queues, one per GPU.
    pub gpus: gpus::Gpus,
    /// `XHSA_FAULT_INJECT`.
    pub faults: Arc<FaultPlan>,
    /// This process, for `[[process]]` priority rules.
    pub identity: ProcessIdentity,
    /// `XHSA_PREEMPT` and its bounds.
    pub preempt_settings: PreemptSettings,
    /// `XHSA_TRACE`: the process's trace, when one is written.
    pub trace: Option<Arc<crate::trace::Sink>>,

    announced_preload: AtomicBool,
    /// Whether `info` is enabled: decides at start-up whether the exit summary is written.
    summary_at_exit: bool,
    /// Whether `warn` and `error` are enabled: the trace's last words at exit.
    warn_at_exit: bool,
    error_at_exit: bool,
}

impl Global {
    /// Whether libxhsa creates no shadow queues and only forwards (XHSA_DISABLE=1, or after an
    /// internal failure). Shadows that already exist keep being served, unscheduled.
    pub fn passthrough(&self) -> bool {
        self.settings.disable || self.degraded.load(Ordering::Relaxed)
    }

    pub fn announce(&self, how: Loading) {
        if how == Loading::Preload && self.announced_preload.swap(true, Ordering::Relaxed) {
            return;
        }
        let mode =
            if self.settings.disable { "pure passthrough (XHSA_DISABLE)" } else { "intercepting" };
        tracing::info!(
            "xhsa: loaded through {}; {mode}",
            match how {
                Loading::Preload => "LD_PRELOAD",
                Loading::ToolsLib => "HSA_TOOLS_LIB",
            }
        );
    }
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

/// The process is exiting: libxhsa's exit handler ran (thread-local state, the logger's
/// included, may be gone from here on).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether the process is exiting (see [`EXITING`]): nothing may be logged through `tracing`.
pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// The state, set up on first use: logging (`XHSA_LOG`, to stderr) and settings, each bad
/// setting reported once, by name, with the accepted forms and the value used instead.
pub(crate) fn global() -> &'static Global {
    GLOBAL.get_or_init(|| {
        // A filter EnvFilter would take but that names no level libxhsa logs at (`infoo` reads
        // as a target name) would silence it entirely, errors included: validated first.
        let (filter, bad_log) = xhsa_model::settings::config::log_filter(
            std::env::var(xhsa_model::settings::config::ENV_LOG).ok().as_deref(),
        );
        let env_filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(xhsa_model::settings::config::DEFAULT_LOG)
        });
        let fmt = tracing_subscriber::fmt()
            .with_env_filter(env_filter)
            .with_writer(std::io::stderr)
            .with_target(false)
            .finish();
        let _ = tracing::subscriber::set_global_default(log::ExitSafe(fmt));
        if let Some(e) = bad_log {
            tracing::error!("xhsa: {e}");
        }
        let (settings, errors) = Settings::from_process_env();
        for e in errors {
            tracing::error!("xhsa: {e}");
        }
        let (faults, errors) =
            FaultPlan::parse(&std::env::var(ENV_FAULT_INJECT).unwrap_or_default());
        for e in errors {
            tracing::error!("xhsa: {e}");
        }
        if !faults.is_empty() {
            tracing::warn!(
                "xhsa: {ENV_FAULT_INJECT} is set: internal failures will be injected (test knob)"
            );
        }
        let faults = Arc::new(faults);
        let (preempt_settings, errors) = PreemptSettings::from_process_env();
        for e in errors {
            tracing::error!("xhsa: {e}");
        }
        let identity = ProcessIdentity {
            exe: std::fs::read_link("/proc/self/exe").ok().map(|p| p.display().to_string()),
            comm: std::fs::read_to_string("/proc/self/comm").ok().map(|s| s.trim_end().to_string()),
        };
        let trace = start_trace(&identity);
        lifecycle::note_start();
        forwarder::set_work(queues::forwarded_work);
        let summary_at_exit = tracing::enabled!(tracing::Level::INFO);
        Global {
            gpus: gpus::Gpus::new(settings.window, settings.reserve, faults.clone(), trace.clone()),
            trace,
            warn_at_exit: tracing::enabled!(tracing::Level::WARN),
            error_at_exit: tracing::enabled!(tracing::Level::ERROR),
            settings,
            seen: Interception::default(),
            degraded: AtomicBool::new(false),
            faults,
            identity,
            preempt_settings,
            announced_preload: AtomicBool::new(false),
            summary_at_exit,
        }
    })
}

/// Starts `XHSA_TRACE` when it is set (each bad setting reported once; a file that cannot be
/// opened leaves tracing off after one error line).
fn start_trace(identity: &ProcessIdentity) -> Option<Arc<crate::trace::Sink>> {
    let (settings, errors) = crate::trace::TraceSettings::from_process_env();
    for e in errors {
        tracing::error!("xhsa: {e}");
    }
    let path = settings.file.clone()?;
    // libxhsa's clock is CLOCK_MONOTONIC, the trace's: the traces of several processes line up
    // without an offset.
    let after = clock::now_ns();
    let offset = 0;
    let process = identity.comm.clone().unwrap_or_else(|| "process".into());
    match crate::trace::start(&settings, std::process::id(), offset, &process, after) {
        Ok(sink) => {
            if sink.is_some() {
                tracing::info!(
                    "xhsa: tracing to {} (buffers of {} events)",
                    path.display(),
                    settings.buffer
                );
            }
            sink
        }
        Err(e) => {
            tracing::error!("xhsa: {e}; no trace is written");
            None
        }
    }
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Runs `record` (libxhsa's bookkeeping around a call) unless this thread is already inside an
/// intercepted call or libxhsa passes through; a panic in it degrades libxhsa to passthrough,
/// logged once. The real call is made by the caller either way.
pub(crate) fn outermost(record: impl FnOnce(&Global)) {
    let g = global();
    if g.passthrough() || DEPTH.with(|d| d.get()) > 0 {
        return;
    }
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record(g))).is_err()
        && !g.degraded.swap(true, Ordering::Relaxed)
    {
        tracing::error!("xhsa: internal error; passing everything through from now on");
    }
}

/// Runs `record` unless libxhsa passes through, whatever the call depth: for the thunk and ioctl
/// layer, which an HSA call reaches from inside (its records do not double the HSA ones).
pub(crate) fn record(record: impl FnOnce(&Global)) {
    let g = global();
    if g.passthrough() {
        return;
    }
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record(g))).is_err()
        && !g.degraded.swap(true, Ordering::Relaxed)
    {
        tracing::error!("xhsa: internal error; passing everything through from now on");
    }
}

/// How many intercepted calls this thread is inside.
pub(crate) fn depth() -> u32 {
    DEPTH.with(|d| d.get())
}

/// Marks this thread as inside an intercepted call while `f` runs.
pub(crate) fn inside<T>(f: impl FnOnce() -> T) -> T {
    DEPTH.with(|d| d.set(d.get() + 1));
    let r = f();
    DEPTH.with(|d| d.set(d.get() - 1));
    r
}

/// The next definition of `name` after libxhsa (`RTLD_NEXT`), cached; when the library that
/// defines it was loaded out of the global scope (a `dlopen(RTLD_LOCAL)` plugin, as Python
/// loads PyTorch's extension and with it HIP and ROCr), `RTLD_NEXT` cannot see it, so `lib`,
/// which must already be loaded, is asked directly. 0 when neither finds it.
pub(crate) fn next_symbol(cell: &AtomicUsize, lib: &CStr, name: &CStr) -> usize {
    let p = cell.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT looks after this library.
    let mut p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if p == 0 {
        // SAFETY: RTLD_NOLOAD only returns a handle to a library already loaded (or null);
        // the extra reference it takes is kept for the life of the process, as the symbol is.
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            // SAFETY: dlsym on a valid handle with a NUL-terminated name.
            p = unsafe { libc::dlsym(h, name.as_ptr()) } as usize;
        }
    }
    if p != 0 {
        cell.store(p, Ordering::Release);
    }
    p
}

/// Writes what libxhsa saw when the process ends (when `info` is enabled). At this point
/// thread-local storage is gone, so `tracing` cannot be used: the line goes straight to stderr,
/// and nothing here may panic into the exit path.
extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Relaxed);
    let _ = std::panic::catch_unwind(|| {
        let Some(g) = GLOBAL.get() else { return };
        if lifecycle::is_forked_child() {
            // The parent's queues, board slots and trace: none of them this process's to touch
            // (and a lock the parent's threads held at the fork would never be let go).
            return;
        }
        // The scheduler may be held by a thread the exit interrupted: then its part is left out
        // (and its board slots are cleared by the next reader that finds this process gone).
        // Never leave a queue off the GPU.
        let mut pre = crate::preempt::watcher::PreemptSummary::default();
        let mut total = crate::path::scheduler::Summary::default();
        let mut expedited = 0;
        let mut complete = true;
        let mut costs: Vec<String> = Vec::new();
        for (_, gpu) in g.gpus.iter() {
            if let Some(p) = gpu.preempt.get() {
                if !p.put_all_back_at_exit() {
                    // The watcher never let go (stuck in a KFD call): its counters are left out.
                    complete = false;
                    continue;
                }
                let s = p.summary();
                pre.preemptions += s.preemptions;
                pre.restores += s.restores;
                pre.off_now += s.off_now;
                pre.off_ns += s.off_ns;
                pre.holds += s.holds;
                if s.wake_to_call.is_some() {
                    pre.wake_to_call = s.wake_to_call;
                }
                let c = p.costs();
                if !c.is_empty() {
                    costs.push(c);
                }
            }
            // A scheduler still held after EXIT_WAIT (by a thread the exit interrupted) is left
            // out (its board slots are cleared by the next reader that finds this process gone).
            // A thread of this process may be in a short forwarding pass or completion right now:
            // that one is waited for.
            match crate::exit_lock::lock_within(&gpu.sched, crate::preempt::watcher::EXIT_WAIT) {
                Some(mut s) => {
                    // This process's queues stop counting as work for the others at once.
                    s.leave_board();
                    let t = s.summary(clock::now_ns());
                    total.queues += t.queues;
                    total.taken += t.taken;
                    total.forwarded += t.forwarded;
                    total.held += t.held;
                    total.in_flight += t.in_flight;
                    total.throttle_ns += t.throttle_ns;
                    total.degraded += t.degraded;
                    expedited += s.expedited();
                }
                None => complete = false,
            }
        }
        let preempt = g.gpus.iter().any(|(_, gpu)| gpu.preempt.get().is_some_and(|p| p.enabled())).then(|| {
            let lat = pre.wake_to_call.map_or(String::new(), |(p50, p99, n)| format!(", wake to KFD call P50 {} us P99 {} us ({n})", p50 / 1000, p99 / 1000));
            let costs = if costs.is_empty() { String::new() } else { format!("; measured: {}", costs.join("; ")) };
            format!("; preemption: {} taken off, {} put back, {} off now, {} us off in all, {} held in libxhsa{lat}{costs}", pre.preemptions, pre.restores, pre.off_now, pre.off_ns / 1000, pre.holds)
        });
        let shadow = if complete || total.queues > 0 {
            let t = total;
            format!(
                "; shadow queues: {} created, {} packets taken, {} packets forwarded, {} held, {} in flight, {} ns throttled, {} degraded; passthrough libraries: {} queues, {} dispatches; at most {} passes per application call",
                t.queues,
                t.taken,
                t.forwarded,
                t.held,
                t.in_flight,
                t.throttle_ns,
                t.degraded,
                queues::WHITELISTED_QUEUES.load(std::sync::atomic::Ordering::Relaxed),
                expedited,
                forwarder::MOST_PASSES_PER_CALL.load(std::sync::atomic::Ordering::Relaxed)
            )
        } else {
            String::new()
        };
        let mut lines = Vec::new();
        if g.summary_at_exit {
            lines.push(format!(
                " INFO xhsa: {}{shadow}{}\n",
                g.seen.summary(),
                preempt.unwrap_or_default()
            ));
        }
        if let Some(t) = &g.trace {
            // The rest of the trace, written on this thread, and the JSON closed. Nothing to say
            // for a forked child (the trace is its parent's).
            let f = t.finish(clock::now_ns());
            if !f.skipped {
                if let (Some(why), true) = (&f.failure, g.error_at_exit) {
                    lines.push(format!(" ERROR xhsa: XHSA_TRACE: {why}\n"));
                }
                if f.dropped > 0 && !f.drop_logged && g.warn_at_exit {
                    lines.push(format!(" WARN xhsa: XHSA_TRACE: {} events were dropped (the writer fell behind; marked in the trace)\n", f.dropped));
                }
                if g.summary_at_exit {
                    lines.push(format!(
                        " INFO xhsa: trace: {} events written, {} dropped\n",
                        f.written, f.dropped
                    ));
                }
            }
        }
        for line in lines {
            // SAFETY: writing our own buffer to file descriptor 2.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
    });
}

#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;
