//! What a thunk linked into ROCr (ROCm 6.x) asks of `/dev/kfd` and the render nodes beyond the
//! requests the 5.x exports also issue: process apertures, VM acquisition, memory policy,
//! XNACK mode, trap handler, available memory, tile config, buffer objects backed for the
//! device, and mmap of doorbells and buffers. Semantics follow amdkfd's `kfd_chardev.c`
//! (`kfd_ioctl_get_process_apertures_new`, `kfd_ioctl_acquire_vm`,
//! `kfd_ioctl_alloc_memory_of_gpu`, `kfd_ioctl_get_available_memory`, `kfd_mmap`) and
//! `kfd_flat_memory.c` (`kfd_init_apertures_v9`).
//!
//! A request the emulator does not serve is answered as KFD answers an unsupported one (EINVAL)
//! and logged once by name.

use std::collections::HashSet;
use std::sync::Mutex;

use xhsa_emu::kfd::topology::{LDS_APERTURE, SCRATCH_APERTURE};
use xhsa_ioctl::abi::memory::{
    AllocMemoryOfGpuArgs, ExportDmabufArgs, GetAvailableMemoryArgs, GetDmabufInfoArgs,
    ImportDmabufArgs, SetMemoryPolicyArgs, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
    KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
    KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
};
use xhsa_ioctl::abi::process::{
    AcquireVmArgs, GetProcessAperturesNewArgs, GetTileConfigArgs, ProcessDeviceApertures,
    SetScratchBackingVaArgs, SetTrapHandlerArgs,
};
use xhsa_ioctl::abi::request::Request;
use xhsa_ioctl::abi::svm::SetXnackModeArgs;

use crate::fds::{self, Device};
use crate::interpose::{read_arg, set_errno, write_arg};
use crate::state::Emu;

/// `KFD_MMAP_TYPE_DOORBELL` (bits 62-63 of a KFD mmap offset).
const MMAP_TYPE_MASK: u64 = 3 << 62;
const MMAP_TYPE_DOORBELL: u64 = 3 << 62;
/// The GPU virtual range KFD gives a gfx9 process (`kfd_init_apertures_v9`: from
/// AMDGPU_VA_RESERVED_BOTTOM to the 47-bit user limit).
const GPUVM_BASE: u64 = 1 << 16;
const GPUVM_LIMIT: u64 = (1 << 47) - 1;
/// LDS and scratch apertures are 4 GiB windows.
const APERTURE_SPAN: u64 = 0xffff_ffff;

static REPORTED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

fn unsupported(name: &'static str) -> i32 {
    let mut g = REPORTED.lock().unwrap_or_else(|p| p.into_inner());
    if g.get_or_insert_with(HashSet::new).insert(name) {
        tracing::warn!("xhsa-emu: {name} is not emulated; answered EINVAL as KFD answers an unsupported request");
    }
    libc::EINVAL
}

/// The gpu_ids of this process's GPUs, in node order.
fn gpu_ids(e: &Emu) -> Vec<u32> {
    e.nodes.iter().filter(|n| n.gpu_id != 0).map(|n| n.gpu_id).collect()
}

fn gpu_ok(e: &Emu, gpu_id: u32) -> Result<(), i32> {
    if gpu_id != 0 && e.nodes.iter().any(|n| n.gpu_id == gpu_id) {
        Ok(())
    } else {
        Err(libc::EINVAL)
    }
}

