//! Thunk functions the emulator does not provide (IPC, graphics interop, SVM, performance
//! counters, the legacy debugger). Each returns `HSAKMT_STATUS_NOT_SUPPORTED` and logs once,
//! the answer the real thunk gives where the kernel lacks the feature.

use std::sync::Mutex;

use hsa_sys::hsakmt::{HSAKMT_STATUS, HSAKMT_STATUS_NOT_SUPPORTED};

static LOGGED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

fn unsupported(name: &'static str) -> HSAKMT_STATUS {
    let mut l = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    if !l.contains(&name) {
        l.push(name);
        tracing::warn!("xhsa-emu: {name} is not supported by the emulated GPU");
    }
    HSAKMT_STATUS_NOT_SUPPORTED
}

macro_rules! not_supported {
    ($($name:ident),* $(,)?) => {$(
        // The C arguments, whatever they are, stay in registers and are ignored.
        #[no_mangle]
        pub extern "C" fn $name() -> HSAKMT_STATUS {
            unsupported(stringify!($name))
        }
    )*
        crate::symver!($($name),*);
    };
}

not_supported!(
    hsaKmtDbgAddressWatch,
    hsaKmtDbgRegister,
    hsaKmtDbgUnregister,
    hsaKmtDbgWavefrontControl,
    hsaKmtGetKernelDebugTrapVersionInfo,
    hsaKmtGetQueueInfo,
    hsaKmtMapGraphicHandle,
    hsaKmtPmcAcquireTraceAccess,
    hsaKmtPmcGetCounterProperties,
    hsaKmtPmcQueryTrace,
    hsaKmtPmcRegisterTrace,
    hsaKmtPmcReleaseTraceAccess,
    hsaKmtPmcStartTrace,
    hsaKmtPmcStopTrace,
    hsaKmtPmcUnregisterTrace,
    hsaKmtProcessVMRead,
    hsaKmtProcessVMWrite,
    hsaKmtQueryEventState,
    hsaKmtRegisterGraphicsHandleToNodes,
    hsaKmtRegisterSharedHandle,
    hsaKmtRegisterSharedHandleToNodes,
    hsaKmtSPMAcquire,
    hsaKmtSPMRelease,
    hsaKmtSPMSetDestBuffer,
    hsaKmtSVMGetAttr,
    hsaKmtSVMSetAttr,
    hsaKmtShareMemory,
    hsaKmtUnmapGraphicHandle,
);
