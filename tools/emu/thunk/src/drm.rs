//! The DRM render node of an emulated GPU (`/dev/dri/renderD<128+N>`), as amdgpu answers the
//! requests ROCm 6.x makes through libdrm: `DRM_IOCTL_VERSION` ("amdgpu" 3.x, which
//! `amdgpu_device_initialize` requires) and `DRM_IOCTL_AMDGPU_INFO` (ACCEL_WORKING, DEV_INFO,
//! READ_MMR_REG of GB_ADDR_CONFIG, VRAM_GTT, the usage counters, MEMORY, FW_VERSION). The
//! layouts are those of `include/uapi/drm/{drm,amdgpu_drm}.h`.
//!
//! Buffer objects are KFD's (`bo`): ROCr allocates through `/dev/kfd` and maps through the
//! render node; the render node names them by GEM handle for ROCr's virtual-memory API and IPC
//! (PRIME_FD_TO_HANDLE, PRIME_HANDLE_TO_FD, GEM_CLOSE, AMDGPU_GEM_MMAP, AMDGPU_GEM_VA MAP and
//! UNMAP, AMDGPU_GEM_METADATA, AMDGPU_GEM_OP GET_GEM_CREATE_INFO).
//!
//! Anything else is answered as amdgpu answers a request it does not support (EINVAL for an
//! unknown INFO query or amdgpu command, ENOTTY for an unknown DRM number) and logged once by
//! name.

use std::collections::HashSet;
use std::sync::Mutex;

use xhsa_emu::kfd::topology::Node;

use crate::interpose::copy_out;

/// `DRM_IOCTL_BASE`.
const DRM_TYPE: u64 = b'd' as u64;
/// `DRM_COMMAND_BASE`: driver-specific numbers start here.
const COMMAND_BASE: u64 = 0x40;
const DRM_VERSION_NR: u64 = 0x00;
const GEM_CLOSE_NR: u64 = 0x09;
const PRIME_HANDLE_TO_FD_NR: u64 = 0x2d;
const PRIME_FD_TO_HANDLE_NR: u64 = 0x2e;
const AMDGPU_GEM_MMAP_NR: u64 = COMMAND_BASE + 0x01;
const AMDGPU_INFO_NR: u64 = COMMAND_BASE + 0x05;
const AMDGPU_GEM_METADATA_NR: u64 = COMMAND_BASE + 0x06;
const AMDGPU_GEM_VA_NR: u64 = COMMAND_BASE + 0x08;
const AMDGPU_GEM_OP_NR: u64 = COMMAND_BASE + 0x10;
/// `AMDGPU_GEM_METADATA_OP_*`.
const AMDGPU_GEM_METADATA_OP_SET_METADATA: u32 = 1;
const AMDGPU_GEM_METADATA_OP_GET_METADATA: u32 = 2;
/// `AMDGPU_GEM_OP_GET_GEM_CREATE_INFO`.
const AMDGPU_GEM_OP_GET_GEM_CREATE_INFO: u32 = 0;
/// `AMDGPU_GEM_DOMAIN_*` and the `AMDGPU_GEM_CREATE_*` flags amdkfd creates its BOs with.
const AMDGPU_GEM_DOMAIN_GTT: u64 = 0x2;
const AMDGPU_GEM_DOMAIN_VRAM: u64 = 0x4;
const AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED: u64 = 1 << 0;
const AMDGPU_GEM_CREATE_NO_CPU_ACCESS: u64 = 1 << 1;
const AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE: u64 = 1 << 9;
/// The flags PRIME_HANDLE_TO_FD accepts (`DRM_CLOEXEC | DRM_RDWR`).
const DRM_PRIME_FLAGS: u32 = (libc::O_CLOEXEC | libc::O_RDWR) as u32;
/// `AMDGPU_VA_OP_*` of DRM_AMDGPU_GEM_VA.
const AMDGPU_VA_OP_MAP: u32 = 1;
const AMDGPU_VA_OP_UNMAP: u32 = 2;

/// `struct drm_prime_handle`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PrimeHandle {
    handle: u32,
    flags: u32,
    fd: i32,
}

