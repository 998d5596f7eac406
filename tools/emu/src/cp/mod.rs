//! The command processor: fetches packets from the process's AQL (and SDMA) queues, turns
//! kernels into HWS jobs, and completes packets in queue order when the device model says
//! their work is done: the memory effect (CPU model, or the kernel's code on the ISA
//! interpreter), profiling timestamps, signal decrement, interrupt.
//!
//! [`Cp`] is the state machine, driven with device time by [`engine::Engine`]'s thread; it
//! touches memory only through [`DeviceMemory`] and KFD state through [`Env`], so it is tested
//! with fakes.

pub mod aql;
pub mod clock;
pub mod engine;
pub mod executor;
pub mod resolve;
pub mod sdma;
pub mod signal;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use xhsa_ioctl::abi::event::{HsaMemoryExceptionData, MemoryExceptionFailure};

use crate::config::Config;
use crate::device::{CuPool, Hws, KernelJob, QueueKey, Scheduler, WgNeed};
use crate::isa::target::Target;
use crate::isa::IsaError;
use crate::kfd::events::Events;
use crate::kfd::memory::Memory;
use crate::sys::devmem::DeviceMemory;
use aql::{AqlQueue, Blocked, InFlight, Packet};
use resolve::Resolver;
use sdma::SdmaQueue;

/// What the CP works on besides its own state.
pub struct Env<'a> {
    pub mem: &'a dyn DeviceMemory,
    pub events: &'a Events,
    pub memory: &'a Memory,
    /// KFD's id of this GPU, reported in memory faults.
    pub gpu_id: u32,
    /// Device time now (read again for packets that arrive while the CP runs).
    pub clock: &'a dyn Fn() -> u64,
    /// Host clock at a device time, for the timestamps the host reads.
    pub to_host: &'a dyn Fn(u64) -> u64,
    /// The thread that executes kernel code; without one (tests) the CP executes it itself.
    pub executor: Option<&'a executor::Executor>,
}

/// First re-check of an unsatisfied barrier, and the longest interval between re-checks
/// (device ns). Completions on this device re-check at once; this only bounds how late a
/// dependency satisfied from the host is noticed.
const POLL_FIRST_NS: u64 = 20_000;
const POLL_MAX_NS: u64 = 2_000_000;

pub struct Cp {
    cfg: Arc<Config>,
    pub hws: Box<dyn Scheduler>,
    aql: BTreeMap<QueueKey, AqlQueue>,
    sdma: BTreeMap<QueueKey, SdmaQueue>,
    resolver: Resolver,
    next_tag: u64,
    /// The ISA the device reports.
    target: Target,
}

impl Cp {
    /// A CP with its own device model (one process owns the device).
    pub fn new(cfg: Arc<Config>, r_debug: Option<u64>) -> Self {
        let d = &cfg.device;
        let pool = CuPool::new(d.cus() as usize, d.waves_per_cu(), d.lds_kib * 1024);
        let hws = Hws::new(pool).with_capacity(cfg.timing.capacity());
        Self::with_scheduler(cfg, r_debug, Box::new(hws))
    }

    /// A CP whose kernels run on `hws` (e.g. a device shared with other processes).
    pub fn with_scheduler(cfg: Arc<Config>, r_debug: Option<u64>, hws: Box<dyn Scheduler>) -> Self {
        Cp {
            hws,
            aql: BTreeMap::new(),
            sdma: BTreeMap::new(),
            resolver: Resolver::new(r_debug),
            next_tag: 1,
            cfg,
            target: Target::default(),
        }
    }

    /// The ISA the device reports: kernel code the loader's list does not name executes as it.
    pub fn with_target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// An AQL queue: its ring, the address of its read index (in its `amd_queue_t`) and of its
    /// doorbell. The packet processor fetches what the doorbell announced, as the CP does
    /// (not up to the write index: a missing ring leaves packets unseen until the queue is
    /// mapped again).
    pub fn add_aql(
        &mut self,
        key: QueueKey,
        ring: u64,
        ring_bytes: u64,
        read_ptr: u64,
        doorbell: u64,
        priority: u8,
    ) {
        self.aql.insert(key, AqlQueue::new(key, ring, ring_bytes, read_ptr, doorbell));
        self.hws.add_queue(key, priority);
    }

