//! Reading ROCr's loader list (`_amdgpu_r_debug`, a glibc `struct r_debug` whose `link_map`s
//! describe the loaded GPU code objects) and arbitrary process memory, without ever faulting:
//! every read goes through `process_vm_readv` on this process, which reports an unmapped
//! address as an error instead of a SIGSEGV.

/// One loaded code object: load delta and URI.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LoadedObject {
    pub l_addr: u64,
    pub uri: String,
}

/// Reads `len` bytes at `addr` of this process; `None` if any of it is unmapped.
pub fn read_self(addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Some(buf);
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: `local` describes our own buffer of `len` bytes; the kernel validates `remote`
    // and fails with EFAULT rather than touching unmapped memory.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}

fn read_u64(addr: u64) -> Option<u64> {
    read_self(addr, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

fn read_cstr(addr: u64, max: usize) -> Option<String> {
    let mut out = Vec::new();
    let mut a = addr;
    while out.len() < max {
        let chunk = read_self(a, 64).or_else(|| read_self(a, 1))?;
        if let Some(z) = chunk.iter().position(|&c| c == 0) {
            out.extend_from_slice(&chunk[..z]);
            return String::from_utf8(out).ok();
        }
        a += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    None
}

/// `RT_CONSISTENT`: the list may be walked.
const RT_CONSISTENT: u32 = 0;
const MAX_OBJECTS: usize = 65536;

/// The code objects listed by the `r_debug` at `r_debug_addr`, or `None` while the loader is
/// changing the list (or the memory is unreadable).
pub fn loaded_objects(r_debug_addr: u64) -> Option<Vec<LoadedObject>> {
    // struct r_debug { int r_version; struct link_map *r_map @8; ElfW(Addr) r_brk @16;
    //                  enum r_state @24; ElfW(Addr) r_ldbase @32; }
    let state = read_self(r_debug_addr + 24, 4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))?;
    if state != RT_CONSISTENT {
        return None;
    }
    let mut out = Vec::new();
    let mut lm = read_u64(r_debug_addr + 8)?;
    // struct link_map { l_addr @0; char *l_name @8; l_ld @16; l_next @24; l_prev @32 }
    while lm != 0 && out.len() < MAX_OBJECTS {
        let l_addr = read_u64(lm)?;
        let name_ptr = read_u64(lm + 8)?;
        let uri = if name_ptr == 0 { String::new() } else { read_cstr(name_ptr, 4096)? };
        out.push(LoadedObject { l_addr, uri });
        lm = read_u64(lm + 24)?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_refuses_unmapped() {
        let v = [1u8, 2, 3, 4];
        assert_eq!(read_self(v.as_ptr() as u64, 4).unwrap(), v);
        assert!(read_self(8, 8).is_none());
    }

    #[test]
    fn walks_a_consistent_list() {
        let name = b"memory://1#offset=0x10&size=5\0";
        let mut second = [0u64; 5];
        second[0] = 0x2000;
        second[1] = name.as_ptr() as u64;
        let mut first = [0u64; 5];
        first[0] = 0x1000;
        first[1] = name.as_ptr() as u64;
        first[3] = second.as_ptr() as u64;
        let mut rd = [0u64; 5];
        rd[1] = first.as_ptr() as u64;
        let objs = loaded_objects(rd.as_ptr() as u64).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1].l_addr, 0x2000);
        assert_eq!(objs[0].uri, "memory://1#offset=0x10&size=5");
        rd[3] = 1; // RT_ADD
        assert!(loaded_objects(rd.as_ptr() as u64).is_none());
    }
}
