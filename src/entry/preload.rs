//! `LD_PRELOAD`: the HSA functions HIP and the ROCm libraries call through the PLT, including
//! the deprecated alias names ROCr still exports (`_acquire`, `_release`, `_acq_rel`,
//! `hsa_signal_store_release`). Each hands ROCr's next definition to [`super::queues`], which
//! calls it at most once.
//!
//! Every function here is `unsafe` with the contract of the HSA function it replaces (HSA
//! runtime specification, ROCr's `hsa.h` / `hsa_ext_amd.h`): what the application passes is
//! passed on unchanged to ROCr's definition, except on a shadow queue or doorbell, which libxhsa
//! handles itself.

use std::sync::atomic::{AtomicUsize, Ordering};

use hsa_sys::hsa::{
    hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t, hsa_signal_t,
    hsa_signal_value_t, hsa_status_t,
};

use super::queues::{
    self, AddIndexFn, CasIndexFn, CuGetMaskFn, CuSetMaskFn, LoadIndexFn, ProfilerFn, QueueCallback,
    QueueCreateFn, QueueFn, QueueGetInfoFn, SetPriorityFn, SignalStoreFn, StoreIndexFn, READ_INDEX,
    WRITE_INDEX,
};
use super::{global, next_symbol};
use crate::entry::seen::Loading;

/// The library that defines the HSA functions (ROCm 5.x and 6.x soname).
const ROCR: &std::ffi::CStr = c"libhsa-runtime64.so.1";

/// ROCr's next definition of the symbol `$name`, as a `$ty` (cached per symbol). An unsafe
/// call ([`super::symbol::typed`]): `$ty` must be the C type of the HSA function `$name`.
macro_rules! next {
    ($name:expr, $ty:ty) => {{
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        super::symbol::typed::<$ty>(next_symbol(&NEXT, ROCR, $name))
    }};
}

/// The name of function `$name` as a C string, at compile time.
macro_rules! cname {
    ($name:ident) => {{
        const NAME: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
            concat!(stringify!($name), "\0").as_bytes(),
        ) {
            Ok(c) => c,
            Err(_) => panic!("a symbol name has no interior NUL"),
        };
        NAME
    }};
}

/// `hsa_queue_create`: a shadow queue over a hardware queue ROCr creates, or the hardware queue
/// itself (see `queues::queue_create`).
///
/// # Safety
///
/// `hsa_queue_create`'s contract: `queue` is null or valid for writing a queue pointer;
/// `callback` is `None` or a function that may be called with the queue's errors and `data`
/// (from any thread, until the queue is destroyed).
#[no_mangle]
// The arity is hsa_queue_create's C signature.
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
    // SAFETY: ROCr's definition (or None) as QueueCreateFn, the C type of that function; given the caller's arguments under its contract.
    unsafe {
        queues::queue_create(
            next!(c"hsa_queue_create", QueueCreateFn),
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

/// `hsa_shut_down`: every queue back on the GPU and the debug trap off first; preemption retires
/// with the runtime (see `lifecycle::shut_down`).
///
/// # Safety
///
/// `hsa_shut_down`'s contract: the runtime is initialized.
#[no_mangle]
pub unsafe extern "C" fn hsa_shut_down() -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for).
    unsafe { super::lifecycle::shut_down(next!(c"hsa_shut_down", super::lifecycle::ShutDownFn)) }
}

/// `hsa_queue_destroy`: a shadow is drained and freed with its hardware queue.
///
/// # Safety
///
/// `hsa_queue_destroy`'s contract: `queue` was returned by `hsa_queue_create`, is not yet
/// destroyed, and no other thread uses it during or after the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's queue under its contract.
    unsafe { queues::queue_destroy(next!(c"hsa_queue_destroy", QueueFn), queue) }
}

/// `hsa_queue_inactivate`: on a shadow, its held packets are dropped and its hardware queue
/// inactivated.
///
/// # Safety
///
/// `hsa_queue_inactivate`'s contract: `queue` was returned by `hsa_queue_create` and is not
/// destroyed.
#[no_mangle]
pub unsafe extern "C" fn hsa_queue_inactivate(queue: *mut hsa_queue_t) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's queue under its contract.
    unsafe { queues::queue_inactivate(next!(c"hsa_queue_inactivate", QueueFn), queue) }
}

macro_rules! load_index {
    ($($name:ident, $field:expr, $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: a shadow's own index, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const hsa_queue_t) -> u64 {
            // SAFETY: ROCr's definition (or None) as LoadIndexFn, the C type of that function; given the caller's queue under its contract.
            unsafe { queues::load_index(next!(cname!($name), LoadIndexFn), queue, $field, $order) }
        }
    )*};
}

