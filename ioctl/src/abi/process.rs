//! Per-process setup and queries: clock counters, apertures, scratch backing, tile config,
//! trap handler, VM acquisition.

/// `struct kfd_ioctl_get_clock_counters_args` (`AMDKFD_IOC_GET_CLOCK_COUNTERS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetClockCountersArgs {
    /// From KFD.
    pub gpu_clock_counter: u64,
    /// From KFD.
    pub cpu_clock_counter: u64,
    /// From KFD.
    pub system_clock_counter: u64,
    /// From KFD: Hz.
    pub system_clock_freq: u64,

    /// To KFD.
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_process_device_apertures` (all from KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProcessDeviceApertures {
    pub lds_base: u64,
    pub lds_limit: u64,
    pub scratch_base: u64,
    pub scratch_limit: u64,
    pub gpuvm_base: u64,
    pub gpuvm_limit: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

/// `NUM_OF_SUPPORTED_GPUS`: the array length of the deprecated `GET_PROCESS_APERTURES`.
pub const NUM_OF_SUPPORTED_GPUS: usize = 7;

/// `struct kfd_ioctl_get_process_apertures_args` (`AMDKFD_IOC_GET_PROCESS_APERTURES`,
/// deprecated in favour of [`GetProcessAperturesNewArgs`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetProcessAperturesArgs {
    /// From KFD.
    pub process_apertures: [ProcessDeviceApertures; NUM_OF_SUPPORTED_GPUS],
    /// From KFD: 1..=[`NUM_OF_SUPPORTED_GPUS`].
    pub num_of_nodes: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_get_process_apertures_new_args` (`AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetProcessAperturesNewArgs {
    /// To KFD: user array of [`ProcessDeviceApertures`].
    pub kfd_process_device_apertures_ptr: u64,
    /// To KFD: entries in the array; from KFD: entries filled.
    pub num_of_nodes: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_set_scratch_backing_va_args` (`AMDKFD_IOC_SET_SCRATCH_BACKING_VA`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetScratchBackingVaArgs {
    /// To KFD.
    pub va_addr: u64,
    /// To KFD.
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_get_tile_config_args` (`AMDKFD_IOC_GET_TILE_CONFIG`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetTileConfigArgs {
    /// To KFD: user array of `u32`.
    pub tile_config_ptr: u64,
    /// To KFD: user array of `u32`.
    pub macro_tile_config_ptr: u64,
    /// To KFD: array size allocated; from KFD: entries filled.
    pub num_tile_configs: u32,
    /// To KFD: array size allocated; from KFD: entries filled.
    pub num_macro_tile_configs: u32,

    /// To KFD.
    pub gpu_id: u32,
    /// From KFD.
    pub gb_addr_config: u32,
    /// From KFD.
    pub num_banks: u32,
    /// From KFD.
    pub num_ranks: u32,
}

/// `struct kfd_ioctl_set_trap_handler_args` (`AMDKFD_IOC_SET_TRAP_HANDLER`, all to KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetTrapHandlerArgs {
    /// Trap base address.
    pub tba_addr: u64,
    /// Trap memory address.
    pub tma_addr: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_acquire_vm_args` (`AMDKFD_IOC_ACQUIRE_VM`, all to KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireVmArgs {
    /// A render-node fd whose VM the process adopts for `gpu_id`.
    pub drm_fd: u32,
    pub gpu_id: u32,
}
