//! ROCr 6.4's IPC socket server at teardown: the close request waits for the server to stop.
//!
//! ROCr's DMA-buf IPC (see docs/emulator.md, "IPC") serves the exporter's buffers from a thread
//! listening on the abstract Unix socket `"\0hsa<pid>"`. `Runtime::Unload` (hsa_shut_down, run
//! by HIP's static destructors at exit) stops it by connecting to it and writing the close
//! request (64 bytes: `-1` in ROCr 6.4, which prints UINT64_MAX with `%li`;
//! `18446744073709551615` in later versions), and goes on at once. ROCr 6.4.3 never joins that
//! thread: the thread then clears `ipc_sock_server_conns_` (a `std::map` inside the runtime
//! object, without a lock) and closes its listening socket through references into the
//! runtime object, while `Runtime::Release` deletes that object. When the thread runs late,
//! after the deletion but before the process is gone, the map is freed twice and glibc aborts
//! the exit with `double free or corruption (!prev)`. With the emulator the rest of `Unload`
//! and of the exit takes about a millisecond (its KFD requests are quick), and a server thread
//! held back by about 1 ms after `accept` (an `accept` wrapper that sleeps) makes `hip_ipc`'s
//! parent abort so about every other run; a loaded CI machine did it once on its own. Later
//! ROCr keeps the thread's handle and waits for it in `Unload` after sending the request
//! (`WaitForThread`).
//!
//! The thunk gives ROCr 6.4 that order: a write of the close request to this process's own
//! server returns once the server has closed its listening socket (the last thing the thread
//! does with the runtime object, right after clearing the map). The wait is bounded (a server
//! that never stops delays the exit by [`WAIT`], then the exit goes on as ROCr would). With a
//! ROCr that joins the thread itself, the wait ends at the same moment as its own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The size of ROCr's request buffer (`IPC_SOCK_SERVER_DMABUF_FD_HANDLE_LENGTH`).
pub const REQUEST_LEN: usize = 64;
/// The longest a close request waits for the server to stop.
const WAIT: Duration = Duration::from_secs(5);

/// Close requests waiting for the server to stop (the close hook looks only then).
static PENDING: AtomicU32 = AtomicU32::new(0);
/// How many times this process's server closed its listening socket.
static STOPPED: Mutex<u64> = Mutex::new(0);
static STOPPED_CV: Condvar = Condvar::new();

/// The request text ROCr writes to stop its server: UINT64_MAX as ROCr 6.4 (`%li`) and later
/// versions (`PRIu64`) print it, NUL-padded to the buffer's size.
fn is_close_request(buf: &[u8]) -> bool {
    if buf.len() != REQUEST_LEN {
        return false;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    matches!(&buf[..end], b"-1" | b"18446744073709551615")
}

/// Whether an `AF_UNIX` address (as getsockname/getpeername fill it, `len` bytes) is this
/// process's ROCr IPC server: the abstract name `hsa<pid>`, NUL-padded (ROCr binds the whole
/// `sun_path`).
fn is_own_server_address(addr: &libc::sockaddr_un, len: libc::socklen_t) -> bool {
    if addr.sun_family != libc::AF_UNIX as libc::sa_family_t {
        return false;
    }
    let header = std::mem::size_of::<libc::sa_family_t>();
    let n = (len as usize).saturating_sub(header).min(addr.sun_path.len());
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let path: Vec<u8> = addr.sun_path[..n].iter().map(|&c| c as u8).collect();
    let Some((&0, name)) = path.split_first() else { return false };
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    name[..end] == *format!("hsa{pid}").as_bytes() && name[end..].iter().all(|&b| b == 0)
}

/// The local (`peer` false) or peer address of socket `fd`, if it is a Unix socket.
fn unix_address(fd: i32, peer: bool) -> Option<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let p = (&mut addr as *mut libc::sockaddr_un).cast::<libc::sockaddr>();
    // SAFETY: `addr` is writable for `len` bytes; the kernel writes at most that many.
    let r = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    (r == 0).then_some((addr, len))
}

/// Runs `f` and puts this thread's errno back as it was (the checks below must not change
/// what the caller of `write` or `close` sees).
pub fn keeping_errno<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: __errno_location returns this thread's errno slot.
    let saved = unsafe { *libc::__errno_location() };
    let r = f();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    r
}

