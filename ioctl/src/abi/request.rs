//! The `AMDKFD_IOC_*` request numbers of uapi 1.17, computed from the argument structs, and
//! [`Request`], the typed name of each (for code that parses ioctls, like an emulated KFD).

use super::criu::CriuArgs;
use super::dbg_trap::DbgTrapArgs;
use super::debug::{
    DbgAddressWatchArgs, DbgRegisterArgs, DbgUnregisterArgs, DbgWaveControlArgs, RuntimeEnableArgs,
};
use super::event::{
    CreateEventArgs, DestroyEventArgs, ResetEventArgs, SetEventArgs, WaitEventsArgs,
};
use super::ioc::{ior, iow, iowr, IocDir, IocFields, RawRequest};
use super::memory::{
    AllocMemoryOfGpuArgs, ExportDmabufArgs, FreeMemoryOfGpuArgs, GetAvailableMemoryArgs,
    GetDmabufInfoArgs, ImportDmabufArgs, MapMemoryToGpuArgs, SetMemoryPolicyArgs,
    UnmapMemoryFromGpuArgs,
};
use super::process::{
    AcquireVmArgs, GetClockCountersArgs, GetProcessAperturesArgs, GetProcessAperturesNewArgs,
    GetTileConfigArgs, SetScratchBackingVaArgs, SetTrapHandlerArgs,
};
use super::queue::{
    AllocQueueGwsArgs, CreateQueueArgs, DestroyQueueArgs, GetQueueWaveStateArgs, SetCuMaskArgs,
    UpdateQueueArgs,
};
use super::smi::SmiEventsArgs;
use super::svm::{SetXnackModeArgs, SvmArgs};
use super::version::GetVersionArgs;

/// `AMDKFD_IOCTL_BASE`: the ioctl type letter of amdkfd.
pub const AMDKFD_IOCTL_BASE: u8 = b'K';
/// `AMDKFD_COMMAND_START`: the first command number.
pub const AMDKFD_COMMAND_START: u8 = 0x01;
/// `AMDKFD_COMMAND_END`: one past the last command number.
pub const AMDKFD_COMMAND_END: u8 = 0x27;

const K: u8 = AMDKFD_IOCTL_BASE;

pub const AMDKFD_IOC_GET_VERSION: RawRequest = ior::<GetVersionArgs>(K, 0x01);
pub const AMDKFD_IOC_CREATE_QUEUE: RawRequest = iowr::<CreateQueueArgs>(K, 0x02);
pub const AMDKFD_IOC_DESTROY_QUEUE: RawRequest = iowr::<DestroyQueueArgs>(K, 0x03);
pub const AMDKFD_IOC_SET_MEMORY_POLICY: RawRequest = iow::<SetMemoryPolicyArgs>(K, 0x04);
pub const AMDKFD_IOC_GET_CLOCK_COUNTERS: RawRequest = iowr::<GetClockCountersArgs>(K, 0x05);
pub const AMDKFD_IOC_GET_PROCESS_APERTURES: RawRequest = ior::<GetProcessAperturesArgs>(K, 0x06);
pub const AMDKFD_IOC_UPDATE_QUEUE: RawRequest = iow::<UpdateQueueArgs>(K, 0x07);
pub const AMDKFD_IOC_CREATE_EVENT: RawRequest = iowr::<CreateEventArgs>(K, 0x08);
pub const AMDKFD_IOC_DESTROY_EVENT: RawRequest = iow::<DestroyEventArgs>(K, 0x09);
pub const AMDKFD_IOC_SET_EVENT: RawRequest = iow::<SetEventArgs>(K, 0x0A);
pub const AMDKFD_IOC_RESET_EVENT: RawRequest = iow::<ResetEventArgs>(K, 0x0B);
pub const AMDKFD_IOC_WAIT_EVENTS: RawRequest = iowr::<WaitEventsArgs>(K, 0x0C);
pub const AMDKFD_IOC_DBG_REGISTER_DEPRECATED: RawRequest = iow::<DbgRegisterArgs>(K, 0x0D);
pub const AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED: RawRequest = iow::<DbgUnregisterArgs>(K, 0x0E);
pub const AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED: RawRequest = iow::<DbgAddressWatchArgs>(K, 0x0F);
pub const AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED: RawRequest = iow::<DbgWaveControlArgs>(K, 0x10);
pub const AMDKFD_IOC_SET_SCRATCH_BACKING_VA: RawRequest = iowr::<SetScratchBackingVaArgs>(K, 0x11);
pub const AMDKFD_IOC_GET_TILE_CONFIG: RawRequest = iowr::<GetTileConfigArgs>(K, 0x12);
pub const AMDKFD_IOC_SET_TRAP_HANDLER: RawRequest = iow::<SetTrapHandlerArgs>(K, 0x13);
pub const AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: RawRequest =
    iowr::<GetProcessAperturesNewArgs>(K, 0x14);
