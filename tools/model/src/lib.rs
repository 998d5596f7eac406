//! xhsa-model: the vocabulary every part of xhsa shares — libxhsa, the board, and the monitor.
//!
//! - [`ids`]: queue and partition names.
//! - [`priority`]: the operator's level and the application's stream priority, one order.
//! - [`window_size`]: `W` of the level-1 window.
//! - [`contention`]: what a process knows of other processes' work on a GPU.
//! - [`partition`]: a reserved share of a GPU's CUs (`XHSA_RESERVE`), its masks and ids.
//! - [`sharing`]: how lower priorities share the GPU with higher work (`XHSA_POLICY`).
//! - [`stats`]: the per-queue counters a board slot carries, in their fixed layout.
//! - [`clock`]: the clock shared between processes.
//! - [`settings`]: the environment variables and the config file, parsed and checked.
//!
//! What it is not: no scheduling, no shared memory, no FFI, no `unsafe`. It depends on nothing
//! of xhsa, so everything else may depend on it.
#![forbid(unsafe_code)]

pub mod clock;
pub mod contention;
pub mod ids;
pub mod partition;
pub mod priority;
pub mod settings;
pub mod sharing;
pub mod stats;
pub mod window_size;
