//! `/dev/kfd`: the thunk issues its requests (queues, memory, events, version, runtime, clock)
//! as ioctls on a KFD descriptor, as the real thunk does, and code that opens the device itself
//! (rocminfo checks it can; ROCm 6.x's ROCr, with the thunk linked in, issues its ioctls
//! directly; libxhsa suspends queues with DBG_TRAP) reaches the same emulated KFD. When this
//! library is preloaded its `open`, `open64`, `openat`, `openat64`, `close` and `ioctl` come
//! first: opening `/dev/kfd` or a render node `/dev/dri/renderD<128+N>` of an emulated GPU
//! yields an emulated descriptor (see `fds`), and ioctls on it reach the emulated KFD or the
//! render node (`drm`); `mmap` of one maps what KFD or amdgpu would (`bo`, the doorbells),
//! `fstat` of one reports the character device, and `close`/`dup2`/`dup3` keep the registry
//! right. Its `sigaction` and `signal` keep the doorbell trap's SIGSEGV handler the kernel's
//! once it is installed: the process's own SIGSEGV handler is recorded and handed every fault
//! outside the doorbells (`xhsa_emu::sys::doorbell::app_sigaction`; LLVM installing its crash
//! handler over ours while comgr compiles made a doorbell store on another thread delete the
//! compiler's output). Its `write` and `close` make ROCr 6.4's request to stop its IPC socket
//! server wait for that server, as later ROCr does (`rocr_ipc`). Every other call goes to the
//! next definition (libc) unchanged.
//!
//! The libc functions are variadic; on x86-64 the optional argument travels in the same
//! register as a fixed one, so they are declared with it as a fixed parameter.

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::OnceLock;

use crate::fds::{self, Device};

use xhsa_ioctl::abi::dbg_trap::{DbgTrapArgs, DbgTrapOp};
use xhsa_ioctl::abi::debug::{
    QueueSnapshotEntry, RuntimeEnableArgs, RuntimeInfo, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
    KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK,
};
use xhsa_ioctl::abi::event::{
    CreateEventArgs, DestroyEventArgs, EventData, ResetEventArgs, SetEventArgs, WaitEventsArgs,
};
use xhsa_ioctl::abi::memory::{AllocMemoryOfGpuArgs, FreeMemoryOfGpuArgs, MapMemoryToGpuArgs};
use xhsa_ioctl::abi::process::GetClockCountersArgs;
use xhsa_ioctl::abi::queue::{
    AllocQueueGwsArgs, CreateQueueArgs, DestroyQueueArgs, SetCuMaskArgs, UpdateQueueArgs,
};
use xhsa_ioctl::abi::request::Request;
use xhsa_ioctl::abi::version::GetVersionArgs;

type OpenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int;
type OpenAtFn = unsafe extern "C" fn(
    libc::c_int,
    *const libc::c_char,
    libc::c_int,
    libc::c_uint,
) -> libc::c_int;
type CloseFn = unsafe extern "C" fn(libc::c_int) -> libc::c_int;
type IoctlFn = unsafe extern "C" fn(libc::c_int, libc::c_ulong, *mut libc::c_void) -> libc::c_int;

fn next<T: Copy>(cell: &OnceLock<usize>, name: &CStr) -> Option<T> {
    let p = *cell.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the definition after ours.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
    });
    // SAFETY: T is the function-pointer type of the named libc function.
    (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, T>(&p) })
}

/// The first definition of `name` in the global lookup order (RTLD_DEFAULT).
fn global<T: Copy>(cell: &OnceLock<usize>, name: &CStr) -> Option<T> {
    let p = *cell.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
    });
    // SAFETY: T is the function-pointer type of the named libc function.
    (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, T>(&p) })
}

static GLOBAL_IOCTL: OnceLock<usize> = OnceLock::new();
static GLOBAL_OPEN: OnceLock<usize> = OnceLock::new();

/// The emulated device a path opens: `/dev/kfd`, or the render node of an emulated GPU.
/// Another render minor is not ours (its open reaches the system, where it fails).
fn emulated_path(path: *const libc::c_char) -> Option<Device> {
    if path.is_null() {
        return None;
    }
    // SAFETY: callers of open pass a NUL-terminated path (NULL rejected above).
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    if p == b"/dev/kfd" {
        return Some(Device::Kfd);
    }
    let minor = fds::render_minor(p)?;
    let gpus = crate::state::configured_gpus();
    (minor >= 128 && minor < 128 + gpus).then_some(Device::Render(minor))
}

fn is_kfd_fd(fd: i32) -> bool {
    fds::device(fd) == Some(Device::Kfd)
}

fn open_device(dev: Device, flags: libc::c_int) -> libc::c_int {
    fds::create(dev, flags & libc::O_CLOEXEC != 0)
}

static OPEN: OnceLock<usize> = OnceLock::new();
static OPEN64: OnceLock<usize> = OnceLock::new();
static OPENAT: OnceLock<usize> = OnceLock::new();
static OPENAT64: OnceLock<usize> = OnceLock::new();
static CLOSE: OnceLock<usize> = OnceLock::new();
static IOCTL: OnceLock<usize> = OnceLock::new();

