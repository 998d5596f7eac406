//! Raw FFI bindings to the system's ROCr (HSA runtime) and ROCt (KFD thunk, `hsakmt`) headers.
//!
//! What it is: bindgen output, generated at build time from the headers found on this machine
//! (`$HSA_INCLUDE_DIR` / `$HSAKMT_INCLUDE_DIR`, then `$ROCM_PATH/include`, then `/usr/include`
//! from Debian's `libhsa-runtime-dev` and `libhsakmt-dev`, then `/opt/rocm/include`; see
//! `build.rs`). Two modules, kept apart because names clash between them:
//! - [`hsa`]: `hsa.h`, `hsa_ext_amd.h`, `hsa_api_trace.h` (the `HsaApiTable` family that
//!   `HSA_TOOLS_LIB` tools receive in `OnLoad`), `amd_hsa_queue.h`, `amd_hsa_signal.h`,
//!   `amd_hsa_kernel_code.h`, `hsa_ven_amd_loader.h`;
//! - [`hsakmt`]: `hsakmt.h` and `hsakmttypes.h`, the interface an emulated thunk must export.
//!
//! Enums are plain integer type aliases with unprefixed constants
//! (`hsa::HSA_PACKET_TYPE_KERNEL_DISPATCH: hsa::hsa_packet_type_t`), so a value the headers do not
//! know is never undefined behaviour. Functions are `extern "C"` declarations only. Two
//! departures from the raw headers:
//! - `hsa_amd_queue_intercept_create`, `hsa_amd_queue_intercept_register` and
//!   `hsa_amd_runtime_queue_create_register` are not declared: ROCr 5.x gives them C++ linkage
//!   and does not export them; they are reached through `AmdExtTable`'s `*_fn` entries.
//! - The bitfield structs inside `hsakmttypes.h`'s `#pragma pack(4)` region get their alignment
//!   from a `[u32; 0]` marker instead of `#[repr(align(4))]` (same layout; rustc rejects the
//!   latter inside `packed(4)`).
//!
//! What it is not: no safe wrappers, no hand-written types, and no linking by default. An unused
//! declaration creates no link dependency; libxhsa resolves the real ROCr functions at run time
//! and the emulated thunk must not link ROCr. The `link` feature links `libhsa-runtime64` for test
//! programs that call ROCr directly.
#![no_std]

/// ROCr: HSA core, AMD extensions, AMD queue/signal ABI, loader extension and API tables.
// Generated code: bindgen writes its bitfield accessors' `unsafe` blocks without SAFETY
// comments, so that workspace lint is allowed here and only here.
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod hsa {
    include!(concat!(env!("OUT_DIR"), "/hsa.rs"));
}

/// The KFD thunk interface (`hsaKmt*` functions and their types).
// Generated code: bindgen writes its bitfield accessors' `unsafe` blocks without SAFETY
// comments, so that workspace lint is allowed here and only here.
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod hsakmt {
    include!(concat!(env!("OUT_DIR"), "/hsakmt.rs"));
}

/// Directory the ROCr headers were read from at build time.
pub const HSA_INCLUDE_DIR: &str = env!("HSA_SYS_HSA_INCLUDE_DIR");
/// Directory `hsakmt.h` was read from at build time.
pub const HSAKMT_INCLUDE_DIR: &str = env!("HSA_SYS_HSAKMT_INCLUDE_DIR");
/// Release of the ROCr headers (ROCm's `.info/version`, or the Debian package version such as
/// `5.2.3-3`), or `"unknown"`. Struct sizes such as `CoreApiTable`'s vary by release.
pub const ROCR_RELEASE: &str = env!("HSA_SYS_ROCR_RELEASE");
/// Release of the thunk headers, as for [`ROCR_RELEASE`].
pub const HSAKMT_RELEASE: &str = env!("HSA_SYS_HSAKMT_RELEASE");
