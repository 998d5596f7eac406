//! Checkpoint/restore (CRIU): `AMDKFD_IOC_CRIU_OP`. Structs only; the ioctl needs
//! `CAP_CHECKPOINT_RESTORE` or `CAP_SYS_ADMIN` and is outside this crate's safe API.

// `enum kfd_criu_op`.
/// `KFD_CRIU_OP_PROCESS_INFO`.
pub const KFD_CRIU_OP_PROCESS_INFO: u32 = 0;
/// `KFD_CRIU_OP_CHECKPOINT`.
pub const KFD_CRIU_OP_CHECKPOINT: u32 = 1;
/// `KFD_CRIU_OP_UNPAUSE`.
pub const KFD_CRIU_OP_UNPAUSE: u32 = 2;
/// `KFD_CRIU_OP_RESTORE`.
pub const KFD_CRIU_OP_RESTORE: u32 = 3;
/// `KFD_CRIU_OP_RESUME`.
pub const KFD_CRIU_OP_RESUME: u32 = 4;

/// `struct kfd_ioctl_criu_args` (`AMDKFD_IOC_CRIU_OP`). 52 bytes of fields, padded to 56.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CriuArgs {
    /// User array of [`CriuDeviceBucket`] (CHECKPOINT, RESTORE).
    pub devices: u64,
    /// User array of [`CriuBoBucket`] (CHECKPOINT, RESTORE).
    pub bos: u64,
    /// User buffer of private data (CHECKPOINT, RESTORE).
    pub priv_data: u64,
    /// Bytes of `priv_data` (PROCESS_INFO, RESTORE).
    pub priv_data_size: u64,
    /// (PROCESS_INFO, RESTORE).
    pub num_devices: u32,
    /// (PROCESS_INFO, RESTORE).
    pub num_bos: u32,
    /// (PROCESS_INFO, RESTORE).
    pub num_objects: u32,
    /// (PROCESS_INFO, RESUME).
    pub pid: u32,
    /// `KFD_CRIU_OP_*`.
    pub op: u32,
}

/// `struct kfd_criu_device_bucket`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CriuDeviceBucket {
    pub user_gpu_id: u32,
    pub actual_gpu_id: u32,
    pub drm_fd: u32,
    pub pad: u32,
}

/// `struct kfd_criu_bo_bucket`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CriuBoBucket {
    pub addr: u64,
    pub size: u64,
    pub offset: u64,
    /// During restore, the updated offset of the BO.
    pub restored_offset: u64,
    /// The user gpu id.
    pub gpu_id: u32,
    pub alloc_flags: u32,
    pub dmabuf_fd: u32,
    pub pad: u32,
}