/// The KFD requests only a ROCm 6.x thunk issues; `Err(errno)` as KFD fails them.
pub fn process_ioctl(
    e: &Emu,
    req: Request,
    arg: *mut libc::c_void,
    size: usize,
) -> Result<i32, i32> {
    match req {
        Request::GetProcessAperturesNew => {
            let mut a: GetProcessAperturesNewArgs = read_arg(arg, size);
            let gpus = gpu_ids(e);
            if a.num_of_nodes == 0 {
                // KFD: with no room, report how many there are.
                a.num_of_nodes = gpus.len() as u32;
                write_arg(arg, &a, size);
                return Ok(0);
            }
            if a.kfd_process_device_apertures_ptr == 0 {
                return Err(libc::EFAULT);
            }
            let n = (a.num_of_nodes as usize).min(gpus.len());
            for (i, &gpu_id) in gpus.iter().take(n).enumerate() {
                let ap = ProcessDeviceApertures {
                    lds_base: LDS_APERTURE,
                    lds_limit: LDS_APERTURE + APERTURE_SPAN,
                    scratch_base: SCRATCH_APERTURE,
                    scratch_limit: SCRATCH_APERTURE + APERTURE_SPAN,
                    gpuvm_base: GPUVM_BASE,
                    gpuvm_limit: GPUVM_LIMIT,
                    gpu_id,
                    pad: 0,
                };
                let at = a.kfd_process_device_apertures_ptr
                    + (i * std::mem::size_of::<ProcessDeviceApertures>()) as u64;
                // SAFETY: the caller passed room for `num_of_nodes` entries at the pointer (KFD's
                // copy_to_user of that many); n <= num_of_nodes.
                unsafe { std::ptr::write_unaligned(at as *mut ProcessDeviceApertures, ap) };
            }
            a.num_of_nodes = n as u32;
            write_arg(arg, &a, size);
            Ok(0)
        }
        Request::AcquireVm => {
            let a: AcquireVmArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            // KFD takes the VM of the render node's DRM file: it must be that GPU's node.
            match fds::device(a.drm_fd as i32) {
                Some(Device::Render(_)) => Ok(0),
                _ => Err(libc::EINVAL),
            }
        }
        Request::SetMemoryPolicy => {
            let a: SetMemoryPolicyArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            Ok(0)
        }
        Request::SetTrapHandler => {
            let a: SetTrapHandlerArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            Ok(0)
        }
        Request::SetScratchBackingVa => {
            let a: SetScratchBackingVaArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            Ok(0)
        }
        Request::SetXnackMode => {
            let mut a: SetXnackModeArgs = read_arg(arg, size);
            // < 0 queries; the emulated device runs without XNACK (no retried page faults).
            if a.xnack_enabled < 0 {
                a.xnack_enabled = 0;
                write_arg(arg, &a, size);
                Ok(0)
            } else if a.xnack_enabled == 0 {
                Ok(0)
            } else {
                Err(libc::EPERM)
            }
        }
        Request::AvailableMemory => {
            let mut a: GetAvailableMemoryArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            let total = e.kfd.cfg.device.vram_gib << 30;
            a.available = total.saturating_sub(e.kfd.memory.vram_used());
            write_arg(arg, &a, size);
            Ok(0)
        }
        Request::GetTileConfig => {
            let mut a: GetTileConfigArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            // gfx9 has no tile-mode tables.
            a.num_tile_configs = 0;
            a.num_macro_tile_configs = 0;
            a.gb_addr_config = crate::drm::GB_ADDR_CONFIG;
            a.num_banks = 16;
            a.num_ranks = 2;
            write_arg(arg, &a, size);
            Ok(0)
        }
        Request::Svm => {
            Err(unsupported("AMDKFD_IOC_SVM (the topology does not report SVM support)"))
        }
        Request::SmiEvents => Err(unsupported("AMDKFD_IOC_SMI_EVENTS")),
        Request::ExportDmabuf => {
            let mut a: ExportDmabufArgs = read_arg(arg, size);
            a.dmabuf_fd =
                crate::bo::export(a.handle, a.flags & libc::O_CLOEXEC as u32 != 0)? as u32;
            write_arg(arg, &a, size);
            Ok(0)
        }
        // IPC: a DMA-buf of a buffer, possibly another process's (see `bo`).
        Request::GetDmabufInfo => {
            let mut a: GetDmabufInfoArgs = read_arg(arg, size);
            let r = crate::bo::get_dmabuf_info(&mut a, &gpu_ids(e));
            // kfd_ioctl copies the arguments back whatever the outcome (the metadata size
            // needed when the caller's buffer was too small).
            write_arg(arg, &a, size);
            r.map(|()| 0)
        }
        Request::ImportDmabuf => {
            let mut a: ImportDmabufArgs = read_arg(arg, size);
            gpu_ok(e, a.gpu_id)?;
            let (offset, len) = crate::bo::import_dmabuf(a.dmabuf_fd as i32, a.va_addr)?;
            let handle = match e.kfd.import_buffer(a.va_addr, len, a.gpu_id) {
                Ok(h) => h,
                Err(errno) => {
                    crate::bo::forget(offset);
                    return Err(errno);
                }
            };
            crate::bo::set_handle(offset, handle);
            if a.va_addr == 0 {
                crate::bo::set_unplaced(handle);
            }
            tracing::debug!(
                "xhsa-emu: IMPORT_DMABUF fd {} at {:#x}, {len:#x} bytes: handle {handle:#x}",
                a.dmabuf_fd,
                a.va_addr
            );
            a.handle = handle;
            write_arg(arg, &a, size);
            Ok(0)
        }
        Request::GetProcessApertures => {
            Err(unsupported("AMDKFD_IOC_GET_PROCESS_APERTURES (the old form)"))
        }
        Request::CriuOp => Err(unsupported("AMDKFD_IOC_CRIU_OP")),
        Request::GetQueueWaveState => Err(unsupported("AMDKFD_IOC_GET_QUEUE_WAVE_STATE")),
        _ => Err(unsupported("a deprecated or unknown KFD request")),
    }
}

