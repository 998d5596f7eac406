//! The emulated KFD of one process: its GPUs, queues, events and memory, with the semantics of
//! amdkfd's ioctls. Each operation takes and fills the uapi argument struct of its ioctl
//! (`xhsa_ioctl::abi`), so the thunk layer above speaks KFD uapi exactly as the real thunk
//! does; errors are the errno KFD returns.

pub mod events;
pub mod memory;
pub mod topology;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use xhsa_ioctl::abi::event::{CreateEventArgs, WaitEventsArgs, KFD_IOC_EVENT_SIGNAL};
use xhsa_ioctl::abi::memory::{AllocMemoryOfGpuArgs, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, KFD_IOC_ALLOC_MEM_FLAGS_VRAM};
use xhsa_ioctl::abi::process::GetClockCountersArgs;
use xhsa_ioctl::abi::queue::{
    CreateQueueArgs, UpdateQueueArgs, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_SDMA_XGMI, KFD_MAX_QUEUE_PERCENTAGE,
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
use memory::{MemKind, Memory, Range};

/// The uapi version this KFD reports.
pub const VERSION: (u32, u32) = (1, 17);
/// Doorbells per GPU per process (8 bytes each: two pages), as on gfx9.
pub const DOORBELLS: usize = 1024;
/// `KFD_MMAP_TYPE_DOORBELL` in the mmap offsets KFD hands out.
pub const MMAP_TYPE_DOORBELL: u64 = 3 << 62;

/// An errno KFD would return.
pub type Errno = i32;

struct Gpu {
    gpu_id: u32,
    engine: Engine,
    conn: Arc<Connection>,
    doorbells: u64,
    _area: Arc<TrappedArea>,
}

#[derive(Clone, Copy, Debug)]
struct QueueRec {
    gpu: usize,
    /// The device-wide key of the queue on the shared device.
    key: QueueKey,
    slot: usize,
}

/// The KFD state of this process.
pub struct Kfd {
    pub cfg: Arc<Config>,
    pub events: Arc<Events>,
    pub memory: Arc<Memory>,
    pub clock: Clock,
    gpus: Vec<Gpu>,
    queues: Mutex<HashMap<u32, QueueRec>>,
    slots: Mutex<Vec<Vec<bool>>>,
    next_queue: AtomicU32,
    next_handle: AtomicU32,
    runtime_enabled: AtomicBool,
    debug_trap_enabled: AtomicBool,
}

impl Kfd {
    /// Opens the emulated KFD of this process: connects to (or starts) the shared device and
    /// runs a packet processor per GPU, with its doorbell area. `r_debug` is the address of
    /// ROCr's `_amdgpu_r_debug`, for kernel names.
    pub fn open(cfg: Arc<Config>, gpus: u32, r_debug: Option<u64>) -> Result<Kfd, String> {
        let events = Arc::new(Events::default());
        let memory = Arc::new(Memory::default());
        let mut list = Vec::new();
        let mut clock = None;
        for g in 0..gpus {
            let gpu_id = topology::gpu_id(g);
            let conn = Arc::new(Connection::open(g).map_err(|e| format!("cannot reach the shared device: {e}"))?);
            clock = Some(conn.clock);
            let bytes = (DOORBELLS * 8) as u64;
            let doorbells = mem::map(bytes, 4096, true, true).map_err(|e| format!("cannot map doorbells: {e}"))?;
            let wake: &'static AtomicU32 = &conn.area.get().wake;
            // SAFETY: the doorbell mapping was just created, is used only for doorbells and is
            // never unmapped (it lives as long as the process's KFD state).
            let area = Arc::new(unsafe { TrappedArea::register(doorbells as *mut u8, bytes as usize, wake) }.map_err(|e| e.to_string())?);
            let cp = Cp::with_scheduler(cfg.clone(), r_debug, Box::new(RemoteScheduler::new(conn.clone())));
            let engine = Engine::start(cp, conn.clock, events.clone(), memory.clone(), gpu_id, wake);
            engine.set_doorbells(area.clone());
            list.push(Gpu { gpu_id, engine, conn, doorbells, _area: area });
        }
        Ok(Kfd {
            slots: Mutex::new(vec![vec![false; DOORBELLS]; list.len()]),
            cfg,
            events,
            memory,
            clock: clock.unwrap_or_else(|| Clock::new(1.0)),
            gpus: list,
            queues: Mutex::new(HashMap::new()),
            next_queue: AtomicU32::new(0),
            next_handle: AtomicU32::new(1),
            runtime_enabled: AtomicBool::new(false),
            debug_trap_enabled: AtomicBool::new(false),
        })
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

    /// AMDKFD_IOC_RUNTIME_ENABLE (enable only; the r_debug pointer is recorded by the caller).
    pub fn runtime_enable(&self, enable: bool) -> Result<(), Errno> {
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
        if a.queue_percentage > KFD_MAX_QUEUE_PERCENTAGE || a.queue_priority > KFD_MAX_QUEUE_PRIORITY {
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
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let cp_limit = self.cfg.device.cp_queues as usize + (self.cfg.device.sdma_engines * self.cfg.device.sdma_queues_per_engine) as usize;
        if queues.values().filter(|q| q.gpu == gi).count() >= cp_limit.max(1) {
            return Err(libc::ENOSPC);
        }
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = slots[gi].iter().position(|u| !u).ok_or(libc::ENOSPC)?;
            slots[gi][s] = true;
            s
        };
        let gpu = &self.gpus[gi];
        let reply = gpu.conn.request(&format!("CREATE gpu={gi} prio={} pct={}", a.queue_priority, a.queue_percentage));
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
        // The doorbell starts at zero, as a fresh hardware doorbell does. The page may be
        // write-protected: this store then traps like an application's, which only wakes the
        // device thread.
        HostMemory.store_u64(gpu.doorbells + 8 * slot as u64, 0);
        {
            let mut cp = gpu.engine.cp();
            if sdma {
                cp.add_sdma(key, SdmaQueue::new(a.ring_base_address, ring, a.read_pointer_address, a.write_pointer_address));
            } else {
                cp.add_aql(key, a.ring_base_address, ring, a.read_pointer_address, a.queue_priority as u8);
            }
            cp.set_runnable(key, a.queue_percentage > 0);
        }
        gpu.engine.notify();
        tracing::debug!(queue = id, key, sdma, ring = format_args!("{:#x}", a.ring_base_address), bytes = a.ring_size, priority = a.queue_priority, "xhsa-emu: queue created");
        queues.insert(id, QueueRec { gpu: gi, key, slot });
        a.queue_id = id;
        a.doorbell_offset = MMAP_TYPE_DOORBELL | (u64::from(a.gpu_id) << 32) | (8 * slot as u64);
        Ok(())
    }

    /// The host address of the doorbell a `doorbell_offset` names (what the thunk's mmap of
    /// `/dev/kfd` at that offset yields).
    pub fn doorbell_address(&self, doorbell_offset: u64) -> Option<u64> {
        let gpu_id = (doorbell_offset >> 32 & 0x3fff_ffff) as u32;
        let gi = self.gpu_index(gpu_id).ok()?;
        Some(self.gpus[gi].doorbells + (doorbell_offset & 0xffff_ffff))
    }

    /// AMDKFD_IOC_DESTROY_QUEUE.
    pub fn destroy_queue(&self, queue_id: u32) -> Result<(), Errno> {
        let rec = self.queues.lock().unwrap_or_else(|p| p.into_inner()).remove(&queue_id).ok_or(libc::EINVAL)?;
        let gpu = &self.gpus[rec.gpu];
        gpu.engine.cp().remove(rec.key);
        if let Err(r) = gpu.conn.request(&format!("DESTROY key={}", rec.key)) {
            tracing::warn!("xhsa-emu: {}", r.message);
        }
        self.slots.lock().unwrap_or_else(|p| p.into_inner())[rec.gpu][rec.slot] = false;
        Ok(())
    }

    /// AMDKFD_IOC_UPDATE_QUEUE: percentage 0 stops fetching; priority 0-15.
    pub fn update_queue(&self, a: &UpdateQueueArgs) -> Result<(), Errno> {
        if a.queue_percentage > KFD_MAX_QUEUE_PERCENTAGE || a.queue_priority > KFD_MAX_QUEUE_PRIORITY {
            return Err(libc::EINVAL);
        }
        let rec = self.queue(a.queue_id)?;
        let gpu = &self.gpus[rec.gpu];
        gpu.conn
            .request(&format!("UPDATE key={} prio={} pct={}", rec.key, a.queue_priority, a.queue_percentage))
            .map_err(|r| r.errno)?;
        gpu.engine.cp().set_runnable(rec.key, a.queue_percentage > 0);
        gpu.engine.notify();
        Ok(())
    }

    /// AMDKFD_IOC_SET_CU_MASK with the mask words already read from user memory.
    pub fn set_cu_mask(&self, queue_id: u32, num_bits: u32, words: &[u32]) -> Result<(), Errno> {
        if num_bits == 0 || !num_bits.is_multiple_of(32) {
            return Err(libc::EINVAL);
        }
        let rec = self.queue(queue_id)?;
        let gpu = &self.gpus[rec.gpu];
        let hex: Vec<String> = words.iter().map(|w| format!("{w:x}")).collect();
        gpu.conn.request(&format!("CUMASK key={} bits={num_bits} words={}", rec.key, hex.join(","))).map_err(|r| r.errno)?;
        gpu.engine.notify();
        Ok(())
    }

    fn queue(&self, id: u32) -> Result<QueueRec, Errno> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).get(&id).copied().ok_or(libc::EINVAL)
    }

    /// AMDKFD_IOC_DBG_TRAP's target check: this process itself (KFD also accepts a ptrace
    /// child, which an emulated process never is).
    fn dbg_target(&self, pid: u32) -> Result<(), Errno> {
        if pid != std::process::id() {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    /// DBG_TRAP ENABLE / DISABLE for `pid`.
    pub fn dbg_trap_enable(&self, pid: u32, enable: bool) -> Result<(), Errno> {
        self.dbg_target(pid)?;
        self.debug_trap_enabled.store(enable, Ordering::Release);
        Ok(())
    }

    /// DBG_TRAP SUSPEND_QUEUES / RESUME_QUEUES: `ids` are KFD queue ids of `pid`; each entry
    /// gets `KFD_DBG_QUEUE_INVALID_MASK` ORed in when it names no queue. Returns how many
    /// queues changed state. Every queue of the device pauses for the modelled cost.
    pub fn dbg_trap_suspend(&self, pid: u32, ids: &mut [u32], suspend: bool, grace_ns: u64) -> Result<u32, Errno> {
        self.dbg_target(pid)?;
        if !self.runtime_enabled() {
            return Err(libc::EPERM);
        }
        if !self.debug_trap_enabled.load(Ordering::Acquire) {
            return Err(libc::EINVAL);
        }
        let invalid = 1u32 << xhsa_ioctl::abi::debug::KFD_DBG_QUEUE_INVALID_BIT;
        let queues = self.queues.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut by_gpu: HashMap<usize, Vec<(usize, QueueKey)>> = HashMap::new();
        for (i, id) in ids.iter_mut().enumerate() {
            match queues.get(id) {
                Some(q) => by_gpu.entry(q.gpu).or_default().push((i, q.key)),
                None => *id |= invalid,
            }
        }
        let verb = if suspend { "SUSPEND" } else { "RESUME" };
        let mut n = 0;
        for (g, list) in by_gpu {
            let keys: Vec<String> = list.iter().map(|(_, k)| k.to_string()).collect();
            let l = self.gpus[g].conn.request(&format!("{verb} keys={} grace_ns={grace_ns}", keys.join(","))).map_err(|r| r.errno)?;
            n += l.get::<u32>("n").unwrap_or(0);
            let status: Vec<u32> = l.list("status").unwrap_or_default();
            for ((i, _), st) in list.iter().zip(status) {
                if st != 0 {
                    ids[*i] |= invalid;
                }
            }
            self.gpus[g].engine.notify();
        }
        Ok(n)
    }

    /// AMDKFD_IOC_CREATE_EVENT. On the first signal event `event_page_offset` is the handle of
    /// the buffer the thunk allocated for the event page, as with the real thunk.
    pub fn create_event(&self, a: &mut CreateEventArgs) -> Result<(), Errno> {
        if a.event_type == KFD_IOC_EVENT_SIGNAL && self.events.page().is_none() {
            let page = self.memory.find_handle(a.event_page_offset).ok_or(libc::EINVAL)?;
            self.events.set_page(page.start);
        }
        let (id, trigger, slot) = self.events.create(a.event_type, a.auto_reset != 0).map_err(|e| match e {
            events::EventError::NoSlot => libc::ENOSPC,
            _ => libc::EINVAL,
        })?;
        a.event_id = id;
        a.event_trigger_data = trigger;
        a.event_slot_index = slot;
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

    /// AMDKFD_IOC_WAIT_EVENTS over `ids`; returns the wait result and fault data.
    pub fn wait_events(&self, ids: &[u32], a: &mut WaitEventsArgs) -> Result<events::WaitOutcome, Errno> {
        let timeout = if a.timeout == u32::MAX { u32::MAX } else { a.timeout.min(0x7fff_ffff) };
        let out = self.events.wait(ids, a.wait_for_all != 0, timeout).map_err(|_| libc::EINVAL)?;
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
        if kind == MemKind::Vram && self.memory.vram_used() + a.size > self.cfg.device.vram_gib << 30 {
            return Err(libc::ENOMEM);
        }
        let handle = u64::from(self.next_handle.fetch_add(1, Ordering::Relaxed)) | u64::from(a.gpu_id) << 32;
        let node = if kind == MemKind::Vram { gi as u32 + 1 } else { 0 };
        self.memory.insert(Range { start: a.va_addr, size: a.size, kind, node, flags: 0, mapped_nodes: Vec::new(), user_data: 0, handle });
        a.handle = handle;
        a.mmap_offset = a.va_addr;
        Ok(())
    }

    /// A range the thunk reserves without a KFD buffer (the scratch aperture): known for
    /// pointer queries, never accessible to the device.
    pub fn reserve(&self, start: u64, size: u64, node: u32, hsa_flags: u32) {
        self.memory.insert(Range { start, size, kind: MemKind::Reserved, node, flags: hsa_flags, mapped_nodes: Vec::new(), user_data: 0, handle: 0 });
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

    /// AMDKFD_IOC_FREE_MEMORY_OF_GPU (and userptr deregistration), by address. Returns once no
    /// device thread can still be touching the range, so the caller may unmap it: device
    /// accesses check the memory table inside a CP run, and each CP lock is taken once here.
    pub fn free_memory(&self, va: u64) -> Option<Range> {
        let r = self.memory.remove(va)?;
        for g in &self.gpus {
            drop(g.engine.cp());
        }
        Some(r)
    }

    /// Stops the device threads (CloseKFD). The shared device forgets this process's queues
    /// when its connections close.
    pub fn close(&self) {
        for g in &self.gpus {
            g.engine.stop();
        }
    }
}
