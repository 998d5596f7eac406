//! ABI facts the project relies on, checked against numbers written down from the sources named
//! in each comment. "HSA spec" is the HSA Platform System Architecture Specification 1.2 (AQL
//! packet formats, chapter 2.9). Numbers marked "C compiler" were printed once, by hand, by a
//! small program built against the Debian headers (g++ -std=c++14 -DAMD_INTERNAL_BUILD for ROCr,
//! gcc for hsakmt.h) printing sizeof/alignof/offsetof; they are not recomputed at test time.

use std::mem::{align_of, offset_of, size_of};

use hsa_sys::hsa::*;
use hsa_sys::hsakmt;

/// True when the ROCr headers are Debian's ROCm 5.2 ones, whose API tables have the sizes below.
/// Within one major version a table only grows (its minor id is its size), so entry offsets are
/// fixed per major version while sizes are checked for 5.2 alone. A new major version may
/// reorder entries (ROCm 6 did, for AmdExtTable), so its offsets get their own numbers.
fn rocr_5_2() -> bool {
    let yes = hsa_sys::ROCR_RELEASE.starts_with("5.2.");
    if !yes {
        eprintln!("ROCr headers {} are not 5.2: size checks skipped", hsa_sys::ROCR_RELEASE);
    }
    yes
}

// ---------------------------------------------------------------- AQL packets (HSA spec 2.9)

#[test]
fn kernel_dispatch_packet() {
    type P = hsa_kernel_dispatch_packet_t;
    // HSA spec 2.9.6: a 64-byte packet; offsets from its field table.
    assert_eq!(size_of::<P>(), 64);
    assert_eq!(align_of::<P>(), 8); // C compiler
    assert_eq!(offset_of!(P, header), 0);
    assert_eq!(offset_of!(P, setup), 2);
    assert_eq!(offset_of!(P, workgroup_size_x), 4);
    assert_eq!(offset_of!(P, workgroup_size_y), 6);
    assert_eq!(offset_of!(P, workgroup_size_z), 8);
    assert_eq!(offset_of!(P, reserved0), 10);
    assert_eq!(offset_of!(P, grid_size_x), 12);
    assert_eq!(offset_of!(P, grid_size_y), 16);
    assert_eq!(offset_of!(P, grid_size_z), 20);
    assert_eq!(offset_of!(P, private_segment_size), 24);
    assert_eq!(offset_of!(P, group_segment_size), 28);
    assert_eq!(offset_of!(P, kernel_object), 32);
    assert_eq!(offset_of!(P, kernarg_address), 40);
    assert_eq!(offset_of!(P, reserved2), 48);
    assert_eq!(offset_of!(P, completion_signal), 56);
}

#[test]
fn barrier_packets() {
    // HSA spec 2.9.8 (barrier-AND) and 2.9.9 (barrier-OR): five dependency signals from byte 8.
    assert_eq!(size_of::<hsa_barrier_and_packet_t>(), 64);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, header), 0);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, reserved0), 2);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, reserved1), 4);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, dep_signal), 8);
    assert_eq!(size_of::<[hsa_signal_t; 5]>(), 40);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, reserved2), 48);
    assert_eq!(offset_of!(hsa_barrier_and_packet_t, completion_signal), 56);

    assert_eq!(size_of::<hsa_barrier_or_packet_t>(), 64);
    assert_eq!(offset_of!(hsa_barrier_or_packet_t, dep_signal), 8);
    assert_eq!(offset_of!(hsa_barrier_or_packet_t, reserved2), 48);
    assert_eq!(offset_of!(hsa_barrier_or_packet_t, completion_signal), 56);

    let p = hsa_barrier_and_packet_t::default();
    assert_eq!(p.dep_signal.len(), 5);
}

