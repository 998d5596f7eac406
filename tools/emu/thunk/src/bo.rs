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
//!
//! IPC (`hsa_amd_ipc_memory_*`, `hipIpc*MemHandle`) passes such a DMA-buf to another process
//! (ROCr sends it over a Unix socket), where KFD's GET_DMABUF_INFO and IMPORT_DMABUF, and on ROCm
//! 7.x the render node's PRIME_FD_TO_HANDLE and GEM_METADATA, take it. That process's thunk did
//! not make the memfd: it recognises one of ours by its name (`xhsa-emu-bo`, read back through
//! `/proc/self/fd`) and its seals (every buffer's memfd is sealed against growing and
//! shrinking, as a BO's size is fixed); any other descriptor is refused as amdgpu refuses a
//! descriptor that is not one of its DMA-bufs. What amdgpu keeps in the BO and every process
//! sees (the exporting GPU, the KFD allocation flags, the metadata ROCr 7.x sets and reads)
//! travels with the memfd as an extended attribute (`user.xhsa-emu.bo`; tmpfs keeps user
//! extended attributes since Linux 6.6; on an older kernel it stays in the process that set it).
//! An imported buffer is mapped at the importer's address over the same memfd, so both
//! processes' devices read and write the same pages.
//!
//! A buffer lives while KFD's handle or a GEM handle names it (a GEM handle holds its BO on
//! amdgpu): its memfd is closed when the last of them goes.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::sync::Mutex;

use xhsa_ioctl::abi::memory::{
    GetDmabufInfoArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
    KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
};

/// First mmap offset handed out (below KFD's typed offsets, whose top bits are the type).
const FIRST_OFFSET: u64 = 1 << 40;
/// The name of every buffer's memfd, and what `/proc/self/fd/N` reads for one.
const BO_NAME: &CStr = c"xhsa-emu-bo";
const BO_LINK: &str = "/memfd:xhsa-emu-bo";
/// The seals every buffer's memfd carries: its size is fixed.
const BO_SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
/// The extended attribute holding what amdgpu keeps in the BO (see [`Info`]).
const INFO_XATTR: &CStr = c"user.xhsa-emu.bo";
const INFO_MAGIC: u32 = 0x3142_4f58; // "XOB1"
/// `sizeof(drm_amdgpu_gem_metadata.data.data)`: the most metadata a BO holds.
pub const METADATA_MAX: usize = 256;

/// A BO's metadata (DRM_AMDGPU_GEM_METADATA): flags, tiling info and up to 256 bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    pub flags: u64,
    pub tiling_info: u64,
    pub data: Vec<u8>,
}

/// What amdgpu keeps in a BO that every process importing it sees.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Info {
    /// The gpu_id of the GPU that allocated it.
    gpu_id: u32,
    /// KFD_IOC_ALLOC_MEM_FLAGS_{VRAM,GTT,PUBLIC} it was allocated with.
    alloc_flags: u32,
    metadata: Metadata,
}

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32 + self.metadata.data.len());
        for w in [INFO_MAGIC, self.gpu_id, self.alloc_flags, self.metadata.data.len() as u32] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.extend_from_slice(&self.metadata.flags.to_le_bytes());
        v.extend_from_slice(&self.metadata.tiling_info.to_le_bytes());
        v.extend_from_slice(&self.metadata.data);
        v
    }

    fn decode(b: &[u8]) -> Option<Info> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        if u32_at(0)? != INFO_MAGIC {
            return None;
        }
        let len = u32_at(12)? as usize;
        if len > METADATA_MAX {
            return None;
        }
        Some(Info {
            gpu_id: u32_at(4)?,
            alloc_flags: u32_at(8)?,
            metadata: Metadata {
                flags: u64_at(16)?,
                tiling_info: u64_at(24)?,
                data: b.get(32..32 + len)?.to_vec(),
            },
        })
    }
}

#[derive(Debug)]
struct Bo {
    size: u64,
    memfd: i32,
    /// KFD's handle; 0 for a buffer KFD does not name (freed while a GEM handle holds it, or
    /// known to the render node only).
    handle: u64,
    /// The memfd's (st_dev, st_ino): a DMA-buf of this buffer is recognised by it.
    id: (u64, u64),
    /// This process's copy of [`Info`], for when the memfd cannot carry it.
    info: Info,
}

