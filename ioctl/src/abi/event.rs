//! Events: `CREATE/DESTROY/SET/RESET_EVENT`, `WAIT_EVENTS` and the per-event data the wait
//! returns (memory and hardware exception data).

// Event types, matching HSA_EVENTTYPE.
/// `KFD_IOC_EVENT_SIGNAL`.
pub const KFD_IOC_EVENT_SIGNAL: u32 = 0;
/// `KFD_IOC_EVENT_NODECHANGE`.
pub const KFD_IOC_EVENT_NODECHANGE: u32 = 1;
/// `KFD_IOC_EVENT_DEVICESTATECHANGE`.
pub const KFD_IOC_EVENT_DEVICESTATECHANGE: u32 = 2;
/// `KFD_IOC_EVENT_HW_EXCEPTION`.
pub const KFD_IOC_EVENT_HW_EXCEPTION: u32 = 3;
/// `KFD_IOC_EVENT_SYSTEM_EVENT`.
pub const KFD_IOC_EVENT_SYSTEM_EVENT: u32 = 4;
/// `KFD_IOC_EVENT_DEBUG_EVENT`.
pub const KFD_IOC_EVENT_DEBUG_EVENT: u32 = 5;
/// `KFD_IOC_EVENT_PROFILE_EVENT`.
pub const KFD_IOC_EVENT_PROFILE_EVENT: u32 = 6;
/// `KFD_IOC_EVENT_QUEUE_EVENT`.
pub const KFD_IOC_EVENT_QUEUE_EVENT: u32 = 7;
/// `KFD_IOC_EVENT_MEMORY`.
pub const KFD_IOC_EVENT_MEMORY: u32 = 8;

// `WaitEventsArgs::wait_result` values.
/// `KFD_IOC_WAIT_RESULT_COMPLETE`.
pub const KFD_IOC_WAIT_RESULT_COMPLETE: u32 = 0;
/// `KFD_IOC_WAIT_RESULT_TIMEOUT`.
pub const KFD_IOC_WAIT_RESULT_TIMEOUT: u32 = 1;
/// `KFD_IOC_WAIT_RESULT_FAIL`.
pub const KFD_IOC_WAIT_RESULT_FAIL: u32 = 2;

/// `KFD_SIGNAL_EVENT_LIMIT`: signal event slots per process.
pub const KFD_SIGNAL_EVENT_LIMIT: u32 = 4096;

// `HsaHwExceptionData::reset_type` values.
/// `KFD_HW_EXCEPTION_WHOLE_GPU_RESET`.
pub const KFD_HW_EXCEPTION_WHOLE_GPU_RESET: u32 = 0;
/// `KFD_HW_EXCEPTION_PER_ENGINE_RESET`.
pub const KFD_HW_EXCEPTION_PER_ENGINE_RESET: u32 = 1;

// `HsaHwExceptionData::reset_cause` values.
/// `KFD_HW_EXCEPTION_GPU_HANG`.
pub const KFD_HW_EXCEPTION_GPU_HANG: u32 = 0;
/// `KFD_HW_EXCEPTION_ECC`.
pub const KFD_HW_EXCEPTION_ECC: u32 = 1;

// `HsaMemoryExceptionData::error_type` values.
/// `KFD_MEM_ERR_NO_RAS`.
pub const KFD_MEM_ERR_NO_RAS: u32 = 0;
/// `KFD_MEM_ERR_SRAM_ECC`.
pub const KFD_MEM_ERR_SRAM_ECC: u32 = 1;
/// `KFD_MEM_ERR_POISON_CONSUMED`.
pub const KFD_MEM_ERR_POISON_CONSUMED: u32 = 2;
/// `KFD_MEM_ERR_GPU_HANG`.
pub const KFD_MEM_ERR_GPU_HANG: u32 = 3;

/// `struct kfd_ioctl_create_event_args` (`AMDKFD_IOC_CREATE_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CreateEventArgs {
    /// From KFD: mmap offset of the event page.
    pub event_page_offset: u64,
    /// From KFD (signal events only).
    pub event_trigger_data: u32,
    /// To KFD: `KFD_IOC_EVENT_*`.
    pub event_type: u32,
    /// To KFD.
    pub auto_reset: u32,
    /// To KFD (only some event types).
    pub node_id: u32,
    /// From KFD.
    pub event_id: u32,
    /// From KFD.
    pub event_slot_index: u32,
}

