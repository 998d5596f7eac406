//! The names every layer shares for queues and CU partitions.
//!
//! A [`QueueId`] is libxhsa's own name for a shadow queue (process-local, never reused within a
//! process); a [`PartitionId`] names a CU partition of one GPU. Both appear on the board, so
//! the monitor reads them too.
#![forbid(unsafe_code)]

use std::fmt;

/// A shadow queue, as libxhsa names it (process-local, never reused within a process).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId(pub u64);

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "queue {}", self.0)
    }
}

/// A CU partition of a GPU.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionId(pub u32);
