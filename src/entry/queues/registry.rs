//! The process's queue registries: shadow and doorbell lookups (lock-free, on every call), the
//! hardware queue behind each shadow, the application's error callbacks, the creating libraries.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};

use crate::entry::addr_map::AddrMap;
use crate::entry::memory::ProcessMemory;
use crate::entry::Global;

use super::abi::QueueCallback;

// SAFETY: the schedulers are given only rings and queues `queue_create` registered (libxhsa's
// shadows and the hardware queues behind them), and forget a queue before `hsa_queue_destroy`
// frees it.
pub(super) static MEMORY: ProcessMemory = unsafe { ProcessMemory::new() };
/// Shadow `hsa_queue_t` address → queue id.
pub(super) static SHADOWS: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// Shadow doorbell signal handle → queue id.
pub(super) static DOORBELLS: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// Shadow `hsa_queue_t` address → hardware `hsa_queue_t` address.
pub(super) static HW_OF: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Hardware queue address → libxhsa queue id of a queue passed through without a shadow (shown
/// on the board only).
pub(super) static UNSHADOWED: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);
/// KFD queue id + 1 → queue id, for the trace's preemption track (`XHSA_TRACE` only).
pub(super) static KFD_QUEUES: LazyLock<AddrMap> = LazyLock::new(AddrMap::new);

/// The application's error callback of a queue libxhsa created.
#[derive(Clone, Copy)]
pub(super) struct AppCallback {
    pub(super) callback: QueueCallback,
    pub(super) data: usize,
    /// The shadow the application holds; 0 while it holds the hardware queue.
    pub(super) shadow: u64,
}

pub(super) static CALLBACKS: LazyLock<Mutex<BTreeMap<u64, AppCallback>>> =
    LazyLock::new(Default::default);

pub(super) fn callbacks() -> std::sync::MutexGuard<'static, BTreeMap<u64, AppCallback>> {
    CALLBACKS.lock().unwrap_or_else(|p| p.into_inner())
}
/// The library that created each shadow queue, when the config has `[[library]]` rules.
pub(super) static CREATORS: LazyLock<Mutex<BTreeMap<u64, String>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));
/// Queues handed to passthrough libraries unshadowed.
pub(crate) static WHITELISTED_QUEUES: AtomicU64 = AtomicU64::new(0);
/// The queue ROCr should see: the hardware queue behind a shadow, or the queue itself.
pub(super) fn hw_of(queue: u64) -> u64 {
    HW_OF.get(queue).unwrap_or(queue)
}

/// The library creating queue `id` (for the config's `[[library]]` priority rules; only looked
/// up when there are any), remembered for later priority changes.
pub(super) fn creating_library(g: &Global, id: u64) -> Option<String> {
    if g.settings.config.library_rules.is_empty() {
        return None;
    }
    let lib = crate::entry::origin::calling_library()?;
    CREATORS.lock().unwrap_or_else(|e| e.into_inner()).insert(id, lib.clone());
    Some(lib)
}
