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
//!
//! ROCr's virtual-memory API (`hsa_amd_vmem_*`, which HIP 7.x's memory pools use) allocates
//! buffers without an address (`va_addr` 0), exports them as DMA-bufs (KFD EXPORT_DMABUF),
//! imports those on the render node (PRIME_FD_TO_HANDLE), maps them for the CPU through
//! GEM_MMAP's offset and for the GPU with GEM_VA. Here a DMA-buf is a copy of the buffer's
//! memfd (so `lseek(SEEK_END)` gives its size, as libdrm asks), a GEM handle names the buffer on
//! the render node, and a GEM_VA mapping maps the memfd at the address (the device reads host
//! memory at GPU addresses); unmapping puts a PROT_NONE reservation back.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// First mmap offset handed out (below KFD's typed offsets, whose top bits are the type).
const FIRST_OFFSET: u64 = 1 << 40;

#[derive(Debug)]
struct Bo {
    size: u64,
    memfd: i32,
    handle: u64,
    /// The memfd's inode: a DMA-buf of this buffer is recognised by it.
    ino: u64,
}

struct Table {
    next: u64,
    by_offset: BTreeMap<u64, Bo>,
    /// GEM handles on the render nodes: handle -> the buffer's offset.
    gem: BTreeMap<u32, u64>,
    next_gem: u32,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: FIRST_OFFSET,
    by_offset: BTreeMap::new(),
    gem: BTreeMap::new(),
    next_gem: 1,
});

fn inode(fd: i32) -> Result<u64, i32> {
    // SAFETY: fstat into a zeroed stat buffer we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of a descriptor with a valid out pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno());
    }
    Ok(st.st_ino)
}

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
    let ino = inode(fd)?;
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let offset = t.next;
    t.next += size.div_ceil(2 << 20).max(1) * (2 << 20);
    t.by_offset.insert(offset, Bo { size, memfd: fd, handle: 0, ino });
    Ok(offset)
}

/// Whether `handle` names a buffer made without an address (ALLOC_MEMORY_OF_GPU with `va_addr`
/// 0: the emulated KFD's address map does not hold it).
pub fn is_unplaced(handle: u64) -> bool {
    UNPLACED.lock().unwrap_or_else(|p| p.into_inner()).contains(&handle)
}

/// Records `handle` as a buffer without an address (see [`is_unplaced`]).
pub fn set_unplaced(handle: u64) {
    UNPLACED.lock().unwrap_or_else(|p| p.into_inner()).push(handle);
}

static UNPLACED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// AMDKFD_IOC_EXPORT_DMABUF: a new descriptor of the buffer `handle` (a copy of its memfd,
/// close-on-exec when `cloexec`).
pub fn export(handle: u64, cloexec: bool) -> Result<i32, i32> {
    let t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let bo = t.by_offset.values().find(|b| b.handle == handle).ok_or(libc::EINVAL)?;
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    // SAFETY: duplicating the memfd we own.
    let fd = unsafe { libc::fcntl(bo.memfd, cmd, 0) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(fd)
}

/// DRM_IOCTL_PRIME_FD_TO_HANDLE: the GEM handle of the buffer whose DMA-buf `fd` is (the same
/// handle each time, as a DRM file gives for one buffer).
pub fn import(fd: i32) -> Result<u32, i32> {
    let ino = inode(fd).map_err(|_| libc::EBADF)?;
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let offset =
        t.by_offset.iter().find(|(_, b)| b.ino == ino).map(|(o, _)| *o).ok_or(libc::EINVAL)?;
    if let Some((h, _)) = t.gem.iter().find(|(_, o)| **o == offset) {
        return Ok(*h);
    }
    let h = t.next_gem;
    t.next_gem += 1;
    t.gem.insert(h, offset);
    Ok(h)
}

/// DRM_AMDGPU_GEM_MMAP: the mmap offset of GEM handle `gem` on the render node.
pub fn gem_offset(gem: u32) -> Result<u64, i32> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner()).gem.get(&gem).copied().ok_or(libc::ENOENT)
}