fn open_common(
    cell: &OnceLock<usize>,
    name: &CStr,
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    let real: Option<OpenFn> = next(cell, name);
    if let Some(dev) = emulated_path(path) {
        return open_device(dev, flags);
    }
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(path, flags, mode) },
        None => -1,
    }
}

/// `open`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `open`: `path` is null or a NUL-terminated string (and `mode` is read only
/// when `flags` ask for it). Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn open(
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    open_common(&OPEN, c"open", path, flags, mode)
}

/// `open64`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `open64`: `path` is null or a NUL-terminated string (and `mode` is read only
/// when `flags` ask for it). Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn open64(
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    open_common(&OPEN64, c"open64", path, flags, mode)
}

fn openat_common(
    cell: &OnceLock<usize>,
    name: &CStr,
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    let real: Option<OpenAtFn> = next(cell, name);
    if let Some(dev) = emulated_path(path) {
        return open_device(dev, flags);
    }
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(dirfd, path, flags, mode) },
        None => -1,
    }
}

/// `openat`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `openat`: `path` is null or a NUL-terminated string, `dirfd` as `openat`
/// takes it. Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    openat_common(&OPENAT, c"openat", dirfd, path, flags, mode)
}

/// `openat64`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `openat64`: `path` is null or a NUL-terminated string, `dirfd` as `openat64`
/// takes it. Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> libc::c_int {
    openat_common(&OPENAT64, c"openat64", dirfd, path, flags, mode)
}

/// `close`, forgetting an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `close`: `fd` is not a descriptor some other code still owns and uses
/// (closing it is the caller's decision, as with libc's `close`).
#[no_mangle]
pub unsafe extern "C" fn close(fd: libc::c_int) -> libc::c_int {
    fds::forget(fd);
    let ipc_server = crate::rocr_ipc::before_close(fd);
    let real: Option<CloseFn> = next(&CLOSE, c"close");
    let r = match real {
        // SAFETY: forwarding the caller's argument unchanged.
        Some(f) => unsafe { f(fd) },
        None => -1,
    };
    if ipc_server {
        crate::rocr_ipc::keeping_errno(crate::rocr_ipc::server_stopped);
    }
    r
}

type WriteFn =
    unsafe extern "C" fn(libc::c_int, *const libc::c_void, libc::size_t) -> libc::ssize_t;
static WRITE: OnceLock<usize> = OnceLock::new();

/// `write`, unchanged except for ROCr's request to stop its own IPC socket server, which
/// returns once that server has stopped (see `rocr_ipc`: ROCr 6.4 deletes the runtime while
/// the server thread still clears a map inside it).
///
/// # Safety
///
/// `write(2)`'s contract: `buf` is readable for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn write(
    fd: libc::c_int,
    buf: *const libc::c_void,
    count: libc::size_t,
) -> libc::ssize_t {
    let request = if count == crate::rocr_ipc::REQUEST_LEN && !buf.is_null() {
        // SAFETY: the caller's buffer, readable for `count` bytes (write's contract).
        crate::rocr_ipc::before_write(fd, unsafe {
            std::slice::from_raw_parts(buf.cast::<u8>(), count)
        })
    } else {
        None
    };
    let real: Option<WriteFn> = next(&WRITE, c"write");
    let r = match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(fd, buf, count) },
        None => -1,
    };
    if let Some(token) = request {
        crate::rocr_ipc::keeping_errno(|| crate::rocr_ipc::after_write(token, r == count as isize));
    }
    r
}

type SigactionFn =
    unsafe extern "C" fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int;
type SignalFn = unsafe extern "C" fn(libc::c_int, libc::sighandler_t) -> libc::sighandler_t;
static SIGACTION: OnceLock<usize> = OnceLock::new();
static SIGNAL: OnceLock<usize> = OnceLock::new();

/// `sigaction`: SIGSEGV's action is the process's own as far as it can tell, while the
/// doorbell trap's handler stays the kernel's (`xhsa_emu::sys::doorbell::app_sigaction`).
///
/// # Safety
///
/// `sigaction(2)`'s contract: `act` is null or points to a valid action, `old` is null or
/// writable for one.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    // SAFETY: the caller's pointers, as sigaction(2) takes them.
    if let Some(r) = unsafe { xhsa_emu::sys::doorbell::app_sigaction(sig, act, old) } {
        return r;
    }
    let real: Option<SigactionFn> = next(&SIGACTION, c"sigaction");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(sig, act, old) },
        None => -1,
    }
}

/// `signal`: for SIGSEGV, glibc's (BSD) semantics through [`sigaction`] above (glibc's own
/// `signal` calls its internal sigaction, which no interposer sees); other signals go to libc.
///
/// # Safety
///
/// `signal(2)`'s contract: `handler` is `SIG_DFL`, `SIG_IGN` or a function taking the signal
/// number.
#[no_mangle]
pub unsafe extern "C" fn signal(
    sig: libc::c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    if sig == libc::SIGSEGV {
        // SAFETY: zeroed sigactions are valid; sigset calls on a local set.
        let (mut act, mut old): (libc::sigaction, libc::sigaction) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        act.sa_sigaction = handler;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: sigset calls on a local set.
        unsafe {
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaddset(&mut act.sa_mask, sig);
        }
        // SAFETY: pointers to the local actions.
        return match unsafe { sigaction(sig, &act, &mut old) } {
            0 => old.sa_sigaction,
            _ => libc::SIG_ERR,
        };
    }
    let real: Option<SignalFn> = next(&SIGNAL, c"signal");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(sig, handler) },
        None => libc::SIG_ERR,
    }
}

