//! Events: the thunk allocates the signal-event page (as the real thunk does) and hands KFD's
//! event ids and mailbox addresses to ROCr through `HsaEvent`.

use std::sync::atomic::Ordering;

use hsa_sys::hsakmt::*;
use xhsa_emu::kfd::events::UNSIGNALED;
use xhsa_emu::sys::mem;
use xhsa_ioctl::abi::event::{CreateEventArgs, WaitEventsArgs, KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE, KFD_SIGNAL_EVENT_LIMIT};
use xhsa_ioctl::abi::memory::{AllocMemoryOfGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT};

use super::{emu, errno_status, status};
use crate::guard;
use crate::state::Emu;

/// The event page (one u64 mailbox slot per signal event), created on first use.
fn event_page(e: &Emu) -> Result<u64, HSAKMT_STATUS> {
    let cur = e.event_page.load(Ordering::Acquire);
    if cur != 0 {
        return Ok(cur);
    }
    let size = u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    let page = mem::map(size, 4096, false, true).map_err(|_| HSAKMT_STATUS_NO_MEMORY)?;
    for i in 0..u64::from(KFD_SIGNAL_EVENT_LIMIT) {
        // SAFETY: inside the mapping just created, 8-byte aligned.
        unsafe { *((page + 8 * i) as *mut u64) = UNSIGNALED };
    }
    let gpu_id = e.nodes.get(1).map_or(0, |g| g.gpu_id);
    let mut a = AllocMemoryOfGpuArgs { va_addr: page, size, gpu_id, flags: KFD_IOC_ALLOC_MEM_FLAGS_GTT, ..Default::default() };
    e.kfd.alloc_memory(&mut a, 0, 0, false).map_err(errno_status)?;
    match e.event_page.compare_exchange(0, page, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(page),
        Err(other) => {
            e.kfd.free_memory(page);
            mem::unmap(page, size);
            Ok(other)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn hsaKmtCreateEvent(desc: *mut HsaEventDescriptor, manual_reset: bool, signaled: bool, out: *mut *mut HsaEvent) -> HSAKMT_STATUS {
    guard("hsaKmtCreateEvent", || {
        status((|| {
            let e = emu()?;
            // SAFETY: checked non-null; ROCr passes a readable descriptor.
            let d = unsafe { desc.as_ref() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            if out.is_null() {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            let kind = d.EventType;
            let mut a = CreateEventArgs { event_type: kind, auto_reset: u32::from(!manual_reset), node_id: d.NodeId, ..Default::default() };
            if kind == KFD_IOC_EVENT_SIGNAL {
                a.event_page_offset = event_page(&e)?;
            }
            e.kfd.create_event(&mut a).map_err(errno_status)?;
            let mut ev = HsaEvent { EventId: a.event_id, ..Default::default() };
            ev.EventData.EventType = kind;
            ev.EventData.HWData1 = u64::from(a.event_id);
            if kind == KFD_IOC_EVENT_SIGNAL {
                ev.EventData.HWData2 = e.event_page.load(Ordering::Acquire) + 8 * u64::from(a.event_slot_index);
            }
            ev.EventData.HWData3 = a.event_trigger_data;
            if signaled {
                let _ = e.kfd.set_event(a.event_id);
            }
            // SAFETY: checked non-null; ownership passes to the caller until DestroyEvent.
            unsafe { *out = Box::into_raw(Box::new(ev)) };
            Ok(())
        })())
    })
}

/// The id of a caller's event, if the pointer is non-null.
fn id_of(ev: *mut HsaEvent) -> Option<u32> {
    // SAFETY: a non-null HsaEvent comes from hsaKmtCreateEvent; read unaligned (pack 4).
    (!ev.is_null()).then(|| unsafe { std::ptr::addr_of!((*ev).EventId).read_unaligned() })
}

#[no_mangle]
pub extern "C" fn hsaKmtDestroyEvent(ev: *mut HsaEvent) -> HSAKMT_STATUS {
    guard("hsaKmtDestroyEvent", || {
        status((|| {
            let e = emu()?;
            let id = id_of(ev).ok_or(HSAKMT_STATUS_INVALID_HANDLE)?;
            let _ = e.kfd.events.destroy(id);
            // SAFETY: created by Box::into_raw in hsaKmtCreateEvent; the caller gives it up.
            drop(unsafe { Box::from_raw(ev) });
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtSetEvent(ev: *mut HsaEvent) -> HSAKMT_STATUS {
    guard("hsaKmtSetEvent", || {
        status((|| {
            let e = emu()?;
            let id = id_of(ev).ok_or(HSAKMT_STATUS_INVALID_HANDLE)?;
            e.kfd.set_event(id).map_err(errno_status)
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtResetEvent(ev: *mut HsaEvent) -> HSAKMT_STATUS {
    guard("hsaKmtResetEvent", || {
        status((|| {
            let e = emu()?;
            let id = id_of(ev).ok_or(HSAKMT_STATUS_INVALID_HANDLE)?;
            e.kfd.events.reset(id).map_err(|_| HSAKMT_STATUS_INVALID_HANDLE)
        })())
    })
}

#[no_mangle]
pub unsafe extern "C" fn hsaKmtWaitOnEvent(ev: *mut HsaEvent, ms: u32) -> HSAKMT_STATUS {
    let mut one = ev;
    // SAFETY: a one-element array on our stack.
    unsafe { hsaKmtWaitOnMultipleEvents(&mut one, 1, true, ms) }
}

#[no_mangle]
pub unsafe extern "C" fn hsaKmtWaitOnMultipleEvents(events: *mut *mut HsaEvent, num: u32, wait_all: bool, ms: u32) -> HSAKMT_STATUS {
    guard("hsaKmtWaitOnMultipleEvents", || {
        let e = match emu() {
            Ok(e) => e,
            Err(s) => return s,
        };
        if events.is_null() || num == 0 {
            return HSAKMT_STATUS_INVALID_PARAMETER;
        }
        // SAFETY: the caller passes `num` event pointers.
        let list = unsafe { std::slice::from_raw_parts(events, num as usize) };
        let mut ids = Vec::with_capacity(list.len());
        for &ev in list {
            match id_of(ev) {
                Some(id) => ids.push(id),
                None => return HSAKMT_STATUS_INVALID_HANDLE,
            }
        }
        let mut a = WaitEventsArgs { num_events: num, wait_for_all: u32::from(wait_all), timeout: ms, ..Default::default() };
        let out = match e.kfd.wait_events(&ids, &mut a) {
            Ok(o) => o,
            Err(errno) => return errno_status(errno),
        };
        for (id, data) in out.memory_faults {
            for &ev in list {
                // SAFETY: each pointer came from hsaKmtCreateEvent; fields written unaligned.
                unsafe {
                    if std::ptr::addr_of!((*ev).EventId).read_unaligned() == id
                        && std::ptr::addr_of!((*ev).EventData.EventType).read_unaligned() == KFD_IOC_EVENT_MEMORY
                    {
                        let mut f = HsaMemoryAccessFault { NodeId: e.node_of_gpu(data.gpu_id), VirtualAddress: data.va, ..std::mem::zeroed() };
                        f.Failure.set_NotPresent(data.failure.not_present);
                        f.Failure.set_ReadOnly(data.failure.read_only);
                        f.Failure.set_NoExecute(data.failure.no_execute);
                        f.Failure.set_Imprecise(data.failure.imprecise);
                        f.Flags = HSA_EVENTID_MEMORY_FATAL_PROCESS;
                        std::ptr::addr_of_mut!((*ev).EventData.EventData.MemoryAccessFault).write_unaligned(f);
                    }
                }
            }
        }
        if a.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE {
            HSAKMT_STATUS_SUCCESS
        } else {
            HSAKMT_STATUS_WAIT_TIMEOUT
        }
    })
}

crate::symver!(
    hsaKmtCreateEvent,
    hsaKmtDestroyEvent,
    hsaKmtSetEvent,
    hsaKmtResetEvent,
    hsaKmtWaitOnEvent,
    hsaKmtWaitOnMultipleEvents,
);
