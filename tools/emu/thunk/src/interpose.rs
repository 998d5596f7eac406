//! `/dev/kfd` for code that opens it itself (rocminfo checks it can; ROCm 6.x's ROCr, with the
//! thunk linked in, issues its ioctls directly). When this library is preloaded its `open`,
//! `open64`, `openat`, `openat64`, `close` and `ioctl` come first: opening `/dev/kfd` yields a
//! descriptor (of `/dev/null`) that is remembered as a KFD descriptor, and ioctls on it reach
//! the emulated KFD. Every other call goes to the next definition (libc) unchanged.
//!
//! The libc functions are variadic; on x86-64 the optional argument travels in the same
//! register as a fixed one, so they are declared with it as a fixed parameter.

use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::{Mutex, OnceLock};

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

#[no_mangle]
pub unsafe extern "C" fn open(path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    let real: Option<OpenFn> = next(&OPEN, c"open");
    if is_kfd_path(path) {
        return open_kfd(real, flags);
    }
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(path, flags, mode) },
        None => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    let real: Option<OpenFn> = next(&OPEN64, c"open64");
    if is_kfd_path(path) {
        return open_kfd(real, flags);
    }
    match real {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(path, flags, mode) },
        None => -1,
    }
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

#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: libc::c_int, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    openat_common(&OPENAT, c"openat", dirfd, path, flags, mode)
}

#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: libc::c_int, path: *const libc::c_char, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    openat_common(&OPENAT64, c"openat64", dirfd, path, flags, mode)
}

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

/// An ioctl on a `/dev/kfd` descriptor. This emulated KFD answers GET_VERSION here;
/// the other requests fail with EINVAL, KFD's answer for an ioctl it cannot serve.
fn kfd_ioctl(request: libc::c_ulong, arg: *mut libc::c_void) -> libc::c_int {
    match Request::from_raw_lenient(request) {
        Some(Request::GetVersion) if !arg.is_null() => {
            let a = GetVersionArgs { major_version: xhsa_emu::kfd::VERSION.0, minor_version: xhsa_emu::kfd::VERSION.1 };
            // SAFETY: the caller passes a writable kfd_ioctl_get_version_args.
            unsafe { (arg as *mut GetVersionArgs).write_unaligned(a) };
            0
        }
        Some(_) => set_errno(libc::EINVAL),
        None => set_errno(libc::ENOTTY),
    }
}