/// `struct drm_amdgpu_gem_metadata`.
#[repr(C)]
#[derive(Clone, Copy)]
struct GemMetadata {
    handle: u32,
    op: u32,
    flags: u64,
    tiling_info: u64,
    data_size_bytes: u32,
    data: [u32; 64],
}

impl Default for GemMetadata {
    fn default() -> Self {
        GemMetadata {
            handle: 0,
            op: 0,
            flags: 0,
            tiling_info: 0,
            data_size_bytes: 0,
            data: [0; 64],
        }
    }
}

/// `struct drm_amdgpu_gem_op`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GemOp {
    handle: u32,
    op: u32,
    value: u64,
}

/// `struct drm_amdgpu_gem_create_in`, as GET_GEM_CREATE_INFO reports it.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct GemCreateIn {
    bo_size: u64,
    alignment: u64,
    domains: u64,
    domain_flags: u64,
}

/// What GET_GEM_CREATE_INFO reports of a BO amdkfd made with KFD allocation `flags`
/// (`amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`: VRAM is wiped on release and has host access only
/// when PUBLIC; GTT gets no creation flags; page alignment).
fn create_info(size: u64, flags: u32) -> GemCreateIn {
    use xhsa_ioctl::abi::memory::{KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC};
    let (domains, domain_flags) = if flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0 {
        (AMDGPU_GEM_DOMAIN_GTT, 0)
    } else {
        let access = if flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC != 0 {
            AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED
        } else {
            AMDGPU_GEM_CREATE_NO_CPU_ACCESS
        };
        (AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE | access)
    };
    GemCreateIn { bo_size: size, alignment: 4096, domains, domain_flags }
}

/// The leading fields of `struct drm_amdgpu_gem_va` (newer kernels append timeline fields).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GemVa {
    handle: u32,
    pad: u32,
    operation: u32,
    flags: u32,
    va_address: u64,
    offset_in_bo: u64,
    map_size: u64,
}

/// Reads the caller's argument of `size` bytes into a `T` (zero-extended when shorter).
fn read<T: Copy + Default>(arg: *mut libc::c_void, size: usize) -> T {
    let mut v = T::default();
    // SAFETY: the caller passes an argument of `size` bytes (encoded in its request); at most
    // size_of::<T>() of them are copied into `v`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            arg as *const u8,
            (&mut v as *mut T).cast::<u8>(),
            size.min(std::mem::size_of::<T>()),
        )
    };
    v
}

pub const AMDGPU_INFO_ACCEL_WORKING: u32 = 0x00;
pub const AMDGPU_INFO_HW_IP_INFO: u32 = 0x02;
pub const AMDGPU_INFO_HW_IP_COUNT: u32 = 0x03;
/// `AMDGPU_HW_IP_COMPUTE` and `AMDGPU_HW_IP_DMA` (the only engines an Instinct part exposes to
/// compute work; its GFX IP has no rings for user submissions here).
pub const AMDGPU_HW_IP_COMPUTE: u32 = 1;
pub const AMDGPU_HW_IP_DMA: u32 = 2;
pub const AMDGPU_INFO_FW_VERSION: u32 = 0x0e;
pub const AMDGPU_INFO_VRAM_USAGE: u32 = 0x10;
pub const AMDGPU_INFO_GTT_USAGE: u32 = 0x11;
pub const AMDGPU_INFO_VRAM_GTT: u32 = 0x14;
pub const AMDGPU_INFO_READ_MMR_REG: u32 = 0x15;
pub const AMDGPU_INFO_DEV_INFO: u32 = 0x16;
pub const AMDGPU_INFO_VIS_VRAM_USAGE: u32 = 0x17;
pub const AMDGPU_INFO_MEMORY: u32 = 0x19;
/// `AMDGPU_FAMILY_AI`: every gfx9 part (gfx90a and gfx942 included).
pub const AMDGPU_FAMILY_AI: u32 = 141;
/// The amdgpu KMS interface version this render node reports (Linux 6.x: 3.5x-3.6x).
pub const DRM_VERSION: (i32, i32, i32) = (3, 58, 0);
/// mmGB_ADDR_CONFIG's dword offset on gfx9, the one register libdrm reads on AI parts.
const MM_GB_ADDR_CONFIG: u32 = 0x263e;
/// A GB_ADDR_CONFIG value of a gfx9 part (the 5.2 thunk's `hsaKmtGetTileConfig` reports the same).
pub const GB_ADDR_CONFIG: u32 = 0x2a11_4042;

