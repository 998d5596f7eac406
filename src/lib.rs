//! libxhsa — a preemptive priority scheduler for AMD Instinct GPUs at the HSA queue.
//!
//! What it is: a shared library loaded into an application (`LD_PRELOAD=libxhsa.so` or
//! `HSA_TOOLS_LIB=libxhsa.so`) that places itself between every HSA queue of the process and the
//! hardware queue behind it, holds AQL packets in priority-ordered rings and forwards them under
//! a bounded in-flight window, using KFD queue priorities and suspend for hardware preemption.
//!
//! What it is not: a HIP shim (it never touches HIP symbols), a daemon, or an emulator. It knows
//! nothing of `xhsa-emu`; the code here is the code that runs on a real MI308X under ROCm 5.x-7.x.
//!
//! How it works: `hsa_queue_create` hands the application a shadow queue over a hardware queue
//! libxhsa owns; every queue function and doorbell store is interposed, in both loading modes.
//! A doorbell store takes the published packets into the priority rings and runs a forwarding
//! pass on the caller's thread; completions are tracked with libxhsa's own barrier packets while
//! they matter; destroy drains; an internal failure degrades that queue to passthrough after
//! forwarding what it holds. Processes on one GPU see each other through a board in shared
//! memory (`docs/board.md`); each GPU the process uses has its own scheduler, board link and
//! preemption watcher, which takes lower-priority hardware queues off the GPU through KFD while
//! higher-priority work waits. One partition per GPU: the whole GPU (`docs/ARCHITECTURE.md`).
//!
//! The modules follow the data path, from the application's doorbell to the hardware queue:
//!
//! - [`entry`]: the edge, where libxhsa's FFI lives: the exported entry points of both loading
//!   modes ([`entry::preload`], [`entry::tools_lib`]), what each queue call does
//!   ([`entry::queues`]), ROCr's private queue layout by version ([`entry::queue_layout`]), the
//!   ROCr and KFD calls, the raw queue memory; and its safe bookkeeping ([`entry::seen`],
//!   [`entry::api_table`], [`entry::addr_map`]).
//! - [`path`]: the safe core of the data path: [`path::packet`] (AQL packets as values),
//!   [`path::aql_ring`] (taking packets from a shadow ring, writing them into a hardware ring),
//!   [`path::shadow_queue`] (a shadow queue's states and tracking bookkeeping),
//!   [`path::partition`] (per-partition priority rings), [`path::window`] (the level-1 in-flight
//!   window), [`path::packet_time`] (measured time per packet) and [`path::scheduler`]
//!   (forwarding passes, completions, degradation, drain).
//! - [`board`]: this process's link to each GPU's board ([`board::link`]); the board itself
//!   (layout, protocol, snapshots) is the `xhsa-board` crate, shared with the monitor.
//! - [`preempt`]: levels 2-3, taking lower-priority hardware queues off the GPU and putting
//!   them back.
//! - [`settings`]: [`settings::fault`] (`XHSA_FAULT_INJECT`, a test knob); the settings a
//!   person writes (environment, config file, priorities, whitelist) are `xhsa_model::settings`.
//! - [`trace`]: `XHSA_TRACE`, a timeline of each queue (packets taken, held, forwarded,
//!   completed; priority changes; time off the GPU) and of the preemption's KFD calls, recorded
//!   in bounded buffers and written as Chrome trace-event JSON by a writer thread
//!   (`docs/trace.md`); off the data path's decisions, and absent when unset.
//!
//! `unsafe` lives in [`entry`]'s FFI modules (behind `unsafe fn` signatures with `# Safety`
//! contracts); every other module is `#![forbid(unsafe_code)]` and tested without a runtime.

pub mod board;
pub mod entry;
pub mod exit_lock;
pub mod path;
pub mod preempt;
pub mod settings;
pub mod trace;

/// The symbols `libxhsa.so` exports, and nothing else. `tests/exports.rs` checks the built
/// library against this list, so a symbol can neither leak nor be hidden by accident (the way a
/// linker version script broke the users' earlier HIP-level shim).
pub const EXPORTED_SYMBOLS: &[&str] = &[
    "OnLoad",
    "hsaKmtCreateQueue",
    "ioctl",
    "hsa_shut_down",
    "hsa_code_object_reader_create_from_memory",
    "hsa_queue_create",
    "hsa_queue_destroy",
    "hsa_queue_inactivate",
    "hsa_queue_load_read_index_scacquire",
    "hsa_queue_load_read_index_acquire",
    "hsa_queue_load_read_index_relaxed",
    "hsa_queue_load_write_index_scacquire",
    "hsa_queue_load_write_index_acquire",
    "hsa_queue_load_write_index_relaxed",
    "hsa_queue_store_write_index_relaxed",
    "hsa_queue_store_write_index_screlease",
    "hsa_queue_store_write_index_release",
    "hsa_queue_cas_write_index_scacq_screl",
    "hsa_queue_cas_write_index_acq_rel",
    "hsa_queue_cas_write_index_scacquire",
    "hsa_queue_cas_write_index_acquire",
    "hsa_queue_cas_write_index_relaxed",
    "hsa_queue_cas_write_index_screlease",
    "hsa_queue_cas_write_index_release",
    "hsa_queue_add_write_index_scacq_screl",
    "hsa_queue_add_write_index_acq_rel",
    "hsa_queue_add_write_index_scacquire",
    "hsa_queue_add_write_index_acquire",
    "hsa_queue_add_write_index_relaxed",
    "hsa_queue_add_write_index_screlease",
    "hsa_queue_add_write_index_release",
    "hsa_queue_store_read_index_relaxed",
    "hsa_queue_store_read_index_screlease",
    "hsa_queue_store_read_index_release",
    "hsa_signal_store_relaxed",
    "hsa_signal_store_screlease",
    "hsa_signal_store_release",
    "hsa_signal_silent_store_relaxed",
    "hsa_signal_silent_store_screlease",
    "hsa_amd_queue_set_priority",
    "hsa_amd_queue_cu_set_mask",
    "hsa_amd_queue_cu_get_mask",
    "hsa_amd_queue_get_info",
    "hsa_amd_profiling_set_profiler_enabled",
];