/// `ioctl`, served by the emulated KFD on a KFD descriptor.
///
/// # Safety
///
/// `ioctl(2)`'s contract: `arg` is what `request` takes; for a KFD request on a KFD
/// descriptor, null or valid for reading and writing the argument size encoded in `request`,
/// with any user pointers inside it valid as KFD requires.
#[no_mangle]
pub unsafe extern "C" fn ioctl(
    fd: libc::c_int,
    request: libc::c_ulong,
    arg: *mut libc::c_void,
) -> libc::c_int {
    match fds::device(fd) {
        Some(Device::Kfd) => return kfd_ioctl(request, arg),
        Some(Device::Render(minor)) => return crate::devices::render_ioctl(minor, request, arg),
        None => {}
    }
    let real: Option<IoctlFn> = next(&IOCTL, c"ioctl");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(fd, request, arg) },
        None => -1,
    }
}

pub(crate) fn set_errno(e: i32) -> libc::c_int {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
    -1
}

/// Opens `/dev/kfd` for the thunk itself: through libc's `open`, so that an interposer sees it
/// as on a real system, or directly when this library is not first in the lookup order.
pub fn open_dev_kfd() -> i32 {
    let first: Option<OpenFn> = global(&GLOBAL_OPEN, c"open");
    // SAFETY: the first `open` in lookup order, with a static NUL-terminated path.
    let fd =
        first.map_or(-1, |f| unsafe { f(c"/dev/kfd".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) });
    if fd >= 0 && is_kfd_fd(fd) {
        return fd;
    }
    if fd >= 0 {
        // SAFETY: closing the descriptor we just opened (a real /dev/kfd is not ours to use).
        unsafe { libc::close(fd) };
    }
    open_device(Device::Kfd, libc::O_CLOEXEC)
}

pub fn close_dev_kfd(fd: i32) {
    // SAFETY: the descriptor came from `open_dev_kfd`.
    unsafe { close(fd) };
}

/// The thunk's ioctl on its KFD descriptor: through libc's `ioctl` (interposers, e.g. libxhsa
/// recording queue ids, see it), falling back to the emulated KFD directly when this library
/// is not first in the lookup order. Returns the ioctl's value or the errno.
pub fn kfd_call<T>(fd: i32, request: u64, arg: &mut T) -> Result<i32, i32> {
    let p = (arg as *mut T).cast::<libc::c_void>();
    // The first `ioctl` in the global lookup order (an interposer such as libxhsa, else ours):
    // a plain call would bind to this library's own definition and bypass interposers.
    let first: Option<IoctlFn> = global(&GLOBAL_IOCTL, c"ioctl");
    let Some(ioctl_fn) = first else { return Err(libc::ENOSYS) };
    OWN_CALL.with(|c| c.set(true));
    // SAFETY: `arg` is a valid, writable argument struct of the request's type.
    let r = unsafe { ioctl_fn(fd, request as libc::c_ulong, p) };
    OWN_CALL.with(|c| c.set(false));
    if r >= 0 {
        return Ok(r);
    }
    // SAFETY: reading this thread's errno right after the failed call.
    let e = unsafe { *libc::__errno_location() };
    if e == libc::ENOTTY && is_kfd_fd(fd) {
        let r = kfd_ioctl(request as libc::c_ulong, p);
        // SAFETY: reading this thread's errno right after the emulated call.
        return if r >= 0 { Ok(r) } else { Err(unsafe { *libc::__errno_location() }) };
    }
    Err(e)
}

thread_local! {
    /// Set while this library's own hsaKmt* functions (the ROCm 5.x thunk) issue an ioctl:
    /// they map buffers themselves, a ROCm 6.x thunk leaves that to KFD and mmap.
    static OWN_CALL: Cell<bool> = const { Cell::new(false) };
}

/// Reads an argument struct from the caller's pointer (unaligned; the caller's layout).
pub(crate) fn read_arg<T: Copy + Default>(arg: *mut libc::c_void, size: usize) -> T {
    let mut v = T::default();
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: the caller passes a buffer of the request's size (`size`, encoded in the request
    // number); we copy at most that many bytes into a zeroed T, as KFD zero-fills short structs.
    unsafe { std::ptr::copy_nonoverlapping(arg as *const u8, (&mut v as *mut T).cast::<u8>(), n) };
    v
}

pub(crate) fn write_arg<T: Copy>(arg: *mut libc::c_void, v: &T, size: usize) {
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: as in `read_arg`, writing back at most the caller's size.
    unsafe { std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), arg as *mut u8, n) };
}

fn read_u32s(ptr: u64, n: usize) -> Vec<u32> {
    if ptr == 0 || n == 0 {
        return Vec::new();
    }
    // SAFETY: the ioctl's caller passes an array of `n` u32 at `ptr` (as KFD's copy_from_user).
    unsafe { std::slice::from_raw_parts(ptr as *const u32, n) }.to_vec()
}