#[test]
fn agent_dispatch_packet() {
    type P = hsa_agent_dispatch_packet_t;
    // HSA spec 2.9.7.
    assert_eq!(size_of::<P>(), 64);
    assert_eq!(offset_of!(P, header), 0);
    assert_eq!(offset_of!(P, type_), 2);
    assert_eq!(offset_of!(P, reserved0), 4);
    assert_eq!(offset_of!(P, return_address), 8);
    assert_eq!(offset_of!(P, arg), 16); // four u64 arguments, 16..48
    assert_eq!(offset_of!(P, reserved2), 48);
    assert_eq!(offset_of!(P, completion_signal), 56);
}

#[test]
fn amd_vendor_packets() {
    // hsa_ext_amd.h: the AMD vendor header is the 16-bit AQL header, an AMD format byte, and a
    // reserved byte; the barrier-value packet waits on (signal & mask) cond value.
    assert_eq!(size_of::<hsa_amd_vendor_packet_header_t>(), 4);
    assert_eq!(offset_of!(hsa_amd_vendor_packet_header_t, header), 0);
    assert_eq!(offset_of!(hsa_amd_vendor_packet_header_t, AmdFormat), 2);
    assert_eq!(offset_of!(hsa_amd_vendor_packet_header_t, reserved), 3);

    type P = hsa_amd_barrier_value_packet_t;
    assert_eq!(size_of::<P>(), 64);
    assert_eq!(offset_of!(P, header), 0);
    assert_eq!(offset_of!(P, reserved0), 4);
    assert_eq!(offset_of!(P, signal), 8);
    assert_eq!(offset_of!(P, value), 16);
    assert_eq!(offset_of!(P, mask), 24);
    assert_eq!(offset_of!(P, cond), 32);
    assert_eq!(offset_of!(P, reserved1), 36);
    assert_eq!(offset_of!(P, reserved2), 40);
    assert_eq!(offset_of!(P, reserved3), 48);
    assert_eq!(offset_of!(P, completion_signal), 56);
    assert_eq!(HSA_AMD_PACKET_TYPE_BARRIER_VALUE, 2); // hsa_ext_amd.h
}

#[test]
fn packet_header_encoding() {
    // HSA spec 2.9.1, hsa_packet_header_t: bit offsets of the header fields.
    assert_eq!(HSA_PACKET_HEADER_TYPE, 0);
    assert_eq!(HSA_PACKET_HEADER_BARRIER, 8);
    assert_eq!(HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE, 9);
    assert_eq!(HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE, 11);
    // ... and their widths.
    assert_eq!(HSA_PACKET_HEADER_WIDTH_TYPE, 8);
    assert_eq!(HSA_PACKET_HEADER_WIDTH_BARRIER, 1);
    assert_eq!(HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE, 2);
    assert_eq!(HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE, 2);
    // HSA spec 2.9.1, hsa_packet_type_t.
    assert_eq!(HSA_PACKET_TYPE_VENDOR_SPECIFIC, 0);
    assert_eq!(HSA_PACKET_TYPE_INVALID, 1);
    assert_eq!(HSA_PACKET_TYPE_KERNEL_DISPATCH, 2);
    assert_eq!(HSA_PACKET_TYPE_BARRIER_AND, 3);
    assert_eq!(HSA_PACKET_TYPE_AGENT_DISPATCH, 4);
    assert_eq!(HSA_PACKET_TYPE_BARRIER_OR, 5);
    // HSA spec, hsa_fence_scope_t.
    assert_eq!(HSA_FENCE_SCOPE_NONE, 0);
    assert_eq!(HSA_FENCE_SCOPE_AGENT, 1);
    assert_eq!(HSA_FENCE_SCOPE_SYSTEM, 2);
    // Dimensions live in bits 0..2 of `setup` (hsa_kernel_dispatch_packet_setup_t).
    assert_eq!(HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS, 0);
    assert_eq!(HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS, 2);
}

