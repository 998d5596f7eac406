//! The emulated KFD of one process: its GPUs, queues, events and memory, with the semantics of
//! amdkfd's ioctls. Each operation takes and fills the uapi argument struct of its ioctl
//! (`xhsa_ioctl::abi`), so the thunk layer above speaks KFD uapi exactly as the real thunk
//! does; errors are the errno KFD returns.

pub mod events;
pub mod fault;
pub mod memory;
pub mod sysfs;
pub mod topology;

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use xhsa_ioctl::abi::dbg_trap::{
    dbg_trap_op_is_hw_op, DbgTrapEnableArgs, DbgTrapQueryDebugEventArgs,
    DbgTrapQueryExceptionInfoArgs, DbgTrapQueueSnapshotArgs, KFD_IOC_DBG_TRAP_DISABLE,
    KFD_IOC_DBG_TRAP_ENABLE, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT,
    KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO,
    KFD_IOC_DBG_TRAP_RESUME_QUEUES, KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED,
    KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
};
use xhsa_ioctl::abi::debug::{
    QueueSnapshotEntry, RuntimeInfo, DEBUG_RUNTIME_STATE_DISABLED, DEBUG_RUNTIME_STATE_ENABLED,
    KFD_DBG_QUEUE_ERROR_MASK, KFD_DBG_QUEUE_INVALID_MASK,
};
use xhsa_ioctl::abi::event::{CreateEventArgs, WaitEventsArgs, KFD_IOC_EVENT_SIGNAL};
use xhsa_ioctl::abi::exception::{
    kfd_ec_mask, EC_DEVICE_QUEUE_DELETE, EC_QUEUE_NEW, KFD_EC_MASK_DEVICE, KFD_EC_MASK_PROCESS,
    KFD_EC_MASK_QUEUE,
};
use xhsa_ioctl::abi::memory::{
    AllocMemoryOfGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
    KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
};
use xhsa_ioctl::abi::process::GetClockCountersArgs;
use xhsa_ioctl::abi::queue::{
    AllocQueueGwsArgs, CreateQueueArgs, UpdateQueueArgs, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
    KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_SDMA_XGMI, KFD_MAX_QUEUE_PERCENTAGE,
    KFD_MAX_QUEUE_PRIORITY,
};
use xhsa_ioctl::abi::version::GetVersionArgs;

use crate::config::Config;
use crate::cp::clock::{monotonic_raw_ns, Clock};
use crate::cp::engine::Engine;
use crate::cp::sdma::SdmaQueue;
use crate::cp::Cp;
use crate::device::QueueKey;
use crate::shared::client::{Connection, RemoteScheduler};
use crate::sys::devmem::{DeviceMemory, HostMemory};
use crate::sys::doorbell::TrappedArea;
use crate::sys::mem;
use events::Events;
use fault::{Fault, FaultPlan};
use memory::{MemKind, Memory, Range};

/// The uapi version this KFD reports.
pub const VERSION: (u32, u32) = (1, 17);
/// Doorbells per GPU per process (8 bytes each: two pages), as on gfx9.
pub const DOORBELLS: usize = 1024;
/// `KFD_MMAP_TYPE_DOORBELL` in the mmap offsets KFD hands out.
pub const MMAP_TYPE_DOORBELL: u64 = 3 << 62;
/// `KFD_MMAP_TYPE_EVENTS`: the event page's mmap offset.
pub const MMAP_TYPE_EVENTS: u64 = 2 << 62;

/// An errno KFD would return.
pub type Errno = i32;

struct Gpu {
    gpu_id: u32,
    engine: Engine,
    conn: Arc<Connection>,
    doorbells: u64,
    _area: Arc<TrappedArea>,
}

/// `KFD_EC_MASK(EC_QUEUE_NEW)`: set on every queue KFD creates (`init_user_queue`) until a
/// debug operation clears it; a queue carrying it cannot be suspended.
pub const QUEUE_NEW: u64 = kfd_ec_mask(EC_QUEUE_NEW);

/// What KFD keeps of a user queue (`struct queue_properties`), with its key on the device.
#[derive(Clone, Debug)]
struct QueueRec {
    gpu: usize,
    /// The device-wide key of the queue on the shared device.
    key: QueueKey,
    slot: usize,
    /// Creation order: KFD lists a process's queues newest first.
    seq: u64,
    queue_type: u32,
    ring_base: u64,
    ring_size: u32,
    read_ptr: u64,
    write_ptr: u64,
    ctx_save: u64,
    ctx_save_size: u32,
    percentage: u32,
    priority: u32,
    /// `is_suspended` (DBG_TRAP SUSPEND_QUEUES). KFD sets it before it unmaps and keeps it when
    /// the unmap then fails.
    suspended: bool,
    /// `is_being_destroyed`: a DESTROY_QUEUE has started; it can no longer be suspended.
    being_destroyed: bool,
    /// Whether the device has it suspended: `suspended` as of the last unmap that worked (a
    /// suspend whose unmap failed leaves the queue running).
    hw_suspended: bool,
    /// `exception_status`: raised debug exceptions (`KFD_EC_MASK` bits).
    exception_status: u64,
    /// The queue has the GPU's GWS (ALLOC_QUEUE_GWS): ROCr's cooperative queue.
    gws: bool,
}

impl QueueRec {
    /// KFD's `QUEUE_IS_ACTIVE` for the states the emulator has (the ring is never absent).
    fn active(&self) -> bool {
        self.percentage > 0 && !self.suspended
    }
}

/// A debug session (DBG_TRAP ENABLE until DISABLE).
struct Debug {
    /// `exception_enable_mask`: exceptions reported to the debugger.
    exception_enable_mask: u64,
    /// The debugger's `dbg_fd`: KFD writes one byte to it when a reported exception is raised.
    notify: Arc<File>,
}

/// The queue and debug state of the process, behind one lock.
#[derive(Default)]
struct State {
    queues: HashMap<u32, QueueRec>,
    next_seq: u64,
    debug: Option<Debug>,
    /// Per-GPU `exception_status` (EC_DEVICE_* bits).
    device_exceptions: Vec<u64>,
    /// `pdd->has_reset_queue`: a preemption timed out, after which KFD resets the GPU and
    /// refuses UPDATE_QUEUE with EACCES.
    has_reset_queue: bool,
    /// Preemption operations so far (`XHSA_EMU_FAULT` counts them).
    preemptions: u32,
    /// CloseKFD: waits end.
    closing: bool,
}

impl State {
    /// The ids of GPU `gpu`'s queues in KFD's list order (newest first).
    fn ids_on(&self, gpu: usize) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> =
            self.queues.iter().filter(|(_, q)| q.gpu == gpu).map(|(id, q)| (q.seq, *id)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().map(|(_, id)| id).collect()
    }

    /// Every queue in KFD's list order.
    fn ids(&self) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self.queues.iter().map(|(id, q)| (q.seq, *id)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter().map(|(_, id)| id).collect()
    }

