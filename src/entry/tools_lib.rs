//! `HSA_TOOLS_LIB`: ROCr calls `OnLoad` with its API tables during `hsa_init`; libxhsa replaces
//! the entries of [`crate::entry::api_table::plan`] (checked by version and size) with its own,
//! which call the saved originals.
//!
//! Every replacement entry here is `unsafe` with the contract of the HSA function whose entry it
//! replaces (as the preloaded functions of [`super::preload`]); it calls the original entry,
//! saved by `OnLoad`, with the caller's arguments.

use std::sync::atomic::Ordering;

use hsa_sys::hsa::{
    hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t, hsa_signal_t,
    hsa_signal_value_t, hsa_status_t,
};

use super::global;
use super::queues::{self, QueueCallback, READ_INDEX, WRITE_INDEX};
use super::symbol::{original, save_original};
use crate::entry::api_table::{plan, Hook, Table, TableVersion};
use crate::entry::seen::Loading;

/// The original entry `h` as a `T` (`None` if libxhsa did not patch it).
///
/// # Safety
///
/// `T` must be the C type of the table entry `h`.
unsafe fn orig<T: super::symbol::CFn>(h: Hook) -> Option<T> {
    // SAFETY: the slot holds 0 or the original table entry `h`, whose C type is `T` (the
    // caller's obligation), of a runtime that stays loaded while its table is patched.
    unsafe { super::symbol::typed(original(h)) }
}

/// The `hsa_queue_create` entry.
///
/// # Safety
///
/// `hsa_queue_create`'s contract: `queue` is null or valid for writing a queue pointer;
/// `callback` is `None` or may be called with the queue's errors and `data`.
// The arity is hsa_queue_create's C signature.
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
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe {
        queues::queue_create(
            orig(Hook::QueueCreate),
            agent,
            size,
            kind,
            callback,
            data,
            private_size,
            group_size,
            queue,
        )
    }
}

/// The `hsa_queue_destroy` entry.
///
/// # Safety
///
/// `hsa_queue_destroy`'s contract: `queue` was returned by `hsa_queue_create`, is not yet
/// destroyed, and no other thread uses it during or after the call.
unsafe extern "C" fn hook_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its contract.
    unsafe { queues::queue_destroy(orig(Hook::QueueDestroy), queue) }
}

/// The `hsa_code_object_reader_create_from_memory` entry.
///
/// # Safety
///
/// `hsa_code_object_reader_create_from_memory`'s contract: `code_object` points to `size`
/// readable bytes, `reader` is valid for writing a reader handle.
unsafe extern "C" fn hook_code_object_reader_from_memory(
    code_object: *const libc::c_void,
    size: usize,
    reader: *mut hsa_sys::hsa::hsa_code_object_reader_t,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the
    // caller's arguments under its contract.
    unsafe {
        super::origin::code_object_from_memory(
            orig(Hook::CodeObjectReaderFromMemory),
            code_object,
            size,
            reader,
        )
    }
}

/// The `hsa_shut_down` entry.
///
/// # Safety
///
/// `hsa_shut_down`'s contract: the runtime is initialized.
unsafe extern "C" fn hook_shut_down() -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry.
    unsafe { super::lifecycle::shut_down(orig(Hook::ShutDown)) }
}

/// The `hsa_queue_inactivate` entry.
///
/// # Safety
///
/// `hsa_queue_inactivate`'s contract: `queue` was returned by `hsa_queue_create` and is not
/// destroyed.
unsafe extern "C" fn hook_queue_inactivate(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its contract.
    unsafe { queues::queue_inactivate(orig(Hook::QueueInactivate), queue) }
}

