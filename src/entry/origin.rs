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
    hsa_code_object_reader_t, hsa_executable_t, hsa_loaded_code_object_t, hsa_status_t,
    hsa_ven_amd_loader_1_01_pfn_t, HSA_EXTENSION_AMD_LOADER, HSA_STATUS_SUCCESS,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI,
    HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH,
};

use super::code_objects::{memory_uri, MemoryCodeObjects};
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

/// The shared objects of the calling frames (at most `depth`), innermost first, without
/// libxhsa and ROCr (under `HSA_TOOLS_LIB` a call passes through ROCr's exported function
/// first) and without repeats.
fn calling_objects(depth: usize) -> Vec<String> {
    let mut frames = vec![std::ptr::null_mut::<c_void>(); depth];
    // SAFETY: the buffer holds `depth` pointers.
    let n = unsafe { backtrace(frames.as_mut_ptr(), depth as c_int) }.max(0) as usize;
    let me = object_of(calling_objects as *const () as usize);
    let mut out: Vec<String> = Vec::new();
    for o in frames[..n].iter().filter_map(|&f| object_of(f as usize)) {
        if Some(&o) != me.as_ref() && !o.contains("libhsa-runtime64") && !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// The library whose code called into the HSA runtime: the first frame outside libxhsa and
/// ROCr.
pub(crate) fn calling_library() -> Option<String> {
    calling_objects(16).into_iter().next()
}

/// `hsa_code_object_reader_create_from_memory`'s C type.
pub(crate) type ReaderFromMemoryFn =
    unsafe extern "C" fn(*const c_void, usize, *mut hsa_code_object_reader_t) -> hsa_status_t;

/// Code objects read from memory and the libraries that asked for them.
static MEMORY_OBJECTS: Mutex<MemoryCodeObjects> = Mutex::new(MemoryCodeObjects::new());

/// How deep the stack is searched for the library that asked for a code object (HIP's own
/// frames between the library's call and ROCr are many).
const ASKING_DEPTH: usize = 64;

/// `hsa_code_object_reader_create_from_memory`: ROCr's (`real`), then, when the whitelist names
/// any library, the libraries on the caller's stack are noted for the code object
/// (`code_objects`), so that its kernels can be matched although its URI names only memory.
///
/// # Safety
///
/// `real` is `None` or `hsa_code_object_reader_create_from_memory`; the other arguments meet
/// its contract (`code_object` points to `size` readable bytes, `reader` is valid for writing).
pub(crate) unsafe fn code_object_from_memory(
    real: Option<ReaderFromMemoryFn>,
    code_object: *const c_void,
    size: usize,
    reader: *mut hsa_code_object_reader_t,
) -> hsa_status_t {
    let Some(real) = real else { return hsa_sys::hsa::HSA_STATUS_ERROR };
    // SAFETY: the caller's arguments, unchanged, to the function they were meant for.
    let status = inside(|| unsafe { real(code_object, size, reader) });
    if status == HSA_STATUS_SUCCESS {
        super::outermost(|g| {
            if g.settings.passthrough.is_empty() {
                return;
            }
            let libraries = calling_objects(ASKING_DEPTH);
            tracing::debug!(
                "xhsa: code object at {:#x} ({size} bytes) read from memory for {libraries:?}",
                code_object as u64
            );
            MEMORY_OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).note(
                code_object as u64,
                size as u64,
                libraries,
            );
        });
    }
    status
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
    MEMORY_OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).clear();
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
    let uri = kernel_uri(kernel_object);
    let m = uri.as_deref().is_some_and(|uri| match memory_uri(uri) {
        // Loaded from memory: the libraries that asked for it.
        Some((address, _)) => MEMORY_OBJECTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .libraries_of(address)
            .is_some_and(|libs| libs.iter().any(|l| passthrough.matches(l).is_some())),
        None => passthrough.matches(uri).is_some(),
    });
    tracing::debug!(
        "xhsa: kernel object {kernel_object:#x}: code object {}: {}",
        uri.as_deref().unwrap_or("(unknown)"),
        if m { "passthrough" } else { "scheduled" }
    );
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(kernel_object, m);
    m
}