#[test]
fn status_and_queue_enums() {
    // hsa.h: hsa_status_t, hsa_queue_type_t; hsa_ext_amd.h: hsa_amd_queue_priority_t.
    assert_eq!(HSA_STATUS_SUCCESS, 0);
    assert_eq!(HSA_STATUS_INFO_BREAK, 1);
    assert_eq!(HSA_STATUS_ERROR, 0x1000);
    assert_eq!(HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, 0x1002);
    assert_eq!(HSA_STATUS_ERROR_OUT_OF_RESOURCES, 0x1008);
    assert_eq!(HSA_QUEUE_TYPE_MULTI, 0);
    assert_eq!(HSA_QUEUE_TYPE_SINGLE, 1);
    assert_eq!(HSA_QUEUE_TYPE_COOPERATIVE, 2);
    assert_eq!(HSA_AMD_QUEUE_PRIORITY_LOW, 0);
    assert_eq!(HSA_AMD_QUEUE_PRIORITY_NORMAL, 1);
    assert_eq!(HSA_AMD_QUEUE_PRIORITY_HIGH, 2);
    assert_eq!(HSA_SIGNAL_CONDITION_EQ, 0);
}

// ---------------------------------------------------------------- queues and signals

#[test]
fn hsa_queue() {
    // HSA spec 2.8 / hsa.h (large model): 40 bytes.
    assert_eq!(size_of::<hsa_queue_t>(), 40);
    assert_eq!(align_of::<hsa_queue_t>(), 8);
    assert_eq!(offset_of!(hsa_queue_t, type_), 0);
    assert_eq!(offset_of!(hsa_queue_t, features), 4);
    assert_eq!(offset_of!(hsa_queue_t, base_address), 8);
    assert_eq!(offset_of!(hsa_queue_t, doorbell_signal), 16);
    assert_eq!(offset_of!(hsa_queue_t, size), 24);
    assert_eq!(offset_of!(hsa_queue_t, reserved1), 28);
    assert_eq!(offset_of!(hsa_queue_t, id), 32);
    assert_eq!(size_of::<hsa_signal_t>(), 8);
    assert_eq!(size_of::<hsa_agent_t>(), 8);
}

#[test]
fn amd_queue() {
    type Q = amd_queue_t;
    // amd_hsa_queue.h: AMD_QUEUE_ALIGN_BYTES = 64; field offsets summed from the declaration
    // (hsa_queue_t 40 + reserved1[4] 16 = 56, ...) and confirmed by the C compiler.
    assert_eq!(size_of::<Q>(), 256);
    assert_eq!(align_of::<Q>(), 64);
    // Bytes 40..56 are reserved1[4] in ROCr 5.2; ROCm 6.2 turns the first word into `caps`.
    // Bytes 184..192 are reserved3[2] in 5.2 and `scratch_last_used_index` in 6.2. Only the
    // fields both releases share are named here.
    assert_eq!(offset_of!(Q, hsa_queue), 0);
    assert_eq!(offset_of!(Q, write_dispatch_id), 56);
    assert_eq!(offset_of!(Q, group_segment_aperture_base_hi), 64);
    assert_eq!(offset_of!(Q, private_segment_aperture_base_hi), 68);
    assert_eq!(offset_of!(Q, max_cu_id), 72);
    assert_eq!(offset_of!(Q, max_wave_id), 76);
    assert_eq!(offset_of!(Q, max_legacy_doorbell_dispatch_id_plus_1), 80);
    assert_eq!(offset_of!(Q, legacy_doorbell_lock), 88);
    assert_eq!(offset_of!(Q, reserved2), 92);
    assert_eq!(offset_of!(Q, read_dispatch_id), 128);
    assert_eq!(offset_of!(Q, read_dispatch_id_field_base_byte_offset), 136);
    assert_eq!(offset_of!(Q, compute_tmpring_size), 140);
    assert_eq!(offset_of!(Q, scratch_resource_descriptor), 144);
    assert_eq!(offset_of!(Q, scratch_backing_memory_location), 160);
    assert_eq!(offset_of!(Q, scratch_backing_memory_byte_size), 168);
    assert_eq!(offset_of!(Q, scratch_wave64_lane_byte_size), 176);
    assert_eq!(offset_of!(Q, queue_properties), 180);
    assert_eq!(offset_of!(Q, queue_inactive_signal), 192);
    assert_eq!(offset_of!(Q, reserved4), 200);
    // amd_queue_properties_t bits (AMD_HSA_BITS_CREATE_ENUM_ENTRIES: *_SHIFT, *_WIDTH, mask).
    assert_eq!(AMD_QUEUE_PROPERTIES_ENABLE_TRAP_HANDLER, 1);
    assert_eq!(AMD_QUEUE_PROPERTIES_IS_PTR64, 2);
    assert_eq!(AMD_QUEUE_PROPERTIES_ENABLE_PROFILING_SHIFT, 3);
    assert_eq!(AMD_QUEUE_PROPERTIES_ENABLE_PROFILING, 8);
}

