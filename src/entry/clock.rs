//! libxhsa's clock: nanoseconds since the process first asked (an [`Instant`], which is
//! `CLOCK_MONOTONIC` on Linux). Every time the scheduler, the window and the preemption policy
//! compare comes from here; the board's times are `CLOCK_MONOTONIC` itself
//! (`xhsa_model::clock::monotonic_ns`), and the trace adds the offset between the two.
#![forbid(unsafe_code)]

use std::sync::LazyLock;
use std::time::Instant;

use crate::path::window::Nanos;

/// Nanoseconds on libxhsa's clock.
pub(crate) fn now_ns() -> Nanos {
    static START: LazyLock<Instant> = LazyLock::new(Instant::now);
    START.elapsed().as_nanos() as Nanos
}
