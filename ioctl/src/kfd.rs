//! [`Kfd`]: an owned `/dev/kfd` fd with one method per ioctl the scheduler uses.
//!
//! Every method builds the argument struct, makes the call through `call` (the only
//! `unsafe` in the crate) and maps a failure to a [`KfdError`] that names the ioctl.
//!
//! Memory safety: the kernel reads and writes user memory through pointers embedded in some
//! argument structs. The safe methods fill those pointers only from slices and structs they
//! borrow for the duration of the call, sized to what the kernel will touch. Methods whose
//! pointers the kernel writes through by an amount the caller cannot bound here
//! ([`Kfd::get_queue_wave_state`], [`Kfd::ioctl`]) are `unsafe fn`s with the condition stated.
//! Queue buffers (`CREATE_QUEUE`, `UPDATE_QUEUE`) are GPU virtual addresses the kernel checks
//! against the process's GPU mappings; what the GPU later does with a queue is the caller's
//! business, as with any device.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use nix::errno::Errno;

use crate::abi::{
    AllocQueueGwsArgs, CreateQueueArgs, DbgTrapArgs, DbgTrapEnableArgs, DbgTrapOp,
    DbgTrapQueryDebugEventArgs, DbgTrapQueryExceptionInfoArgs, DbgTrapQueueSnapshotArgs,
    DbgTrapResumeQueuesArgs, DbgTrapSendRuntimeEventArgs, DbgTrapSetExceptionsEnabledArgs,
    DbgTrapSuspendQueuesArgs, DestroyQueueArgs, GetAvailableMemoryArgs, GetClockCountersArgs,
    GetQueueWaveStateArgs, GetVersionArgs, IoctlArgs, QueueSnapshotEntry, QueueStatus, Request,
    RuntimeEnableArgs, RuntimeInfo, SetCuMaskArgs, SetEventArgs, SignalEventWait, UpdateQueueArgs,
    WaitEventsArgs, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO,
};
use crate::error::KfdError;

/// The KFD device node.
pub const KFD_DEVICE_PATH: &str = "/dev/kfd";

/// An open `/dev/kfd`. The fd is closed on drop. KFD ties the fd to the process that opened
/// it: after `fork` the child must open its own.
#[derive(Debug)]
pub struct Kfd {
    fd: OwnedFd,
}

/// What `DBG_TRAP QUERY_DEBUG_EVENT` reports: the source with a reported exception raised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DebugEvent {
    /// Every exception raised on that source (`KFD_EC_MASK` bits), before the clear.
    pub exception_status: u64,
    /// The GPU of the queue or device (0 for a process event).
    pub gpu_id: u32,
    /// The queue (0 for a device or process event).
    pub queue_id: u32,
}

/// The raw bytes of a `kfd_ioctl_dbg_trap_args`, aligned as the struct. DBG_TRAP is issued
/// on these, so that the union KFD writes back is read with [`DbgTrapArgs::decode`] instead of
/// reading a union field.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct DbgTrapBytes([u8; core::mem::size_of::<DbgTrapArgs>()]);

const _: () = assert!(core::mem::size_of::<DbgTrapBytes>() == core::mem::size_of::<DbgTrapArgs>());
const _: () =
    assert!(core::mem::align_of::<DbgTrapBytes>() == core::mem::align_of::<DbgTrapArgs>());

crate::abi::request::ioctl_args! { DbgTrapBytes => DbgTrap }

/// The sizes `AMDKFD_IOC_GET_QUEUE_WAVE_STATE` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueWaveState {
    /// Bytes of control stack copied to the caller's buffer.
    pub ctl_stack_used_size: u32,
    /// Bytes of the save area in use.
    pub save_area_used_size: u32,
}

impl Kfd {
    /// Opens [`KFD_DEVICE_PATH`] read-write, close-on-exec.
    pub fn open() -> Result<Kfd, KfdError> {
        let file = File::options()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(KFD_DEVICE_PATH)
            .map_err(|e| KfdError::open(Errno::from_raw(e.raw_os_error().unwrap_or(0))))?;
        Ok(Kfd { fd: file.into() })
    }

    /// Wraps an fd already open on `/dev/kfd` (or on anything else: every ioctl then fails,
    /// typically with `ENOTTY`).
    pub fn from_fd(fd: OwnedFd) -> Kfd {
        Kfd { fd }
    }