/// `struct drm_version` (x86-64 layout).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct DrmVersion {
    major: i32,
    minor: i32,
    patch: i32,
    name_len: u64,
    name: u64,
    date_len: u64,
    date: u64,
    desc_len: u64,
    desc: u64,
}

/// `struct drm_amdgpu_info`: the request header (the union's read_mmr_reg view).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InfoRequest {
    return_pointer: u64,
    return_size: u32,
    query: u32,
    dword_offset: u32,
    count: u32,
    instance: u32,
    flags: u32,
}

/// `struct drm_amdgpu_info_device`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct InfoDevice {
    pub device_id: u32,
    pub chip_rev: u32,
    pub external_rev: u32,
    pub pci_rev: u32,
    pub family: u32,
    pub num_shader_engines: u32,
    pub num_shader_arrays_per_engine: u32,
    pub gpu_counter_freq: u32,
    pub max_engine_clock: u64,
    pub max_memory_clock: u64,
    pub cu_active_number: u32,
    pub cu_ao_mask: u32,
    pub cu_bitmap: [[u32; 4]; 4],
    pub enabled_rb_pipes_mask: u32,
    pub num_rb_pipes: u32,
    pub num_hw_gfx_contexts: u32,
    pub pcie_gen: u32,
    pub ids_flags: u64,
    pub virtual_address_offset: u64,
    pub virtual_address_max: u64,
    pub virtual_address_alignment: u32,
    pub pte_fragment_size: u32,
    pub gart_page_size: u32,
    pub ce_ram_size: u32,
    pub vram_type: u32,
    pub vram_bit_width: u32,
    pub vce_harvest_config: u32,
    pub gc_double_offchip_lds_buf: u32,
    pub prim_buf_gpu_addr: u64,
    pub pos_buf_gpu_addr: u64,
    pub cntl_sb_buf_gpu_addr: u64,
    pub param_buf_gpu_addr: u64,
    pub prim_buf_size: u32,
    pub pos_buf_size: u32,
    pub cntl_sb_buf_size: u32,
    pub param_buf_size: u32,
    pub wave_front_size: u32,
    pub num_shader_visible_vgprs: u32,
    pub num_cu_per_sh: u32,
    pub num_tcc_blocks: u32,
    pub gs_vgt_table_depth: u32,
    pub gs_prim_buffer_depth: u32,
    pub max_gs_waves_per_vgt: u32,
    pub pcie_num_lanes: u32,
    pub cu_ao_bitmap: [[u32; 4]; 4],
    pub high_va_offset: u64,
    pub high_va_max: u64,
    pub pa_sc_tile_steering_override: u32,
    pub pad: u32,
    pub tcc_disabled_mask: u64,
    pub min_engine_clock: u64,
    pub min_memory_clock: u64,
    pub tcp_cache_size: u32,
    pub num_sqc_per_wgp: u32,
    pub sqc_data_cache_size: u32,
    pub sqc_inst_cache_size: u32,
    pub gl1c_cache_size: u32,
    pub gl2c_cache_size: u32,
    pub mall_size: u64,
    pub enabled_rb_pipes_mask_hi: u32,
    pub shadow_size: u32,
    pub shadow_alignment: u32,
    pub csa_size: u32,
    pub csa_alignment: u32,
    pub userq_ip_mask: u32,
}

/// `VRAM_TYPE_HBM` in amdgpu_drm.h.
const VRAM_TYPE_HBM: u32 = 6;

