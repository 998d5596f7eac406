//! Tables of this crate's ABI under the C names, shared by the tests that compare it with the
//! upstream header (`layout.rs`, `constants.rs`) and with the system header
//! (`system_header.rs`).
//!
//! Anonymous C types and members go by the names bindgen gives them
//! (`kfd_event_data__bindgen_ty_1`, `__bindgen_anon_1`), so the three sources line up.
#![allow(dead_code)]

use std::mem::{align_of, offset_of, size_of};

use xhsa_ioctl::abi::{self, *};

/// A struct's layout: C name, size, alignment, and each field's C name and offset.
#[derive(Debug, Clone)]
pub struct Layout {
    pub c_name: &'static str,
    pub size: usize,
    pub align: usize,
    pub fields: Vec<(&'static str, usize)>,
}

impl Layout {
    pub fn field(&self, c_name: &str) -> Option<usize> {
        self.fields
            .iter()
            .find(|(n, _)| *n == c_name)
            .map(|&(_, off)| off)
    }
}

/// The C name of a field: its Rust name, or the `as "..."` rename.
macro_rules! c_field {
    ($f:ident) => {
        stringify!($f)
    };
    ($f:ident as $c:literal) => {
        $c
    };
}

/// `layout!(RustType as "c_name" { field, field as "CName", ... })`.
macro_rules! layout {
    ($t:ty as $c:literal { $($f:ident $(as $cf:literal)?),* $(,)? }) => {
        Layout {
            c_name: $c,
            size: size_of::<$t>(),
            align: align_of::<$t>(),
            fields: vec![$((c_field!($f $(as $cf)?), offset_of!($t, $f))),*],
        }
    };
}

/// Every `#[repr(C)]` struct and union of the crate, under its C name.
pub fn mine() -> Vec<Layout> {
    vec![
        layout!(ContextSaveAreaHeader as "kfd_context_save_area_header" {
            wave_state,
            debug_offset,
            debug_size,
            err_payload_addr,
            err_event_id,
            reserved1,
        }),
        layout!(ContextSaveAreaWaveState as "kfd_context_save_area_header__bindgen_ty_1" {
            control_stack_offset,
            control_stack_size,
            wave_state_offset,
            wave_state_size,
        }),
        layout!(CriuBoBucket as "kfd_criu_bo_bucket" {
            addr,
            size,
            offset,
            restored_offset,
            gpu_id,
            alloc_flags,
            dmabuf_fd,
            pad,
        }),
        layout!(CriuDeviceBucket as "kfd_criu_device_bucket" {
            user_gpu_id,
            actual_gpu_id,
            drm_fd,
            pad,
        }),
        layout!(DbgDeviceInfoEntry as "kfd_dbg_device_info_entry" {
            exception_status,
            lds_base,
            lds_limit,
            scratch_base,
            scratch_limit,
            gpuvm_base,
            gpuvm_limit,
            gpu_id,
            location_id,
            vendor_id,
            device_id,
            revision_id,
            subsystem_vendor_id,
            subsystem_device_id,
            fw_version,
            gfx_target_version,
            simd_count,
            max_waves_per_simd,
            array_count,
            simd_arrays_per_engine,
            num_xcc,
            capability,
            debug_prop,
        }),
        layout!(EventData as "kfd_event_data" {
            data as "__bindgen_anon_1",
            kfd_event_data_ext,
            event_id,
            pad,
        }),
        layout!(EventDataUnion as "kfd_event_data__bindgen_ty_1" {
            memory_exception_data,
            hw_exception_data,
            signal_event_data,
        }),
        layout!(HsaHwExceptionData as "kfd_hsa_hw_exception_data" {
            reset_type,
            reset_cause,
            memory_lost,
            gpu_id,
        }),
        layout!(HsaMemoryExceptionData as "kfd_hsa_memory_exception_data" {
            failure,
            va,
            gpu_id,
            error_type as "ErrorType",
        }),
        layout!(HsaSignalEventData as "kfd_hsa_signal_event_data" { last_event_age }),
        layout!(AcquireVmArgs as "kfd_ioctl_acquire_vm_args" { drm_fd, gpu_id }),
        layout!(AllocMemoryOfGpuArgs as "kfd_ioctl_alloc_memory_of_gpu_args" {
            va_addr,
            size,
            handle,
            mmap_offset,
            gpu_id,
            flags,
        }),
        layout!(AllocQueueGwsArgs as "kfd_ioctl_alloc_queue_gws_args" {
            queue_id,
            num_gws,
            first_gws,
            pad,
        }),
        layout!(CreateEventArgs as "kfd_ioctl_create_event_args" {
            event_page_offset,
            event_trigger_data,
            event_type,
            auto_reset,
            node_id,
            event_id,
            event_slot_index,
        }),
        layout!(CreateQueueArgs as "kfd_ioctl_create_queue_args" {
            ring_base_address,
            write_pointer_address,
            read_pointer_address,
            doorbell_offset,
            ring_size,
            gpu_id,
            queue_type,
            queue_percentage,
            queue_priority,
            queue_id,
            eop_buffer_address,
            eop_buffer_size,
            ctx_save_restore_address,
            ctx_save_restore_size,
            ctl_stack_size,
            sdma_engine_id,
            pad,
        }),
        layout!(CriuArgs as "kfd_ioctl_criu_args" {
            devices,
            bos,
            priv_data,
            priv_data_size,
            num_devices,
            num_bos,
            num_objects,
            pid,
            op,
        }),
        layout!(DbgAddressWatchArgs as "kfd_ioctl_dbg_address_watch_args" {
            content_ptr,
            gpu_id,
            buf_size_in_bytes,
        }),
        layout!(DbgRegisterArgs as "kfd_ioctl_dbg_register_args" { gpu_id, pad }),
        layout!(DbgTrapArgs as "kfd_ioctl_dbg_trap_args" {
            pid,
            op,
            op_args as "__bindgen_anon_1",
        }),
        layout!(DbgTrapUnion as "kfd_ioctl_dbg_trap_args__bindgen_ty_1" {
            enable,
            send_runtime_event,
            set_exceptions_enabled,
            launch_override,
            launch_mode,
            suspend_queues,
            resume_queues,
            set_node_address_watch,
            clear_node_address_watch,
            set_flags,
            query_debug_event,
            query_exception_info,
            queue_snapshot,
            device_snapshot,
        }),
        layout!(DbgTrapClearNodeAddressWatchArgs as "kfd_ioctl_dbg_trap_clear_node_address_watch_args" {
            gpu_id,
            id,
        }),
        layout!(DbgTrapDeviceSnapshotArgs as "kfd_ioctl_dbg_trap_device_snapshot_args" {
            exception_mask,
            snapshot_buf_ptr,
            num_devices,
            entry_size,
        }),
        layout!(DbgTrapEnableArgs as "kfd_ioctl_dbg_trap_enable_args" {
            exception_mask,
            rinfo_ptr,
            rinfo_size,
            dbg_fd,
        }),
        layout!(DbgTrapQueryDebugEventArgs as "kfd_ioctl_dbg_trap_query_debug_event_args" {
            exception_mask,
            gpu_id,
            queue_id,
        }),
        layout!(DbgTrapQueryExceptionInfoArgs as "kfd_ioctl_dbg_trap_query_exception_info_args" {
            info_ptr,
            info_size,
            source_id,
            exception_code,
            clear_exception,
        }),
        layout!(DbgTrapQueueSnapshotArgs as "kfd_ioctl_dbg_trap_queue_snapshot_args" {
            exception_mask,
            snapshot_buf_ptr,
            num_queues,
            entry_size,
        }),
        layout!(DbgTrapResumeQueuesArgs as "kfd_ioctl_dbg_trap_resume_queues_args" {
            queue_array_ptr,
            num_queues,
            pad,
        }),
        layout!(DbgTrapSendRuntimeEventArgs as "kfd_ioctl_dbg_trap_send_runtime_event_args" {
            exception_mask,
            gpu_id,
            queue_id,
        }),
        layout!(DbgTrapSetExceptionsEnabledArgs as "kfd_ioctl_dbg_trap_set_exceptions_enabled_args" {
            exception_mask,
        }),
        layout!(DbgTrapSetFlagsArgs as "kfd_ioctl_dbg_trap_set_flags_args" { flags, pad }),
        layout!(DbgTrapSetNodeAddressWatchArgs as "kfd_ioctl_dbg_trap_set_node_address_watch_args" {
            address,
            mode,
            mask,
            gpu_id,
            id,
        }),
        layout!(DbgTrapSetWaveLaunchModeArgs as "kfd_ioctl_dbg_trap_set_wave_launch_mode_args" {
            launch_mode,
            pad,
        }),
        layout!(DbgTrapSetWaveLaunchOverrideArgs as "kfd_ioctl_dbg_trap_set_wave_launch_override_args" {
            override_mode,
            enable_mask,
            support_request_mask,
            pad,
        }),
        layout!(DbgTrapSuspendQueuesArgs as "kfd_ioctl_dbg_trap_suspend_queues_args" {
            exception_mask,
            queue_array_ptr,
            num_queues,
            grace_period,
        }),
        layout!(DbgUnregisterArgs as "kfd_ioctl_dbg_unregister_args" { gpu_id, pad }),
        layout!(DbgWaveControlArgs as "kfd_ioctl_dbg_wave_control_args" {
            content_ptr,
            gpu_id,
            buf_size_in_bytes,
        }),
        layout!(DestroyEventArgs as "kfd_ioctl_destroy_event_args" { event_id, pad }),
        layout!(DestroyQueueArgs as "kfd_ioctl_destroy_queue_args" { queue_id, pad }),
        layout!(ExportDmabufArgs as "kfd_ioctl_export_dmabuf_args" { handle, flags, dmabuf_fd }),
        layout!(FreeMemoryOfGpuArgs as "kfd_ioctl_free_memory_of_gpu_args" { handle }),
        layout!(GetAvailableMemoryArgs as "kfd_ioctl_get_available_memory_args" {
            available,
            gpu_id,
            pad,
        }),
        layout!(GetClockCountersArgs as "kfd_ioctl_get_clock_counters_args" {
            gpu_clock_counter,
            cpu_clock_counter,
            system_clock_counter,
            system_clock_freq,
            gpu_id,
            pad,
        }),
        layout!(GetDmabufInfoArgs as "kfd_ioctl_get_dmabuf_info_args" {
            size,
            metadata_ptr,
            metadata_size,
            gpu_id,
            flags,
            dmabuf_fd,
        }),
        layout!(GetProcessAperturesArgs as "kfd_ioctl_get_process_apertures_args" {
            process_apertures,
            num_of_nodes,
            pad,
        }),
        layout!(GetProcessAperturesNewArgs as "kfd_ioctl_get_process_apertures_new_args" {
            kfd_process_device_apertures_ptr,
            num_of_nodes,
            pad,
        }),
        layout!(GetQueueWaveStateArgs as "kfd_ioctl_get_queue_wave_state_args" {
            ctl_stack_address,
            ctl_stack_used_size,
            save_area_used_size,
            queue_id,
            pad,
        }),
        layout!(GetTileConfigArgs as "kfd_ioctl_get_tile_config_args" {
            tile_config_ptr,
            macro_tile_config_ptr,
            num_tile_configs,
            num_macro_tile_configs,
            gpu_id,
            gb_addr_config,
            num_banks,
            num_ranks,
        }),
        layout!(GetVersionArgs as "kfd_ioctl_get_version_args" { major_version, minor_version }),
        layout!(ImportDmabufArgs as "kfd_ioctl_import_dmabuf_args" {
            va_addr,
            handle,
            gpu_id,
            dmabuf_fd,
        }),
        layout!(MapMemoryToGpuArgs as "kfd_ioctl_map_memory_to_gpu_args" {
            handle,
            device_ids_array_ptr,
            n_devices,
            n_success,
        }),
        layout!(ResetEventArgs as "kfd_ioctl_reset_event_args" { event_id, pad }),
        layout!(RuntimeEnableArgs as "kfd_ioctl_runtime_enable_args" {
            r_debug,
            mode_mask,
            capabilities_mask,
        }),
        layout!(SetCuMaskArgs as "kfd_ioctl_set_cu_mask_args" {
            queue_id,
            num_cu_mask,
            cu_mask_ptr,
        }),
        layout!(SetEventArgs as "kfd_ioctl_set_event_args" { event_id, pad }),
        layout!(SetMemoryPolicyArgs as "kfd_ioctl_set_memory_policy_args" {
            alternate_aperture_base,
            alternate_aperture_size,
            gpu_id,
            default_policy,
            alternate_policy,
            pad,
        }),
        layout!(SetScratchBackingVaArgs as "kfd_ioctl_set_scratch_backing_va_args" {
            va_addr,
            gpu_id,
            pad,
        }),
        layout!(SetTrapHandlerArgs as "kfd_ioctl_set_trap_handler_args" {
            tba_addr,
            tma_addr,
            gpu_id,
            pad,
        }),
        layout!(SetXnackModeArgs as "kfd_ioctl_set_xnack_mode_args" { xnack_enabled }),
        layout!(SmiEventsArgs as "kfd_ioctl_smi_events_args" { gpuid, anon_fd }),
        layout!(SvmArgs as "kfd_ioctl_svm_args" { start_addr, size, op, nattr, attrs }),
        layout!(SvmAttribute as "kfd_ioctl_svm_attribute" { r#type as "type", value }),
        layout!(UnmapMemoryFromGpuArgs as "kfd_ioctl_unmap_memory_from_gpu_args" {
            handle,
            device_ids_array_ptr,
            n_devices,
            n_success,
        }),
        layout!(UpdateQueueArgs as "kfd_ioctl_update_queue_args" {
            ring_base_address,
            queue_id,
            ring_size,
            queue_percentage,
            queue_priority,
        }),
        layout!(WaitEventsArgs as "kfd_ioctl_wait_events_args" {
            events_ptr,
            num_events,
            wait_for_all,
            timeout,
            wait_result,
        }),
        layout!(MemoryExceptionFailure as "kfd_memory_exception_failure" {
            not_present as "NotPresent",
            read_only as "ReadOnly",
            no_execute as "NoExecute",
            imprecise,
        }),
        layout!(ProcessDeviceApertures as "kfd_process_device_apertures" {
            lds_base,
            lds_limit,
            scratch_base,
            scratch_limit,
            gpuvm_base,
            gpuvm_limit,
            gpu_id,
            pad,
        }),
        layout!(QueueSnapshotEntry as "kfd_queue_snapshot_entry" {
            exception_status,
            ring_base_address,
            write_pointer_address,
            read_pointer_address,
            ctx_save_restore_address,
            queue_id,
            gpu_id,
            ring_size,
            queue_type,
            ctx_save_restore_area_size,
            reserved,
        }),
        layout!(RuntimeInfo as "kfd_runtime_info" { r_debug, runtime_state, ttmp_setup }),
    ]
}

/// The layout of the C struct `c_name` in this crate.
pub fn mine_of(c_name: &str) -> Layout {
    mine()
        .into_iter()
        .find(|l| l.c_name == c_name)
        .unwrap_or_else(|| panic!("no {c_name}"))
}

/// The argument struct (C name) of each request.
pub fn arg_struct(req: Request) -> &'static str {
    use Request::*;
    match req {
        GetVersion => "kfd_ioctl_get_version_args",
        CreateQueue => "kfd_ioctl_create_queue_args",
        DestroyQueue => "kfd_ioctl_destroy_queue_args",
        SetMemoryPolicy => "kfd_ioctl_set_memory_policy_args",
        GetClockCounters => "kfd_ioctl_get_clock_counters_args",
        GetProcessApertures => "kfd_ioctl_get_process_apertures_args",
        UpdateQueue => "kfd_ioctl_update_queue_args",
        CreateEvent => "kfd_ioctl_create_event_args",
        DestroyEvent => "kfd_ioctl_destroy_event_args",
        SetEvent => "kfd_ioctl_set_event_args",
        ResetEvent => "kfd_ioctl_reset_event_args",
        WaitEvents => "kfd_ioctl_wait_events_args",
        DbgRegisterDeprecated => "kfd_ioctl_dbg_register_args",
        DbgUnregisterDeprecated => "kfd_ioctl_dbg_unregister_args",
        DbgAddressWatchDeprecated => "kfd_ioctl_dbg_address_watch_args",
        DbgWaveControlDeprecated => "kfd_ioctl_dbg_wave_control_args",
        SetScratchBackingVa => "kfd_ioctl_set_scratch_backing_va_args",
        GetTileConfig => "kfd_ioctl_get_tile_config_args",
        SetTrapHandler => "kfd_ioctl_set_trap_handler_args",
        GetProcessAperturesNew => "kfd_ioctl_get_process_apertures_new_args",
        AcquireVm => "kfd_ioctl_acquire_vm_args",
        AllocMemoryOfGpu => "kfd_ioctl_alloc_memory_of_gpu_args",
        FreeMemoryOfGpu => "kfd_ioctl_free_memory_of_gpu_args",
        MapMemoryToGpu => "kfd_ioctl_map_memory_to_gpu_args",
        UnmapMemoryFromGpu => "kfd_ioctl_unmap_memory_from_gpu_args",
        SetCuMask => "kfd_ioctl_set_cu_mask_args",
        GetQueueWaveState => "kfd_ioctl_get_queue_wave_state_args",
        GetDmabufInfo => "kfd_ioctl_get_dmabuf_info_args",
        ImportDmabuf => "kfd_ioctl_import_dmabuf_args",
        AllocQueueGws => "kfd_ioctl_alloc_queue_gws_args",
        SmiEvents => "kfd_ioctl_smi_events_args",
        Svm => "kfd_ioctl_svm_args",
        SetXnackMode => "kfd_ioctl_set_xnack_mode_args",
        CriuOp => "kfd_ioctl_criu_args",
        AvailableMemory => "kfd_ioctl_get_available_memory_args",
        ExportDmabuf => "kfd_ioctl_export_dmabuf_args",
        RuntimeEnable => "kfd_ioctl_runtime_enable_args",
        DbgTrap => "kfd_ioctl_dbg_trap_args",
    }
}

/// Every integer constant of the crate's ABI, under its C name, widened to `u64` (the
/// `KFD_EC_MASK_*` macros are 64-bit; everything else fits 32 bits).
pub const MINE_CONSTS: &[(&str, u64)] = &[
    (
        "KFD_IOCTL_MAJOR_VERSION",
        abi::KFD_IOCTL_MAJOR_VERSION as u64,
    ),
    (
        "KFD_IOCTL_MINOR_VERSION",
        abi::KFD_IOCTL_MINOR_VERSION as u64,
    ),
    (
        "KFD_IOC_QUEUE_TYPE_COMPUTE",
        abi::KFD_IOC_QUEUE_TYPE_COMPUTE as u64,
    ),
    (
        "KFD_IOC_QUEUE_TYPE_SDMA",
        abi::KFD_IOC_QUEUE_TYPE_SDMA as u64,
    ),
    (
        "KFD_IOC_QUEUE_TYPE_COMPUTE_AQL",
        abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL as u64,
    ),
    (
        "KFD_IOC_QUEUE_TYPE_SDMA_XGMI",
        abi::KFD_IOC_QUEUE_TYPE_SDMA_XGMI as u64,
    ),
    (
        "KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID",
        abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID as u64,
    ),
    (
        "KFD_MAX_QUEUE_PERCENTAGE",
        abi::KFD_MAX_QUEUE_PERCENTAGE as u64,
    ),
    ("KFD_MAX_QUEUE_PRIORITY", abi::KFD_MAX_QUEUE_PRIORITY as u64),
    (
        "KFD_MIN_QUEUE_RING_SIZE",
        abi::KFD_MIN_QUEUE_RING_SIZE as u64,
    ),
    (
        "KFD_IOC_CACHE_POLICY_COHERENT",
        abi::KFD_IOC_CACHE_POLICY_COHERENT as u64,
    ),
    (
        "KFD_IOC_CACHE_POLICY_NONCOHERENT",
        abi::KFD_IOC_CACHE_POLICY_NONCOHERENT as u64,
    ),
    ("NUM_OF_SUPPORTED_GPUS", abi::NUM_OF_SUPPORTED_GPUS as u64),
    ("MAX_ALLOWED_NUM_POINTS", abi::MAX_ALLOWED_NUM_POINTS as u64),
    (
        "MAX_ALLOWED_AW_BUFF_SIZE",
        abi::MAX_ALLOWED_AW_BUFF_SIZE as u64,
    ),
    (
        "MAX_ALLOWED_WAC_BUFF_SIZE",
        abi::MAX_ALLOWED_WAC_BUFF_SIZE as u64,
    ),
    ("KFD_INVALID_FD", abi::KFD_INVALID_FD as u64),
    ("KFD_IOC_EVENT_SIGNAL", abi::KFD_IOC_EVENT_SIGNAL as u64),
    (
        "KFD_IOC_EVENT_NODECHANGE",
        abi::KFD_IOC_EVENT_NODECHANGE as u64,
    ),
    (
        "KFD_IOC_EVENT_DEVICESTATECHANGE",
        abi::KFD_IOC_EVENT_DEVICESTATECHANGE as u64,
    ),
    (
        "KFD_IOC_EVENT_HW_EXCEPTION",
        abi::KFD_IOC_EVENT_HW_EXCEPTION as u64,
    ),
    (
        "KFD_IOC_EVENT_SYSTEM_EVENT",
        abi::KFD_IOC_EVENT_SYSTEM_EVENT as u64,
    ),
    (
        "KFD_IOC_EVENT_DEBUG_EVENT",
        abi::KFD_IOC_EVENT_DEBUG_EVENT as u64,
    ),
    (
        "KFD_IOC_EVENT_PROFILE_EVENT",
        abi::KFD_IOC_EVENT_PROFILE_EVENT as u64,
    ),
    (
        "KFD_IOC_EVENT_QUEUE_EVENT",
        abi::KFD_IOC_EVENT_QUEUE_EVENT as u64,
    ),
    ("KFD_IOC_EVENT_MEMORY", abi::KFD_IOC_EVENT_MEMORY as u64),
    (
        "KFD_IOC_WAIT_RESULT_COMPLETE",
        abi::KFD_IOC_WAIT_RESULT_COMPLETE as u64,
    ),
    (
        "KFD_IOC_WAIT_RESULT_TIMEOUT",
        abi::KFD_IOC_WAIT_RESULT_TIMEOUT as u64,
    ),
    (
        "KFD_IOC_WAIT_RESULT_FAIL",
        abi::KFD_IOC_WAIT_RESULT_FAIL as u64,
    ),
    ("KFD_SIGNAL_EVENT_LIMIT", abi::KFD_SIGNAL_EVENT_LIMIT as u64),
    (
        "KFD_HW_EXCEPTION_WHOLE_GPU_RESET",
        abi::KFD_HW_EXCEPTION_WHOLE_GPU_RESET as u64,
    ),
    (
        "KFD_HW_EXCEPTION_PER_ENGINE_RESET",
        abi::KFD_HW_EXCEPTION_PER_ENGINE_RESET as u64,
    ),
    (
        "KFD_HW_EXCEPTION_GPU_HANG",
        abi::KFD_HW_EXCEPTION_GPU_HANG as u64,
    ),
    ("KFD_HW_EXCEPTION_ECC", abi::KFD_HW_EXCEPTION_ECC as u64),
    ("KFD_MEM_ERR_NO_RAS", abi::KFD_MEM_ERR_NO_RAS as u64),
    ("KFD_MEM_ERR_SRAM_ECC", abi::KFD_MEM_ERR_SRAM_ECC as u64),
    (
        "KFD_MEM_ERR_POISON_CONSUMED",
        abi::KFD_MEM_ERR_POISON_CONSUMED as u64,
    ),
    ("KFD_MEM_ERR_GPU_HANG", abi::KFD_MEM_ERR_GPU_HANG as u64),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_VRAM",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_GTT",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_USERPTR",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_COHERENT",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_COHERENT as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT as u64,
    ),
    (
        "KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS",
        abi::KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS as u64,
    ),
    ("KFD_SMI_EVENT_MSG_SIZE", abi::KFD_SMI_EVENT_MSG_SIZE as u64),
    (
        "KFD_IOCTL_SVM_FLAG_HOST_ACCESS",
        abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_COHERENT",
        abi::KFD_IOCTL_SVM_FLAG_COHERENT as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_HIVE_LOCAL",
        abi::KFD_IOCTL_SVM_FLAG_HIVE_LOCAL as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_GPU_RO",
        abi::KFD_IOCTL_SVM_FLAG_GPU_RO as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_GPU_EXEC",
        abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY",
        abi::KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED",
        abi::KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED as u64,
    ),
    (
        "KFD_IOCTL_SVM_FLAG_EXT_COHERENT",
        abi::KFD_IOCTL_SVM_FLAG_EXT_COHERENT as u64,
    ),
    (
        "KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK",
        abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK as u64,
    ),
    (
        "KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK",
        abi::KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK as u64,
    ),
    (
        "KFD_DBG_QUEUE_ERROR_BIT",
        abi::KFD_DBG_QUEUE_ERROR_BIT as u64,
    ),
    (
        "KFD_DBG_QUEUE_INVALID_BIT",
        abi::KFD_DBG_QUEUE_INVALID_BIT as u64,
    ),
    (
        "KFD_DBG_QUEUE_ERROR_MASK",
        abi::KFD_DBG_QUEUE_ERROR_MASK as u64,
    ),
    (
        "KFD_DBG_QUEUE_INVALID_MASK",
        abi::KFD_DBG_QUEUE_INVALID_MASK as u64,
    ),
    ("AMDKFD_IOCTL_BASE", abi::AMDKFD_IOCTL_BASE as u64),
    ("AMDKFD_COMMAND_START", abi::AMDKFD_COMMAND_START as u64),
    ("AMDKFD_COMMAND_END", abi::AMDKFD_COMMAND_END as u64),
    ("KFD_SMI_EVENT_NONE", abi::KFD_SMI_EVENT_NONE as u64),
    ("KFD_SMI_EVENT_VMFAULT", abi::KFD_SMI_EVENT_VMFAULT as u64),
    (
        "KFD_SMI_EVENT_THERMAL_THROTTLE",
        abi::KFD_SMI_EVENT_THERMAL_THROTTLE as u64,
    ),
    (
        "KFD_SMI_EVENT_GPU_PRE_RESET",
        abi::KFD_SMI_EVENT_GPU_PRE_RESET as u64,
    ),
    (
        "KFD_SMI_EVENT_GPU_POST_RESET",
        abi::KFD_SMI_EVENT_GPU_POST_RESET as u64,
    ),
    (
        "KFD_SMI_EVENT_MIGRATE_START",
        abi::KFD_SMI_EVENT_MIGRATE_START as u64,
    ),
    (
        "KFD_SMI_EVENT_MIGRATE_END",
        abi::KFD_SMI_EVENT_MIGRATE_END as u64,
    ),
    (
        "KFD_SMI_EVENT_PAGE_FAULT_START",
        abi::KFD_SMI_EVENT_PAGE_FAULT_START as u64,
    ),
    (
        "KFD_SMI_EVENT_PAGE_FAULT_END",
        abi::KFD_SMI_EVENT_PAGE_FAULT_END as u64,
    ),
    (
        "KFD_SMI_EVENT_QUEUE_EVICTION",
        abi::KFD_SMI_EVENT_QUEUE_EVICTION as u64,
    ),
    (
        "KFD_SMI_EVENT_QUEUE_RESTORE",
        abi::KFD_SMI_EVENT_QUEUE_RESTORE as u64,
    ),
    (
        "KFD_SMI_EVENT_UNMAP_FROM_GPU",
        abi::KFD_SMI_EVENT_UNMAP_FROM_GPU as u64,
    ),
    (
        "KFD_SMI_EVENT_ALL_PROCESS",
        abi::KFD_SMI_EVENT_ALL_PROCESS as u64,
    ),
    (
        "KFD_MIGRATE_TRIGGER_PREFETCH",
        abi::KFD_MIGRATE_TRIGGER_PREFETCH as u64,
    ),
    (
        "KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU",
        abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU as u64,
    ),
    (
        "KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU",
        abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU as u64,
    ),
    (
        "KFD_MIGRATE_TRIGGER_TTM_EVICTION",
        abi::KFD_MIGRATE_TRIGGER_TTM_EVICTION as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_TRIGGER_SVM",
        abi::KFD_QUEUE_EVICTION_TRIGGER_SVM as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_TRIGGER_USERPTR",
        abi::KFD_QUEUE_EVICTION_TRIGGER_USERPTR as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_TRIGGER_TTM",
        abi::KFD_QUEUE_EVICTION_TRIGGER_TTM as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_TRIGGER_SUSPEND",
        abi::KFD_QUEUE_EVICTION_TRIGGER_SUSPEND as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_CRIU_CHECKPOINT",
        abi::KFD_QUEUE_EVICTION_CRIU_CHECKPOINT as u64,
    ),
    (
        "KFD_QUEUE_EVICTION_CRIU_RESTORE",
        abi::KFD_QUEUE_EVICTION_CRIU_RESTORE as u64,
    ),
    (
        "KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY",
        abi::KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY as u64,
    ),
    (
        "KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE",
        abi::KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE as u64,
    ),
    (
        "KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU",
        abi::KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU as u64,
    ),
    (
        "KFD_CRIU_OP_PROCESS_INFO",
        abi::KFD_CRIU_OP_PROCESS_INFO as u64,
    ),
    ("KFD_CRIU_OP_CHECKPOINT", abi::KFD_CRIU_OP_CHECKPOINT as u64),
    ("KFD_CRIU_OP_UNPAUSE", abi::KFD_CRIU_OP_UNPAUSE as u64),
    ("KFD_CRIU_OP_RESTORE", abi::KFD_CRIU_OP_RESTORE as u64),
    ("KFD_CRIU_OP_RESUME", abi::KFD_CRIU_OP_RESUME as u64),
    (
        "KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL",
        abi::KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL as u64,
    ),
    (
        "KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL",
        abi::KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL as u64,
    ),
    (
        "KFD_IOCTL_SVM_OP_SET_ATTR",
        abi::KFD_IOCTL_SVM_OP_SET_ATTR as u64,
    ),
    (
        "KFD_IOCTL_SVM_OP_GET_ATTR",
        abi::KFD_IOCTL_SVM_OP_GET_ATTR as u64,
    ),
    (
        "KFD_IOCTL_SVM_LOCATION_SYSMEM",
        abi::KFD_IOCTL_SVM_LOCATION_SYSMEM as u64,
    ),
    (
        "KFD_IOCTL_SVM_LOCATION_UNDEFINED",
        abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_PREFERRED_LOC",
        abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_PREFETCH_LOC",
        abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_ACCESS",
        abi::KFD_IOCTL_SVM_ATTR_ACCESS as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE",
        abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_NO_ACCESS",
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_SET_FLAGS",
        abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_CLR_FLAGS",
        abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS as u64,
    ),
    (
        "KFD_IOCTL_SVM_ATTR_GRANULARITY",
        abi::KFD_IOCTL_SVM_ATTR_GRANULARITY as u64,
    ),
    (
        "KFD_DBG_TRAP_OVERRIDE_OR",
        abi::KFD_DBG_TRAP_OVERRIDE_OR as u64,
    ),
    (
        "KFD_DBG_TRAP_OVERRIDE_REPLACE",
        abi::KFD_DBG_TRAP_OVERRIDE_REPLACE as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_INVALID",
        abi::KFD_DBG_TRAP_MASK_FP_INVALID as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL",
        abi::KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO",
        abi::KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_OVERFLOW",
        abi::KFD_DBG_TRAP_MASK_FP_OVERFLOW as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_UNDERFLOW",
        abi::KFD_DBG_TRAP_MASK_FP_UNDERFLOW as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_FP_INEXACT",
        abi::KFD_DBG_TRAP_MASK_FP_INEXACT as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO",
        abi::KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH",
        abi::KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION",
        abi::KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START",
        abi::KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START as u64,
    ),
    (
        "KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END",
        abi::KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END as u64,
    ),
    (
        "KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL",
        abi::KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL as u64,
    ),
    (
        "KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT",
        abi::KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT as u64,
    ),
    (
        "KFD_DBG_TRAP_WAVE_LAUNCH_MODE_DEBUG",
        abi::KFD_DBG_TRAP_WAVE_LAUNCH_MODE_DEBUG as u64,
    ),
    (
        "KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ",
        abi::KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ as u64,
    ),
    (
        "KFD_DBG_TRAP_ADDRESS_WATCH_MODE_NONREAD",
        abi::KFD_DBG_TRAP_ADDRESS_WATCH_MODE_NONREAD as u64,
    ),
    (
        "KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ATOMIC",
        abi::KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ATOMIC as u64,
    ),
    (
        "KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL",
        abi::KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL as u64,
    ),
    (
        "KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP",
        abi::KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP as u64,
    ),
    (
        "KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP",
        abi::KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP as u64,
    ),
    ("EC_NONE", abi::EC_NONE as u64),
    ("EC_QUEUE_WAVE_ABORT", abi::EC_QUEUE_WAVE_ABORT as u64),
    ("EC_QUEUE_WAVE_TRAP", abi::EC_QUEUE_WAVE_TRAP as u64),
    (
        "EC_QUEUE_WAVE_MATH_ERROR",
        abi::EC_QUEUE_WAVE_MATH_ERROR as u64,
    ),
    (
        "EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION",
        abi::EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION as u64,
    ),
    (
        "EC_QUEUE_WAVE_MEMORY_VIOLATION",
        abi::EC_QUEUE_WAVE_MEMORY_VIOLATION as u64,
    ),
    (
        "EC_QUEUE_WAVE_APERTURE_VIOLATION",
        abi::EC_QUEUE_WAVE_APERTURE_VIOLATION as u64,
    ),
    (
        "EC_QUEUE_PACKET_DISPATCH_DIM_INVALID",
        abi::EC_QUEUE_PACKET_DISPATCH_DIM_INVALID as u64,
    ),
    (
        "EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID",
        abi::EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID as u64,
    ),
    (
        "EC_QUEUE_PACKET_DISPATCH_CODE_INVALID",
        abi::EC_QUEUE_PACKET_DISPATCH_CODE_INVALID as u64,
    ),
    (
        "EC_QUEUE_PACKET_RESERVED",
        abi::EC_QUEUE_PACKET_RESERVED as u64,
    ),
    (
        "EC_QUEUE_PACKET_UNSUPPORTED",
        abi::EC_QUEUE_PACKET_UNSUPPORTED as u64,
    ),
    (
        "EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID",
        abi::EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID as u64,
    ),
    (
        "EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID",
        abi::EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID as u64,
    ),
    (
        "EC_QUEUE_PACKET_VENDOR_UNSUPPORTED",
        abi::EC_QUEUE_PACKET_VENDOR_UNSUPPORTED as u64,
    ),
    (
        "EC_QUEUE_PREEMPTION_ERROR",
        abi::EC_QUEUE_PREEMPTION_ERROR as u64,
    ),
    ("EC_QUEUE_NEW", abi::EC_QUEUE_NEW as u64),
    ("EC_DEVICE_QUEUE_DELETE", abi::EC_DEVICE_QUEUE_DELETE as u64),
    (
        "EC_DEVICE_MEMORY_VIOLATION",
        abi::EC_DEVICE_MEMORY_VIOLATION as u64,
    ),
    ("EC_DEVICE_RAS_ERROR", abi::EC_DEVICE_RAS_ERROR as u64),
    ("EC_DEVICE_FATAL_HALT", abi::EC_DEVICE_FATAL_HALT as u64),
    ("EC_DEVICE_NEW", abi::EC_DEVICE_NEW as u64),
    ("EC_PROCESS_RUNTIME", abi::EC_PROCESS_RUNTIME as u64),
    (
        "EC_PROCESS_DEVICE_REMOVE",
        abi::EC_PROCESS_DEVICE_REMOVE as u64,
    ),
    ("EC_MAX", abi::EC_MAX as u64),
    (
        "DEBUG_RUNTIME_STATE_DISABLED",
        abi::DEBUG_RUNTIME_STATE_DISABLED as u64,
    ),
    (
        "DEBUG_RUNTIME_STATE_ENABLED",
        abi::DEBUG_RUNTIME_STATE_ENABLED as u64,
    ),
    (
        "DEBUG_RUNTIME_STATE_ENABLED_BUSY",
        abi::DEBUG_RUNTIME_STATE_ENABLED_BUSY as u64,
    ),
    (
        "DEBUG_RUNTIME_STATE_ENABLED_ERROR",
        abi::DEBUG_RUNTIME_STATE_ENABLED_ERROR as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_ENABLE",
        abi::KFD_IOC_DBG_TRAP_ENABLE as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_DISABLE",
        abi::KFD_IOC_DBG_TRAP_DISABLE as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT",
        abi::KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED",
        abi::KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE",
        abi::KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE",
        abi::KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SUSPEND_QUEUES",
        abi::KFD_IOC_DBG_TRAP_SUSPEND_QUEUES as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_RESUME_QUEUES",
        abi::KFD_IOC_DBG_TRAP_RESUME_QUEUES as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH",
        abi::KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH",
        abi::KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_SET_FLAGS",
        abi::KFD_IOC_DBG_TRAP_SET_FLAGS as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT",
        abi::KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO",
        abi::KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT",
        abi::KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT as u64,
    ),
    (
        "KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT",
        abi::KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT as u64,
    ),
    ("KFD_EC_MASK_QUEUE", abi::KFD_EC_MASK_QUEUE),
    ("KFD_EC_MASK_DEVICE", abi::KFD_EC_MASK_DEVICE),
    ("KFD_EC_MASK_PROCESS", abi::KFD_EC_MASK_PROCESS),
    ("KFD_EC_MASK_PACKET", abi::KFD_EC_MASK_PACKET),
];

/// The value of constant `name` in this crate.
pub fn mine_const(name: &str) -> Option<u64> {
    MINE_CONSTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
}
