//! Queues: `hsaKmtCreateQueue` and friends over KFD's CREATE/UPDATE/DESTROY_QUEUE and
//! SET_CU_MASK. As in the real thunk, `QueueId` is a pointer to the thunk's queue record whose
//! first word is KFD's queue id, and SDMA queues get thunk-owned read/write pointer words.

use hsa_sys::hsakmt::*;
use xhsa_emu::sys::mem;
use xhsa_ioctl::abi::memory::{AllocMemoryOfGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT};
use xhsa_ioctl::abi::queue::{
    AllocQueueGwsArgs, CreateQueueArgs, DestroyQueueArgs, SetCuMaskArgs, UpdateQueueArgs,
    KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
};
use xhsa_ioctl::abi::request::{
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_ALLOC_QUEUE_GWS, AMDKFD_IOC_CREATE_QUEUE,
    AMDKFD_IOC_DESTROY_QUEUE, AMDKFD_IOC_SET_CU_MASK, AMDKFD_IOC_UPDATE_QUEUE,
};

use crate::interpose::kfd_call;

use super::{emu, errno_status, status};
use crate::guard;

/// The thunk's record of a queue; `QueueId` points at it.
#[repr(C)]
struct QueueRecord {
    /// KFD's queue id (first, as in the real thunk's `struct queue`).
    queue_id: u32,
    pad: u32,
    /// Thunk-owned page holding the SDMA read/write pointers (0 for AQL queues).
    pointers: u64,
}

/// Thunk priority (-3..3) to KFD priority (0..15), the real thunk's `priority_map`.
fn kfd_priority(p: i64) -> u32 {
    const MAP: [u32; 7] = [0, 3, 5, 7, 9, 11, 15];
    MAP[(p.clamp(-3, 3) + 3) as usize]
}

fn record(id: HSA_QUEUEID) -> Result<&'static QueueRecord, HSAKMT_STATUS> {
    // SAFETY: QueueIds handed out by hsaKmtCreateQueue point at a leaked QueueRecord that lives
    // until hsaKmtDestroyQueue; 0 is rejected.
    (id != 0)
        .then(|| unsafe { &*(id as *const QueueRecord) })
        .ok_or(HSAKMT_STATUS_INVALID_PARAMETER)
}