/// DEV_INFO of a GPU node, from the same figures as its KFD topology.
pub fn device_info(n: &Node) -> InfoDevice {
    let cus = n.simds / n.simds_per_cu.max(1);
    let ses = n.shader_banks.max(1);
    let mut d = InfoDevice {
        device_id: u32::from(n.device_id),
        family: AMDGPU_FAMILY_AI,
        num_shader_engines: ses,
        num_shader_arrays_per_engine: n.arrays.max(1),
        gpu_counter_freq: 100_000,
        max_engine_clock: u64::from(n.max_clock_mhz) * 1000,
        max_memory_clock: 2_600_000,
        cu_active_number: cus,
        cu_ao_mask: 0xffff_ffff,
        num_rb_pipes: 0,
        ids_flags: 0,
        virtual_address_offset: 2 << 20,
        virtual_address_max: 1 << 47,
        virtual_address_alignment: 4096,
        pte_fragment_size: 2 << 20,
        gart_page_size: 4096,
        vram_type: VRAM_TYPE_HBM,
        vram_bit_width: 8192,
        wave_front_size: n.wave_size,
        num_shader_visible_vgprs: 512,
        num_cu_per_sh: n.cus_per_array,
        num_tcc_blocks: 16,
        pcie_gen: 5,
        pcie_num_lanes: 16,
        high_va_offset: 0xffff_8000_0000_0000,
        high_va_max: 0xffff_ffff_ffff_f000,
        gl2c_cache_size: 4 << 20,
        ..Default::default()
    };
    // One bitmap word per (shader engine, array), CUs as set bits, as amdgpu fills it.
    let per_array = n.cus_per_array.min(32);
    for se in 0..ses.min(4) as usize {
        d.cu_bitmap[se][0] = if per_array == 32 { u32::MAX } else { (1 << per_array) - 1 };
        d.cu_ao_bitmap[se][0] = d.cu_bitmap[se][0];
    }
    d
}

static REPORTED: Mutex<Option<HashSet<(u64, u32)>>> = Mutex::new(None);

/// Logs an unsupported request once per (request, query).
fn unsupported(request: u64, query: u32, what: &str) {
    let mut g = REPORTED.lock().unwrap_or_else(|p| p.into_inner());
    if g.get_or_insert_with(HashSet::new).insert((request, query)) {
        tracing::warn!("xhsa-emu: DRM render node: {what} is not emulated; answered as amdgpu answers an unsupported request");
    }
}

/// What a request made of a render node returns: Ok(value) or Err(errno).
pub type Reply = Result<i32, i32>;

fn copy_str(ptr: u64, cap: u64, s: &str) -> Result<(), i32> {
    let n = (cap as usize).min(s.len());
    if n == 0 {
        return Ok(());
    }
    if ptr == 0 {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller gave a buffer of `cap` bytes at `ptr` (drm_version's *_len fields).
    unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), ptr as *mut u8, n) };
    Ok(())
}

/// What the render node needs to answer: the GPU's node and the VRAM in use.
pub struct Gpu<'a> {
    pub node: &'a Node,
    pub vram_used: u64,
    pub gtt_size: u64,
}