macro_rules! store_write_index {
    ($($name:ident, $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: a shadow's own write index, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const hsa_queue_t, value: u64) {
            // SAFETY: ROCr's definition (or None) as StoreIndexFn, the C type of that function; given the caller's queue under its contract.
            unsafe { queues::store_write_index(next!(cname!($name), StoreIndexFn), queue, value, $order) }
        }
    )*};
}

macro_rules! cas_write_index {
    ($($name:ident, $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: a shadow's own write index, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const hsa_queue_t, expected: u64, value: u64) -> u64 {
            // SAFETY: ROCr's definition (or None) as CasIndexFn, the C type of that function; given the caller's queue under its contract.
            unsafe { queues::cas_write_index(next!(cname!($name), CasIndexFn), queue, expected, value, $order) }
        }
    )*};
}

macro_rules! add_write_index {
    ($($name:ident, $order:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: a shadow's own write index, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const hsa_queue_t, value: u64) -> u64 {
            // SAFETY: ROCr's definition (or None) as AddIndexFn, the C type of that function; given the caller's queue under its contract.
            unsafe { queues::add_write_index(next!(cname!($name), AddIndexFn), queue, value, $order) }
        }
    )*};
}

macro_rules! store_read_index {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: ignored on a shadow, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `queue` was returned by
        /// `hsa_queue_create` and is not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(queue: *const hsa_queue_t, value: u64) {
            // SAFETY: ROCr's definition (or None) as StoreIndexFn, the C type of that function; given the caller's queue under its contract.
            unsafe { queues::store_read_index(next!(cname!($name), StoreIndexFn), queue, value) }
        }
    )*};
}

macro_rules! signal_store {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: a forwarding pass on a shadow doorbell, else ROCr's.")]
        ///
        /// # Safety
        ///
        /// The HSA contract of the function of that name: `signal` is a signal created by the
        /// runtime and not destroyed.
        #[no_mangle]
        pub unsafe extern "C" fn $name(signal: hsa_signal_t, value: hsa_signal_value_t) {
            // SAFETY: ROCr's definition (or None) as SignalStoreFn, the C type of that function; given the caller's signal under its contract.
            unsafe { queues::signal_store(next!(cname!($name), SignalStoreFn), signal, value) }
        }
    )*};
}

load_index! {
    hsa_queue_load_read_index_scacquire, READ_INDEX, Ordering::Acquire;
    hsa_queue_load_read_index_acquire, READ_INDEX, Ordering::Acquire;
    hsa_queue_load_read_index_relaxed, READ_INDEX, Ordering::Relaxed;
    hsa_queue_load_write_index_scacquire, WRITE_INDEX, Ordering::Acquire;
    hsa_queue_load_write_index_acquire, WRITE_INDEX, Ordering::Acquire;
    hsa_queue_load_write_index_relaxed, WRITE_INDEX, Ordering::Relaxed;
}

store_write_index! {
    hsa_queue_store_write_index_relaxed, Ordering::Relaxed;
    hsa_queue_store_write_index_screlease, Ordering::Release;
    hsa_queue_store_write_index_release, Ordering::Release;
}

cas_write_index! {
    hsa_queue_cas_write_index_scacq_screl, Ordering::AcqRel;
    hsa_queue_cas_write_index_acq_rel, Ordering::AcqRel;
    hsa_queue_cas_write_index_scacquire, Ordering::Acquire;
    hsa_queue_cas_write_index_acquire, Ordering::Acquire;
    hsa_queue_cas_write_index_relaxed, Ordering::Relaxed;
    hsa_queue_cas_write_index_screlease, Ordering::Release;
    hsa_queue_cas_write_index_release, Ordering::Release;
}

add_write_index! {
    hsa_queue_add_write_index_scacq_screl, Ordering::AcqRel;
    hsa_queue_add_write_index_acq_rel, Ordering::AcqRel;
    hsa_queue_add_write_index_scacquire, Ordering::Acquire;
    hsa_queue_add_write_index_acquire, Ordering::Acquire;
    hsa_queue_add_write_index_relaxed, Ordering::Relaxed;
    hsa_queue_add_write_index_screlease, Ordering::Release;
    hsa_queue_add_write_index_release, Ordering::Release;
}

store_read_index! {
    hsa_queue_store_read_index_relaxed;
    hsa_queue_store_read_index_screlease;
    hsa_queue_store_read_index_release;
}

