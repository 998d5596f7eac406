//! The ROCr functions libxhsa itself calls (resolved at run time, never linked), and what is
//! built on them: the [`Hardware`] of the scheduler, the memory of shadow queues.
//!
//! For an entry libxhsa patched in the API table, the saved original is used (it is ROCr's own
//! implementation, or the next tool's); otherwise ROCr's exported symbol.

use std::ffi::{c_void, CStr};
use std::sync::atomic::AtomicUsize;
use std::sync::OnceLock;

use hsa_sys::hsa::{
    amd_signal_t, hsa_agent_t, hsa_amd_memory_pool_t, hsa_queue_t, hsa_signal_t,
    hsa_signal_value_t, hsa_status_t, HSA_AGENT_INFO_DEVICE, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
    HSA_AMD_SEGMENT_GLOBAL, HSA_AMD_SYSTEM_INFO_BUILD_VERSION, HSA_DEVICE_TYPE_CPU,
    HSA_STATUS_SUCCESS,
};

use super::next_symbol;
use crate::entry::api_table::Hook;
use crate::path::scheduler::Hardware;
use crate::path::shadow_queue::HwQueue;
use xhsa_model::ids::QueueId;

const ROCR: &CStr = c"libhsa-runtime64.so.1";

/// `HSA_STATUS_CU_MASK_REDUCED` (hsa_ext_amd.h, the same in ROCm 5.x-7.x).
const CU_MASK_REDUCED: hsa_status_t = 44;

type LoadIndexFn = unsafe extern "C" fn(*const hsa_queue_t) -> u64;
type AddIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64) -> u64;
type StoreFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
type SignalCreateFn = unsafe extern "C" fn(
    hsa_signal_value_t,
    u32,
    *const hsa_agent_t,
    *mut hsa_signal_t,
) -> hsa_status_t;
type SignalDestroyFn = unsafe extern "C" fn(hsa_signal_t) -> hsa_status_t;
type SignalLoadFn = unsafe extern "C" fn(hsa_signal_t) -> hsa_signal_value_t;
type AgentCallback = Option<unsafe extern "C" fn(hsa_agent_t, *mut c_void) -> hsa_status_t>;
type IterateAgentsFn = unsafe extern "C" fn(AgentCallback, *mut c_void) -> hsa_status_t;
type AgentInfoFn = unsafe extern "C" fn(hsa_agent_t, u32, *mut c_void) -> hsa_status_t;
type PoolCallback =
    Option<unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t>;
type IteratePoolsFn = unsafe extern "C" fn(hsa_agent_t, PoolCallback, *mut c_void) -> hsa_status_t;
type PoolInfoFn = unsafe extern "C" fn(hsa_amd_memory_pool_t, u32, *mut c_void) -> hsa_status_t;
type PoolAllocateFn =
    unsafe extern "C" fn(hsa_amd_memory_pool_t, usize, u32, *mut *mut c_void) -> hsa_status_t;
type PoolFreeFn = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;
type SetPriorityFn = unsafe extern "C" fn(*mut hsa_queue_t, u32) -> hsa_status_t;
type CuSetMaskFn = unsafe extern "C" fn(*const hsa_queue_t, u32, *const u32) -> hsa_status_t;
type AllowAccessFn =
    unsafe extern "C" fn(u32, *const hsa_agent_t, *const u32, *const c_void) -> hsa_status_t;
type SystemInfoFn = unsafe extern "C" fn(u32, *mut c_void) -> hsa_status_t;

/// The ROCr functions libxhsa calls.
pub(crate) struct Rocr {
    add_write_index: AddIndexFn,
    load_read_index: LoadIndexFn,
    load_write_index: LoadIndexFn,
    store_screlease: StoreFn,
    signal_create: SignalCreateFn,
    signal_destroy: SignalDestroyFn,
    signal_load: SignalLoadFn,
    iterate_agents: IterateAgentsFn,
    agent_info: AgentInfoFn,
    iterate_pools: IteratePoolsFn,
    pool_info: PoolInfoFn,
    pool_allocate: PoolAllocateFn,
    pool_free: PoolFreeFn,
    allow_access: AllowAccessFn,
    /// Optional: without it hardware queues keep ROCr's default priority.
    set_priority: Option<SetPriorityFn>,
    /// Optional: without it hardware queues keep every CU (no CU partitions).
    cu_set_mask: Option<CuSetMaskFn>,
    /// Optional: without it ROCr's version is unknown (and no queue is shadowed).
    system_info: Option<SystemInfoFn>,
}

