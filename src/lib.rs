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
//! thread ([`scheduler`]); completions are tracked with libxhsa's own barrier packets while
//! they matter; destroy drains; an internal failure degrades that queue to passthrough after
//! forwarding what it holds. Processes on one GPU see each other through the board
//! ([`board_shm`], [`board_link`], `docs/board.md`); the passthrough whitelist works by queue
//! creator and by kernel code object; hardware queues get the KFD priority of the effective
//! priority ([`priority::Priority::hardware`]). `[[library]]` priority rules use the queue's creating library. Not yet: several
//! partitions, and the hardware preemption levels 2-3 (see `docs/ARCHITECTURE.md`).
//!
//! The safe core, tested without a runtime: [`packet`] (AQL packets as values), [`priority`],
//! [`ring`] (per-partition priority rings), [`window`] (the level-1 in-flight window),
//! [`shadow`] (taking packets from a shadow ring, writing them into a hardware ring), [`queue`]
//! (a shadow queue's states and tracking bookkeeping), [`scheduler`] (forwarding passes,
//! completions, degradation, drain), [`addr_map`] (lock-free lookup of shadow queues and
//! doorbells), [`board`] (the cross-process board layout and summaries), [`board_shm`] (its
//! shared-memory protocol, over [`shm`]'s atomic view of the mapping), [`board_link`] (a
//! process's slots and contention), [`stats`],
//! [`settings`] (environment and config file), [`fault`] (`XHSA_FAULT_INJECT`, a test knob) and
//! [`whitelist`] (passthrough library matching).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod addr_map;
pub mod board;
pub mod board_link;
pub mod board_shm;
pub mod entry;
pub mod fault;
pub mod intercept;
pub mod packet;
pub mod packet_time;
pub mod preempt;
pub mod priority;
pub mod queue;
pub mod ring;
pub mod scheduler;
pub mod settings;
pub mod shm;
pub mod shadow;
pub mod stats;
pub mod table;
pub mod whitelist;
pub mod window;

/// The symbols `libxhsa.so` exports, and nothing else. `tests/exports.rs` checks the built
/// library against this list, so a symbol can neither leak nor be hidden by accident (the way a
/// linker version script broke the users' earlier HIP-level shim).
pub const EXPORTED_SYMBOLS: &[&str] = &[
    "OnLoad",
    "hsaKmtCreateQueue",
    "ioctl",
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
    "hsa_amd_profiling_set_profiler_enabled",
];
