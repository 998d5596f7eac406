//! The KFD queue behind every hardware queue: `hsaKmtCreateQueue` (ROCm 5.x, thunk as a shared
//! library; the real thunk's `QueueId` points at its queue record, whose first word is KFD's
//! queue id) and `ioctl(AMDKFD_IOC_CREATE_QUEUE)` (ROCm 6.x, thunk linked into ROCr). Both
//! forward first and record after a success.

use std::sync::atomic::AtomicUsize;

use hsa_sys::hsakmt::{
    HsaEvent, HsaQueueResource, HSAKMT_STATUS, HSAKMT_STATUS_ERROR, HSA_QUEUE_PRIORITY,
    HSA_QUEUE_TYPE,
};
use std::cell::Cell;
use xhsa_ioctl::abi::queue::{CreateQueueArgs, UpdateQueueArgs};

use super::{next_symbol, record};
use crate::entry::seen::{KfdCreate, KfdSource};

type CreateQueueFn = unsafe extern "C" fn(
    u32,
    HSA_QUEUE_TYPE,
    u32,
    HSA_QUEUE_PRIORITY,
    *mut libc::c_void,
    u64,
    *mut HsaEvent,
    *mut HsaQueueResource,
) -> HSAKMT_STATUS;
type IoctlFn = unsafe extern "C" fn(libc::c_int, libc::c_ulong, *mut libc::c_void) -> libc::c_int;

static NEXT_CREATE_QUEUE: AtomicUsize = AtomicUsize::new(0);
static NEXT_IOCTL: AtomicUsize = AtomicUsize::new(0);

/// Reads a u32 at `addr` without risking a fault (the thunk's record may not be readable).
fn read_u32(addr: u64) -> Option<u32> {
    let mut v = 0u32;
    let local = libc::iovec { iov_base: (&mut v as *mut u32).cast(), iov_len: 4 };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: 4 };
    // SAFETY: `local` is our own 4-byte buffer; the kernel validates `remote`.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == 4).then_some(v)
}