pub const AMDKFD_IOC_ACQUIRE_VM: RawRequest = iow::<AcquireVmArgs>(K, 0x15);
pub const AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: RawRequest = iowr::<AllocMemoryOfGpuArgs>(K, 0x16);
pub const AMDKFD_IOC_FREE_MEMORY_OF_GPU: RawRequest = iow::<FreeMemoryOfGpuArgs>(K, 0x17);
pub const AMDKFD_IOC_MAP_MEMORY_TO_GPU: RawRequest = iowr::<MapMemoryToGpuArgs>(K, 0x18);
pub const AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: RawRequest = iowr::<UnmapMemoryFromGpuArgs>(K, 0x19);
pub const AMDKFD_IOC_SET_CU_MASK: RawRequest = iow::<SetCuMaskArgs>(K, 0x1A);
pub const AMDKFD_IOC_GET_QUEUE_WAVE_STATE: RawRequest = iowr::<GetQueueWaveStateArgs>(K, 0x1B);
pub const AMDKFD_IOC_GET_DMABUF_INFO: RawRequest = iowr::<GetDmabufInfoArgs>(K, 0x1C);
pub const AMDKFD_IOC_IMPORT_DMABUF: RawRequest = iowr::<ImportDmabufArgs>(K, 0x1D);
pub const AMDKFD_IOC_ALLOC_QUEUE_GWS: RawRequest = iowr::<AllocQueueGwsArgs>(K, 0x1E);
pub const AMDKFD_IOC_SMI_EVENTS: RawRequest = iowr::<SmiEventsArgs>(K, 0x1F);
pub const AMDKFD_IOC_SVM: RawRequest = iowr::<SvmArgs>(K, 0x20);
pub const AMDKFD_IOC_SET_XNACK_MODE: RawRequest = iowr::<SetXnackModeArgs>(K, 0x21);
pub const AMDKFD_IOC_CRIU_OP: RawRequest = iowr::<CriuArgs>(K, 0x22);
pub const AMDKFD_IOC_AVAILABLE_MEMORY: RawRequest = iowr::<GetAvailableMemoryArgs>(K, 0x23);
pub const AMDKFD_IOC_EXPORT_DMABUF: RawRequest = iowr::<ExportDmabufArgs>(K, 0x24);
pub const AMDKFD_IOC_RUNTIME_ENABLE: RawRequest = iowr::<RuntimeEnableArgs>(K, 0x25);
pub const AMDKFD_IOC_DBG_TRAP: RawRequest = iowr::<DbgTrapArgs>(K, 0x26);

/// One amdkfd ioctl of uapi 1.17. The discriminant is the command number (`_IOC_NR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Request {
    GetVersion = 0x01,
    CreateQueue = 0x02,
    DestroyQueue = 0x03,
    SetMemoryPolicy = 0x04,
    GetClockCounters = 0x05,
    GetProcessApertures = 0x06,
    UpdateQueue = 0x07,
    CreateEvent = 0x08,
    DestroyEvent = 0x09,
    SetEvent = 0x0A,
    ResetEvent = 0x0B,
    WaitEvents = 0x0C,
    DbgRegisterDeprecated = 0x0D,
    DbgUnregisterDeprecated = 0x0E,
    DbgAddressWatchDeprecated = 0x0F,
    DbgWaveControlDeprecated = 0x10,
    SetScratchBackingVa = 0x11,
    GetTileConfig = 0x12,
    SetTrapHandler = 0x13,
    GetProcessAperturesNew = 0x14,
    AcquireVm = 0x15,
    AllocMemoryOfGpu = 0x16,
    FreeMemoryOfGpu = 0x17,
    MapMemoryToGpu = 0x18,
    UnmapMemoryFromGpu = 0x19,
    SetCuMask = 0x1A,
    GetQueueWaveState = 0x1B,
    GetDmabufInfo = 0x1C,
    ImportDmabuf = 0x1D,
    AllocQueueGws = 0x1E,
    SmiEvents = 0x1F,
    Svm = 0x20,
    SetXnackMode = 0x21,
    CriuOp = 0x22,
    AvailableMemory = 0x23,
    ExportDmabuf = 0x24,
    RuntimeEnable = 0x25,
    DbgTrap = 0x26,
}