fn write_u32s(ptr: u64, v: &[u32]) {
    if ptr != 0 {
        // SAFETY: as in `read_u32s`; KFD writes the status bits back into the same array.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), ptr as *mut u32, v.len()) };
    }
}

/// An ioctl on a `/dev/kfd` descriptor, served by the emulated KFD with the argument layouts
/// of uapi 1.17 (shorter, older structs are zero-extended as KFD does). Requests the emulator
/// does not serve fail with EINVAL; unknown numbers with ENOTTY.
fn kfd_ioctl(request: libc::c_ulong, arg: *mut libc::c_void) -> libc::c_int {
    // A panic must never unwind into the C caller: report it as an I/O error.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve_ioctl(request, arg))) {
        Ok(r) => {
            if tracing::enabled!(tracing::Level::TRACE) {
                let name = Request::from_raw_lenient(request).map_or_else(
                    || format!("an unknown KFD request {request:#x}"),
                    |r| r.name().to_string(),
                );
                tracing::trace!("xhsa-emu: {name} -> {r}");
            }
            if r < 0 && tracing::enabled!(tracing::Level::DEBUG) {
                // SAFETY: reading this thread's errno right after the emulated call.
                let e = unsafe { *libc::__errno_location() };
                let name = Request::from_raw_lenient(request).map_or_else(
                    || format!("an unknown KFD request {request:#x}"),
                    |r| r.name().to_string(),
                );
                tracing::debug!("xhsa-emu: {name} failed: errno {e}");
            }
            r
        }
        Err(_) => {
            tracing::error!("xhsa-emu: internal error serving KFD ioctl {request:#x}");
            set_errno(libc::EIO)
        }
    }
}