    /// Gives the fd back.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// The raw fd number, still owned by `self`.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `AMDKFD_IOC_GET_VERSION`: the KFD's uapi version, to compare with
    /// [`crate::abi::KFD_IOCTL_MINOR_VERSION`].
    pub fn get_version(&self) -> Result<GetVersionArgs, KfdError> {
        let mut args = GetVersionArgs::default();
        call(self.fd.as_fd(), &mut args, None)?;
        Ok(args)
    }

    /// `AMDKFD_IOC_CREATE_QUEUE`: fills in `queue_id` and `doorbell_offset` on success.
    pub fn create_queue(&self, args: &mut CreateQueueArgs) -> Result<(), KfdError> {
        call(self.fd.as_fd(), args, None).map(drop)
    }

    /// `AMDKFD_IOC_DESTROY_QUEUE`. Blocks while the queue is suspended by the debugger.
    pub fn destroy_queue(&self, queue_id: u32) -> Result<(), KfdError> {
        let mut args = DestroyQueueArgs { queue_id, pad: 0 };
        call(self.fd.as_fd(), &mut args, None).map(drop)
    }

    /// `AMDKFD_IOC_UPDATE_QUEUE`: new ring, percentage (0 deactivates the queue) and priority
    /// (0..=15) for `args.queue_id`.
    pub fn update_queue(&self, args: UpdateQueueArgs) -> Result<(), KfdError> {
        let mut args = args;
        call(self.fd.as_fd(), &mut args, None).map(drop)
    }

    /// `AMDKFD_IOC_ALLOC_QUEUE_GWS`: give queue `queue_id` its GPU's global wave sync
    /// barriers (`num_gws` > 0; one queue per process and GPU may hold them, another gets
    /// `EBUSY`) or take them back (0). Returns the first GWS index KFD assigned.
    pub fn alloc_queue_gws(&self, queue_id: u32, num_gws: u32) -> Result<u32, KfdError> {
        let mut args = AllocQueueGwsArgs { queue_id, num_gws, ..Default::default() };
        call(self.fd.as_fd(), &mut args, None).map(|_| args.first_gws)
    }

    /// `AMDKFD_IOC_SET_CU_MASK`: restrict queue `queue_id` to the compute units whose bits are
    /// set in `mask` (word `i` holds CUs `32*i..32*i+32`). The kernel uses at most 1024 bits
    /// and rejects an empty mask with `EINVAL`.
    pub fn set_cu_mask(&self, queue_id: u32, mask: &[u32]) -> Result<(), KfdError> {
        let Some(bits) = u32::try_from(mask.len()).ok().and_then(|n| n.checked_mul(32)) else {
            return Err(KfdError::refused(
                Request::SetCuMask,
                None,
                "the mask has more than 2^27 words; KFD takes at most 1024 bits",
            ));
        };
        let mut args =
            SetCuMaskArgs { queue_id, num_cu_mask: bits, cu_mask_ptr: mask.as_ptr() as u64 };
        call(self.fd.as_fd(), &mut args, None).map(drop)
    }

    /// `AMDKFD_IOC_SET_EVENT`: fires event `event_id` (waking its waiters, or leaving an
    /// auto-reset event signaled for the next wait).
    pub fn set_event(&self, event_id: u32) -> Result<(), KfdError> {
        let mut args = SetEventArgs { event_id, pad: 0 };
        call(self.fd.as_fd(), &mut args, None).map(drop)
    }

    /// `AMDKFD_IOC_WAIT_EVENTS` over signal events: sleeps until one of `events` fired (all of
    /// them with `wait_for_all`) or `timeout_ms` passed (`u32::MAX`: never), and returns
    /// `KFD_IOC_WAIT_RESULT_*`. KFD writes each fired event's age back into its entry. An
    /// unknown event id fails with `EINVAL`; a signal interrupts it with `EINTR`.
    pub fn wait_events(
        &self,
        events: &mut [SignalEventWait],
        wait_for_all: bool,
        timeout_ms: u32,
    ) -> Result<u32, KfdError> {
        let Ok(num_events) = u32::try_from(events.len()) else {
            return Err(KfdError::refused(
                Request::WaitEvents,
                None,
                "more than 2^32 events in one wait",
            ));
        };
        let mut args = WaitEventsArgs {
            events_ptr: events.as_mut_ptr() as u64,
            num_events,
            wait_for_all: u32::from(wait_for_all),
            timeout: timeout_ms,
            wait_result: 0,
        };
        call(self.fd.as_fd(), &mut args, None).map(|_| args.wait_result)
    }

