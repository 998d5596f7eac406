//! libxhsa's clock: `CLOCK_MONOTONIC` in nanoseconds (`xhsa_model::clock::monotonic_ns`), the
//! clock every process of the machine and every container on it agrees on. Every time the
//! scheduler, the window, the preemption policy, the board and the trace compare or record is on
//! it, so no time is ever converted from one epoch to another.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;

/// Nanoseconds on libxhsa's clock (`CLOCK_MONOTONIC`).
pub(crate) fn now_ns() -> Nanos {
    xhsa_model::clock::monotonic_ns()
}