macro_rules! hooks {
    (load: [$($lname:ident, $lhook:ident, $lfield:expr, $lorder:ident;)*]
     store: [$($sname:ident, $shook:ident, $sorder:ident;)*]
     cas: [$($cname:ident, $chook:ident, $corder:ident;)*]
     add: [$($aname:ident, $ahook:ident, $aorder:ident;)*]
     store_read: [$($rname:ident, $rhook:ident;)*]
     signal: [$($gname:ident, $ghook:ident;)*]) => {
        $(
        /// A queue-index load entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        unsafe extern "C" fn $lname(queue: *const hsa_queue_t) -> u64 {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its
            // contract.
            unsafe { queues::load_index(orig(Hook::$lhook), queue, $lfield, Ordering::$lorder) }
        })*
        $(
        /// A write-index store entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        unsafe extern "C" fn $sname(queue: *const hsa_queue_t, value: u64) {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its
            // contract.
            unsafe { queues::store_write_index(orig(Hook::$shook), queue, value, Ordering::$sorder) }
        })*
        $(
        /// A write-index compare-and-swap entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        unsafe extern "C" fn $cname(queue: *const hsa_queue_t, expected: u64, value: u64) -> u64 {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its
            // contract.
            unsafe { queues::cas_write_index(orig(Hook::$chook), queue, expected, value, Ordering::$corder) }
        })*
        $(
        /// A write-index add entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        unsafe extern "C" fn $aname(queue: *const hsa_queue_t, value: u64) -> u64 {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its
            // contract.
            unsafe { queues::add_write_index(orig(Hook::$ahook), queue, value, Ordering::$aorder) }
        })*
        $(
        /// A read-index store entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        unsafe extern "C" fn $rname(queue: *const hsa_queue_t, value: u64) {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's queue under its
            // contract.
            unsafe { queues::store_read_index(orig(Hook::$rhook), queue, value) }
        })*
        $(
        /// A signal store entry.
        ///
        /// # Safety
        ///
        /// The HSA contract of the function whose entry it replaces: `signal` was created by the
        /// runtime and is not destroyed.
        unsafe extern "C" fn $gname(signal: hsa_signal_t, value: hsa_signal_value_t) {
            // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's signal under its
            // contract.
            unsafe { queues::signal_store(orig(Hook::$ghook), signal, value) }
        })*

        /// libxhsa's replacement for table entry `h`.
        fn ours(h: Hook) -> usize {
            match h {
                Hook::QueueCreate => hook_queue_create as *const () as usize,
                Hook::QueueDestroy => hook_queue_destroy as *const () as usize,
                Hook::QueueInactivate => hook_queue_inactivate as *const () as usize,
                Hook::ShutDown => hook_shut_down as *const () as usize,
                Hook::CodeObjectReaderFromMemory => {
                    hook_code_object_reader_from_memory as *const () as usize
                }
                Hook::QueueSetPriority => hook_set_priority as *const () as usize,
                Hook::QueueCuSetMask => hook_cu_set_mask as *const () as usize,
                Hook::QueueCuGetMask => hook_cu_get_mask as *const () as usize,
                Hook::QueueGetInfo => hook_queue_get_info as *const () as usize,
                Hook::ProfilingSetProfilerEnabled => hook_profiler_enabled as *const () as usize,
                $(Hook::$lhook => $lname as *const () as usize,)*
                $(Hook::$shook => $sname as *const () as usize,)*
                $(Hook::$chook => $cname as *const () as usize,)*
                $(Hook::$ahook => $aname as *const () as usize,)*
                $(Hook::$rhook => $rname as *const () as usize,)*
                $(Hook::$ghook => $gname as *const () as usize,)*
            }
        }
    };
}

hooks! {
    load: [
        hook_load_read_scacquire, LoadReadIndexScacquire, READ_INDEX, Acquire;
        hook_load_read_relaxed, LoadReadIndexRelaxed, READ_INDEX, Relaxed;
        hook_load_write_scacquire, LoadWriteIndexScacquire, WRITE_INDEX, Acquire;
        hook_load_write_relaxed, LoadWriteIndexRelaxed, WRITE_INDEX, Relaxed;
    ]
    store: [
        hook_store_write_relaxed, StoreWriteIndexRelaxed, Relaxed;
        hook_store_write_screlease, StoreWriteIndexScrelease, Release;
    ]
    cas: [
        hook_cas_scacq_screl, CasWriteIndexScacqScrel, AcqRel;
        hook_cas_scacquire, CasWriteIndexScacquire, Acquire;
        hook_cas_relaxed, CasWriteIndexRelaxed, Relaxed;
        hook_cas_screlease, CasWriteIndexScrelease, Release;
    ]
    add: [
        hook_add_scacq_screl, AddWriteIndexScacqScrel, AcqRel;
        hook_add_scacquire, AddWriteIndexScacquire, Acquire;
        hook_add_relaxed, AddWriteIndexRelaxed, Relaxed;
        hook_add_screlease, AddWriteIndexScrelease, Release;
    ]
    store_read: [
        hook_store_read_relaxed, StoreReadIndexRelaxed;
        hook_store_read_screlease, StoreReadIndexScrelease;
    ]
    signal: [
        hook_store_relaxed, SignalStoreRelaxed;
        hook_store_screlease, SignalStoreScrelease;
        hook_silent_store_relaxed, SignalSilentStoreRelaxed;
        hook_silent_store_screlease, SignalSilentStoreScrelease;
    ]
}

