//! Process, version, topology, clocks and the trap handler.

use hsa_sys::hsakmt::*;
use xhsa_emu::kfd::topology::Node;
use xhsa_ioctl::abi::debug::{RuntimeEnableArgs, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK};
use xhsa_ioctl::abi::process::GetClockCountersArgs;
use xhsa_ioctl::abi::request::{
    AMDKFD_IOC_GET_CLOCK_COUNTERS, AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_RUNTIME_ENABLE,
};
use xhsa_ioctl::abi::version::GetVersionArgs;

use crate::interpose::kfd_call;

use super::{emu, errno_status, status};
use crate::{guard, state};

#[no_mangle]
pub extern "C" fn hsaKmtOpenKFD() -> HSAKMT_STATUS {
    guard("hsaKmtOpenKFD", || match state::open() {
        Ok(()) => HSAKMT_STATUS_SUCCESS,
        Err(e) => {
            tracing::error!("xhsa-emu: cannot open the emulated KFD: {e}");
            HSAKMT_STATUS_ERROR
        }
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtCloseKFD() -> HSAKMT_STATUS {
    guard("hsaKmtCloseKFD", || {
        if state::close() {
            HSAKMT_STATUS_SUCCESS
        } else {
            HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED
        }
    })
}

/// `hsaKmtGetVersion`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `info` is null or valid for writing an `HsaVersionInfo`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetVersion(info: *mut HsaVersionInfo) -> HSAKMT_STATUS {
    guard("hsaKmtGetVersion", || {
        status((|| {
            let e = emu()?;
            let mut a = GetVersionArgs::default();
            kfd_call(e.fd, AMDKFD_IOC_GET_VERSION, &mut a).map_err(errno_status)?;
            // SAFETY: checked non-null; ROCr passes a writable HsaVersionInfo.
            let out = unsafe { info.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            out.KernelInterfaceMajorVersion = a.major_version;
            out.KernelInterfaceMinorVersion = a.minor_version;
            Ok(())
        })())
    })
}

/// ROCr 5.2's `hsaKmtRuntimeEnable`: the emulated KFD's runtime is enabled (as ROCm 6.x's ROCr
/// does at start, so debug-trap operations work), but NOT_SUPPORTED is returned, exactly what
/// the real 5.2 thunk answers on every upstream kernel; ROCr then reports queue errors through
/// `queue_inactive_signal`, the path this emulator models.
#[no_mangle]
pub extern "C" fn hsaKmtRuntimeEnable(
    _r_debug: *mut libc::c_void,
    _setup_ttmp: bool,
) -> HSAKMT_STATUS {
    guard("hsaKmtRuntimeEnable", || match emu() {
        Ok(e) => {
            let mut a = RuntimeEnableArgs {
                r_debug: _r_debug as u64,
                mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
                capabilities_mask: 0,
            };
            if let Err(errno) = kfd_call(e.fd, AMDKFD_IOC_RUNTIME_ENABLE, &mut a) {
                tracing::warn!("xhsa-emu: RUNTIME_ENABLE failed: errno {errno}");
            }
            HSAKMT_STATUS_NOT_SUPPORTED
        }
        Err(s) => s,
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtRuntimeDisable() -> HSAKMT_STATUS {
    guard("hsaKmtRuntimeDisable", || match emu() {
        Ok(e) => {
            let mut a = RuntimeEnableArgs::default();
            let _ = kfd_call(e.fd, AMDKFD_IOC_RUNTIME_ENABLE, &mut a);
            HSAKMT_STATUS_SUCCESS
        }
        Err(s) => s,
    })
}

/// `hsaKmtAcquireSystemProperties`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `props` is null or valid for writing an
/// `HsaSystemProperties`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtAcquireSystemProperties(
    props: *mut HsaSystemProperties,
) -> HSAKMT_STATUS {
    guard("hsaKmtAcquireSystemProperties", || {
        status((|| {
            let e = emu()?;
            // SAFETY: checked non-null; a writable HsaSystemProperties.
            let p = unsafe { props.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            *p = HsaSystemProperties::default();
            p.NumNodes = e.nodes.len() as u32;
            p.PlatformOem = 0x414d44; // "AMD"
            p.PlatformId = 0x58485341; // "XHSA"
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtReleaseSystemProperties() -> HSAKMT_STATUS {
    HSAKMT_STATUS_SUCCESS
}

fn node_props(n: &Node, id: u32) -> HsaNodeProperties {
    let mut p = HsaNodeProperties {
        NumCPUCores: n.cpu_cores,
        NumFComputeCores: n.simds,
        ..Default::default()
    };
    p.NumMemoryBanks = n.mem.len() as u32;
    p.NumCaches = n.caches.len() as u32;
    p.NumIOLinks = n.links.len() as u32;
    p.CComputeIdLo = n.ccompute_id_lo;
    p.FComputeIdLo = n.fcompute_id_lo;
    if n.simds > 0 {
        // HSA_CAPABILITY as the sysfs `capability` says (DoorbellType 2, SRAM EDC, the
        // debugger's bits); SVMAPISupported stays 0.
        p.Capability = HSA_CAPABILITY { Value: xhsa_emu::kfd::sysfs::CAPABILITY };
        // HSA_ENGINE_ID: uCode 0-9, Major 10-15, Minor 16-23, Stepping 24-31.
        let (maj, min, step) = n.gfx;
        p.EngineId = HSA_ENGINE_ID {
            Value: xhsa_emu::kfd::topology::MEC_UCODE | maj << 10 | min << 16 | step << 24,
        };
        p.MaxWavesPerSIMD = n.waves_per_simd;
        p.LDSSizeInKB = n.lds_kib;
        p.NumGws = xhsa_emu::kfd::sysfs::GWS_PER_GPU as u8;
        p.WaveFrontSize = n.wave_size;
        p.NumShaderBanks = n.shader_banks;
        p.NumArrays = n.arrays;
        p.NumCUPerArray = n.cus_per_array;
        p.NumSIMDPerCU = n.simds_per_cu;
        p.MaxSlotsScratchCU = n.scratch_slots_per_cu;
        p.VendorId = n.vendor_id;
        p.DeviceId = n.device_id;
        p.LocationId = n.location_id;
        p.LocalMemSize = n.local_mem;
        p.MaxEngineClockMhzFCompute = n.max_clock_mhz;
        p.DrmRenderMinor = n.drm_minor;
        p.NumSdmaEngines = n.sdma_engines;
        p.NumSdmaQueuesPerEngine = n.sdma_queues_per_engine as u8;
        p.NumCpQueues = n.cp_queues.min(255) as u8;
        p.UniqueID = n.unique_id;
        p.Domain = 0;
    } else {
        p.MaxEngineClockMhzCCompute = n.max_clock_mhz;
    }
    for (i, c) in n.marketing_name.encode_utf16().take(63).enumerate() {
        p.MarketingName[i] = c;
    }
    for (i, c) in n.amd_name.bytes().take(63).enumerate() {
        p.AMDName[i] = c;
    }
    let _ = id;
    p
}

/// `hsaKmtGetNodeProperties`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `props` is null or valid for writing an `HsaNodeProperties`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetNodeProperties(
    node: u32,
    props: *mut HsaNodeProperties,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetNodeProperties", || {
        status((|| {
            let e = emu()?;
            let n = e.node(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            // SAFETY: checked non-null; a writable HsaNodeProperties.
            let p = unsafe { props.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            *p = node_props(n, node);
            Ok(())
        })())
    })
}

/// `hsaKmtGetNodeMemoryProperties`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `props` is null or valid for writing `num`
/// `HsaMemoryProperties`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetNodeMemoryProperties(
    node: u32,
    num: u32,
    props: *mut HsaMemoryProperties,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetNodeMemoryProperties", || {
        status((|| {
            let e = emu()?;
            let n = e.node(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            if props.is_null() {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            for (i, b) in n.mem.iter().take(num as usize).enumerate() {
                let mut m = HsaMemoryProperties { HeapType: b.heap, ..Default::default() };
                m.__bindgen_anon_1.SizeInBytes = b.size;
                m.Width = b.width_bits;
                m.MemoryClockMax = b.clock_mhz;
                m.VirtualBaseAddress = b.base;
                // SAFETY: ROCr passes an array of `num` entries; i < num.
                unsafe { props.add(i).write_unaligned(m) };
            }
            Ok(())
        })())
    })
}

/// `hsaKmtGetNodeCacheProperties`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `props` is null or valid for writing `num`
/// `HsaCacheProperties`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetNodeCacheProperties(
    node: u32,
    _processor_id: u32,
    num: u32,
    props: *mut HsaCacheProperties,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetNodeCacheProperties", || {
        status((|| {
            let e = emu()?;
            let n = e.node(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            if props.is_null() {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            for (i, c) in n.caches.iter().take(num as usize).enumerate() {
                let mut p = HsaCacheProperties {
                    ProcessorIdLow: c.processor_id,
                    CacheLevel: c.level,
                    CacheSize: c.size_kib,
                    CacheLineSize: c.line,
                    CacheLinesPerTag: 1,
                    CacheAssociativity: 16,
                    CacheLatency: 100,
                    ..Default::default()
                };
                p.CacheType = HsaCacheType { Value: c.kind };
                p.SiblingMap[0] = 1;
                // SAFETY: ROCr passes an array of `num` entries; i < num.
                unsafe { props.add(i).write_unaligned(p) };
            }
            Ok(())
        })())
    })
}

/// `hsaKmtGetNodeIoLinkProperties`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `props` is null or valid for writing `num`
/// `HsaIoLinkProperties`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetNodeIoLinkProperties(
    node: u32,
    num: u32,
    props: *mut HsaIoLinkProperties,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetNodeIoLinkProperties", || {
        status((|| {
            let e = emu()?;
            let n = e.node(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            if props.is_null() {
                return Err(HSAKMT_STATUS_INVALID_PARAMETER);
            }
            for (i, l) in n.links.iter().take(num as usize).enumerate() {
                let p = HsaIoLinkProperties {
                    IoLinkType: l.kind,
                    VersionMajor: 4,
                    VersionMinor: 0,
                    NodeFrom: l.from,
                    NodeTo: l.to,
                    Weight: l.weight,
                    MinimumLatency: 1000,
                    MaximumLatency: 2000,
                    MinimumBandwidth: 16_000,
                    MaximumBandwidth: 64_000,
                    RecTransferSize: 0,
                    ..Default::default()
                };
                // SAFETY: ROCr passes an array of `num` entries; i < num.
                unsafe { props.add(i).write_unaligned(p) };
            }
            Ok(())
        })())
    })
}

/// `hsaKmtGetClockCounters`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `counters` is null or valid for writing an
/// `HsaClockCounters`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetClockCounters(
    node: u32,
    counters: *mut HsaClockCounters,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetClockCounters", || {
        status((|| {
            let e = emu()?;
            let gpu_id = e.gpu_id(node).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            let mut a = GetClockCountersArgs { gpu_id, ..Default::default() };
            kfd_call(e.fd, AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a).map_err(errno_status)?;
            // SAFETY: checked non-null; a writable HsaClockCounters.
            let c = unsafe { counters.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            c.GPUClockCounter = a.gpu_clock_counter;
            c.CPUClockCounter = a.cpu_clock_counter;
            c.SystemClockCounter = a.system_clock_counter;
            c.SystemClockFrequencyHz = a.system_clock_freq;
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtSetTrapHandler(
    node: u32,
    _base: *mut libc::c_void,
    _size: u64,
    _buf: *mut libc::c_void,
    _buf_size: u64,
) -> HSAKMT_STATUS {
    guard("hsaKmtSetTrapHandler", || match emu() {
        Ok(e) if e.gpu_id(node).is_some_and(|g| g != 0) => HSAKMT_STATUS_SUCCESS,
        Ok(_) => HSAKMT_STATUS_INVALID_NODE_UNIT,
        Err(s) => s,
    })
}

/// A GB_ADDR_CONFIG value of a gfx9 part, for ROCr's image address library.
const GB_ADDR_CONFIG: u32 = 0x2a11_4042;

/// `hsaKmtGetTileConfig`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `config` is null or a readable and writable
/// `HsaGpuTileConfig` whose array pointers, when non-null, have room for the counts it gives.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetTileConfig(
    node: u32,
    config: *mut HsaGpuTileConfig,
) -> HSAKMT_STATUS {
    guard("hsaKmtGetTileConfig", || {
        status((|| {
            let e = emu()?;
            e.gpu_id(node).filter(|&g| g != 0).ok_or(HSAKMT_STATUS_INVALID_NODE_UNIT)?;
            // SAFETY: checked non-null; ROCr passes its own config with array pointers.
            let c = unsafe { config.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            // gfx9 has no tile-mode tables.
            c.NumTileConfigs = 0;
            c.NumMacroTileConfigs = 0;
            c.GbAddrConfig = GB_ADDR_CONFIG;
            c.NumBanks = 16;
            c.NumRanks = 2;
            Ok(())
        })())
    })
}

/// `hsaKmtGetXNACKMode`, over the emulated KFD.
///
/// # Safety
///
/// The thunk's contract (`hsakmt.h`): `enable` is null or valid for writing an `i32`.
#[no_mangle]
pub unsafe extern "C" fn hsaKmtGetXNACKMode(enable: *mut i32) -> HSAKMT_STATUS {
    guard("hsaKmtGetXNACKMode", || {
        status((|| {
            emu()?;
            // SAFETY: checked non-null.
            let p = unsafe { enable.as_mut() }.ok_or(HSAKMT_STATUS_INVALID_PARAMETER)?;
            *p = 0;
            Ok(())
        })())
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtSetXNACKMode(enable: i32) -> HSAKMT_STATUS {
    guard("hsaKmtSetXNACKMode", || match emu() {
        Ok(_) if enable == 0 => HSAKMT_STATUS_SUCCESS,
        Ok(_) => HSAKMT_STATUS_NOT_SUPPORTED,
        Err(s) => s,
    })
}

#[no_mangle]
pub extern "C" fn hsaKmtSetMemoryPolicy(
    _node: u32,
    _default: u32,
    _alternate: u32,
    _addr: *mut libc::c_void,
    _size: u64,
) -> HSAKMT_STATUS {
    guard("hsaKmtSetMemoryPolicy", || status(emu().map(|_| ())))
}

crate::symver!(
    hsaKmtOpenKFD,
    hsaKmtCloseKFD,
    hsaKmtGetVersion,
    hsaKmtRuntimeEnable,
    hsaKmtRuntimeDisable,
    hsaKmtAcquireSystemProperties,
    hsaKmtReleaseSystemProperties,
    hsaKmtGetNodeProperties,
    hsaKmtGetNodeMemoryProperties,
    hsaKmtGetNodeCacheProperties,
    hsaKmtGetNodeIoLinkProperties,
    hsaKmtGetClockCounters,
    hsaKmtSetTrapHandler,
    hsaKmtGetTileConfig,
    hsaKmtGetXNACKMode,
    hsaKmtSetXNACKMode,
    hsaKmtSetMemoryPolicy,
);
