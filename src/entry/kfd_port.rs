//! libxhsa's own KFD calls for preemption ([`crate::preempt::KfdPort`]), made on the runtime's
//! `/dev/kfd` descriptor — the one its CREATE_QUEUE ioctls use, seen by the interposer — so they
//! reach the KFD process the queues belong to whether the thunk is a library (ROCm 5.x) or
//! linked into ROCr (6.x). The descriptor is borrowed, never closed by libxhsa. When the
//! runtime's ioctls are not seen (`HSA_TOOLS_LIB`), the calls go to a descriptor libxhsa opened
//! itself ([`super::unseen_kfd`]): KFD finds a process by its address space, so every
//! descriptor of the process reaches the same KFD process.
//!
//! Every call is marked as libxhsa's own ([`super::kfd::own_call`]): the `ioctl` interposer
//! passes it through untouched (it only adjusts the runtime's own `UPDATE_QUEUE`s).

use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use xhsa_ioctl::abi::exception::{kfd_ec_mask, EC_PROCESS_RUNTIME};
use xhsa_ioctl::abi::queue::UpdateQueueArgs;
use xhsa_ioctl::abi::QueueSnapshotEntry;
use xhsa_ioctl::Kfd;

use super::kfd::own_call;
use crate::preempt::{KfdFailure, KfdPort, SnapshotQueue, Target};

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
        RuntimeKfd {
            kfd: ManuallyDrop::new(Kfd::from_fd(owned)),
            pid: std::process::id(),
            debug_pipe: None,
        }
    }

    /// Over `kfd`, a descriptor libxhsa opened itself; it stays open for the process's life.
    pub(crate) fn own(kfd: Kfd) -> RuntimeKfd {
        RuntimeKfd { kfd: ManuallyDrop::new(kfd), pid: std::process::id(), debug_pipe: None }
    }

    /// The process's KFD queues, asked until the buffer holds them all (a queue created
    /// meanwhile makes KFD report more than it wrote).
    fn read_snapshot(&self) -> Result<Vec<SnapshotQueue>, KfdFailure> {
        let mut entries = vec![QueueSnapshotEntry::default(); 64];
        for _ in 0..4 {
            let n = own_call(|| self.kfd.dbg_trap_get_queue_snapshot(self.pid, 0, &mut entries))
                .map_err(failure)? as usize;
            if n <= entries.len() {
                entries.truncate(n);
                let q = |e: &QueueSnapshotEntry| SnapshotQueue {
                    kfd_id: e.queue_id,
                    ring_base: e.ring_base_address,
                    ring_bytes: e.ring_size,
                    gpu_id: e.gpu_id,
                    queue_type: e.queue_type,
                };
                return Ok(entries.iter().map(q).collect());
            }
            entries.resize(n + 16, QueueSnapshotEntry::default());
        }
        Err(KfdFailure("the number of KFD queues kept changing".into()))
    }

    /// After a debug-trap session of libxhsa's own: if the runtime enabled or disabled itself
    /// meanwhile (KFD then raised `EC_PROCESS_RUNTIME`, which the session reported to `events`),
    /// its `RUNTIME_ENABLE` waits for a debugger's answer even after the session ended; libxhsa
    /// gives that answer (`SEND_RUNTIME_EVENT`, which needs a session: a short one).
    fn answer_runtime(&self, events: &OwnedFd, write: &OwnedFd) {
        let mut buf = [0u8; 64];
        let mut raised = false;
        while let Ok(n) = nix::unistd::read(events.as_raw_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            raised = true;
        }
        if !raised {
            return;
        }
        tracing::info!("xhsa: the runtime changed its KFD runtime state during libxhsa's queue snapshot; answering it");
        let mask = kfd_ec_mask(EC_PROCESS_RUNTIME);
        let r = own_call(|| {
            self.kfd.dbg_trap_enable(self.pid, 0, write.as_fd())?;
            let sent = self.kfd.dbg_trap_send_runtime_event(self.pid, mask, 0, 0);
            let off = self.kfd.dbg_trap_disable(self.pid);
            sent.and(off)
        });
        if let Err(e) = r {
            tracing::error!("xhsa: answering the runtime's KFD runtime change failed ({e}); its RUNTIME_ENABLE may wait until a signal");
        }
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
        // One session at a time in the process (each GPU's watcher has its own port).
        static SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(failure)?;
        let info =
            own_call(|| self.kfd.dbg_trap_enable(self.pid, 0, write.as_fd())).map_err(failure)?;
        // A failed activation still returns 0 (kfd_dbg_trap_enable); the runtime state says.
        if info.runtime_state != 1 {
            let _ = own_call(|| self.kfd.dbg_trap_disable(self.pid));
            return Err(KfdFailure(format!(
                "debug trap enabled but the runtime state is {} (not enabled)",
                info.runtime_state
            )));
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
        let mask =
            xhsa_ioctl::abi::exception::kfd_ec_mask(xhsa_ioctl::abi::exception::EC_QUEUE_NEW);
        let mut entries = vec![xhsa_ioctl::abi::QueueSnapshotEntry::default(); 1024];
        own_call(|| self.kfd.dbg_trap_get_queue_snapshot(self.pid, mask, &mut entries))
            .map(drop)
            .map_err(failure)
    }

    fn queue_snapshot(&mut self) -> Result<Vec<SnapshotQueue>, KfdFailure> {
        if self.debug_pipe.is_some() {
            // Debug trap is on already (the suspend mechanism's session).
            return self.read_snapshot();
        }
        // A session of its own, only for the snapshot. ENABLE on an enabled runtime activates
        // the debug trap on the process's GPUs and DISABLE deactivates it (each a device-wide
        // runlist refresh on an MI300); with the session on, the runtime's RUNTIME_ENABLE
        // (enable or disable) blocks until a debugger answers: KFD reports it as
        // EC_PROCESS_RUNTIME to the session's pipe, and libxhsa answers it after DISABLE.
        // One session at a time in the process (each GPU's watcher has its own port).
        static SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(failure)?;
        let mask = kfd_ec_mask(EC_PROCESS_RUNTIME);
        own_call(|| self.kfd.dbg_trap_enable(self.pid, mask, write.as_fd())).map_err(
            |e| match e.errno {
                nix::errno::Errno::EALREADY => {
                    KfdFailure(format!("{e}: a debugger holds this process's debug trap"))
                }
                _ => failure(e),
            },
        )?;
        let snapshot = self.read_snapshot();
        let off = own_call(|| self.kfd.dbg_trap_disable(self.pid));
        self.answer_runtime(&read, &write);
        if let Err(e) = off {
            // The session stays on: SUSPEND_QUEUES can use it; the runtime's shutdown would wait.
            tracing::error!("xhsa: DBG_TRAP DISABLE after the queue snapshot failed ({e})");
            self.debug_pipe = Some((read, write));
        }
        snapshot
    }

    fn now(&self) -> u64 {
        super::clock::now_ns()
    }
}
