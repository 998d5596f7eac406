//! The C signatures of the HSA queue functions libxhsa interposes, and the offsets of the
//! `amd_queue_t` fields it reads and writes.

use std::ffi::c_void;
use std::mem::offset_of;

use hsa_sys::hsa::{
    amd_queue_t, hsa_agent_t, hsa_amd_queue_priority_t, hsa_queue_t, hsa_queue_type32_t,
    hsa_signal_t, hsa_signal_value_t, hsa_status_t,
};

pub(crate) type QueueCallback =
    Option<unsafe extern "C" fn(hsa_status_t, *mut hsa_queue_t, *mut c_void)>;
pub(crate) type QueueCreateFn = unsafe extern "C" fn(
    hsa_agent_t,
    u32,
    hsa_queue_type32_t,
    QueueCallback,
    *mut c_void,
    u32,
    u32,
    *mut *mut hsa_queue_t,
) -> hsa_status_t;
pub(crate) type QueueFn = unsafe extern "C" fn(*mut hsa_queue_t) -> hsa_status_t;
pub(crate) type LoadIndexFn = unsafe extern "C" fn(*const hsa_queue_t) -> u64;
pub(crate) type StoreIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64);
pub(crate) type CasIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64, u64) -> u64;
pub(crate) type AddIndexFn = unsafe extern "C" fn(*const hsa_queue_t, u64) -> u64;
pub(crate) type SignalStoreFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
pub(crate) type SetPriorityFn =
    unsafe extern "C" fn(*mut hsa_queue_t, hsa_amd_queue_priority_t) -> hsa_status_t;
pub(crate) type CuSetMaskFn =
    unsafe extern "C" fn(*const hsa_queue_t, u32, *const u32) -> hsa_status_t;
pub(crate) type CuGetMaskFn =
    unsafe extern "C" fn(*const hsa_queue_t, u32, *mut u32) -> hsa_status_t;
/// `hsa_amd_queue_get_info` (ROCm 6.x): queue, `hsa_queue_info_attribute_t`, value.
pub(crate) type QueueGetInfoFn =
    unsafe extern "C" fn(*mut hsa_queue_t, u32, *mut libc::c_void) -> hsa_status_t;
pub(crate) type ProfilerFn = unsafe extern "C" fn(*mut hsa_queue_t, libc::c_int) -> hsa_status_t;

/// Offsets in `amd_queue_t` (its first member is the `hsa_queue_t`).
pub(crate) const WRITE_INDEX: u64 = offset_of!(amd_queue_t, write_dispatch_id) as u64;
pub(crate) const READ_INDEX: u64 = offset_of!(amd_queue_t, read_dispatch_id) as u64;
pub(super) const BASE_ADDRESS: u64 = offset_of!(hsa_queue_t, base_address) as u64;
pub(super) const DOORBELL: u64 = offset_of!(hsa_queue_t, doorbell_signal) as u64;
pub(super) const SIZE: u64 = offset_of!(hsa_queue_t, size) as u64;
pub(super) const QUEUE_PROPERTIES: u64 = offset_of!(amd_queue_t, queue_properties) as u64;
/// The shadow ring starts this far into the shadow's allocation.
pub(super) const RING_OFFSET: u64 = 4096;
// The shadow's amd_queue struct and ROCr's queue-object word fit before the ring in every known
// layout (`queue_layout`).
const _: () = assert!(
    crate::entry::queue_layout::AMD_QUEUE_V2.core_queue_word + 8 <= RING_OFFSET
        && crate::entry::queue_layout::AMD_QUEUE_V1.core_queue_word + 8 <= RING_OFFSET
);
