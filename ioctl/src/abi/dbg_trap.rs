//! `AMDKFD_IOC_DBG_TRAP` (1.13): `struct kfd_ioctl_dbg_trap_args` is `{ pid, op, union }`,
//! one union member per operation.
//!
//! Generic errors (from the header and `kfd_ioctl_set_debug_trap`): `ESRCH` no such target
//! process (or it has no KFD process); `EPERM` the target is neither the caller's own process
//! nor ptrace-attached by the caller (`DISABLE` exempt), or a hardware op (`DBG_HW_OP` below)
//! was requested before the target's runtime called `AMDKFD_IOC_RUNTIME_ENABLE` (the header
//! says `EACCES`; the 6.x kernels return `EPERM`); `EINVAL` any op but `ENABLE` on a target not
//! debug-enabled, or an unknown op; `ENODEV` a GPU that cannot debug.
//!
//! Reading a union member needs `unsafe`, and a union built from a small member leaves the rest
//! of its bytes uninitialised. This crate keeps all `unsafe` in the one `ioctl(2)` call, so it
//! offers a safe round trip instead: build a [`DbgTrapArgs`] from a typed [`DbgTrapOp`] with
//! [`DbgTrapArgs::new`] (always fully initialised), get its bytes with [`DbgTrapArgs::encode`],
//! and decode the raw bytes of one (say, what an emulated KFD copied from its caller) with
//! [`DbgTrapArgs::decode`].

use core::mem::{offset_of, size_of};

// `enum kfd_dbg_trap_operations`.
/// `KFD_IOC_DBG_TRAP_ENABLE`.
pub const KFD_IOC_DBG_TRAP_ENABLE: u32 = 0;
/// `KFD_IOC_DBG_TRAP_DISABLE`.
pub const KFD_IOC_DBG_TRAP_DISABLE: u32 = 1;
/// `KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT`.
pub const KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT: u32 = 2;
/// `KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED`.
pub const KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED: u32 = 3;
/// `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE: u32 = 4;
/// `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE: u32 = 5;
/// `KFD_IOC_DBG_TRAP_SUSPEND_QUEUES` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_SUSPEND_QUEUES: u32 = 6;
/// `KFD_IOC_DBG_TRAP_RESUME_QUEUES` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_RESUME_QUEUES: u32 = 7;
/// `KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH: u32 = 8;
/// `KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH` (DBG_HW_OP).
pub const KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH: u32 = 9;
/// `KFD_IOC_DBG_TRAP_SET_FLAGS`.
pub const KFD_IOC_DBG_TRAP_SET_FLAGS: u32 = 10;
/// `KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT`.
pub const KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT: u32 = 11;
/// `KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO`.
pub const KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO: u32 = 12;
/// `KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT`.
pub const KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT: u32 = 13;
/// `KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT`.
pub const KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT: u32 = 14;

/// The short name of a `KFD_IOC_DBG_TRAP_*` op (`"SUSPEND_QUEUES"`), if `op` is one.
pub const fn dbg_trap_op_name(op: u32) -> Option<&'static str> {
    Some(match op {
        KFD_IOC_DBG_TRAP_ENABLE => "ENABLE",
        KFD_IOC_DBG_TRAP_DISABLE => "DISABLE",
        KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT => "SEND_RUNTIME_EVENT",
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED => "SET_EXCEPTIONS_ENABLED",
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE => "SET_WAVE_LAUNCH_OVERRIDE",
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE => "SET_WAVE_LAUNCH_MODE",
        KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => "SUSPEND_QUEUES",
        KFD_IOC_DBG_TRAP_RESUME_QUEUES => "RESUME_QUEUES",
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH => "SET_NODE_ADDRESS_WATCH",
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH => "CLEAR_NODE_ADDRESS_WATCH",
        KFD_IOC_DBG_TRAP_SET_FLAGS => "SET_FLAGS",
        KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT => "QUERY_DEBUG_EVENT",
        KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => "QUERY_EXCEPTION_INFO",
        KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => "GET_QUEUE_SNAPSHOT",
        KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => "GET_DEVICE_SNAPSHOT",
        _ => return None,
    })
}

