//! The debugger-facing data around `AMDKFD_IOC_DBG_TRAP` (1.13): wave launch controls,
//! runtime enable (`AMDKFD_IOC_RUNTIME_ENABLE`), snapshot entries, the per-queue status bits
//! of suspend/resume, the context save area header, and the deprecated pre-1.13 debug ioctls.
//! The `DBG_TRAP` argument itself is in [`super::dbg_trap`].

// `enum kfd_dbg_trap_override_mode` (wave launch override modes).
/// `KFD_DBG_TRAP_OVERRIDE_OR`.
pub const KFD_DBG_TRAP_OVERRIDE_OR: u32 = 0;
/// `KFD_DBG_TRAP_OVERRIDE_REPLACE`.
pub const KFD_DBG_TRAP_OVERRIDE_REPLACE: u32 = 1;

// `enum kfd_dbg_trap_mask` (wave launch overrides).
/// `KFD_DBG_TRAP_MASK_FP_INVALID`.
pub const KFD_DBG_TRAP_MASK_FP_INVALID: u32 = 1;
/// `KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL`.
pub const KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL: u32 = 2;
/// `KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO`.
pub const KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO: u32 = 4;
/// `KFD_DBG_TRAP_MASK_FP_OVERFLOW`.
pub const KFD_DBG_TRAP_MASK_FP_OVERFLOW: u32 = 8;
/// `KFD_DBG_TRAP_MASK_FP_UNDERFLOW`.
pub const KFD_DBG_TRAP_MASK_FP_UNDERFLOW: u32 = 16;
/// `KFD_DBG_TRAP_MASK_FP_INEXACT`.
pub const KFD_DBG_TRAP_MASK_FP_INEXACT: u32 = 32;
/// `KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO`.
pub const KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO: u32 = 64;
/// `KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH`.
pub const KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH: u32 = 128;
/// `KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION`.
pub const KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION: u32 = 256;
/// `KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START`.
pub const KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START: u32 = 1 << 30;
/// `KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END`.
pub const KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END: u32 = 1 << 31;

// `enum kfd_dbg_trap_wave_launch_mode`.
/// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL`.
pub const KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL: u32 = 0;
/// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT`.
pub const KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT: u32 = 1;
/// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_DEBUG`.
pub const KFD_DBG_TRAP_WAVE_LAUNCH_MODE_DEBUG: u32 = 3;

// `enum kfd_dbg_trap_address_watch_mode`.
/// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ`.
pub const KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ: u32 = 0;
/// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_NONREAD`.
pub const KFD_DBG_TRAP_ADDRESS_WATCH_MODE_NONREAD: u32 = 1;
/// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ATOMIC`.
pub const KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ATOMIC: u32 = 2;
/// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL`.
pub const KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL: u32 = 3;

// `enum kfd_dbg_trap_flags` (additional wave settings).
/// `KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP`.
pub const KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP: u32 = 1;
/// `KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP`.
pub const KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP: u32 = 2;

// `enum kfd_dbg_runtime_state`.
/// `DEBUG_RUNTIME_STATE_DISABLED`.
pub const DEBUG_RUNTIME_STATE_DISABLED: u32 = 0;
/// `DEBUG_RUNTIME_STATE_ENABLED`.
pub const DEBUG_RUNTIME_STATE_ENABLED: u32 = 1;
/// `DEBUG_RUNTIME_STATE_ENABLED_BUSY`.
pub const DEBUG_RUNTIME_STATE_ENABLED_BUSY: u32 = 2;
/// `DEBUG_RUNTIME_STATE_ENABLED_ERROR`.
pub const DEBUG_RUNTIME_STATE_ENABLED_ERROR: u32 = 3;

/// `struct kfd_runtime_info`: what `DBG_TRAP ENABLE` copies to the debugger.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RuntimeInfo {
    /// The runtime's `r_debug` pointer given to `RUNTIME_ENABLE`.
    pub r_debug: u64,
    /// `DEBUG_RUNTIME_STATE_*`.
    pub runtime_state: u32,
    pub ttmp_setup: u32,
}

/// `KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK`: enable the runtime for debugging (else disable).
pub const KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK: u32 = 1;
/// `KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK`: enable trap temporary setup (ignored on disable).
pub const KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK: u32 = 2;

/// `struct kfd_ioctl_runtime_enable_args` (`AMDKFD_IOC_RUNTIME_ENABLE`).
///
/// Errors the header documents: `EBUSY` if a runtime enable is already pending, `EEXIST` if
/// user queues existed before the call. If the process is debug-enabled, the call enables the
/// debug devices and waits for the debugger to send [`super::exception::EC_PROCESS_RUNTIME`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RuntimeEnableArgs {
    /// To KFD: user pointer to the runtime's struct shared with the debugger (KFD only stores it).
    pub r_debug: u64,
    /// To KFD: `KFD_RUNTIME_ENABLE_MODE_*`.
    pub mode_mask: u32,
    /// Notifies the runtime of what KFD supports.
    pub capabilities_mask: u32,
}

/// `struct kfd_queue_snapshot_entry`: one entry of `DBG_TRAP GET_QUEUE_SNAPSHOT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueSnapshotEntry {
    pub exception_status: u64,
    pub ring_base_address: u64,
    pub write_pointer_address: u64,
    pub read_pointer_address: u64,
    pub ctx_save_restore_address: u64,
    pub queue_id: u32,
    pub gpu_id: u32,
    pub ring_size: u32,
    pub queue_type: u32,
    pub ctx_save_restore_area_size: u32,
    pub reserved: u32,
}