/// The `hsa_amd_queue_set_priority` entry.
///
/// # Safety
///
/// `hsa_amd_queue_set_priority`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed.
unsafe extern "C" fn hook_set_priority(
    queue: *mut hsa_queue_t,
    priority: hsa_amd_queue_priority_t,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe { queues::set_priority(orig(Hook::QueueSetPriority), queue, priority) }
}

/// The `hsa_amd_queue_cu_set_mask` entry.
///
/// # Safety
///
/// `hsa_amd_queue_cu_set_mask`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed; `mask` holds `count` bits readable for the call.
unsafe extern "C" fn hook_cu_set_mask(
    queue: *const hsa_queue_t,
    count: u32,
    mask: *const u32,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe { queues::cu_set_mask(orig(Hook::QueueCuSetMask), queue, count, mask) }
}

/// The `hsa_amd_queue_cu_get_mask` entry.
///
/// # Safety
///
/// `hsa_amd_queue_cu_get_mask`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed; `mask` has room for `count` bits, writable for the call.
unsafe extern "C" fn hook_cu_get_mask(
    queue: *const hsa_queue_t,
    count: u32,
    mask: *mut u32,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe { queues::cu_get_mask(orig(Hook::QueueCuGetMask), queue, count, mask) }
}

/// The `hsa_amd_queue_get_info` entry (ROCm 6.x).
///
/// # Safety
///
/// `hsa_amd_queue_get_info`'s contract: `queue` was returned by `hsa_queue_create` and is not
/// destroyed; `value` is writable for the attribute's type.
unsafe extern "C" fn hook_queue_get_info(
    queue: *mut hsa_queue_t,
    attribute: u32,
    value: *mut libc::c_void,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe { queues::queue_get_info(orig(Hook::QueueGetInfo), queue, attribute, value) }
}

/// The `hsa_amd_profiling_set_profiler_enabled` entry.
///
/// # Safety
///
/// `hsa_amd_profiling_set_profiler_enabled`'s contract: `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
unsafe extern "C" fn hook_profiler_enabled(
    queue: *mut hsa_queue_t,
    enable: libc::c_int,
) -> hsa_status_t {
    // SAFETY: the saved original entry (or None), as the C type of that entry, given the caller's arguments under its contract.
    unsafe { queues::set_profiler_enabled(orig(Hook::ProfilingSetProfilerEnabled), queue, enable) }
}

/// Reads a table's `ApiTableVersion` (major, minor) at `table`.
///
/// # Safety
///
/// `table` is null or points to at least 8 readable bytes (an API table, which begins with its
/// version).
unsafe fn version(table: *const u32) -> Option<TableVersion> {
    // SAFETY: the caller passes the start of an API table, which begins with its version.
    (!table.is_null()).then(|| unsafe {
        TableVersion { major: table.read_unaligned(), minor: table.add(1).read_unaligned() }
    })
}

/// Called by ROCr for every library named in `HSA_TOOLS_LIB`. Returns true (loaded) in every
/// case: a table libxhsa cannot handle is left untouched and reported, never a failure of the
/// application.
///
/// # Safety
///
/// ROCr's contract for tool libraries: `table` is null or ROCr's `HsaApiTable`, whose version
/// gives its size and whose core and AMD extension tables (each null or starting with its
/// version and as long as its minor version says) are writable and not called through by other
/// threads while `OnLoad` runs (ROCr calls it inside `hsa_init`).
#[no_mangle]
pub unsafe extern "C" fn OnLoad(
    table: *mut libc::c_void,
    runtime_version: u64,
    _failed_tool_count: u64,
    _failed_tool_names: *const *const libc::c_char,
) -> bool {
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
        let (core, amd) =
            unsafe { (*(table as *const *mut u8).add(2), *(table as *const *mut u8).add(3)) };
        // SAFETY: each pointer, when non-null, is a table starting with its version.
        let (cv, av) = unsafe { (version(core as *const u32), version(amd as *const u32)) };
        let p = plan(cv, av);
        for n in &p.notes {
            tracing::warn!("xhsa: {n}");
        }
        for patch in &p.patches {
            let base = if patch.table == Table::Core { core } else { amd };
            // SAFETY: the plan keeps every field inside its table (offset + 8 <= size); the
            // tables are writable (tools patch them by design) and aligned to 8.
            unsafe {
                let slot = base.add(patch.offset) as *mut usize;
                save_original(patch.hook, slot.read());
                slot.write(ours(patch.hook));
            }
        }
        tracing::info!(runtime_version, core = ?cv, amd = ?av, patched = p.patches.len(), "xhsa: API tables patched");
    });
    if result.is_err() {
        tracing::error!("xhsa: internal error in OnLoad; the API tables are left as they were");
    }
    true
}