/// `hsaKmtCreateQueue`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `res` is null or a readable and writable `HsaQueueResource`
/// (for an AQL queue, with the read and write pointer addresses filled in); `ring` is the queue's
/// ring of `ring_bytes`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtCreateQueue(
    node: u32,
    kind: HSA_QUEUE_TYPE,
    percentage: u32,
    priority: HSA_QUEUE_PRIORITY,
    ring: *mut libc::c_void,
    ring_bytes: u64,
    _event: *mut HsaEvent,
    res: *mut HsaQueueResource,
) -> HSAKMT_STATUS {
    guard("hsaKmtCreateQueue", || {
        status((|| {
            let e = emu()?;
            let gpu_id =
                e.gpu_id(node).filter(|&g| g != 0).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            // SAFETY: checked non-null; ROCr passes a readable and writable resource block.
            let r = unsafe { res.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            let queue_type = match kind {
                HSA_QUEUE_COMPUTE_AQL => KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
                HSA_QUEUE_SDMA => KFD_IOC_QUEUE_TYPE_SDMA,
                HSA_QUEUE_SDMA_XGMI => KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
                _ => return Err(HSAKMT_STATUS_NOT_SUPPORTED),
            };
            let mut pointers = 0;
            let (read_ptr, write_ptr) = if queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE_AQL {
                // SAFETY: union views of the pointers ROCr filled in.
                unsafe { (r.__bindgen_anon_3.QueueRptrValue, r.__bindgen_anon_2.QueueWptrValue) }
            } else {
                pointers =
                    mem::map(4096, 4096, false, true).map_err(|_| HSAKMT_STATUS_NO_MEMORY)?;
                let mut a = AllocMemoryOfGpuArgs {
                    va_addr: pointers,
                    size: 4096,
                    gpu_id,
                    flags: KFD_IOC_ALLOC_MEM_FLAGS_GTT,
                    ..Default::default()
                };
                kfd_call(e.fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a).map_err(errno_status)?;
                (pointers, pointers + 8)
            };
            let mut a = CreateQueueArgs {
                ring_base_address: ring as u64,
                write_pointer_address: write_ptr,
                read_pointer_address: read_ptr,
                ring_size: ring_bytes as u32,
                gpu_id,
                queue_type,
                queue_percentage: percentage,
                queue_priority: kfd_priority(priority),
                ..Default::default()
            };
            if let Err(errno) = kfd_call(e.fd, AMDKFD_IOC_CREATE_QUEUE, &mut a) {
                if pointers != 0 {
                    e.kfd.free_memory(pointers);
                    mem::unmap(pointers, 4096);
                }
                return Err(errno_status(errno));
            }
            let doorbell = e.kfd.doorbell_address(a.doorbell_offset).ok_or(HSAKMT_STATUS_ERROR)?;
            let rec =
                Box::into_raw(Box::new(QueueRecord { queue_id: a.queue_id, pad: 0, pointers }));
            r.QueueId = rec as u64;
            r.__bindgen_anon_1.QueueDoorBell = doorbell;
            if pointers != 0 {
                r.__bindgen_anon_3.QueueRptrValue = read_ptr;
                r.__bindgen_anon_2.QueueWptrValue = write_ptr;
            }
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtDestroyQueue(id: HSA_QUEUEID) -> HSAKMT_STATUS {
    guard("hsaKmtDestroyQueue", || {
        status((|| {
            let e = emu()?;
            let rec = record(id)?;
            let mut a = DestroyQueueArgs { queue_id: rec.queue_id, pad: 0 };
            kfd_call(e.fd, AMDKFD_IOC_DESTROY_QUEUE, &mut a).map_err(errno_status)?;
            if rec.pointers != 0 {
                e.kfd.free_memory(rec.pointers);
                mem::unmap(rec.pointers, 4096);
            }
            // SAFETY: created by Box::into_raw in hsaKmtCreateQueue; destroyed once.
            drop(unsafe { Box::from_raw(id as *mut QueueRecord) });
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtUpdateQueue(
    id: HSA_QUEUEID,
    percentage: u32,
    priority: HSA_QUEUE_PRIORITY,
    ring: *mut libc::c_void,
    size: u64,
    _event: *mut HsaEvent,
) -> HSAKMT_STATUS {
    guard("hsaKmtUpdateQueue", || {
        status((|| {
            let e = emu()?;
            let rec = record(id)?;
            let mut a = UpdateQueueArgs {
                ring_base_address: ring as u64,
                queue_id: rec.queue_id,
                ring_size: size as u32,
                queue_percentage: percentage,
                queue_priority: kfd_priority(priority),
            };
            kfd_call(e.fd, AMDKFD_IOC_UPDATE_QUEUE, &mut a).map(|_| ()).map_err(errno_status)
        })())
    })
}

/// `hsaKmtSetQueueCUMask`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `id` is 0 or a queue id from `hsaKmtCreateQueue`, not
/// destroyed; `mask` is null or points to `bits / 32` readable words.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtSetQueueCUMask(
    id: HSA_QUEUEID,
    bits: u32,
    mask: *mut u32,
) -> HSAKMT_STATUS {
    guard("hsaKmtSetQueueCUMask", || {
        status((|| {
            let e = emu()?;
            let rec = record(id)?;
            if mask.is_null() || bits == 0 || !bits.is_multiple_of(32) {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            // SAFETY: the caller passes bits/32 mask words.
            let words = unsafe { std::slice::from_raw_parts(mask, (bits / 32) as usize) };
            let mut a = SetCuMaskArgs {
                queue_id: rec.queue_id,
                num_cu_mask: bits,
                cu_mask_ptr: words.as_ptr() as u64,
            };
            kfd_call(e.fd, AMDKFD_IOC_SET_CU_MASK, &mut a).map(|_| ()).map_err(errno_status)
        })())
    })
}

/// `hsaKmtAllocQueueGWS`, over the emulated KFD's ALLOC_QUEUE_GWS: ROCr gives its
/// cooperative queue the GPU's GWS with it. Status mapping as the real thunk's (EINVAL:
/// invalid parameter, EBUSY: out of resources, ENODEV: not supported).
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `id` is 0 or a live queue id from `hsaKmtCreateQueue`;
/// `first` is null or valid for writing a `u32`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtAllocQueueGWS(
    id: HSA_QUEUEID,
    count: u32,
    first: *mut u32,
) -> HSAKMT_STATUS {
    guard("hsaKmtAllocQueueGWS", || {
        status((|| {
            let e = emu()?;
            let rec = record(id)?;
            let mut a =
                AllocQueueGwsArgs { queue_id: rec.queue_id, num_gws: count, ..Default::default() };
            // This function's own errno mapping in the real thunk (not `errno_status`'s).
            kfd_call(e.fd, AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut a).map_err(|errno| match errno {
                libc::EINVAL => HSAKMT_STATUS_INVALID_PARAMETER,
                libc::EBUSY => HSAKMT_STATUS_OUT_OF_RESOURCES,
                libc::ENODEV => HSAKMT_STATUS_NOT_SUPPORTED,
                _ => HSAKMT_STATUS_ERROR,
            })?;
            if !first.is_null() {
                // SAFETY: checked non-null; the caller's u32.
                unsafe { first.write(a.first_gws) };
            }
            Ok(())
        })())
    })
}

crate::symver!(
    hsaKmtAllocQueueGWS,
    hsaKmtCreateQueue,
    hsaKmtDestroyQueue,
    hsaKmtUpdateQueue,
    hsaKmtSetQueueCUMask,
);