fn serve_ioctl(request: libc::c_ulong, arg: *mut libc::c_void) -> libc::c_int {
    let Some(req) = Request::from_raw_lenient(request) else { return set_errno(libc::ENOTTY) };
    if arg.is_null() {
        return set_errno(libc::EFAULT);
    }
    let size = ((request >> 16) & 0x3fff) as usize;
    let e = match crate::state::emu_or_open() {
        Ok(e) => e,
        Err(msg) => {
            tracing::error!("xhsa-emu: {msg}");
            return set_errno(libc::ENODEV);
        }
    };
    let kfd = &e.kfd;
    let done = |r: Result<(), i32>| match r {
        Ok(()) => 0,
        Err(errno) => set_errno(errno),
    };
    match req {
        Request::GetVersion => {
            let mut a = GetVersionArgs::default();
            let r = kfd.get_version(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::CreateQueue => {
            let mut a: CreateQueueArgs = read_arg(arg, size);
            let r = kfd.create_queue(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::DestroyQueue => {
            let a: DestroyQueueArgs = read_arg(arg, size);
            done(kfd.destroy_queue(a.queue_id))
        }
        Request::UpdateQueue => {
            let a: UpdateQueueArgs = read_arg(arg, size);
            done(kfd.update_queue(&a))
        }
        Request::SetCuMask => {
            let a: SetCuMaskArgs = read_arg(arg, size);
            let words = read_u32s(a.cu_mask_ptr, (a.num_cu_mask / 32).min(32) as usize);
            done(kfd.set_cu_mask(a.queue_id, a.num_cu_mask, &words))
        }
        Request::AllocQueueGws => {
            let mut a: AllocQueueGwsArgs = read_arg(arg, size);
            let r = kfd.alloc_queue_gws(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::GetClockCounters => {
            let mut a: GetClockCountersArgs = read_arg(arg, size);
            let r = kfd.get_clock_counters(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::RuntimeEnable => {
            let mut a: RuntimeEnableArgs = read_arg(arg, size);
            let r = kfd.runtime_enable(
                a.mode_mask & KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK != 0,
                a.r_debug,
                a.mode_mask & KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK != 0,
            );
            a.capabilities_mask = 0;
            write_arg(arg, &a, size);
            done(r)
        }
        Request::DbgTrap => dbg_trap(&e, arg, size),
        Request::AllocMemoryOfGpu => {
            let mut a: AllocMemoryOfGpuArgs = read_arg(arg, size);
            let r = if OWN_CALL.with(Cell::get) {
                kfd.alloc_memory(&mut a)
            } else {
                crate::devices::alloc_buffer(&e, &mut a)
            };
            write_arg(arg, &a, size);
            done(r)
        }
        Request::FreeMemoryOfGpu => {
            let a: FreeMemoryOfGpuArgs = read_arg(arg, size);
            let r = if crate::bo::is_unplaced(a.handle) {
                Ok(())
            } else {
                kfd.free_memory_handle(a.handle).map(|_| ())
            };
            if r.is_ok() {
                crate::bo::free(a.handle);
            }
            done(r)
        }
        Request::MapMemoryToGpu | Request::UnmapMemoryFromGpu => {
            let mut a: MapMemoryToGpuArgs = read_arg(arg, size);
            let ids = read_u32s(a.device_ids_array_ptr, a.n_devices.min(64) as usize);
            let r = kfd.map_memory(a.handle, &ids, req == Request::MapMemoryToGpu);
            if let Ok(n) = r {
                a.n_success = n;
            }
            write_arg(arg, &a, size);
            done(r.map(|_| ()))
        }
        Request::CreateEvent => {
            let mut a: CreateEventArgs = read_arg(arg, size);
            tracing::debug!(
                "xhsa-emu: CREATE_EVENT type {} page {:#x}",
                a.event_type,
                a.event_page_offset
            );
            let r = kfd.create_event(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::DestroyEvent => {
            let a: DestroyEventArgs = read_arg(arg, size);
            done(kfd.events.destroy(a.event_id).map_err(|_| libc::EINVAL))
        }
        Request::SetEvent => {
            let a: SetEventArgs = read_arg(arg, size);
            done(kfd.set_event(a.event_id))
        }
        Request::ResetEvent => {
            let a: ResetEventArgs = read_arg(arg, size);
            done(kfd.events.reset(a.event_id).map_err(|_| libc::EINVAL))
        }
        Request::WaitEvents => wait_events(&e, arg, size),
        other => match crate::devices::process_ioctl(&e, other, arg, size) {
            Ok(v) => v,
            Err(errno) => set_errno(errno),
        },
    }
}

/// WAIT_EVENTS: waits on the ids in the caller's `kfd_event_data` array and writes memory-fault
/// data back into the entries of memory events that fired, as KFD does.
fn wait_events(e: &crate::state::Emu, arg: *mut libc::c_void, size: usize) -> libc::c_int {
    let mut a: WaitEventsArgs = read_arg(arg, size);
    let n = a.num_events.min(4096) as usize;
    if a.events_ptr == 0 && n > 0 {
        return set_errno(libc::EFAULT);
    }
    let entries = a.events_ptr as *mut EventData;
    // SAFETY: the caller passes `num_events` kfd_event_data entries at events_ptr.
    let ids: Vec<u32> = (0..n)
        .map(|i| unsafe { std::ptr::addr_of!((*entries.add(i)).event_id).read_unaligned() })
        .collect();
    // The union's signal member: the age the caller last saw (KFD reads it for signal events).
    // SAFETY: as above; every member of the union is plain data.
    let mut ages: Vec<u64> = (0..n)
        .map(|i| unsafe {
            std::ptr::addr_of!((*entries.add(i)).data.signal_event_data.last_event_age)
                .read_unaligned()
        })
        .collect();
    let before = ages.clone();
    let t0 = std::time::Instant::now();
    let r = e.kfd.wait_events(&ids, &mut ages, &mut a);
    tracing::trace!(ids = ?ids, ages_in = ?before, ages_out = ?ages, timeout_ms = a.timeout, all = a.wait_for_all, result = a.wait_result, took_us = t0.elapsed().as_micros() as u64, "xhsa-emu: WAIT_EVENTS");
    match r {
        Ok(out) => {
            for (i, (&age, &was)) in ages.iter().zip(&before).enumerate() {
                if age != was {
                    // SAFETY: entry `i` of the caller's array; KFD writes the event's age back
                    // into the signal member of the union for a signal event that fired.
                    unsafe {
                        std::ptr::addr_of_mut!(
                            (*entries.add(i)).data.signal_event_data.last_event_age
                        )
                        .write_unaligned(age)
                    };
                }
            }
            for (id, data) in out.memory_faults {
                for (i, _) in ids.iter().enumerate().filter(|(_, &x)| x == id) {
                    // SAFETY: entry `i` of the `num_events` the caller passed at events_ptr; writing the
                    // union's memory-exception member (KFD's layout of kfd_event_data).
                    unsafe {
                        std::ptr::addr_of_mut!((*entries.add(i)).data.memory_exception_data)
                            .write_unaligned(data)
                    };
                }
            }
            write_arg(arg, &a, size);
            0
        }
        Err(errno) => set_errno(errno),
    }
}

/// Copies `len` bytes of `v` to the caller's `ptr` (KFD's copy_to_user): EFAULT for NULL.
pub(crate) fn copy_out<T: Copy>(ptr: u64, v: &T, len: usize) -> Result<(), i32> {
    let len = len.min(std::mem::size_of::<T>());
    if len == 0 {
        return Ok(());
    }
    if ptr == 0 {
        return Err(libc::EFAULT);
    }
    // SAFETY: the ioctl's caller passes a buffer of at least `len` bytes at `ptr` (the size it
    // announced in the argument struct), as KFD's copy_to_user requires.
    unsafe { std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), ptr as *mut u8, len) };
    Ok(())
}

/// DBG_TRAP: the caller's `kfd_ioctl_dbg_trap_args`, decoded by op, served by the emulated
/// KFD, and written back (as KFD copies the whole argument back, failures included). Ops the
/// emulator does not serve fail with EINVAL.
fn dbg_trap(e: &crate::state::Emu, arg: *mut libc::c_void, size: usize) -> libc::c_int {
    let mut bytes = [0u8; std::mem::size_of::<DbgTrapArgs>()];
    let n = size.min(bytes.len());
    // SAFETY: the caller passes a kfd_ioctl_dbg_trap_args of `size` bytes.
    unsafe { std::ptr::copy_nonoverlapping(arg as *const u8, bytes.as_mut_ptr(), n) };
    let d = DbgTrapArgs::decode(&bytes);
    let pid = d.pid;
    let kfd = &e.kfd;
    let mut back = d.op;
    let result = match &mut back {
        Some(DbgTrapOp::Enable(a)) => kfd.dbg_trap_enable(pid, a).and_then(|info: RuntimeInfo| {
            // kfd_dbg_trap_enable: the runtime info goes to rinfo_ptr, its size to rinfo_size.
            let copied = copy_out(a.rinfo_ptr, &info, a.rinfo_size as usize);
            a.rinfo_size = std::mem::size_of::<RuntimeInfo>() as u32;
            copied.map(|()| 0)
        }),
        Some(DbgTrapOp::Disable) => kfd.dbg_trap_disable(pid).map(|()| 0),
        Some(DbgTrapOp::SetExceptionsEnabled(a)) => {
            kfd.dbg_set_exceptions_enabled(pid, a.exception_mask).map(|()| 0)
        }
        Some(DbgTrapOp::SuspendQueues(a)) => {
            let mut ids = read_u32s(a.queue_array_ptr, a.num_queues.min(4096) as usize);
            // Grace period in units of 1K GPU clock cycles; 0xffffffff is KFD's "default", which
            // the emulator models as none.
            let grace = if a.grace_period == u32::MAX { 0 } else { a.grace_period };
            let grace_ns = u64::from(grace) * 1_000_000
                / u64::from(e.kfd.cfg.device.max_engine_clock_mhz.max(1));
            let r = kfd.dbg_trap_suspend(pid, &mut ids, a.exception_mask, grace_ns);
            if r.is_ok() {
                write_u32s(a.queue_array_ptr, &ids);
            }
            r.map(|n| n as i32)
        }
        Some(DbgTrapOp::ResumeQueues(a)) => {
            let mut ids = read_u32s(a.queue_array_ptr, a.num_queues.min(4096) as usize);
            let r = kfd.dbg_trap_resume(pid, &mut ids);
            if r.is_ok() {
                write_u32s(a.queue_array_ptr, &ids);
            }
            r.map(|n| n as i32)
        }
        Some(DbgTrapOp::QueryDebugEvent(a)) => kfd.dbg_query_debug_event(pid, a).map(|()| 0),
        Some(DbgTrapOp::QueryExceptionInfo(a)) => kfd.dbg_query_exception_info(pid, a).map(|()| 0),
        Some(DbgTrapOp::GetQueueSnapshot(a)) => {
            let stride = a.entry_size as u64;
            kfd.dbg_queue_snapshot(pid, a).and_then(|entries| {
                for (i, entry) in entries.iter().enumerate() {
                    copy_out::<QueueSnapshotEntry>(
                        a.snapshot_buf_ptr.wrapping_add(i as u64 * stride),
                        entry,
                        a.entry_size as usize,
                    )?;
                }
                Ok(0)
            })
        }
        _ => Err(libc::EINVAL),
    };
    if let Some(op) = &back {
        let out = DbgTrapArgs::encode(pid, op);
        write_arg(arg, &out, size);
    }
    match result {
        Ok(v) => v,
        Err(errno) => set_errno(errno),
    }
}

type MmapFn = unsafe extern "C" fn(
    *mut libc::c_void,
    libc::size_t,
    libc::c_int,
    libc::c_int,
    libc::c_int,
    libc::off_t,
) -> *mut libc::c_void;
type MunmapFn = unsafe extern "C" fn(*mut libc::c_void, libc::size_t) -> libc::c_int;
type FstatFn = unsafe extern "C" fn(libc::c_int, *mut libc::stat) -> libc::c_int;
type FstatatFn = unsafe extern "C" fn(
    libc::c_int,
    *const libc::c_char,
    *mut libc::stat,
    libc::c_int,
) -> libc::c_int;
type Dup2Fn = unsafe extern "C" fn(libc::c_int, libc::c_int) -> libc::c_int;
type Dup3Fn = unsafe extern "C" fn(libc::c_int, libc::c_int, libc::c_int) -> libc::c_int;

static MMAP: OnceLock<usize> = OnceLock::new();
static MMAP64: OnceLock<usize> = OnceLock::new();
static MUNMAP: OnceLock<usize> = OnceLock::new();
static FSTAT: OnceLock<usize> = OnceLock::new();
static FSTAT64: OnceLock<usize> = OnceLock::new();
static FSTATAT: OnceLock<usize> = OnceLock::new();
static FSTATAT64: OnceLock<usize> = OnceLock::new();
static DUP2: OnceLock<usize> = OnceLock::new();
static DUP3: OnceLock<usize> = OnceLock::new();

#[allow(clippy::too_many_arguments)] // mmap's six, and which libc symbol to forward to
fn mmap_common(
    cell: &OnceLock<usize>,
    name: &CStr,
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    off: libc::off_t,
) -> *mut libc::c_void {
    if fd >= 0 {
        if let Some(dev) = fds::device(fd) {
            return match std::panic::catch_unwind(|| {
                crate::devices::mmap(dev, addr as u64, len as u64, prot, flags, off as u64)
            }) {
                Ok(Ok(a)) => a as *mut libc::c_void,
                Ok(Err(errno)) => {
                    set_errno(errno);
                    libc::MAP_FAILED
                }
                Err(_) => {
                    tracing::error!(
                        "xhsa-emu: internal error serving an mmap of an emulated device"
                    );
                    set_errno(libc::EIO);
                    libc::MAP_FAILED
                }
            };
        }
    }
    let real: Option<MmapFn> = next(cell, name);
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(addr, len, prot, flags, fd, off) },
        None => libc::MAP_FAILED,
    }
}

/// `mmap`, served for emulated `/dev/kfd` and render-node descriptors (doorbells, buffers).
///
/// # Safety
///
/// `mmap(2)`'s contract: with MAP_FIXED the caller gives up whatever `[addr, addr + len)` held.
/// Any other descriptor goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    off: libc::off_t,
) -> *mut libc::c_void {
    mmap_common(&MMAP, c"mmap", addr, len, prot, flags, fd, off)
}

/// `mmap64`: as [`mmap`] (the same function on 64-bit Linux).
///
/// # Safety
///
/// As [`mmap`].
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut libc::c_void,
    len: libc::size_t,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    off: libc::off_t,
) -> *mut libc::c_void {
    mmap_common(&MMAP64, c"mmap64", addr, len, prot, flags, fd, off)
}

/// `munmap`, forgetting emulated doorbell mappings in the range first.
///
/// # Safety
///
/// `munmap(2)`'s contract: the caller no longer uses the range.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    crate::devices::before_munmap(addr as u64, len as u64);
    let real: Option<MunmapFn> = next(&MUNMAP, c"munmap");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(addr, len) },
        None => -1,
    }
}

/// `fstat` of an emulated device into the caller's buffer: 0, or -1 with EFAULT for null.
fn stat_device(dev: Device, buf: *mut libc::stat) -> libc::c_int {
    // SAFETY: the caller passes a writable stat buffer (fstat's contract); null is EFAULT.
    match unsafe { buf.as_mut() } {
        Some(st) => {
            crate::devices::fill_stat(dev, st);
            0
        }
        None => set_errno(libc::EFAULT),
    }
}

fn fstat_common(
    cell: &OnceLock<usize>,
    name: &CStr,
    fd: libc::c_int,
    buf: *mut libc::stat,
) -> libc::c_int {
    if let Some(dev) = fds::device(fd) {
        return stat_device(dev, buf);
    }
    let real: Option<FstatFn> = next(cell, name);
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(fd, buf) },
        None => -1,
    }
}

