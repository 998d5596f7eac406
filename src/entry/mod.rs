//! The edge of libxhsa: the symbols the runtime and the dynamic linker call. Everything here
//! is `unsafe` FFI (raw pointers from C, function pointers from `dlsym` and the API tables),
//! kept thin: each entry point records what it saw through the safe [`crate::intercept`] state
//! and calls the real function exactly once, whatever happens in libxhsa.
//!
//! - [`tools_lib`]: `OnLoad` for `HSA_TOOLS_LIB`, patching the version-checked API tables.
//! - [`preload`]: the `hsa_*` functions interposed under `LD_PRELOAD`.
//! - [`kfd`]: `hsaKmtCreateQueue` (ROCm 5.x) and `ioctl` (`AMDKFD_IOC_CREATE_QUEUE`, ROCm 6.x),
//!   for the KFD queue ids.
//!
//! Loaded both ways at once, an application call passes the preloaded symbol and then the
//! patched table entry; a per-thread depth counter makes only the outer one count.

// The exported functions are called by C with C's contracts (valid pointers as the HSA, thunk
// and libc APIs define them); each one's SAFETY comments say what it relies on.
#![allow(clippy::missing_safety_doc)]

pub mod kfd;
pub mod preload;
pub mod tools_lib;

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::intercept::{Interception, Loading};
use crate::settings::Settings;

/// Process-wide state of libxhsa.
pub(crate) struct Global {
    pub settings: Settings,
    pub seen: Interception,
    /// An internal failure happened: pass everything through from now on.
    pub degraded: AtomicBool,
    announced_preload: AtomicBool,
    /// Whether `info` is enabled: decides at start-up whether the exit summary is written.
    summary_at_exit: bool,
}

impl Global {
    /// Whether libxhsa only forwards (XHSA_DISABLE=1, or after an internal failure).
    pub fn passthrough(&self) -> bool {
        self.settings.disable || self.degraded.load(Ordering::Relaxed)
    }

    pub fn announce(&self, how: Loading) {
        if how == Loading::Preload && self.announced_preload.swap(true, Ordering::Relaxed) {
            return;
        }
        let mode = if self.settings.disable { "pure passthrough (XHSA_DISABLE)" } else { "intercepting" };
        tracing::info!("xhsa: loaded through {}; {mode}", match how {
            Loading::Preload => "LD_PRELOAD",
            Loading::ToolsLib => "HSA_TOOLS_LIB",
        });
    }
}

static GLOBAL: OnceLock<Global> = OnceLock::new();

/// The state, set up on first use: logging (`XHSA_LOG`, to stderr) and settings, each bad
/// setting reported once, by name, with the accepted forms and the value used instead.
pub(crate) fn global() -> &'static Global {
    GLOBAL.get_or_init(|| {
        let filter = std::env::var("XHSA_LOG").unwrap_or_else(|_| "warn".into());
        let env_filter = tracing_subscriber::EnvFilter::try_new(&filter);
        let bad_log = env_filter.is_err();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(env_filter.unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")))
            .with_writer(std::io::stderr)
            .with_target(false)
            .try_init();
        if bad_log {
            tracing::error!("xhsa: XHSA_LOG={filter:?} is not a valid filter (accepted: error, warn, info, debug, trace, or target=level lists); using warn");
        }
        let (settings, errors) = Settings::from_process_env();
        for e in errors {
            tracing::error!("xhsa: {e}");
        }
        let summary_at_exit = tracing::enabled!(tracing::Level::INFO);
        Global { settings, seen: Interception::default(), degraded: AtomicBool::new(false), announced_preload: AtomicBool::new(false), summary_at_exit }
    })
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
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record(g))).is_err() && !g.degraded.swap(true, Ordering::Relaxed) {
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
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record(g))).is_err() && !g.degraded.swap(true, Ordering::Relaxed) {
        tracing::error!("xhsa: internal error; passing everything through from now on");
    }
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
    let _ = std::panic::catch_unwind(|| {
        if let Some(g) = GLOBAL.get().filter(|g| g.summary_at_exit) {
            let line = format!(" INFO xhsa: {}\n", g.seen.summary());
            // SAFETY: writing our own buffer to file descriptor 2.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
    });
}

#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;
