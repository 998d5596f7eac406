//! Debugger exception codes (`enum kfd_dbg_trap_exception_code`, 1.13) and their masks.
//!
//! An exception *code* `ec` is reported in a 64-bit exception *mask* as bit `ec - 1`
//! ([`kfd_ec_mask`]); the debugger, the runtime and KFD exchange such masks in
//! `exception_mask` fields.

/// `EC_NONE`.
pub const EC_NONE: u32 = 0;
// Per queue.
/// `EC_QUEUE_WAVE_ABORT`.
pub const EC_QUEUE_WAVE_ABORT: u32 = 1;
/// `EC_QUEUE_WAVE_TRAP`.
pub const EC_QUEUE_WAVE_TRAP: u32 = 2;
/// `EC_QUEUE_WAVE_MATH_ERROR`.
pub const EC_QUEUE_WAVE_MATH_ERROR: u32 = 3;
/// `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION`.
pub const EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION: u32 = 4;
/// `EC_QUEUE_WAVE_MEMORY_VIOLATION`.
pub const EC_QUEUE_WAVE_MEMORY_VIOLATION: u32 = 5;
/// `EC_QUEUE_WAVE_APERTURE_VIOLATION`.
pub const EC_QUEUE_WAVE_APERTURE_VIOLATION: u32 = 6;
/// `EC_QUEUE_PACKET_DISPATCH_DIM_INVALID`.
pub const EC_QUEUE_PACKET_DISPATCH_DIM_INVALID: u32 = 16;
/// `EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID`.
pub const EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID: u32 = 17;
/// `EC_QUEUE_PACKET_DISPATCH_CODE_INVALID`.
pub const EC_QUEUE_PACKET_DISPATCH_CODE_INVALID: u32 = 18;
/// `EC_QUEUE_PACKET_RESERVED`.
pub const EC_QUEUE_PACKET_RESERVED: u32 = 19;
/// `EC_QUEUE_PACKET_UNSUPPORTED`.
pub const EC_QUEUE_PACKET_UNSUPPORTED: u32 = 20;
/// `EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID`.
pub const EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID: u32 = 21;
/// `EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID`.
pub const EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID: u32 = 22;
/// `EC_QUEUE_PACKET_VENDOR_UNSUPPORTED`.
pub const EC_QUEUE_PACKET_VENDOR_UNSUPPORTED: u32 = 23;
/// `EC_QUEUE_PREEMPTION_ERROR`.
pub const EC_QUEUE_PREEMPTION_ERROR: u32 = 30;
/// `EC_QUEUE_NEW`.
pub const EC_QUEUE_NEW: u32 = 31;
// Per device.
/// `EC_DEVICE_QUEUE_DELETE`.
pub const EC_DEVICE_QUEUE_DELETE: u32 = 32;
/// `EC_DEVICE_MEMORY_VIOLATION`.
pub const EC_DEVICE_MEMORY_VIOLATION: u32 = 33;
/// `EC_DEVICE_RAS_ERROR`.
pub const EC_DEVICE_RAS_ERROR: u32 = 34;
/// `EC_DEVICE_FATAL_HALT`.
pub const EC_DEVICE_FATAL_HALT: u32 = 35;
/// `EC_DEVICE_NEW`.
pub const EC_DEVICE_NEW: u32 = 36;
// Per process.
/// `EC_PROCESS_RUNTIME`: the debugger sends it to unblock a pending `RUNTIME_ENABLE`.
pub const EC_PROCESS_RUNTIME: u32 = 48;
/// `EC_PROCESS_DEVICE_REMOVE`.
pub const EC_PROCESS_DEVICE_REMOVE: u32 = 49;
/// `EC_MAX`: one past the last code.
pub const EC_MAX: u32 = 50;

/// `KFD_EC_MASK(ecode)`: the mask bit of exception code `ecode` (`1 << (ecode - 1)`).
/// `ecode` must be in `1..=64`.
pub const fn kfd_ec_mask(ecode: u32) -> u64 {
    1u64 << (ecode - 1)
}

/// `KFD_EC_MASK_QUEUE`: every per-queue exception.
pub const KFD_EC_MASK_QUEUE: u64 = kfd_ec_mask(EC_QUEUE_WAVE_ABORT)
    | kfd_ec_mask(EC_QUEUE_WAVE_TRAP)
    | kfd_ec_mask(EC_QUEUE_WAVE_MATH_ERROR)
    | kfd_ec_mask(EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION)
    | kfd_ec_mask(EC_QUEUE_WAVE_MEMORY_VIOLATION)
    | kfd_ec_mask(EC_QUEUE_WAVE_APERTURE_VIOLATION)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_DIM_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_CODE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_RESERVED)
    | kfd_ec_mask(EC_QUEUE_PACKET_UNSUPPORTED)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED)
    | kfd_ec_mask(EC_QUEUE_PREEMPTION_ERROR)
    | kfd_ec_mask(EC_QUEUE_NEW);

/// `KFD_EC_MASK_DEVICE`: every per-device exception.
pub const KFD_EC_MASK_DEVICE: u64 = kfd_ec_mask(EC_DEVICE_QUEUE_DELETE)
    | kfd_ec_mask(EC_DEVICE_RAS_ERROR)
    | kfd_ec_mask(EC_DEVICE_FATAL_HALT)
    | kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION)
    | kfd_ec_mask(EC_DEVICE_NEW);

/// `KFD_EC_MASK_PROCESS`: every per-process exception.
pub const KFD_EC_MASK_PROCESS: u64 =
    kfd_ec_mask(EC_PROCESS_RUNTIME) | kfd_ec_mask(EC_PROCESS_DEVICE_REMOVE);

/// `KFD_EC_MASK_PACKET`: the AQL packet exceptions (a subset of the queue ones).
pub const KFD_EC_MASK_PACKET: u64 = kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_DIM_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_CODE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_RESERVED)
    | kfd_ec_mask(EC_QUEUE_PACKET_UNSUPPORTED)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID)
    | kfd_ec_mask(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED);

/// `KFD_DBG_EC_IS_VALID(ecode)`.
pub const fn kfd_dbg_ec_is_valid(ecode: u32) -> bool {
    ecode > EC_NONE && ecode < EC_MAX
}

/// `KFD_DBG_EC_TYPE_IS_QUEUE(ecode)`.
pub const fn kfd_dbg_ec_type_is_queue(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_QUEUE != 0
}

/// `KFD_DBG_EC_TYPE_IS_DEVICE(ecode)`.
pub const fn kfd_dbg_ec_type_is_device(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_DEVICE != 0
}

/// `KFD_DBG_EC_TYPE_IS_PROCESS(ecode)`.
pub const fn kfd_dbg_ec_type_is_process(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_PROCESS != 0
}

/// `KFD_DBG_EC_TYPE_IS_PACKET(ecode)`.
pub const fn kfd_dbg_ec_type_is_packet(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_PACKET != 0
}