    /// `AMDKFD_IOC_GET_QUEUE_WAVE_STATE`: copies queue `queue_id`'s control stack into
    /// `ctl_stack` and returns the used sizes.
    ///
    /// # Safety
    ///
    /// KFD copies as many bytes as the queue's control stack size (the `ctl_stack_size` the
    /// queue was created with) and does not know `ctl_stack.len()`: the slice must be at least
    /// that long, or the kernel writes past it.
    pub unsafe fn get_queue_wave_state(
        &self,
        queue_id: u32,
        ctl_stack: &mut [u8],
    ) -> Result<QueueWaveState, KfdError> {
        let mut args = GetQueueWaveStateArgs {
            ctl_stack_address: ctl_stack.as_mut_ptr() as u64,
            queue_id,
            ..Default::default()
        };
        call(self.fd.as_fd(), &mut args, None)?;
        Ok(QueueWaveState {
            ctl_stack_used_size: args.ctl_stack_used_size,
            save_area_used_size: args.save_area_used_size,
        })
    }

    /// `AMDKFD_IOC_RUNTIME_ENABLE` with `mode_mask` (`KFD_RUNTIME_ENABLE_MODE_*`): the runtime
    /// tells KFD where its debugger-shared `r_debug` lives (KFD stores the address, it does not
    /// dereference it). Fails with `EEXIST` once the process has queues. If the process is
    /// already debug-enabled, the call waits for the debugger to send `EC_PROCESS_RUNTIME`.
    /// Returns the arguments as KFD left them (`capabilities_mask`).
    pub fn runtime_enable(
        &self,
        r_debug: u64,
        mode_mask: u32,
    ) -> Result<RuntimeEnableArgs, KfdError> {
        let mut args = RuntimeEnableArgs { r_debug, mode_mask, capabilities_mask: 0 };
        call(self.fd.as_fd(), &mut args, None)?;
        Ok(args)
    }

    /// `DBG_TRAP ENABLE` on process `pid` (this process, or a ptrace child): raise the
    /// exceptions in `exception_mask` to the debugger by notifying `dbg_fd` (e.g. an eventfd or
    /// a pipe's write end). Returns the target's runtime info as KFD saved it.
    pub fn dbg_trap_enable(
        &self,
        pid: u32,
        exception_mask: u64,
        dbg_fd: BorrowedFd<'_>,
    ) -> Result<RuntimeInfo, KfdError> {
        let mut rinfo = RuntimeInfo::default();
        let op = DbgTrapOp::Enable(DbgTrapEnableArgs {
            exception_mask,
            rinfo_ptr: &mut rinfo as *mut RuntimeInfo as u64,
            rinfo_size: core::mem::size_of::<RuntimeInfo>() as u32,
            dbg_fd: dbg_fd.as_raw_fd() as u32,
        });
        self.dbg_trap(pid, op)?;
        Ok(rinfo)
    }

    /// `DBG_TRAP DISABLE` on process `pid`.
    pub fn dbg_trap_disable(&self, pid: u32) -> Result<(), KfdError> {
        self.dbg_trap(pid, DbgTrapOp::Disable).map(drop)
    }

