//! libxhsa's own KFD calls for preemption ([`crate::preempt::KfdPort`]), made on the runtime's
//! `/dev/kfd` descriptor — the one its CREATE_QUEUE ioctls use, seen by the interposer — so they
//! reach the KFD process the queues belong to whether the thunk is a library (ROCm 5.x) or
//! linked into ROCr (6.x). The descriptor is borrowed, never closed by libxhsa.
//!
//! Every call is marked as libxhsa's own ([`super::kfd::own_call`]): the `ioctl` interposer
//! passes it through untouched (it only adjusts the runtime's own `UPDATE_QUEUE`s).

use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use xhsa_ioctl::abi::queue::UpdateQueueArgs;
use xhsa_ioctl::Kfd;

use super::kfd::own_call;
use crate::preempt::{KfdFailure, KfdPort, Target};

/// The runtime's KFD descriptor, borrowed.
pub(crate) struct RuntimeKfd {
    kfd: ManuallyDrop<Kfd>,
    pid: u32,
    /// The pipe whose write end KFD notifies of debug events once debug trap is enabled (its
    /// read end is never read: KFD writes one byte per event, non-blocking).
    debug_pipe: Option<(OwnedFd, OwnedFd)>,
}

impl RuntimeKfd {
    /// Borrows `fd`.
    ///
    /// # Safety
    ///
    /// `fd` must be the runtime's open `/dev/kfd` descriptor. It is never closed through the
    /// returned value (the `Kfd` is never dropped); if the runtime closes it (at `hsa_shut_down`),
    /// later calls fail with `EBADF` or reach whatever reuses the number, which is why they are
    /// only made while libxhsa's queues exist.
    pub(crate) unsafe fn borrow(fd: RawFd) -> RuntimeKfd {
        // SAFETY: per the contract, `fd` is open; ManuallyDrop keeps the OwnedFd from closing it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        RuntimeKfd { kfd: ManuallyDrop::new(Kfd::from_fd(owned)), pid: std::process::id(), debug_pipe: None }
    }
}

fn failure(e: impl std::fmt::Display) -> KfdFailure {
    KfdFailure(e.to_string())
}

impl KfdPort for RuntimeKfd {
    fn update_queue(&mut self, t: &Target, percentage: u32) -> Result<(), KfdFailure> {
        let args = UpdateQueueArgs {
            ring_base_address: t.ring_base,
            queue_id: t.kfd_id,
            ring_size: t.ring_bytes,
            queue_percentage: percentage,
            queue_priority: t.priority,
        };
        own_call(|| self.kfd.update_queue(args)).map_err(failure)
    }

    fn enable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).map_err(failure)?;
        let info = own_call(|| self.kfd.dbg_trap_enable(self.pid, 0, write.as_fd())).map_err(failure)?;
        // A failed activation still returns 0 (kfd_dbg_trap_enable); the runtime state says.
        if info.runtime_state != 1 {
            let _ = own_call(|| self.kfd.dbg_trap_disable(self.pid));
            return Err(KfdFailure(format!("debug trap enabled but the runtime state is {} (not enabled)", info.runtime_state)));
        }
        self.debug_pipe = Some((read, write));
        // Every queue KFD created is flagged new, and refused by SUSPEND until that is cleared.
        self.clear_new()
    }

    fn disable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        own_call(|| self.kfd.dbg_trap_disable(self.pid)).map_err(failure)?;
        self.debug_pipe = None;
        Ok(())
    }

    fn suspend(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
        own_call(|| self.kfd.dbg_trap_suspend_queues(self.pid, ids, 0, 0)).map_err(failure)
    }

    fn resume(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
        own_call(|| self.kfd.dbg_trap_resume_queues(self.pid, ids)).map_err(failure)
    }

    fn clear_new(&mut self) -> Result<(), KfdFailure> {
        let mask = xhsa_ioctl::abi::exception::kfd_ec_mask(xhsa_ioctl::abi::exception::EC_QUEUE_NEW);
        let mut entries = vec![xhsa_ioctl::abi::QueueSnapshotEntry::default(); 1024];
        own_call(|| self.kfd.dbg_trap_get_queue_snapshot(self.pid, mask, &mut entries)).map(drop).map_err(failure)
    }

    fn now(&self) -> u64 {
        super::queues::now_ns()
    }
}
