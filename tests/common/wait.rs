//! Waiting in tests for something another process or thread brings about, without sleeping a
//! guessed time: the one polling helper of the project's tests (the root crate's through
//! `common`, the emulator's through `#[path]`). Where a condition can be waited on directly (a
//! channel, a condition variable, a child's exit) the tests do that instead.

use std::time::{Duration, Instant};

/// Asks `probe` until it gives a value or `limit` has passed (`None` then). Probes come quickly
/// at first (every 2 ms) and back off to every 100 ms, so a condition that holds soon is seen
/// soon and a slow one is not polled hard; the last probe is made at the limit.
pub fn wait_until<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        let now = Instant::now();
        if now >= end {
            return None;
        }
        std::thread::sleep(pause.min(end - now));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Whether `cond` holds within `limit` ([`wait_until`] for a condition without a value).
pub fn holds_within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    wait_until(limit, || cond().then_some(())).is_some()
}