/// Whether `op` is a hardware op (`DBG_HW_OP` in the header): it needs the target's runtime to
/// have called `AMDKFD_IOC_RUNTIME_ENABLE`.
pub const fn dbg_trap_op_is_hw_op(op: u32) -> bool {
    matches!(
        op,
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE
            | KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE
            | KFD_IOC_DBG_TRAP_SUSPEND_QUEUES
            | KFD_IOC_DBG_TRAP_RESUME_QUEUES
            | KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH
            | KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH
    )
}

/// `struct kfd_ioctl_dbg_trap_enable_args` (`ENABLE`): start a debug session on the target.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapEnableArgs {
    /// In: exceptions to raise to the debugger.
    pub exception_mask: u64,
    /// In: user pointer to a [`super::debug::RuntimeInfo`] buffer KFD copies into.
    pub rinfo_ptr: u64,
    /// In/out: size of that buffer; out: the size KFD saved.
    pub rinfo_size: u32,
    /// In: an fd KFD notifies the debugger through when an enabled exception is raised.
    pub dbg_fd: u32,
}

/// `struct kfd_ioctl_dbg_trap_send_runtime_event_args` (`SEND_RUNTIME_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSendRuntimeEventArgs {
    /// Exceptions to raise to the runtime; `EC_PROCESS_RUNTIME` unblocks `RUNTIME_ENABLE`.
    pub exception_mask: u64,
    pub gpu_id: u32,
    pub queue_id: u32,
}

/// `struct kfd_ioctl_dbg_trap_set_exceptions_enabled_args` (`SET_EXCEPTIONS_ENABLED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSetExceptionsEnabledArgs {
    /// New exceptions to raise to the debugger.
    pub exception_mask: u64,
}

/// `struct kfd_ioctl_dbg_trap_set_wave_launch_override_args` (`SET_WAVE_LAUNCH_OVERRIDE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSetWaveLaunchOverrideArgs {
    /// `KFD_DBG_TRAP_OVERRIDE_*`.
    pub override_mode: u32,
    /// In: `KFD_DBG_TRAP_MASK_*` to enable; out: the previous enablement.
    pub enable_mask: u32,
    /// In: modes to check; out: the modes actually supported.
    pub support_request_mask: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_trap_set_wave_launch_mode_args` (`SET_WAVE_LAUNCH_MODE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSetWaveLaunchModeArgs {
    /// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_*`.
    pub launch_mode: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_trap_suspend_queues_args` (`SUSPEND_QUEUES`).
///
/// The ioctl returns the number of queues suspended. Each queue-id slot KFD could not suspend
/// gets `KFD_DBG_QUEUE_ERROR_MASK` or `KFD_DBG_QUEUE_INVALID_MASK` ORed in
/// (see [`super::debug::QueueStatus`]). Destroying a suspended queue blocks until it is resumed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSuspendQueuesArgs {
    /// Raised exceptions to clear.
    pub exception_mask: u64,
    /// User pointer to `num_queues` `u32` queue ids (in/out).
    pub queue_array_ptr: u64,
    pub num_queues: u32,
    /// Wave time allowed before preemption, in units of 1K GPU clock cycles (0: immediate).
    pub grace_period: u32,
}

/// `struct kfd_ioctl_dbg_trap_resume_queues_args` (`RESUME_QUEUES`); returns and marks like
/// suspend.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapResumeQueuesArgs {
    /// User pointer to `num_queues` `u32` queue ids (in/out).
    pub queue_array_ptr: u64,
    pub num_queues: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_trap_set_node_address_watch_args` (`SET_NODE_ADDRESS_WATCH`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSetNodeAddressWatchArgs {
    pub address: u64,
    /// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_*`.
    pub mode: u32,
    pub mask: u32,
    pub gpu_id: u32,
    /// Out: the watch id allocated.
    pub id: u32,
}

/// `struct kfd_ioctl_dbg_trap_clear_node_address_watch_args` (`CLEAR_NODE_ADDRESS_WATCH`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapClearNodeAddressWatchArgs {
    pub gpu_id: u32,
    pub id: u32,
}

/// `struct kfd_ioctl_dbg_trap_set_flags_args` (`SET_FLAGS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapSetFlagsArgs {
    /// In: `KFD_DBG_TRAP_FLAG_*` to enable; out: the flags previously enabled.
    pub flags: u32,
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_trap_query_debug_event_args` (`QUERY_DEBUG_EVENT`); `EAGAIN` when
/// nothing is raised.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapQueryDebugEventArgs {
    /// In: exceptions to clear; out: exceptions raised.
    pub exception_mask: u64,
    /// Out.
    pub gpu_id: u32,
    /// Out.
    pub queue_id: u32,
}

/// `struct kfd_ioctl_dbg_trap_query_exception_info_args` (`QUERY_EXCEPTION_INFO`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapQueryExceptionInfoArgs {
    /// User buffer the info is copied to.
    pub info_ptr: u64,
    /// In/out: buffer size; out: the size needed.
    pub info_size: u32,
    /// Target gpu or queue id.
    pub source_id: u32,
    pub exception_code: u32,
    /// 1 to clear the exception.
    pub clear_exception: u32,
}

/// `struct kfd_ioctl_dbg_trap_queue_snapshot_args` (`GET_QUEUE_SNAPSHOT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapQueueSnapshotArgs {
    pub exception_mask: u64,
    /// User array of [`super::debug::QueueSnapshotEntry`] strided by `entry_size`.
    pub snapshot_buf_ptr: u64,
    /// In: entries allocated; out: queues that exist.
    pub num_queues: u32,
    /// In: `size_of::<QueueSnapshotEntry>()`; out: bytes populated per entry.
    pub entry_size: u32,
}

/// `struct kfd_ioctl_dbg_trap_device_snapshot_args` (`GET_DEVICE_SNAPSHOT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DbgTrapDeviceSnapshotArgs {
    pub exception_mask: u64,
    /// User array of [`super::debug::DbgDeviceInfoEntry`] strided by `entry_size`.
    pub snapshot_buf_ptr: u64,
    /// In: entries allocated; out: devices that exist.
    pub num_devices: u32,
    /// In: `size_of::<DbgDeviceInfoEntry>()`; out: bytes populated per entry.
    pub entry_size: u32,
}