    /// GPU `gpu`'s queues named in `ids` with their index there (KFD's `q_array_get_index`:
    /// the first entry equal to the id once the invalid bit is masked off), in list order.
    fn listed(&self, gpu: usize, ids: &[u32]) -> Vec<(usize, u32)> {
        self.ids_on(gpu)
            .into_iter()
            .filter_map(|q| {
                ids.iter().position(|&x| x & !KFD_DBG_QUEUE_INVALID_MASK == q).map(|i| (i, q))
            })
            .collect()
    }

    /// `kfd_dbg_ev_raise` for a session: the debugger's fd if the exception is reported.
    fn reported(&self, mask: u64) -> Option<Arc<File>> {
        self.debug
            .as_ref()
            .filter(|d| d.exception_enable_mask & mask != 0)
            .map(|d| d.notify.clone())
    }
}

/// One byte to the debugger's fd, as KFD's `kernel_write`; the result is ignored.
fn notify_debugger(f: Option<Arc<File>>) {
    if let Some(f) = f {
        let _ = (&*f).write(b".");
    }
}

/// KFD's `fget(dbg_fd)`: our own reference to the caller's descriptor.
fn dup_fd(fd: u32) -> Result<File, Errno> {
    let fd = i32::try_from(fd).map_err(|_| libc::EBADF)?;
    crate::sys::process::dup_cloexec(fd).map(File::from).map_err(|_| libc::EBADF)
}

/// The KFD state of this process.
pub struct Kfd {
    pub cfg: Arc<Config>,
    pub events: Arc<Events>,
    pub memory: Arc<Memory>,
    pub clock: Clock,
    gpus: Vec<Gpu>,
    /// Serializes queue operations, as KFD's process mutex and queue manager lock do. A
    /// DESTROY_QUEUE waiting for a resume gives it up while it waits.
    op: Mutex<()>,
    state: Mutex<State>,
    /// Signalled when a suspension ends, the debug session ends or the KFD closes.
    changed: Condvar,
    slots: Mutex<Vec<Vec<bool>>>,
    next_queue: AtomicU32,
    next_handle: AtomicU32,
    runtime_enabled: AtomicBool,
    /// What RUNTIME_ENABLE recorded: the runtime's `r_debug` and whether it asked for TTMP setup.
    r_debug: AtomicU64,
    ttmp_setup: AtomicBool,
    faults: FaultPlan,
}