    pub fn add_sdma(&mut self, key: QueueKey, q: SdmaQueue) {
        self.sdma.insert(key, q);
    }

    /// Removes a queue; returns the executor jobs of its kernels still executing (the caller
    /// cancels them: a destroyed queue's waves are gone).
    pub fn remove(&mut self, key: QueueKey) -> Vec<u64> {
        let running = self.aql.remove(&key).map_or_else(Vec::new, |q| {
            q.inflight
                .iter()
                .filter_map(|f| if let aql::Exec::Running(id) = f.exec { Some(id) } else { None })
                .collect()
        });
        self.sdma.remove(&key);
        self.hws.remove_queue(key);
        running
    }

    /// Whether the queue holds the GPU's GWS (ALLOC_QUEUE_GWS): its dispatches may grid-sync,
    /// so each runs whole on one interpreter thread.
    pub fn set_gws(&mut self, key: QueueKey, gws: bool) {
        if let Some(q) = self.aql.get_mut(&key) {
            q.gws = gws;
        }
    }

    pub fn set_runnable(&mut self, key: QueueKey, runnable: bool) {
        if let Some(q) = self.aql.get_mut(&key) {
            // Mapped again: the CP reads the write index from memory.
            q.remapped |= runnable && !q.runnable;
            q.runnable = runnable;
        }
        if let Some(q) = self.sdma.get_mut(&key) {
            q.runnable = runnable;
        }
        self.hws.set_runnable(key, runnable);
    }

    /// Whether the queue stopped on an error.
    pub fn failed(&self, key: QueueKey) -> bool {
        self.aql.get(&key).is_some_and(|q| q.failed)
    }

    /// Does all work due at device time `now`; returns when the CP next needs to run if no
    /// doorbell rings before (None: only a doorbell can give it work).
    pub fn run(&mut self, env: &Env, now: u64) -> Option<u64> {
        // Packets published by now may start at the time their predecessor ended; later ones
        // cannot start before they are seen.
        for q in self.aql.values_mut() {
            if q.runnable && env.memory.device_accessible(q.amd_queue + aql::WRITE_DISPATCH_ID, 8) {
                q.visible = q.fetch_limit(env.mem);
            }
        }
        // Kernels the executor was running: complete those that finished.
        let executing: Vec<QueueKey> = self
            .aql
            .iter()
            .filter(|(_, q)| {
                q.inflight.front().is_some_and(|f| matches!(f.exec, aql::Exec::Running(_)))
            })
            .map(|(k, _)| *k)
            .collect();
        for k in executing {
            self.retire(k, env, now);
        }
        loop {
            let mut progress = false;
            let keys: Vec<QueueKey> = self.aql.keys().copied().collect();
            for &k in &keys {
                progress |= self.fetch(k, env, now);
            }
            progress |= sdma::run_all(&mut self.sdma, env, &self.cfg, now);
            while let Some((t, done)) = self.hws.step(now) {
                let mut touched = Vec::new();
                for c in done {
                    if let Some(q) = self.aql.get_mut(&c.queue) {
                        if let Some(f) = q.inflight.iter_mut().find(|f| f.tag == Some(c.tag)) {
                            f.start = c.start_ns;
                            f.end = Some(c.end_ns);
                        }
                        touched.push(c.queue);
                    }
                }
                touched.dedup();
                for k in touched {
                    self.retire(k, env, t);
                    self.fetch(k, env, t);
                }
                // A completion may satisfy another queue's barrier: re-check those now.
                let waiting: Vec<QueueKey> = self
                    .aql
                    .iter()
                    .filter(|(_, q)| matches!(q.blocked, Some(Blocked::Dependencies { .. })))
                    .map(|(k, _)| *k)
                    .collect();
                for k in waiting {
                    if let Some(Blocked::Dependencies { poll_at, .. }) =
                        self.aql.get_mut(&k).and_then(|q| q.blocked.as_mut())
                    {
                        *poll_at = t;
                    }
                    self.fetch(k, env, t);
                }
                progress = true;
            }
            self.hws.sync(now);
            if !progress {
                break;
            }
        }
        let polls = self.aql.values().filter_map(|q| match q.blocked {
            Some(Blocked::Dependencies { poll_at, .. }) if q.runnable && !q.failed => Some(poll_at),
            _ => None,
        });
        let sdma_next = self.sdma.values().filter_map(|q| q.wake_at());
        self.hws.next_event().into_iter().chain(polls).chain(sdma_next).min()
    }

