//! Futexes on shared 32-bit words: a thread of one process blocks on a word of a shared mapping
//! until a thread of another process changes it and wakes it (shared, not process-private,
//! futexes: the kernel keys them on the mapped file and offset).
//!
//! What it is not: a lock. Callers build their own protocol (a wake counter, an ack word) and
//! use these two calls only to sleep and wake instead of spinning.

use rustix::thread::futex;
use std::sync::atomic::AtomicU32;

/// Blocks while `word` holds `expected`, until [`futex_wake`] on it, `timeout` (relative), or a
/// signal; returns at once if the value already differs. Never spins. A shared (not
/// process-private) futex: the kernel keys it on the mapping, so other processes mapping the
/// same file wake it. Every outcome (woken, value changed, timed out, interrupted) means
/// "look again", so none is reported.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<std::time::Duration>) {
    let ts = timeout.map(|t| rustix::time::Timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    let _ = futex::wait(word, futex::Flags::empty(), expected, ts.as_ref());
}

/// Wakes every thread blocked in [`futex_wait`] on `word`, in any process. Never blocks;
/// async-signal-safe (one system call).
pub fn futex_wake(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_waiter_blocks_until_woken_and_a_changed_word_returns_at_once() {
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        let word = Arc::new(AtomicU32::new(5));
        // Already changed: returns at once.
        let t = Instant::now();
        futex_wait(&word, 4, Some(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(1));
        // A timeout ends the wait.
        let t = Instant::now();
        futex_wait(&word, 5, Some(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(15));
        // A wake from another thread ends it.
        let w2 = word.clone();
        let waiter = std::thread::spawn(move || {
            let t = Instant::now();
            while w2.load(Ordering::Acquire) == 5 {
                futex_wait(&w2, 5, Some(Duration::from_secs(10)));
            }
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(30));
        word.store(6, Ordering::Release);
        futex_wake(&word);
        assert!(waiter.join().unwrap() < Duration::from_secs(5));
    }
}
