//! Blocking waits on a 32-bit word (Linux futex), the one way the emulator's threads wait.
//!
//! `wake` is async-signal-safe (a single syscall), so the doorbell trap handler may call it.
//! The word may live in memory shared between processes: the futex calls are not
//! process-private.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Blocks while `*word == expected`, until woken or `timeout` passes (None: no limit).
/// Returns early on spurious wake-ups; callers re-check their condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; FUTEX_WAIT only reads
    // it and the timespec, which outlives the call. Errors (EAGAIN: value changed, ETIMEDOUT,
    // EINTR) all mean "re-check", so the result is ignored.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, ts_ptr, 0usize, 0u32);
    }
}

/// Wakes every thread blocked in [`wait`] on `word`.
/// Async-signal-safe (one syscall), so the doorbell trap handler calls it.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE uses the address only as a key; `word` is a valid reference.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32);
    }
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
