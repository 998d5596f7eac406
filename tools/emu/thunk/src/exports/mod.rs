//! The exported `hsaKmt*` functions, one file per area. Each checks its pointers, runs inside
//! [`crate::guard`] and maps emulated-KFD errors to `HSAKMT_STATUS` values.

mod events;
mod memory;
mod queues;
mod system;
mod unsupported;

use std::sync::Arc;

use hsa_sys::hsakmt::*;

use crate::state::{self, Emu};

/// The open emulator, or `HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED` as the real thunk
/// returns before `hsaKmtOpenKFD`.
pub(crate) fn emu() -> Result<Arc<Emu>, HSAKMT_STATUS> {
    state::emu().ok_or(HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED)
}

/// Collapses a `Result` whose error is already a status.
pub(crate) fn status(r: Result<(), HSAKMT_STATUS>) -> HSAKMT_STATUS {
    r.err().unwrap_or(HSAKMT_STATUS_SUCCESS)
}

/// Maps an errno of the emulated KFD to the status the real thunk reports for it.
pub(crate) fn errno_status(e: i32) -> HSAKMT_STATUS {
    match e {
        libc::ENOMEM => HSAKMT_STATUS_NO_MEMORY,
        libc::ENOSPC => HSAKMT_STATUS_OUT_OF_RESOURCES,
        libc::EINVAL | libc::EFAULT => HSAKMT_STATUS_INVALID_PARAMETER,
        libc::EPERM | libc::EACCES => HSAKMT_STATUS_NOT_SUPPORTED,
        _ => HSAKMT_STATUS_ERROR,
    }
}
