//! The board: the per-GPU shared-memory table through which every libxhsa process on a GPU
//! sees the others' queues, priorities and work (`docs/board.md`).
//!
//! - [`layout`]: the file's layout (header, slots) and the pure functions over plain copies of
//!   it (claim, publish, summaries, contention).
//! - [`stats`]: the per-queue counters a slot embeds ([`stats::QueueStats`]), as `xhsa-top`
//!   reads them.
//! - [`shm`]: the mapped file seen as 32-bit atomics, and futexes on them: the one `unsafe`
//!   cast of the mapping.
//! - [`shared`]: the concurrency protocol over those words (creation, seqlocked slots, clearing
//!   dead owners), in safe code.
//! - [`link`]: one process's link to one GPU's board: its queues' slots, what it publishes, and
//!   the other processes' contention as the level-1 window sees it.
//!
//! What it is not: no scheduling decision (the window, [`crate::path::window`], and the
//! preemption policy, [`crate::preempt::policy`], read what the board says) and no daemon:
//! whichever process comes first creates the file.

pub mod layout;
pub mod link;
pub mod shared;
pub mod shm;
pub mod stats;