impl Request {
    /// Every request, in command-number order (`ALL[i].nr() == i + 1`).
    pub const ALL: [Request; 38] = [
        Request::GetVersion,
        Request::CreateQueue,
        Request::DestroyQueue,
        Request::SetMemoryPolicy,
        Request::GetClockCounters,
        Request::GetProcessApertures,
        Request::UpdateQueue,
        Request::CreateEvent,
        Request::DestroyEvent,
        Request::SetEvent,
        Request::ResetEvent,
        Request::WaitEvents,
        Request::DbgRegisterDeprecated,
        Request::DbgUnregisterDeprecated,
        Request::DbgAddressWatchDeprecated,
        Request::DbgWaveControlDeprecated,
        Request::SetScratchBackingVa,
        Request::GetTileConfig,
        Request::SetTrapHandler,
        Request::GetProcessAperturesNew,
        Request::AcquireVm,
        Request::AllocMemoryOfGpu,
        Request::FreeMemoryOfGpu,
        Request::MapMemoryToGpu,
        Request::UnmapMemoryFromGpu,
        Request::SetCuMask,
        Request::GetQueueWaveState,
        Request::GetDmabufInfo,
        Request::ImportDmabuf,
        Request::AllocQueueGws,
        Request::SmiEvents,
        Request::Svm,
        Request::SetXnackMode,
        Request::CriuOp,
        Request::AvailableMemory,
        Request::ExportDmabuf,
        Request::RuntimeEnable,
        Request::DbgTrap,
    ];