struct Table {
    next: u64,
    by_offset: BTreeMap<u64, Bo>,
    /// GEM handles on the render nodes: handle -> the buffer's offset.
    gem: BTreeMap<u32, u64>,
    next_gem: u32,
}

impl Table {
    /// Enters a buffer and returns its mmap offset.
    fn insert(&mut self, bo: Bo) -> u64 {
        let offset = self.next;
        self.next += bo.size.div_ceil(2 << 20).max(1) * (2 << 20);
        self.by_offset.insert(offset, bo);
        offset
    }

    /// Closes the buffer at `offset` if neither KFD nor a GEM handle names it any more.
    fn release_if_unused(&mut self, offset: u64) {
        let held = self.by_offset.get(&offset).is_some_and(|b| b.handle != 0)
            || self.gem.values().any(|o| *o == offset);
        if !held {
            if let Some(b) = self.by_offset.remove(&offset) {
                // SAFETY: closing the memfd we own.
                unsafe { libc::close(b.memfd) };
            }
        }
    }

    fn by_gem(&self, gem: u32) -> Result<&Bo, i32> {
        let offset = self.gem.get(&gem).ok_or(libc::ENOENT)?;
        self.by_offset.get(offset).ok_or(libc::ENOENT)
    }

    fn by_id(&self, id: (u64, u64)) -> Option<(u64, &Bo)> {
        self.by_offset.iter().find(|(_, b)| b.id == id).map(|(o, b)| (*o, b))
    }
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: FIRST_OFFSET,
    by_offset: BTreeMap::new(),
    gem: BTreeMap::new(),
    next_gem: 1,
});

fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM)
}

/// (st_dev, st_ino, st_size) of `fd`.
fn stat(fd: i32) -> Result<(u64, u64, u64), i32> {
    // SAFETY: an all-zero stat is a valid value; fstat writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer. A raw syscall: the thunk's own `fstat`
    // interposer is not re-entered.
    if unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } != 0 {
        return Err(errno());
    }
    Ok((st.st_dev, st.st_ino, st.st_size as u64))
}

/// The buffer `fd` is a DMA-buf of, wherever it was made: its identity and size. A descriptor
/// that is not open fails with EBADF; one that is not an emulated buffer's memfd (any other
/// file, another memfd) with EINVAL, as `dma_buf_get` and amdgpu refuse a descriptor that is
/// not one of amdgpu's DMA-bufs.
fn identify(fd: i32) -> Result<((u64, u64), u64), i32> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    let (dev, ino, size) = stat(fd).map_err(|_| libc::EBADF)?;
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)?;
    let named = link.to_str().is_some_and(|l| {
        l.strip_prefix(BO_LINK).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    });
    // SAFETY: F_GET_SEALS reads the descriptor's seals (EINVAL for a file that has none).
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if !named || seals < 0 || seals & BO_SEALS != BO_SEALS {
        return Err(libc::EINVAL);
    }
    Ok(((dev, ino), size))
}

/// The [`Info`] the memfd carries, if it carries one.
fn read_info(fd: i32) -> Option<Info> {
    let mut buf = [0u8; 32 + METADATA_MAX];
    // SAFETY: fgetxattr into a buffer of the length passed.
    let n = unsafe { libc::fgetxattr(fd, INFO_XATTR.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return None;
    }
    Info::decode(&buf[..n as usize])
}

/// Records `info` on the memfd for every process that imports it; false if the file system
/// cannot hold it (a kernel before 6.6).
fn write_info(fd: i32, info: &Info) -> bool {
    let b = info.encode();
    // SAFETY: fsetxattr from a buffer of the length passed.
    unsafe { libc::fsetxattr(fd, INFO_XATTR.as_ptr(), b.as_ptr().cast(), b.len(), 0) == 0 }
}

/// The buffer's [`Info`]: what its memfd carries, else this process's copy.
fn info_of(bo: &Bo) -> Info {
    read_info(bo.memfd).unwrap_or_else(|| bo.info.clone())
}

/// A close-on-exec copy of `fd`.
fn dup(fd: i32) -> Result<i32, i32> {
    // SAFETY: duplicating a descriptor the caller holds open.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        Err(errno())
    } else {
        Ok(d)
    }
}

