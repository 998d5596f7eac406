//! `HSA_TOOLS_LIB`: ROCr calls `OnLoad` with its API tables during `hsa_init`; libxhsa replaces
//! the entries of [`crate::table::plan`] (checked by version and size) with its own, which
//! call the saved originals.

use std::sync::atomic::{AtomicUsize, Ordering};

use hsa_sys::hsa::{hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t, hsa_signal_t, hsa_signal_value_t, hsa_status_t};

use super::global;
use super::preload::{self, QueueCallback};
use crate::intercept::Loading;
use crate::table::{plan, Hook, Table, TableVersion};

static ORIG_QUEUE_CREATE: AtomicUsize = AtomicUsize::new(0);
static ORIG_QUEUE_DESTROY: AtomicUsize = AtomicUsize::new(0);
static ORIG_STORE_RELAXED: AtomicUsize = AtomicUsize::new(0);
static ORIG_STORE_SCRELEASE: AtomicUsize = AtomicUsize::new(0);
static ORIG_SET_PRIORITY: AtomicUsize = AtomicUsize::new(0);

fn orig<T: Copy>(cell: &AtomicUsize) -> Option<T> {
    let p = cell.load(Ordering::Acquire);
    // SAFETY: the cell holds the original table entry of exactly this function type.
    (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, T>(&p) })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn hook_queue_create(
    agent: hsa_agent_t,
    size: u32,
    kind: hsa_queue_type32_t,
    callback: QueueCallback,
    data: *mut libc::c_void,
    private_size: u32,
    group_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    // SAFETY: ROCr's arguments, passed on to ROCr's own entry unchanged.
    unsafe { preload::queue_create(orig(&ORIG_QUEUE_CREATE), agent, size, kind, callback, data, private_size, group_size, queue) }
}

unsafe extern "C" fn hook_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: as above.
    unsafe { preload::queue_destroy(orig(&ORIG_QUEUE_DESTROY), queue) }
}

unsafe extern "C" fn hook_store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) {
    // SAFETY: as above.
    unsafe { preload::signal_store(orig(&ORIG_STORE_RELAXED), signal, value) }
}

unsafe extern "C" fn hook_store_screlease(signal: hsa_signal_t, value: hsa_signal_value_t) {
    // SAFETY: as above.
    unsafe { preload::signal_store(orig(&ORIG_STORE_SCRELEASE), signal, value) }
}

unsafe extern "C" fn hook_set_priority(queue: *mut hsa_queue_t, priority: hsa_amd_queue_priority_t) -> hsa_status_t {
    // SAFETY: as above.
    unsafe { preload::set_priority(orig(&ORIG_SET_PRIORITY), queue, priority) }
}

fn hook(h: Hook) -> (usize, &'static AtomicUsize) {
    match h {
        Hook::QueueCreate => (hook_queue_create as *const () as usize, &ORIG_QUEUE_CREATE),
        Hook::QueueDestroy => (hook_queue_destroy as *const () as usize, &ORIG_QUEUE_DESTROY),
        Hook::SignalStoreRelaxed => (hook_store_relaxed as *const () as usize, &ORIG_STORE_RELAXED),
        Hook::SignalStoreScrelease => (hook_store_screlease as *const () as usize, &ORIG_STORE_SCRELEASE),
        Hook::QueueSetPriority => (hook_set_priority as *const () as usize, &ORIG_SET_PRIORITY),
    }
}

/// Reads a table's `ApiTableVersion` (major, minor) at `table`.
unsafe fn version(table: *const u32) -> Option<TableVersion> {
    // SAFETY: the caller passes the start of an API table, which begins with its version.
    (!table.is_null()).then(|| unsafe { TableVersion { major: table.read_unaligned(), minor: table.add(1).read_unaligned() } })
}

/// Called by ROCr for every library named in `HSA_TOOLS_LIB`. Returns true (loaded) in every
/// case: a table libxhsa cannot handle is left untouched and reported, never a failure of the
/// application.
#[no_mangle]
pub unsafe extern "C" fn OnLoad(table: *mut libc::c_void, runtime_version: u64, _failed_tool_count: u64, _failed_tool_names: *const *const libc::c_char) -> bool {
    let g = global();
    g.announce(Loading::ToolsLib);
    if g.passthrough() {
        return true;
    }
    let result = std::panic::catch_unwind(|| {
        // HsaApiTable: version (16 bytes), then core_ at 16 and amd_ext_ at 24.
        // SAFETY: ROCr passes its HsaApiTable; its version says how long it is.
        let Some(top) = (unsafe { version(table as *const u32) }) else { return };
        if (top.minor as usize) < 32 {
            tracing::warn!("xhsa: the HSA API table {}.{} is too short to hold the core and AMD tables; not intercepting through it", top.major, top.minor);
            return;
        }
        // SAFETY: within the table's first 32 bytes, as its size says.
        let (core, amd) = unsafe { (*(table as *const *mut u8).add(2), *(table as *const *mut u8).add(3)) };
        // SAFETY: each pointer, when non-null, is a table starting with its version.
        let (cv, av) = unsafe { (version(core as *const u32), version(amd as *const u32)) };
        let p = plan(cv, av);
        for n in &p.notes {
            tracing::warn!("xhsa: {n}");
        }
        for patch in &p.patches {
            let base = if patch.table == Table::Core { core } else { amd };
            let (ours, saved) = hook(patch.hook);
            // SAFETY: the plan keeps every field inside its table (offset + 8 <= size); the
            // tables are writable (tools patch them by design) and aligned to 8.
            unsafe {
                let slot = base.add(patch.offset) as *mut usize;
                saved.store(slot.read(), Ordering::Release);
                slot.write(ours);
            }
        }
        tracing::info!(runtime_version, core = ?cv, amd = ?av, patched = p.patches.len(), "xhsa: API tables patched");
    });
    if result.is_err() {
        tracing::error!("xhsa: internal error in OnLoad; the API tables are left as they were");
    }
    true
}
