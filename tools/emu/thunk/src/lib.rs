//! `libhsakmt.so.1` of xhsa-emu: the `hsaKmt*` functions ROCr calls, implemented over the
//! emulated KFD (`xhsa_emu::kfd`), speaking its uapi structs as the real thunk speaks ioctls.
//!
//! What it is: the emulator's ABI layer. Every exported function is `unsafe` at the edge (raw
//! pointers from C), checks its pointers, catches panics and returns an `HSAKMT_STATUS`; the
//! logic lives in safe code in `xhsa_emu`. It also interposes libc's `open`/`close`/`ioctl` for
//! `/dev/kfd` when preloaded, so code that opens the KFD device reaches the same emulated KFD.
//!
//! What it is not: a KFD client. It never touches a real `/dev/kfd`.
#![allow(non_snake_case)]

mod bo;
mod devices;
mod drm;
mod exports;
mod fds;
mod interpose;
mod rocr_ipc;
mod state;

use hsa_sys::hsakmt::{HSAKMT_STATUS, HSAKMT_STATUS_ERROR};

/// Binds exported functions to the `HSAKMT_1` version node (`NAME@@HSAKMT_1`), as ROCr's
/// imports require. The directive must sit in the same object as the definition, so each
/// exports file lists its own functions.
macro_rules! symver {
    ($($name:ident),* $(,)?) => {
        std::arch::global_asm!($(concat!(".symver ", stringify!($name), ", ", stringify!($name), "@@HSAKMT_1")),*);
    };
}
pub(crate) use symver;

/// Runs an export's body, turning a panic into `HSAKMT_STATUS_ERROR` (a panic must never
/// unwind into C).
pub(crate) fn guard(name: &str, f: impl FnOnce() -> HSAKMT_STATUS) -> HSAKMT_STATUS {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(s) => s,
        Err(_) => {
            tracing::error!("xhsa-emu: internal error in {name}");
            HSAKMT_STATUS_ERROR
        }
    }
}
