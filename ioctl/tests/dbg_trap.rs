//! The `DBG_TRAP` argument: building it from a typed op, its bytes, and decoding them back.

use std::mem::{offset_of, size_of};

use xhsa_ioctl::abi::*;

fn every_op() -> Vec<DbgTrapOp> {
    vec![
        DbgTrapOp::Enable(DbgTrapEnableArgs {
            exception_mask: 0x0123_4567_89ab_cdef,
            rinfo_ptr: 0x7fff_0000_1000,
            rinfo_size: 16,
            dbg_fd: 9,
        }),
        DbgTrapOp::Disable,
        DbgTrapOp::SendRuntimeEvent(DbgTrapSendRuntimeEventArgs {
            exception_mask: kfd_ec_mask(EC_PROCESS_RUNTIME),
            gpu_id: 0x1234,
            queue_id: 3,
        }),
        DbgTrapOp::SetExceptionsEnabled(DbgTrapSetExceptionsEnabledArgs {
            exception_mask: KFD_EC_MASK_QUEUE,
        }),
        DbgTrapOp::SetWaveLaunchOverride(DbgTrapSetWaveLaunchOverrideArgs {
            override_mode: KFD_DBG_TRAP_OVERRIDE_REPLACE,
            enable_mask: KFD_DBG_TRAP_MASK_FP_INVALID,
            support_request_mask: KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END,
            pad: 0,
        }),
        DbgTrapOp::SetWaveLaunchMode(DbgTrapSetWaveLaunchModeArgs {
            launch_mode: KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT,
            pad: 0,
        }),
        DbgTrapOp::SuspendQueues(DbgTrapSuspendQueuesArgs {
            exception_mask: 0,
            queue_array_ptr: 0x5555_0000,
            num_queues: 4,
            grace_period: 100,
        }),
        DbgTrapOp::ResumeQueues(DbgTrapResumeQueuesArgs {
            queue_array_ptr: 0x5555_0000,
            num_queues: 4,
            pad: 0,
        }),
        DbgTrapOp::SetNodeAddressWatch(DbgTrapSetNodeAddressWatchArgs {
            address: 0x0dea_dbee_f000,
            mode: KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL,
            mask: 0xffff_f000,
            gpu_id: 7,
            id: 0,
        }),
        DbgTrapOp::ClearNodeAddressWatch(DbgTrapClearNodeAddressWatchArgs { gpu_id: 7, id: 2 }),
        DbgTrapOp::SetFlags(DbgTrapSetFlagsArgs { flags: KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP, pad: 0 }),
        DbgTrapOp::QueryDebugEvent(DbgTrapQueryDebugEventArgs {
            exception_mask: !0,
            gpu_id: 0,
            queue_id: 0,
        }),
        DbgTrapOp::QueryExceptionInfo(DbgTrapQueryExceptionInfoArgs {
            info_ptr: 0x1000,
            info_size: 32,
            source_id: 5,
            exception_code: EC_DEVICE_MEMORY_VIOLATION,
            clear_exception: 1,
        }),
        DbgTrapOp::GetQueueSnapshot(DbgTrapQueueSnapshotArgs {
            exception_mask: 0,
            snapshot_buf_ptr: 0x2000,
            num_queues: 8,
            entry_size: size_of::<QueueSnapshotEntry>() as u32,
        }),
        DbgTrapOp::GetDeviceSnapshot(DbgTrapDeviceSnapshotArgs {
            exception_mask: 0,
            snapshot_buf_ptr: 0x3000,
            num_devices: 2,
            entry_size: size_of::<DbgDeviceInfoEntry>() as u32,
        }),
    ]
}

#[test]
fn every_op_round_trips_through_its_bytes() {
    let ops = every_op();
    assert_eq!(ops.len(), 15, "one per KFD_IOC_DBG_TRAP_* op");
    for (code, op) in ops.into_iter().enumerate() {
        assert_eq!(op.code(), code as u32);
        assert_eq!(dbg_trap_op_name(op.code()), Some(op.name()));
        let args = DbgTrapArgs::new(4242, op);
        assert_eq!((args.pid, args.op), (4242, code as u32));
        assert_eq!(args.op_name(), Some(op.name()));

        let bytes = DbgTrapArgs::encode(4242, &op);
        assert_eq!(bytes[..4], 4242u32.to_ne_bytes());
        assert_eq!(bytes[4..8], (code as u32).to_ne_bytes());
        let decoded = DbgTrapArgs::decode(&bytes);
        assert_eq!(decoded.pid, 4242);
        assert_eq!(decoded.op_code, code as u32);
        assert_eq!(decoded.op, Some(op), "{}", op.name());
    }
}

#[test]
fn suspend_fields_sit_where_the_kernel_reads_them() {
    let op = DbgTrapOp::SuspendQueues(DbgTrapSuspendQueuesArgs {
        exception_mask: 0x11,
        queue_array_ptr: 0x22,
        num_queues: 0x33,
        grace_period: 0x44,
    });
    let bytes = DbgTrapArgs::encode(1, &op);
    let base = offset_of!(DbgTrapArgs, op_args);
    assert_eq!(base, 8);
    let at = |off: usize, len: usize| &bytes[base + off..base + off + len];
    assert_eq!(at(0, 8), 0x11u64.to_ne_bytes());
    assert_eq!(at(8, 8), 0x22u64.to_ne_bytes());
    assert_eq!(at(16, 4), 0x33u32.to_ne_bytes());
    assert_eq!(at(20, 4), 0x44u32.to_ne_bytes());
}

#[test]
fn unknown_ops_decode_to_none_but_keep_the_code() {
    let mut bytes = DbgTrapArgs::encode(7, &DbgTrapOp::Disable);
    bytes[4..8].copy_from_slice(&15u32.to_ne_bytes());
    let decoded = DbgTrapArgs::decode(&bytes);
    assert_eq!((decoded.pid, decoded.op_code, decoded.op), (7, 15, None));
    assert_eq!(dbg_trap_op_name(15), None);
}

#[test]
fn hardware_ops_are_the_ones_the_header_marks() {
    let hw: Vec<u32> = (0..15).filter(|&op| dbg_trap_op_is_hw_op(op)).collect();
    assert_eq!(
        hw,
        [
            KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE,
            KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE,
            KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
            KFD_IOC_DBG_TRAP_RESUME_QUEUES,
            KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH,
            KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH,
        ]
    );
}

#[test]
fn default_args_are_all_zero() {
    let bytes = DbgTrapArgs::encode(0, &DbgTrapOp::Enable(DbgTrapEnableArgs::default()));
    assert_eq!(bytes, [0u8; 32]);
    assert_eq!(DbgTrapArgs::decode(&bytes).op, Some(DbgTrapOp::Enable(Default::default())));
    let args = DbgTrapArgs::default();
    assert_eq!((args.pid, args.op), (0, KFD_IOC_DBG_TRAP_ENABLE));
}