/// Serves one ioctl on a render node. `arg` points at the caller's argument (its size is
/// encoded in `request`).
pub fn ioctl(gpu: &Gpu<'_>, request: u64, arg: *mut libc::c_void) -> Reply {
    let ty = (request >> 8) & 0xff;
    let nr = request & 0xff;
    let size = ((request >> 16) & 0x3fff) as usize;
    if ty != DRM_TYPE {
        return Err(libc::ENOTTY);
    }
    if arg.is_null() {
        return Err(libc::EFAULT);
    }
    match nr {
        DRM_VERSION_NR => {
            let mut v = DrmVersion::default();
            // SAFETY: the caller passes a struct drm_version of `size` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    arg as *const u8,
                    (&mut v as *mut DrmVersion).cast::<u8>(),
                    size.min(std::mem::size_of::<DrmVersion>()),
                )
            };
            let (name, date, desc) = ("amdgpu", "20150101", "AMD GPU");
            copy_str(v.name, v.name_len, name)?;
            copy_str(v.date, v.date_len, date)?;
            copy_str(v.desc, v.desc_len, desc)?;
            (v.major, v.minor, v.patch) = DRM_VERSION;
            (v.name_len, v.date_len, v.desc_len) =
                (name.len() as u64, date.len() as u64, desc.len() as u64);
            copy_out(arg as u64, &v, size)?;
            Ok(0)
        }
        AMDGPU_INFO_NR => {
            let mut q = InfoRequest::default();
            // SAFETY: the caller passes a struct drm_amdgpu_info of `size` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    arg as *const u8,
                    (&mut q as *mut InfoRequest).cast::<u8>(),
                    size.min(std::mem::size_of::<InfoRequest>()),
                )
            };
            info(gpu, request, &q)
        }
        // The buffers of ROCr's virtual-memory API (see `bo`).
        PRIME_FD_TO_HANDLE_NR => {
            let mut p: PrimeHandle = read(arg, size);
            p.handle = crate::bo::import(p.fd)?;
            copy_out(arg as u64, &p, size)?;
            Ok(0)
        }
        PRIME_HANDLE_TO_FD_NR => {
            let mut p: PrimeHandle = read(arg, size);
            if p.flags & !DRM_PRIME_FLAGS != 0 {
                return Err(libc::EINVAL);
            }
            p.fd = crate::bo::export_gem(p.handle, p.flags & libc::O_CLOEXEC as u32 != 0)?;
            copy_out(arg as u64, &p, size)?;
            Ok(0)
        }
        AMDGPU_GEM_METADATA_NR => {
            let mut m: GemMetadata = read(arg, size);
            match m.op {
                AMDGPU_GEM_METADATA_OP_GET_METADATA => {
                    let md = crate::bo::gem_metadata(m.handle)?;
                    m.flags = md.flags;
                    m.tiling_info = md.tiling_info;
                    m.data_size_bytes = md.data.len() as u32;
                    m.data = [0; 64];
                    for (i, c) in md.data.chunks(4).enumerate() {
                        let mut w = [0u8; 4];
                        w[..c.len()].copy_from_slice(c);
                        m.data[i] = u32::from_ne_bytes(w);
                    }
                    copy_out(arg as u64, &m, size)?;
                    Ok(0)
                }
                AMDGPU_GEM_METADATA_OP_SET_METADATA => {
                    let n = m.data_size_bytes as usize;
                    if n > crate::bo::METADATA_MAX {
                        return Err(libc::EINVAL);
                    }
                    let bytes: Vec<u8> = m.data.iter().flat_map(|w| w.to_ne_bytes()).collect();
                    crate::bo::set_gem_metadata(
                        m.handle,
                        crate::bo::Metadata {
                            flags: m.flags,
                            tiling_info: m.tiling_info,
                            data: bytes[..n].to_vec(),
                        },
                    )?;
                    Ok(0)
                }
                _ => Err(libc::EINVAL),
            }
        }
        AMDGPU_GEM_OP_NR => {
            let o: GemOp = read(arg, size);
            match o.op {
                AMDGPU_GEM_OP_GET_GEM_CREATE_INFO => {
                    let (bo_size, flags) = crate::bo::gem_create_info(o.handle)?;
                    copy_out(
                        o.value,
                        &create_info(bo_size, flags),
                        std::mem::size_of::<GemCreateIn>(),
                    )?;
                    Ok(0)
                }
                op => {
                    unsupported(request, op, "DRM_AMDGPU_GEM_OP operation");
                    Err(libc::EINVAL)
                }
            }
        }
        GEM_CLOSE_NR => {
            let h: u32 = read(arg, size);
            crate::bo::gem_close(h)?;
            Ok(0)
        }
        AMDGPU_GEM_MMAP_NR => {
            let h: u32 = read(arg, size);
            let off = crate::bo::gem_offset(h)?;
            copy_out(arg as u64, &off, size)?;
            Ok(0)
        }
        AMDGPU_GEM_VA_NR => {
            let v: GemVa = read(arg, size);
            match v.operation {
                AMDGPU_VA_OP_MAP | AMDGPU_VA_OP_UNMAP => {
                    let map = v.operation == AMDGPU_VA_OP_MAP;
                    let e = crate::state::emu_or_open().map_err(|_| libc::ENODEV)?;
                    if !map {
                        e.kfd.free_memory(v.va_address);
                    }
                    crate::bo::gem_va(v.handle, v.va_address, v.offset_in_bo, v.map_size, map)?;
                    if map {
                        e.kfd.map_gem(v.va_address, v.map_size, gpu.node.gpu_id)?;
                    }
                    Ok(0)
                }
                op => {
                    unsupported(request, op, "DRM_AMDGPU_GEM_VA operation");
                    Err(libc::EINVAL)
                }
            }
        }
        n if n >= COMMAND_BASE => {
            unsupported(request, 0, &format!("amdgpu command {:#x}", n - COMMAND_BASE));
            Err(libc::EINVAL)
        }
        n => {
            unsupported(request, 0, &format!("DRM ioctl {n:#x}"));
            Err(libc::EINVAL)
        }
    }
}