    /// The C macro name, e.g. `"AMDKFD_IOC_SET_CU_MASK"`.
    pub const fn name(self) -> &'static str {
        self.entry().0
    }

    /// The full request number, as passed to `ioctl(2)`.
    pub const fn raw(self) -> RawRequest {
        self.entry().1
    }

    /// The command number (`_IOC_NR`).
    pub const fn nr(self) -> u8 {
        self as u8
    }

    /// The argument size encoded in the number (`_IOC_SIZE`), `size_of` the argument struct.
    pub const fn arg_size(self) -> usize {
        IocFields::decode(self.raw()).size
    }

    /// The copy direction encoded in the number (`_IOC_DIR`).
    pub const fn dir(self) -> IocDir {
        match IocFields::decode(self.raw()).direction() {
            Some(dir) => dir,
            None => unreachable!(),
        }
    }

    /// The request whose command number is `nr`.
    pub const fn from_nr(nr: u8) -> Option<Request> {
        if nr >= AMDKFD_COMMAND_START && nr < AMDKFD_COMMAND_END {
            Some(Request::ALL[(nr - AMDKFD_COMMAND_START) as usize])
        } else {
            None
        }
    }

    /// The request whose number is exactly `raw` (type `'K'`, number, direction and the 1.17
    /// argument size all match).
    pub const fn from_raw(raw: RawRequest) -> Option<Request> {
        match Request::from_raw_lenient(raw) {
            Some(req) if req.raw() == raw => Some(req),
            _ => None,
        }
    }

    /// The request amdkfd would run for `raw`: `kfd_ioctl()` indexes its table by `_IOC_NR`
    /// alone and copies `max(user size, its size)` bytes, zero-filling what a shorter user
    /// struct lacks, so older or newer argument sizes still reach the same handler (a uapi
    /// 1.11 `CREATE_QUEUE` of 88 bytes is run as the 96-byte 1.17 one). This also checks the
    /// type letter is `'K'`, which the kernel leaves to the fd.
    pub const fn from_raw_lenient(raw: RawRequest) -> Option<Request> {
        let fields = IocFields::decode(raw);
        if fields.ty != AMDKFD_IOCTL_BASE {
            return None;
        }
        Request::from_nr(fields.nr)
    }

    /// `(name, number)` of each request: the one table behind [`Request::name`] and
    /// [`Request::raw`].
    const fn entry(self) -> (&'static str, RawRequest) {
        use Request::*;
        match self {
            GetVersion => ("AMDKFD_IOC_GET_VERSION", AMDKFD_IOC_GET_VERSION),
            CreateQueue => ("AMDKFD_IOC_CREATE_QUEUE", AMDKFD_IOC_CREATE_QUEUE),
            DestroyQueue => ("AMDKFD_IOC_DESTROY_QUEUE", AMDKFD_IOC_DESTROY_QUEUE),
            SetMemoryPolicy => ("AMDKFD_IOC_SET_MEMORY_POLICY", AMDKFD_IOC_SET_MEMORY_POLICY),
            GetClockCounters => ("AMDKFD_IOC_GET_CLOCK_COUNTERS", AMDKFD_IOC_GET_CLOCK_COUNTERS),
            GetProcessApertures => {
                ("AMDKFD_IOC_GET_PROCESS_APERTURES", AMDKFD_IOC_GET_PROCESS_APERTURES)
            }
            UpdateQueue => ("AMDKFD_IOC_UPDATE_QUEUE", AMDKFD_IOC_UPDATE_QUEUE),
            CreateEvent => ("AMDKFD_IOC_CREATE_EVENT", AMDKFD_IOC_CREATE_EVENT),
            DestroyEvent => ("AMDKFD_IOC_DESTROY_EVENT", AMDKFD_IOC_DESTROY_EVENT),
            SetEvent => ("AMDKFD_IOC_SET_EVENT", AMDKFD_IOC_SET_EVENT),
            ResetEvent => ("AMDKFD_IOC_RESET_EVENT", AMDKFD_IOC_RESET_EVENT),
            WaitEvents => ("AMDKFD_IOC_WAIT_EVENTS", AMDKFD_IOC_WAIT_EVENTS),
            DbgRegisterDeprecated => {
                ("AMDKFD_IOC_DBG_REGISTER_DEPRECATED", AMDKFD_IOC_DBG_REGISTER_DEPRECATED)
            }
            DbgUnregisterDeprecated => {
                ("AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED", AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED)
            }
            DbgAddressWatchDeprecated => {
                ("AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED", AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED)
            }
            DbgWaveControlDeprecated => {
                ("AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED", AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED)
            }
            SetScratchBackingVa => {
                ("AMDKFD_IOC_SET_SCRATCH_BACKING_VA", AMDKFD_IOC_SET_SCRATCH_BACKING_VA)
            }
            GetTileConfig => ("AMDKFD_IOC_GET_TILE_CONFIG", AMDKFD_IOC_GET_TILE_CONFIG),
            SetTrapHandler => ("AMDKFD_IOC_SET_TRAP_HANDLER", AMDKFD_IOC_SET_TRAP_HANDLER),
            GetProcessAperturesNew => {
                ("AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", AMDKFD_IOC_GET_PROCESS_APERTURES_NEW)
            }
            AcquireVm => ("AMDKFD_IOC_ACQUIRE_VM", AMDKFD_IOC_ACQUIRE_VM),
            AllocMemoryOfGpu => ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", AMDKFD_IOC_ALLOC_MEMORY_OF_GPU),
            FreeMemoryOfGpu => ("AMDKFD_IOC_FREE_MEMORY_OF_GPU", AMDKFD_IOC_FREE_MEMORY_OF_GPU),
            MapMemoryToGpu => ("AMDKFD_IOC_MAP_MEMORY_TO_GPU", AMDKFD_IOC_MAP_MEMORY_TO_GPU),
            UnmapMemoryFromGpu => {
                ("AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU)
            }
            SetCuMask => ("AMDKFD_IOC_SET_CU_MASK", AMDKFD_IOC_SET_CU_MASK),
            GetQueueWaveState => {
                ("AMDKFD_IOC_GET_QUEUE_WAVE_STATE", AMDKFD_IOC_GET_QUEUE_WAVE_STATE)
            }
            GetDmabufInfo => ("AMDKFD_IOC_GET_DMABUF_INFO", AMDKFD_IOC_GET_DMABUF_INFO),
            ImportDmabuf => ("AMDKFD_IOC_IMPORT_DMABUF", AMDKFD_IOC_IMPORT_DMABUF),
            AllocQueueGws => ("AMDKFD_IOC_ALLOC_QUEUE_GWS", AMDKFD_IOC_ALLOC_QUEUE_GWS),
            SmiEvents => ("AMDKFD_IOC_SMI_EVENTS", AMDKFD_IOC_SMI_EVENTS),
            Svm => ("AMDKFD_IOC_SVM", AMDKFD_IOC_SVM),
            SetXnackMode => ("AMDKFD_IOC_SET_XNACK_MODE", AMDKFD_IOC_SET_XNACK_MODE),
            CriuOp => ("AMDKFD_IOC_CRIU_OP", AMDKFD_IOC_CRIU_OP),
            AvailableMemory => ("AMDKFD_IOC_AVAILABLE_MEMORY", AMDKFD_IOC_AVAILABLE_MEMORY),
            ExportDmabuf => ("AMDKFD_IOC_EXPORT_DMABUF", AMDKFD_IOC_EXPORT_DMABUF),
            RuntimeEnable => ("AMDKFD_IOC_RUNTIME_ENABLE", AMDKFD_IOC_RUNTIME_ENABLE),
            DbgTrap => ("AMDKFD_IOC_DBG_TRAP", AMDKFD_IOC_DBG_TRAP),
        }
    }
}