/// A function of ROCr by name, or the saved original of the table entry libxhsa patched.
///
/// # Safety
///
/// `T` must be the C type of the HSA function `name` (and of the table entry `hook`).
pub(crate) unsafe fn resolve<T: super::symbol::CFn>(name: &CStr, hook: Option<Hook>) -> Option<T> {
    let saved = hook.map_or(0, super::symbol::original);
    let p = if saved != 0 {
        saved
    } else {
        // A private cache per call site is not needed: this runs once per process.
        let cell = AtomicUsize::new(0);
        next_symbol(&cell, ROCR, name)
    };
    // SAFETY: `p` is 0 or ROCr's function `name` (or its table entry), whose C type is `T` (the
    // caller's obligation), and ROCr stays loaded while libxhsa runs.
    unsafe { super::symbol::typed(p) }
}

static ROCR_FNS: OnceLock<Option<Rocr>> = OnceLock::new();

/// The functions, resolved on first use (after `hsa_init`, so after `OnLoad`); `None` if one is
/// missing.
pub(crate) fn rocr() -> Option<&'static Rocr> {
    ROCR_FNS
        .get_or_init(|| {
            // SAFETY: each field's type is the C type of the HSA function named beside it (the
            // `*Fn` types follow hsa.h / hsa_ext_amd.h).
            Some(unsafe {
                Rocr {
                    add_write_index: resolve(
                        c"hsa_queue_add_write_index_scacq_screl",
                        Some(Hook::AddWriteIndexScacqScrel),
                    )?,
                    load_read_index: resolve(
                        c"hsa_queue_load_read_index_scacquire",
                        Some(Hook::LoadReadIndexScacquire),
                    )?,
                    load_write_index: resolve(
                        c"hsa_queue_load_write_index_relaxed",
                        Some(Hook::LoadWriteIndexRelaxed),
                    )?,
                    store_screlease: resolve(
                        c"hsa_signal_store_screlease",
                        Some(Hook::SignalStoreScrelease),
                    )?,
                    signal_create: resolve(c"hsa_signal_create", None)?,
                    signal_destroy: resolve(c"hsa_signal_destroy", None)?,
                    signal_load: resolve(c"hsa_signal_load_scacquire", None)?,
                    iterate_agents: resolve(c"hsa_iterate_agents", None)?,
                    agent_info: resolve(c"hsa_agent_get_info", None)?,
                    iterate_pools: resolve(c"hsa_amd_agent_iterate_memory_pools", None)?,
                    pool_info: resolve(c"hsa_amd_memory_pool_get_info", None)?,
                    pool_allocate: resolve(c"hsa_amd_memory_pool_allocate", None)?,
                    pool_free: resolve(c"hsa_amd_memory_pool_free", None)?,
                    allow_access: resolve(c"hsa_amd_agents_allow_access", None)?,
                    set_priority: resolve(
                        c"hsa_amd_queue_set_priority",
                        Some(Hook::QueueSetPriority),
                    ),
                    cu_set_mask: resolve(c"hsa_amd_queue_cu_set_mask", Some(Hook::QueueCuSetMask)),
                    system_info: resolve(c"hsa_system_get_info", None),
                }
            })
        })
        .as_ref()
}

/// The scheduler's [`Hardware`], through ROCr. Its methods take the [`HwQueue`]s and signal
/// handles the scheduler holds; the obligation that they are live is taken once, by whoever
/// makes one ([`RocrHardware::new`]).
pub(crate) struct RocrHardware {
    rocr: &'static Rocr,
    on_tracking: super::completions::Handler,
}

impl RocrHardware {
    /// ROCr's functions for a scheduler, with `on_tracking` as the completion handler of its
    /// tracking signals (run by [`super::completions`]).
    ///
    /// # Safety
    ///
    /// Every [`HwQueue`] the holder passes is a hardware queue libxhsa created through ROCr and
    /// has not destroyed (libxhsa destroys it only after its shadow left the scheduler), and
    /// every signal handle is a signal libxhsa created and has not destroyed (tracking signals
    /// are destroyed through [`super::completions::retire`]).
    pub(crate) unsafe fn new(
        rocr: &'static Rocr,
        on_tracking: super::completions::Handler,
    ) -> RocrHardware {
        RocrHardware { rocr, on_tracking }
    }
}