/// ALLOC_MEMORY_OF_GPU from a ROCm 6.x thunk: VRAM and GTT buffers are backed at `va_addr`
/// (see `bo`); doorbell and MMIO-remap buffers are address space the thunk maps through mmap;
/// userptr buffers are the caller's memory.
pub fn alloc_buffer(e: &Emu, a: &mut AllocMemoryOfGpuArgs) -> Result<(), i32> {
    tracing::debug!(
        "xhsa-emu: ALLOC_MEMORY_OF_GPU va {:#x} size {:#x} flags {:#x} gpu {:#x} mmap_offset {:#x}",
        a.va_addr,
        a.size,
        a.flags,
        a.gpu_id,
        a.mmap_offset
    );
    if a.flags & (KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) != 0 {
        gpu_ok(e, a.gpu_id)?;
        if a.size == 0 || a.va_addr == 0 {
            return Err(libc::EINVAL);
        }
        // Address space only (the doorbell BAR, the HDP flush page): the thunk's mmap of the
        // doorbell offset (or of this buffer's offset, for MMIO) gives it its pages.
        a.handle = e.kfd.reserve_buffer(a.va_addr, a.size, a.gpu_id)?;
        if a.flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP != 0 {
            a.mmap_offset = crate::bo::create(0, a.size, a.gpu_id, a.flags)?;
            crate::bo::set_handle(a.mmap_offset, a.handle);
        }
        return Ok(());
    }
    if a.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR != 0
        || a.flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT) == 0
    {
        return e.kfd.alloc_memory(a);
    }
    if a.size == 0 {
        return Err(libc::EINVAL);
    }
    if a.va_addr == 0 {
        // A buffer without an address (amdkfd accepts va_addr 0: the virtual-memory API's
        // physical handles, mapped later through DMA-buf and GEM_VA): backed and given a handle,
        // not placed in the KFD's address map.
        gpu_ok(e, a.gpu_id)?;
        let offset = crate::bo::create(0, a.size, a.gpu_id, a.flags)?;
        a.handle = e.kfd.next_handle(a.gpu_id);
        a.mmap_offset = offset;
        crate::bo::set_handle(offset, a.handle);
        crate::bo::set_unplaced(a.handle);
        return Ok(());
    }
    let offset = crate::bo::create(a.va_addr, a.size, a.gpu_id, a.flags)?;
    if let Err(errno) = e.kfd.alloc_memory(a) {
        crate::bo::forget(offset);
        return Err(errno);
    }
    a.mmap_offset = offset;
    crate::bo::set_handle(offset, a.handle);
    Ok(())
}