impl Kfd {
    /// Opens the emulated KFD of this process: connects to (or starts) the shared device and
    /// runs a packet processor per GPU, with its doorbell area. `r_debug` is the address of
    /// ROCr's `_amdgpu_r_debug`, for kernel names; `target` is the ISA the GPUs report.
    pub fn open(
        cfg: Arc<Config>,
        gpus: u32,
        r_debug: Option<u64>,
        target: crate::isa::target::Target,
    ) -> Result<Kfd, String> {
        let events = Arc::new(Events::default());
        let memory = Arc::new(Memory::default());
        let mut list = Vec::new();
        let mut clock = None;
        for g in 0..gpus {
            let gpu_id = topology::gpu_id(g);
            let conn =
                Connection::open(g).map_err(|e| format!("cannot reach the shared device: {e}"))?;
            clock = Some(conn.clock);
            let bytes = (DOORBELLS * 8) as u64;
            let doorbells = mem::map(bytes, 4096, true, true)
                .map_err(|e| format!("cannot map doorbells: {e}"))?;
            let wake: &'static AtomicU32 = &conn.area.get().wake;
            // SAFETY: the doorbell mapping was just created, is used only for doorbells and is
            // never unmapped (it lives as long as the process's KFD state).
            let area = Arc::new(
                unsafe { TrappedArea::register(doorbells as *mut u8, bytes as usize, wake) }
                    .map_err(|e| e.to_string())?,
            );
            let cp = Cp::with_scheduler(
                cfg.clone(),
                r_debug,
                Box::new(RemoteScheduler::new(conn.clone())),
            )
            .with_target(target);
            let engine = Engine::start(
                cp,
                cfg.interpreter.workers(),
                conn.clock,
                events.clone(),
                memory.clone(),
                gpu_id,
                wake,
            );
            engine.set_doorbells(area.clone());
            list.push(Gpu { gpu_id, engine, conn, doorbells, _area: area });
        }
        let faults = FaultPlan::from_env();
        if !faults.is_empty() {
            tracing::info!(
                "xhsa-emu: {}={:?}: preemptions will fail",
                fault::VAR,
                std::env::var(fault::VAR).unwrap_or_default()
            );
        }
        Ok(Kfd {
            slots: Mutex::new(vec![vec![false; DOORBELLS]; list.len()]),
            cfg,
            events,
            memory,
            clock: clock.unwrap_or_else(|| Clock::new(1.0)),
            state: Mutex::new(State { device_exceptions: vec![0; list.len()], ..State::default() }),
            gpus: list,
            op: Mutex::new(()),
            changed: Condvar::new(),
            next_queue: AtomicU32::new(0),
            next_handle: AtomicU32::new(1),
            runtime_enabled: AtomicBool::new(false),
            r_debug: AtomicU64::new(0),
            ttmp_setup: AtomicBool::new(false),
            faults,
        })
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_op(&self) -> MutexGuard<'_, ()> {
        self.op.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gpu_index(&self, gpu_id: u32) -> Result<usize, Errno> {
        self.gpus.iter().position(|g| g.gpu_id == gpu_id).ok_or(libc::EINVAL)
    }

    /// AMDKFD_IOC_GET_VERSION.
    pub fn get_version(&self, a: &mut GetVersionArgs) -> Result<(), Errno> {
        a.major_version = VERSION.0;
        a.minor_version = VERSION.1;
        Ok(())
    }

    /// AMDKFD_IOC_RUNTIME_ENABLE: records the runtime's `r_debug` pointer and TTMP request
    /// (what DBG_TRAP ENABLE reports back to the debugger). While a debug session is on (DBG_TRAP
    /// ENABLE), it blocks, as KFD's does (`down_interruptible` until the debugger answers the
    /// runtime event): a runtime that shuts down with the process's debug trap on waits until
    /// the trap is disabled (ROCr 6.x's `hsa_shut_down` hangs).
    pub fn runtime_enable(
        &self,
        enable: bool,
        r_debug: u64,
        ttmp_setup: bool,
    ) -> Result<(), Errno> {
        let mut st = self.lock_state();
        while st.debug.is_some() {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        drop(st);
        self.r_debug.store(if enable { r_debug } else { 0 }, Ordering::Release);
        self.ttmp_setup.store(enable && ttmp_setup, Ordering::Release);
        self.runtime_enabled.store(enable, Ordering::Release);
        Ok(())
    }

    pub fn runtime_enabled(&self) -> bool {
        self.runtime_enabled.load(Ordering::Acquire)
    }

    /// AMDKFD_IOC_GET_CLOCK_COUNTERS. The GPU and system counters are the host clock at the
    /// current device time (nanoseconds, see `Clock::to_host`), the CPU counter is
    /// `CLOCK_MONOTONIC_RAW`; ROCr's GPU-to-system conversion is the identity.
    pub fn get_clock_counters(&self, a: &mut GetClockCountersArgs) -> Result<(), Errno> {
        let now = self.clock.to_host(self.clock.now());
        a.gpu_clock_counter = if a.gpu_id == 0 { 0 } else { now };
        a.cpu_clock_counter = monotonic_raw_ns();
        a.system_clock_counter = now;
        a.system_clock_freq = 1_000_000_000;
        Ok(())
    }

    /// AMDKFD_IOC_CREATE_QUEUE.
    pub fn create_queue(&self, a: &mut CreateQueueArgs) -> Result<(), Errno> {
        let gi = self.gpu_index(a.gpu_id)?;
        if a.queue_percentage > KFD_MAX_QUEUE_PERCENTAGE
            || a.queue_priority > KFD_MAX_QUEUE_PRIORITY
        {
            return Err(libc::EINVAL);
        }
        if a.ring_size != 0 && !a.ring_size.is_power_of_two() {
            return Err(libc::EINVAL);
        }
        let sdma = match a.queue_type {
            KFD_IOC_QUEUE_TYPE_COMPUTE_AQL => false,
            KFD_IOC_QUEUE_TYPE_SDMA | KFD_IOC_QUEUE_TYPE_SDMA_XGMI => true,
            _ => return Err(libc::EINVAL),
        };
        let ring = u64::from(a.ring_size);
        if !self.memory.device_accessible(a.ring_base_address, ring)
            || !self.memory.device_accessible(a.read_pointer_address, 8)
            || !self.memory.device_accessible(a.write_pointer_address, 8)
        {
            return Err(libc::EFAULT);
        }
        let _op = self.lock_op();
        let mut st = self.lock_state();
        let cp_limit = self.cfg.device.cp_queues as usize
            + (self.cfg.device.sdma_engines * self.cfg.device.sdma_queues_per_engine) as usize;
        if st.queues.values().filter(|q| q.gpu == gi).count() >= cp_limit.max(1) {
            return Err(libc::ENOSPC);
        }
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = slots[gi].iter().position(|u| !u).ok_or(libc::ENOSPC)?;
            slots[gi][s] = true;
            s
        };
        let gpu = &self.gpus[gi];
        let reply = gpu.conn.request(&format!(
            "CREATE gpu={gi} prio={} pct={}",
            a.queue_priority, a.queue_percentage
        ));
        let key: QueueKey = match reply.as_ref().map(|l| l.get("key")) {
            Ok(Some(k)) => k,
            failed => {
                // The doorbell slot goes back whatever went wrong.
                self.slots.lock().unwrap_or_else(|p| p.into_inner())[gi][slot] = false;
                return Err(match failed {
                    Err(r) => {
                        tracing::warn!("xhsa-emu: {}", r.message);
                        r.errno
                    }
                    _ => libc::EIO,
                });
            }
        };
        let id = self.next_queue.fetch_add(1, Ordering::Relaxed);
        // The doorbell slot starts at u64::MAX: "never rung" to the packet processor (a ring
        // stores the id of the last packet announced, 0 for the first, and a hardware doorbell
        // is noticed by its write, which the emulator sees only as a value). The page may be
        // write-protected: this store then traps like an application's, which only wakes the
        // device thread.
        let doorbell = gpu.doorbells + 8 * slot as u64;
        // SAFETY: the doorbell slot lies in the GPU's doorbell pages, mapped writable in this
        // process for the GPU's life.
        unsafe { HostMemory::new() }.store_u64(doorbell, u64::MAX);
        {
            let mut cp = gpu.engine.cp();
            if sdma {
                cp.add_sdma(
                    key,
                    SdmaQueue::new(
                        a.ring_base_address,
                        ring,
                        a.read_pointer_address,
                        a.write_pointer_address,
                    ),
                );
            } else {
                cp.add_aql(
                    key,
                    a.ring_base_address,
                    ring,
                    a.read_pointer_address,
                    doorbell,
                    a.queue_priority as u8,
                );
            }
            cp.set_runnable(key, a.queue_percentage > 0);
        }
        gpu.engine.notify();
        tracing::debug!(
            queue = id,
            key,
            sdma,
            ring = format_args!("{:#x}", a.ring_base_address),
            bytes = a.ring_size,
            read_pointer = format_args!("{:#x}", a.read_pointer_address),
            doorbell = format_args!("{doorbell:#x}"),
            priority = a.queue_priority,
            "xhsa-emu: queue created"
        );
        let seq = st.next_seq;
        st.next_seq += 1;
        let rec = QueueRec {
            gpu: gi,
            key,
            slot,
            seq,
            queue_type: a.queue_type,
            ring_base: a.ring_base_address,
            ring_size: a.ring_size,
            read_ptr: a.read_pointer_address,
            write_ptr: a.write_pointer_address,
            ctx_save: a.ctx_save_restore_address,
            ctx_save_size: a.ctx_save_restore_size,
            percentage: a.queue_percentage,
            priority: a.queue_priority,
            suspended: false,
            being_destroyed: false,
            hw_suspended: false,
            exception_status: QUEUE_NEW,
            gws: false,
        };
        st.queues.insert(id, rec);
        // CREATE_QUEUE raises EC_QUEUE_NEW to a debugger that asked for it.
        let notify = st.reported(QUEUE_NEW);
        drop(st);
        notify_debugger(notify);
        a.queue_id = id;
        a.doorbell_offset = MMAP_TYPE_DOORBELL | (u64::from(a.gpu_id) << 32) | (8 * slot as u64);
        Ok(())
    }

    /// mmap of `/dev/kfd` at a doorbell offset (CREATE_QUEUE's `doorbell_offset` without its
    /// in-page part) by a thunk that chose the address: maps the GPU's doorbell pages a second
    /// time at `addr` (MAP_FIXED: whatever was there is replaced, as mmap does) and arms that
    /// mapping too, so a store through it reaches the packet processor.
    pub fn map_doorbells(&self, doorbell_offset: u64, addr: u64, len: u64) -> Result<(), Errno> {
        let gpu_id = (doorbell_offset >> 32 & 0x3fff_ffff) as u32;
        let gi = self.gpu_index(gpu_id)?;
        let g = &self.gpus[gi];
        let area_len = (DOORBELLS * 8) as u64;
        let within = doorbell_offset & 0xffff_ffff;
        if len == 0 || !addr.is_multiple_of(4096) || within + len > area_len {
            return Err(libc::EINVAL);
        }
        // SAFETY: the source is the GPU's shared doorbell mapping; the destination is the
        // caller's own range (the thunk's doorbell address), which its mmap(MAP_FIXED) would
        // replace too, and which nothing of ours uses.
        unsafe { crate::sys::mem::alias_shared(g.doorbells + within, len, addr) }
            .map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?;
        let wake: &'static AtomicU32 = &g.conn.area.get().wake;
        // SAFETY: the mapping was just made at `addr`, holds only doorbells, and is unregistered
        // by `unmap_doorbells` before the thunk unmaps it.
        let area = Arc::new(
            unsafe { TrappedArea::register(addr as *mut u8, len as usize, wake) }.map_err(|e| {
                tracing::error!("xhsa-emu: {e}");
                libc::ENOMEM
            })?,
        );
        // The engine holds the mapping's registration (it arms it) until unmap_doorbells.
        g.engine.set_doorbells(area);
        Ok(())
    }

    /// Forgets doorbell mappings made by [`Kfd::map_doorbells`] inside `[addr, addr + len)`
    /// (the caller is about to unmap them). Returns whether there were any.
    pub fn unmap_doorbells(&self, addr: u64, len: u64) -> bool {
        let mut any = false;
        for g in &self.gpus {
            any |= !g.engine.remove_doorbells(addr as usize, len as usize).is_empty();
        }
        any
    }

    /// The host address of the doorbell a `doorbell_offset` names (what the thunk's mmap of
    /// `/dev/kfd` at that offset yields).
    pub fn doorbell_address(&self, doorbell_offset: u64) -> Option<u64> {
        let gpu_id = (doorbell_offset >> 32 & 0x3fff_ffff) as u32;
        let gi = self.gpu_index(gpu_id).ok()?;
        Some(self.gpus[gi].doorbells + (doorbell_offset & 0xffff_ffff))
    }

    /// AMDKFD_IOC_DESTROY_QUEUE. As KFD's `wait_on_destroy_queue`: the queue is marked as being
    /// destroyed (it can no longer be suspended), and while a debug session holds it suspended
    /// the call blocks until it is resumed (RESUME_QUEUES, or DBG_TRAP DISABLE, which resumes
    /// everything). When the KFD closes meanwhile, it fails with EINTR (KFD's interrupted wait,
    /// -ERESTARTSYS) and the queue stays.
    pub fn destroy_queue(&self, queue_id: u32) -> Result<(), Errno> {
        loop {
            let op = self.lock_op();
            let mut st = self.lock_state();
            let debugging = st.debug.is_some();
            let q = st.queues.get_mut(&queue_id).ok_or(libc::EINVAL)?;
            q.being_destroyed = true;
            if debugging && q.suspended {
                drop(op);
                tracing::debug!(
                    queue = queue_id,
                    "xhsa-emu: DESTROY_QUEUE of a suspended queue waits for its resume"
                );
                while !st.closing
                    && st.debug.is_some()
                    && st.queues.get(&queue_id).is_some_and(|q| q.suspended)
                {
                    st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.closing {
                    return Err(libc::EINTR);
                }
                continue;
            }
            let rec = st.queues.remove(&queue_id).expect("looked up above");
            // KFD raises EC_DEVICE_QUEUE_DELETE on the device after a destroy.
            let notify = if debugging {
                st.device_exceptions[rec.gpu] |= kfd_ec_mask(EC_DEVICE_QUEUE_DELETE);
                st.reported(kfd_ec_mask(EC_DEVICE_QUEUE_DELETE))
            } else {
                None
            };
            drop(st);
            let gpu = &self.gpus[rec.gpu];
            gpu.engine.remove_queue(rec.key);
            if let Err(r) = gpu.conn.request(&format!("DESTROY key={}", rec.key)) {
                tracing::warn!("xhsa-emu: {}", r.message);
            }
            self.slots.lock().unwrap_or_else(|p| p.into_inner())[rec.gpu][rec.slot] = false;
            drop(op);
            notify_debugger(notify);
            return Ok(());
        }
    }

    /// The fault `XHSA_EMU_FAULT` gives the next preemption operation (counting it).
    fn next_fault(&self, st: &mut State) -> Option<Fault> {
        let n = st.preemptions;
        st.preemptions = n.saturating_add(1);
        let f = self.faults.fault_for(n, self.cfg.kfd.preemption_timeout_ms);
        if let Some(f) = f {
            tracing::info!(
                "xhsa-emu: {}: preemption operation {n} {}",
                fault::VAR,
                if f == Fault::Fail { "fails" } else { "times out" }
            );
        }
        f
    }

    /// A preemption whose fence times out: KFD waits `queue_preemption_timeout_ms` (the caller
    /// blocks that long; other threads may use the KFD meanwhile, and CloseKFD ends the wait),
    /// logs its message and schedules a GPU reset, after which the process's queues count as
    /// reset (`has_reset_queue`). The GPU reset itself is not modelled: the device and its
    /// queues go on.
    fn time_out<'a>(&self, mut st: MutexGuard<'a, State>, ms: u64) -> MutexGuard<'a, State> {
        let deadline = Instant::now() + Duration::from_millis(ms);
        while !st.closing {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.changed.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
        tracing::error!("xhsa-emu: KFD: The cp might be in an unrecoverable state due to an unsuccessful queues preemption");
        st.has_reset_queue = true;
        st
    }

    /// AMDKFD_IOC_UPDATE_QUEUE: priority 0-15 and percentage 0-100. On an HWS device KFD
    /// unmaps every queue of the device for it; a percentage of 0 leaves the queue off the
    /// runlist (its running waves context-saved), a percentage above 0 maps it again unless it
    /// is suspended. An unknown queue id gives EFAULT, as in `pqm_update_queue_properties`.
    pub fn update_queue(&self, a: &UpdateQueueArgs) -> Result<(), Errno> {
        if a.queue_percentage > KFD_MAX_QUEUE_PERCENTAGE
            || a.queue_priority > KFD_MAX_QUEUE_PRIORITY
        {
            return Err(libc::EINVAL);
        }
        if a.ring_size != 0 && !a.ring_size.is_power_of_two() {
            return Err(libc::EINVAL);
        }
        let _op = self.lock_op();
        let mut st = self.lock_state();
        let q = st.queues.get(&a.queue_id).ok_or(libc::EFAULT)?;
        let (key, gi) = (q.key, q.gpu);
        let (was, is) = (q.active(), a.queue_percentage > 0 && !q.suspended);
        if st.has_reset_queue {
            // `update_queue` after a GPU reset KFD ordered: the queue is gone.
            return Err(libc::EACCES);
        }
        if was && !is {
            match self.next_fault(&mut st) {
                None => {}
                Some(Fault::Fail) => {
                    tracing::error!("xhsa-emu: KFD: unmap queue failed");
                    return Err(libc::EIO);
                }
                Some(Fault::Timeout { ms }) => {
                    drop(self.time_out(st, ms));
                    return Err(libc::EACCES);
                }
            }
        }
        // The remap takes KFD's view of the queue: suspended too if a suspend's unmap failed.
        let susp = u8::from(st.queues[&a.queue_id].suspended);
        let gpu = &self.gpus[gi];
        gpu.conn
            .request(&format!(
                "UPDATE key={key} prio={} pct={} susp={susp}",
                a.queue_priority, a.queue_percentage
            ))
            .map_err(|r| r.errno)?;
        if let Some(q) = st.queues.get_mut(&a.queue_id) {
            q.percentage = a.queue_percentage;
            q.priority = a.queue_priority;
            q.hw_suspended = q.suspended;
        }
        drop(st);
        gpu.engine.cp().set_runnable(key, is);
        gpu.engine.notify();
        Ok(())
    }

    /// AMDKFD_IOC_ALLOC_QUEUE_GWS (`kfd_ioctl_alloc_queue_gws`, `pqm_set_gws`): `num_gws` > 0
    /// gives the queue its GPU's GWS (the global wave sync barriers cooperative launches use),
    /// 0 takes them back. An unknown queue gives EINVAL; GWS already on a queue of this process
    /// on that GPU, EBUSY; taking back GWS the process does not have, EINVAL. `first_gws` is 0
    /// (KFD hands out the whole set).
    pub fn alloc_queue_gws(&self, a: &mut AllocQueueGwsArgs) -> Result<(), Errno> {
        let _op = self.lock_op();
        let mut st = self.lock_state();
        let gpu = st.queues.get(&a.queue_id).ok_or(libc::EINVAL)?.gpu;
        let holder = st.queues.values().any(|q| q.gpu == gpu && q.gws);
        let give = a.num_gws > 0;
        if give && holder {
            return Err(libc::EBUSY);
        }
        if !give && !holder {
            return Err(libc::EINVAL);
        }
        let mut changed = Vec::new();
        if give {
            if let Some(q) = st.queues.get_mut(&a.queue_id) {
                q.gws = true;
                changed.push(q.key);
            }
        } else {
            for q in st.queues.values_mut().filter(|q| q.gpu == gpu && q.gws) {
                q.gws = false;
                changed.push(q.key);
            }
        }
        drop(st);
        // The CP runs a GWS queue's dispatches whole (their grid syncs need every workgroup).
        let mut cp = self.gpus[gpu].engine.cp();
        for key in changed {
            cp.set_gws(key, give);
        }
        a.first_gws = 0;
        Ok(())
    }

    /// AMDKFD_IOC_SET_CU_MASK with the mask words already read from user memory. An unknown
    /// queue id gives EFAULT (`pqm_update_mqd`).
    pub fn set_cu_mask(&self, queue_id: u32, num_bits: u32, words: &[u32]) -> Result<(), Errno> {
        if num_bits == 0 || !num_bits.is_multiple_of(32) {
            return Err(libc::EINVAL);
        }
        let _op = self.lock_op();
        let key_gpu = self.lock_state().queues.get(&queue_id).map(|q| (q.key, q.gpu));
        let (key, gi) = key_gpu.ok_or(libc::EFAULT)?;
        let gpu = &self.gpus[gi];
        let hex: Vec<String> = words.iter().map(|w| format!("{w:x}")).collect();
        gpu.conn
            .request(&format!("CUMASK key={key} bits={num_bits} words={}", hex.join(",")))
            .map_err(|r| r.errno)?;
        gpu.engine.notify();
        Ok(())
    }

    /// AMDKFD_IOC_DBG_TRAP's checks, in KFD's order (`kfd_ioctl_set_debug_trap`): the target
    /// is this process (KFD also accepts a ptrace child, which an emulated process never is:
    /// EPERM); every op but ENABLE needs the debug trap enabled (EINVAL); the hardware ops need
    /// the runtime enabled (EPERM).
    fn dbg_check(&self, st: &State, pid: u32, op: u32) -> Result<(), Errno> {
        if pid != std::process::id() {
            return Err(libc::EPERM);
        }
        if op != KFD_IOC_DBG_TRAP_ENABLE && st.debug.is_none() {
            return Err(libc::EINVAL);
        }
        if dbg_trap_op_is_hw_op(op) && !self.runtime_enabled() {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    /// The runtime info KFD keeps (`kfd_runtime_info`).
    fn runtime_info(&self) -> RuntimeInfo {
        RuntimeInfo {
            r_debug: self.r_debug.load(Ordering::Acquire),
            runtime_state: if self.runtime_enabled() {
                DEBUG_RUNTIME_STATE_ENABLED
            } else {
                DEBUG_RUNTIME_STATE_DISABLED
            },
            ttmp_setup: u32::from(self.ttmp_setup.load(Ordering::Acquire)),
        }
    }

    /// DBG_TRAP ENABLE for `pid`: starts a debug session (EALREADY if one is on; EBADF if
    /// `dbg_fd` is not open) reporting the exceptions in `exception_mask` to `dbg_fd`. Returns
    /// the runtime info KFD copies to `rinfo_ptr`.
    pub fn dbg_trap_enable(&self, pid: u32, a: &DbgTrapEnableArgs) -> Result<RuntimeInfo, Errno> {
        let _op = self.lock_op();
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_ENABLE)?;
        if st.debug.is_some() {
            return Err(libc::EALREADY);
        }
        let notify = Arc::new(dup_fd(a.dbg_fd)?);
        st.debug = Some(Debug { exception_enable_mask: a.exception_mask, notify });
        Ok(self.runtime_info())
    }

    /// DBG_TRAP DISABLE for `pid` (`kfd_dbg_trap_disable`): with the runtime enabled, every
    /// queue is resumed (`kfd_dbg_trap_deactivate`); every exception status is cleared,
    /// EC_QUEUE_NEW included, and the session ends.
    pub fn dbg_trap_disable(&self, pid: u32) -> Result<(), Errno> {
        let _op = self.lock_op();
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_DISABLE)?;
        if self.runtime_enabled() {
            for g in 0..self.gpus.len() {
                let ids = st.ids_on(g);
                if let Err(e) = self.resume_on(&mut st, g, &ids) {
                    tracing::warn!(
                        "xhsa-emu: DBG_TRAP DISABLE: resuming the queues of GPU {g} failed ({e})"
                    );
                }
            }
        }
        st.debug = None;
        for q in st.queues.values_mut() {
            q.exception_status = 0;
        }
        st.device_exceptions.iter_mut().for_each(|e| *e = 0);
        drop(st);
        self.changed.notify_all();
        Ok(())
    }

    /// DBG_TRAP SET_EXCEPTIONS_ENABLED: the exceptions reported from now on; the debugger's fd
    /// is poked at once if one of them is already raised.
    pub fn dbg_set_exceptions_enabled(&self, pid: u32, mask: u64) -> Result<(), Errno> {
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED)?;
        let raised = st.queues.values().fold(0, |m, q| m | q.exception_status)
            | st.device_exceptions.iter().fold(0, |m, e| m | e);
        let d = st.debug.as_mut().expect("checked");
        d.exception_enable_mask = mask;
        let notify = (mask & raised != 0).then(|| d.notify.clone());
        drop(st);
        notify_debugger(notify);
        Ok(())
    }