impl Hardware for RocrHardware {
    fn reserve(&self, hw: &HwQueue, n: u64) -> u64 {
        // SAFETY: a live hardware queue libxhsa created (`RocrHardware::new`).
        unsafe { (self.rocr.add_write_index)(hw.queue as *const hsa_queue_t, n) }
    }

    fn read_index(&self, hw: &HwQueue) -> u64 {
        // SAFETY: a live hardware queue libxhsa created (`RocrHardware::new`).
        unsafe { (self.rocr.load_read_index)(hw.queue as *const hsa_queue_t) }
    }

    fn write_index(&self, hw: &HwQueue) -> u64 {
        // SAFETY: a live hardware queue libxhsa created (`RocrHardware::new`).
        unsafe { (self.rocr.load_write_index)(hw.queue as *const hsa_queue_t) }
    }

    fn ring(&self, hw: &HwQueue, index: u64) {
        // The doorbell signal of a live hardware queue (`RocrHardware::new`).
        self.rocr.signal_store(hw.doorbell, index as hsa_signal_value_t);
    }

    fn arm(&self, queue: QueueId, signal: u64, below: i64) -> bool {
        super::completions::arm(self.rocr, queue, signal, below, self.on_tracking)
    }

    fn signal_value(&self, signal: u64) -> i64 {
        // A live signal libxhsa created (`RocrHardware::new`).
        self.rocr.signal_value(signal)
    }
}

impl Rocr {
    /// The KFD node id of `agent` (the same in every process of the machine): the key of its
    /// board.
    pub fn node_id(&self, agent: hsa_agent_t) -> Option<u32> {
        let mut node: u32 = u32::MAX;
        // SAFETY: HSA_AMD_AGENT_INFO_DRIVER_NODE_ID writes a uint32_t.
        let st = unsafe {
            (self.agent_info)(
                agent,
                HSA_AMD_AGENT_INFO_DRIVER_NODE_ID,
                (&mut node as *mut u32).cast(),
            )
        };
        (st == HSA_STATUS_SUCCESS && node != u32::MAX).then_some(node)
    }

    /// An agent's `uint32_t` attribute; `None` when the runtime does not know it (an attribute of a
    /// later ROCm, e.g. `HSA_AMD_AGENT_INFO_NUM_XCC` on 5.x).
    pub fn agent_u32(&self, agent: hsa_agent_t, attribute: u32) -> Option<u32> {
        let mut v: u32 = 0;
        // SAFETY: the attributes libxhsa asks this way write a uint32_t (hsa_ext_amd.h).
        let st = unsafe { (self.agent_info)(agent, attribute, (&mut v as *mut u32).cast()) };
        (st == HSA_STATUS_SUCCESS).then_some(v)
    }

    /// Whether the runtime is initialized (`hsa_system_get_info` does not answer
    /// `HSA_STATUS_ERROR_NOT_INITIALIZED`); `None` when ROCr's function is missing.
    pub fn initialized(&self) -> Option<bool> {
        let f = self.system_info?;
        let mut major: u16 = 0;
        // SAFETY: HSA_SYSTEM_INFO_VERSION_MAJOR writes a uint16_t.
        let st = unsafe {
            f(hsa_sys::hsa::HSA_SYSTEM_INFO_VERSION_MAJOR, (&mut major as *mut u16).cast())
        };
        Some(st != hsa_sys::hsa::HSA_STATUS_ERROR_NOT_INITIALIZED)
    }

    /// ROCr's build identifier (`HSA_AMD_SYSTEM_INFO_BUILD_VERSION`, e.g.
    /// `"1.5.0-local-build-unknown"`), or `None` when ROCr gives none.
    pub fn build_id(&self) -> Option<String> {
        let f = self.system_info?;
        let mut id: *const libc::c_char = std::ptr::null();
        // SAFETY: for this attribute ROCr writes a `const char*` (a static string of its own).
        let st = unsafe {
            f(HSA_AMD_SYSTEM_INFO_BUILD_VERSION, (&mut id as *mut *const libc::c_char).cast())
        };
        if st != HSA_STATUS_SUCCESS || id.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string ROCr keeps for the life of the process.
        Some(unsafe { CStr::from_ptr(id) }.to_string_lossy().into_owned())
    }

