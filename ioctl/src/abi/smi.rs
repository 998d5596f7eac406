//! SMI (System Management Interface) events: `AMDKFD_IOC_SMI_EVENTS` returns an fd that
//! delivers one text line per event; the constants say which events and why.

// `enum kfd_smi_event`.
/// `KFD_SMI_EVENT_NONE` (not used).
pub const KFD_SMI_EVENT_NONE: u32 = 0;
/// `KFD_SMI_EVENT_VMFAULT` (events count from 1).
pub const KFD_SMI_EVENT_VMFAULT: u32 = 1;
/// `KFD_SMI_EVENT_THERMAL_THROTTLE`.
pub const KFD_SMI_EVENT_THERMAL_THROTTLE: u32 = 2;
/// `KFD_SMI_EVENT_GPU_PRE_RESET`.
pub const KFD_SMI_EVENT_GPU_PRE_RESET: u32 = 3;
/// `KFD_SMI_EVENT_GPU_POST_RESET`.
pub const KFD_SMI_EVENT_GPU_POST_RESET: u32 = 4;
/// `KFD_SMI_EVENT_MIGRATE_START`.
pub const KFD_SMI_EVENT_MIGRATE_START: u32 = 5;
/// `KFD_SMI_EVENT_MIGRATE_END`.
pub const KFD_SMI_EVENT_MIGRATE_END: u32 = 6;
/// `KFD_SMI_EVENT_PAGE_FAULT_START`.
pub const KFD_SMI_EVENT_PAGE_FAULT_START: u32 = 7;
/// `KFD_SMI_EVENT_PAGE_FAULT_END`.
pub const KFD_SMI_EVENT_PAGE_FAULT_END: u32 = 8;
/// `KFD_SMI_EVENT_QUEUE_EVICTION`.
pub const KFD_SMI_EVENT_QUEUE_EVICTION: u32 = 9;
/// `KFD_SMI_EVENT_QUEUE_RESTORE`.
pub const KFD_SMI_EVENT_QUEUE_RESTORE: u32 = 10;
/// `KFD_SMI_EVENT_UNMAP_FROM_GPU`.
pub const KFD_SMI_EVENT_UNMAP_FROM_GPU: u32 = 11;
/// `KFD_SMI_EVENT_ALL_PROCESS`: as a mask bit, receive events of all processes (root only).
pub const KFD_SMI_EVENT_ALL_PROCESS: u32 = 64;

// `enum KFD_MIGRATE_TRIGGERS`.
/// `KFD_MIGRATE_TRIGGER_PREFETCH`.
pub const KFD_MIGRATE_TRIGGER_PREFETCH: u32 = 0;
/// `KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU`.
pub const KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU: u32 = 1;
/// `KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU`.
pub const KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU: u32 = 2;
/// `KFD_MIGRATE_TRIGGER_TTM_EVICTION`.
pub const KFD_MIGRATE_TRIGGER_TTM_EVICTION: u32 = 3;

// `enum KFD_QUEUE_EVICTION_TRIGGERS`.
/// `KFD_QUEUE_EVICTION_TRIGGER_SVM`.
pub const KFD_QUEUE_EVICTION_TRIGGER_SVM: u32 = 0;
/// `KFD_QUEUE_EVICTION_TRIGGER_USERPTR`.
pub const KFD_QUEUE_EVICTION_TRIGGER_USERPTR: u32 = 1;
/// `KFD_QUEUE_EVICTION_TRIGGER_TTM`.
pub const KFD_QUEUE_EVICTION_TRIGGER_TTM: u32 = 2;
/// `KFD_QUEUE_EVICTION_TRIGGER_SUSPEND`.
pub const KFD_QUEUE_EVICTION_TRIGGER_SUSPEND: u32 = 3;
/// `KFD_QUEUE_EVICTION_CRIU_CHECKPOINT`.
pub const KFD_QUEUE_EVICTION_CRIU_CHECKPOINT: u32 = 4;
/// `KFD_QUEUE_EVICTION_CRIU_RESTORE`.
pub const KFD_QUEUE_EVICTION_CRIU_RESTORE: u32 = 5;

// `enum KFD_SVM_UNMAP_TRIGGERS`.
/// `KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY`.
pub const KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY: u32 = 0;
/// `KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE`.
pub const KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE: u32 = 1;
/// `KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU`.
pub const KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU: u32 = 2;

/// `KFD_SMI_EVENT_MASK_FROM_INDEX(i)`: the bit to write to the SMI fd to enable event `i`.
pub const fn kfd_smi_event_mask_from_index(i: u32) -> u64 {
    1u64 << (i - 1)
}

/// `KFD_SMI_EVENT_MSG_SIZE`: the longest event line, in bytes.
pub const KFD_SMI_EVENT_MSG_SIZE: u32 = 96;

/// `struct kfd_ioctl_smi_events_args` (`AMDKFD_IOC_SMI_EVENTS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SmiEventsArgs {
    /// To KFD.
    pub gpuid: u32,
    /// From KFD: the event fd.
    pub anon_fd: u32,
}