    /// Resumes `ids` (queues of GPU `g`) as KFD's `resume_queues` does on one device: every one
    /// is resumed, suspended or not, then the device unmaps and remaps. Err: the device did
    /// not take it (the queues stay resumed in KFD's book, as there).
    fn resume_on(&self, st: &mut State, g: usize, ids: &[u32]) -> Result<(), String> {
        let mut keys = Vec::new();
        for id in ids {
            if let Some(q) = st.queues.get_mut(id) {
                q.suspended = false;
                keys.push(q.key.to_string());
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let r = self.gpus[g].conn.request(&format!("RESUME keys={}", keys.join(",")));
        self.changed.notify_all();
        r.map_err(|r| r.message)?;
        let mut cp = self.gpus[g].engine.cp();
        for id in ids {
            if let Some(q) = st.queues.get_mut(id) {
                q.hw_suspended = false;
                cp.set_runnable(q.key, q.active());
            }
        }
        drop(cp);
        self.gpus[g].engine.notify();
        Ok(())
    }

    /// DBG_TRAP SUSPEND_QUEUES (`suspend_queues`): `ids` are KFD queue ids of `pid`. Every
    /// entry first gets `KFD_DBG_QUEUE_INVALID_MASK`; a queue that is suspended, or is
    /// suspended now, has it cleared; a queue still new (EC_QUEUE_NEW raised) or being
    /// destroyed keeps it and is left alone; an id naming no queue keeps it. Per GPU with a
    /// queue to suspend, the device unmaps every queue (`execute_queues_cpsch`, the running
    /// waves of the suspended ones saved; those that end within `grace_ns` finish); if that
    /// fails, every listed queue of that GPU gets `KFD_DBG_QUEUE_ERROR_MASK` and is not counted
    /// (it stays marked suspended, as in KFD). On success `exception_clear_mask` is cleared on
    /// every listed queue of the GPU. Returns how many queues were suspended.
    pub fn dbg_trap_suspend(
        &self,
        pid: u32,
        ids: &mut [u32],
        exception_clear_mask: u64,
        grace_ns: u64,
    ) -> Result<u32, Errno> {
        let _op = self.lock_op();
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES)?;
        ids.iter_mut().for_each(|x| *x |= KFD_DBG_QUEUE_INVALID_MASK);
        let mut total = 0;
        for g in 0..self.gpus.len() {
            let listed = st.listed(g, ids);
            let mut handled = Vec::new();
            for &(i, id) in &listed {
                let q = st.queues.get_mut(&id).expect("listed");
                if !q.suspended {
                    if q.exception_status & QUEUE_NEW != 0 || q.being_destroyed {
                        tracing::debug!(
                            queue = id,
                            new = q.exception_status & QUEUE_NEW != 0,
                            "xhsa-emu: SUSPEND_QUEUES skips a new or destroyed queue"
                        );
                        continue;
                    }
                    q.suspended = true;
                }
                ids[i] &= !KFD_DBG_QUEUE_INVALID_MASK;
                handled.push(id);
            }
            if handled.is_empty() {
                continue;
            }
            // The remap takes KFD's view: queues of this GPU whose earlier suspend failed to
            // unmap leave the runlist now too.
            let stale: Vec<u32> = st
                .ids_on(g)
                .into_iter()
                .filter(|id| {
                    !handled.contains(id) && st.queues[id].suspended && !st.queues[id].hw_suspended
                })
                .collect();
            handled.extend(stale.iter().copied());
            let ok = match self.next_fault(&mut st) {
                None => {
                    let keys: Vec<String> =
                        handled.iter().map(|id| st.queues[id].key.to_string()).collect();
                    match self.gpus[g]
                        .conn
                        .request(&format!("SUSPEND keys={} grace_ns={grace_ns}", keys.join(",")))
                    {
                        Ok(_) => true,
                        Err(r) => {
                            tracing::warn!("xhsa-emu: {}", r.message);
                            false
                        }
                    }
                }
                Some(Fault::Fail) => false,
                Some(Fault::Timeout { ms }) => {
                    st = self.time_out(st, ms);
                    false
                }
            };
            if ok {
                total += (handled.len() - stale.len()) as u32;
                let mut cp = self.gpus[g].engine.cp();
                for id in &handled {
                    if let Some(q) = st.queues.get_mut(id) {
                        q.hw_suspended = true;
                        cp.set_runnable(q.key, false);
                    }
                }
                drop(cp);
                for (_, id) in &listed {
                    if let Some(q) = st.queues.get_mut(id) {
                        q.exception_status &= !exception_clear_mask;
                    }
                }
            } else {
                tracing::error!("xhsa-emu: KFD: Failed to suspend process queues.");
                for &(i, _) in &listed {
                    ids[i] |= KFD_DBG_QUEUE_ERROR_MASK;
                }
            }
            self.gpus[g].engine.notify();
        }
        Ok(total)
    }

    /// DBG_TRAP RESUME_QUEUES (`resume_queues`): every entry first gets the invalid bit; each
    /// of `pid`'s queues named in `ids` is resumed (one that is not suspended counts too) and
    /// has it cleared; then each GPU with such a queue unmaps and remaps its queues, those
    /// resumed coming back with their saved waves first unless their percentage is 0. If the
    /// device fails, its listed queues get the error bit. A DESTROY_QUEUE waiting on a resumed
    /// queue goes on. Returns how many queues were resumed.
    pub fn dbg_trap_resume(&self, pid: u32, ids: &mut [u32]) -> Result<u32, Errno> {
        let _op = self.lock_op();
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_RESUME_QUEUES)?;
        ids.iter_mut().for_each(|x| *x |= KFD_DBG_QUEUE_INVALID_MASK);
        let mut total = 0;
        for g in 0..self.gpus.len() {
            let listed = st.listed(g, ids);
            if listed.is_empty() {
                continue;
            }
            for &(i, _) in &listed {
                ids[i] &= !KFD_DBG_QUEUE_INVALID_MASK;
            }
            let qids: Vec<u32> = listed.iter().map(|&(_, id)| id).collect();
            match self.resume_on(&mut st, g, &qids) {
                Ok(()) => total += qids.len() as u32,
                Err(e) => {
                    tracing::error!("xhsa-emu: KFD: Failed to resume process queues ({e})");
                    for &(i, _) in &listed {
                        ids[i] |= KFD_DBG_QUEUE_ERROR_MASK;
                    }
                }
            }
        }
        Ok(total)
    }