#[test]
fn amd_signal() {
    type S = amd_signal_t;
    // amd_hsa_signal.h: AMD_SIGNAL_ALIGN_BYTES = 64. The unions holding `value` and `queue_ptr`
    // are anonymous in C; bindgen names them `__bindgen_anon_1` and `__bindgen_anon_2`.
    assert_eq!(size_of::<S>(), 64);
    assert_eq!(align_of::<S>(), 64);
    assert_eq!(offset_of!(S, kind), 0);
    assert_eq!(offset_of!(S, __bindgen_anon_1) + offset_of!(amd_signal_s__bindgen_ty_1, value), 8);
    assert_eq!(offset_of!(amd_signal_s__bindgen_ty_1, hardware_doorbell_ptr), 0);
    assert_eq!(offset_of!(S, event_mailbox_ptr), 16);
    assert_eq!(offset_of!(S, event_id), 24);
    assert_eq!(offset_of!(S, reserved1), 28);
    assert_eq!(offset_of!(S, start_ts), 32);
    assert_eq!(offset_of!(S, end_ts), 40);
    assert_eq!(
        offset_of!(S, __bindgen_anon_2) + offset_of!(amd_signal_s__bindgen_ty_2, queue_ptr),
        48
    );
    assert_eq!(offset_of!(S, reserved3), 56);
    // amd_signal_kind_t.
    assert_eq!(AMD_SIGNAL_KIND_INVALID, 0);
    assert_eq!(AMD_SIGNAL_KIND_USER, 1);
    assert_eq!(AMD_SIGNAL_KIND_DOORBELL, -1);
    assert_eq!(AMD_SIGNAL_KIND_LEGACY_DOORBELL, -2);
    assert_eq!(size_of::<amd_signal_kind64_t>(), 8);
}

#[test]
fn amd_kernel_code() {
    // amd_hsa_kernel_code.h: amd_kernel_code_t is 256 bytes, 64-byte aligned (C compiler).
    assert_eq!(size_of::<amd_kernel_code_t>(), 256);
    assert_eq!(align_of::<amd_kernel_code_t>(), 64);
}

// ---------------------------------------------------------------- API tables (hsa_api_trace.h)

#[test]
fn api_table_version_and_root() {
    assert_eq!(size_of::<ApiTableVersion>(), 16);
    assert_eq!(offset_of!(ApiTableVersion, major_id), 0);
    assert_eq!(offset_of!(ApiTableVersion, minor_id), 4);
    assert_eq!(offset_of!(ApiTableVersion, step_id), 8);
    assert_eq!(offset_of!(ApiTableVersion, reserved), 12);

    // HsaApiTable: version, then one pointer per child table, in this order.
    assert_eq!(offset_of!(HsaApiTable, version), 0);
    assert_eq!(offset_of!(HsaApiTable, core_), 16);
    assert_eq!(offset_of!(HsaApiTable, amd_ext_), 24);
    assert_eq!(offset_of!(HsaApiTable, finalizer_ext_), 32);
    assert_eq!(offset_of!(HsaApiTable, image_ext_), 40);
    if rocr_5_2() {
        assert_eq!(size_of::<HsaApiTable>(), 48); // ROCm 6 appends tools_ and pc-sampling tables
                                                  // hsa_api_trace.h 5.2: every table is major 1, step 0 (ROCm 6 moved to major 2/3).
        assert_eq!(HSA_API_TABLE_MAJOR_VERSION, 1);
        assert_eq!(HSA_CORE_API_TABLE_MAJOR_VERSION, 1);
        assert_eq!(HSA_AMD_EXT_API_TABLE_MAJOR_VERSION, 1);
        assert_eq!(HSA_FINALIZER_API_TABLE_MAJOR_VERSION, 1);
        assert_eq!(HSA_IMAGE_API_TABLE_MAJOR_VERSION, 1);
        assert_eq!(HSA_CORE_API_TABLE_STEP_VERSION, 0);
        assert_eq!(HSA_AMD_EXT_API_TABLE_STEP_VERSION, 0);
    }
}

