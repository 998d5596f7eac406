//! The per-queue calls on a shadow: index loads and stores, doorbell stores, priority, CU mask,
//! queue info and profiling; every other queue's call passes straight through.

use std::sync::atomic::{AtomicBool, Ordering};

use hsa_sys::hsa::{
    hsa_amd_queue_priority_t, hsa_queue_t, hsa_signal_t, hsa_signal_value_t, hsa_status_t,
    HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};
use xhsa_model::ids::QueueId;
use xhsa_model::priority::StreamPriority;

use crate::entry::memory;
use crate::entry::{global, inside, outermost};

use super::abi::{
    AddIndexFn, CasIndexFn, CuGetMaskFn, CuSetMaskFn, LoadIndexFn, ProfilerFn, QueueGetInfoFn,
    SetPriorityFn, SignalStoreFn, StoreIndexFn, QUEUE_PROPERTIES, READ_INDEX, WRITE_INDEX,
};
use super::registry::{hw_of, CREATORS, DOORBELLS, SHADOWS};
use super::scheduler_lock::{doorbell_pass, trace_application_priority, with_queue};
use crate::entry::log::log_once;

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
        crate::entry::unseen_kfd::hw_priority_set(hw_of(queue as u64), p);
    }
    if let (Some(id), HSA_STATUS_SUCCESS, Some(p)) = (id, status, effective) {
        let remasks = with_queue(id, |s, _, _, _| {
            trace_application_priority(id);
            s.set_priority(QueueId(id), p);
            s.take_remasks()
        });
        super::shadow::set_partition_masks(remasks.unwrap_or_default());
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
    let partition = SHADOWS
        .get(queue as u64)
        .and_then(|id| with_queue(id, |s, _, _, _| s.cu_mask_of(QueueId(id))))
        .flatten();
    let readable = count.is_multiple_of(32) && (count == 0 || !mask.is_null());
    let (Some(partition), true) = (partition, readable) else {
        // SAFETY: the caller's arguments, with the hardware queue behind a shadow.
        return inside(|| unsafe { real(hw_of(queue as u64) as *const hsa_queue_t, count, mask) });
    };
    let app = if count == 0 {
        &[][..]
    } else {
        // SAFETY: `mask` is non-null and holds `count` bits, a whole number of words, readable
        // for the call (# Safety).
        unsafe { std::slice::from_raw_parts(mask, count as usize / 32) }
    };
    let words = match partition.bound_by(app) {
        Ok(both) => both,
        Err(own) => {
            static SAID: AtomicBool = AtomicBool::new(false);
            log_once(&SAID, || {
                tracing::info!("xhsa: an application CU mask shares no CU with its queue's partition (XHSA_RESERVE): the application's mask is used")
            });
            own
        }
    };
    let words = words.words();
    // SAFETY: the hardware queue behind the caller's shadow, and a mask of `words.len() * 32`
    // bits libxhsa holds for the call.
    inside(|| unsafe {
        real(hw_of(queue as u64) as *const hsa_queue_t, words.len() as u32 * 32, words.as_ptr())
    })
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

/// Gives hardware queue `hw`, which libxhsa created, the hardware side `p` of a priority through
/// ROCr, and tells the KFD queue bookkeeping of [`crate::entry::unseen_kfd`] when ROCr took it;
/// false if ROCr refused.
pub(super) fn set_hw_priority(r: &crate::entry::rocr::Rocr, hw: u64, p: StreamPriority) -> bool {
    let ok = inside(|| r.set_hw_priority(hw, p));
    if ok {
        crate::entry::unseen_kfd::hw_priority_set(hw, p);
    }
    ok
}