    /// Gives hardware queue `hw` the priority `p` (KFD's queue priority); false if ROCr refused.
    pub fn set_hw_priority(&self, hw: u64, p: xhsa_model::priority::StreamPriority) -> bool {
        let Some(f) = self.set_priority else { return false };
        // SAFETY: a live hardware queue libxhsa created; a valid hsa_amd_queue_priority_t.
        unsafe { f(hw as *mut hsa_queue_t, p.to_hsa()) == HSA_STATUS_SUCCESS }
    }

    /// Gives hardware queue `hw` the CUs of `mask` (bit `i` of word `i / 32`: KFD's CU mask,
    /// `hsa_amd_queue_cu_set_mask`); false if ROCr refused or cannot. ROCr's "reduced" answer (the
    /// process-wide `HSA_CU_MASK` took some CUs away) is a success.
    pub fn set_hw_cu_mask(&self, hw: u64, mask: &[u32]) -> bool {
        let Some(f) = self.cu_set_mask else { return false };
        let Ok(bits) = u32::try_from(mask.len() * 32) else { return false };
        // SAFETY: a live hardware queue libxhsa created; `mask` holds `bits` bits for the call.
        let status = unsafe { f(hw as *const hsa_queue_t, bits, mask.as_ptr()) };
        status == HSA_STATUS_SUCCESS || status == CU_MASK_REDUCED
    }

    /// A new signal with `value` and no consumers (an interrupt signal in ROCr).
    pub fn signal_create(&self, value: i64) -> Option<u64> {
        let mut s = hsa_signal_t { handle: 0 };
        // SAFETY: plain out-parameter call.
        let st = unsafe { (self.signal_create)(value, 0, std::ptr::null(), &mut s) };
        (st == HSA_STATUS_SUCCESS && s.handle != 0).then_some(s.handle)
    }

    /// Stores `value` into `signal` (a signal libxhsa created and has not destroyed).
    pub fn signal_store(&self, signal: u64, value: i64) {
        // SAFETY: a live signal libxhsa created (the caller's word; the function takes a handle).
        unsafe { (self.store_screlease)(hsa_signal_t { handle: signal }, value) }
    }

    /// The value of `signal` (a signal libxhsa created and has not destroyed).
    pub fn signal_value(&self, signal: u64) -> i64 {
        // SAFETY: as for `signal_store`.
        unsafe { (self.signal_load)(hsa_signal_t { handle: signal }) }
    }

    /// The KFD signal event behind `signal` (a signal libxhsa created and has not destroyed):
    /// the `event_id` of its `amd_signal_t`, when ROCr made it an interrupt signal (its
    /// `event_mailbox_ptr` is set). `None` for a signal without one (`HSA_ENABLE_INTERRUPT=0`,
    /// or the process ran out of KFD events).
    pub fn signal_event(&self, signal: u64) -> Option<u32> {
        if signal == 0 || !signal.is_multiple_of(std::mem::align_of::<amd_signal_t>() as u64) {
            return None;
        }
        let s = signal as *const amd_signal_t;
        // SAFETY: a ROCr signal handle is the address of the signal's `amd_signal_t` (ROCr's
        // `SharedSignal`, alive until the signal is destroyed, which the caller rules out);
        // the two fields are written once, when ROCr creates the signal, before the handle
        // is returned.
        let (mailbox, id) = unsafe {
            (
                std::ptr::addr_of!((*s).event_mailbox_ptr).read_volatile(),
                std::ptr::addr_of!((*s).event_id).read_volatile(),
            )
        };
        (mailbox != 0).then_some(id)
    }

    pub fn signal_destroy(&self, signal: u64) {
        // SAFETY: a signal libxhsa created and no longer uses (tracking signals come through
        // `completions::retire`, never while its waiter may be inside a wait on them).
        unsafe { (self.signal_destroy)(hsa_signal_t { handle: signal }) };
    }

