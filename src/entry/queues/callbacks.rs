//! ROCr's calls into libxhsa: the completion handler of tracking signals and the error callback
//! of hardware queues.

use std::ffi::c_void;
use std::panic::catch_unwind;

use hsa_sys::hsa::{hsa_queue_t, hsa_status_t};
use xhsa_model::ids::QueueId;

use super::registry::callbacks;
use super::scheduler_lock::with_queue;

/// libxhsa's error callback on a hardware queue: the application's, with the queue pointer it
/// holds and its own data.
///
/// # Safety
///
/// Called by ROCr as the queue error callback libxhsa registered: `data` is the queue id
/// (never dereferenced), `source` the hardware queue. The application's callback is called as
/// ROCr would have called it, which `hsa_queue_create`'s caller made safe.
pub(super) unsafe extern "C" fn hw_queue_error(
    status: hsa_status_t,
    source: *mut hsa_queue_t,
    data: *mut c_void,
) {
    let id = data as u64;
    let entry = catch_unwind(|| callbacks().get(&id).copied()).ok().flatten();
    let Some(e) = entry else { return };
    let shown = if e.shadow != 0 {
        let _ = catch_unwind(|| with_queue(id, |s, _, _, _| s.fail(QueueId(id))));
        e.shadow as *mut hsa_queue_t
    } else {
        source
    };
    if let Some(cb) = e.callback {
        // SAFETY: the application's callback with the arguments ROCr would have given it, the
        // queue being the one the application knows.
        unsafe { cb(status, shown, e.data as *mut c_void) };
    }
}