/// DRM_IOCTL_GEM_CLOSE.
pub fn gem_close(gem: u32) -> Result<(), i32> {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    t.gem.remove(&gem).map(|_| ()).ok_or(libc::EINVAL)
}

/// DRM_AMDGPU_GEM_VA MAP: the buffer of GEM handle `gem` from `offset_in_bo` at GPU address
/// `va` for `size` bytes: its memfd is mapped there (the device reads host memory at GPU
/// addresses). UNMAP (`map` false): a PROT_NONE reservation goes back over the range.
pub fn gem_va(gem: u32, va: u64, offset_in_bo: u64, size: u64, map: bool) -> Result<(), i32> {
    if va == 0 || size == 0 || !va.is_multiple_of(4096) || !size.is_multiple_of(4096) {
        return Err(libc::EINVAL);
    }
    let t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let offset = *t.gem.get(&gem).ok_or(libc::ENOENT)?;
    let bo = &t.by_offset[&offset];
    if offset_in_bo.checked_add(size).is_none_or(|end| end > bo.size) {
        return Err(libc::EINVAL);
    }
    let p = if map {
        // SAFETY: the caller reserved [va, va + size) for this mapping (ROCr's
        // hsa_amd_vmem_address_reserve); MAP_FIXED replaces that range only.
        unsafe {
            libc::mmap(
                va as *mut libc::c_void,
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                bo.memfd,
                offset_in_bo as libc::off_t,
            )
        }
    } else {
        // SAFETY: the range was this buffer's mapping; it becomes a reservation again.
        unsafe {
            libc::mmap(
                va as *mut libc::c_void,
                size as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        }
    };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(())
}

/// Records the KFD handle of the buffer at `offset` (known after the allocation).
pub fn set_handle(offset: u64, handle: u64) {
    if let Some(b) = TABLE.lock().unwrap_or_else(|p| p.into_inner()).by_offset.get_mut(&offset) {
        b.handle = handle;
    }
}

/// Forgets the buffer `handle` (freed): its memfd closes; its pages go when the last mapping does.
pub fn free(handle: u64) {
    UNPLACED.lock().unwrap_or_else(|p| p.into_inner()).retain(|h| *h != handle);
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

    #[test]
    fn a_dmabuf_of_a_buffer_imports_as_one_gem_handle_that_maps_its_pages() {
        let off = create(0, 8192).unwrap();
        set_handle(off, 91);
        let fd = export(91, true).unwrap();
        // SAFETY: lseek on the descriptor export returned.
        let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
        assert_eq!(end, 8192, "libdrm sizes a DMA-buf so");
        let h = import(fd).unwrap();
        assert_eq!(import(fd), Ok(h));
        assert_eq!(gem_offset(h), Ok(off));
        // SAFETY: a fresh reservation, as ROCr's address reserve makes.
        let va = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as u64;
        gem_va(h, va, 4096, 4096, true).unwrap();
        let cpu = map(0, 8192, libc::PROT_READ | libc::PROT_WRITE, 0, off).unwrap().unwrap();
        // SAFETY: both mappings were just made (the GPU one is 4 KiB at the buffer's second page).
        unsafe {
            *((cpu + 4096) as *mut u32) = 0xbeef;
            assert_eq!(*(va as *const u32), 0xbeef);
        }
        assert_eq!(gem_va(h, va, 4096, 8192, true), Err(libc::EINVAL));
        gem_va(h, va, 4096, 4096, false).unwrap();
        gem_close(h).unwrap();
        assert_eq!(gem_offset(h), Err(libc::ENOENT));
        // SAFETY: closing the exported descriptor; unmapping what this test mapped.
        unsafe {
            libc::close(fd);
            libc::munmap(va as *mut libc::c_void, 8192);
            libc::munmap(cpu as *mut libc::c_void, 8192);
        }
        free(91);
        assert_eq!(export(91, true), Err(libc::EINVAL));
    }
}
