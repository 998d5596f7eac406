//! Contention: what one process knows of the other processes' work on a GPU, as the board
//! summarizes it and the level-1 window consumes it.
#![forbid(unsafe_code)]

use crate::priority::Priority;

/// What the policy needs to know about work outside this process: the highest priority with
/// packets pending or in flight in any *other* process on the GPU, as summarized from the board
/// ([`crate::board::layout::summarize`]). The process's own queues are known exactly and are
/// not taken from the board.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    /// Highest priority with work in other processes; `None` when they are idle.
    pub external_highest: Option<Priority>,
}

impl Contention {
    /// No other process has work.
    pub const NONE: Contention = Contention { external_highest: None };

    /// Other processes' highest priority with work.
    pub fn external(highest: Option<Priority>) -> Contention {
        Contention { external_highest: highest }
    }
}
