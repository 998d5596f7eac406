//! Every request number, and the `Request` round trips.
//!
//! `UPSTREAM_1_17` is transcribed literally from Linux v6.12 `include/uapi/linux/kfd_ioctl.h`
//! (`KFD_IOCTL_MINOR_VERSION 17`; read from Debian's linux-libc-dev 6.12.95-1~bpo12+1): the
//! `AMDKFD_IOC_*` values as a C program compiled against that header printed them on x86-64.

use xhsa_ioctl::abi::*;

#[rustfmt::skip]
const UPSTREAM_1_17: &[(&str, u64)] = &[
    ("AMDKFD_IOC_GET_VERSION", 0x8008_4B01),
    ("AMDKFD_IOC_CREATE_QUEUE", 0xC060_4B02),
    ("AMDKFD_IOC_DESTROY_QUEUE", 0xC008_4B03),
    ("AMDKFD_IOC_SET_MEMORY_POLICY", 0x4020_4B04),
    ("AMDKFD_IOC_GET_CLOCK_COUNTERS", 0xC028_4B05),
    ("AMDKFD_IOC_GET_PROCESS_APERTURES", 0x8190_4B06),
    ("AMDKFD_IOC_UPDATE_QUEUE", 0x4018_4B07),
    ("AMDKFD_IOC_CREATE_EVENT", 0xC020_4B08),
    ("AMDKFD_IOC_DESTROY_EVENT", 0x4008_4B09),
    ("AMDKFD_IOC_SET_EVENT", 0x4008_4B0A),
    ("AMDKFD_IOC_RESET_EVENT", 0x4008_4B0B),
    ("AMDKFD_IOC_WAIT_EVENTS", 0xC018_4B0C),
    ("AMDKFD_IOC_DBG_REGISTER_DEPRECATED", 0x4008_4B0D),
    ("AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED", 0x4008_4B0E),
    ("AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED", 0x4010_4B0F),
    ("AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED", 0x4010_4B10),
    ("AMDKFD_IOC_SET_SCRATCH_BACKING_VA", 0xC010_4B11),
    ("AMDKFD_IOC_GET_TILE_CONFIG", 0xC028_4B12),
    ("AMDKFD_IOC_SET_TRAP_HANDLER", 0x4018_4B13),
    ("AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", 0xC010_4B14),
    ("AMDKFD_IOC_ACQUIRE_VM", 0x4008_4B15),
    ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", 0xC028_4B16),
    ("AMDKFD_IOC_FREE_MEMORY_OF_GPU", 0x4008_4B17),
    ("AMDKFD_IOC_MAP_MEMORY_TO_GPU", 0xC018_4B18),
    ("AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", 0xC018_4B19),
    ("AMDKFD_IOC_SET_CU_MASK", 0x4010_4B1A),
    ("AMDKFD_IOC_GET_QUEUE_WAVE_STATE", 0xC018_4B1B),
    ("AMDKFD_IOC_GET_DMABUF_INFO", 0xC020_4B1C),
    ("AMDKFD_IOC_IMPORT_DMABUF", 0xC018_4B1D),
    ("AMDKFD_IOC_ALLOC_QUEUE_GWS", 0xC010_4B1E),
    ("AMDKFD_IOC_SMI_EVENTS", 0xC008_4B1F),
    ("AMDKFD_IOC_SVM", 0xC018_4B20),
    ("AMDKFD_IOC_SET_XNACK_MODE", 0xC004_4B21),
    ("AMDKFD_IOC_CRIU_OP", 0xC038_4B22),
    ("AMDKFD_IOC_AVAILABLE_MEMORY", 0xC010_4B23),
    ("AMDKFD_IOC_EXPORT_DMABUF", 0xC010_4B24),
    ("AMDKFD_IOC_RUNTIME_ENABLE", 0xC010_4B25),
    ("AMDKFD_IOC_DBG_TRAP", 0xC020_4B26),
];

fn is_generic_ioc() -> bool {
    IOC_SIZEBITS == 14
}