impl core::fmt::Display for Request {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// An argument struct and the request that takes it, so a caller cannot pair a request number
/// with the wrong struct: `ioctl(fd, A::REQUEST.raw(), &mut A)`.
///
/// # Safety
///
/// The kernel copies `REQUEST.arg_size()` bytes in and out of a `&mut Self` (the size encoded
/// in the request number), so an implementor must be a `#[repr(C)]` struct (or array) of
/// exactly that size, valid for every bit pattern the kernel writes into it (integers and
/// arrays of them). [`IoctlArgs::SIZE_MATCHES`] checks the size when a call is compiled; the
/// implementations here also check it where they are written (with this crate's `ioctl_args!`).
pub unsafe trait IoctlArgs: Copy {
    /// The request that takes `Self`.
    const REQUEST: Request;
    /// Evaluated by every caller of the ioctl (`let () = A::SIZE_MATCHES;`): compiling a call
    /// with an argument struct of another size than its request's fails.
    const SIZE_MATCHES: () = assert!(
        core::mem::size_of::<Self>() == Self::REQUEST.arg_size(),
        "an IoctlArgs struct differs in size from its request"
    );
}

/// `unsafe impl IoctlArgs` for argument structs of this crate, each with a compile-time check
/// of its size against its request's.
macro_rules! ioctl_args {
    ($($args:ty => $request:ident),* $(,)?) => {
        $(
            // SAFETY: `$args` is a `#[repr(C)]` struct of integers (and arrays of them) from the
            // uapi, and its size is the request's (asserted just below, at compile time).
            unsafe impl $crate::abi::request::IoctlArgs for $args {
                const REQUEST: $crate::abi::request::Request = $crate::abi::request::Request::$request;
            }
            const _: () = assert!(core::mem::size_of::<$args>() == $crate::abi::request::Request::$request.arg_size());
        )*
    };
}

pub(crate) use ioctl_args;

ioctl_args! {
    GetVersionArgs => GetVersion,
    CreateQueueArgs => CreateQueue,
    DestroyQueueArgs => DestroyQueue,
    SetMemoryPolicyArgs => SetMemoryPolicy,
    GetClockCountersArgs => GetClockCounters,
    GetProcessAperturesArgs => GetProcessApertures,
    UpdateQueueArgs => UpdateQueue,
    CreateEventArgs => CreateEvent,
    DestroyEventArgs => DestroyEvent,
    SetEventArgs => SetEvent,
    ResetEventArgs => ResetEvent,
    WaitEventsArgs => WaitEvents,
    DbgRegisterArgs => DbgRegisterDeprecated,
    DbgUnregisterArgs => DbgUnregisterDeprecated,
    DbgAddressWatchArgs => DbgAddressWatchDeprecated,
    DbgWaveControlArgs => DbgWaveControlDeprecated,
    SetScratchBackingVaArgs => SetScratchBackingVa,
    GetTileConfigArgs => GetTileConfig,
    SetTrapHandlerArgs => SetTrapHandler,
    GetProcessAperturesNewArgs => GetProcessAperturesNew,
    AcquireVmArgs => AcquireVm,
    AllocMemoryOfGpuArgs => AllocMemoryOfGpu,
    FreeMemoryOfGpuArgs => FreeMemoryOfGpu,
    MapMemoryToGpuArgs => MapMemoryToGpu,
    UnmapMemoryFromGpuArgs => UnmapMemoryFromGpu,
    SetCuMaskArgs => SetCuMask,
    GetQueueWaveStateArgs => GetQueueWaveState,
    GetDmabufInfoArgs => GetDmabufInfo,
    ImportDmabufArgs => ImportDmabuf,
    AllocQueueGwsArgs => AllocQueueGws,
    SmiEventsArgs => SmiEvents,
    SvmArgs => Svm,
    SetXnackModeArgs => SetXnackMode,
    CriuArgs => CriuOp,
    GetAvailableMemoryArgs => AvailableMemory,
    ExportDmabufArgs => ExportDmabuf,
    RuntimeEnableArgs => RuntimeEnable,
    DbgTrapArgs => DbgTrap,
}