fn info(gpu: &Gpu<'_>, request: u64, q: &InfoRequest) -> Reply {
    let (ptr, len) = (q.return_pointer, q.return_size as usize);
    let vram = gpu.node.local_mem;
    match q.query {
        AMDGPU_INFO_ACCEL_WORKING => copy_out(ptr, &1u32, len),
        AMDGPU_INFO_DEV_INFO => copy_out(ptr, &device_info(gpu.node), len),
        // query_hw_ip {type, ip_instance} sits where read_mmr_reg's dword_offset and count are.
        AMDGPU_INFO_HW_IP_COUNT => {
            let n: u32 =
                u32::from(matches!(q.dword_offset, AMDGPU_HW_IP_COMPUTE | AMDGPU_HW_IP_DMA));
            copy_out(ptr, &n, len)
        }
        AMDGPU_INFO_HW_IP_INFO => {
            // struct drm_amdgpu_info_hw_ip: version major/minor, capabilities, IB alignments,
            // available ring mask, IP discovery version.
            let (gfx_major, gfx_minor, _) = gpu.node.gfx;
            let (major, minor, rings) = match q.dword_offset {
                AMDGPU_HW_IP_COMPUTE => (gfx_major, gfx_minor, 0xffu32),
                AMDGPU_HW_IP_DMA => (
                    4,
                    if gfx_minor >= 4 { 4 } else { 2 },
                    (1u32 << gpu.node.sdma_engines.min(31)) - 1,
                ),
                _ => (0, 0, 0),
            };
            #[repr(C)]
            #[derive(Clone, Copy)]
            struct HwIp {
                major: u32,
                minor: u32,
                capabilities: u64,
                ib_start_alignment: u32,
                ib_size_alignment: u32,
                available_rings: u32,
                ip_discovery_version: u32,
            }
            let v = HwIp {
                major,
                minor,
                capabilities: 0,
                ib_start_alignment: 256,
                ib_size_alignment: 4,
                available_rings: rings,
                ip_discovery_version: major << 16 | minor << 8,
            };
            copy_out(ptr, &v, len)
        }
        AMDGPU_INFO_READ_MMR_REG => {
            // Up to 128 registers per request, as amdgpu allows; only GB_ADDR_CONFIG has a value.
            if q.count == 0 || q.count > 128 {
                return Err(libc::EINVAL);
            }
            let regs: Vec<u32> = (0..q.count)
                .map(|i| if q.dword_offset + i == MM_GB_ADDR_CONFIG { GB_ADDR_CONFIG } else { 0 })
                .collect();
            let n = len.min(regs.len() * 4);
            if ptr == 0 {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller gave `return_size` bytes at `return_pointer`.
            unsafe { std::ptr::copy_nonoverlapping(regs.as_ptr().cast::<u8>(), ptr as *mut u8, n) };
            Ok(())
        }
        AMDGPU_INFO_VRAM_GTT => copy_out(ptr, &[vram, vram, gpu.gtt_size], len),
        AMDGPU_INFO_VRAM_USAGE | AMDGPU_INFO_VIS_VRAM_USAGE => copy_out(ptr, &gpu.vram_used, len),
        AMDGPU_INFO_GTT_USAGE => copy_out(ptr, &0u64, len),
        AMDGPU_INFO_MEMORY => {
            // struct drm_amdgpu_memory_info: vram, cpu_accessible_vram, gtt; each
            // {total_heap_size, usable_heap_size, heap_usage, max_allocation}.
            let heap = |total: u64, used: u64| [total, total, used, total * 3 / 4];
            let m: [[u64; 4]; 3] =
                [heap(vram, gpu.vram_used), heap(vram, gpu.vram_used), heap(gpu.gtt_size, 0)];
            copy_out(ptr, &m, len)
        }
        AMDGPU_INFO_FW_VERSION => {
            copy_out(ptr, &[xhsa_emu::kfd::topology::MEC_FW_VERSION, 0u32], len)
        }
        other => {
            unsupported(request, other, &format!("AMDGPU_INFO query {other:#x}"));
            return Err(libc::EINVAL);
        }
    }
    .map(|()| 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhsa_emu::config::Config;
    use xhsa_emu::kfd::topology;

    #[test]
    fn the_device_info_layout_is_the_uapi_one() {
        // offsetof/sizeof of struct drm_amdgpu_info_device compiled from sid's amdgpu_drm.h
        // (linux-libc-dev 6.x): 136, 336, 440.
        assert_eq!(std::mem::offset_of!(InfoDevice, ids_flags), 136);
        assert_eq!(std::mem::offset_of!(InfoDevice, high_va_offset), 336);
        assert_eq!(std::mem::size_of::<InfoDevice>(), 440);
        assert_eq!(std::mem::size_of::<DrmVersion>(), 64);
        assert_eq!(std::mem::size_of::<InfoRequest>(), 32);
    }

    #[test]
    fn the_gem_layouts_are_the_uapi_ones() {
        // sizeof(struct drm_amdgpu_gem_metadata), drm_amdgpu_gem_op, drm_amdgpu_gem_create_in,
        // drm_prime_handle.
        assert_eq!(std::mem::size_of::<GemMetadata>(), 288);
        assert_eq!(std::mem::offset_of!(GemMetadata, data_size_bytes), 24);
        assert_eq!(std::mem::size_of::<GemOp>(), 16);
        assert_eq!(std::mem::size_of::<GemCreateIn>(), 32);
        assert_eq!(std::mem::size_of::<PrimeHandle>(), 12);
    }

    /// DRM_IOWR(nr, size) of the render node.
    fn iowr(nr: u64, size: usize) -> u64 {
        3 << 30 | (size as u64) << 16 | DRM_TYPE << 8 | nr
    }

    #[test]
    fn metadata_set_through_one_handle_is_read_through_another_and_create_info_reports_kfds_bo() {
        use xhsa_ioctl::abi::memory::{
            KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC, KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
        };
        let nodes = topology::nodes_for(&Config::default(), 1, 1 << 30, 2, topology::GFX942);
        let gpu = Gpu { node: &nodes[1], vram_used: 0, gtt_size: 1 << 30 };
        let flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        let off = crate::bo::create(0, 3 * 4096, nodes[1].gpu_id, flags).unwrap();
        crate::bo::set_handle(off, 0xd0d0);
        let fd = crate::bo::export(0xd0d0, true).unwrap();
        let prime =
            |nr, p: &mut PrimeHandle| ioctl(&gpu, iowr(nr, 12), (p as *mut PrimeHandle).cast());
        let mut p = PrimeHandle { fd, ..Default::default() };
        assert_eq!(prime(PRIME_FD_TO_HANDLE_NR, &mut p), Ok(0));
        let h = p.handle;
        // ROCr 7.x's exporter: a 4-byte tag.
        let mut m = GemMetadata {
            handle: h,
            op: AMDGPU_GEM_METADATA_OP_SET_METADATA,
            data_size_bytes: 4,
            ..Default::default()
        };
        m.data[0] = 0x5eed_1234;
        let meta = |m: &mut GemMetadata| {
            ioctl(&gpu, iowr(AMDGPU_GEM_METADATA_NR, 288), (m as *mut GemMetadata).cast())
        };
        assert_eq!(meta(&mut m), Ok(0));
        // Another handle of the buffer, through a DMA-buf of the first one.
        let mut q = PrimeHandle { handle: h, flags: libc::O_CLOEXEC as u32, ..Default::default() };
        assert_eq!(prime(PRIME_HANDLE_TO_FD_NR, &mut q), Ok(0));
        let mut r = PrimeHandle { fd: q.fd, ..Default::default() };
        assert_eq!(prime(PRIME_FD_TO_HANDLE_NR, &mut r), Ok(0));
        assert_eq!(r.handle, h, "one buffer, one handle per DRM file");
        let mut g = GemMetadata {
            handle: h,
            op: AMDGPU_GEM_METADATA_OP_GET_METADATA,
            ..Default::default()
        };
        assert_eq!(meta(&mut g), Ok(0));
        assert_eq!((g.data_size_bytes, g.data[0]), (4, 0x5eed_1234));
        let mut info = GemCreateIn::default();
        let mut o = GemOp {
            handle: h,
            op: AMDGPU_GEM_OP_GET_GEM_CREATE_INFO,
            value: &mut info as *mut GemCreateIn as u64,
        };
        assert_eq!(ioctl(&gpu, iowr(AMDGPU_GEM_OP_NR, 16), (&mut o as *mut GemOp).cast()), Ok(0));
        assert_eq!(
            info,
            GemCreateIn {
                bo_size: 3 * 4096,
                alignment: 4096,
                domains: AMDGPU_GEM_DOMAIN_VRAM,
                domain_flags: AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE
                    | AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED,
            }
        );
        // amdgpu's refusals: more than 256 bytes of metadata, an unknown handle, bad flags.
        m.data_size_bytes = 257;
        assert_eq!(meta(&mut m), Err(libc::EINVAL));
        g.handle = 0xbad;
        assert_eq!(meta(&mut g), Err(libc::ENOENT));
        let mut bad = PrimeHandle { handle: h, flags: 0x10, ..Default::default() };
        assert_eq!(prime(PRIME_HANDLE_TO_FD_NR, &mut bad), Err(libc::EINVAL));
        let mut close_arg = [h, 0u32];
        let close_req = 1 << 30 | 8 << 16 | DRM_TYPE << 8 | GEM_CLOSE_NR;
        assert_eq!(ioctl(&gpu, close_req, close_arg.as_mut_ptr().cast()), Ok(0));
        crate::bo::free(0xd0d0);
        // SAFETY: closing the descriptors this test got.
        unsafe {
            libc::close(fd);
            libc::close(q.fd);
        }
    }

    #[test]
    fn an_mi308x_answers_version_and_device_info() {
        let nodes = topology::nodes_for(&Config::default(), 1, 1 << 30, 2, topology::GFX942);
        let gpu = Gpu { node: &nodes[1], vram_used: 0, gtt_size: 1 << 30 };
        let mut name = [0u8; 16];
        let mut v =
            DrmVersion { name_len: 16, name: name.as_mut_ptr() as u64, ..Default::default() };
        let req = 0xc040_6400u64; // DRM_IOWR(0x00, struct drm_version)
        assert_eq!(ioctl(&gpu, req, (&mut v as *mut DrmVersion).cast()), Ok(0));
        assert_eq!((v.major, &name[..v.name_len as usize]), (3, &b"amdgpu"[..]));
        let mut d = InfoDevice::default();
        let mut q = InfoRequest {
            return_pointer: &mut d as *mut InfoDevice as u64,
            return_size: 440,
            query: AMDGPU_INFO_DEV_INFO,
            ..Default::default()
        };
        let req = 0x4020_6445u64; // DRM_IOW(0x45, struct drm_amdgpu_info)
        assert_eq!(ioctl(&gpu, req, (&mut q as *mut InfoRequest).cast()), Ok(0));
        assert_eq!((d.family, d.cu_active_number, d.device_id), (AMDGPU_FAMILY_AI, 80, 0x74a2));
        q.query = 0x7f;
        assert_eq!(ioctl(&gpu, req, (&mut q as *mut InfoRequest).cast()), Err(libc::EINVAL));
    }
}
