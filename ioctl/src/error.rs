//! [`KfdError`]: which KFD call failed, the errno, and what that errno means for that call.

use core::fmt;

use nix::errno::Errno;

use crate::abi::{dbg_trap_op_name, Request};

/// A failed `/dev/kfd` open or ioctl.
///
/// `Display` names the call and explains the errno in terms of that call, e.g.
/// `AMDKFD_IOC_DBG_TRAP(SUSPEND_QUEUES) failed with EPERM: not permitted: ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KfdError {
    /// What failed: an ioctl's C name (`"AMDKFD_IOC_SET_CU_MASK"`) or `"open /dev/kfd"`.
    pub ioctl: &'static str,
    /// The request, for an ioctl.
    pub request: Option<Request>,
    /// The `KFD_IOC_DBG_TRAP_*` op, for `AMDKFD_IOC_DBG_TRAP`.
    pub op: Option<u32>,
    /// The error number.
    pub errno: Errno,
    /// Set when this crate refused the call before making it, saying why.
    pub detail: Option<&'static str>,
}

impl KfdError {
    /// The error of ioctl `request` (with DBG_TRAP op `op`) that failed with `errno`.
    pub const fn ioctl(request: Request, op: Option<u32>, errno: Errno) -> KfdError {
        KfdError { ioctl: request.name(), request: Some(request), op, errno, detail: None }
    }

    /// The error of opening `/dev/kfd`.
    pub const fn open(errno: Errno) -> KfdError {
        KfdError { ioctl: "open /dev/kfd", request: None, op: None, errno, detail: None }
    }

    /// A call this crate refused before making it (reported as `EINVAL`).
    pub const fn refused(request: Request, op: Option<u32>, detail: &'static str) -> KfdError {
        KfdError {
            ioctl: request.name(),
            request: Some(request),
            op,
            errno: Errno::EINVAL,
            detail: Some(detail),
        }
    }

    /// What the errno means for this call.
    pub fn hint(&self) -> &'static str {
        if let Some(detail) = self.detail {
            return detail;
        }
        hint(self.request, self.errno)
    }
}

impl fmt::Display for KfdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ioctl)?;
        if let Some(op) = self.op {
            match dbg_trap_op_name(op) {
                Some(name) => write!(f, "({name})")?,
                None => write!(f, "(op {op})")?,
            }
        }
        write!(f, " failed with {:?}: {}", self.errno, self.hint())
    }
}

impl std::error::Error for KfdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.errno)
    }
}

impl From<KfdError> for std::io::Error {
    fn from(e: KfdError) -> std::io::Error {
        let kind = std::io::Error::from_raw_os_error(e.errno as i32).kind();
        std::io::Error::new(kind, e)
    }
}

