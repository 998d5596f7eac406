//! The device model: compute units and the hardware scheduler that shares them.
//!
//! Pure, safe and clock-free: callers give it device time. The packet processor (`cp`) turns
//! AQL packets into [`KernelJob`]s and real time into device time.

pub mod contention;
pub mod cu;
pub mod hws;
pub mod progress;
pub mod scheduler;

pub use contention::{Capacity, Profile};
pub use cu::{CuMask, CuPool, WgNeed};
pub use hws::{Completion, Hws, KernelJob, QueueKey};
pub use scheduler::Scheduler;