    /// `DBG_TRAP SUSPEND_QUEUES`: preempt the queues whose ids are in `queue_ids`, giving waves
    /// `grace_period` (units of 1K GPU clocks; 0 preempts at once) to finish, and clear the
    /// raised exceptions in `exception_mask`.
    ///
    /// Returns how many queues were suspended (one already suspended counts). KFD rewrites
    /// `queue_ids`: each id it could not suspend gets `KFD_DBG_QUEUE_INVALID_MASK` (no such
    /// queue, being destroyed, or new: every queue is created with EC_QUEUE_NEW raised until
    /// [`Kfd::dbg_trap_query_exception_info`] or a snapshot clears it) or
    /// `KFD_DBG_QUEUE_ERROR_MASK` (the unmap failed: not an errno; KFD keeps such a queue
    /// marked suspended) ORed in; read them with [`queue_statuses`]. Needs debug trap enabled
    /// on the target (else `EINVAL`) and its runtime enabled (else `EPERM`).
    pub fn dbg_trap_suspend_queues(
        &self,
        pid: u32,
        queue_ids: &mut [u32],
        exception_mask: u64,
        grace_period: u32,
    ) -> Result<u32, KfdError> {
        let num_queues = queue_count(queue_ids, Some(crate::abi::KFD_IOC_DBG_TRAP_SUSPEND_QUEUES))?;
        let op = DbgTrapOp::SuspendQueues(DbgTrapSuspendQueuesArgs {
            exception_mask,
            queue_array_ptr: queue_ids.as_mut_ptr() as u64,
            num_queues,
            grace_period,
        });
        self.dbg_trap(pid, op)
    }

    /// `DBG_TRAP RESUME_QUEUES`: resume the queues in `queue_ids`. Returns how many were
    /// resumed and marks the others in `queue_ids` as suspend does.
    pub fn dbg_trap_resume_queues(&self, pid: u32, queue_ids: &mut [u32]) -> Result<u32, KfdError> {
        let num_queues = queue_count(queue_ids, Some(crate::abi::KFD_IOC_DBG_TRAP_RESUME_QUEUES))?;
        let op = DbgTrapOp::ResumeQueues(DbgTrapResumeQueuesArgs {
            queue_array_ptr: queue_ids.as_mut_ptr() as u64,
            num_queues,
            pad: 0,
        });
        self.dbg_trap(pid, op)
    }

    /// `DBG_TRAP QUERY_DEBUG_EVENT`: the first of the target's queues (newest first), else
    /// GPUs, else the process itself, with a raised exception that the session reports (the
    /// `exception_mask` of ENABLE or SET_EXCEPTIONS_ENABLED). The bits of
    /// `exception_clear_mask` are cleared on that source only. Fails with `EAGAIN` when no
    /// reported exception is raised. Needs debug trap enabled (`EINVAL`), not the runtime.
    pub fn dbg_trap_query_debug_event(
        &self,
        pid: u32,
        exception_clear_mask: u64,
    ) -> Result<DebugEvent, KfdError> {
        let op = DbgTrapOp::QueryDebugEvent(DbgTrapQueryDebugEventArgs {
            exception_mask: exception_clear_mask,
            ..Default::default()
        });
        match self.dbg_trap_call(pid, op)?.1 {
            DbgTrapOp::QueryDebugEvent(a) => Ok(DebugEvent {
                exception_status: a.exception_mask,
                gpu_id: a.gpu_id,
                queue_id: a.queue_id,
            }),
            _ => unreachable!("decoded with the op it was encoded with"),
        }
    }

    /// `DBG_TRAP QUERY_EXCEPTION_INFO`: whether exception `exception_code` (an `EC_*` code) is
    /// raised on `source_id` (a queue id for queue exceptions, a gpu_id for device ones);
    /// `clear` clears it. KFD copies the exception's data, if it has any (device memory
    /// violations, the process runtime event), into `info` (at most `info.len()` bytes) and
    /// returns its full size; queue exceptions have none. Fails with `ENODATA` when the
    /// exception is not raised, `EINVAL` for an unknown source or code.
    ///
    /// `(queue_id, EC_QUEUE_NEW, true, &mut [])` clears the new-queue flag every queue is
    /// created with, after which the queue can be suspended.
    pub fn dbg_trap_query_exception_info(
        &self,
        pid: u32,
        source_id: u32,
        exception_code: u32,
        clear: bool,
        info: &mut [u8],
    ) -> Result<u32, KfdError> {
        let Ok(info_size) = u32::try_from(info.len()) else {
            return Err(KfdError::refused(
                Request::DbgTrap,
                Some(KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO),
                "the info buffer is larger than 4 GiB",
            ));
        };
        // KFD refuses a NULL info pointer; an empty slice's pointer is dangling but non-null,
        // and then nothing is copied.
        let op = DbgTrapOp::QueryExceptionInfo(DbgTrapQueryExceptionInfoArgs {
            info_ptr: info.as_mut_ptr() as u64,
            info_size,
            source_id,
            exception_code,
            clear_exception: u32::from(clear),
        });
        match self.dbg_trap_call(pid, op)?.1 {
            DbgTrapOp::QueryExceptionInfo(a) => Ok(a.info_size),
            _ => unreachable!("decoded with the op it was encoded with"),
        }
    }

