//! Buffer objects a ROCm 6.x thunk allocates through `/dev/kfd` and maps through a render node
//! (or `/dev/kfd`) with the `mmap_offset` KFD returned.
//!
//! The thunk reserves the virtual range itself (PROT_NONE) and passes it as `va_addr`; the GPU
//! accesses the buffer at that address. The emulated device reads and writes host memory at the
//! same addresses, so at allocation the range is backed by a `memfd` of the buffer's size
//! (mapped over the reservation, read-write), and every later `mmap` of the offset maps the same
//! `memfd`: all mappings share the pages, as they share the BO on a real GPU.
//!
//! Deviation: a VRAM buffer without host access is mapped PROT_NONE by the thunk on a real
//! system; here its pages stay readable and writable (the emulated device needs them).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// First mmap offset handed out (below KFD's typed offsets, whose top bits are the type).
const FIRST_OFFSET: u64 = 1 << 40;

#[derive(Debug)]
struct Bo {
    size: u64,
    memfd: i32,
    handle: u64,
}

struct Table {
    next: u64,
    by_offset: BTreeMap<u64, Bo>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { next: FIRST_OFFSET, by_offset: BTreeMap::new() });

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM)
}

/// Backs `[va, va + size)` with a new memfd and returns the mmap offset naming it. The range
/// must be the caller's reservation (it is replaced, as `mmap(MAP_FIXED)` does).
pub fn create(va: u64, size: u64) -> Result<u64, i32> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"xhsa-emu-bo".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: sizing the memfd we own; pages are allocated only when touched.
    if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
        let e = errno();
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    if va != 0 {
        // SAFETY: the thunk reserved [va, va + size) for this buffer (ALLOC_MEMORY_OF_GPU's
        // va_addr); MAP_FIXED replaces that reservation only.
        let p = unsafe {
            libc::mmap(
                va as *mut libc::c_void,
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = errno();
            // SAFETY: closing our own descriptor.
            unsafe { libc::close(fd) };
            return Err(e);
        }
    }
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let offset = t.next;
    t.next += size.div_ceil(2 << 20).max(1) * (2 << 20);
    t.by_offset.insert(offset, Bo { size, memfd: fd, handle: 0 });
    Ok(offset)
}

/// Records the KFD handle of the buffer at `offset` (known after the allocation).
pub fn set_handle(offset: u64, handle: u64) {
    if let Some(b) = TABLE.lock().unwrap_or_else(|p| p.into_inner()).by_offset.get_mut(&offset) {
        b.handle = handle;
    }
}

/// Forgets the buffer `handle` (freed): its memfd closes; its pages go when the last mapping does.
pub fn free(handle: u64) {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let off = t.by_offset.iter().find(|(_, b)| b.handle == handle).map(|(o, _)| *o);
    if let Some(b) = off.and_then(|o| t.by_offset.remove(&o)) {
        // SAFETY: closing the memfd we own.
        unsafe { libc::close(b.memfd) };
    }
}

/// mmap of a buffer's offset: maps its memfd (at `addr` when MAP_FIXED is asked, as mmap
/// does), read-write whatever `prot` asks (see the module's deviation). None when `offset` is
/// not a buffer's.
pub fn map(addr: u64, len: u64, prot: i32, flags: i32, offset: u64) -> Option<Result<u64, i32>> {
    let t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let (start, bo) = t.by_offset.range(..=offset).next_back()?;
    let within = offset - start;
    if within >= bo.size {
        return None;
    }
    if within + len > bo.size {
        return Some(Err(libc::EINVAL));
    }
    let fixed = flags & libc::MAP_FIXED;
    let prot = prot | libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: mapping our memfd; with MAP_FIXED the caller replaces its own range, as mmap does.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len as usize,
            prot,
            libc::MAP_SHARED | fixed,
            bo.memfd,
            within as libc::off_t,
        )
    };
    Some(if p == libc::MAP_FAILED { Err(errno()) } else { Ok(p as u64) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapping_of_a_buffer_shares_its_pages() {
        let off = create(0, 8192).unwrap();
        set_handle(off, 77);
        let a = map(0, 8192, libc::PROT_READ | libc::PROT_WRITE, 0, off).unwrap().unwrap();
        let b = map(0, 4096, libc::PROT_NONE, 0, off + 4096).unwrap().unwrap();
        // SAFETY: both mappings were just made, 8 KiB and 4 KiB long.
        unsafe {
            *((a + 4096) as *mut u32) = 0xfeed;
            assert_eq!(*(b as *const u32), 0xfeed);
        }
        assert!(map(0, 4096, 0, 0, off + 8192 * 1024 * 1024).is_none());
        assert_eq!(map(0, 8192, 0, 0, off + 4096), Some(Err(libc::EINVAL)));
        free(77);
        assert!(map(0, 4096, 0, 0, off).is_none());
    }
}