/// The anonymous union of `struct kfd_ioctl_dbg_trap_args`: 24 bytes, 8-aligned. `DISABLE`
/// has no member.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DbgTrapUnion {
    pub enable: DbgTrapEnableArgs,
    pub send_runtime_event: DbgTrapSendRuntimeEventArgs,
    pub set_exceptions_enabled: DbgTrapSetExceptionsEnabledArgs,
    pub launch_override: DbgTrapSetWaveLaunchOverrideArgs,
    pub launch_mode: DbgTrapSetWaveLaunchModeArgs,
    pub suspend_queues: DbgTrapSuspendQueuesArgs,
    pub resume_queues: DbgTrapResumeQueuesArgs,
    pub set_node_address_watch: DbgTrapSetNodeAddressWatchArgs,
    pub clear_node_address_watch: DbgTrapClearNodeAddressWatchArgs,
    pub set_flags: DbgTrapSetFlagsArgs,
    pub query_debug_event: DbgTrapQueryDebugEventArgs,
    pub query_exception_info: DbgTrapQueryExceptionInfoArgs,
    pub queue_snapshot: DbgTrapQueueSnapshotArgs,
    pub device_snapshot: DbgTrapDeviceSnapshotArgs,
}

impl Default for DbgTrapUnion {
    /// All zero: `enable` is one of the 24-byte members, so zeroing it covers every byte.
    fn default() -> Self {
        DbgTrapUnion { enable: DbgTrapEnableArgs::default() }
    }
}

impl core::fmt::Debug for DbgTrapUnion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DbgTrapUnion { .. }")
    }
}

/// `struct kfd_ioctl_dbg_trap_args` (`AMDKFD_IOC_DBG_TRAP`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DbgTrapArgs {
    /// The target process (the caller's own pid, or a ptrace child).
    pub pid: u32,
    /// `KFD_IOC_DBG_TRAP_*`.
    pub op: u32,
    /// The C struct's anonymous union; the member that `op` selects.
    pub op_args: DbgTrapUnion,
}