    /// Fetches the queue's ready packets at device time `t`.
    fn fetch(&mut self, key: QueueKey, env: &Env, t: u64) -> bool {
        let lds = self.cfg.device.lds_kib * 1024;
        let wave = self.cfg.device.wave_size;
        let mut progress = false;
        loop {
            let Some(q) = self.aql.get_mut(&key) else { return progress };
            if !q.runnable || q.failed {
                return progress;
            }
            match q.blocked {
                Some(Blocked::BarrierBit) if !q.inflight.is_empty() => return progress,
                Some(Blocked::Dependencies { poll_at, .. }) if t < poll_at => return progress,
                _ => {}
            }
            if !env.memory.device_accessible(q.amd_queue, 256) {
                let at = q.amd_queue;
                self.fail(key, env, aql::error::MEMORY_VIOLATION, at);
                return progress;
            }
            // A slot holds a new packet only once the packet `slots` ids before it completed
            // (its header is invalidated then): when the ring wraps while that one is still in
            // flight, the write index may already count an id whose slot still holds the old,
            // valid packet. Never fetch past the completed ids plus one ring.
            let completed = env.mem.load_u64(q.amd_queue + aql::READ_DISPATCH_ID);
            let write = q.fetch_limit(env.mem).min(completed.saturating_add(q.slots));
            if q.read >= write {
                q.blocked = None;
                return progress;
            }
            // A packet that was not there when this run began is seen now, not in the past.
            let t = if q.read >= q.visible { t.max((env.clock)()) } else { t };
            let slot = q.slot_addr(q.read);
            if !env.memory.device_accessible(slot, 64) {
                self.fail(key, env, aql::error::MEMORY_VIOLATION, slot);
                return progress;
            }
            let mut p = [0u8; 64];
            env.mem.read(slot, &mut p);
            if p[0] == aql::TYPE_INVALID {
                return progress;
            }
            let d = match aql::decode(&p, lds) {
                Ok(d) => d,
                Err(code) => {
                    self.fail(key, env, code, slot);
                    return progress;
                }
            };
            if d.barrier_bit && !q.inflight.is_empty() {
                q.blocked = Some(Blocked::BarrierBit);
                return progress;
            }
            let id = q.read;
            let entry = match d.packet {
                Packet::Kernel(k) => {
                    let r = self.resolver.resolve(env.mem, env.memory, k.kernel_object);
                    let timing = resolve::with_ctx(
                        &k,
                        env.mem,
                        env.memory,
                        |ctx| -> Result<_, crate::kernels::Fault> {
                            Ok((
                                resolve::wg_ns(&self.cfg, &r, ctx)?,
                                resolve::profile(&self.cfg, &r, ctx)?,
                            ))
                        },
                    );
                    let (wg_ns, profile) = match timing {
                        Ok(t) => t,
                        Err(f) => {
                            self.memory_fault(key, env, f.addr, f.write);
                            return progress;
                        }
                    };
                    tracing::trace!(kernel = %r.name, grid = ?k.grid, wg = ?k.wg, wg_ns, "xhsa-emu: dispatch");
                    let tag = self.next_tag;
                    self.next_tag += 1;
                    let job = KernelJob {
                        tag,
                        workgroups: k.workgroups(),
                        need: WgNeed::new(k.work_items_per_wg(), wave, k.group_segment),
                        wg_ns,
                        profile,
                    };
                    self.hws.submit(key, job, t);
                    InFlight {
                        id,
                        tag: Some(tag),
                        completion_signal: d.completion_signal,
                        start: t,
                        end: None,
                        kernel: Some((k, r)),
                        exec: aql::Exec::NotStarted,
                    }
                }
                Packet::Barrier { ref deps, any } => {
                    let mut zero = Vec::new();
                    for &s in deps {
                        if !env.memory.device_accessible(s, signal::SIZE) {
                            self.memory_fault(key, env, s, false);
                            return progress;
                        }
                        zero.push(signal::value(env.mem, s) == 0);
                    }
                    let ok = if any {
                        zero.is_empty() || zero.iter().any(|&z| z)
                    } else {
                        zero.iter().all(|&z| z)
                    };
                    if !ok {
                        self.block_on_dependencies(key, t);
                        return progress;
                    }
                    InFlight {
                        id,
                        tag: None,
                        completion_signal: d.completion_signal,
                        start: t,
                        end: Some(t),
                        kernel: None,
                        exec: aql::Exec::NotStarted,
                    }
                }
                Packet::BarrierValue { signal: s, value, mask, cond } => {
                    if s != 0 {
                        if !env.memory.device_accessible(s, signal::SIZE) {
                            self.memory_fault(key, env, s, false);
                            return progress;
                        }
                        if !aql::condition_holds(signal::value(env.mem, s), value, mask, cond) {
                            self.block_on_dependencies(key, t);
                            return progress;
                        }
                    }
                    InFlight {
                        id,
                        tag: None,
                        completion_signal: d.completion_signal,
                        start: t,
                        end: Some(t),
                        kernel: None,
                        exec: aql::Exec::NotStarted,
                    }
                }
                Packet::Pm4 => InFlight {
                    id,
                    tag: None,
                    completion_signal: d.completion_signal,
                    start: t,
                    end: Some(t),
                    kernel: None,
                    exec: aql::Exec::NotStarted,
                },
            };
            let q = self.aql.get_mut(&key).expect("queue exists");
            q.blocked = None;
            q.read += 1;
            q.packets += 1;
            q.inflight.push_back(entry);
            progress = true;
            self.retire(key, env, t);
        }
    }

