//! libxhsa — a preemptive priority scheduler for AMD Instinct GPUs at the HSA queue.
//!
//! What it is: a shared library loaded into an application (`LD_PRELOAD=libxhsa.so` or
//! `HSA_TOOLS_LIB=libxhsa.so`) that places itself between every HSA queue of the process and the
//! hardware queue behind it, holds AQL packets in priority-ordered rings and forwards them under
//! a bounded in-flight window, using KFD queue priorities and suspend for hardware preemption.
//!
//! What it is not: a HIP shim (it never touches HIP symbols), a daemon, or an emulator. It knows
//! nothing of `xhsa-emu`; the code here is the code that runs on a real MI308X under ROCm 6.x.
//!
//! Status: shadow queues with level-1 forwarding work in both loading modes ([`entry`]):
//! `hsa_queue_create` hands the application a shadow queue over a hardware queue libxhsa
//! owns; every queue function (and the doorbell stores) is interposed; a doorbell store takes
//! the published packets into the priority rings and runs a forwarding pass on the caller's
//! thread ([`path::scheduler`]); completions are tracked with libxhsa's own barrier packets while
//! they matter; destroy drains; an internal failure degrades that queue to passthrough after
//! forwarding what it holds. Processes on one GPU see each other through the board
//! ([`board::shared`], [`board::link`], `docs/board.md`); the passthrough whitelist works by queue
//! creator and by kernel code object; hardware queues get the KFD priority of the effective
//! priority ([`settings::priority::Priority::hardware`]). `[[library]]` priority rules use the
//! queue's creating library. Each GPU the process uses has its own scheduler, board and
//! preemption watcher, which takes lower-priority hardware queues off the GPU through KFD while
//! higher-priority work waits (levels 2-3, [`preempt`], `XHSA_PREEMPT`). Not yet: several
//! partitions (see `docs/ARCHITECTURE.md`).
//!
//! The modules follow the data path, from the application's doorbell to the hardware queue:
//!
//! - [`entry`]: the edge, where libxhsa's FFI lives: the exported entry points
//!   of both loading modes, the ROCr and KFD calls, the raw queue memory; and its safe
//!   bookkeeping: [`entry::seen`] (what the interception saw), [`entry::api_table`] (the
//!   version- and size-checked API-table plan) and [`entry::addr_map`] (lock-free lookup of
//!   shadow queues and doorbells).
//! - [`path`]: the safe core of the data path: [`path::packet`] (AQL packets as values),
//!   [`path::aql_ring`] (taking packets from a shadow ring, writing them into a hardware ring),
//!   [`path::shadow_queue`] (a shadow queue's states and tracking bookkeeping),
//!   [`path::partition`] (per-partition priority rings), [`path::window`] (the level-1 in-flight
//!   window), [`path::packet_time`] (measured time per packet) and [`path::scheduler`]
//!   (forwarding passes, completions, degradation, drain).
//! - [`board`]: the cross-process board per GPU: [`board::layout`] (layout and summaries),
//!   [`board::stats`] (the per-queue counters in each slot), [`board::shm`] (the atomic view of
//!   the mapping), [`board::shared`] (the shared-memory protocol) and [`board::link`] (a
//!   process's slots and contention).
//! - [`preempt`]: levels 2-3, taking lower-priority hardware queues off the GPU and putting
//!   them back.
//! - [`settings`]: [`settings::config`] (environment and config file), [`settings::priority`],
//!   [`settings::whitelist`] (passthrough library matching) and [`settings::fault`]
//!   (`XHSA_FAULT_INJECT`, a test knob).
//! - [`trace`]: `XHSA_TRACE`, a timeline of each queue (packets taken, held, forwarded,
//!   completed; priority changes; time off the GPU) and of the preemption's KFD calls, recorded
//!   in bounded buffers and written as Chrome trace-event JSON by a writer thread
//!   (`docs/trace.md`); off the data path's decisions, and absent when unset.
//!
//! `unsafe` lives in [`entry`]'s FFI modules and in [`board::shm`] (the cast of the mapped board
//! to atomics); every other module is `#![forbid(unsafe_code)]` and tested without a runtime.

pub mod board;
pub mod entry;
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
