//! Blocking waits on a 32-bit word (Linux futex), the one way the emulator's threads wait.
//!
//! `wake` is async-signal-safe (a single syscall), so the doorbell trap handler may call it.
//! The word may live in memory shared between processes: the futex calls are not
//! process-private.

use rustix::thread::futex;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Blocks while `*word == expected`, until woken or `timeout` passes (None: no limit).
/// Returns early on spurious wake-ups; callers re-check their condition (every outcome of the
/// call, EAGAIN, ETIMEDOUT or EINTR included, means "re-check", so none is reported).
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| rustix::time::Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    let _ = futex::wait(word, futex::Flags::empty(), expected, ts.as_ref());
}

/// Wakes every thread blocked in [`wait`] on `word`.
/// Async-signal-safe (one system call, no allocation), so the doorbell trap handler calls it.
pub fn wake_all(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn wait_returns_on_wake() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            while w2.load(Ordering::Acquire) == 0 {
                wait(&w2, 0, Some(Duration::from_secs(10)));
            }
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        w.store(1, Ordering::Release);
        wake_all(&w);
        assert!(t.join().unwrap() < Duration::from_secs(5));
    }

    #[test]
    fn wait_times_out() {
        let w = AtomicU32::new(0);
        let start = Instant::now();
        wait(&w, 0, Some(Duration::from_millis(10)));
        assert!(start.elapsed() >= Duration::from_millis(9));
    }
}