#[test]
fn core_api_table() {
    type T = CoreApiTable;
    // Version first, then one function pointer per entry in declaration order: entry n sits at
    // 16 + 8n. hsa_queue_create is entry 7, hsa_signal_store_screlease entry 42. The same in
    // major versions 1 (ROCr 5.x) and 2 (ROCm 6.x; checked against 6.2.4's header).
    assert_eq!(offset_of!(T, version), 0);
    assert_eq!(offset_of!(T, hsa_init_fn), 16);
    assert_eq!(offset_of!(T, hsa_queue_create_fn), 72);
    assert_eq!(offset_of!(T, hsa_soft_queue_create_fn), 80);
    assert_eq!(offset_of!(T, hsa_queue_destroy_fn), 88);
    assert_eq!(offset_of!(T, hsa_queue_load_read_index_scacquire_fn), 104);
    assert_eq!(offset_of!(T, hsa_queue_store_write_index_screlease_fn), 144);
    assert_eq!(offset_of!(T, hsa_queue_add_write_index_scacq_screl_fn), 184);
    assert_eq!(offset_of!(T, hsa_signal_create_fn), 312);
    assert_eq!(offset_of!(T, hsa_signal_store_relaxed_fn), 344);
    assert_eq!(offset_of!(T, hsa_signal_store_screlease_fn), 352);
    assert_eq!(offset_of!(T, hsa_signal_wait_scacquire_fn), 368);
    assert_eq!(size_of::<Option<unsafe extern "C" fn()>>(), 8); // a null entry is `None`
    if rocr_5_2() {
        // ROCr 5.2 hands tools core table version 1.1016: 16 + 125 entries * 8.
        assert_eq!(size_of::<T>(), 1016);
        assert_eq!(offset_of!(T, hsa_executable_iterate_program_symbols_fn), 1008);
    }
}

#[test]
fn amd_ext_table() {
    type T = AmdExtTable;
    assert_eq!(offset_of!(T, version), 0);
    assert_eq!(offset_of!(T, hsa_amd_coherency_get_type_fn), 16);
    assert_eq!(offset_of!(T, hsa_amd_queue_cu_set_mask_fn), 96);
    // (signal_create, intercept_create, intercept_register, set_priority,
    //  runtime_queue_create_register), by the table's major version.
    let want = match HSA_AMD_EXT_API_TABLE_MAJOR_VERSION {
        // ROCr 5.x (Debian 5.2.3): C compiler.
        1 => [264, 296, 304, 312, 328],
        // ROCm 6.x: C compiler against ROCm 6.2.4's hsa_api_trace.h, where two earlier entries
        // (e.g. hsa_amd_memory_async_copy_on_engine_fn) push these 16 bytes on.
        2 => [280, 312, 320, 328, 344],
        other => panic!("AmdExtTable major version {other}: take offsets from the new header"),
    };
    let got = [
        offset_of!(T, hsa_amd_signal_create_fn),
        offset_of!(T, hsa_amd_queue_intercept_create_fn),
        offset_of!(T, hsa_amd_queue_intercept_register_fn),
        offset_of!(T, hsa_amd_queue_set_priority_fn),
        offset_of!(T, hsa_amd_runtime_queue_create_register_fn),
    ];
    assert_eq!(got, want);
    if rocr_5_2() {
        // ROCr 5.2 hands tools AMD extension table version 1.400: 16 + 48 entries * 8.
        assert_eq!(size_of::<T>(), 400);
        assert_eq!(offset_of!(T, hsa_amd_queue_cu_get_mask_fn), 392);
        assert_eq!(size_of::<FinalizerExtTable>(), 64); // C compiler
        assert_eq!(size_of::<ImageExtTable>(), 120); // C compiler
    }
}

