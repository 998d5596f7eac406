//! The device thread of one GPU: runs the [`Cp`] whenever a doorbell traps, the host pokes it,
//! or device time reaches the next completion; otherwise it sleeps on a futex. An idle device
//! costs no CPU.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::clock::Clock;
use super::executor::Executor;
use super::{Cp, Env};
use crate::kfd::events::Events;
use crate::kfd::memory::GpuView;
use crate::kfd::memory::Memory;
use crate::sys::doorbell::TrappedArea;
use crate::sys::futex;

pub struct Shared {
    pub cp: Mutex<Cp>,
    /// Bumped by every doorbell trap and host notification.
    pub wake: &'static AtomicU32,
    pub clock: Clock,
    pub events: Arc<Events>,
    pub memory: Arc<Memory>,
    pub gpu_id: u32,
    stop: AtomicBool,
    doorbells: Mutex<Vec<Arc<TrappedArea>>>,
    /// Executes kernel code off this thread (and off the CP's lock).
    executor: Executor,
}

/// A running device thread.
pub struct Engine {
    pub shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Engine {
    pub fn start(
        cp: Cp,
        workers: usize,
        clock: Clock,
        events: Arc<Events>,
        memory: Arc<Memory>,
        gpu_id: u32,
        wake: &'static AtomicU32,
    ) -> Engine {
        let notify = move || {
            wake.fetch_add(1, Ordering::Release);
            futex::wake_all(wake);
        };
        let executor = Executor::with_workers(
            workers,
            memory.clone(),
            events.clone(),
            clock,
            gpu_id,
            Box::new(notify),
        );
        let shared = Arc::new(Shared {
            cp: Mutex::new(cp),
            wake,
            clock,
            events,
            memory,
            gpu_id,
            stop: AtomicBool::new(false),
            doorbells: Mutex::new(Vec::new()),
            executor,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("xhsa-emu-gpu{gpu_id}"))
            .spawn(move || run(&s))
            .expect("spawn the emulated device thread");
        Engine { shared, thread: Mutex::new(Some(thread)) }
    }

    /// Registers a doorbell area the thread arms before it sleeps (the GPU's doorbell pages, or
    /// another mapping of them: a ROCm 6.x thunk maps them where it chose).
    pub fn set_doorbells(&self, area: Arc<TrappedArea>) {
        self.shared.doorbells.lock().unwrap_or_else(|p| p.into_inner()).push(area);
        self.notify();
    }

    /// Stops arming the doorbell areas inside `[start, start + len)` (about to be unmapped).
    pub fn remove_doorbells(&self, start: usize, len: usize) -> Vec<Arc<TrappedArea>> {
        let mut v = self.shared.doorbells.lock().unwrap_or_else(|p| p.into_inner());
        let (gone, keep): (Vec<_>, Vec<_>) = v.drain(..).partition(|a| {
            let (s, l) = a.range();
            s < start + len && start < s + l
        });
        *v = keep;
        gone
    }

    /// Locks the CP (queue creation, priority, masks); the thread re-runs afterwards.
    pub fn cp(&self) -> MutexGuard<'_, Cp> {
        self.shared.cp.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes a queue from the CP and stops its kernels that are executing.
    pub fn remove_queue(&self, key: super::super::device::QueueKey) {
        let running = self.cp().remove(key);
        self.shared.executor.cancel(&running);
    }

    /// Wakes the device thread.
    pub fn notify(&self) {
        self.shared.wake.fetch_add(1, Ordering::Release);
        futex::wake_all(self.shared.wake);
    }

    pub fn stop(&self) {
        self.shared.executor.stop();
        self.shared.stop.store(true, Ordering::Release);
        self.notify();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

fn run(s: &Shared) {
    // Timed sleeps overshoot by ~50 µs with the default slack; 1 ns slack narrows that.
    crate::sys::process::finest_timer_slack();
    // Device addresses: host addresses, except in userptr ranges a ROCm 6.x thunk placed elsewhere.
    let mem = GpuView::new(&s.memory);
    let clock = || s.clock.now();
    let to_host = |t| s.clock.to_host(t);
    let env = Env {
        mem: &mem,
        events: &s.events,
        memory: &s.memory,
        gpu_id: s.gpu_id,
        clock: &clock,
        to_host: &to_host,
        executor: Some(&s.executor),
    };
    let run_cp = || s.cp.lock().unwrap_or_else(|p| p.into_inner()).run(&env, s.clock.now());
    while !s.stop.load(Ordering::Acquire) {
        let seen = s.wake.load(Ordering::Acquire);
        // First a look at the queues with the doorbells still unarmed: a doorbell store that
        // trapped and woke this thread completes when its trap handler returns, and the CP
        // obeys doorbell values; arming first would make that store trap again and be read
        // one round trip late (tried: doorbell-to-start ~9 -> ~90 us).
        run_cp();
        // Then arm, and look again: a store before the arm is seen by this run, one after it
        // traps and bumps `wake`.
        // Under the list's lock: an area the thunk is about to unmap is taken off the list
        // first (`remove_doorbells`, under the same lock), so it is never armed after its
        // pages are gone (mprotect would fail with ENOMEM).
        {
            let areas = s.doorbells.lock().unwrap_or_else(|p| p.into_inner());
            for a in areas.iter() {
                if let Err(e) = a.arm() {
                    tracing::error!("xhsa-emu: {e}");
                }
            }
        }
        let next = run_cp();
        let timeout = next.map(|t| s.clock.until(t));
        if timeout.is_some_and(|d| d.is_zero()) {
            continue;
        }
        futex::wait(s.wake, seen, timeout);
    }
}
