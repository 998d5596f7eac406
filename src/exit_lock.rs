//! Taking a lock where waiting without bound is not allowed: the exit path (a thread the exit
//! interrupted may hold a lock for good) and the application's own threads (which never wait on
//! a lock a slower thread holds). A poisoned lock is taken as it is: what it guards is counters
//! and buffers, still worth reading after a panic elsewhere.
#![forbid(unsafe_code)]

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// `m`'s lock if it is free now.
pub fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// `m`'s lock, waiting at most `wait` for the thread that holds it (sleeping a millisecond at a
/// time, never spinning); `None` if it was not let go in time.
pub fn lock_within<T>(m: &Mutex<T>, wait: Duration) -> Option<MutexGuard<'_, T>> {
    let end = Instant::now() + wait;
    loop {
        if let Some(g) = try_lock(m) {
            return Some(g);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::sync::Arc;

    /// Got once a short holder lets go, given up on (not waited for longer) when the holder
    /// keeps it.
    #[test]
    fn the_exit_lock_waits_for_a_short_holder_and_gives_up_on_a_stuck_one() {
        let m = Arc::new(Mutex::new(0u32));
        let (held_tx, held_rx) = channel();
        let (go_tx, go_rx) = channel::<()>();
        let m2 = m.clone();
        let holder = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 1;
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(5));
            *g = 2;
        });
        held_rx.recv().unwrap();
        assert!(try_lock(&m).is_none(), "held: not free now");
        let start = Instant::now();
        assert!(lock_within(&m, Duration::from_millis(20)).is_none(), "still held: given up");
        assert!(start.elapsed() >= Duration::from_millis(20), "it waited the time given");
        go_tx.send(()).unwrap();
        let g = lock_within(&m, Duration::from_secs(10)).expect("let go within the wait");
        assert_eq!(*g, 2, "got after the holder's last write");
        drop(g);
        holder.join().unwrap();
    }
}