/// `hsaKmtCreateQueue` (ROCm 5.x): the thunk's, then the KFD queue id and doorbell recorded.
///
/// # Safety
///
/// The thunk's contract of `hsaKmtCreateQueue`: `ring` is the queue's ring of `ring_bytes`,
/// `event` what the queue type needs, `res` null or valid for writing an `HsaQueueResource`;
/// they are passed on unchanged.
#[no_mangle]
// The arity is hsaKmtCreateQueue's C signature.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hsaKmtCreateQueue(
    node: u32,
    kind: HSA_QUEUE_TYPE,
    percentage: u32,
    priority: HSA_QUEUE_PRIORITY,
    ring: *mut libc::c_void,
    ring_bytes: u64,
    event: *mut HsaEvent,
    res: *mut HsaQueueResource,
) -> HSAKMT_STATUS {
    let p = next_symbol(&NEXT_CREATE_QUEUE, c"libhsakmt.so.1", c"hsaKmtCreateQueue");
    // SAFETY: 0 or the next definition of hsaKmtCreateQueue (the thunk's), of this type.
    let Some(real) = (unsafe { super::symbol::typed::<CreateQueueFn>(p) }) else {
        return HSAKMT_STATUS_ERROR;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let status = unsafe { real(node, kind, percentage, priority, ring, ring_bytes, event, res) };
    if status == 0 && !res.is_null() {
        record(|g| {
            // SAFETY: on success the thunk filled the resource block the caller passed.
            let (qid, doorbell) =
                unsafe { ((*res).QueueId, (*res).__bindgen_anon_1.QueueDoorBell) };
            if let Some(id) = read_u32(qid) {
                g.seen.kfd_queue(KfdSource::Thunk, ring as u64, id, Some(doorbell), None, None);
            }
        });
    }
    status
}

/// `AMDKFD_IOC_CREATE_QUEUE` by type and number, whatever the argument size (uapi versions
/// differ in it).
fn is_create_queue(request: libc::c_ulong) -> bool {
    is_kfd(request, 0x02)
}

/// A KFD ioctl of number `nr`, whatever its argument size.
fn is_kfd(request: libc::c_ulong, nr: u64) -> bool {
    (request >> 8) & 0xff == u64::from(b'K') && request & 0xff == nr
}

thread_local! {
    /// This thread is making libxhsa's own KFD call (the preemption port): the interposer passes
    /// it through untouched.
    static OWN_CALL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (libxhsa's own KFD call) marked as such for the interposer.
pub(crate) fn own_call<T>(f: impl FnOnce() -> T) -> T {
    OWN_CALL.with(|c| c.set(true));
    let r = f();
    OWN_CALL.with(|c| c.set(false));
    r
}

/// The runtime's `AMDKFD_IOC_UPDATE_QUEUE` (a priority change through ROCr): libxhsa keeps the
/// queue's priority and percentage for when it puts a deactivated queue back, and keeps a
/// queue it deactivated off (percentage 0) until then. `send` makes the call with the
/// arguments to pass on, under the preemption's lock of the queue's GPU (so no put-back runs
/// between the decision and the call); `None` when no GPU's preemption knows the queue (the
/// caller makes the call as it is).
fn runtime_update(
    request: libc::c_ulong,
    arg: *mut libc::c_void,
    send: &mut dyn FnMut(Option<&mut UpdateQueueArgs>) -> libc::c_int,
) -> Option<libc::c_int> {
    let size = ((request >> 16) & 0x3fff) as usize;
    if arg.is_null() || size != std::mem::size_of::<UpdateQueueArgs>() || OWN_CALL.with(|c| c.get())
    {
        return None;
    }
    let mut a = UpdateQueueArgs::default();
    // SAFETY: the caller passes `size` bytes of UPDATE_QUEUE arguments at `arg` (checked above to
    // be the struct's size).
    unsafe {
        std::ptr::copy_nonoverlapping(
            arg as *const u8,
            (&mut a as *mut UpdateQueueArgs).cast::<u8>(),
            size,
        )
    };
    for (_, gpu) in super::global().gpus.iter() {
        let Some(pre) = gpu.preempt.get() else { continue };
        let sent = pre.runtime_update(a.queue_id, a.queue_priority, a.queue_percentage, |pct| {
            if pct == a.queue_percentage {
                send(None)
            } else {
                send(Some(&mut UpdateQueueArgs { queue_percentage: pct, ..a }))
            }
        });
        if sent.is_some() {
            return sent;
        }
    }
    None
}

/// `ioctl`: libc's, with KFD's CREATE_QUEUE recorded and UPDATE_QUEUE kept from putting back a
/// queue libxhsa took off.
///
/// # Safety
///
/// `ioctl(2)`'s contract: `arg` is what `request` takes; for a KFD request, null or valid for
/// reading and writing the argument size encoded in `request`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(
    fd: libc::c_int,
    request: libc::c_ulong,
    arg: *mut libc::c_void,
) -> libc::c_int {
    let p = next_symbol(&NEXT_IOCTL, c"libc.so.6", c"ioctl");
    // SAFETY: 0 or the next definition of ioctl (libc's, or another interposer's), of this type.
    let Some(real) = (unsafe { super::symbol::typed::<IoctlFn>(p) }) else {
        // SAFETY: errno of this thread.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    };
    if is_kfd(request, 0x07) {
        let mut sent = None;
        let mut send = |changed: Option<&mut UpdateQueueArgs>| match changed {
            // SAFETY: the caller's request with our copy of its arguments (same size and type),
            // which lives for the call.
            Some(a) => unsafe { real(fd, request, (a as *mut UpdateQueueArgs).cast()) },
            // SAFETY: the caller's arguments, passed on unchanged.
            None => unsafe { real(fd, request, arg) },
        };
        record(|_| sent = runtime_update(request, arg, &mut send));
        if let Some(r) = sent {
            return r;
        }
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { real(fd, request, arg) };
    if r == 0 && !arg.is_null() && is_create_queue(request) {
        // Save errno: recording must not disturb what the caller sees.
        // SAFETY: errno of this thread.
        let errno = unsafe { *libc::__errno_location() };
        record(|g| {
            let size = ((request >> 16) & 0x3fff) as usize;
            let mut a = CreateQueueArgs::default();
            let n = size.min(std::mem::size_of::<CreateQueueArgs>());
            // SAFETY: the kernel (or KFD emulation) wrote `size` bytes of arguments at `arg`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    arg as *const u8,
                    (&mut a as *mut CreateQueueArgs).cast::<u8>(),
                    n,
                )
            };
            g.seen.kfd_queue(
                KfdSource::Ioctl,
                a.ring_base_address,
                a.queue_id,
                None,
                Some(a.doorbell_offset),
                Some(a.queue_type),
            );
            g.seen.kfd_created(
                a.ring_base_address,
                fd,
                KfdCreate {
                    ring_bytes: a.ring_size,
                    percentage: a.queue_percentage,
                    priority: a.queue_priority,
                },
            );
        });
        // SAFETY: errno of this thread (__errno_location never returns null).
        unsafe { *libc::__errno_location() = errno };
    }
    r
}
