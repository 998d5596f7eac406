//! Memory: allocation (VRAM backed lazily by host memory, system memory, the scratch
//! reservation), GPU mapping, userptr registration and pointer queries. Host and device share
//! one address space, so a GPU mapping is the identity.

use hsa_sys::hsakmt::*;
use xhsa_emu::kfd::memory::MemKind;
use xhsa_emu::sys::mem;
use xhsa_ioctl::abi::memory::{
    AllocMemoryOfGpuArgs, FreeMemoryOfGpuArgs, MapMemoryToGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT,
    KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
    KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
};
use xhsa_ioctl::abi::request::{
    AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_FREE_MEMORY_OF_GPU, AMDKFD_IOC_MAP_MEMORY_TO_GPU,
    AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
};

use crate::interpose::kfd_call;

use super::{emu, errno_status, status};
use crate::guard;

/// `HsaMemFlags` bit 9: the scratch aperture reservation.
const MEM_SCRATCH: u32 = 1 << 9;
const PAGE: u64 = 4096;
const HUGE: u64 = 2 << 20;

fn flags_value(f: HsaMemFlags) -> u32 {
    // SAFETY: both union members are plain 32-bit views of the same word.
    unsafe { f.__bindgen_anon_1.Value }
}

/// `hsaKmtAllocMemory`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `out` is null or valid for writing an address.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtAllocMemory(
    node: u32,
    size: u64,
    flags: HsaMemFlags,
    out: *mut *mut libc::c_void,
) -> HSAKMT_STATUS {
    guard("hsaKmtAllocMemory", || {
        status((|| {
            let e = emu()?;
            if out.is_null() || size == 0 {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            let f = flags_value(flags);
            let n = e.node(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            let size = size.div_ceil(PAGE) * PAGE;
            let scratch = f & MEM_SCRATCH != 0;
            let vram = n.gpu_id != 0 && !scratch;
            let align = if size >= HUGE { HUGE } else { PAGE };
            let addr =
                mem::map(size, align, false, !scratch).map_err(|_| HSAKMT_STATUS_NO_MEMORY)?;
            let kfd_flags =
                if vram { KFD_IOC_ALLOC_MEM_FLAGS_VRAM } else { KFD_IOC_ALLOC_MEM_FLAGS_GTT };
            if scratch {
                // Like the real thunk: address space only; no KFD buffer until mapped.
                e.kfd.reserve(addr, size, node, f);
            } else {
                let gpu_id =
                    if n.gpu_id != 0 { n.gpu_id } else { e.nodes.get(1).map_or(0, |g| g.gpu_id) };
                let mut a = AllocMemoryOfGpuArgs {
                    va_addr: addr,
                    size,
                    gpu_id,
                    flags: kfd_flags | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
                    ..Default::default()
                };
                if let Err(errno) = kfd_call(e.fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a) {
                    mem::unmap(addr, size);
                    return Err(errno_status(errno));
                }
                // The thunk's own bookkeeping (fmm): what the caller asked for, for pointer queries.
                e.kfd.memory.update(addr, |r| {
                    r.node = node;
                    r.flags = f;
                });
            }
            // SAFETY: checked non-null above.
            unsafe { *out = addr as *mut libc::c_void };
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtFreeMemory(addr: *mut libc::c_void, _size: u64) -> HSAKMT_STATUS {
    guard("hsaKmtFreeMemory", || {
        status((|| {
            let e = emu()?;
            let r = e
                .kfd
                .memory
                .find(addr as u64)
                .filter(|r| r.start == addr as u64)
                .ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            if r.kind == MemKind::Userptr {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER); // not ours to free
            }
            if r.handle == 0 {
                e.kfd.free_memory(r.start);
            } else {
                let mut a = FreeMemoryOfGpuArgs { handle: r.handle };
                kfd_call(e.fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut a).map_err(errno_status)?;
            }
            mem::unmap(r.start, r.size);
            Ok(())
        })())
    })
}

fn map_to_gpu(
    addr: u64,
    alt: *mut u64,
    nodes: Option<Vec<u32>>,
    map: bool,
) -> Result<(), HSAKMT_STATUS> {
    let e = emu()?;
    let r = e.kfd.memory.find(addr).ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
    let nodes = nodes.unwrap_or_else(|| e.gpu_nodes.to_vec());
    let gpu_ids: Vec<u32> = nodes.iter().filter_map(|&n| e.gpu_id(n)).filter(|&g| g != 0).collect();
    if r.handle != 0 {
        let req = if map { AMDKFD_IOC_MAP_MEMORY_TO_GPU } else { AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU };
        let mut a = MapMemoryToGpuArgs {
            handle: r.handle,
            device_ids_array_ptr: gpu_ids.as_ptr() as u64,
            n_devices: gpu_ids.len() as u32,
            n_success: 0,
        };
        kfd_call(e.fd, req, &mut a).map_err(errno_status)?;
    }
    if !alt.is_null() {
        // SAFETY: checked non-null; ROCr passes a writable u64.
        unsafe { *alt = 0 };
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn hsaKmtMapMemoryToGPU(
    addr: *mut libc::c_void,
    _size: u64,
    alt: *mut u64,
) -> HSAKMT_STATUS {
    guard("hsaKmtMapMemoryToGPU", || status(map_to_gpu(addr as u64, alt, None, true)))
}

/// `hsaKmtMapMemoryToGPUNodes`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `nodes` is null or points to `num` readable node ids; `alt`
/// is null or valid for writing a `u64`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtMapMemoryToGPUNodes(
    addr: *mut libc::c_void,
    _size: u64,
    alt: *mut u64,
    _flags: HsaMemMapFlags,
    num: u64,
    nodes: *mut u32,
) -> HSAKMT_STATUS {
    guard("hsaKmtMapMemoryToGPUNodes", || {
        let list = if nodes.is_null() || num == 0 {
            None
        } else {
            // SAFETY: ROCr passes `num` node ids.
            Some(unsafe { std::slice::from_raw_parts(nodes, num.min(64) as usize) }.to_vec())
        };
        status(map_to_gpu(addr as u64, alt, list, true))
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtUnmapMemoryToGPU(addr: *mut libc::c_void) -> HSAKMT_STATUS {
    guard("hsaKmtUnmapMemoryToGPU", || {
        status(map_to_gpu(addr as u64, std::ptr::null_mut(), None, false))
    })
}

fn register(addr: u64, size: u64, flags: u32) -> Result<(), HSAKMT_STATUS> {
    let e = emu()?;
    tracing::debug!(
        addr = format_args!("{addr:#x}"),
        size = format_args!("{size:#x}"),
        "xhsa-emu thunk: register"
    );
    if addr == 0 || size == 0 {
        return Err(HSAKMT_STATUS_INVALID_PARAMETER);
    }
    if let Some(r) = e.kfd.memory.find(addr) {
        if r.start == addr && r.size >= size {
            return Ok(()); // already registered or allocated
        }
    }
    let gpu_id = e.nodes.get(1).map_or(0, |g| g.gpu_id);
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: addr,
        size,
        gpu_id,
        flags: KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        mmap_offset: addr,
        ..Default::default()
    };
    kfd_call(e.fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a).map_err(errno_status)?;
    e.kfd.memory.update(addr, |r| r.flags = flags);
    Ok(())
}

#[no_mangle]
pub extern "C" fn hsaKmtRegisterMemoryWithFlags(
    addr: *mut libc::c_void,
    size: u64,
    flags: HsaMemFlags,
) -> HSAKMT_STATUS {
    guard("hsaKmtRegisterMemoryWithFlags", || {
        status(register(addr as u64, size, flags_value(flags)))
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtRegisterMemory(addr: *mut libc::c_void, size: u64) -> HSAKMT_STATUS {
    guard("hsaKmtRegisterMemory", || status(register(addr as u64, size, 0)))
}

#[no_mangle]
pub extern "C" fn hsaKmtRegisterMemoryToNodes(
    addr: *mut libc::c_void,
    size: u64,
    _num: u64,
    _nodes: *mut u32,
) -> HSAKMT_STATUS {
    guard("hsaKmtRegisterMemoryToNodes", || status(register(addr as u64, size, 0)))
}

#[no_mangle]
pub extern "C" fn hsaKmtDeregisterMemory(addr: *mut libc::c_void) -> HSAKMT_STATUS {
    guard("hsaKmtDeregisterMemory", || {
        status((|| {
            let e = emu()?;
            tracing::debug!(
                addr = format_args!("{:#x}", addr as u64),
                "xhsa-emu thunk: deregister"
            );
            match e.kfd.memory.find(addr as u64) {
                Some(r) if r.kind == MemKind::Userptr && r.start == addr as u64 => {
                    let mut a = FreeMemoryOfGpuArgs { handle: r.handle };
                    kfd_call(e.fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut a)
                        .map(|_| ())
                        .map_err(errno_status)
                }
                Some(_) => Ok(()),
                None => Err(HSAKMT_STATUS_MEMORY_NOT_REGISTERED),
            }
        })())
    })
}

/// `hsaKmtQueryPointerInfo`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `info` is null or valid for writing an `HsaPointerInfo`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtQueryPointerInfo(
    ptr: *const libc::c_void,
    info: *mut HsaPointerInfo,
) -> HSAKMT_STATUS {
    guard("hsaKmtQueryPointerInfo", || {
        let e = match emu() {
            Ok(e) => e,
            Err(s) => return s,
        };
        // SAFETY: checked non-null; a writable HsaPointerInfo.
        let Some(out) = (unsafe { info.as_mut() }) else { return HSAKMT_STATUS_INVALID_PARAMETER };
        *out = HsaPointerInfo::default();
        let Some(r) = e.kfd.memory.find(ptr as u64) else {
            out.Type = HSA_POINTER_UNKNOWN;
            return HSAKMT_STATUS_ERROR;
        };
        out.Type = if r.kind == MemKind::Userptr {
            HSA_POINTER_REGISTERED_USER
        } else {
            HSA_POINTER_ALLOCATED
        };
        out.Node = r.node;
        out.MemFlags.__bindgen_anon_1.Value = r.flags;
        out.CPUAddress = r.start as *mut libc::c_void;
        out.GPUAddress = r.start;
        out.SizeInBytes = r.size;
        let mapped =
            e.gpu_nodes.len().min(r.mapped_nodes.len().max(if r.kind == MemKind::Userptr {
                e.gpu_nodes.len()
            } else {
                0
            }));
        out.NRegisteredNodes =
            if r.kind == MemKind::Userptr { e.gpu_nodes.len() as u32 } else { 0 };
        out.RegisteredNodes = e.gpu_nodes.as_ptr();
        out.NMappedNodes = mapped as u32;
        out.MappedNodes = e.gpu_nodes.as_ptr();
        out.UserData = r.user_data as *mut libc::c_void;
        HSAKMT_STATUS_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtSetMemoryUserData(
    ptr: *const libc::c_void,
    data: *mut libc::c_void,
) -> HSAKMT_STATUS {
    guard("hsaKmtSetMemoryUserData", || {
        status((|| {
            let e = emu()?;
            let r = e.kfd.memory.find(ptr as u64).ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            e.kfd.memory.update(r.start, |r| r.user_data = data as u64);
            Ok(())
        })())
    })
}

crate::symver!(
    hsaKmtAllocMemory,
    hsaKmtFreeMemory,
    hsaKmtMapMemoryToGPU,
    hsaKmtMapMemoryToGPUNodes,
    hsaKmtUnmapMemoryToGPU,
    hsaKmtRegisterMemoryWithFlags,
    hsaKmtRegisterMemory,
    hsaKmtRegisterMemoryToNodes,
    hsaKmtDeregisterMemory,
    hsaKmtQueryPointerInfo,
    hsaKmtSetMemoryUserData,
);