/// mmap of an emulated descriptor: a doorbell offset on `/dev/kfd` maps the GPU's doorbells
/// at the address asked (the thunk always gives one, MAP_FIXED); a buffer's offset maps the
/// buffer. Returns the address or the errno mmap fails with.
pub fn mmap(
    dev: Device,
    addr: u64,
    len: u64,
    prot: i32,
    flags: i32,
    offset: u64,
) -> Result<u64, i32> {
    if dev == Device::Kfd && offset & MMAP_TYPE_MASK == MMAP_TYPE_DOORBELL {
        let e = crate::state::emu_or_open().map_err(|_| libc::ENODEV)?;
        if flags & libc::MAP_FIXED == 0 || addr == 0 {
            // KFD maps doorbells where the kernel chooses; the emulator needs a place: reserve one.
            // SAFETY: a fresh anonymous reservation at an address of the kernel's choosing.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len as usize,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(libc::ENOMEM);
            }
            e.kfd.map_doorbells(offset, p as u64, len)?;
            DOORBELL_MAPS.lock().unwrap_or_else(|p| p.into_inner()).push((p as u64, len));
            return Ok(p as u64);
        }
        e.kfd.map_doorbells(offset, addr, len)?;
        DOORBELL_MAPS.lock().unwrap_or_else(|p| p.into_inner()).push((addr, len));
        return Ok(addr);
    }
    match crate::bo::map(addr, len, prot, flags, offset) {
        Some(r) => r,
        None => Err(libc::EINVAL),
    }
}

/// Doorbell mappings made through [`mmap`]: (start, length). Kept apart from the emulator's
/// state so that `munmap` (called everywhere, also while that state is being set up) only takes
/// this lock unless it unmaps doorbells.
static DOORBELL_MAPS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

/// About to unmap `[addr, addr + len)`: forget doorbell mappings inside it.
pub fn before_munmap(addr: u64, len: u64) {
    let hit = {
        let mut m = DOORBELL_MAPS.lock().unwrap_or_else(|p| p.into_inner());
        let before = m.len();
        m.retain(|&r| !overlaps(r, (addr, len)));
        m.len() != before
    };
    if hit {
        if let Some(e) = crate::state::emu() {
            e.kfd.unmap_doorbells(addr, len);
        }
    }
}

/// An ioctl on the render node `minor`.
pub fn render_ioctl(minor: u32, request: libc::c_ulong, arg: *mut libc::c_void) -> libc::c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let e = crate::state::emu_or_open().map_err(|_| libc::ENODEV)?;
        let node = e
            .nodes
            .iter()
            .filter(|n| n.gpu_id != 0)
            .nth((minor - 128) as usize)
            .ok_or(libc::ENODEV)?;
        let gpu = crate::drm::Gpu {
            node,
            vram_used: e.kfd.memory.vram_used(),
            gtt_size: xhsa_emu::sys::mem::host_ram(),
        };
        crate::drm::ioctl(&gpu, request, arg)
    }));
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(errno)) => set_errno(errno),
        Err(_) => {
            tracing::error!("xhsa-emu: internal error serving DRM ioctl {request:#x}");
            set_errno(libc::EIO)
        }
    }
}

/// `fstat` of an emulated descriptor: the character device it stands for.
pub fn fill_stat(dev: Device, st: &mut libc::stat) {
    // SAFETY: an all-zero stat is a valid value.
    *st = unsafe { std::mem::zeroed() };
    let (major, minor) = match dev {
        Device::Kfd => (fds::KFD_MAJOR, 0),
        Device::Render(m) => (xhsa_emu::kfd::sysfs::DRM_MAJOR, m),
    };
    st.st_mode = libc::S_IFCHR | 0o666;
    st.st_rdev = libc::makedev(major, minor);
    st.st_nlink = 1;
    st.st_blksize = 4096;
}
