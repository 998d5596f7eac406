//! The process-wide emulator state behind the thunk: the emulated KFD, the topology it
//! publishes, and the thunk-side bookkeeping the real thunk keeps too (event page, queue
//! handles, SDMA read/write words).

use std::sync::{Arc, Mutex, OnceLock};

use xhsa_emu::config::Config;
use xhsa_emu::isa::target::Target;
use xhsa_emu::kfd::topology::{self, Node};
use xhsa_emu::kfd::Kfd;

/// An open emulated KFD.
pub struct Emu {
    pub kfd: Kfd,
    /// The `/dev/kfd` descriptor the thunk issues its ioctls on.
    pub fd: i32,
    pub nodes: Vec<Node>,
    /// Node ids of the GPUs, for `HsaPointerInfo.MappedNodes` (must outlive every query).
    pub gpu_nodes: &'static [u32],
    /// The signal-event page: address and KFD buffer handle, once created.
    pub event_page: Mutex<Option<(u64, u64)>>,
}

impl Emu {
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    /// KFD's gpu_id of a node (0 for the CPU node).
    pub fn gpu_id(&self, node: u32) -> Option<u32> {
        self.node(node).map(|n| n.gpu_id)
    }

    /// The node of a gpu_id.
    pub fn node_of_gpu(&self, gpu_id: u32) -> u32 {
        self.nodes.iter().position(|n| n.gpu_id == gpu_id && gpu_id != 0).unwrap_or(0) as u32
    }
}

struct Slot {
    emu: Option<Arc<Emu>>,
    opens: u32,
}

static STATE: Mutex<Slot> = Mutex::new(Slot { emu: None, opens: 0 });
static LOG: OnceLock<()> = OnceLock::new();

/// GPUs configured for this process (`XHSA_EMU_GPUS`, 1 to 8; 1 when unset or invalid).
pub fn configured_gpus() -> u32 {
    std::env::var("XHSA_EMU_GPUS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| (1..=8).contains(n))
        .unwrap_or(1)
}

/// The open emulator, if `hsaKmtOpenKFD` succeeded.
pub fn emu() -> Option<Arc<Emu>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner()).emu.clone()
}

/// The open emulator, opening it for code that reaches the KFD through its own `/dev/kfd`
/// descriptor before (or without) ROCr.
pub fn emu_or_open() -> Result<Arc<Emu>, String> {
    if let Some(e) = emu() {
        return Ok(e);
    }
    open()?;
    emu().ok_or_else(|| "the emulated KFD closed".to_string())
}

fn init_logging() {
    LOG.get_or_init(|| {
        let filter = std::env::var("XHSA_EMU_LOG").unwrap_or_else(|_| "warn".into());
        let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| {
            eprintln!("xhsa-emu: XHSA_EMU_LOG={filter:?} is not a valid filter (accepted: error, warn, info, debug, trace, or target=level lists); using warn");
            tracing_subscriber::EnvFilter::new("warn")
        });
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false);
        let alive = ThreadAlive {
            max: filter.max_level_hint().unwrap_or(tracing::level_filters::LevelFilter::TRACE),
        };
        let _ = tracing_subscriber::registry().with(filter).with(fmt).with(alive).try_init();
    });
}

/// Where this thread's logging stands: 0 not armed yet, 1 armed ([`ALIVE`] set up after the
/// formatter's thread-local buffer), 2 [`ALIVE`] destroyed (the thread is exiting).
const NOT_ARMED: u8 = 0;
const ARMED: u8 = 1;
const EXITING: u8 = 2;

thread_local! {
    // A const Cell needs no destructor: readable while the thread's other thread-locals are
    // being destroyed.
    static LOG_STATE: std::cell::Cell<u8> = const { std::cell::Cell::new(NOT_ARMED) };
    static ALIVE: AliveGuard = const { AliveGuard };
}

/// Its destruction marks the thread's logging as over.
struct AliveGuard;

impl Drop for AliveGuard {
    fn drop(&mut self) {
        LOG_STATE.with(|s| s.set(EXITING));
    }
}