#[test]
#[allow(clippy::unnecessary_cast)] // `c_ulong` is `u32` on 32-bit targets
fn every_request_number_matches_upstream_1_17() {
    if !is_generic_ioc() {
        return; // the literal numbers are those of the asm-generic encoding
    }
    assert_eq!(Request::ALL.len(), UPSTREAM_1_17.len());
    for (req, &(name, number)) in Request::ALL.iter().zip(UPSTREAM_1_17) {
        assert_eq!(req.name(), name);
        assert_eq!(req.raw() as u64, number, "{name}: {:#010x} != {number:#010x}", req.raw());
    }
}

#[test]
fn named_constants_are_the_request_numbers() {
    let consts = [
        AMDKFD_IOC_GET_VERSION,
        AMDKFD_IOC_CREATE_QUEUE,
        AMDKFD_IOC_DESTROY_QUEUE,
        AMDKFD_IOC_SET_MEMORY_POLICY,
        AMDKFD_IOC_GET_CLOCK_COUNTERS,
        AMDKFD_IOC_GET_PROCESS_APERTURES,
        AMDKFD_IOC_UPDATE_QUEUE,
        AMDKFD_IOC_CREATE_EVENT,
        AMDKFD_IOC_DESTROY_EVENT,
        AMDKFD_IOC_SET_EVENT,
        AMDKFD_IOC_RESET_EVENT,
        AMDKFD_IOC_WAIT_EVENTS,
        AMDKFD_IOC_DBG_REGISTER_DEPRECATED,
        AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED,
        AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED,
        AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED,
        AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
        AMDKFD_IOC_GET_TILE_CONFIG,
        AMDKFD_IOC_SET_TRAP_HANDLER,
        AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
        AMDKFD_IOC_ACQUIRE_VM,
        AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
        AMDKFD_IOC_FREE_MEMORY_OF_GPU,
        AMDKFD_IOC_MAP_MEMORY_TO_GPU,
        AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
        AMDKFD_IOC_SET_CU_MASK,
        AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
        AMDKFD_IOC_GET_DMABUF_INFO,
        AMDKFD_IOC_IMPORT_DMABUF,
        AMDKFD_IOC_ALLOC_QUEUE_GWS,
        AMDKFD_IOC_SMI_EVENTS,
        AMDKFD_IOC_SVM,
        AMDKFD_IOC_SET_XNACK_MODE,
        AMDKFD_IOC_CRIU_OP,
        AMDKFD_IOC_AVAILABLE_MEMORY,
        AMDKFD_IOC_EXPORT_DMABUF,
        AMDKFD_IOC_RUNTIME_ENABLE,
        AMDKFD_IOC_DBG_TRAP,
    ];
    for (req, raw) in Request::ALL.iter().zip(consts) {
        assert_eq!(req.raw(), raw, "{req}");
    }
}

#[test]
fn the_numbers_the_scheduler_uses() {
    if !is_generic_ioc() {
        return;
    }
    assert_eq!(AMDKFD_IOC_GET_VERSION, 0x8008_4B01);
    assert_eq!(AMDKFD_IOC_CREATE_QUEUE, 0xC060_4B02);
    assert_eq!(AMDKFD_IOC_UPDATE_QUEUE, 0x4018_4B07);
    assert_eq!(AMDKFD_IOC_SET_CU_MASK, 0x4010_4B1A);
    assert_eq!(AMDKFD_IOC_RUNTIME_ENABLE, 0xC010_4B25);
    assert_eq!(AMDKFD_IOC_DBG_TRAP, 0xC020_4B26);
}

#[test]
fn from_raw_round_trips_every_request() {
    for req in Request::ALL {
        assert_eq!(Request::from_raw(req.raw()), Some(req), "{req}");
        assert_eq!(Request::from_raw_lenient(req.raw()), Some(req), "{req}");
        assert_eq!(Request::from_nr(req.nr()), Some(req), "{req}");
        // Bits above 32 of an `unsigned long`: not the exact number, but the kernel's
        // `unsigned int cmd` drops them, and so does the lenient decoding.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(Request::from_raw(req.raw() | (1 << 40)), None, "{req}");
            assert_eq!(Request::from_raw_lenient(req.raw() | (1 << 40)), Some(req), "{req}");
        }
    }
}