/// A `DBG_TRAP` operation with its typed arguments: the safe way to build and read
/// [`DbgTrapArgs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DbgTrapOp {
    Enable(DbgTrapEnableArgs),
    Disable,
    SendRuntimeEvent(DbgTrapSendRuntimeEventArgs),
    SetExceptionsEnabled(DbgTrapSetExceptionsEnabledArgs),
    SetWaveLaunchOverride(DbgTrapSetWaveLaunchOverrideArgs),
    SetWaveLaunchMode(DbgTrapSetWaveLaunchModeArgs),
    SuspendQueues(DbgTrapSuspendQueuesArgs),
    ResumeQueues(DbgTrapResumeQueuesArgs),
    SetNodeAddressWatch(DbgTrapSetNodeAddressWatchArgs),
    ClearNodeAddressWatch(DbgTrapClearNodeAddressWatchArgs),
    SetFlags(DbgTrapSetFlagsArgs),
    QueryDebugEvent(DbgTrapQueryDebugEventArgs),
    QueryExceptionInfo(DbgTrapQueryExceptionInfoArgs),
    GetQueueSnapshot(DbgTrapQueueSnapshotArgs),
    GetDeviceSnapshot(DbgTrapDeviceSnapshotArgs),
}

impl DbgTrapOp {
    /// The `KFD_IOC_DBG_TRAP_*` value.
    pub const fn code(&self) -> u32 {
        match self {
            DbgTrapOp::Enable(_) => KFD_IOC_DBG_TRAP_ENABLE,
            DbgTrapOp::Disable => KFD_IOC_DBG_TRAP_DISABLE,
            DbgTrapOp::SendRuntimeEvent(_) => KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT,
            DbgTrapOp::SetExceptionsEnabled(_) => KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED,
            DbgTrapOp::SetWaveLaunchOverride(_) => KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE,
            DbgTrapOp::SetWaveLaunchMode(_) => KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE,
            DbgTrapOp::SuspendQueues(_) => KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
            DbgTrapOp::ResumeQueues(_) => KFD_IOC_DBG_TRAP_RESUME_QUEUES,
            DbgTrapOp::SetNodeAddressWatch(_) => KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH,
            DbgTrapOp::ClearNodeAddressWatch(_) => KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH,
            DbgTrapOp::SetFlags(_) => KFD_IOC_DBG_TRAP_SET_FLAGS,
            DbgTrapOp::QueryDebugEvent(_) => KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT,
            DbgTrapOp::QueryExceptionInfo(_) => KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO,
            DbgTrapOp::GetQueueSnapshot(_) => KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT,
            DbgTrapOp::GetDeviceSnapshot(_) => KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT,
        }
    }