// ---------------------------------------------------------------- thunk (hsakmt.h)

// Sizes, alignments and offsets below: C compiler (gcc against Debian libhsakmt-dev
// 5.2.3+dfsg-1's hsakmt.h). hsakmttypes.h is under `#pragma pack(push, 4)`, hence the
// 4-byte alignment and 64-bit fields at offsets that are multiples of 4 only.

#[test]
fn hsakmt_struct_sizes() {
    use hsakmt::*;
    let cases: [(&str, usize, usize, usize); 16] = [
        ("HsaNodeProperties", size_of::<HsaNodeProperties>(), 356, align_of::<HsaNodeProperties>()),
        (
            "HsaMemoryProperties",
            size_of::<HsaMemoryProperties>(),
            32,
            align_of::<HsaMemoryProperties>(),
        ),
        (
            "HsaCacheProperties",
            size_of::<HsaCacheProperties>(),
            1056,
            align_of::<HsaCacheProperties>(),
        ),
        (
            "HsaIoLinkProperties",
            size_of::<HsaIoLinkProperties>(),
            48,
            align_of::<HsaIoLinkProperties>(),
        ),
        ("HsaQueueResource", size_of::<HsaQueueResource>(), 40, align_of::<HsaQueueResource>()),
        ("HsaEvent", size_of::<HsaEvent>(), 48, align_of::<HsaEvent>()),
        ("HsaEventData", size_of::<HsaEventData>(), 44, align_of::<HsaEventData>()),
        (
            "HsaEventDescriptor",
            size_of::<HsaEventDescriptor>(),
            24,
            align_of::<HsaEventDescriptor>(),
        ),
        ("HsaSyncVar", size_of::<HsaSyncVar>(), 16, align_of::<HsaSyncVar>()),
        ("HsaPointerInfo", size_of::<HsaPointerInfo>(), 68, align_of::<HsaPointerInfo>()),
        (
            "HsaSystemProperties",
            size_of::<HsaSystemProperties>(),
            16,
            align_of::<HsaSystemProperties>(),
        ),
        ("HsaClockCounters", size_of::<HsaClockCounters>(), 32, align_of::<HsaClockCounters>()),
        ("HsaVersionInfo", size_of::<HsaVersionInfo>(), 8, align_of::<HsaVersionInfo>()),
        ("HsaMemFlags", size_of::<HsaMemFlags>(), 4, align_of::<HsaMemFlags>()),
        ("HsaMemMapFlags", size_of::<HsaMemMapFlags>(), 4, align_of::<HsaMemMapFlags>()),
        ("HsaQueueInfo", size_of::<HsaQueueInfo>(), 68, align_of::<HsaQueueInfo>()),
    ];
    for (name, got, want, align) in cases {
        assert_eq!(got, want, "size_of::<{name}>()");
        assert_eq!(align, 4, "align_of::<{name}>()");
    }
}

