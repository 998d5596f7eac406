//! Levels 2-3: taking this process's lower-priority hardware queues off the GPU while
//! higher-priority work waits (in this process or any other on the GPU), and putting them back.
//!
//! The data path is unchanged: the application's doorbell publishes on the board
//! ([`xhsa_board::shared`]) and wakes the watchers; each process's watcher thread
//! ([`watcher`]) reads the board, asks the [`policy`] (pure, tested without a runtime) and
//! takes its own queues off or puts them back through KFD with the [`mechanism`] the settings
//! ([`settings`], `XHSA_PREEMPT`) and the measured costs choose, within the device-wide
//! preemption [`budget`].
#![forbid(unsafe_code)]

pub mod budget;
pub mod duty;
pub mod mechanism;
pub mod pauses;
pub mod policy;
pub mod settings;
pub mod sharing;
pub mod sizing;
pub mod watcher;

pub use mechanism::{How, KfdFailure, KfdPort, SnapshotQueue, Target};
pub use settings::{PreemptMode, PreemptSettings};
pub use watcher::{Preemption, Watch};