    /// The short op name, e.g. `"SUSPEND_QUEUES"`.
    pub const fn name(&self) -> &'static str {
        match dbg_trap_op_name(self.code()) {
            Some(name) => name,
            None => unreachable!(),
        }
    }

    /// Decodes the union bytes (`op_args`, native endian) for operation `op`; `None` for an
    /// unknown op.
    pub fn decode(op: u32, payload: &[u8; DBG_TRAP_UNION_SIZE]) -> Option<DbgTrapOp> {
        let r = Reader(payload);
        Some(match op {
            KFD_IOC_DBG_TRAP_ENABLE => {
                type T = DbgTrapEnableArgs;
                DbgTrapOp::Enable(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    rinfo_ptr: r.u64(offset_of!(T, rinfo_ptr)),
                    rinfo_size: r.u32(offset_of!(T, rinfo_size)),
                    dbg_fd: r.u32(offset_of!(T, dbg_fd)),
                })
            }
            KFD_IOC_DBG_TRAP_DISABLE => DbgTrapOp::Disable,
            KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT => {
                type T = DbgTrapSendRuntimeEventArgs;
                DbgTrapOp::SendRuntimeEvent(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    gpu_id: r.u32(offset_of!(T, gpu_id)),
                    queue_id: r.u32(offset_of!(T, queue_id)),
                })
            }
            KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED => {
                type T = DbgTrapSetExceptionsEnabledArgs;
                DbgTrapOp::SetExceptionsEnabled(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                })
            }
            KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE => {
                type T = DbgTrapSetWaveLaunchOverrideArgs;
                DbgTrapOp::SetWaveLaunchOverride(T {
                    override_mode: r.u32(offset_of!(T, override_mode)),
                    enable_mask: r.u32(offset_of!(T, enable_mask)),
                    support_request_mask: r.u32(offset_of!(T, support_request_mask)),
                    pad: r.u32(offset_of!(T, pad)),
                })
            }
            KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE => {
                type T = DbgTrapSetWaveLaunchModeArgs;
                DbgTrapOp::SetWaveLaunchMode(T {
                    launch_mode: r.u32(offset_of!(T, launch_mode)),
                    pad: r.u32(offset_of!(T, pad)),
                })
            }
            KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => {
                type T = DbgTrapSuspendQueuesArgs;
                DbgTrapOp::SuspendQueues(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    queue_array_ptr: r.u64(offset_of!(T, queue_array_ptr)),
                    num_queues: r.u32(offset_of!(T, num_queues)),
                    grace_period: r.u32(offset_of!(T, grace_period)),
                })
            }
            KFD_IOC_DBG_TRAP_RESUME_QUEUES => {
                type T = DbgTrapResumeQueuesArgs;
                DbgTrapOp::ResumeQueues(T {
                    queue_array_ptr: r.u64(offset_of!(T, queue_array_ptr)),
                    num_queues: r.u32(offset_of!(T, num_queues)),
                    pad: r.u32(offset_of!(T, pad)),
                })
            }
            KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH => {
                type T = DbgTrapSetNodeAddressWatchArgs;
                DbgTrapOp::SetNodeAddressWatch(T {
                    address: r.u64(offset_of!(T, address)),
                    mode: r.u32(offset_of!(T, mode)),
                    mask: r.u32(offset_of!(T, mask)),
                    gpu_id: r.u32(offset_of!(T, gpu_id)),
                    id: r.u32(offset_of!(T, id)),
                })
            }
            KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH => {
                type T = DbgTrapClearNodeAddressWatchArgs;
                DbgTrapOp::ClearNodeAddressWatch(T {
                    gpu_id: r.u32(offset_of!(T, gpu_id)),
                    id: r.u32(offset_of!(T, id)),
                })
            }
            KFD_IOC_DBG_TRAP_SET_FLAGS => {
                type T = DbgTrapSetFlagsArgs;
                DbgTrapOp::SetFlags(T {
                    flags: r.u32(offset_of!(T, flags)),
                    pad: r.u32(offset_of!(T, pad)),
                })
            }
            KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT => {
                type T = DbgTrapQueryDebugEventArgs;
                DbgTrapOp::QueryDebugEvent(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    gpu_id: r.u32(offset_of!(T, gpu_id)),
                    queue_id: r.u32(offset_of!(T, queue_id)),
                })
            }
            KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => {
                type T = DbgTrapQueryExceptionInfoArgs;
                DbgTrapOp::QueryExceptionInfo(T {
                    info_ptr: r.u64(offset_of!(T, info_ptr)),
                    info_size: r.u32(offset_of!(T, info_size)),
                    source_id: r.u32(offset_of!(T, source_id)),
                    exception_code: r.u32(offset_of!(T, exception_code)),
                    clear_exception: r.u32(offset_of!(T, clear_exception)),
                })
            }
            KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => {
                type T = DbgTrapQueueSnapshotArgs;
                DbgTrapOp::GetQueueSnapshot(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    snapshot_buf_ptr: r.u64(offset_of!(T, snapshot_buf_ptr)),
                    num_queues: r.u32(offset_of!(T, num_queues)),
                    entry_size: r.u32(offset_of!(T, entry_size)),
                })
            }
            KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => {
                type T = DbgTrapDeviceSnapshotArgs;
                DbgTrapOp::GetDeviceSnapshot(T {
                    exception_mask: r.u64(offset_of!(T, exception_mask)),
                    snapshot_buf_ptr: r.u64(offset_of!(T, snapshot_buf_ptr)),
                    num_devices: r.u32(offset_of!(T, num_devices)),
                    entry_size: r.u32(offset_of!(T, entry_size)),
                })
            }
            _ => return None,
        })
    }
}

/// The size of [`DbgTrapUnion`].
pub const DBG_TRAP_UNION_SIZE: usize = size_of::<DbgTrapUnion>();

/// A decoded `struct kfd_ioctl_dbg_trap_args`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodedDbgTrap {
    pub pid: u32,
    /// The raw op, kept even when it is unknown.
    pub op_code: u32,
    /// The typed op, `None` for an op this uapi does not define.
    pub op: Option<DbgTrapOp>,
}