/// A global filter that turns every event off once the thread's thread-locals are being
/// destroyed. ROCr 7.2's and HIP's static destructors (run by `exit` after the thread-locals of
/// the main thread are gone) still make KFD ioctls, and tracing-subscriber's formatter panics
/// when it reaches its destroyed thread-local buffer. The guard is set up after the formatter's
/// first event (this layer is the outermost, so its `on_event` runs after the formatter's):
/// thread-local destructors run in reverse order of registration, so the guard goes first and
/// the formatter is never reached without its buffer.
struct ThreadAlive {
    /// The most verbose level the filter lets through: callsites above it stay off for good,
    /// as the filter alone would leave them (no per-event question on hot paths).
    max: tracing::level_filters::LevelFilter,
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ThreadAlive {
    fn register_callsite(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if *meta.level() > self.max {
            return tracing::subscriber::Interest::never();
        }
        // Asked at every event: the answer changes when the thread exits.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(
        &self,
        _: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        LOG_STATE.with(|s| s.get()) != EXITING
    }

    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        LOG_STATE.with(|s| {
            if s.get() == NOT_ARMED && ALIVE.try_with(|_| ()).is_ok() {
                s.set(ARMED);
            }
        });
    }
}

/// `_amdgpu_r_debug` of the loaded ROCr, for kernel names: through the global scope, or, when
/// ROCr was loaded out of it (`dlopen(RTLD_LOCAL)` of a library that needs it, as Python loads
/// PyTorch), from ROCr's own handle.
fn rocr_r_debug() -> Option<u64> {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let mut p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_amdgpu_r_debug".as_ptr()) };
    if p.is_null() {
        // SAFETY: RTLD_NOLOAD returns a handle only to a library already loaded; its extra
        // reference is kept for the life of the process.
        let h = unsafe {
            libc::dlopen(c"libhsa-runtime64.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD)
        };
        if !h.is_null() {
            // SAFETY: dlsym on a valid handle with a NUL-terminated name.
            p = unsafe { libc::dlsym(h, c"_amdgpu_r_debug".as_ptr()) };
        }
    }
    (!p.is_null()).then_some(p as u64)
}

/// The ISA the emulated GPUs report, as the launcher says (`XHSA_EMU_ISA`); gfx90a when unset
/// (a ROCm 5.2 process started without the launcher). A value it does not know is reported once
/// and taken as gfx90a.
fn device_isa() -> Target {
    match std::env::var(xhsa_emu::launcher::env::ISA) {
        Err(_) => Target::Gfx90a,
        Ok(v) => Target::from_name(&v).unwrap_or_else(|| {
            tracing::error!("xhsa-emu: {}={v:?} is not an ISA the emulator runs; accepted: gfx90a, gfx942; using gfx90a", xhsa_emu::launcher::env::ISA);
            Target::Gfx90a
        }),
    }
}

/// hsaKmtOpenKFD: opens (or re-references) the emulated KFD.
pub fn open() -> Result<(), String> {
    init_logging();
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if s.emu.is_some() {
        s.opens += 1;
        return Ok(());
    }
    let (cfg, gpus) = Config::from_env().map_err(|e| e.to_string())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let nodes = topology::nodes(&cfg, gpus, xhsa_emu::sys::mem::host_ram(), cpus);
    let kfd = Kfd::open(Arc::new(cfg), gpus, rocr_r_debug(), device_isa())?;
    let gpu_nodes: &'static [u32] = Box::leak((1..=gpus).collect::<Vec<_>>().into_boxed_slice());
    let fd = crate::interpose::open_dev_kfd();
    s.emu = Some(Arc::new(Emu { kfd, fd, nodes, gpu_nodes, event_page: Mutex::new(None) }));
    s.opens = 1;
    Ok(())
}

/// hsaKmtCloseKFD: drops a reference; the last one stops the device threads.
pub fn close() -> bool {
    let mut s = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if s.emu.is_none() {
        return false;
    }
    s.opens -= 1;
    if s.opens == 0 {
        if let Some(e) = s.emu.take() {
            e.kfd.close();
            crate::interpose::close_dev_kfd(e.fd);
        }
    }
    true
}
