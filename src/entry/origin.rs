//! Which library something comes from, for the passthrough whitelist
//! ([`xhsa_model::settings::whitelist`]): the library that called `hsa_queue_create` (the caller's
//! return address, resolved with `dladdr`), and the library whose code object holds a dispatched
//! kernel (ROCr's loader extension: the executable of the kernel descriptor's address, its
//! loaded code objects' load ranges and URIs, e.g.
//! `file:///opt/rocm/lib/librocblas.so.4#offset=123&size=456`).

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use hsa_sys::hsa::{
    hsa_executable_t, hsa_loaded_code_object_t, hsa_status_t, hsa_ven_amd_loader_1_01_pfn_t,
    HSA_EXTENSION_AMD_LOADER, HSA_STATUS_SUCCESS,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH,
};

use super::inside;

extern "C" {
    // glibc's execinfo: the return addresses of the calling frames.
    fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
}

/// The file of the shared object containing `addr`, if any.
fn object_of(addr: usize) -> Option<String> {
    // SAFETY: Dl_info is plain C data (pointers and integers); all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads `addr` as a number and fills `info`.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated file name owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

/// The library whose code called into the HSA runtime: the first frame outside libxhsa and
/// ROCr (under `HSA_TOOLS_LIB` the call passes through ROCr's exported function first).
pub(crate) fn calling_library() -> Option<String> {
    let mut frames = [std::ptr::null_mut::<c_void>(); 16];
    // SAFETY: the buffer holds 16 pointers.
    let n = unsafe { backtrace(frames.as_mut_ptr(), frames.len() as c_int) }.max(0) as usize;
    let me = object_of(calling_library as *const () as usize);
    frames[..n]
        .iter()
        .filter_map(|&f| object_of(f as usize))
        .find(|o| Some(o) != me.as_ref() && !o.contains("libhsa-runtime64"))
}

type MajorTableFn = unsafe extern "C" fn(u16, u16, usize, *mut c_void) -> hsa_status_t;

/// ROCr's loader extension, version 1.01 or later (`None` if the runtime lacks it).
fn loader() -> Option<&'static hsa_ven_amd_loader_1_01_pfn_t> {
    static TABLE: OnceLock<Option<hsa_ven_amd_loader_1_01_pfn_t>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            // SAFETY: `MajorTableFn` is the C type of hsa_system_get_major_extension_table.
            let f: MajorTableFn =
                unsafe { super::rocr::resolve(c"hsa_system_get_major_extension_table", None) }?;
            // SAFETY: an all-null table is a valid value of this struct of Option<fn>s.
            let mut t: hsa_ven_amd_loader_1_01_pfn_t = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<hsa_ven_amd_loader_1_01_pfn_t>();
            // SAFETY: ROCr fills at most `size` bytes of the table we own.
            let st = inside(|| unsafe {
                f(
                    HSA_EXTENSION_AMD_LOADER as u16,
                    1,
                    size,
                    (&mut t as *mut hsa_ven_amd_loader_1_01_pfn_t).cast(),
                )
            });
            (st == HSA_STATUS_SUCCESS).then_some(t)
        })
        .as_ref()
}

struct Search<'a> {
    table: &'a hsa_ven_amd_loader_1_01_pfn_t,
    address: u64,
    uri: Option<String>,
}

