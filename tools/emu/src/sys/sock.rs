//! What the shared device needs of Unix sockets beyond `std`: descriptors passed with a line
//! (`SCM_RIGHTS`), anonymous shared memory (`memfd`), and waiting for a peer to hang up.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Most descriptors one line carries.
const MAX_FDS: usize = 4;

/// Room for `MAX_FDS` descriptors in a control message, as `CMSG_SPACE` computes it.
fn cmsg_space() -> usize {
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// Sends `bytes` (one protocol line) with `fds` attached to its first byte.
pub fn send_with_fds(s: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS, "at most {MAX_FDS} descriptors per line");
    let mut sent = 0;
    while sent < bytes.len() {
        let mut iov = libc::iovec {
            iov_base: bytes[sent..].as_ptr() as *mut libc::c_void,
            iov_len: bytes.len() - sent,
        };
        // u64 elements keep the buffer aligned for cmsghdr.
        let mut control = vec![0u64; cmsg_space().div_ceil(8)];
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if sent == 0 && !fds.is_empty() {
            let len = std::mem::size_of_val(fds);
            msg.msg_control = control.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE is arithmetic on its argument.
            msg.msg_controllen = unsafe { libc::CMSG_SPACE(len as u32) } as usize;
            // SAFETY: msg_control points at `control`, which is at least CMSG_SPACE(len) bytes
            // and 8-aligned, so the first header and its data fit; the data is `fds.len()` ints.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(len as u32) as usize;
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for (i, fd) in fds.iter().enumerate() {
                    data.add(i).write_unaligned(fd.as_raw_fd());
                }
            }
        }
        // SAFETY: `msg` describes live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Receives one line (up to and including its `\n`, which is dropped) and the descriptors sent
/// with it. Reads byte by byte, so nothing after the line is consumed: the caller may go on
/// with buffered reads. An end of stream before the newline is `UnexpectedEof`.
pub fn recv_line_with_fds(s: &UnixStream) -> io::Result<(String, Vec<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    loop {
        let mut byte = 0u8;
        let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
        let mut control = vec![0u64; cmsg_space().div_ceil(8)];
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() * 8;
        // SAFETY: `msg` describes live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: walking the control messages the kernel wrote into `control`; SCM_RIGHTS
        // data is an array of descriptors now owned by this process.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                        / std::mem::size_of::<RawFd>();
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    for i in 0..count {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if byte == b'\n' {
            return Ok((String::from_utf8_lossy(&line).into_owned(), fds));
        }
        line.push(byte);
    }
}

/// A new anonymous shared-memory file of `len` zero bytes (close-on-exec).
pub fn memfd(name: &std::ffi::CStr, len: u64) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone()?).set_len(len)?;
    Ok(fd)
}

/// Blocks until the peer of `sock` has closed its end (or the socket failed), or `stop` (a
/// pipe's read end) is closed or readable. Returns true for the socket, false for `stop`.
pub fn wait_hangup(sock: BorrowedFd<'_>, stop: BorrowedFd<'_>) -> bool {
    let mut p = [
        libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 },
        libc::pollfd { fd: stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    loop {
        // SAFETY: poll on two descriptors we borrow for the call; no timeout.
        let n = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if p[1].revents != 0 {
            return false;
        }
        if p[0].revents != 0 {
            return true;
        }
    }
}

/// A pipe (both ends close-on-exec): read end, write end.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_line_carries_descriptors_and_leaves_the_rest_unread() {
        let (a, b) = UnixStream::pair().unwrap();
        let m = memfd(c"xhsa-test", 4096).unwrap();
        send_with_fds(&a, b"HELLO x=1\nNEXT\n", &[m.as_fd()]).unwrap();
        let (line, fds) = recv_line_with_fds(&b).unwrap();
        assert_eq!((line.as_str(), fds.len()), ("HELLO x=1", 1));
        assert_eq!(
            std::fs::File::from(fds.into_iter().next().unwrap()).metadata().unwrap().len(),
            4096
        );
        let (line, fds) = recv_line_with_fds(&b).unwrap();
        assert_eq!((line.as_str(), fds.len()), ("NEXT", 0));
        drop(a);
        assert_eq!(recv_line_with_fds(&b).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn hangup_and_stop_are_told_apart() {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = pipe().unwrap();
        drop(a);
        assert!(wait_hangup(b.as_fd(), r.as_fd()));
        let (_a, b) = UnixStream::pair().unwrap();
        drop(w);
        assert!(!wait_hangup(b.as_fd(), r.as_fd()));
    }
}
