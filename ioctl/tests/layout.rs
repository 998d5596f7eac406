//! Every struct's size, alignment and field offsets against the upstream uapi 1.17 header.
//!
//! `UPSTREAM_1_17` is transcribed literally from Linux v6.12 `include/uapi/linux/kfd_ioctl.h`
//! (`KFD_IOCTL_MINOR_VERSION 17`; read from Debian's linux-libc-dev 6.12.95-1~bpo12+1, which
//! ships that header unchanged), with sizes and offsets as clang's record layout dump gave them
//! for x86-64. It does not depend on any header being installed.

mod common;

use common::{mine, Layout};

/// (C name, size, align, [(field, offset)]).
type StructLayout = (&'static str, usize, usize, &'static [(&'static str, usize)]);

/// Every struct and union of the 1.17 header. Anonymous types/members use bindgen's names
/// (`..__bindgen_ty_1`, `__bindgen_anon_1`).
#[rustfmt::skip]
const UPSTREAM_1_17: &[StructLayout] = &[
    ("kfd_context_save_area_header", 40, 8, &[
        ("wave_state", 0),
        ("debug_offset", 16),
        ("debug_size", 20),
        ("err_payload_addr", 24),
        ("err_event_id", 32),
        ("reserved1", 36),
    ]),
    ("kfd_context_save_area_header__bindgen_ty_1", 16, 4, &[
        ("control_stack_offset", 0),
        ("control_stack_size", 4),
        ("wave_state_offset", 8),
        ("wave_state_size", 12),
    ]),
    ("kfd_criu_bo_bucket", 48, 8, &[
        ("addr", 0),
        ("size", 8),
        ("offset", 16),
        ("restored_offset", 24),
        ("gpu_id", 32),
        ("alloc_flags", 36),
        ("dmabuf_fd", 40),
        ("pad", 44),
    ]),
    ("kfd_criu_device_bucket", 16, 4, &[
        ("user_gpu_id", 0),
        ("actual_gpu_id", 4),
        ("drm_fd", 8),
        ("pad", 12),
    ]),
    ("kfd_dbg_device_info_entry", 120, 8, &[
        ("exception_status", 0),
        ("lds_base", 8),
        ("lds_limit", 16),
        ("scratch_base", 24),
        ("scratch_limit", 32),
        ("gpuvm_base", 40),
        ("gpuvm_limit", 48),
        ("gpu_id", 56),
        ("location_id", 60),
        ("vendor_id", 64),
        ("device_id", 68),
        ("revision_id", 72),
        ("subsystem_vendor_id", 76),
        ("subsystem_device_id", 80),
        ("fw_version", 84),
        ("gfx_target_version", 88),
        ("simd_count", 92),
        ("max_waves_per_simd", 96),
        ("array_count", 100),
        ("simd_arrays_per_engine", 104),
        ("num_xcc", 108),
        ("capability", 112),
        ("debug_prop", 116),
    ]),
    ("kfd_event_data", 48, 8, &[
        ("__bindgen_anon_1", 0),
        ("kfd_event_data_ext", 32),
        ("event_id", 40),
        ("pad", 44),
    ]),
    ("kfd_event_data__bindgen_ty_1", 32, 8, &[
        ("memory_exception_data", 0),
        ("hw_exception_data", 0),
        ("signal_event_data", 0),
    ]),
    ("kfd_hsa_hw_exception_data", 16, 4, &[
        ("reset_type", 0),
        ("reset_cause", 4),
        ("memory_lost", 8),
        ("gpu_id", 12),
    ]),
    ("kfd_hsa_memory_exception_data", 32, 8, &[
        ("failure", 0),
        ("va", 16),
        ("gpu_id", 24),
        ("ErrorType", 28),
    ]),
    ("kfd_hsa_signal_event_data", 8, 8, &[("last_event_age", 0)]),
    ("kfd_ioctl_acquire_vm_args", 8, 4, &[("drm_fd", 0), ("gpu_id", 4)]),
    ("kfd_ioctl_alloc_memory_of_gpu_args", 40, 8, &[
        ("va_addr", 0),
        ("size", 8),
        ("handle", 16),
        ("mmap_offset", 24),
        ("gpu_id", 32),
        ("flags", 36),
    ]),
    ("kfd_ioctl_alloc_queue_gws_args", 16, 4, &[
        ("queue_id", 0),
        ("num_gws", 4),
        ("first_gws", 8),
        ("pad", 12),
    ]),
    ("kfd_ioctl_create_event_args", 32, 8, &[
        ("event_page_offset", 0),
        ("event_trigger_data", 8),
        ("event_type", 12),
        ("auto_reset", 16),
        ("node_id", 20),
        ("event_id", 24),
        ("event_slot_index", 28),
    ]),
    ("kfd_ioctl_create_queue_args", 96, 8, &[
        ("ring_base_address", 0),
        ("write_pointer_address", 8),
        ("read_pointer_address", 16),
        ("doorbell_offset", 24),
        ("ring_size", 32),
        ("gpu_id", 36),
        ("queue_type", 40),
        ("queue_percentage", 44),
        ("queue_priority", 48),
        ("queue_id", 52),
        ("eop_buffer_address", 56),
        ("eop_buffer_size", 64),
        ("ctx_save_restore_address", 72),
        ("ctx_save_restore_size", 80),
        ("ctl_stack_size", 84),
        ("sdma_engine_id", 88),
        ("pad", 92),
    ]),
    ("kfd_ioctl_criu_args", 56, 8, &[
        ("devices", 0),
        ("bos", 8),
        ("priv_data", 16),
        ("priv_data_size", 24),
        ("num_devices", 32),
        ("num_bos", 36),
        ("num_objects", 40),
        ("pid", 44),
        ("op", 48),
    ]),
    ("kfd_ioctl_dbg_address_watch_args", 16, 8, &[
        ("content_ptr", 0),
        ("gpu_id", 8),
        ("buf_size_in_bytes", 12),
    ]),
    ("kfd_ioctl_dbg_register_args", 8, 4, &[("gpu_id", 0), ("pad", 4)]),
    ("kfd_ioctl_dbg_trap_args", 32, 8, &[("pid", 0), ("op", 4), ("__bindgen_anon_1", 8)]),
    ("kfd_ioctl_dbg_trap_args__bindgen_ty_1", 24, 8, &[
        ("enable", 0),
        ("send_runtime_event", 0),
        ("set_exceptions_enabled", 0),
        ("launch_override", 0),
        ("launch_mode", 0),
        ("suspend_queues", 0),
        ("resume_queues", 0),
        ("set_node_address_watch", 0),
        ("clear_node_address_watch", 0),
        ("set_flags", 0),
        ("query_debug_event", 0),
        ("query_exception_info", 0),
        ("queue_snapshot", 0),
        ("device_snapshot", 0),
    ]),
    ("kfd_ioctl_dbg_trap_clear_node_address_watch_args", 8, 4, &[("gpu_id", 0), ("id", 4)]),
    ("kfd_ioctl_dbg_trap_device_snapshot_args", 24, 8, &[
        ("exception_mask", 0),
        ("snapshot_buf_ptr", 8),
        ("num_devices", 16),
        ("entry_size", 20),
    ]),
    ("kfd_ioctl_dbg_trap_enable_args", 24, 8, &[
        ("exception_mask", 0),
        ("rinfo_ptr", 8),
        ("rinfo_size", 16),
        ("dbg_fd", 20),
    ]),
    ("kfd_ioctl_dbg_trap_query_debug_event_args", 16, 8, &[
        ("exception_mask", 0),
        ("gpu_id", 8),
        ("queue_id", 12),
    ]),
    ("kfd_ioctl_dbg_trap_query_exception_info_args", 24, 8, &[
        ("info_ptr", 0),
        ("info_size", 8),
        ("source_id", 12),
        ("exception_code", 16),
        ("clear_exception", 20),
    ]),
    ("kfd_ioctl_dbg_trap_queue_snapshot_args", 24, 8, &[
        ("exception_mask", 0),
        ("snapshot_buf_ptr", 8),
        ("num_queues", 16),
        ("entry_size", 20),
    ]),
    ("kfd_ioctl_dbg_trap_resume_queues_args", 16, 8, &[
        ("queue_array_ptr", 0),
        ("num_queues", 8),
        ("pad", 12),
    ]),
    ("kfd_ioctl_dbg_trap_send_runtime_event_args", 16, 8, &[
        ("exception_mask", 0),
        ("gpu_id", 8),
        ("queue_id", 12),
    ]),
    ("kfd_ioctl_dbg_trap_set_exceptions_enabled_args", 8, 8, &[("exception_mask", 0)]),
    ("kfd_ioctl_dbg_trap_set_flags_args", 8, 4, &[("flags", 0), ("pad", 4)]),
    ("kfd_ioctl_dbg_trap_set_node_address_watch_args", 24, 8, &[
        ("address", 0),
        ("mode", 8),
        ("mask", 12),
        ("gpu_id", 16),
        ("id", 20),
    ]),
    ("kfd_ioctl_dbg_trap_set_wave_launch_mode_args", 8, 4, &[("launch_mode", 0), ("pad", 4)]),
    ("kfd_ioctl_dbg_trap_set_wave_launch_override_args", 16, 4, &[
        ("override_mode", 0),
        ("enable_mask", 4),
        ("support_request_mask", 8),
        ("pad", 12),
    ]),
    ("kfd_ioctl_dbg_trap_suspend_queues_args", 24, 8, &[
        ("exception_mask", 0),
        ("queue_array_ptr", 8),
        ("num_queues", 16),
        ("grace_period", 20),
    ]),
    ("kfd_ioctl_dbg_unregister_args", 8, 4, &[("gpu_id", 0), ("pad", 4)]),
    ("kfd_ioctl_dbg_wave_control_args", 16, 8, &[
        ("content_ptr", 0),
        ("gpu_id", 8),
        ("buf_size_in_bytes", 12),
    ]),
    ("kfd_ioctl_destroy_event_args", 8, 4, &[("event_id", 0), ("pad", 4)]),
    ("kfd_ioctl_destroy_queue_args", 8, 4, &[("queue_id", 0), ("pad", 4)]),
    ("kfd_ioctl_export_dmabuf_args", 16, 8, &[("handle", 0), ("flags", 8), ("dmabuf_fd", 12)]),
    ("kfd_ioctl_free_memory_of_gpu_args", 8, 8, &[("handle", 0)]),
    ("kfd_ioctl_get_available_memory_args", 16, 8, &[("available", 0), ("gpu_id", 8), ("pad", 12)]),
    ("kfd_ioctl_get_clock_counters_args", 40, 8, &[
        ("gpu_clock_counter", 0),
        ("cpu_clock_counter", 8),
        ("system_clock_counter", 16),
        ("system_clock_freq", 24),
        ("gpu_id", 32),
        ("pad", 36),
    ]),
    ("kfd_ioctl_get_dmabuf_info_args", 32, 8, &[
        ("size", 0),
        ("metadata_ptr", 8),
        ("metadata_size", 16),
        ("gpu_id", 20),
        ("flags", 24),
        ("dmabuf_fd", 28),
    ]),
    ("kfd_ioctl_get_process_apertures_args", 400, 8, &[
        ("process_apertures", 0),
        ("num_of_nodes", 392),
        ("pad", 396),
    ]),
    ("kfd_ioctl_get_process_apertures_new_args", 16, 8, &[
        ("kfd_process_device_apertures_ptr", 0),
        ("num_of_nodes", 8),
        ("pad", 12),
    ]),
    ("kfd_ioctl_get_queue_wave_state_args", 24, 8, &[
        ("ctl_stack_address", 0),
        ("ctl_stack_used_size", 8),
        ("save_area_used_size", 12),
        ("queue_id", 16),
        ("pad", 20),
    ]),
    ("kfd_ioctl_get_tile_config_args", 40, 8, &[
        ("tile_config_ptr", 0),
        ("macro_tile_config_ptr", 8),
        ("num_tile_configs", 16),
        ("num_macro_tile_configs", 20),
        ("gpu_id", 24),
        ("gb_addr_config", 28),
        ("num_banks", 32),
        ("num_ranks", 36),
    ]),
    ("kfd_ioctl_get_version_args", 8, 4, &[("major_version", 0), ("minor_version", 4)]),
    ("kfd_ioctl_import_dmabuf_args", 24, 8, &[
        ("va_addr", 0),
        ("handle", 8),
        ("gpu_id", 16),
        ("dmabuf_fd", 20),
    ]),
    ("kfd_ioctl_map_memory_to_gpu_args", 24, 8, &[
        ("handle", 0),
        ("device_ids_array_ptr", 8),
        ("n_devices", 16),
        ("n_success", 20),
    ]),
    ("kfd_ioctl_reset_event_args", 8, 4, &[("event_id", 0), ("pad", 4)]),
    ("kfd_ioctl_runtime_enable_args", 16, 8, &[
        ("r_debug", 0),
        ("mode_mask", 8),
        ("capabilities_mask", 12),
    ]),
    ("kfd_ioctl_set_cu_mask_args", 16, 8, &[
        ("queue_id", 0),
        ("num_cu_mask", 4),
        ("cu_mask_ptr", 8),
    ]),
    ("kfd_ioctl_set_event_args", 8, 4, &[("event_id", 0), ("pad", 4)]),
    ("kfd_ioctl_set_memory_policy_args", 32, 8, &[
        ("alternate_aperture_base", 0),
        ("alternate_aperture_size", 8),
        ("gpu_id", 16),
        ("default_policy", 20),
        ("alternate_policy", 24),
        ("pad", 28),
    ]),
    ("kfd_ioctl_set_scratch_backing_va_args", 16, 8, &[("va_addr", 0), ("gpu_id", 8), ("pad", 12)]),
    ("kfd_ioctl_set_trap_handler_args", 24, 8, &[
        ("tba_addr", 0),
        ("tma_addr", 8),
        ("gpu_id", 16),
        ("pad", 20),
    ]),
    ("kfd_ioctl_set_xnack_mode_args", 4, 4, &[("xnack_enabled", 0)]),
    ("kfd_ioctl_smi_events_args", 8, 4, &[("gpuid", 0), ("anon_fd", 4)]),
    ("kfd_ioctl_svm_args", 24, 8, &[
        ("start_addr", 0),
        ("size", 8),
        ("op", 16),
        ("nattr", 20),
        ("attrs", 24),
    ]),
    ("kfd_ioctl_svm_attribute", 8, 4, &[("type", 0), ("value", 4)]),
    ("kfd_ioctl_unmap_memory_from_gpu_args", 24, 8, &[
        ("handle", 0),
        ("device_ids_array_ptr", 8),
        ("n_devices", 16),
        ("n_success", 20),
    ]),
    ("kfd_ioctl_update_queue_args", 24, 8, &[
        ("ring_base_address", 0),
        ("queue_id", 8),
        ("ring_size", 12),
        ("queue_percentage", 16),
        ("queue_priority", 20),
    ]),
    ("kfd_ioctl_wait_events_args", 24, 8, &[
        ("events_ptr", 0),
        ("num_events", 8),
        ("wait_for_all", 12),
        ("timeout", 16),
        ("wait_result", 20),
    ]),
    ("kfd_memory_exception_failure", 16, 4, &[
        ("NotPresent", 0),
        ("ReadOnly", 4),
        ("NoExecute", 8),
        ("imprecise", 12),
    ]),
    ("kfd_process_device_apertures", 56, 8, &[
        ("lds_base", 0),
        ("lds_limit", 8),
        ("scratch_base", 16),
        ("scratch_limit", 24),
        ("gpuvm_base", 32),
        ("gpuvm_limit", 40),
        ("gpu_id", 48),
        ("pad", 52),
    ]),
    ("kfd_queue_snapshot_entry", 64, 8, &[
        ("exception_status", 0),
        ("ring_base_address", 8),
        ("write_pointer_address", 16),
        ("read_pointer_address", 24),
        ("ctx_save_restore_address", 32),
        ("queue_id", 40),
        ("gpu_id", 44),
        ("ring_size", 48),
        ("queue_type", 52),
        ("ctx_save_restore_area_size", 56),
        ("reserved", 60),
    ]),
    ("kfd_runtime_info", 16, 8, &[("r_debug", 0), ("runtime_state", 8), ("ttmp_setup", 12)]),
];

fn upstream(c_name: &str) -> Option<&'static StructLayout> {
    UPSTREAM_1_17.iter().find(|(n, ..)| *n == c_name)
}

#[test]
fn every_struct_matches_upstream_1_17() {
    let mine: Vec<Layout> = mine();
    assert_eq!(mine.len(), UPSTREAM_1_17.len(), "one Rust type per C struct/union");
    for m in &mine {
        let (name, size, align, fields) =
            *upstream(m.c_name).unwrap_or_else(|| panic!("{} is not in the 1.17 header", m.c_name));
        assert_eq!(m.size, size, "size_of {name}");
        assert_eq!(m.align, align, "align_of {name}");
        let names: Vec<&str> = m.fields.iter().map(|(n, _)| *n).collect();
        let up_names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, up_names, "fields of {name}, in order");
        for (field, offset) in fields.iter() {
            assert_eq!(m.field(field), Some(*offset), "offset_of {name}.{field}");
        }
    }
}

#[test]
fn key_layouts_spelled_out() {
    use std::mem::{offset_of, size_of};
    use xhsa_ioctl::abi::*;

    // 1.17 grew CREATE_QUEUE from 88 to 96 bytes.
    assert_eq!(size_of::<CreateQueueArgs>(), 96);
    assert_eq!(offset_of!(CreateQueueArgs, ctl_stack_size), 84);
    assert_eq!(offset_of!(CreateQueueArgs, sdma_engine_id), 88);
    // {pid, op, union}: the union is 8-aligned, so it starts at 8 and the struct is 32.
    assert_eq!(size_of::<DbgTrapArgs>(), 32);
    assert_eq!(offset_of!(DbgTrapArgs, op_args), 8);
    assert_eq!(size_of::<DbgTrapUnion>(), 24);
    assert_eq!(size_of::<UpdateQueueArgs>(), 24);
    assert_eq!(size_of::<SetCuMaskArgs>(), 16);
    assert_eq!(size_of::<RuntimeEnableArgs>(), 16);
    // The debug ops the emulator and libxhsa use, as the 1.17 header has them.
    assert_eq!(size_of::<RuntimeInfo>(), 16);
    assert_eq!(size_of::<DbgTrapQueryDebugEventArgs>(), 16);
    assert_eq!(offset_of!(DbgTrapQueryDebugEventArgs, queue_id), 12);
    assert_eq!(size_of::<DbgTrapQueryExceptionInfoArgs>(), 24);
    assert_eq!(offset_of!(DbgTrapQueryExceptionInfoArgs, clear_exception), 20);
    assert_eq!(size_of::<DbgTrapQueueSnapshotArgs>(), 24);
    assert_eq!(offset_of!(DbgTrapQueueSnapshotArgs, entry_size), 20);
    assert_eq!(size_of::<QueueSnapshotEntry>(), 64);
    assert_eq!(offset_of!(QueueSnapshotEntry, queue_id), 40);
    assert_eq!(offset_of!(QueueSnapshotEntry, queue_type), 52);
    // 52 bytes of fields, padded to 8.
    assert_eq!(size_of::<CriuArgs>(), 56);
    // The flexible array adds nothing.
    assert_eq!(size_of::<SvmArgs>(), 24);
    assert_eq!(offset_of!(SvmArgs, attrs), 24);
}