/// Loaded-code-object iteration callback: takes the URI of the one holding `s.address`.
///
/// # Safety
///
/// `data` is the `Search` the iteration was started with, alive and not otherwise used for the
/// call.
unsafe extern "C" fn visit(
    _exe: hsa_executable_t,
    lco: hsa_loaded_code_object_t,
    data: *mut c_void,
) -> hsa_status_t {
    // SAFETY: `data` is the Search passed by kernel_library, alive during the iteration.
    let s = unsafe { &mut *(data as *mut Search) };
    let Some(info) = s.table.hsa_ven_amd_loader_loaded_code_object_get_info else {
        return HSA_STATUS_SUCCESS;
    };
    let (mut base, mut size, mut len) = (0u64, 0u64, 0u32);
    // SAFETY: each attribute writes the documented type into our variable.
    unsafe {
        info(
            lco,
            HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE,
            (&mut base as *mut u64).cast(),
        );
        info(
            lco,
            HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE,
            (&mut size as *mut u64).cast(),
        );
    }
    if s.address < base || s.address >= base.saturating_add(size) {
        return HSA_STATUS_SUCCESS;
    }
    // SAFETY: URI_LENGTH writes a u32 into our variable.
    unsafe {
        info(
            lco,
            HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH,
            (&mut len as *mut u32).cast(),
        )
    };
    let mut buf = vec![0u8; len as usize + 1];
    let uri = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI;
    // SAFETY: `buf` has room for the URI and a NUL.
    if len > 0 && unsafe { info(lco, uri, buf.as_mut_ptr().cast()) } == HSA_STATUS_SUCCESS {
        buf.truncate(len as usize);
        s.uri = Some(String::from_utf8_lossy(&buf).into_owned());
    }
    HSA_STATUS_SUCCESS
}

/// The URI of the code object holding kernel descriptor `kernel_object`.
fn kernel_uri(kernel_object: u64) -> Option<String> {
    let t = loader()?;
    let query = t.hsa_ven_amd_loader_query_executable?;
    let iterate = t.hsa_ven_amd_loader_executable_iterate_loaded_code_objects?;
    let mut exe = hsa_executable_t { handle: 0 };
    // SAFETY: a device address the application dispatched, and an out-parameter.
    if inside(|| unsafe { query(kernel_object as *const c_void, &mut exe) }) != HSA_STATUS_SUCCESS
        || exe.handle == 0
    {
        return None;
    }
    let mut s = Search { table: t, address: kernel_object, uri: None };
    // SAFETY: the callback gets `s` back as data, alive during the call.
    inside(|| unsafe { iterate(exe, Some(visit), (&mut s as *mut Search).cast()) });
    s.uri
}

/// The decisions of [`kernel_matches`], by kernel object.
static KERNELS: OnceLock<Mutex<HashMap<u64, bool>>> = OnceLock::new();
/// Kernel objects dispatched before their decision was made, for the forwarder to look up.
static ASKED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// The decision for `kernel_object` if it was made, never waiting: on the submission path. A
/// kernel object without one is handed to the forwarder thread, which asks ROCr's loader (whose
/// lock a thread loading code objects may hold for milliseconds) off the submission path, then
/// runs a pass; until then (`None`) its packet waits in the shadow ring. Without a forwarder
/// (the thread could not be started) the loader is asked here.
pub(crate) fn kernel_decision(kernel_object: u64) -> Option<bool> {
    let known =
        KERNELS.get().and_then(|c| c.try_lock().ok()).and_then(|c| c.get(&kernel_object).copied());
    if known.is_some() {
        return known;
    }
    if let Ok(mut asked) = ASKED.try_lock() {
        if !asked.contains(&kernel_object) {
            asked.push(kernel_object);
        }
    }
    // Even when the list was busy: the forwarder's next pass meets the packet again and asks.
    super::forwarder::KERNELS_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
    (!super::forwarder::wake()).then(|| kernel_matches(kernel_object))
}

/// The forwarder's: makes the decisions asked for by [`kernel_decision`].
pub(crate) fn decide_asked() {
    let asked: Vec<u64> = std::mem::take(&mut *ASKED.lock().unwrap_or_else(|e| e.into_inner()));
    for ko in asked {
        kernel_matches(ko);
    }
}

/// Forgets every decision: the runtime shut down and its code objects with it (a runtime
/// started again loads others, maybe at the same addresses).
pub(crate) fn forget_kernels() {
    if let Some(cache) = KERNELS.get() {
        cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Whether `kernel_object` comes from a code object of a library the passthrough list
/// (`XHSA_PASSTHROUGH_LIBS`) names (cached per kernel object; kernels are few and their code
/// objects stay loaded while in use).
fn kernel_matches(kernel_object: u64) -> bool {
    let cache = KERNELS.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&m) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&kernel_object) {
        return m;
    }
    let passthrough = &super::global().settings.passthrough;
    let m = kernel_uri(kernel_object).is_some_and(|uri| passthrough.matches(&uri).is_some());
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(kernel_object, m);
    m
}