#[test]
fn request_fields_follow_from_the_number() {
    for (i, req) in Request::ALL.iter().enumerate() {
        let f = IocFields::decode(req.raw());
        assert_eq!(usize::from(req.nr()), i + 1, "{req} is in nr order");
        assert_eq!(f.nr, req.nr(), "{req}");
        assert_eq!(f.ty, b'K', "{req}");
        assert_eq!(f.size, req.arg_size(), "{req}");
        assert_eq!(f.direction(), Some(req.dir()), "{req}");
        assert!(req.name().starts_with("AMDKFD_IOC_"), "{req}");
        assert_eq!(req.to_string(), req.name());
    }
    assert_eq!(Request::GetVersion.dir(), IocDir::Read);
    assert_eq!(Request::UpdateQueue.dir(), IocDir::Write);
    assert_eq!(Request::SetCuMask.dir(), IocDir::Write);
    assert_eq!(Request::DbgTrap.dir(), IocDir::ReadWrite);
    assert_eq!(Request::CreateQueue.arg_size(), 96);
    assert_eq!(Request::DbgTrap.arg_size(), 32);
}

#[test]
fn arg_structs_are_tied_to_their_requests() {
    use std::mem::size_of;
    fn check<A: IoctlArgs>() {
        assert_eq!(size_of::<A>(), A::REQUEST.arg_size(), "{}", A::REQUEST);
    }
    check::<GetVersionArgs>();
    check::<CreateQueueArgs>();
    check::<DestroyQueueArgs>();
    check::<SetMemoryPolicyArgs>();
    check::<GetClockCountersArgs>();
    check::<GetProcessAperturesArgs>();
    check::<UpdateQueueArgs>();
    check::<CreateEventArgs>();
    check::<DestroyEventArgs>();
    check::<SetEventArgs>();
    check::<ResetEventArgs>();
    check::<WaitEventsArgs>();
    check::<DbgRegisterArgs>();
    check::<DbgUnregisterArgs>();
    check::<DbgAddressWatchArgs>();
    check::<DbgWaveControlArgs>();
    check::<SetScratchBackingVaArgs>();
    check::<GetTileConfigArgs>();
    check::<SetTrapHandlerArgs>();
    check::<GetProcessAperturesNewArgs>();
    check::<AcquireVmArgs>();
    check::<AllocMemoryOfGpuArgs>();
    check::<FreeMemoryOfGpuArgs>();
    check::<MapMemoryToGpuArgs>();
    check::<UnmapMemoryFromGpuArgs>();
    check::<SetCuMaskArgs>();
    check::<GetQueueWaveStateArgs>();
    check::<GetDmabufInfoArgs>();
    check::<ImportDmabufArgs>();
    check::<AllocQueueGwsArgs>();
    check::<SmiEventsArgs>();
    check::<SvmArgs>();
    check::<SetXnackModeArgs>();
    check::<CriuArgs>();
    check::<GetAvailableMemoryArgs>();
    check::<ExportDmabufArgs>();
    check::<RuntimeEnableArgs>();
    check::<DbgTrapArgs>();
}

#[test]
fn unknown_and_foreign_numbers_are_rejected() {
    assert_eq!(Request::from_nr(0), None);
    assert_eq!(Request::from_nr(AMDKFD_COMMAND_END), None);
    assert_eq!(Request::from_nr(0xff), None);
    // Another driver's letter with a valid nr.
    assert_eq!(Request::from_raw(ioc(IocDir::Read, b'd', 0x01, 8)), None);
    assert_eq!(Request::from_raw_lenient(ioc(IocDir::Read, b'd', 0x01, 8)), None);
    // nr 0x27 is past the 1.17 table.
    assert_eq!(Request::from_raw_lenient(iowr::<[u8; 16]>(b'K', 0x27)), None);
    // The right nr with the wrong direction or size is not the exact request.
    assert_eq!(Request::from_raw(iow::<GetVersionArgs>(b'K', 0x01)), None);
}

#[test]
fn lenient_decoding_accepts_other_uapi_sizes_like_the_kernel() {
    // uapi 1.11 CREATE_QUEUE: the struct ended at ctl_stack_size, 88 bytes.
    let create_queue_1_11 = ioc(IocDir::ReadWrite, b'K', 0x02, 88);
    assert_ne!(create_queue_1_11, AMDKFD_IOC_CREATE_QUEUE);
    assert_eq!(Request::from_raw(create_queue_1_11), None);
    assert_eq!(Request::from_raw_lenient(create_queue_1_11), Some(Request::CreateQueue));
}
