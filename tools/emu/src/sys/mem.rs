//! Host mappings that back emulated GPU memory: reserved lazily (`MAP_NORESERVE`), so 192 GiB
//! of VRAM cost nothing until touched.

use std::io;

/// Maps `len` bytes of zeroed memory; `shared` mappings survive `fork` as shared memory
/// (doorbells). `align` is a power of two; the returned address is aligned to it.
pub fn map(len: u64, align: u64, shared: bool, accessible: bool) -> io::Result<u64> {
    let align = align.max(4096);
    let total =
        len.checked_add(align).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let prot = if accessible { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_NONE };
    let flags = libc::MAP_ANONYMOUS
        | libc::MAP_NORESERVE
        | if shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
    // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing; no existing
    // memory is affected.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), total as usize, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = p as u64;
    let start = (base + align - 1) & !(align - 1);
    // Return the slack before and after the aligned range.
    // SAFETY: both ranges lie inside the mapping just created and are not handed out.
    unsafe {
        if start > base {
            libc::munmap(base as *mut libc::c_void, (start - base) as usize);
        }
        let end = start + len;
        let tail = base + total - end;
        if tail > 0 {
            libc::munmap(end as *mut libc::c_void, tail as usize);
        }
    }
    Ok(start)
}

/// Maps zeroed memory at exactly `addr` (a caller-chosen fixed address, e.g. a reserved range).
pub fn map_fixed(addr: u64, len: u64) -> io::Result<()> {
    // SAFETY: the caller owns [addr, addr+len) (it reserved it through `map`); MAP_FIXED
    // replaces only that range.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_ANONYMOUS | libc::MAP_PRIVATE | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unmaps a range returned by [`map`].
pub fn unmap(addr: u64, len: u64) {
    // SAFETY: the caller passes a range it mapped and no longer uses.
    unsafe { libc::munmap(addr as *mut libc::c_void, len as usize) };
}

/// Total host RAM in bytes.
/// Maps the `len` bytes of the shared mapping at `src` a second time, at `dst` (replacing what
/// was mapped there): both addresses then reach the same pages (`mremap` with old size 0).
///
/// # Safety
///
/// `src..src+len` lies in a `MAP_SHARED` mapping of this process; `dst..dst+len` is page-aligned
/// and nothing in this process holds a reference into it (its old mapping is replaced).
pub unsafe fn alias_shared(src: u64, len: u64, dst: u64) -> io::Result<()> {
    // SAFETY: the caller's obligations: a shared source (old size 0 makes a second mapping of
    // the same pages) and a destination nobody references.
    let p = unsafe {
        libc::mremap(
            src as *mut libc::c_void,
            0,
            len as usize,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dst as *mut libc::c_void,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn host_ram() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64) * (size.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_lazy_mappings() {
        let a = map(3 << 30, 2 << 20, false, true).unwrap();
        assert_eq!(a % (2 << 20), 0);
        // SAFETY: inside the mapping just made.
        unsafe { *(a as *mut u64) = 5 };
        unmap(a, 3 << 30);
        assert!(host_ram() > 0);
    }
}
