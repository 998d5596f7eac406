//! GPU memory: `SET_MEMORY_POLICY`, `ALLOC/FREE_MEMORY_OF_GPU`, `(UN)MAP_MEMORY_TO/FROM_GPU`,
//! DMA-buf import/export/info and `AVAILABLE_MEMORY`.

/// `KFD_IOC_CACHE_POLICY_COHERENT` (for `default_policy` / `alternate_policy`).
pub const KFD_IOC_CACHE_POLICY_COHERENT: u32 = 0;
/// `KFD_IOC_CACHE_POLICY_NONCOHERENT`.
pub const KFD_IOC_CACHE_POLICY_NONCOHERENT: u32 = 1;

/// `struct kfd_ioctl_set_memory_policy_args` (`AMDKFD_IOC_SET_MEMORY_POLICY`, all to KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetMemoryPolicyArgs {
    pub alternate_aperture_base: u64,
    pub alternate_aperture_size: u64,

    pub gpu_id: u32,
    pub default_policy: u32,
    pub alternate_policy: u32,
    pub pad: u32,
}

// Allocation flags: memory types.
/// `KFD_IOC_ALLOC_MEM_FLAGS_VRAM`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_VRAM: u32 = 1 << 0;
/// `KFD_IOC_ALLOC_MEM_FLAGS_GTT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_GTT: u32 = 1 << 1;
/// `KFD_IOC_ALLOC_MEM_FLAGS_USERPTR`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: u32 = 1 << 2;
/// `KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: u32 = 1 << 3;
/// `KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: u32 = 1 << 4;
// Allocation flags: attributes/access options.
/// `KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE: u32 = 1 << 31;
/// `KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE: u32 = 1 << 30;
/// `KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC: u32 = 1 << 29;
/// `KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE: u32 = 1 << 28;
/// `KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM: u32 = 1 << 27;
/// `KFD_IOC_ALLOC_MEM_FLAGS_COHERENT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_COHERENT: u32 = 1 << 26;
/// `KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED: u32 = 1 << 25;
/// `KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT: u32 = 1 << 24;
/// `KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS` (1.16).
pub const KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS: u32 = 1 << 23;

/// `struct kfd_ioctl_alloc_memory_of_gpu_args` (`AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AllocMemoryOfGpuArgs {
    /// To KFD: the GPU VA every later mapping uses.
    pub va_addr: u64,
    /// To KFD: bytes.
    pub size: u64,
    /// From KFD: the buffer handle for map/unmap/free.
    pub handle: u64,
    /// To KFD for userptr (the CPU address), from KFD otherwise (render-node mmap offset).
    pub mmap_offset: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD: `KFD_IOC_ALLOC_MEM_FLAGS_*`.
    pub flags: u32,
}

/// `struct kfd_ioctl_free_memory_of_gpu_args` (`AMDKFD_IOC_FREE_MEMORY_OF_GPU`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FreeMemoryOfGpuArgs {
    /// To KFD.
    pub handle: u64,
}

/// `struct kfd_ioctl_map_memory_to_gpu_args` (`AMDKFD_IOC_MAP_MEMORY_TO_GPU`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MapMemoryToGpuArgs {
    /// To KFD.
    pub handle: u64,
    /// To KFD: user pointer to `n_devices` `u32` gpu ids.
    pub device_ids_array_ptr: u64,
    /// To KFD.
    pub n_devices: u32,
    /// To and from KFD: devices from the start of the array already mapped (0 on first call).
    pub n_success: u32,
}

/// `struct kfd_ioctl_unmap_memory_from_gpu_args` (`AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`), laid out
/// like [`MapMemoryToGpuArgs`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UnmapMemoryFromGpuArgs {
    pub handle: u64,
    pub device_ids_array_ptr: u64,
    pub n_devices: u32,
    pub n_success: u32,
}

/// `struct kfd_ioctl_get_dmabuf_info_args` (`AMDKFD_IOC_GET_DMABUF_INFO`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetDmabufInfoArgs {
    /// From KFD.
    pub size: u64,
    /// To KFD.
    pub metadata_ptr: u64,
    /// To KFD (space allocated by user), from KFD (actual metadata size).
    pub metadata_size: u32,
    /// From KFD.
    pub gpu_id: u32,
    /// From KFD: `KFD_IOC_ALLOC_MEM_FLAGS_*`.
    pub flags: u32,
    /// To KFD.
    pub dmabuf_fd: u32,
}

/// `struct kfd_ioctl_import_dmabuf_args` (`AMDKFD_IOC_IMPORT_DMABUF`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ImportDmabufArgs {
    /// To KFD.
    pub va_addr: u64,
    /// From KFD.
    pub handle: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD.
    pub dmabuf_fd: u32,
}

/// `struct kfd_ioctl_export_dmabuf_args` (`AMDKFD_IOC_EXPORT_DMABUF`, 1.12).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExportDmabufArgs {
    /// To KFD.
    pub handle: u64,
    /// To KFD.
    pub flags: u32,
    /// From KFD.
    pub dmabuf_fd: u32,
}

/// `struct kfd_ioctl_get_available_memory_args` (`AMDKFD_IOC_AVAILABLE_MEMORY`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetAvailableMemoryArgs {
    /// From KFD: bytes.
    pub available: u64,
    /// To KFD.
    pub gpu_id: u32,
    pub pad: u32,
}

/// `KFD_INVALID_FD`: "no fd" in fd-carrying fields.
pub const KFD_INVALID_FD: u32 = 0xffff_ffff;

// `enum kfd_mmio_remap`: register offsets inside the remapped MMIO page.
/// `KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL`.
pub const KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL: u32 = 0;
/// `KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL`.
pub const KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL: u32 = 4;
