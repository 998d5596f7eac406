//! Clocks shared between processes.
//!
//! [`monotonic_ns`] reads `CLOCK_MONOTONIC`, the one clock every process of a machine (and every
//! container on it: the clock is not namespaced unless a time namespace is set up) agrees on.
//! The board's time fields (the wake time, the recent preemptions) are in it.
#![forbid(unsafe_code)]

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in every process of the machine.
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}