/// `fstat`: an emulated descriptor is the character device it stands for.
///
/// # Safety
///
/// `fstat(2)`'s contract: `buf` is valid for writing a `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn fstat(fd: libc::c_int, buf: *mut libc::stat) -> libc::c_int {
    fstat_common(&FSTAT, c"fstat", fd, buf)
}

/// `fstat64`: as [`fstat`].
///
/// # Safety
///
/// As [`fstat`].
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: libc::c_int, buf: *mut libc::stat) -> libc::c_int {
    fstat_common(&FSTAT64, c"fstat64", fd, buf)
}

fn fstatat_common(
    cell: &OnceLock<usize>,
    name: &CStr,
    dirfd: libc::c_int,
    path: *const libc::c_char,
    buf: *mut libc::stat,
    flags: libc::c_int,
) -> libc::c_int {
    // SAFETY: a non-null path is NUL-terminated (fstatat's contract).
    let empty = !path.is_null() && unsafe { *path } == 0;
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        if let Some(dev) = fds::device(dirfd) {
            return stat_device(dev, buf);
        }
    }
    let real: Option<FstatatFn> = next(cell, name);
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(dirfd, path, buf, flags) },
        None => -1,
    }
}

/// `fstatat` with `AT_EMPTY_PATH` on an emulated descriptor: as [`fstat`].
///
/// # Safety
///
/// `fstatat(2)`'s contract: `path` is NUL-terminated, `buf` writable.
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    buf: *mut libc::stat,
    flags: libc::c_int,
) -> libc::c_int {
    fstatat_common(&FSTATAT, c"fstatat", dirfd, path, buf, flags)
}