#[test]
fn hsakmt_offsets() {
    use hsakmt::*;
    assert_eq!(offset_of!(HsaNodeProperties, NumCPUCores), 0);
    assert_eq!(offset_of!(HsaNodeProperties, NumFComputeCores), 4);
    assert_eq!(offset_of!(HsaNodeProperties, NumMemoryBanks), 8);
    assert_eq!(offset_of!(HsaNodeProperties, EngineId), 68);
    assert_eq!(offset_of!(HsaNodeProperties, VendorId), 72);
    assert_eq!(offset_of!(HsaNodeProperties, DeviceId), 74);
    assert_eq!(offset_of!(HsaNodeProperties, LocationId), 76);
    assert_eq!(offset_of!(HsaNodeProperties, LocalMemSize), 80);
    assert_eq!(offset_of!(HsaNodeProperties, MaxEngineClockMhzFCompute), 88);
    assert_eq!(offset_of!(HsaNodeProperties, MarketingName), 100);
    assert_eq!(offset_of!(HsaNodeProperties, AMDName), 228);
    assert_eq!(offset_of!(HsaNodeProperties, Domain), 324);
    assert_eq!(offset_of!(HsaNodeProperties, UniqueID), 328);

    assert_eq!(offset_of!(HsaMemoryProperties, __bindgen_anon_1), 4); // SizeInBytes union
    assert_eq!(offset_of!(HsaMemoryProperties, Flags), 12);
    assert_eq!(offset_of!(HsaMemoryProperties, VirtualBaseAddress), 24);
    assert_eq!(offset_of!(HsaCacheProperties, CacheSize), 8);
    assert_eq!(offset_of!(HsaCacheProperties, SiblingMap), 32);
    assert_eq!(offset_of!(HsaIoLinkProperties, NodeFrom), 12);
    assert_eq!(offset_of!(HsaIoLinkProperties, NodeTo), 16);
    assert_eq!(offset_of!(HsaIoLinkProperties, Flags), 44);

    // HsaQueueResource: the doorbell / write / read pointers are anonymous unions in C.
    assert_eq!(offset_of!(HsaQueueResource, QueueId), 0);
    assert_eq!(offset_of!(HsaQueueResource, __bindgen_anon_1), 8); // Queue_DoorBell
    assert_eq!(offset_of!(HsaQueueResource, __bindgen_anon_2), 16); // Queue_write_ptr
    assert_eq!(offset_of!(HsaQueueResource, __bindgen_anon_3), 24); // Queue_read_ptr
    assert_eq!(offset_of!(HsaQueueResource, ErrorReason), 32);

    assert_eq!(offset_of!(HsaEvent, EventId), 0);
    assert_eq!(offset_of!(HsaEvent, EventData), 4);
    assert_eq!(offset_of!(HsaEventData, EventData), 4);
    assert_eq!(offset_of!(HsaEventData, HWData1), 24);
    assert_eq!(offset_of!(HsaEventData, HWData2), 32);
    assert_eq!(offset_of!(HsaEventData, HWData3), 40);
    assert_eq!(offset_of!(HsaEventDescriptor, NodeId), 4);
    assert_eq!(offset_of!(HsaEventDescriptor, SyncVar), 8);

    assert_eq!(offset_of!(HsaPointerInfo, Type), 0);
    assert_eq!(offset_of!(HsaPointerInfo, Node), 4);
    assert_eq!(offset_of!(HsaPointerInfo, MemFlags), 8);
    assert_eq!(offset_of!(HsaPointerInfo, CPUAddress), 12);
    assert_eq!(offset_of!(HsaPointerInfo, GPUAddress), 20);
    assert_eq!(offset_of!(HsaPointerInfo, SizeInBytes), 28);
    assert_eq!(offset_of!(HsaPointerInfo, NRegisteredNodes), 36);
    assert_eq!(offset_of!(HsaPointerInfo, NMappedNodes), 40);
    assert_eq!(offset_of!(HsaPointerInfo, MappedNodes), 52);
    assert_eq!(offset_of!(HsaPointerInfo, UserData), 60);

    assert_eq!(offset_of!(HsaSystemProperties, PlatformRev), 12);
    assert_eq!(offset_of!(HsaClockCounters, SystemClockFrequencyHz), 24);
    assert_eq!(offset_of!(HsaVersionInfo, KernelInterfaceMinorVersion), 4);
}

#[test]
fn hsakmt_mem_flags_bits() {
    // hsakmttypes.h, HsaMemFlags: NonPaged:1, CachePolicy:2, ReadOnly:1, PageSize:2,
    // HostAccess:1, ... over a 32-bit `Value`. build.rs rewrites this bitfield struct's alignment
    // marker (rust-bindgen #2179); the accessors must still hit the C bit positions.
    let mut f = hsakmt::HsaMemFlags::default();
    // SAFETY: both union members are plain 32-bit data; every bit pattern is valid for either.
    unsafe {
        f.__bindgen_anon_1.ui32.set_HostAccess(1);
        f.__bindgen_anon_1.ui32.set_NonPaged(1);
        assert_eq!(f.__bindgen_anon_1.Value, (1 << 6) | 1);
        f.__bindgen_anon_1.Value = 0b1000;
        assert_eq!(f.__bindgen_anon_1.ui32.ReadOnly(), 1);
    }
}