impl DbgTrapArgs {
    /// The arguments for `op` on process `pid`, every byte initialised (unused union bytes 0).
    pub fn new(pid: u32, op: DbgTrapOp) -> DbgTrapArgs {
        let mut op_args = DbgTrapUnion::default();
        match op {
            DbgTrapOp::Enable(a) => op_args.enable = a,
            DbgTrapOp::Disable => {}
            DbgTrapOp::SendRuntimeEvent(a) => op_args.send_runtime_event = a,
            DbgTrapOp::SetExceptionsEnabled(a) => op_args.set_exceptions_enabled = a,
            DbgTrapOp::SetWaveLaunchOverride(a) => op_args.launch_override = a,
            DbgTrapOp::SetWaveLaunchMode(a) => op_args.launch_mode = a,
            DbgTrapOp::SuspendQueues(a) => op_args.suspend_queues = a,
            DbgTrapOp::ResumeQueues(a) => op_args.resume_queues = a,
            DbgTrapOp::SetNodeAddressWatch(a) => op_args.set_node_address_watch = a,
            DbgTrapOp::ClearNodeAddressWatch(a) => op_args.clear_node_address_watch = a,
            DbgTrapOp::SetFlags(a) => op_args.set_flags = a,
            DbgTrapOp::QueryDebugEvent(a) => op_args.query_debug_event = a,
            DbgTrapOp::QueryExceptionInfo(a) => op_args.query_exception_info = a,
            DbgTrapOp::GetQueueSnapshot(a) => op_args.queue_snapshot = a,
            DbgTrapOp::GetDeviceSnapshot(a) => op_args.device_snapshot = a,
        }
        DbgTrapArgs { pid, op: op.code(), op_args }
    }

    /// Decodes the raw bytes of a `struct kfd_ioctl_dbg_trap_args` (native endian), e.g. the
    /// argument an emulated KFD copied in from its caller.
    pub fn decode(bytes: &[u8; size_of::<DbgTrapArgs>()]) -> DecodedDbgTrap {
        let r = Reader(bytes);
        let pid = r.u32(offset_of!(DbgTrapArgs, pid));
        let op_code = r.u32(offset_of!(DbgTrapArgs, op));
        let start = offset_of!(DbgTrapArgs, op_args);
        let mut payload = [0u8; DBG_TRAP_UNION_SIZE];
        payload.copy_from_slice(&bytes[start..start + DBG_TRAP_UNION_SIZE]);
        DecodedDbgTrap { pid, op_code, op: DbgTrapOp::decode(op_code, &payload) }
    }