    /// `DBG_TRAP GET_QUEUE_SNAPSHOT`: fills `entries` with the target's queues, newest first,
    /// and clears `exception_clear_mask` on each queue written (`1 << (EC_QUEUE_NEW - 1)`
    /// clears the new-queue flag). Returns how many queues the target has: more than
    /// `entries.len()` means the slice was too short (an empty slice just counts them).
    pub fn dbg_trap_get_queue_snapshot(
        &self,
        pid: u32,
        exception_clear_mask: u64,
        entries: &mut [QueueSnapshotEntry],
    ) -> Result<u32, KfdError> {
        let Ok(num_queues) = u32::try_from(entries.len()) else {
            return Err(KfdError::refused(
                Request::DbgTrap,
                Some(KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT),
                "more than 2^32 snapshot entries",
            ));
        };
        // KFD writes min(num_queues, queues) entries of min(entry_size, 64) bytes, strided by
        // entry_size: all inside `entries`.
        let op = DbgTrapOp::GetQueueSnapshot(DbgTrapQueueSnapshotArgs {
            exception_mask: exception_clear_mask,
            snapshot_buf_ptr: entries.as_mut_ptr() as u64,
            num_queues,
            entry_size: core::mem::size_of::<QueueSnapshotEntry>() as u32,
        });
        match self.dbg_trap_call(pid, op)?.1 {
            DbgTrapOp::GetQueueSnapshot(a) => Ok(a.num_queues),
            _ => unreachable!("decoded with the op it was encoded with"),
        }
    }

    /// `DBG_TRAP SET_EXCEPTIONS_ENABLED`: the exceptions to raise to the debugger from now on.
    pub fn dbg_trap_set_exceptions_enabled(
        &self,
        pid: u32,
        exception_mask: u64,
    ) -> Result<(), KfdError> {
        let op =
            DbgTrapOp::SetExceptionsEnabled(DbgTrapSetExceptionsEnabledArgs { exception_mask });
        self.dbg_trap(pid, op).map(drop)
    }

    /// `DBG_TRAP SEND_RUNTIME_EVENT`: raise `exception_mask` to the target's runtime;
    /// `EC_PROCESS_RUNTIME` unblocks a pending `RUNTIME_ENABLE`.
    pub fn dbg_trap_send_runtime_event(
        &self,
        pid: u32,
        exception_mask: u64,
        gpu_id: u32,
        queue_id: u32,
    ) -> Result<(), KfdError> {
        let op = DbgTrapOp::SendRuntimeEvent(DbgTrapSendRuntimeEventArgs {
            exception_mask,
            gpu_id,
            queue_id,
        });
        self.dbg_trap(pid, op).map(drop)
    }

    /// `AMDKFD_IOC_GET_CLOCK_COUNTERS` for `gpu_id`.
    pub fn get_clock_counters(&self, gpu_id: u32) -> Result<GetClockCountersArgs, KfdError> {
        let mut args = GetClockCountersArgs { gpu_id, ..Default::default() };
        call(self.fd.as_fd(), &mut args, None)?;
        Ok(args)
    }

    /// `AMDKFD_IOC_AVAILABLE_MEMORY`: bytes of VRAM `gpu_id` can still allocate.
    pub fn available_memory(&self, gpu_id: u32) -> Result<u64, KfdError> {
        let mut args = GetAvailableMemoryArgs { gpu_id, ..Default::default() };
        call(self.fd.as_fd(), &mut args, None)?;
        Ok(args.available)
    }

    /// Any ioctl of the table, for those without a method: `args` is passed as is and comes
    /// back as KFD left it. Returns the ioctl's non-negative return value.
    ///
    /// # Safety
    ///
    /// Every user pointer inside `args` (fields named `*_ptr`, `*_address` the kernel copies
    /// to or from, `events_ptr`, ...) must be valid for the reads and writes KFD does through
    /// it for this request, with the sizes the other fields announce.
    pub unsafe fn ioctl<A: IoctlArgs>(&self, args: &mut A) -> Result<i32, KfdError> {
        call(self.fd.as_fd(), args, None)
    }

