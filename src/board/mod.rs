//! This process's link to the board of each GPU it uses (the board itself, its layout and its
//! shared-memory protocol are the `xhsa-board` crate, `docs/board.md`).
//!
//! - [`link`]: one process's link to one GPU's board: its queues' slots, what it publishes, and
//!   the other processes' contention as the level-1 window sees it.
//!
//! What it is not: no scheduling decision (the window, [`crate::path::window`], and the
//! preemption policy, [`crate::preempt::policy`], read what the board says).

mod cross_process;
pub mod link;
