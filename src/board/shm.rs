//! A shared-memory file seen as an array of 32-bit atomics: the one place where libxhsa turns
//! mapped bytes into Rust references. Everything above it ([`crate::board::shared`]) is safe code
//! over `&[AtomicU32]`.
//!
//! It also holds the futex calls on such words ([`futex_wait`], [`futex_wake`]): shared
//! (not process-private) futexes, so a thread of one process can block on a word of the
//! mapping until a thread of another process changes it and wakes it.
//!
//! What it is not: a layout. The board's layout lives in [`crate::board::layout`]; this module only
//! knows that the mapping is page-aligned and a whole number of words.

use memmap2::MmapMut;
use std::fs::File;
use std::io;
use std::sync::atomic::AtomicU32;

/// A file mapped shared and writable, viewed as words.
pub struct SharedWords {
    map: MmapMut,
}

impl SharedWords {
    /// Maps all of `file` (its current length, a multiple of 4) shared.
    pub fn map(file: &File) -> io::Result<SharedWords> {
        let len = file.metadata()?.len();
        if len == 0 || len % 4 != 0 || len > usize::MAX as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a shared-memory file of {len} bytes is not a whole number of words")));
        }
        // SAFETY: the mapping is MAP_SHARED over a regular file other processes may write at any
        // time; we never hand out `&[u8]`/`&mut [u8]` to it, only atomics (see `words`), for
        // which concurrent modification is defined. If another process truncates the file,
        // accesses fault — the same as for any shared mapping; the board files are created with
        // owner-only (or group) permissions and never truncated by libxhsa.
        let map = unsafe { MmapMut::map_mut(file)? };
        Ok(SharedWords { map })
    }

    /// The mapping as 32-bit atomics.
    pub fn words(&self) -> &[AtomicU32] {
        let ptr = self.map.as_ptr();
        let len = self.map.len() / 4;
        // SAFETY: `ptr` is page-aligned (mmap), so 4-aligned; `len * 4` bytes lie inside the
        // mapping, which lives as long as `self`. `AtomicU32` has the size and alignment of
        // `u32` and interior mutability, so shared references to it over memory others mutate
        // concurrently (this process's threads and other processes) are sound as long as all
        // access goes through atomic operations, which is all `&[AtomicU32]` allows.
        unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU32>(), len) }
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is mapped (never, for a successful [`map`](Self::map)).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Blocks while `word` holds `expected`, until [`futex_wake`] on it, `timeout` (relative), or a
/// signal; returns at once if the value already differs. Never spins.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<std::time::Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT reads the aligned 32-bit word `word` points to (alive for the call:
    // it is borrowed) and the timespec `ts_ptr` points to (or null: no timeout); it writes
    // nothing. A shared (non-PRIVATE) futex keys on the mapping, so other processes mapping the
    // same file wake it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, ts_ptr, std::ptr::null::<u32>(), 0u32);
    }
}

/// Wakes every thread blocked in [`futex_wait`] on `word`, in any process. Never blocks.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; nothing is read or written through it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, std::ptr::null::<libc::timespec>(), std::ptr::null::<u32>(), 0u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_of_one_file_see_each_other() {
        let path = std::env::temp_dir().join(format!("xhsa-shm-test-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        f.write_all(&[0u8; 4096]).unwrap();
        let a = SharedWords::map(&f).unwrap();
        let b = SharedWords::map(&std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap()).unwrap();
        assert_eq!(a.words().len(), 1024);
        a.words()[7].store(0xdead_beef, Ordering::Release);
        assert_eq!(b.words()[7].load(Ordering::Acquire), 0xdead_beef);
        std::fs::remove_file(&path).unwrap();
    }

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

    #[test]
    fn odd_sizes_are_refused() {
        let path = std::env::temp_dir().join(format!("xhsa-shm-odd-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        f.write_all(&[0u8; 6]).unwrap();
        assert!(SharedWords::map(&f).is_err());
        let empty = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        assert!(SharedWords::map(&empty).is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