    /// One `AMDKFD_IOC_DBG_TRAP`; returns the ioctl's return value (a queue count for
    /// suspend/resume).
    fn dbg_trap(&self, pid: u32, op: DbgTrapOp) -> Result<u32, KfdError> {
        self.dbg_trap_call(pid, op).map(|(ret, _)| ret)
    }

    /// One `AMDKFD_IOC_DBG_TRAP`: the return value and the op's arguments as KFD left them.
    fn dbg_trap_call(&self, pid: u32, op: DbgTrapOp) -> Result<(u32, DbgTrapOp), KfdError> {
        let mut bytes = DbgTrapBytes(DbgTrapArgs::encode(pid, &op));
        let ret = call(self.fd.as_fd(), &mut bytes, Some(op.code()))?;
        let back = DbgTrapArgs::decode(&bytes.0).op.unwrap_or(op);
        Ok((ret as u32, back))
    }
}

impl AsFd for Kfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Kfd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl From<Kfd> for OwnedFd {
    fn from(kfd: Kfd) -> OwnedFd {
        kfd.fd
    }
}

/// Reads the queue-id array of a suspend or resume after the call.
pub fn queue_statuses(queue_ids: &[u32]) -> impl Iterator<Item = QueueStatus> + '_ {
    queue_ids.iter().map(|&slot| QueueStatus::from_slot(slot))
}

/// `queue_ids.len()` as the `num_queues` field.
fn queue_count(queue_ids: &[u32], op: Option<u32>) -> Result<u32, KfdError> {
    u32::try_from(queue_ids.len())
        .map_err(|_| KfdError::refused(Request::DbgTrap, op, "more than 2^32 queue ids"))
}