    fn block_on_dependencies(&mut self, key: QueueKey, t: u64) {
        if let Some(q) = self.aql.get_mut(&key) {
            let backoff = match q.blocked {
                Some(Blocked::Dependencies { backoff, .. }) => (backoff * 2).min(POLL_MAX_NS),
                _ => POLL_FIRST_NS,
            };
            q.blocked = Some(Blocked::Dependencies { poll_at: t + backoff, backoff });
        }
    }

    /// Completes the finished packets at the front of the queue, in order.
    fn retire(&mut self, key: QueueKey, env: &Env, t: u64) {
        loop {
            let Some(q) = self.aql.get_mut(&key) else { return };
            let Some(front) = q.inflight.front() else { return };
            let Some(end) = front.end else { return };
            let executes =
                front.kernel.as_ref().is_some_and(|(_, r)| resolve::interprets(&self.cfg, r));
            if let (true, Some(ex)) = (executes, env.executor) {
                // The kernel's code runs on the executor's thread; the packet completes (and
                // the ones after it) once that has finished.
                let (amd_queue, gws) = (q.amd_queue, q.gws);
                let slot = q.slot_addr(front.id);
                let front = q.inflight.front_mut().expect("front exists");
                match &front.exec {
                    aql::Exec::NotStarted => {
                        let (k, r) = front.kernel.as_ref().expect("a kernel");
                        let job = job(&self.cfg, self.target, k, r, slot, amd_queue, front.id, gws);
                        front.exec = aql::Exec::Running(ex.submit(job));
                        return;
                    }
                    aql::Exec::Running(id) => match ex.take(*id) {
                        Some(res) => front.exec = aql::Exec::Done(res),
                        None => return,
                    },
                    aql::Exec::Done(_) => {}
                }
            }
            let f = q.inflight.pop_front().expect("front exists");
            let end = end.max(q.last_end).min(t.max(end));
            q.last_end = end;
            let profiling = env.memory.device_accessible(q.amd_queue + aql::QUEUE_PROPERTIES, 4)
                && env.mem.read_u32(q.amd_queue + aql::QUEUE_PROPERTIES) & aql::PROFILING != 0;
            let amd_queue = q.amd_queue;
            let slot = q.slot_addr(f.id);
            if let Some((k, r)) = &f.kernel {
                if executes {
                    let res = if let aql::Exec::Done(res) = f.exec {
                        res
                    } else {
                        let job = job(&self.cfg, self.target, k, r, slot, amd_queue, f.id, true);
                        let interrupt = |partial: u32| {
                            signal::interrupt_partial(env.mem, env.events, partial, 8)
                        };
                        let services =
                            crate::isa::Services { clock: env.clock, interrupt: &interrupt };
                        resolve::execute(&job.launch, r, env.mem, env.memory, &services)
                    };
                    match res {
                        Ok(_) => {}
                        Err(IsaError::Fault(fault)) => {
                            self.memory_fault(key, env, fault.addr, fault.write);
                            return;
                        }
                        Err(e) => {
                            // As a wave's illegal instruction: the queue stops with the error
                            // code ROCr reports as HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION.
                            tracing::error!(kernel = %r.name, "xhsa-emu: {e}");
                            let pc = match e {
                                IsaError::Unimplemented { pc, .. }
                                | IsaError::Decode { pc, .. }
                                | IsaError::Illegal { pc, .. } => pc,
                                IsaError::Fault(f) => f.addr,
                            };
                            self.fail(key, env, aql::error::ILLEGAL_INSTRUCTION, pc);
                            return;
                        }
                    }
                } else if let Err(fault) =
                    resolve::with_ctx(k, env.mem, env.memory, |ctx| resolve::run(r, ctx))
                {
                    self.memory_fault(key, env, fault.addr, fault.write);
                    return;
                }
            }
            if f.completion_signal != 0 {
                if !env.memory.device_accessible(f.completion_signal, signal::SIZE) {
                    self.memory_fault(key, env, f.completion_signal, true);
                    return;
                }
                let start = f.start.min(end);
                let stamps = profiling.then(|| ((env.to_host)(start), (env.to_host)(end)));
                signal::complete(env.mem, env.events, f.completion_signal, stamps);
            }
            // The slot is free again: invalidate its header, then publish the read index.
            let header = env.mem.read_u32(slot) as u16;
            env.mem.store_u16(slot, (header & 0xff00) | u16::from(aql::TYPE_INVALID));
            env.mem.store_u64(amd_queue + aql::READ_DISPATCH_ID, f.id + 1);
        }
    }

