//! Shared virtual memory: `AMDKFD_IOC_SVM` attributes and `AMDKFD_IOC_SET_XNACK_MODE`.

/// `KFD_IOCTL_SVM_FLAG_HOST_ACCESS`: guarantee host access to memory.
pub const KFD_IOCTL_SVM_FLAG_HOST_ACCESS: u32 = 0x0000_0001;
/// `KFD_IOCTL_SVM_FLAG_COHERENT`: fine-grained coherency between all devices with access.
pub const KFD_IOCTL_SVM_FLAG_COHERENT: u32 = 0x0000_0002;
/// `KFD_IOCTL_SVM_FLAG_HIVE_LOCAL`: use any GPU in the same hive as preferred device.
pub const KFD_IOCTL_SVM_FLAG_HIVE_LOCAL: u32 = 0x0000_0004;
/// `KFD_IOCTL_SVM_FLAG_GPU_RO`: GPUs only read, allows replication.
pub const KFD_IOCTL_SVM_FLAG_GPU_RO: u32 = 0x0000_0008;
/// `KFD_IOCTL_SVM_FLAG_GPU_EXEC`: allow execution on GPU.
pub const KFD_IOCTL_SVM_FLAG_GPU_EXEC: u32 = 0x0000_0010;
/// `KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY`.
pub const KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY: u32 = 0x0000_0020;
/// `KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED`: keep the GPU mapping valid as if XNACK were off.
pub const KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED: u32 = 0x0000_0040;
/// `KFD_IOCTL_SVM_FLAG_EXT_COHERENT`: fine-grained coherency using device-scope atomics.
pub const KFD_IOCTL_SVM_FLAG_EXT_COHERENT: u32 = 0x0000_0080;

// `enum kfd_ioctl_svm_op`.
/// `KFD_IOCTL_SVM_OP_SET_ATTR`.
pub const KFD_IOCTL_SVM_OP_SET_ATTR: u32 = 0;
/// `KFD_IOCTL_SVM_OP_GET_ATTR`.
pub const KFD_IOCTL_SVM_OP_GET_ATTR: u32 = 1;

// `enum kfd_ioctl_svm_location`.
/// `KFD_IOCTL_SVM_LOCATION_SYSMEM`.
pub const KFD_IOCTL_SVM_LOCATION_SYSMEM: u32 = 0;
/// `KFD_IOCTL_SVM_LOCATION_UNDEFINED`.
pub const KFD_IOCTL_SVM_LOCATION_UNDEFINED: u32 = 0xffff_ffff;

// `enum kfd_ioctl_svm_attr_type`.
/// `KFD_IOCTL_SVM_ATTR_PREFERRED_LOC`.
pub const KFD_IOCTL_SVM_ATTR_PREFERRED_LOC: u32 = 0;
/// `KFD_IOCTL_SVM_ATTR_PREFETCH_LOC`.
pub const KFD_IOCTL_SVM_ATTR_PREFETCH_LOC: u32 = 1;
/// `KFD_IOCTL_SVM_ATTR_ACCESS`.
pub const KFD_IOCTL_SVM_ATTR_ACCESS: u32 = 2;
/// `KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE`.
pub const KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE: u32 = 3;
/// `KFD_IOCTL_SVM_ATTR_NO_ACCESS`.
pub const KFD_IOCTL_SVM_ATTR_NO_ACCESS: u32 = 4;
/// `KFD_IOCTL_SVM_ATTR_SET_FLAGS`.
pub const KFD_IOCTL_SVM_ATTR_SET_FLAGS: u32 = 5;
/// `KFD_IOCTL_SVM_ATTR_CLR_FLAGS`.
pub const KFD_IOCTL_SVM_ATTR_CLR_FLAGS: u32 = 6;
/// `KFD_IOCTL_SVM_ATTR_GRANULARITY`.
pub const KFD_IOCTL_SVM_ATTR_GRANULARITY: u32 = 7;

/// `struct kfd_ioctl_svm_attribute`: a (type, value) pair.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SvmAttribute {
    /// `KFD_IOCTL_SVM_ATTR_*`.
    pub r#type: u32,
    pub value: u32,
}

/// `struct kfd_ioctl_svm_args` (`AMDKFD_IOC_SVM`). The C struct ends in the flexible array
/// `attrs[nattr]`; the request's size field covers only the 24-byte header, and the kernel
/// copies the attributes that follow it in user memory separately.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SvmArgs {
    pub start_addr: u64,
    pub size: u64,
    /// `KFD_IOCTL_SVM_OP_*`.
    pub op: u32,
    pub nattr: u32,
    /// The flexible array member: zero-sized here, the attributes follow in memory.
    pub attrs: [SvmAttribute; 0],
}

/// `struct kfd_ioctl_set_xnack_mode_args` (`AMDKFD_IOC_SET_XNACK_MODE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetXnackModeArgs {
    /// To KFD: 0 disable, positive enable, negative query. From KFD: the current mode.
    pub xnack_enabled: i32,
}