/// The meaning of `errno` from `request` (`None`: the open of `/dev/kfd`), as amdkfd's
/// `kfd_ioctl()` and the handlers in `kfd_chardev.c` return it.
fn hint(request: Option<Request>, errno: Errno) -> &'static str {
    use Errno::*;
    use Request::*;

    let Some(request) = request else {
        return match errno {
            ENOENT | ENXIO | ENODEV => "no /dev/kfd: the amdgpu driver with KFD is not loaded",
            EACCES | EPERM => "permission denied: the user needs access to /dev/kfd (render group)",
            _ => errno.desc(),
        };
    };
    match (errno, request) {
        (ENOTTY, _) => {
            "not supported: this KFD lacks the ioctl (kernel older than the uapi that added \
             it) or the fd is not /dev/kfd"
        }
        (EPERM, DbgTrap) => {
            "not permitted: debug trap not enabled for this hardware op (the target's runtime \
             has not called AMDKFD_IOC_RUNTIME_ENABLE) or target is not your process/ptrace \
             child"
        }
        (EINVAL, DbgTrap) => {
            "invalid: debug trap not enabled on the target (DBG_TRAP ENABLE first) or already \
             enabled, unknown op, or the GPU runs without hardware scheduling"
        }
        (EACCES, DbgTrap) => {
            "access denied: the target's runtime has not enabled debugging, or a requested \
             trap mask bit is not supported"
        }
        (ESRCH, DbgTrap) => "no such process, or it has not opened /dev/kfd",
        (EBUSY, DbgTrap) => "busy: PC sampling is active on the target",
        (EAGAIN, DbgTrap) => "no raised exception to report",
        (EALREADY, DbgTrap) => {
            "a debug session is already on for the target (ENABLE twice, or a debugger such as \
             rocgdb attached)"
        }
        (ENODATA, DbgTrap) => "that exception is not raised on that queue or GPU",
        (ENODEV, DbgTrap) => "a GPU of the target does not support debugging, or no such gpu_id",
        (EBUSY, RuntimeEnable) => "busy: a runtime enable is already pending",
        (EEXIST, RuntimeEnable) => {
            "user queues already exist: runtime enable must come before the first queue"
        }
        (EINVAL, SetCuMask) => "invalid: the mask bit count must be a non-zero multiple of 32",
        (EINVAL, CreateQueue) => {
            "invalid: bad queue type, ring size or percentage/priority, a queue buffer that is \
             not a GPU mapping of this process, or an unknown gpu_id"
        }
        (EINVAL, UpdateQueue) => {
            "invalid: ring size not a power of two, percentage above 100 or priority above 15"
        }
        (EFAULT, UpdateQueue) | (EFAULT, SetCuMask) => {
            "no such queue (KFD reports an unknown queue id as EFAULT), or a ring that is not \
             a GPU mapping of this process"
        }
        (EACCES, UpdateQueue) => {
            "the process's queues were reset: a queue preemption timed out and KFD reset the \
             GPU; the queue is lost"
        }
        (EIO, UpdateQueue) | (ETIME, UpdateQueue) => {
            "the HWS could not unmap the queues (hung, or a GPU reset is under way); the queue \
             is unchanged"
        }
        (EINVAL, _) => {
            "invalid argument: an unknown queue, gpu or event id, or a value this KFD rejects \
             (a KFD without the ioctl may also say EINVAL)"
        }
        (EACCES, CriuOp) => "needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN",
        (EPERM, _) => "operation not permitted",
        (EACCES, _) => "permission denied",
        (ENODEV, _) => "no such device: unknown gpu_id, or the GPU does not support this",
        (EBUSY, _) => "device or resource busy",
        (EBADF, _) => {
            "bad file descriptor: the KFD fd belongs to another process (it does not survive \
             fork), or an fd argument is invalid"
        }
        (EFAULT, _) => "bad address: a user pointer in the arguments is not accessible",
        (ENOMEM, _) => "out of memory, or no free queue slot",
        (ENOSPC, _) => "no space: queue or doorbell slots exhausted",
        (EINTR, _) => "interrupted by a signal",
        (ETIME, _) | (ETIMEDOUT, _) => "timed out",
        (EIO, _) => "I/O error: the GPU is hung or being reset",
        _ => errno.desc(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{KFD_IOC_DBG_TRAP_ENABLE, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES};

    #[test]
    fn display_names_the_ioctl_the_op_and_the_cause() {
        let e =
            KfdError::ioctl(Request::DbgTrap, Some(KFD_IOC_DBG_TRAP_SUSPEND_QUEUES), Errno::EPERM);
        let s = e.to_string();
        assert!(s.starts_with("AMDKFD_IOC_DBG_TRAP(SUSPEND_QUEUES) failed with EPERM: "), "{s}");
        assert!(s.contains("not permitted"), "{s}");
        assert!(s.contains("ptrace child"), "{s}");

        let s = KfdError::ioctl(Request::DbgTrap, Some(KFD_IOC_DBG_TRAP_ENABLE), Errno::EINVAL)
            .to_string();
        assert!(s.contains("(ENABLE)") && s.contains("EINVAL"), "{s}");

        let s = KfdError::ioctl(Request::DbgTrap, Some(99), Errno::EINVAL).to_string();
        assert!(s.starts_with("AMDKFD_IOC_DBG_TRAP(op 99) failed"), "{s}");
    }

    #[test]
    fn every_request_and_common_errno_has_a_message() {
        for req in Request::ALL {
            for errno in [Errno::ENOTTY, Errno::EINVAL, Errno::EPERM, Errno::ENODEV, Errno::EBUSY] {
                let s = KfdError::ioctl(req, None, errno).to_string();
                assert!(s.starts_with(req.name()), "{s}");
                assert!(s.contains(&format!("{errno:?}")), "{s}");
                assert!(s.len() > req.name().len() + 20, "{s}");
            }
        }
        let s = KfdError::ioctl(Request::RuntimeEnable, None, Errno::EBUSY).to_string();
        assert!(s.contains("already pending"), "{s}");
        let s = KfdError::open(Errno::ENOENT).to_string();
        assert!(s.starts_with("open /dev/kfd failed with ENOENT"), "{s}");
    }

    #[test]
    fn refused_calls_say_why() {
        let e = KfdError::refused(Request::SetCuMask, None, "more than 2^27 mask words");
        assert_eq!(e.errno, Errno::EINVAL);
        assert!(e.to_string().ends_with("more than 2^27 mask words"));
    }

    #[test]
    fn converts_to_io_error() {
        let io: std::io::Error = KfdError::ioctl(Request::GetVersion, None, Errno::ENOTTY).into();
        assert_eq!(io.raw_os_error(), None);
        assert!(io.to_string().contains("AMDKFD_IOC_GET_VERSION"));
    }
}