/// `fstatat64`: as [`fstatat`].
///
/// # Safety
///
/// As [`fstatat`].
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    buf: *mut libc::stat,
    flags: libc::c_int,
) -> libc::c_int {
    fstatat_common(&FSTATAT64, c"fstatat64", dirfd, path, buf, flags)
}

/// `dup2`: `newfd` stops being whatever emulated device it was.
///
/// # Safety
///
/// `dup2(2)`'s contract.
#[no_mangle]
pub unsafe extern "C" fn dup2(oldfd: libc::c_int, newfd: libc::c_int) -> libc::c_int {
    if oldfd != newfd {
        fds::forget(newfd);
    }
    let real: Option<Dup2Fn> = next(&DUP2, c"dup2");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(oldfd, newfd) },
        None => -1,
    }
}

/// `dup3`: as [`dup2`].
///
/// # Safety
///
/// `dup3(2)`'s contract.
#[no_mangle]
pub unsafe extern "C" fn dup3(
    oldfd: libc::c_int,
    newfd: libc::c_int,
    flags: libc::c_int,
) -> libc::c_int {
    fds::forget(newfd);
    let real: Option<Dup3Fn> = next(&DUP3, c"dup3");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(oldfd, newfd, flags) },
        None => -1,
    }
}

#[cfg(test)]
mod signal_chaining {
    //! The process's own SIGSEGV handler installed after the doorbell trap's (as LLVM installs
    //! its crash handler while comgr compiles): doorbell stores must still reach the trap, and
    //! other faults the process's handler. Runs through this crate's own `sigaction` (the test
    //! program defines it, as the preloaded thunk does in a real process).

