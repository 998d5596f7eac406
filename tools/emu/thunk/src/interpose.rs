//! `/dev/kfd`: the thunk issues its requests (queues, memory, events, version, runtime, clock)
//! as ioctls on a KFD descriptor, as the real thunk does, and code that opens the device itself
//! (rocminfo checks it can; ROCm 6.x's ROCr, with the thunk linked in, issues its ioctls
//! directly; libxhsa suspends queues with DBG_TRAP) reaches the same emulated KFD. When this
//! library is preloaded its `open`, `open64`, `openat`, `openat64`, `close` and `ioctl` come
//! first: opening `/dev/kfd` yields a
//! descriptor (of `/dev/null`) that is remembered as a KFD descriptor, and ioctls on it reach
//! the emulated KFD. Every other call goes to the next definition (libc) unchanged.
//!
//! The libc functions are variadic; on x86-64 the optional argument travels in the same
//! register as a fixed one, so they are declared with it as a fixed parameter.

use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::{Mutex, OnceLock};

use xhsa_ioctl::abi::dbg_trap::{DbgTrapArgs, DbgTrapOp};
use xhsa_ioctl::abi::debug::{QueueSnapshotEntry, RuntimeEnableArgs, RuntimeInfo, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK, KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK};
use xhsa_ioctl::abi::event::{CreateEventArgs, DestroyEventArgs, EventData, ResetEventArgs, SetEventArgs, WaitEventsArgs};
use xhsa_ioctl::abi::memory::{AllocMemoryOfGpuArgs, FreeMemoryOfGpuArgs, MapMemoryToGpuArgs};
use xhsa_ioctl::abi::process::GetClockCountersArgs;
use xhsa_ioctl::abi::queue::{CreateQueueArgs, DestroyQueueArgs, SetCuMaskArgs, UpdateQueueArgs};
use xhsa_ioctl::abi::request::Request;
use xhsa_ioctl::abi::version::GetVersionArgs;

static KFD_FDS: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

type OpenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int;
type OpenAtFn = unsafe extern "C" fn(libc::c_int, *const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int;
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

fn is_kfd_path(path: *const libc::c_char) -> bool {
    // SAFETY: callers of open pass a NUL-terminated path (or NULL, rejected first).
    !path.is_null() && unsafe { CStr::from_ptr(path) }.to_bytes() == b"/dev/kfd"
}

fn is_kfd_fd(fd: i32) -> bool {
    KFD_FDS.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|s| s.contains(&fd))
}

fn open_kfd(real: Option<OpenFn>, flags: libc::c_int) -> libc::c_int {
    let Some(f) = real else { return -1 };
    // SAFETY: the real open with a static path.
    let fd = unsafe { f(c"/dev/null".as_ptr(), (flags & libc::O_CLOEXEC) | libc::O_RDWR, 0) };
    if fd >= 0 {
        KFD_FDS.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(HashSet::new).insert(fd);
    }
    fd
}

static OPEN: OnceLock<usize> = OnceLock::new();
static OPEN64: OnceLock<usize> = OnceLock::new();
static OPENAT: OnceLock<usize> = OnceLock::new();
static OPENAT64: OnceLock<usize> = OnceLock::new();
static CLOSE: OnceLock<usize> = OnceLock::new();
static IOCTL: OnceLock<usize> = OnceLock::new();

