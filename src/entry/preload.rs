//! `LD_PRELOAD`: the HSA functions HIP and the ROCm libraries call through the PLT. Each
//! forwards to the next definition (ROCr's) exactly once.

use std::sync::atomic::AtomicUsize;

use hsa_sys::hsa::{hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t, hsa_signal_t, hsa_signal_value_t, hsa_status_t, HSA_STATUS_ERROR};

use super::{global, inside, next_symbol, outermost};
use crate::intercept::Loading;

pub(crate) type QueueCallback = Option<unsafe extern "C" fn(hsa_status_t, *mut hsa_queue_t, *mut libc::c_void)>;
pub(crate) type QueueCreateFn =
    unsafe extern "C" fn(hsa_agent_t, u32, hsa_queue_type32_t, QueueCallback, *mut libc::c_void, u32, u32, *mut *mut hsa_queue_t) -> hsa_status_t;
pub(crate) type QueueDestroyFn = unsafe extern "C" fn(*mut hsa_queue_t) -> hsa_status_t;
pub(crate) type SignalStoreFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
pub(crate) type SetPriorityFn = unsafe extern "C" fn(*mut hsa_queue_t, hsa_amd_queue_priority_t) -> hsa_status_t;

/// The library that defines the HSA functions (ROCm 5.x and 6.x soname).
const ROCR: &std::ffi::CStr = c"libhsa-runtime64.so.1";

static NEXT_QUEUE_CREATE: AtomicUsize = AtomicUsize::new(0);
static NEXT_QUEUE_DESTROY: AtomicUsize = AtomicUsize::new(0);
static NEXT_STORE_RELAXED: AtomicUsize = AtomicUsize::new(0);
static NEXT_STORE_SCRELEASE: AtomicUsize = AtomicUsize::new(0);
static NEXT_SET_PRIORITY: AtomicUsize = AtomicUsize::new(0);

/// `transmute` of a looked-up address to its function type; `None` when not found.
fn as_fn<T: Copy>(p: usize) -> Option<T> {
    // SAFETY: T is the C function-pointer type of the symbol the address was looked up for.
    (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, T>(&p) })
}

/// The doorbell signal handle of a created queue.
fn doorbell_of(q: *const hsa_queue_t) -> Option<u64> {
    // SAFETY: a queue pointer ROCr returned is valid until hsa_queue_destroy.
    (!q.is_null()).then(|| unsafe { (*q).doorbell_signal.handle })
}

/// Shared by both loading modes: calls `real` once and records the new queue.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn queue_create(
    real: Option<QueueCreateFn>,
    agent: hsa_agent_t,
    size: u32,
    kind: hsa_queue_type32_t,
    callback: QueueCallback,
    data: *mut libc::c_void,
    private_size: u32,
    group_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    // SAFETY: forwarding the caller's arguments to the real function, unchanged.
    let status = inside(|| unsafe { real(agent, size, kind, callback, data, private_size, group_size, queue) });
    outermost(|g| {
        if status == 0 && !queue.is_null() {
            // SAFETY: on success ROCr wrote the new queue's pointer into `*queue`.
            if let Some(db) = doorbell_of(unsafe { *queue }) {
                g.seen.queue_created(db);
            }
        }
    });
    status
}

pub(crate) unsafe fn queue_destroy(real: Option<QueueDestroyFn>, queue: *mut hsa_queue_t) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    outermost(|g| {
        if let Some(db) = doorbell_of(queue) {
            g.seen.queue_destroyed(db);
        }
    });
    // SAFETY: forwarding unchanged.
    inside(|| unsafe { real(queue) })
}

pub(crate) unsafe fn signal_store(real: Option<SignalStoreFn>, signal: hsa_signal_t, value: hsa_signal_value_t) {
    outermost(|g| g.seen.signal_store(signal.handle));
    if let Some(real) = real {
        // SAFETY: forwarding unchanged.
        inside(|| unsafe { real(signal, value) });
    }
}

pub(crate) unsafe fn set_priority(real: Option<SetPriorityFn>, queue: *mut hsa_queue_t, priority: hsa_amd_queue_priority_t) -> hsa_status_t {
    let Some(real) = real else { return HSA_STATUS_ERROR };
    outermost(|g| g.seen.priority_call());
    // SAFETY: forwarding unchanged.
    inside(|| unsafe { real(queue, priority) })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hsa_queue_create(
    agent: hsa_agent_t,
    size: u32,
    kind: hsa_queue_type32_t,
    callback: QueueCallback,
    data: *mut libc::c_void,
    private_size: u32,
    group_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    global().announce(Loading::Preload);
    let real = as_fn(next_symbol(&NEXT_QUEUE_CREATE, ROCR, c"hsa_queue_create"));
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { queue_create(real, agent, size, kind, callback, data, private_size, group_size, queue) }
}

#[no_mangle]
pub unsafe extern "C" fn hsa_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: as above.
    unsafe { queue_destroy(as_fn(next_symbol(&NEXT_QUEUE_DESTROY, ROCR, c"hsa_queue_destroy")), queue) }
}

#[no_mangle]
pub unsafe extern "C" fn hsa_signal_store_relaxed(signal: hsa_signal_t, value: hsa_signal_value_t) {
    // SAFETY: as above.
    unsafe { signal_store(as_fn(next_symbol(&NEXT_STORE_RELAXED, ROCR, c"hsa_signal_store_relaxed")), signal, value) }
}

#[no_mangle]
pub unsafe extern "C" fn hsa_signal_store_screlease(signal: hsa_signal_t, value: hsa_signal_value_t) {
    // SAFETY: as above.
    unsafe { signal_store(as_fn(next_symbol(&NEXT_STORE_SCRELEASE, ROCR, c"hsa_signal_store_screlease")), signal, value) }
}

#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_set_priority(queue: *mut hsa_queue_t, priority: hsa_amd_queue_priority_t) -> hsa_status_t {
    // SAFETY: as above.
    unsafe { set_priority(as_fn(next_symbol(&NEXT_SET_PRIORITY, ROCR, c"hsa_amd_queue_set_priority")), queue, priority) }
}