/// A write of `buf` to `fd` is about to be made: if it is the close request to this process's
/// own server, returns the token [`after_write`] waits with.
pub fn before_write(fd: i32, buf: &[u8]) -> Option<u64> {
    if !is_close_request(buf) {
        return None;
    }
    let own =
        keeping_errno(|| unix_address(fd, true).is_some_and(|(a, l)| is_own_server_address(&a, l)));
    if !own {
        return None;
    }
    PENDING.fetch_add(1, Ordering::SeqCst);
    Some(*STOPPED.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The close request (its token from [`before_write`]) was written (`ok`: all of it): waits
/// until the server has closed its listening socket, for at most [`WAIT`].
pub fn after_write(token: u64, ok: bool) {
    if ok {
        let deadline = Instant::now() + WAIT;
        let mut stopped = STOPPED.lock().unwrap_or_else(|p| p.into_inner());
        while *stopped == token {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!("xhsa-emu: ROCr's IPC socket server did not stop within {WAIT:?} of the close request; going on");
                break;
            }
            stopped = STOPPED_CV.wait_timeout(stopped, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
    PENDING.fetch_sub(1, Ordering::SeqCst);
}

/// `fd` is about to be closed: whether it is this process's server's listening socket while a
/// close request waits (then [`server_stopped`] follows the close).
pub fn before_close(fd: i32) -> bool {
    if PENDING.load(Ordering::SeqCst) == 0 || fd < 0 {
        return false;
    }
    keeping_errno(|| {
        let mut listening: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `listening` is writable for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ACCEPTCONN,
                (&mut listening as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        // The server's accepted connections have its address too; only the listener accepts.
        r == 0
            && listening != 0
            && unix_address(fd, false).is_some_and(|(a, l)| is_own_server_address(&a, l))
    })
}

/// The server's listening socket is closed: the close request's wait ends.
pub fn server_stopped() {
    *STOPPED.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    STOPPED_CV.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_close_request_is_recognised_in_both_spellings_and_nothing_else() {
        assert!(is_close_request(&request(b"-1")));
        assert!(is_close_request(&request(b"18446744073709551615")));
        assert!(!is_close_request(&request(b"140737488355328")), "an import request (a pointer)");
        assert!(!is_close_request(b"-1"), "not ROCr's 64-byte buffer");
        assert!(!is_close_request(&request(b"-12")));
    }

    /// ROCr 6.4's server address for `pid`: `"xhsa<pid>"` copied into the whole `sun_path`,
    /// its first byte then made NUL (an abstract name), bound with the whole structure's size.
    fn rocr_address(pid: i32) -> libc::sockaddr_un {
        // SAFETY: an all-zero sockaddr_un is a valid value.
        let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        a.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in a.sun_path.iter_mut().zip(format!("xhsa{pid}").bytes()) {
            *d = s as libc::c_char;
        }
        a.sun_path[0] = 0;
        a
    }

    const FULL: libc::socklen_t = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;

    fn socket() -> i32 {
        // SAFETY: a new socket of the test's own.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        fd
    }

    fn request(text: &[u8]) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[..text.len()].copy_from_slice(text);
        b
    }

    #[test]
    fn only_this_processs_server_name_is_its_server() {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        assert!(is_own_server_address(&rocr_address(pid), FULL));
        assert!(!is_own_server_address(&rocr_address(pid + 1), FULL), "another process's server");
        let mut a = rocr_address(pid);
        a.sun_path[1] = b'x' as libc::c_char;
        assert!(!is_own_server_address(&a, FULL));
        let mut a = rocr_address(pid);
        a.sun_path[60] = 1;
        assert!(!is_own_server_address(&a, FULL), "a longer name");
        let mut a = rocr_address(pid);
        a.sun_path[0] = b'x' as libc::c_char;
        assert!(!is_own_server_address(&a, FULL), "a path, not an abstract name");
    }

    /// ROCr 6.4's teardown with a server thread that runs late: `Runtime::Unload` writes the close
    /// request and (in ROCr) deletes the runtime right after `write` returns, while the server
    /// thread clears the map inside it and then closes its listening socket. `write` must return
    /// only after that close, or the map is freed twice (`double free or corruption (!prev)` at
    /// exit of the IPC test's parent). A write of the same bytes to any other socket returns at
    /// once.
    #[test]
    fn the_close_request_returns_once_the_server_has_stopped() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;

        // SAFETY: getpid has no preconditions.
        let addr = rocr_address(unsafe { libc::getpid() });
        let ptr = (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>();
        let listener = socket();
        // SAFETY: binding and listening on the test's socket, ROCr's way.
        unsafe {
            assert_eq!(libc::bind(listener, ptr, FULL), 0);
            assert_eq!(libc::listen(listener, 1), 0);
        }
        let cleared = Arc::new(AtomicBool::new(false));
        let c = cleared.clone();
        let server = std::thread::spawn(move || {
            // SAFETY: accepting on the test's listening socket; reading into a local buffer.
            let conn =
                unsafe { libc::accept(listener, std::ptr::null_mut(), std::ptr::null_mut()) };
            assert!(conn >= 0);
            let mut buf = [0u8; REQUEST_LEN];
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::read(conn, buf.as_mut_ptr().cast(), buf.len()) };
            assert_eq!(n, REQUEST_LEN as isize);
            assert!(is_close_request(&buf));
            // SAFETY: closing the connection this thread accepted (through the thunk's close,
            // as ROCr's call resolves to it).
            unsafe { crate::interpose::close(conn) };
            // Late, as the CI run's server thread was: then the map, then the listener.
            std::thread::sleep(Duration::from_millis(200));
            c.store(true, Ordering::SeqCst);
            // SAFETY: closing the listening socket this test made.
            unsafe { crate::interpose::close(listener) };
        });

        // Another socket (not a server of this process) gets the same bytes without waiting.
        let mut pair = [0i32; 2];
        // SAFETY: a socket pair into a two-element array.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) };
        assert_eq!(r, 0);
        let bytes = request(b"-1");
        let t0 = Instant::now();
        // SAFETY: writing the test's buffer to its own socket.
        let n = unsafe { crate::interpose::write(pair[0], bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(n, REQUEST_LEN as isize);
        assert!(t0.elapsed() < Duration::from_millis(150), "a write to another socket waited");
        assert!(!cleared.load(Ordering::SeqCst));

        // Unload's IPCClientImport(getpid(), IPC_SOCK_SERVER_CONN_CLOSE_HANDLE).
        let client = socket();
        // SAFETY: connecting the test's socket to the server above.
        assert_eq!(unsafe { libc::connect(client, ptr, FULL) }, 0);
        // SAFETY: writing the test's buffer to its own socket.
        let n = unsafe { crate::interpose::write(client, bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(n, REQUEST_LEN as isize);
        assert!(
            cleared.load(Ordering::SeqCst),
            "the close request returned while the server thread still used the runtime object"
        );
        server.join().unwrap();
        // SAFETY: closing the test's own descriptors.
        unsafe {
            crate::interpose::close(client);
            crate::interpose::close(pair[0]);
            crate::interpose::close(pair[1]);
        }
    }
}
