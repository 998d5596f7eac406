//! `hsa_queue_create`, `hsa_queue_destroy` and `hsa_queue_inactivate`: a shadow, a passthrough
//! queue (cooperative, whitelisted library, unknown ROCr layout) or the hardware queue itself.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use hsa_sys::hsa::{
    hsa_agent_t, hsa_queue_t, hsa_queue_type32_t, hsa_status_t, HSA_QUEUE_TYPE_MULTI,
    HSA_QUEUE_TYPE_SINGLE, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};
use xhsa_model::ids::QueueId;

use crate::entry::memory;
use crate::entry::{depth, global, inside, outermost, Global};

use super::abi::{QueueCallback, QueueCreateFn, QueueFn, DOORBELL};
use super::callbacks::hw_queue_error;
use super::registry::{
    callbacks, AppCallback, HW_OF, NEXT_ID, SHADOWS, UNSHADOWED, WHITELISTED_QUEUES,
};
use super::scheduler_lock::with_queue;
use super::shadow::{build_shadow, destroy_shadow, rocr_layout, show_unshadowed};
use crate::entry::log::log_once;

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
    let layout = rocr_layout().filter(|_| !cooperative);
    let Some(layout) = layout else {
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
    };
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
    let built =
        catch_unwind(AssertUnwindSafe(|| build_shadow(g, id, agent, hw as u64, size, layout)))
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
/// The library calling `hsa_queue_create` and the passthrough entry it matches, if it does.
pub(super) fn whitelisted_caller(g: &Global) -> Option<(String, String)> {
    if g.settings.passthrough.is_empty() {
        return None;
    }
    let lib = crate::entry::origin::calling_library()?;
    let entry = g.settings.passthrough.matches(&lib)?.to_string();
    Some((lib, entry))
}
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
        crate::entry::gpus::GPU_OF.remove(id);
    }
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for (# Safety).
    inside(|| unsafe { real(queue) })
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