/// `ioctl(fd, A::REQUEST, args)`: the one place this crate calls into the kernel.
///
/// Returns the ioctl's non-negative return value, or the errno as a [`KfdError`] for
/// `A::REQUEST` (with the DBG_TRAP `op`, if any, for the message).
fn call<A: IoctlArgs>(fd: BorrowedFd<'_>, args: &mut A, op: Option<u32>) -> Result<i32, KfdError> {
    let request = A::REQUEST;
    let () = A::SIZE_MATCHES;
    let arg: *mut A = args;
    // SAFETY: `fd` is a live descriptor borrowed for the call. `arg` points to an exclusively
    // borrowed, initialised `#[repr(C)]` struct of exactly `request.arg_size()` bytes (the
    // `IoctlArgs` contract, its size checked at compile time just above; the tests check every
    // size against the uapi), so the kernel's copy_from_user/copy_to_user of `_IOC_SIZE` bytes stays inside
    // it. User pointers embedded in `*args` are the caller's obligation: the safe methods of
    // `Kfd` set them only from slices/structs they borrow for the duration of this call and
    // size them to what the kernel touches; the `unsafe fn`s state it as their precondition.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), request.raw() as _, arg) };
    if ret < 0 {
        Err(KfdError::ioctl(request, op, Errno::last()))
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev_null() -> Kfd {
        Kfd::from_fd(File::open("/dev/null").expect("open /dev/null").into())
    }

    /// (`get_queue_wave_state` and `ioctl` are `unsafe fn`s; `tests/errors.rs` covers them, so
    /// that this crate's only `unsafe` block stays the one in `call`.)
    #[test]
    fn every_method_on_a_non_kfd_fd_fails_with_enotty_naming_the_ioctl() {
        let kfd = dev_null();
        let null = File::open("/dev/null").unwrap();
        let mut queues = [1u32, 2, 3];
        let results: Vec<(&str, KfdError)> = vec![
            ("AMDKFD_IOC_GET_VERSION", kfd.get_version().unwrap_err()),
            (
                "AMDKFD_IOC_CREATE_QUEUE",
                kfd.create_queue(&mut CreateQueueArgs::default()).unwrap_err(),
            ),
            ("AMDKFD_IOC_DESTROY_QUEUE", kfd.destroy_queue(1).unwrap_err()),
            ("AMDKFD_IOC_UPDATE_QUEUE", kfd.update_queue(UpdateQueueArgs::default()).unwrap_err()),
            ("AMDKFD_IOC_SET_CU_MASK", kfd.set_cu_mask(1, &[0xffff_ffff, 0xff]).unwrap_err()),
            ("AMDKFD_IOC_RUNTIME_ENABLE", kfd.runtime_enable(0, 1).unwrap_err()),
            ("AMDKFD_IOC_DBG_TRAP(ENABLE)", kfd.dbg_trap_enable(1, !0, null.as_fd()).unwrap_err()),
            ("AMDKFD_IOC_DBG_TRAP(DISABLE)", kfd.dbg_trap_disable(1).unwrap_err()),
            (
                "AMDKFD_IOC_DBG_TRAP(SUSPEND_QUEUES)",
                kfd.dbg_trap_suspend_queues(1, &mut queues, 0, 0).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(RESUME_QUEUES)",
                kfd.dbg_trap_resume_queues(1, &mut queues).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(SET_EXCEPTIONS_ENABLED)",
                kfd.dbg_trap_set_exceptions_enabled(1, 0).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(SEND_RUNTIME_EVENT)",
                kfd.dbg_trap_send_runtime_event(1, 0, 0, 0).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(QUERY_DEBUG_EVENT)",
                kfd.dbg_trap_query_debug_event(1, !0).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(QUERY_EXCEPTION_INFO)",
                kfd.dbg_trap_query_exception_info(1, 3, 31, true, &mut []).unwrap_err(),
            ),
            (
                "AMDKFD_IOC_DBG_TRAP(GET_QUEUE_SNAPSHOT)",
                kfd.dbg_trap_get_queue_snapshot(1, 0, &mut [QueueSnapshotEntry::default(); 2])
                    .unwrap_err(),
            ),
            ("AMDKFD_IOC_GET_CLOCK_COUNTERS", kfd.get_clock_counters(1).unwrap_err()),
            ("AMDKFD_IOC_AVAILABLE_MEMORY", kfd.available_memory(1).unwrap_err()),
            ("AMDKFD_IOC_SET_EVENT", kfd.set_event(3).unwrap_err()),
            (
                "AMDKFD_IOC_WAIT_EVENTS",
                kfd.wait_events(&mut [SignalEventWait::new(3, 1)], false, 0).unwrap_err(),
            ),
        ];
        for (what, err) in results {
            assert_eq!(err.errno, Errno::ENOTTY, "{err}");
            let text = err.to_string();
            assert!(text.starts_with(&format!("{what} failed with ENOTTY: ")), "{text}");
            assert!(text.contains("not supported"), "{text}");
        }
        assert_eq!(queues, [1, 2, 3], "a failed call leaves the queue ids alone");
    }

    #[test]
    fn from_fd_keeps_the_fd_and_gives_it_back() {
        let kfd = dev_null();
        let raw = kfd.as_raw_fd();
        assert_eq!(kfd.as_fd().as_raw_fd(), raw);
        assert_eq!(AsRawFd::as_raw_fd(&kfd), raw);
        let fd: OwnedFd = kfd.into_fd();
        assert_eq!(fd.as_raw_fd(), raw);
    }

    #[test]
    fn open_without_a_kfd_reports_the_device() {
        match Kfd::open() {
            Ok(kfd) => assert!(kfd.as_raw_fd() >= 0),
            Err(e) => {
                let text = e.to_string();
                assert!(text.starts_with("open /dev/kfd failed with "), "{text}");
            }
        }
    }

    #[test]
    fn queue_statuses_reads_the_marks_kfd_leaves() {
        use crate::abi::{KFD_DBG_QUEUE_ERROR_MASK, KFD_DBG_QUEUE_INVALID_MASK};
        let slots = [7, 8 | KFD_DBG_QUEUE_INVALID_MASK, 9 | KFD_DBG_QUEUE_ERROR_MASK];
        let st: Vec<QueueStatus> = queue_statuses(&slots).collect();
        assert!(st[0].ok() && st[0].queue_id == 7);
        assert!(st[1].invalid && !st[1].error && st[1].queue_id == 8);
        assert!(st[2].error && !st[2].invalid && st[2].queue_id == 9);
        for (s, slot) in st.iter().zip(slots) {
            assert_eq!(s.to_slot(), slot);
        }
    }
}