/// Maps `len` bytes of `memfd` from `offset` at `va`, read-write, replacing what is there.
///
/// # Safety
/// `[va, va + len)` must be the caller's to replace (its reservation for this buffer).
unsafe fn map_fixed(va: u64, len: u64, memfd: i32, offset: u64) -> Result<(), i32> {
    // SAFETY: the caller owns the range (this function's contract).
    let p = unsafe {
        libc::mmap(
            va as *mut libc::c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            memfd,
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Backs `[va, va + size)` with a new memfd and returns the mmap offset naming it. The range
/// must be the caller's reservation (it is replaced, as `mmap(MAP_FIXED)` does). `gpu_id` and
/// `flags` (KFD_IOC_ALLOC_MEM_FLAGS_*) are what a DMA-buf of it reports.
pub fn create(va: u64, size: u64, gpu_id: u32, flags: u32) -> Result<u64, i32> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe {
        libc::memfd_create(BO_NAME.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    };
    if fd < 0 {
        return Err(errno());
    }
    let fail = |e: i32| {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
        Err(e)
    };
    // SAFETY: sizing the memfd we own; pages are allocated only when touched.
    if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
        return fail(errno());
    }
    // SAFETY: sealing the memfd we own: its size is fixed from now on.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, BO_SEALS) } != 0 {
        return fail(errno());
    }
    if va != 0 {
        // SAFETY: the thunk reserved [va, va + size) for this buffer (ALLOC_MEMORY_OF_GPU's
        // va_addr); MAP_FIXED replaces that reservation only.
        if let Err(e) = unsafe { map_fixed(va, size, fd, 0) } {
            return fail(e);
        }
    }
    let id = match stat(fd) {
        Ok((dev, ino, _)) => (dev, ino),
        Err(e) => return fail(e),
    };
    let info = Info {
        gpu_id,
        alloc_flags: flags
            & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM
                | KFD_IOC_ALLOC_MEM_FLAGS_GTT
                | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC),
        metadata: Metadata::default(),
    };
    write_info(fd, &info);
    Ok(table().insert(Bo { size, memfd: fd, handle: 0, id, info }))
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
    if handle == 0 {
        return Err(libc::EINVAL);
    }
    let t = table();
    let bo = t.by_offset.values().find(|b| b.handle == handle).ok_or(libc::EINVAL)?;
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    // SAFETY: duplicating the memfd we own.
    let fd = unsafe { libc::fcntl(bo.memfd, cmd, 0) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(fd)
}

/// DRM_IOCTL_PRIME_HANDLE_TO_FD: a DMA-buf of GEM handle `gem`'s buffer (a copy of its
/// memfd; ENOENT for a handle the render node does not know, as `drm_gem_object_lookup`).
pub fn export_gem(gem: u32, cloexec: bool) -> Result<i32, i32> {
    let t = table();
    let bo = t.by_gem(gem)?;
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    // SAFETY: duplicating the memfd we own.
    let fd = unsafe { libc::fcntl(bo.memfd, cmd, 0) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(fd)
}

/// What AMDKFD_IOC_GET_DMABUF_INFO reports of a DMA-buf.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmabufInfo {
    pub size: u64,
    /// The gpu_id of the GPU that allocated the buffer; 0 if the memfd does not say (the
    /// caller reports its first GPU then, as amdkfd does for a buffer of no known partition).
    pub gpu_id: u32,
    /// KFD_IOC_ALLOC_MEM_FLAGS_VRAM or _GTT, and _PUBLIC for host-accessible VRAM.
    pub flags: u32,
    pub metadata: Vec<u8>,
}

/// GET_DMABUF_INFO of the DMA-buf `fd` (from this process or another), as
/// `amdgpu_amdkfd_get_dmabuf_info` answers: its size, allocating GPU, domain and metadata.
pub fn dmabuf_info(fd: i32) -> Result<DmabufInfo, i32> {
    let (id, size) = identify(fd)?;
    let info = read_info(fd)
        .or_else(|| table().by_id(id).map(|(_, b)| b.info.clone()))
        .unwrap_or(Info { alloc_flags: KFD_IOC_ALLOC_MEM_FLAGS_VRAM, ..Info::default() });
    let mut flags = if info.alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0 {
        KFD_IOC_ALLOC_MEM_FLAGS_GTT
    } else {
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    };
    // amdgpu: a VRAM BO allocated with host access has AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED.
    if flags == KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        && info.alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC != 0
    {
        flags |= KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    }
    Ok(DmabufInfo { size, gpu_id: info.gpu_id, flags, metadata: info.metadata.data })
}

/// AMDKFD_IOC_GET_DMABUF_INFO as `kfd_ioctl_get_dmabuf_info` serves it: the size, the
/// allocating GPU (`gpus[0]`, this process's first GPU, when the buffer does not name one of
/// `gpus`), the domain flags and, when `metadata_ptr` is set, the metadata copied there with
/// its size in `metadata_size`; a buffer of `metadata_size` bytes too small for the metadata
/// fails with EINVAL and the size needed in `metadata_size` (amdkfd copies the arguments back
/// on failure too; the caller writes `a` back either way).
pub fn get_dmabuf_info(a: &mut GetDmabufInfoArgs, gpus: &[u32]) -> Result<(), i32> {
    let first = *gpus.first().ok_or(libc::EINVAL)?;
    let i = dmabuf_info(a.dmabuf_fd as i32)?;
    a.size = i.size;
    a.gpu_id = if gpus.contains(&i.gpu_id) { i.gpu_id } else { first };
    a.flags = i.flags;
    if a.metadata_ptr != 0 {
        let cap = a.metadata_size as usize;
        a.metadata_size = i.metadata.len() as u32;
        if cap < i.metadata.len() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller gave `metadata_size` (>= the metadata's length) bytes at
        // `metadata_ptr` (copy_to_user of the metadata in amdkfd).
        unsafe {
            std::ptr::copy_nonoverlapping(
                i.metadata.as_ptr(),
                a.metadata_ptr as *mut u8,
                i.metadata.len(),
            )
        };
    }
    Ok(())
}

/// AMDKFD_IOC_IMPORT_DMABUF of `fd` at `va` (0: no address): the buffer is entered under a new
/// mmap offset holding its own copy of the memfd and, at `va`, mapped over the caller's
/// reservation, so this process's accesses there reach the exporter's pages. Returns the
/// offset and the buffer's size; the caller records the KFD handle with [`set_handle`].
pub fn import_dmabuf(fd: i32, va: u64) -> Result<(u64, u64), i32> {
    let (id, size) = identify(fd)?;
    if size == 0 {
        return Err(libc::EINVAL);
    }
    let memfd = dup(fd)?;
    if va != 0 {
        // SAFETY: the thunk reserved [va, va + size) for this import (IMPORT_DMABUF's va_addr,
        // an area of the buffer's size in its aperture).
        if let Err(e) = unsafe { map_fixed(va, size, memfd, 0) } {
            // SAFETY: closing the copy made above.
            unsafe { libc::close(memfd) };
            return Err(e);
        }
    }
    let mut t = table();
    let info =
        read_info(fd).or_else(|| t.by_id(id).map(|(_, b)| b.info.clone())).unwrap_or_default();
    Ok((t.insert(Bo { size, memfd, handle: 0, id, info }), size))
}

/// DRM_IOCTL_PRIME_FD_TO_HANDLE: the GEM handle of the buffer whose DMA-buf `fd` is (the same
/// handle each time, as a DRM file gives for one buffer). A DMA-buf of another process's buffer
/// that this process does not know yet is entered (the render node holds it by the handle).
pub fn import(fd: i32) -> Result<u32, i32> {
    let (id, size) = identify(fd)?;
    let mut t = table();
    let known = t.by_id(id).map(|(o, _)| o);
    let offset = match known {
        Some(o) => o,
        None => {
            let memfd = dup(fd)?;
            let info = read_info(fd).unwrap_or_default();
            t.insert(Bo { size, memfd, handle: 0, id, info })
        }
    };
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
    table().gem.get(&gem).copied().ok_or(libc::ENOENT)
}

/// DRM_IOCTL_GEM_CLOSE: the handle goes; so does its buffer if nothing else names it.
pub fn gem_close(gem: u32) -> Result<(), i32> {
    let mut t = table();
    let offset = t.gem.remove(&gem).ok_or(libc::EINVAL)?;
    t.release_if_unused(offset);
    Ok(())
}

/// DRM_AMDGPU_GEM_METADATA GET_METADATA: the metadata of GEM handle `gem`'s buffer.
pub fn gem_metadata(gem: u32) -> Result<Metadata, i32> {
    let t = table();
    Ok(info_of(t.by_gem(gem)?).metadata)
}

/// DRM_AMDGPU_GEM_METADATA SET_METADATA: `m` becomes the buffer's metadata, for every process
/// that holds it (amdgpu refuses more than 256 bytes).
pub fn set_gem_metadata(gem: u32, m: Metadata) -> Result<(), i32> {
    if m.data.len() > METADATA_MAX {
        return Err(libc::EINVAL);
    }
    let mut t = table();
    let offset = *t.gem.get(&gem).ok_or(libc::ENOENT)?;
    let bo = t.by_offset.get_mut(&offset).ok_or(libc::ENOENT)?;
    let mut info = info_of(bo);
    info.metadata = m;
    write_info(bo.memfd, &info);
    bo.info = info;
    Ok(())
}

/// What DRM_AMDGPU_GEM_OP GET_GEM_CREATE_INFO reports of GEM handle `gem`'s buffer: its size
/// and the KFD allocation flags it was made with (the caller turns them into amdgpu's domains
/// and creation flags).
pub fn gem_create_info(gem: u32) -> Result<(u64, u32), i32> {
    let t = table();
    let bo = t.by_gem(gem)?;
    Ok((bo.size, info_of(bo).alloc_flags))
}

/// DRM_AMDGPU_GEM_VA MAP: the buffer of GEM handle `gem` from `offset_in_bo` at GPU address
/// `va` for `size` bytes: its memfd is mapped there (the device reads host memory at GPU
/// addresses). UNMAP (`map` false): a PROT_NONE reservation goes back over the range.
pub fn gem_va(gem: u32, va: u64, offset_in_bo: u64, size: u64, map: bool) -> Result<(), i32> {
    if va == 0 || size == 0 || !va.is_multiple_of(4096) || !size.is_multiple_of(4096) {
        return Err(libc::EINVAL);
    }
    let t = table();
    let bo = t.by_gem(gem)?;
    if offset_in_bo.checked_add(size).is_none_or(|end| end > bo.size) {
        return Err(libc::EINVAL);
    }
    if map {
        // SAFETY: the caller reserved [va, va + size) for this mapping (ROCr's
        // hsa_amd_vmem_address_reserve, or the CPU mapping of the buffer itself).
        return unsafe { map_fixed(va, size, bo.memfd, offset_in_bo) };
    }
    // SAFETY: the range was this buffer's mapping; it becomes a reservation again.
    let p = unsafe {
        libc::mmap(
            va as *mut libc::c_void,
            size as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(())
}

/// Records the KFD handle of the buffer at `offset` (known after the allocation).
pub fn set_handle(offset: u64, handle: u64) {
    if let Some(b) = table().by_offset.get_mut(&offset) {
        b.handle = handle;
    }
}

/// KFD's handle `handle` is freed: the buffer goes with it unless a GEM handle still holds it
/// (its memfd closes then; its pages go when the last mapping and descriptor do).
pub fn free(handle: u64) {
    if handle == 0 {
        return;
    }
    UNPLACED.lock().unwrap_or_else(|p| p.into_inner()).retain(|h| *h != handle);
    let mut t = table();
    let off = t.by_offset.iter().find(|(_, b)| b.handle == handle).map(|(o, _)| *o);
    if let Some(o) = off {
        if let Some(b) = t.by_offset.get_mut(&o) {
            b.handle = 0;
        }
        t.release_if_unused(o);
    }
}

/// Drops the buffer at `offset` that KFD did not take after all (its allocation or import
/// failed): its memfd closes.
pub fn forget(offset: u64) {
    let mut t = table();
    if let Some(b) = t.by_offset.get_mut(&offset) {
        b.handle = 0;
    }
    t.release_if_unused(offset);
}

/// mmap of a buffer's offset: maps its memfd (at `addr` when MAP_FIXED is asked, as mmap
/// does), read-write whatever `prot` asks (see the module's deviation). None when `offset` is
/// not a buffer's.
pub fn map(addr: u64, len: u64, prot: i32, flags: i32, offset: u64) -> Option<Result<u64, i32>> {
    let t = table();
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

    const GPU: u32 = 0x1002;

    /// A fresh PROT_NONE reservation of `len` bytes, as the thunk makes for a buffer.
    fn reserve(len: usize) -> u64 {
        // SAFETY: a new anonymous reservation at an address of the kernel's choosing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as u64
    }

    fn unmap(addr: u64, len: usize) {
        // SAFETY: unmapping a range this test mapped.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }

    fn close(fd: i32) {
        // SAFETY: closing a descriptor this test owns.
        unsafe { libc::close(fd) };
    }

    /// A buffer's memfd as another process's thunk makes it (named, sealed, its info attached):
    /// what arrives here as a DMA-buf over ROCr's IPC socket. This process's table does not know
    /// it. Returns the descriptor and whether the memfd could carry the info.
    fn foreign_buffer(size: u64, gpu_id: u32, flags: u32) -> (i32, bool) {
        // SAFETY: memfd_create with a NUL-terminated name.
        let fd = unsafe {
            libc::memfd_create(BO_NAME.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        assert!(fd >= 0);
        // SAFETY: sizing and sealing the memfd just made.
        unsafe {
            assert_eq!(libc::ftruncate(fd, size as libc::off_t), 0);
            assert_eq!(libc::fcntl(fd, libc::F_ADD_SEALS, BO_SEALS), 0);
        }
        let info = Info { gpu_id, alloc_flags: flags, metadata: Metadata::default() };
        (fd, write_info(fd, &info))
    }

    #[test]
    fn every_mapping_of_a_buffer_shares_its_pages() {
        let off = create(0, 8192, GPU, KFD_IOC_ALLOC_MEM_FLAGS_VRAM).unwrap();
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
        unmap(a, 8192);
        unmap(b, 4096);
    }

    #[test]
    fn a_dmabuf_of_a_buffer_imports_as_one_gem_handle_that_maps_its_pages() {
        let off = create(0, 8192, GPU, KFD_IOC_ALLOC_MEM_FLAGS_VRAM).unwrap();
        set_handle(off, 91);
        let fd = export(91, true).unwrap();
        // SAFETY: lseek on the descriptor export returned.
        let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
        assert_eq!(end, 8192, "libdrm sizes a DMA-buf so");
        let h = import(fd).unwrap();
        assert_eq!(import(fd), Ok(h));
        assert_eq!(gem_offset(h), Ok(off));
        let va = reserve(8192);
        gem_va(h, va, 4096, 4096, true).unwrap();
        let cpu = map(0, 8192, libc::PROT_READ | libc::PROT_WRITE, 0, off).unwrap().unwrap();
        // SAFETY: both mappings were just made (the GPU one is 4 KiB at the buffer's second page).
        unsafe {
            *((cpu + 4096) as *mut u32) = 0xbeef;
            assert_eq!(*(va as *const u32), 0xbeef);
        }
        assert_eq!(gem_va(h, va, 4096, 8192, true), Err(libc::EINVAL));
        gem_va(h, va, 4096, 4096, false).unwrap();
        // A GEM handle holds the buffer after KFD frees it, as it holds a BO on amdgpu.
        free(91);
        assert_eq!(export(91, true), Err(libc::EINVAL));
        assert_eq!(gem_offset(h), Ok(off));
        assert!(map(0, 4096, 0, 0, off).is_some(), "held by the GEM handle");
        gem_close(h).unwrap();
        assert_eq!(gem_offset(h), Err(libc::ENOENT));
        assert!(map(0, 4096, 0, 0, off).is_none(), "gone with its last name");
        assert_eq!(gem_close(h), Err(libc::EINVAL));
        close(fd);
        unmap(va, 8192);
        unmap(cpu, 8192);
    }

    #[test]
    fn descriptors_that_are_not_emulated_dmabufs_are_refused_as_amdgpu_refuses_them() {
        // Another memfd (not a buffer's), a pipe, a regular file: not DMA-bufs.
        // SAFETY: memfd_create with a NUL-terminated name.
        let other = unsafe { libc::memfd_create(c"other".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: sizing our memfd.
        assert_eq!(unsafe { libc::ftruncate(other, 8192) }, 0);
        let mut p = [0i32; 2];
        // SAFETY: a pipe into a two-element array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        let file = std::fs::File::open("/proc/self/status").unwrap();
        use std::os::fd::AsRawFd;
        // A memfd with a buffer's name but not sealed as one.
        // SAFETY: memfd_create with a NUL-terminated name.
        let unsealed = unsafe { libc::memfd_create(BO_NAME.as_ptr(), libc::MFD_CLOEXEC) };
        for fd in [other, p[0], file.as_raw_fd(), unsealed] {
            assert_eq!(dmabuf_info(fd), Err(libc::EINVAL), "GET_DMABUF_INFO of fd {fd}");
            assert_eq!(import_dmabuf(fd, 0), Err(libc::EINVAL), "IMPORT_DMABUF of fd {fd}");
            assert_eq!(import(fd), Err(libc::EINVAL), "PRIME_FD_TO_HANDLE of fd {fd}");
        }
        // A descriptor that is not open (far above any this process opens; other tests run
        // beside this one, so a number just closed could be reused).
        let closed = 1 << 29;
        // SAFETY: F_GETFD only reads the descriptor's flags.
        assert_eq!(unsafe { libc::fcntl(closed, libc::F_GETFD) }, -1);
        assert_eq!(dmabuf_info(closed), Err(libc::EBADF));
        assert_eq!(import_dmabuf(closed, 0), Err(libc::EBADF));
        assert_eq!(import(closed), Err(libc::EBADF));
        assert_eq!(dmabuf_info(-1), Err(libc::EBADF));
        for fd in [other, p[0], p[1], unsealed] {
            close(fd);
        }
    }

    #[test]
    fn another_processs_dmabuf_imports_at_the_address_over_the_same_pages() {
        let size = 3 * 4096;
        let (fd, _) = foreign_buffer(size, GPU, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        // The exporter's own mapping of its buffer.
        // SAFETY: mapping the memfd just made, shared.
        let exporter = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } as u64;
        let va = reserve(size as usize);
        let (off, len) = import_dmabuf(fd, va).unwrap();
        assert_eq!(len, size);
        set_handle(off, 0x55);
        // SAFETY: both mappings are 3 pages long.
        unsafe {
            *((exporter + 8192) as *mut u64) = 0x1234_5678;
            assert_eq!(
                *((va + 8192) as *const u64),
                0x1234_5678,
                "the importer reads the exporter's"
            );
            *(va as *mut u32) = 0xcafe;
            assert_eq!(*(exporter as *const u32), 0xcafe, "the exporter reads the importer's");
        }
        // The render node finds the imported buffer by its DMA-buf.
        let h = import(fd).unwrap();
        assert_eq!(gem_offset(h), Ok(off));
        assert_eq!(gem_create_info(h).map(|(s, _)| s), Ok(size));
        gem_close(h).unwrap();
        assert!(map(0, 4096, 0, 0, off).is_some(), "KFD still holds it");
        // The descriptor ROCr received can close: the import holds its own.
        close(fd);
        // SAFETY: 3 pages mapped above.
        unsafe { assert_eq!(*((va + 8192) as *const u64), 0x1234_5678) };
        free(0x55);
        assert!(map(0, 4096, 0, 0, off).is_none(), "freed: nothing of it is left here");
        unmap(va, size as usize);
        unmap(exporter, size as usize);
    }

    #[test]
    fn get_dmabuf_info_reports_size_gpu_domain_and_metadata() {
        let public = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        let (fd, carries) = foreign_buffer(5 * 4096, 0x2002, public);
        let mut meta = [0u8; 64];
        let mut a = GetDmabufInfoArgs {
            dmabuf_fd: fd as u32,
            metadata_ptr: meta.as_mut_ptr() as u64,
            metadata_size: 64,
            ..Default::default()
        };
        get_dmabuf_info(&mut a, &[0x1002, 0x2002]).unwrap();
        assert_eq!(a.size, 5 * 4096);
        assert_eq!(a.metadata_size, 0, "no metadata yet");
        if carries {
            assert_eq!(a.gpu_id, 0x2002, "the allocating GPU");
            assert_eq!(a.flags, public);
        }
        // A GPU this process does not have: its first GPU (amdkfd's fallback).
        get_dmabuf_info(&mut a, &[0x1002]).unwrap();
        assert_eq!(a.gpu_id, 0x1002);

        // Metadata set through a GEM handle (as ROCr 7.x's exporter does) is what every
        // importer's GET_DMABUF_INFO and GEM_METADATA read.
        let h = import(fd).unwrap();
        let data: Vec<u8> = (1..=80u8).collect();
        let m = Metadata { flags: 3, tiling_info: 9, data: data.clone() };
        set_gem_metadata(h, m.clone()).unwrap();
        assert_eq!(gem_metadata(h), Ok(m));
        assert_eq!(
            set_gem_metadata(h, Metadata { data: vec![0; 260], ..Metadata::default() }),
            Err(libc::EINVAL)
        );
        a.metadata_size = 64;
        assert_eq!(get_dmabuf_info(&mut a, &[0x1002]), Err(libc::EINVAL), "64 bytes: too small");
        assert_eq!(a.metadata_size, 80, "the size needed");
        let mut big = [0u8; 128];
        a.metadata_ptr = big.as_mut_ptr() as u64;
        a.metadata_size = 128;
        get_dmabuf_info(&mut a, &[0x1002]).unwrap();
        assert_eq!((a.metadata_size, &big[..80]), (80, &data[..]));
        if carries {
            // The metadata travels with the memfd: a fresh reading of the descriptor has it.
            assert_eq!(read_info(fd).map(|i| i.metadata.data), Some(data));
        }
        // Without a metadata buffer the size is left as passed.
        a.metadata_ptr = 0;
        a.metadata_size = 7;
        get_dmabuf_info(&mut a, &[0x1002]).unwrap();
        assert_eq!(a.metadata_size, 7);

        // GTT buffers report GTT, never PUBLIC.
        let (gtt, _) = foreign_buffer(4096, 0x1002, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        if carries {
            assert_eq!(dmabuf_info(gtt).map(|i| i.flags), Ok(KFD_IOC_ALLOC_MEM_FLAGS_GTT));
        }
        gem_close(h).unwrap();
        close(fd);
        close(gtt);
    }

    #[test]
    fn an_import_without_an_address_is_mapped_through_the_render_node() {
        // ROCr's system-memory IPC path: IMPORT_DMABUF with va 0, PRIME_FD_TO_HANDLE, GEM_MMAP,
        // then GEM_VA at the CPU mapping.
        let (fd, _) = foreign_buffer(8192, GPU, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        let (off, _) = import_dmabuf(fd, 0).unwrap();
        set_handle(off, 0x77);
        set_unplaced(0x77);
        free(0x77);
        assert!(!is_unplaced(0x77));
        let h = import(fd).unwrap();
        let o = gem_offset(h).unwrap();
        let cpu = map(0, 8192, libc::PROT_READ, 0, o).unwrap().unwrap();
        gem_va(h, cpu, 0, 8192, true).unwrap();
        // SAFETY: 8 KiB mapped at `cpu`.
        unsafe { *((cpu + 4096) as *mut u8) = 9 };
        let fd2 = export_gem(h, true).unwrap();
        assert_eq!(import(fd2), Ok(h), "the same buffer, the same handle");
        assert_eq!(export_gem(0xdead, true), Err(libc::ENOENT));
        gem_close(h).unwrap();
        close(fd);
        close(fd2);
        unmap(cpu, 8192);
    }
}