    use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    use xhsa_emu::sys::doorbell::TrappedArea;

    static STOLEN: AtomicUsize = AtomicUsize::new(0);
    static OTHER_FAULTS: AtomicUsize = AtomicUsize::new(0);
    static OTHER_PAGE: AtomicUsize = AtomicUsize::new(0);
    /// What the LLVM-like handler displaced when it was installed.
    static DISPLACED: OnceLock<libc::sigaction> = OnceLock::new();

    fn page() -> usize {
        // SAFETY: sysconf has no memory-safety preconditions.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
    }

    /// LLVM's crash handler in miniature: a fault it does not expect is a crash, so it puts back
    /// the handler it displaced (LLVM's `unregisterHandlers`, after deleting its temporary files)
    /// and returns, and the faulting store repeats. A fault on `OTHER_PAGE` is one it expects:
    /// it makes the page writable.
    extern "C" fn llvm_like(_sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel's siginfo for an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        let other = OTHER_PAGE.load(Ordering::Acquire);
        if addr >= other && addr < other + page() {
            OTHER_FAULTS.fetch_add(1, Ordering::SeqCst);
            // SAFETY: the test's own page.
            unsafe {
                libc::mprotect(
                    other as *mut libc::c_void,
                    page(),
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            return;
        }
        STOLEN.fetch_add(1, Ordering::SeqCst);
        if let Some(d) = DISPLACED.get() {
            // SAFETY: a valid action saved at installation.
            unsafe { libc::sigaction(libc::SIGSEGV, d, std::ptr::null_mut()) };
        }
    }

    fn map_page() -> *mut u8 {
        // SAFETY: a fresh anonymous mapping owned by the test (never unmapped: the handlers may
        // look at it until the process ends).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn a_sigsegv_handler_installed_after_the_doorbell_trap_gets_only_the_other_faults() {
        let bell = map_page();
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        // SAFETY: the mapping is the test's and stays mapped.
        let area = unsafe { TrappedArea::register(bell, page(), word) }.unwrap();
        let other = map_page();
        OTHER_PAGE.store(other as usize, Ordering::Release);

        // The process installs its handler over ours, LLVM's way (SA_RESETHAND, SA_NODEFER).
        // SAFETY: zeroed sigactions are valid; the handler has the SA_SIGINFO type.
        let (mut llvm, mut before, mut seen): (libc::sigaction, libc::sigaction, libc::sigaction) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
        llvm.sa_sigaction = llvm_like as *const () as usize;
        llvm.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK;
        // SAFETY: pointers to local actions.
        assert_eq!(unsafe { libc::sigaction(libc::SIGSEGV, &llvm, &mut before) }, 0);
        DISPLACED.set(before).unwrap();
        // It sees its own handler as the current one.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut seen) }, 0);
        assert_eq!(seen.sa_sigaction, llvm.sa_sigaction);

        // A doorbell store (another thread's, as the runtime's): the trap, not the process's
        // handler, takes it.
        area.arm().unwrap();
        let addr = bell as usize;
        std::thread::spawn(move || {
            // SAFETY: in-bounds aligned store into the doorbell page.
            unsafe { (*(addr as *const AtomicU64)).store(5, Ordering::Release) }
        })
        .join()
        .unwrap();
        assert_eq!(
            STOLEN.load(Ordering::SeqCst),
            0,
            "the process's SIGSEGV handler took a doorbell store (it would have deleted comgr's output)"
        );
        assert_eq!((area.traps(), word.load(Ordering::Acquire)), (1, 1));
        // SAFETY: in-bounds aligned read.
        assert_eq!(unsafe { *(bell as *const u64) }, 5);

        // A fault outside the doorbells reaches the process's handler, which was SA_RESETHAND:
        // afterwards the process sees the default action, as the kernel would have left it.
        // SAFETY: the test's own page.
        unsafe { libc::mprotect(other.cast(), page(), libc::PROT_READ) };
        // SAFETY: in-bounds aligned store; the handler makes the page writable.
        unsafe { (*(other as *const AtomicU64)).store(9, Ordering::Release) };
        assert_eq!(OTHER_FAULTS.load(Ordering::SeqCst), 1);
        // SAFETY: in-bounds aligned read.
        assert_eq!(unsafe { *(other as *const u64) }, 9);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut seen) }, 0);
        assert_eq!(seen.sa_sigaction, libc::SIG_DFL);

        // The trap still works after all that.
        area.arm().unwrap();
        // SAFETY: in-bounds aligned store into the doorbell page.
        unsafe { (*(addr as *const AtomicU64)).store(6, Ordering::Release) };
        assert_eq!((area.traps(), STOLEN.load(Ordering::SeqCst)), (2, 0));
        // The process's handler back as it was before the test.
        // SAFETY: a valid action read above.
        unsafe { libc::sigaction(libc::SIGSEGV, &before, std::ptr::null_mut()) };
        drop(area);
    }
}