#[test]
fn hsakmt_enums() {
    use hsakmt::*;
    // hsakmttypes.h, HSAKMT_STATUS (8 and 9 are unused; values jump in groups).
    assert_eq!(HSAKMT_STATUS_SUCCESS, 0);
    assert_eq!(HSAKMT_STATUS_ERROR, 1);
    assert_eq!(HSAKMT_STATUS_DRIVER_MISMATCH, 2);
    assert_eq!(HSAKMT_STATUS_INVALID_PARAMETER, 3);
    assert_eq!(HSAKMT_STATUS_INVALID_HANDLE, 4);
    assert_eq!(HSAKMT_STATUS_INVALID_NODE_UNIT, 5);
    assert_eq!(HSAKMT_STATUS_NO_MEMORY, 6);
    assert_eq!(HSAKMT_STATUS_BUFFER_TOO_SMALL, 7);
    assert_eq!(HSAKMT_STATUS_NOT_IMPLEMENTED, 10);
    assert_eq!(HSAKMT_STATUS_NOT_SUPPORTED, 11);
    assert_eq!(HSAKMT_STATUS_UNAVAILABLE, 12);
    assert_eq!(HSAKMT_STATUS_OUT_OF_RESOURCES, 13);
    assert_eq!(HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED, 20);
    assert_eq!(HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR, 21);
    assert_eq!(HSAKMT_STATUS_KERNEL_ALREADY_OPENED, 22);
    assert_eq!(HSAKMT_STATUS_HSAMMU_UNAVAILABLE, 23);
    assert_eq!(HSAKMT_STATUS_WAIT_FAILURE, 30);
    assert_eq!(HSAKMT_STATUS_WAIT_TIMEOUT, 31);
    assert_eq!(HSAKMT_STATUS_MEMORY_ALREADY_REGISTERED, 35);
    assert_eq!(HSAKMT_STATUS_MEMORY_NOT_REGISTERED, 36);
    assert_eq!(HSAKMT_STATUS_MEMORY_ALIGNMENT, 37);
    assert_eq!(size_of::<HSAKMT_STATUS>(), 4);

    // HSA_QUEUE_TYPE.
    assert_eq!(HSA_QUEUE_COMPUTE, 1);
    assert_eq!(HSA_QUEUE_SDMA, 2);
    assert_eq!(HSA_QUEUE_SDMA_XGMI, 5);
    assert_eq!(HSA_QUEUE_COMPUTE_AQL, 21);
    assert_eq!(size_of::<HSA_QUEUE_TYPE>(), 4);
    // HSA_QUEUE_PRIORITY. Its enumerators span -3..=0xFFFFFFFF, so C makes it a 64-bit type
    // (C compiler: sizeof 8); hsaKmtCreateQueue takes it by value.
    assert_eq!(size_of::<HSA_QUEUE_PRIORITY>(), 8);
    assert_eq!(HSA_QUEUE_PRIORITY_MINIMUM, -3);
    assert_eq!(HSA_QUEUE_PRIORITY_NORMAL, 0);
    assert_eq!(HSA_QUEUE_PRIORITY_MAXIMUM, 3);
    // HSA_EVENTTYPE.
    assert_eq!(HSA_EVENTTYPE_SIGNAL, 0);
    assert_eq!(HSA_EVENTTYPE_MEMORY, 8);
}

#[test]
fn build_metadata() {
    assert!(std::path::Path::new(hsa_sys::HSA_INCLUDE_DIR).join("hsa.h").is_file());
    assert!(std::path::Path::new(hsa_sys::HSAKMT_INCLUDE_DIR).join("hsakmt.h").is_file());
    assert!(!hsa_sys::ROCR_RELEASE.is_empty());
    assert!(!hsa_sys::HSAKMT_RELEASE.is_empty());
}