fn open_common(cell: &OnceLock<usize>, name: &CStr, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    let real: Option<OpenFn> = next(cell, name);
    if is_kfd_path(path) {
        return open_kfd(real, flags);
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
pub unsafe extern "C" fn open(path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    open_common(&OPEN, c"open", path, flags, mode)
}

/// `open64`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `open64`: `path` is null or a NUL-terminated string (and `mode` is read only
/// when `flags` ask for it). Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    open_common(&OPEN64, c"open64", path, flags, mode)
}

fn openat_common(cell: &OnceLock<usize>, name: &CStr, dirfd: libc::c_int, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    let real: Option<OpenAtFn> = next(cell, name);
    if is_kfd_path(path) {
        let plain: Option<OpenFn> = next(&OPEN, c"open");
        return open_kfd(plain, flags);
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
pub unsafe extern "C" fn openat(dirfd: libc::c_int, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    openat_common(&OPENAT, c"openat", dirfd, path, flags, mode)
}

/// `openat64`, with `/dev/kfd` opened as an emulated KFD descriptor.
///
/// # Safety
///
/// libc's contract of `openat64`: `path` is null or a NUL-terminated string, `dirfd` as `openat64`
/// takes it. Any path but `/dev/kfd` goes to libc's definition unchanged.
#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: libc::c_int, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
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
    if let Some(s) = KFD_FDS.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        s.remove(&fd);
    }
    let real: Option<CloseFn> = next(&CLOSE, c"close");
    match real {
        // SAFETY: forwarding the caller's argument unchanged.
        Some(f) => unsafe { f(fd) },
        None => -1,
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
pub unsafe extern "C" fn ioctl(fd: libc::c_int, request: libc::c_ulong, arg: *mut libc::c_void) -> libc::c_int {
    if is_kfd_fd(fd) {
        return kfd_ioctl(request, arg);
    }
    let real: Option<IoctlFn> = next(&IOCTL, c"ioctl");
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(fd, request, arg) },
        None => -1,
    }
}

fn set_errno(e: i32) -> libc::c_int {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
    -1
}

/// Opens `/dev/kfd` for the thunk itself: through libc's `open`, so that an interposer sees it
/// as on a real system, or directly when this library is not first in the lookup order.
pub fn open_dev_kfd() -> i32 {
    let first: Option<OpenFn> = global(&GLOBAL_OPEN, c"open");
    // SAFETY: the first `open` in lookup order, with a static NUL-terminated path.
    let fd = first.map_or(-1, |f| unsafe { f(c"/dev/kfd".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) });
    if fd >= 0 && is_kfd_fd(fd) {
        return fd;
    }
    if fd >= 0 {
        // SAFETY: closing the descriptor we just opened (a real /dev/kfd is not ours to use).
        unsafe { libc::close(fd) };
    }
    open_kfd(next(&OPEN, c"open"), libc::O_CLOEXEC)
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
    // SAFETY: `arg` is a valid, writable argument struct of the request's type.
    let r = unsafe { ioctl_fn(fd, request as libc::c_ulong, p) };
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

/// Reads an argument struct from the caller's pointer (unaligned; the caller's layout).
fn read_arg<T: Copy + Default>(arg: *mut libc::c_void, size: usize) -> T {
    let mut v = T::default();
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: the caller passes a buffer of the request's size (`size`, encoded in the request
    // number); we copy at most that many bytes into a zeroed T, as KFD zero-fills short structs.
    unsafe { std::ptr::copy_nonoverlapping(arg as *const u8, (&mut v as *mut T).cast::<u8>(), n) };
    v
}

fn write_arg<T: Copy>(arg: *mut libc::c_void, v: &T, size: usize) {
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
        Ok(r) => r,
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
        Request::GetClockCounters => {
            let mut a: GetClockCountersArgs = read_arg(arg, size);
            let r = kfd.get_clock_counters(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::RuntimeEnable => {
            let mut a: RuntimeEnableArgs = read_arg(arg, size);
            let r = kfd.runtime_enable(a.mode_mask & KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK != 0, a.r_debug, a.mode_mask & KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK != 0);
            a.capabilities_mask = 0;
            write_arg(arg, &a, size);
            done(r)
        }
        Request::DbgTrap => dbg_trap(&e, arg, size),
        Request::AllocMemoryOfGpu => {
            let mut a: AllocMemoryOfGpuArgs = read_arg(arg, size);
            let r = kfd.alloc_memory(&mut a);
            write_arg(arg, &a, size);
            done(r)
        }
        Request::FreeMemoryOfGpu => {
            let a: FreeMemoryOfGpuArgs = read_arg(arg, size);
            done(kfd.free_memory_handle(a.handle).map(|_| ()))
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
        _ => set_errno(libc::EINVAL),
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
    let ids: Vec<u32> = (0..n).map(|i| unsafe { std::ptr::addr_of!((*entries.add(i)).event_id).read_unaligned() }).collect();
    match e.kfd.wait_events(&ids, &mut a) {
        Ok(out) => {
            for (id, data) in out.memory_faults {
                for (i, _) in ids.iter().enumerate().filter(|(_, &x)| x == id) {
                    // SAFETY: entry `i` of the `num_events` the caller passed at events_ptr; writing the
                    // union's memory-exception member (KFD's layout of kfd_event_data).
                    unsafe { std::ptr::addr_of_mut!((*entries.add(i)).data.memory_exception_data).write_unaligned(data) };
                }
            }
            write_arg(arg, &a, size);
            0
        }
        Err(errno) => set_errno(errno),
    }
}

/// Copies `len` bytes of `v` to the caller's `ptr` (KFD's copy_to_user): EFAULT for NULL.
fn copy_out<T: Copy>(ptr: u64, v: &T, len: usize) -> Result<(), i32> {
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
        Some(DbgTrapOp::SetExceptionsEnabled(a)) => kfd.dbg_set_exceptions_enabled(pid, a.exception_mask).map(|()| 0),
        Some(DbgTrapOp::SuspendQueues(a)) => {
            let mut ids = read_u32s(a.queue_array_ptr, a.num_queues.min(4096) as usize);
            // Grace period in units of 1K GPU clock cycles; 0xffffffff is KFD's "default", which
            // the emulator models as none.
            let grace = if a.grace_period == u32::MAX { 0 } else { a.grace_period };
            let grace_ns = u64::from(grace) * 1_000_000 / u64::from(e.kfd.cfg.device.max_engine_clock_mhz.max(1));
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
                    copy_out::<QueueSnapshotEntry>(a.snapshot_buf_ptr.wrapping_add(i as u64 * stride), entry, a.entry_size as usize)?;
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