signal_store! {
    hsa_signal_store_relaxed;
    hsa_signal_store_screlease;
    hsa_signal_store_release;
    hsa_signal_silent_store_relaxed;
    hsa_signal_silent_store_screlease;
}

/// `hsa_amd_queue_set_priority`: on the hardware queue behind a shadow, which also takes the
/// stream priority into libxhsa's rings.
///
/// # Safety
///
/// `hsa_amd_queue_set_priority`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_set_priority(
    queue: *mut hsa_queue_t,
    priority: hsa_amd_queue_priority_t,
) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's arguments under its contract.
    unsafe {
        queues::set_priority(next!(c"hsa_amd_queue_set_priority", SetPriorityFn), queue, priority)
    }
}

/// `hsa_amd_queue_cu_set_mask`: on the hardware queue behind a shadow.
///
/// # Safety
///
/// `hsa_amd_queue_cu_set_mask`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed; `mask` points to `count` bits (`count / 32` rounded up `u32`s) readable for
/// the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_cu_set_mask(
    queue: *const hsa_queue_t,
    count: u32,
    mask: *const u32,
) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's arguments under its contract.
    unsafe {
        queues::cu_set_mask(next!(c"hsa_amd_queue_cu_set_mask", CuSetMaskFn), queue, count, mask)
    }
}

/// `hsa_amd_queue_cu_get_mask`: from the hardware queue behind a shadow.
///
/// # Safety
///
/// `hsa_amd_queue_cu_get_mask`'s contract: `queue` was returned by `hsa_queue_create` and is
/// not destroyed; `mask` points to `count` bits (`count / 32` rounded up `u32`s) writable for
/// the call.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_cu_get_mask(
    queue: *const hsa_queue_t,
    count: u32,
    mask: *mut u32,
) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's arguments under its contract.
    unsafe {
        queues::cu_get_mask(next!(c"hsa_amd_queue_cu_get_mask", CuGetMaskFn), queue, count, mask)
    }
}

/// `hsa_amd_queue_get_info` (ROCm 6.x; absent from 5.x's ROCr, then an error): from the
/// hardware queue behind a shadow.
///
/// # Safety
///
/// `hsa_amd_queue_get_info`'s contract: `queue` was returned by `hsa_queue_create` and is not
/// destroyed; `value` is writable for the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_get_info(
    queue: *mut hsa_queue_t,
    attribute: u32,
    value: *mut libc::c_void,
) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's arguments under its contract.
    unsafe {
        queues::queue_get_info(
            next!(c"hsa_amd_queue_get_info", QueueGetInfoFn),
            queue,
            attribute,
            value,
        )
    }
}

/// `hsa_amd_profiling_set_profiler_enabled`: on the hardware queue behind a shadow, mirrored
/// into the shadow.
///
/// # Safety
///
/// `hsa_amd_profiling_set_profiler_enabled`'s contract: `queue` was returned by
/// `hsa_queue_create` and is not destroyed.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_profiling_set_profiler_enabled(
    queue: *mut hsa_queue_t,
    enable: libc::c_int,
) -> hsa_status_t {
    // SAFETY: ROCr's definition of the function named (or None), as its C type (the pairing `next!` asks for), given the caller's arguments under its contract.
    unsafe {
        queues::set_profiler_enabled(
            next!(c"hsa_amd_profiling_set_profiler_enabled", ProfilerFn),
            queue,
            enable,
        )
    }
}

/// `hsa_code_object_reader_create_from_memory`: ROCr's, and libxhsa notes which libraries asked
/// for the code object (`origin::code_object_from_memory`).
///
/// # Safety
///
/// `hsa_code_object_reader_create_from_memory`'s contract: `code_object` points to `size`
/// readable bytes, `reader` is valid for writing a reader handle.
#[no_mangle]
pub unsafe extern "C" fn hsa_code_object_reader_create_from_memory(
    code_object: *const libc::c_void,
    size: usize,
    reader: *mut hsa_sys::hsa::hsa_code_object_reader_t,
) -> hsa_status_t {
    global().announce(Loading::Preload);
    // SAFETY: ROCr's definition (or None) as ReaderFromMemoryFn, the C type of that function;
    // given the caller's arguments under its contract.
    unsafe {
        super::origin::code_object_from_memory(
            next!(c"hsa_code_object_reader_create_from_memory", super::origin::ReaderFromMemoryFn),
            code_object,
            size,
            reader,
        )
    }
}