    /// Waits up to `ms` for `signal` to fall to `target` or below, sleeping 1 ms between looks;
    /// returns its value. (Not `hsa_signal_wait_*`: ROCr without KFD event ages lets only the
    /// first waiter of a signal sleep, and the completion waiter already waits on a tracking
    /// signal while it is armed, so a second waiter would spin.)
    pub fn signal_wait_at_most(&self, signal: u64, target: i64, ms: u64) -> i64 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        loop {
            let v = self.signal_value(signal);
            if v <= target || std::time::Instant::now() >= deadline {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// `bytes` of fine-grained system memory the GPU `agent` may access; `None` on failure.
    pub fn alloc_gpu_visible(&self, agent: hsa_agent_t, bytes: usize) -> Option<u64> {
        let pool = fine_grained_pool(self)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a pool ROCr listed; out-parameter.
        if unsafe { (self.pool_allocate)(hsa_amd_memory_pool_t { handle: pool }, bytes, 0, &mut p) }
            != HSA_STATUS_SUCCESS
            || p.is_null()
        {
            return None;
        }
        // SAFETY: the memory just allocated, for the agent the queue was created on.
        if unsafe { (self.allow_access)(1, &agent, std::ptr::null(), p) } != HSA_STATUS_SUCCESS {
            self.free(p as u64);
            return None;
        }
        Some(p as u64)
    }

    pub fn free(&self, p: u64) {
        // SAFETY: memory libxhsa allocated from a ROCr pool and no longer uses.
        unsafe { (self.pool_free)(p as *mut c_void) };
    }
}

struct PoolSearch<'a> {
    rocr: &'a Rocr,
    found: u64,
}

/// `hsa_amd_agent_iterate_memory_pools` callback: remembers the first fine-grained global pool
/// the runtime allocates from.
///
/// # Safety
///
/// `data` is the `PoolSearch` the iteration was started with, alive and not otherwise used for
/// the call.
unsafe extern "C" fn pick_pool(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `data` is the PoolSearch passed by fine_grained_pool, alive during the iteration.
    let s = unsafe { &mut *(data as *mut PoolSearch) };
    let mut segment: u32 = u32::MAX;
    let mut flags: u32 = 0;
    let mut alloc = false;
    // SAFETY: each attribute writes the type ROCr documents for it.
    unsafe {
        (s.rocr.pool_info)(
            pool,
            HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
            (&mut segment as *mut u32).cast(),
        );
        (s.rocr.pool_info)(
            pool,
            HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
            (&mut flags as *mut u32).cast(),
        );
        (s.rocr.pool_info)(
            pool,
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
            (&mut alloc as *mut bool).cast(),
        );
    }
    if s.found == 0
        && segment == HSA_AMD_SEGMENT_GLOBAL
        && flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED != 0
        && alloc
    {
        s.found = pool.handle;
    }
    HSA_STATUS_SUCCESS
}

/// `hsa_iterate_agents` callback: searches the pools of CPU agents with [`pick_pool`].
///
/// # Safety
///
/// As for [`pick_pool`]: `data` is the `PoolSearch` of the iteration.
unsafe extern "C" fn pick_cpu(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `data` is the PoolSearch passed by fine_grained_pool, alive during the iteration.
    let s = unsafe { &mut *(data as *mut PoolSearch) };
    let mut kind: u32 = u32::MAX;
    // SAFETY: HSA_AGENT_INFO_DEVICE writes an hsa_device_type_t (u32).
    unsafe { (s.rocr.agent_info)(agent, HSA_AGENT_INFO_DEVICE, (&mut kind as *mut u32).cast()) };
    if kind == HSA_DEVICE_TYPE_CPU && s.found == 0 {
        // SAFETY: iterating a listed agent's pools with the same search state.
        unsafe { (s.rocr.iterate_pools)(agent, Some(pick_pool), data) };
    }
    HSA_STATUS_SUCCESS
}

/// ROCr's fine-grained system memory pool (of the first CPU agent), found once per runtime.
fn fine_grained_pool(r: &Rocr) -> Option<u64> {
    let mut p = POOL.load(std::sync::atomic::Ordering::Acquire);
    if p == 0 {
        let mut s = PoolSearch { rocr: r, found: 0 };
        // SAFETY: the callback gets `s` back as data, alive during the call.
        unsafe { (r.iterate_agents)(Some(pick_cpu), (&mut s as *mut PoolSearch).cast()) };
        p = s.found;
        POOL.store(p, std::sync::atomic::Ordering::Release);
    }
    (p != 0).then_some(p)
}

/// The pool [`fine_grained_pool`] found (0: not looked up yet, or forgotten).
static POOL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Forgets what was found of the runtime that shut down (its handles die with it; a runtime
/// started again has new ones).
pub(crate) fn forget_runtime() {
    POOL.store(0, std::sync::atomic::Ordering::Release);
}
