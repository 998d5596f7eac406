//! Events: the thunk allocates the signal-event page (as the real thunk does), creates, sets,
//! resets and waits on events with KFD ioctls, and hands KFD's event ids and mailbox addresses
//! to ROCr through `HsaEvent`.

use hsa_sys::hsakmt::*;
use xhsa_emu::kfd::events::UNSIGNALED;
use xhsa_emu::sys::mem;
use xhsa_ioctl::abi::event::{
    CreateEventArgs, DestroyEventArgs, EventData, ResetEventArgs, SetEventArgs, WaitEventsArgs,
    KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE,
    KFD_SIGNAL_EVENT_LIMIT,
};
use xhsa_ioctl::abi::memory::{
    AllocMemoryOfGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
};
use xhsa_ioctl::abi::request::{
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_DESTROY_EVENT,
    AMDKFD_IOC_RESET_EVENT, AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_WAIT_EVENTS,
};

use crate::interpose::kfd_call;

use super::{emu, errno_status, status};
use crate::guard;
use crate::state::Emu;

/// The event page (one u64 mailbox slot per signal event), created on first use: memory the
/// thunk maps and registers with KFD, whose buffer handle `CREATE_EVENT` names, as the real
/// thunk does. Returns `(address, handle)`.
fn event_page(e: &Emu) -> Result<(u64, u64), HSAKMT_STATUS> {
    let mut page = e.event_page.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = *page {
        return Ok(p);
    }
    let size = u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    let addr = mem::map(size, 4096, false, true).map_err(|_| HSAKMT_STATUS_NO_MEMORY)?;
    for i in 0..u64::from(KFD_SIGNAL_EVENT_LIMIT) {
        // SAFETY: inside the mapping just created, 8-byte aligned.
        unsafe { *((addr + 8 * i) as *mut u64) = UNSIGNALED };
    }
    let gpu_id = e.nodes.get(1).map_or(0, |g| g.gpu_id);
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: addr,
        size,
        gpu_id,
        flags: KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        ..Default::default()
    };
    if let Err(errno) = kfd_call(e.fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) {
        mem::unmap(addr, size);
        return Err(errno_status(errno));
    }
    *page = Some((addr, a.handle));
    Ok((addr, a.handle))
}

/// `hsaKmtCreateEvent`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `desc` is null or a readable `HsaEventDescriptor`; `out` is
/// null or valid for writing an event pointer (the event is the caller's until
/// `hsaKmtDestroyEvent`).
#[no_mangle]
pub unsafe extern "C" fn hsaKmtCreateEvent(
    desc: *mut HsaEventDescriptor,
    manual_reset: bool,
    signaled: bool,
    out: *mut *mut HsaEvent,
) -> HSAKMT_STATUS {
    guard("hsaKmtCreateEvent", || {
        status((|| {
            let e = emu()?;
            // SAFETY: checked non-null; ROCr passes a readable descriptor.
            let d = unsafe { desc.as_ref() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            if out.is_null() {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            let kind = d.EventType;
            let mut a = CreateEventArgs {
                event_type: kind,
                auto_reset: u32::from(!manual_reset),
                node_id: d.NodeId,
                ..Default::default()
            };
            let page = if kind == KFD_IOC_EVENT_SIGNAL { Some(event_page(&e)?) } else { None };
            a.event_page_offset = page.map_or(0, |(_, handle)| handle);
            kfd_call(e.fd, AMDKFD_IOC_CREATE_EVENT, &mut a).map_err(errno_status)?;
            let mut ev = HsaEvent { EventId: a.event_id, ..Default::default() };
            ev.EventData.EventType = kind;
            ev.EventData.HWData1 = u64::from(a.event_id);
            if let Some((addr, _)) = page {
                ev.EventData.HWData2 = addr + 8 * u64::from(a.event_slot_index);
            }
            ev.EventData.HWData3 = a.event_trigger_data;
            if signaled {
                let mut s = SetEventArgs { event_id: a.event_id, pad: 0 };
                let _ = kfd_call(e.fd, AMDKFD_IOC_SET_EVENT, &mut s);
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
            let mut a = DestroyEventArgs { event_id: id, pad: 0 };
            let _ = kfd_call(e.fd, AMDKFD_IOC_DESTROY_EVENT, &mut a);
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
            let mut a = SetEventArgs { event_id: id, pad: 0 };
            kfd_call(e.fd, AMDKFD_IOC_SET_EVENT, &mut a).map(|_| ()).map_err(errno_status)
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtResetEvent(ev: *mut HsaEvent) -> HSAKMT_STATUS {
    guard("hsaKmtResetEvent", || {
        status((|| {
            let e = emu()?;
            let id = id_of(ev).ok_or(HSAKMT_STATUS_INVALID_HANDLE)?;
            let mut a = ResetEventArgs { event_id: id, pad: 0 };
            kfd_call(e.fd, AMDKFD_IOC_RESET_EVENT, &mut a)
                .map(|_| ())
                .map_err(|_| HSAKMT_STATUS_INVALID_HANDLE)
        })())
    })
}

/// `hsaKmtWaitOnEvent`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `ev` is null or an event from `hsaKmtCreateEvent`, not
/// destroyed.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtWaitOnEvent(ev: *mut HsaEvent, ms: u32) -> HSAKMT_STATUS {
    let mut one = ev;
    // SAFETY: a one-element array on our stack.
    unsafe { hsaKmtWaitOnMultipleEvents(&mut one, 1, true, ms) }
}

/// `hsaKmtWaitOnMultipleEvents`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `events` is null or points to `num` readable event pointers,
/// each null or an event from `hsaKmtCreateEvent`, not destroyed (a memory event's data is written
/// back into it).
#[no_mangle]
pub unsafe extern "C" fn hsaKmtWaitOnMultipleEvents(
    events: *mut *mut HsaEvent,
    num: u32,
    wait_all: bool,
    ms: u32,
) -> HSAKMT_STATUS {
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
        let mut data: Vec<EventData> =
            ids.iter().map(|&id| EventData { event_id: id, ..Default::default() }).collect();
        let mut a = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: num,
            wait_for_all: u32::from(wait_all),
            timeout: ms,
            wait_result: 0,
        };
        if let Err(errno) = kfd_call(e.fd, AMDKFD_IOC_WAIT_EVENTS, &mut a) {
            return errno_status(errno);
        }
        // Memory faults: copy KFD's data into the caller's MEMORY events, as the real thunk does.
        for (d, &ev) in data.iter().zip(list) {
            // SAFETY: each pointer came from hsaKmtCreateEvent; fields accessed unaligned (pack 4);
            // the union member is the memory-exception one for MEMORY events, zero otherwise.
            unsafe {
                if std::ptr::addr_of!((*ev).EventData.EventType).read_unaligned()
                    != KFD_IOC_EVENT_MEMORY
                {
                    continue;
                }
                let m = d.data.memory_exception_data;
                if m.va == 0 && m.gpu_id == 0 {
                    continue;
                }
                let mut f = HsaMemoryAccessFault {
                    NodeId: e.node_of_gpu(m.gpu_id),
                    VirtualAddress: m.va,
                    ..std::mem::zeroed()
                };
                f.Failure.set_NotPresent(m.failure.not_present);
                f.Failure.set_ReadOnly(m.failure.read_only);
                f.Failure.set_NoExecute(m.failure.no_execute);
                f.Failure.set_Imprecise(m.failure.imprecise);
                f.Flags = HSA_EVENTID_MEMORY_FATAL_PROCESS;
                std::ptr::addr_of_mut!((*ev).EventData.EventData.MemoryAccessFault)
                    .write_unaligned(f);
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