/// `struct kfd_ioctl_destroy_event_args` (`AMDKFD_IOC_DESTROY_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DestroyEventArgs {
    /// To KFD.
    pub event_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_set_event_args` (`AMDKFD_IOC_SET_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetEventArgs {
    /// To KFD.
    pub event_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_reset_event_args` (`AMDKFD_IOC_RESET_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResetEventArgs {
    /// To KFD.
    pub event_id: u32,
    pub pad: u32,
}

/// `struct kfd_memory_exception_failure`. The C fields are CamelCase (`NotPresent`,
/// `ReadOnly`, `NoExecute`); the Rust names are snake_case, same layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemoryExceptionFailure {
    /// `NotPresent`: page not present or supervisor privilege.
    pub not_present: u32,
    /// `ReadOnly`: write access to a read-only page.
    pub read_only: u32,
    /// `NoExecute`: execute access to a page marked NX.
    pub no_execute: u32,
    /// `imprecise`: the exact fault address is unknown.
    pub imprecise: u32,
}

/// `struct kfd_hsa_memory_exception_data` (from KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HsaMemoryExceptionData {
    pub failure: MemoryExceptionFailure,
    pub va: u64,
    pub gpu_id: u32,
    /// `ErrorType`: `KFD_MEM_ERR_*`.
    pub error_type: u32,
}

/// `struct kfd_hsa_hw_exception_data` (from KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HsaHwExceptionData {
    /// `KFD_HW_EXCEPTION_WHOLE_GPU_RESET` or `_PER_ENGINE_RESET`.
    pub reset_type: u32,
    /// `KFD_HW_EXCEPTION_GPU_HANG` or `_ECC`.
    pub reset_cause: u32,
    pub memory_lost: u32,
    pub gpu_id: u32,
}

/// `struct kfd_hsa_signal_event_data` (1.14, to and from KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HsaSignalEventData {
    pub last_event_age: u64,
}

/// The anonymous union at the start of `struct kfd_event_data`; which member is meaningful
/// depends on the event's type.
#[repr(C)]
#[derive(Clone, Copy)]
pub union EventDataUnion {
    /// From KFD, for memory exception events.
    pub memory_exception_data: HsaMemoryExceptionData,
    /// From KFD, for hardware exception events.
    pub hw_exception_data: HsaHwExceptionData,
    /// To and from KFD, for signal events.
    pub signal_event_data: HsaSignalEventData,
}

impl Default for EventDataUnion {
    /// All zero: the largest member, zeroed, covers every byte.
    fn default() -> Self {
        EventDataUnion { memory_exception_data: HsaMemoryExceptionData::default() }
    }
}

impl core::fmt::Debug for EventDataUnion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EventDataUnion { .. }")
    }
}

/// `struct kfd_event_data`: one entry of the array `WAIT_EVENTS` points at.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventData {
    /// The C struct's anonymous union.
    pub data: EventDataUnion,
    /// Pointer to an extension structure for future exception types.
    pub kfd_event_data_ext: u64,
    /// To KFD.
    pub event_id: u32,
    pub pad: u32,
}

/// One entry of a `WAIT_EVENTS` array for a **signal** event, without the union: the same 48
/// bytes as [`EventData`], its first 8 the union's `signal_event_data.last_event_age`, the
/// other 24 of the union kept as plain words (KFD writes exception data there only for memory
/// events). Reading it back needs no `unsafe`, which an [`EventData`] union read would.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SignalEventWait {
    /// To and from KFD (uapi 1.14+; older kernels ignore it): the event's age when the caller
    /// last looked. A non-zero age that differs from the event's makes the wait return at once;
    /// KFD writes the event's age back when the event fired. 0 asks for no age check (the
    /// event's auto-reset "signaled" state alone decides).
    pub last_event_age: u64,
    /// The rest of the union's bytes.
    pub rest_of_union: [u64; 3],
    /// `kfd_event_data_ext`: 0.
    pub kfd_event_data_ext: u64,
    /// To KFD.
    pub event_id: u32,
    pub pad: u32,
}

impl SignalEventWait {
    /// An entry for signal event `event_id` last seen at `last_event_age`.
    pub const fn new(event_id: u32, last_event_age: u64) -> SignalEventWait {
        SignalEventWait {
            last_event_age,
            rest_of_union: [0; 3],
            kfd_event_data_ext: 0,
            event_id,
            pad: 0,
        }
    }
}

const _: () = assert!(core::mem::size_of::<SignalEventWait>() == core::mem::size_of::<EventData>());
const _: () = assert!(
    core::mem::offset_of!(SignalEventWait, kfd_event_data_ext)
        == core::mem::offset_of!(EventData, kfd_event_data_ext)
);
const _: () = assert!(
    core::mem::offset_of!(SignalEventWait, event_id) == core::mem::offset_of!(EventData, event_id)
);

/// `struct kfd_ioctl_wait_events_args` (`AMDKFD_IOC_WAIT_EVENTS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WaitEventsArgs {
    /// To KFD: user array of [`EventData`].
    pub events_ptr: u64,
    /// To KFD.
    pub num_events: u32,
    /// To KFD.
    pub wait_for_all: u32,
    /// To KFD: milliseconds.
    pub timeout: u32,
    /// From KFD: `KFD_IOC_WAIT_RESULT_*`.
    pub wait_result: u32,
}
