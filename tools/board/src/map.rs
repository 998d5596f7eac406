//! A shared-memory file seen as an array of 32-bit atomics: the one place where the board turns
//! mapped bytes into Rust references. Everything above it ([`crate::shared`]) is safe code
//! over `&[AtomicU32]`.
//!
//! What it is not: a layout. The board's layout lives in [`crate::layout`]; this module only
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
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a shared-memory file of {len} bytes is not a whole number of words"),
            ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_of_one_file_see_each_other() {
        let path = std::env::temp_dir().join(format!("xhsa-shm-test-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&[0u8; 4096]).unwrap();
        let a = SharedWords::map(&f).unwrap();
        let b = SharedWords::map(
            &std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap(),
        )
        .unwrap();
        assert_eq!(a.words().len(), 1024);
        a.words()[7].store(0xdead_beef, Ordering::Release);
        assert_eq!(b.words()[7].load(Ordering::Acquire), 0xdead_beef);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn odd_sizes_are_refused() {
        let path = std::env::temp_dir().join(format!("xhsa-shm-odd-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&[0u8; 6]).unwrap();
        assert!(SharedWords::map(&f).is_err());
        let empty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        assert!(SharedWords::map(&empty).is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