    /// DBG_TRAP QUERY_DEBUG_EVENT (`kfd_dbg_ev_query_debug_event`): the first queue (newest
    /// first), else GPU, whose raised exceptions include a reported one: its whole status, ids,
    /// and `exception_mask`'s bits cleared on it. EAGAIN (all fields zero) when none is.
    pub fn dbg_query_debug_event(
        &self,
        pid: u32,
        a: &mut DbgTrapQueryDebugEventArgs,
    ) -> Result<(), Errno> {
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT)?;
        let clear = a.exception_mask;
        let enabled = st.debug.as_ref().map_or(0, |d| d.exception_enable_mask);
        *a = DbgTrapQueryDebugEventArgs::default();
        for id in st.ids() {
            let q = st.queues.get_mut(&id).expect("listed");
            if q.exception_status & enabled != 0 {
                (a.exception_mask, a.queue_id, a.gpu_id) =
                    (q.exception_status, id, self.gpus[q.gpu].gpu_id);
                q.exception_status &= !clear;
                return Ok(());
            }
        }
        for (g, e) in st.device_exceptions.iter_mut().enumerate() {
            if *e & enabled != 0 {
                (a.exception_mask, a.gpu_id) = (*e, self.gpus[g].gpu_id);
                *e &= !clear;
                return Ok(());
            }
        }
        Err(libc::EAGAIN)
    }

    /// DBG_TRAP QUERY_EXCEPTION_INFO (`kfd_dbg_trap_query_exception_info`): whether exception
    /// `exception_code` is raised on queue or GPU `source_id` (ENODATA if not; EINVAL for an
    /// unknown source or code, or a NULL `info_ptr`), clearing it if `clear_exception`. None of
    /// the exceptions the emulator raises carries data: `info_size` comes back 0.
    pub fn dbg_query_exception_info(
        &self,
        pid: u32,
        a: &mut DbgTrapQueryExceptionInfoArgs,
    ) -> Result<(), Errno> {
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO)?;
        if a.info_ptr == 0 {
            return Err(libc::EINVAL);
        }
        let code = a.exception_code;
        if code == 0 || code > 64 {
            return Err(libc::EINVAL);
        }
        let bit = kfd_ec_mask(code);
        let status: &mut u64 = if bit & KFD_EC_MASK_QUEUE != 0 {
            &mut st.queues.get_mut(&a.source_id).ok_or(libc::EINVAL)?.exception_status
        } else if bit & KFD_EC_MASK_DEVICE != 0 {
            let g = self.gpu_index(a.source_id)?;
            &mut st.device_exceptions[g]
        } else if bit & KFD_EC_MASK_PROCESS != 0 {
            // The emulator raises no process exception.
            return Err(libc::ENODATA);
        } else {
            return Err(libc::EINVAL);
        };
        if *status & bit == 0 {
            return Err(libc::ENODATA);
        }
        if a.clear_exception != 0 {
            *status &= !bit;
        }
        a.info_size = 0;
        Ok(())
    }

    /// DBG_TRAP GET_QUEUE_SNAPSHOT (`pqm_get_queue_snapshot`): the entries of the first
    /// `num_queues` queues (newest first), each clearing `exception_mask`'s bits on its queue.
    /// Out: `num_queues` = how many queues exist, `entry_size` = min(its value, 64). An
    /// `entry_size` of 0 is EINVAL (with `num_queues` 0). The emulator has no control stack
    /// and no EOP buffer; the entry's other fields are the queue's as created.
    pub fn dbg_queue_snapshot(
        &self,
        pid: u32,
        a: &mut DbgTrapQueueSnapshotArgs,
    ) -> Result<Vec<QueueSnapshotEntry>, Errno> {
        let mut st = self.lock_state();
        self.dbg_check(&st, pid, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT)?;
        let room = a.num_queues as usize;
        a.num_queues = 0;
        if a.entry_size == 0 {
            return Err(libc::EINVAL);
        }
        a.entry_size = a.entry_size.min(std::mem::size_of::<QueueSnapshotEntry>() as u32);
        let ids = st.ids();
        let mut out = Vec::new();
        for &id in ids.iter().take(room) {
            let q = st.queues.get_mut(&id).expect("listed");
            out.push(QueueSnapshotEntry {
                exception_status: q.exception_status,
                ring_base_address: q.ring_base,
                write_pointer_address: q.write_ptr,
                read_pointer_address: q.read_ptr,
                ctx_save_restore_address: q.ctx_save,
                queue_id: id,
                gpu_id: self.gpus[q.gpu].gpu_id,
                ring_size: q.ring_size,
                queue_type: q.queue_type,
                ctx_save_restore_area_size: q.ctx_save_size,
                reserved: 0,
            });
            q.exception_status &= !a.exception_mask;
        }
        a.num_queues = ids.len() as u32;
        Ok(out)
    }

    /// AMDKFD_IOC_CREATE_EVENT. On the first signal event `event_page_offset` is the handle of
    /// the buffer the thunk allocated for the event page, as with the real thunk.
    pub fn create_event(&self, a: &mut CreateEventArgs) -> Result<(), Errno> {
        // As kfd_ioctl_create_event: a non-zero event_page_offset sets up the event page,
        // whatever the event's type (a ROCm 6.x thunk passes it with its first event, a memory
        // event); a signal event needs the page to be there.
        if self.events.page().is_none()
            && (a.event_page_offset != 0 || a.event_type == KFD_IOC_EVENT_SIGNAL)
        {
            let page = self.memory.find_handle(a.event_page_offset).ok_or(libc::EINVAL)?;
            self.events.set_page(page.start);
        }
        let (id, trigger, slot) =
            self.events.create(a.event_type, a.auto_reset != 0).map_err(|e| match e {
                events::EventError::NoSlot => libc::ENOSPC,
                _ => libc::EINVAL,
            })?;
        a.event_id = id;
        a.event_trigger_data = trigger;
        a.event_slot_index = slot;
        // kfd_event_create: a signal event reports its slot in the event page, which is named
        // by the KFD_MMAP_TYPE_EVENTS offset (the thunk takes a non-zero offset as "this event
        // has a slot" and points the signal's mailbox at it); other events leave it as passed.
        if a.event_type == KFD_IOC_EVENT_SIGNAL {
            a.event_page_offset = MMAP_TYPE_EVENTS;
        }
        Ok(())
    }

    /// Host-side set of an event (AMDKFD_IOC_SET_EVENT); also wakes the device threads, which
    /// may be waiting on a barrier whose dependency the host just satisfied.
    pub fn set_event(&self, id: u32) -> Result<(), Errno> {
        self.events.set(id).map_err(|_| libc::EINVAL)?;
        for g in &self.gpus {
            g.engine.notify();
        }
        Ok(())
    }

    /// AMDKFD_IOC_WAIT_EVENTS over `ids` with their signal events' `last_event_age`s (`ages`,
    /// updated for the events that fired; see [`events::Events::wait_aged`]); returns the wait
    /// result and fault data.
    pub fn wait_events(
        &self,
        ids: &[u32],
        ages: &mut [u64],
        a: &mut WaitEventsArgs,
    ) -> Result<events::WaitOutcome, Errno> {
        let timeout = if a.timeout == u32::MAX { u32::MAX } else { a.timeout.min(0x7fff_ffff) };
        let out = self
            .events
            .wait_aged(ids, ages, a.wait_for_all != 0, timeout)
            .map_err(|_| libc::EINVAL)?;
        a.wait_result = out.result;
        Ok(out)
    }

    /// AMDKFD_IOC_ALLOC_MEMORY_OF_GPU for memory the thunk has mapped at `va_addr` (VRAM and GTT
    /// are backed by host memory the thunk maps; USERPTR registers the caller's own memory).
    pub fn alloc_memory(&self, a: &mut AllocMemoryOfGpuArgs) -> Result<(), Errno> {
        let gi = self.gpu_index(a.gpu_id)?;
        let kind = if a.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0 {
            MemKind::Vram
        } else if a.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR != 0 {
            MemKind::Userptr
        } else if a.flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0 {
            MemKind::System
        } else {
            return Err(libc::EINVAL);
        };
        if a.size == 0 || a.va_addr == 0 {
            return Err(libc::EINVAL);
        }
        if kind == MemKind::Vram
            && self.memory.vram_used() + a.size > self.cfg.device.vram_gib << 30
        {
            return Err(libc::ENOMEM);
        }
        let handle = self.next_handle(a.gpu_id);
        let node = if kind == MemKind::Vram { gi as u32 + 1 } else { 0 };
        // A userptr buffer's bytes are the user's, at the CPU address passed in mmap_offset
        // (kfd_ioctl_alloc_memory_of_gpu); its GPU address may differ (a ROCm 6.x thunk picks
        // one in its own aperture).
        let userptr_host = if kind == MemKind::Userptr { a.mmap_offset } else { 0 };
        tracing::debug!(
            ?kind,
            va = format_args!("{:#x}", a.va_addr),
            size = format_args!("{:#x}", a.size),
            host = format_args!("{userptr_host:#x}"),
            handle = format_args!("{handle:#x}"),
            "xhsa-emu: KFD buffer allocated"
        );
        self.memory.insert(Range {
            host: userptr_host,
            start: a.va_addr,
            size: a.size,
            kind,
            node,
            flags: 0,
            mapped_nodes: Vec::new(),
            user_data: 0,
            handle,
        });
        a.handle = handle;
        a.mmap_offset = a.va_addr;
        Ok(())
    }

    /// A new buffer handle for a GPU (KFD's IDR handle with the gpu_id in the top half).
    pub fn next_handle(&self, gpu_id: u32) -> u64 {
        u64::from(self.next_handle.fetch_add(1, Ordering::Relaxed)) | u64::from(gpu_id) << 32
    }

    /// A range the thunk reserves without a KFD buffer (the scratch aperture): known for
    /// pointer queries, never accessible to the device.
    pub fn reserve(&self, start: u64, size: u64, node: u32, hsa_flags: u32) {
        self.memory.insert(Range {
            host: 0,
            start,
            size,
            kind: MemKind::Reserved,
            node,
            flags: hsa_flags,
            mapped_nodes: Vec::new(),
            user_data: 0,
            handle: 0,
        });
    }

    /// A KFD buffer that is address space only for the device model (a doorbell or MMIO-remap
    /// buffer): it has a handle, can be mapped to GPUs and freed, and is never device memory.
    pub fn reserve_buffer(&self, start: u64, size: u64, gpu_id: u32) -> Result<u64, Errno> {
        let gi = self.gpu_index(gpu_id)?;
        let handle = self.next_handle(gpu_id);
        self.memory.insert(Range {
            host: 0,
            start,
            size,
            kind: MemKind::Reserved,
            node: gi as u32 + 1,
            flags: 0,
            mapped_nodes: Vec::new(),
            user_data: 0,
            handle,
        });
        Ok(handle)
    }

    /// AMDKFD_IOC_FREE_MEMORY_OF_GPU: frees the buffer `handle` names (see [`Kfd::free_memory`]).
    pub fn free_memory_handle(&self, handle: u64) -> Result<Range, Errno> {
        let r = self.memory.find_handle(handle).ok_or(libc::EINVAL)?;
        self.free_memory(r.start).ok_or(libc::EINVAL)
    }

    /// AMDKFD_IOC_MAP_MEMORY_TO_GPU / UNMAP_MEMORY_FROM_GPU: returns how many of `gpu_ids` are
    /// now (un)mapped.
    pub fn map_memory(&self, handle: u64, gpu_ids: &[u32], map: bool) -> Result<u32, Errno> {
        let r = self.memory.find_handle(handle).ok_or(libc::EINVAL)?;
        let mut nodes = Vec::new();
        for &g in gpu_ids {
            nodes.push(self.gpu_index(g)? as u32 + 1);
        }
        self.memory.update(r.start, |r| {
            for n in &nodes {
                if map && !r.mapped_nodes.contains(n) {
                    r.mapped_nodes.push(*n);
                } else if !map {
                    r.mapped_nodes.retain(|m| m != n);
                }
            }
        });
        Ok(gpu_ids.len() as u32)
    }

    /// A GPU mapping made through the render node (DRM_AMDGPU_GEM_VA of a buffer imported from a
    /// DMA-buf, as ROCr's virtual-memory API does): `[va, va + size)` becomes device memory of
    /// GPU `gpu_id`, mapped to it, for the device model's accesses.
    pub fn map_gem(&self, va: u64, size: u64, gpu_id: u32) -> Result<(), Errno> {
        let node = self.gpu_index(gpu_id)? as u32 + 1;
        if va == 0 || size == 0 {
            return Err(libc::EINVAL);
        }
        let handle = self.next_handle(gpu_id);
        self.memory.insert(Range {
            host: 0,
            start: va,
            size,
            kind: MemKind::Vram,
            node,
            flags: 0,
            mapped_nodes: vec![node],
            user_data: 0,
            handle,
        });
        Ok(())
    }

    /// AMDKFD_IOC_IMPORT_DMABUF of a buffer placed at `va` (the thunk's choice): `[va, va +
    /// size)` becomes device memory of GPU `gpu_id` (not mapped to it until MAP_MEMORY_TO_GPU)
    /// under a new handle, as `kfd_ioctl_import_dmabuf` gives one. `va` 0: a handle only (the
    /// buffer is mapped later through the render node).
    pub fn import_buffer(&self, va: u64, size: u64, gpu_id: u32) -> Result<u64, Errno> {
        let node = self.gpu_index(gpu_id)? as u32 + 1;
        if size == 0 {
            return Err(libc::EINVAL);
        }
        let handle = self.next_handle(gpu_id);
        if va != 0 {
            self.memory.insert(Range {
                host: 0,
                start: va,
                size,
                kind: MemKind::Imported,
                node,
                flags: 0,
                mapped_nodes: Vec::new(),
                user_data: 0,
                handle,
            });
        }
        Ok(handle)
    }

    /// AMDKFD_IOC_FREE_MEMORY_OF_GPU (and userptr deregistration), by address. Returns once no
    /// device thread can still be touching the range, so the caller may unmap it: device
    /// accesses check the memory table inside a CP run, and each CP lock is taken once here.
    pub fn free_memory(&self, va: u64) -> Option<Range> {
        let r = self.memory.remove(va)?;
        tracing::debug!(
            kind = ?r.kind,
            va = format_args!("{:#x}", r.start),
            size = format_args!("{:#x}", r.size),
            handle = format_args!("{:#x}", r.handle),
            "xhsa-emu: KFD buffer freed"
        );
        for g in &self.gpus {
            drop(g.engine.cp());
        }
        Some(r)
    }

    /// Stops the device threads (CloseKFD). The shared device forgets this process's queues
    /// when its connections close. A DESTROY_QUEUE waiting for a resume fails with EINTR, a
    /// preemption timeout in progress ends.
    pub fn close(&self) {
        self.lock_state().closing = true;
        self.changed.notify_all();
        for g in &self.gpus {
            g.engine.stop();
        }
    }
}