/// `struct kfd_dbg_device_info_entry`: one entry of `DBG_TRAP GET_DEVICE_SNAPSHOT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgDeviceInfoEntry {
    pub exception_status: u64,
    pub lds_base: u64,
    pub lds_limit: u64,
    pub scratch_base: u64,
    pub scratch_limit: u64,
    pub gpuvm_base: u64,
    pub gpuvm_limit: u64,
    pub gpu_id: u32,
    pub location_id: u32,
    pub vendor_id: u32,
    pub device_id: u32,
    pub revision_id: u32,
    pub subsystem_vendor_id: u32,
    pub subsystem_device_id: u32,
    pub fw_version: u32,
    pub gfx_target_version: u32,
    pub simd_count: u32,
    pub max_waves_per_simd: u32,
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
    pub num_xcc: u32,
    pub capability: u32,
    pub debug_prop: u32,
}

/// `KFD_DBG_QUEUE_ERROR_BIT`: set in a queue-id slot by suspend/resume on a hardware failure.
pub const KFD_DBG_QUEUE_ERROR_BIT: u32 = 30;
/// `KFD_DBG_QUEUE_INVALID_BIT`: set in a queue-id slot by suspend/resume when the queue does
/// not exist, is new, or is being destroyed.
pub const KFD_DBG_QUEUE_INVALID_BIT: u32 = 31;
/// `KFD_DBG_QUEUE_ERROR_MASK`.
pub const KFD_DBG_QUEUE_ERROR_MASK: u32 = 1 << KFD_DBG_QUEUE_ERROR_BIT;
/// `KFD_DBG_QUEUE_INVALID_MASK`.
pub const KFD_DBG_QUEUE_INVALID_MASK: u32 = 1 << KFD_DBG_QUEUE_INVALID_BIT;

/// One slot of the queue-id array of `DBG_TRAP SUSPEND_QUEUES` / `RESUME_QUEUES` after the
/// call: KFD ORs [`KFD_DBG_QUEUE_ERROR_MASK`] or [`KFD_DBG_QUEUE_INVALID_MASK`] into the id of
/// each queue it could not handle, and leaves the others as they were.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueStatus {
    /// The queue id, with the status bits cleared.
    pub queue_id: u32,
    /// `KFD_DBG_QUEUE_ERROR_MASK` was set: a hardware failure.
    pub error: bool,
    /// `KFD_DBG_QUEUE_INVALID_MASK` was set: no such queue, new, or being destroyed.
    pub invalid: bool,
}

impl QueueStatus {
    /// Reads one array slot as KFD left it.
    pub const fn from_slot(slot: u32) -> QueueStatus {
        QueueStatus {
            queue_id: slot & !(KFD_DBG_QUEUE_ERROR_MASK | KFD_DBG_QUEUE_INVALID_MASK),
            error: slot & KFD_DBG_QUEUE_ERROR_MASK != 0,
            invalid: slot & KFD_DBG_QUEUE_INVALID_MASK != 0,
        }
    }

    /// The slot value KFD would leave for this status (what an emulated KFD writes back).
    pub const fn to_slot(self) -> u32 {
        let mut slot = self.queue_id;
        if self.error {
            slot |= KFD_DBG_QUEUE_ERROR_MASK;
        }
        if self.invalid {
            slot |= KFD_DBG_QUEUE_INVALID_MASK;
        }
        slot
    }

    /// Whether the queue was handled (neither bit set).
    pub const fn ok(self) -> bool {
        !self.error && !self.invalid
    }
}

/// The anonymous `wave_state` struct inside `struct kfd_context_save_area_header`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextSaveAreaWaveState {
    pub control_stack_offset: u32,
    pub control_stack_size: u32,
    pub wave_state_offset: u32,
    pub wave_state_size: u32,
}

/// `struct kfd_context_save_area_header`: at the base of each queue's CWSR area; suspend
/// fills it in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextSaveAreaHeader {
    pub wave_state: ContextSaveAreaWaveState,
    pub debug_offset: u32,
    pub debug_size: u32,
    pub err_payload_addr: u64,
    pub err_event_id: u32,
    pub reserved1: u32,
}

// The pre-1.13 debugger interface; the ioctls are `*_DEPRECATED` and fail on current kernels.
/// `MAX_ALLOWED_NUM_POINTS`.
pub const MAX_ALLOWED_NUM_POINTS: u32 = 100;
/// `MAX_ALLOWED_AW_BUFF_SIZE`.
pub const MAX_ALLOWED_AW_BUFF_SIZE: u32 = 4096;
/// `MAX_ALLOWED_WAC_BUFF_SIZE`.
pub const MAX_ALLOWED_WAC_BUFF_SIZE: u32 = 128;

/// `struct kfd_ioctl_dbg_register_args` (`AMDKFD_IOC_DBG_REGISTER_DEPRECATED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgRegisterArgs {
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_unregister_args` (`AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgUnregisterArgs {
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_address_watch_args` (`AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgAddressWatchArgs {
    pub content_ptr: u64,
    pub gpu_id: u32,
    pub buf_size_in_bytes: u32,
}

/// `struct kfd_ioctl_dbg_wave_control_args` (`AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgWaveControlArgs {
    pub content_ptr: u64,
    pub gpu_id: u32,
    pub buf_size_in_bytes: u32,
}
