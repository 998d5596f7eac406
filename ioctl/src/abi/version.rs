//! The uapi version this crate transcribes, and `AMDKFD_IOC_GET_VERSION`.

/// `KFD_IOCTL_MAJOR_VERSION`.
pub const KFD_IOCTL_MAJOR_VERSION: u32 = 1;
/// `KFD_IOCTL_MINOR_VERSION`: 1.17 added SDMA queue creation on a chosen SDMA engine
/// ([`super::queue::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID`]), growing `kfd_ioctl_create_queue_args`.
///
/// The minor versions that matter to this crate: 1.12 `EXPORT_DMABUF`; 1.13 the debugger API
/// (`RUNTIME_ENABLE`, `DBG_TRAP`); 1.14 `kfd_event_data.signal_event_data`; 1.16
/// `KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS`; 1.17 `sdma_engine_id`.
pub const KFD_IOCTL_MINOR_VERSION: u32 = 17;

/// `struct kfd_ioctl_get_version_args` (`AMDKFD_IOC_GET_VERSION`, both fields from KFD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GetVersionArgs {
    pub major_version: u32,
    pub minor_version: u32,
}