    /// Stops a queue with an error code in its `queue_inactive_signal`, as the CP does.
    fn fail(&mut self, key: QueueKey, env: &Env, code: i64, at: u64) {
        let Some(q) = self.aql.get_mut(&key) else { return };
        q.failed = true;
        tracing::warn!(queue = key, code, addr = format_args!("{at:#x}"), "xhsa-emu: queue error");
        if env.memory.device_accessible(q.amd_queue + aql::QUEUE_INACTIVE_SIGNAL, 8) {
            let sig = env.mem.load_u64(q.amd_queue + aql::QUEUE_INACTIVE_SIGNAL);
            if sig != 0 && env.memory.device_accessible(sig, signal::SIZE) {
                signal::store(env.mem, env.events, sig, code);
            }
        }
    }

    /// A device access to unmapped memory: the queue stops and KFD's memory-fault event fires.
    fn memory_fault(&mut self, key: QueueKey, env: &Env, addr: u64, write: bool) {
        if let Some(q) = self.aql.get_mut(&key) {
            q.failed = true;
        }
        tracing::warn!(
            queue = key,
            addr = format_args!("{addr:#x}"),
            write,
            "xhsa-emu: GPU memory fault"
        );
        let data = HsaMemoryExceptionData {
            failure: MemoryExceptionFailure {
                not_present: 1,
                read_only: 0,
                no_execute: 0,
                imprecise: 0,
            },
            va: addr,
            gpu_id: env.gpu_id,
            ..Default::default()
        };
        env.events.memory_fault(data);
    }
}

/// What the interpreter needs to execute kernel `k` (`r`) whose packet is at `slot` in the
/// queue whose `amd_queue_t` is at `amd_queue`.
#[allow(clippy::too_many_arguments)]
fn job(
    cfg: &Config,
    device: Target,
    k: &crate::kernels::Dispatch,
    r: &resolve::Resolved,
    slot: u64,
    amd_queue: u64,
    id: u64,
    gws: bool,
) -> executor::Job {
    let launch = crate::isa::Launch {
        dispatch: k.clone(),
        packet: slot,
        queue: amd_queue,
        dispatch_id: id,
        cus: cfg.device.cus(),
        lds_per_cu: cfg.device.lds_kib * 1024,
        target: resolve::target(r, device).unwrap_or(device),
    };
    executor::Job { launch, name: r.name.clone(), whole: gws }
}