    /// The raw bytes (native endian) of `DbgTrapArgs::new(pid, op)`: what a caller hands the
    /// kernel, built without reading a union. The inverse of [`DbgTrapArgs::decode`].
    pub fn encode(pid: u32, op: &DbgTrapOp) -> [u8; size_of::<DbgTrapArgs>()] {
        let mut bytes = [0u8; size_of::<DbgTrapArgs>()];
        let mut w = Writer(&mut bytes);
        w.u32(offset_of!(DbgTrapArgs, pid), pid);
        w.u32(offset_of!(DbgTrapArgs, op), op.code());
        let base = offset_of!(DbgTrapArgs, op_args);
        match op {
            DbgTrapOp::Enable(a) => {
                type T = DbgTrapEnableArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u64(base + offset_of!(T, rinfo_ptr), a.rinfo_ptr);
                w.u32(base + offset_of!(T, rinfo_size), a.rinfo_size);
                w.u32(base + offset_of!(T, dbg_fd), a.dbg_fd);
            }
            DbgTrapOp::Disable => {}
            DbgTrapOp::SendRuntimeEvent(a) => {
                type T = DbgTrapSendRuntimeEventArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u32(base + offset_of!(T, gpu_id), a.gpu_id);
                w.u32(base + offset_of!(T, queue_id), a.queue_id);
            }
            DbgTrapOp::SetExceptionsEnabled(a) => {
                type T = DbgTrapSetExceptionsEnabledArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
            }
            DbgTrapOp::SetWaveLaunchOverride(a) => {
                type T = DbgTrapSetWaveLaunchOverrideArgs;
                w.u32(base + offset_of!(T, override_mode), a.override_mode);
                w.u32(base + offset_of!(T, enable_mask), a.enable_mask);
                w.u32(base + offset_of!(T, support_request_mask), a.support_request_mask);
                w.u32(base + offset_of!(T, pad), a.pad);
            }
            DbgTrapOp::SetWaveLaunchMode(a) => {
                type T = DbgTrapSetWaveLaunchModeArgs;
                w.u32(base + offset_of!(T, launch_mode), a.launch_mode);
                w.u32(base + offset_of!(T, pad), a.pad);
            }
            DbgTrapOp::SuspendQueues(a) => {
                type T = DbgTrapSuspendQueuesArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u64(base + offset_of!(T, queue_array_ptr), a.queue_array_ptr);
                w.u32(base + offset_of!(T, num_queues), a.num_queues);
                w.u32(base + offset_of!(T, grace_period), a.grace_period);
            }
            DbgTrapOp::ResumeQueues(a) => {
                type T = DbgTrapResumeQueuesArgs;
                w.u64(base + offset_of!(T, queue_array_ptr), a.queue_array_ptr);
                w.u32(base + offset_of!(T, num_queues), a.num_queues);
                w.u32(base + offset_of!(T, pad), a.pad);
            }
            DbgTrapOp::SetNodeAddressWatch(a) => {
                type T = DbgTrapSetNodeAddressWatchArgs;
                w.u64(base + offset_of!(T, address), a.address);
                w.u32(base + offset_of!(T, mode), a.mode);
                w.u32(base + offset_of!(T, mask), a.mask);
                w.u32(base + offset_of!(T, gpu_id), a.gpu_id);
                w.u32(base + offset_of!(T, id), a.id);
            }
            DbgTrapOp::ClearNodeAddressWatch(a) => {
                type T = DbgTrapClearNodeAddressWatchArgs;
                w.u32(base + offset_of!(T, gpu_id), a.gpu_id);
                w.u32(base + offset_of!(T, id), a.id);
            }
            DbgTrapOp::SetFlags(a) => {
                type T = DbgTrapSetFlagsArgs;
                w.u32(base + offset_of!(T, flags), a.flags);
                w.u32(base + offset_of!(T, pad), a.pad);
            }
            DbgTrapOp::QueryDebugEvent(a) => {
                type T = DbgTrapQueryDebugEventArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u32(base + offset_of!(T, gpu_id), a.gpu_id);
                w.u32(base + offset_of!(T, queue_id), a.queue_id);
            }
            DbgTrapOp::QueryExceptionInfo(a) => {
                type T = DbgTrapQueryExceptionInfoArgs;
                w.u64(base + offset_of!(T, info_ptr), a.info_ptr);
                w.u32(base + offset_of!(T, info_size), a.info_size);
                w.u32(base + offset_of!(T, source_id), a.source_id);
                w.u32(base + offset_of!(T, exception_code), a.exception_code);
                w.u32(base + offset_of!(T, clear_exception), a.clear_exception);
            }
            DbgTrapOp::GetQueueSnapshot(a) => {
                type T = DbgTrapQueueSnapshotArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u64(base + offset_of!(T, snapshot_buf_ptr), a.snapshot_buf_ptr);
                w.u32(base + offset_of!(T, num_queues), a.num_queues);
                w.u32(base + offset_of!(T, entry_size), a.entry_size);
            }
            DbgTrapOp::GetDeviceSnapshot(a) => {
                type T = DbgTrapDeviceSnapshotArgs;
                w.u64(base + offset_of!(T, exception_mask), a.exception_mask);
                w.u64(base + offset_of!(T, snapshot_buf_ptr), a.snapshot_buf_ptr);
                w.u32(base + offset_of!(T, num_devices), a.num_devices);
                w.u32(base + offset_of!(T, entry_size), a.entry_size);
            }
        }
        bytes
    }

    /// The short name of `self.op`, if known.
    pub const fn op_name(&self) -> Option<&'static str> {
        dbg_trap_op_name(self.op)
    }
}

/// Reads native-endian integers at byte offsets of a fixed buffer.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u32(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        u32::from_ne_bytes(b)
    }

    fn u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_ne_bytes(b)
    }
}

/// Writes native-endian integers at byte offsets of a fixed buffer.
struct Writer<'a>(&'a mut [u8]);

impl Writer<'_> {
    fn u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn u64(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
}
