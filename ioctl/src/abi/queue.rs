//! User-mode queues: `CREATE_QUEUE`, `DESTROY_QUEUE`, `UPDATE_QUEUE`, `SET_CU_MASK`,
//! `GET_QUEUE_WAVE_STATE`, `ALLOC_QUEUE_GWS`.

/// `KFD_IOC_QUEUE_TYPE_COMPUTE`: a PM4 compute queue.
pub const KFD_IOC_QUEUE_TYPE_COMPUTE: u32 = 0x0;
/// `KFD_IOC_QUEUE_TYPE_SDMA`.
pub const KFD_IOC_QUEUE_TYPE_SDMA: u32 = 0x1;
/// `KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`: the HSA (AQL packet) compute queue ROCr creates.
pub const KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: u32 = 0x2;
/// `KFD_IOC_QUEUE_TYPE_SDMA_XGMI`: an SDMA queue on an xGMI engine.
pub const KFD_IOC_QUEUE_TYPE_SDMA_XGMI: u32 = 0x3;
/// `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID` (1.17): an SDMA queue on engine
/// [`CreateQueueArgs::sdma_engine_id`].
pub const KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: u32 = 0x4;

/// `KFD_MAX_QUEUE_PERCENTAGE`: `queue_percentage` is 0..=100 (0 makes the queue inactive).
pub const KFD_MAX_QUEUE_PERCENTAGE: u32 = 100;
/// `KFD_MAX_QUEUE_PRIORITY`: `queue_priority` is 0..=15, 15 highest.
pub const KFD_MAX_QUEUE_PRIORITY: u32 = 15;
/// `KFD_MIN_QUEUE_RING_SIZE`: the smallest ring, in bytes.
pub const KFD_MIN_QUEUE_RING_SIZE: u32 = 1024;

/// `struct kfd_ioctl_create_queue_args` (`AMDKFD_IOC_CREATE_QUEUE`), 96 bytes since 1.17.
///
/// Before 1.17 the struct ended at `ctl_stack_size` (88 bytes); amdkfd matches requests by
/// number and zero-extends a shorter argument, so both sizes are accepted by a 1.17 kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CreateQueueArgs {
    /// To KFD: GPU VA of the ring buffer.
    pub ring_base_address: u64,
    /// To KFD (the header still says "from"): where the write pointer lives.
    pub write_pointer_address: u64,
    /// To KFD (the header still says "from"): where the GPU writes the read pointer.
    pub read_pointer_address: u64,
    /// From KFD: mmap offset of the queue's doorbell.
    pub doorbell_offset: u64,

    /// To KFD: ring size in bytes, a power of two.
    pub ring_size: u32,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD: one of `KFD_IOC_QUEUE_TYPE_*`.
    pub queue_type: u32,
    /// To KFD: 0..=[`KFD_MAX_QUEUE_PERCENTAGE`].
    pub queue_percentage: u32,
    /// To KFD: 0..=[`KFD_MAX_QUEUE_PRIORITY`].
    pub queue_priority: u32,
    /// From KFD.
    pub queue_id: u32,

    /// To KFD.
    pub eop_buffer_address: u64,
    /// To KFD.
    pub eop_buffer_size: u64,
    /// To KFD: the CWSR (context save/restore) area.
    pub ctx_save_restore_address: u64,
    /// To KFD.
    pub ctx_save_restore_size: u32,
    /// To KFD.
    pub ctl_stack_size: u32,
    /// To KFD (1.17): the SDMA engine for [`KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID`].
    pub sdma_engine_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_destroy_queue_args` (`AMDKFD_IOC_DESTROY_QUEUE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DestroyQueueArgs {
    /// To KFD.
    pub queue_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_update_queue_args` (`AMDKFD_IOC_UPDATE_QUEUE`, all fields to KFD).
///
/// Recent kernels read bits 8..16 of `queue_percentage` as the PM4 target XCC; bits 0..8 are
/// the percentage.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UpdateQueueArgs {
    pub ring_base_address: u64,

    pub queue_id: u32,
    pub ring_size: u32,
    pub queue_percentage: u32,
    pub queue_priority: u32,
}

/// `struct kfd_ioctl_set_cu_mask_args` (`AMDKFD_IOC_SET_CU_MASK`, all fields to KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetCuMaskArgs {
    pub queue_id: u32,
    /// The number of mask *bits*, a non-zero multiple of 32 (the kernel uses at most 1024).
    pub num_cu_mask: u32,
    /// User pointer to `num_cu_mask / 32` `u32` words.
    pub cu_mask_ptr: u64,
}

/// `struct kfd_ioctl_get_queue_wave_state_args` (`AMDKFD_IOC_GET_QUEUE_WAVE_STATE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetQueueWaveStateArgs {
    /// To KFD: user buffer the kernel copies the queue's control stack into (as many bytes as
    /// the queue's `ctl_stack_size`).
    pub ctl_stack_address: u64,
    /// From KFD.
    pub ctl_stack_used_size: u32,
    /// From KFD.
    pub save_area_used_size: u32,
    /// To KFD.
    pub queue_id: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_alloc_queue_gws_args` (`AMDKFD_IOC_ALLOC_QUEUE_GWS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AllocQueueGwsArgs {
    /// To KFD.
    pub queue_id: u32,
    /// To KFD.
    pub num_gws: u32,
    /// From KFD: first GWS index of the contiguous allocation.
    pub first_gws: u32,
    pub pad: u32,
}
