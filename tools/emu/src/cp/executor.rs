//! The thread that executes kernel code for one GPU: the CP hands it the dispatches at the
//! front of their queues whose code runs on the ISA interpreter ([`Executor::submit`]) and
//! completes each packet once its result is there ([`Executor::take`]); meanwhile the CP goes
//! on with other queues and the host's KFD calls (queue creation, priority, suspend) never
//! wait for a kernel's interpretation.
//!
//! Dispatches of several queues run side by side, a round of workgroup turns each in turn (see
//! [`crate::isa::Run`]), as kernels of several queues share the GPU: a kernel that waits for
//! what a kernel on another queue writes finishes. When every dispatch waits on time (its waves
//! sleep), the thread sleeps on a condition variable (woken early by new work); with nothing to
//! do it blocks. It never spins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use super::clock::Clock;
use super::signal;
use crate::isa::{IsaError, Launch, Round, Run, Services, Stats};
use crate::kfd::events::Events;
use crate::kfd::memory::{GpuView, Memory};

/// A dispatch to execute, and the kernel's name for the log.
#[derive(Clone, Debug)]
pub struct Job {
    pub launch: Launch,
    pub name: Arc<str>,
}

#[derive(Default)]
struct State {
    /// Submitted, not yet taken up by the thread.
    new: Vec<(u64, Job)>,
    /// Finished, not yet taken by the CP.
    done: HashMap<u64, Result<Stats, IsaError>>,
    /// To stop (their queue was destroyed).
    cancelled: Vec<u64>,
    /// Dispatches the thread is executing.
    running: usize,
    next_id: u64,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
    stop: AtomicBool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Executor {
    inner: Arc<Inner>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Executor {
    /// Starts the thread; `notify` wakes the device thread when a result is ready.
    pub fn start(memory: Arc<Memory>, events: Arc<Events>, clock: Clock, gpu_id: u32, notify: Box<dyn Fn() + Send>) -> Executor {
        let inner = Arc::new(Inner { state: Mutex::new(State::default()), work: Condvar::new(), stop: AtomicBool::new(false) });
        let i = inner.clone();
        let thread = std::thread::Builder::new()
            .name(format!("xhsa-emu-isa{gpu_id}"))
            .spawn(move || run(&i, &memory, &events, clock, &*notify))
            .expect("spawn the ISA interpreter thread");
        Executor { inner, thread: Mutex::new(Some(thread)) }
    }

    /// Queues a dispatch; returns the id its result will carry.
    pub fn submit(&self, job: Job) -> u64 {
        let mut st = self.inner.lock();
        st.next_id += 1;
        let id = st.next_id;
        st.new.push((id, job));
        drop(st);
        self.inner.work.notify_all();
        id
    }

    /// Stops dispatches `ids` (their queue is gone, and with it their waves): they are
    /// dropped where they stand and leave no result.
    pub fn cancel(&self, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        let mut st = self.inner.lock();
        st.new.retain(|(id, _)| !ids.contains(id));
        st.done.retain(|id, _| !ids.contains(id));
        st.cancelled.extend_from_slice(ids);
        drop(st);
        self.inner.work.notify_all();
    }

    /// How many dispatches the thread is executing.
    pub fn running(&self) -> usize {
        self.inner.lock().running
    }

    /// The result of dispatch `id`, once it has finished (taken once).
    pub fn take(&self, id: u64) -> Option<Result<Stats, IsaError>> {
        self.inner.lock().done.remove(&id)
    }

    /// Stops the thread (dispatches still running are abandoned).
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.work.notify_all();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A dispatch being executed.
struct Active<'m> {
    id: u64,
    name: Arc<str>,
    run: Run<'m>,
    started: Instant,
}

/// Drops the dispatches cancelled since the last look from `active`; returns their ids.
fn drop_cancelled(st: &mut State, active: &mut Vec<Active>) -> Vec<u64> {
    let gone = std::mem::take(&mut st.cancelled);
    if !gone.is_empty() {
        active.retain(|a| !gone.contains(&a.id));
    }
    gone
}

fn run(inner: &Inner, memory: &Arc<Memory>, events: &Events, clock: Clock, notify: &dyn Fn()) {
    let view = GpuView::new(memory);
    let accessible = |a: u64, l: u64| memory.device_accessible(a, l);
    let now = || clock.now();
    let interrupt = |partial: u32| signal::interrupt_partial(&view, events, partial, 8);
    let services = Services { clock: &now, interrupt: &interrupt };
    let mut active: Vec<Active> = Vec::new();
    let mut idle = crate::isa::dispatch::IDLE_FIRST;
    while !inner.stop.load(Ordering::Acquire) {
        // Take up new dispatches; with nothing to do, block until there is.
        let new = {
            let mut st = inner.lock();
            drop_cancelled(&mut st, &mut active);
            st.running = active.len() + st.new.len();
            while st.new.is_empty() && active.is_empty() && st.cancelled.is_empty() && !inner.stop.load(Ordering::Acquire) {
                st = inner.work.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.running = active.len() + st.new.len();
            std::mem::take(&mut st.new)
        };
        let mut finished: Vec<(u64, Result<Stats, IsaError>)> = Vec::new();
        for (id, job) in new {
            match Run::new(&job.launch, crate::isa::memory::Memory::new(&view, &accessible)) {
                Ok(run) => active.push(Active { id, name: job.name, run, started: Instant::now() }),
                Err(e) => finished.push((id, Err(e))),
            }
        }
        // A round of each.
        let mut moved = false;
        let mut k = 0;
        while k < active.len() {
            match active[k].run.round(&services) {
                Ok(Round::Moved) => {
                    moved = true;
                    k += 1;
                }
                Ok(Round::Idle) => k += 1,
                Ok(Round::Done(s)) => {
                    let a = active.swap_remove(k);
                    tracing::debug!(kernel = %a.name, workgroups = s.workgroups, waves = s.waves, instructions = s.instructions, us = a.started.elapsed().as_micros() as u64, "xhsa-emu: executed");
                    finished.push((a.id, Ok(s)));
                }
                Err(e) => {
                    let a = active.swap_remove(k);
                    finished.push((a.id, Err(e)));
                }
            }
        }
        if !finished.is_empty() {
            let mut st = inner.lock();
            let gone = drop_cancelled(&mut st, &mut active);
            st.done.extend(finished.into_iter().filter(|(id, _)| !gone.contains(id)));
            drop(st);
            notify();
            moved = true;
        }
        if moved || active.is_empty() {
            idle = crate::isa::dispatch::IDLE_FIRST;
            continue;
        }
        // Every dispatch waits on time: sleep, unless new work arrives.
        let st = inner.lock();
        if st.new.is_empty() && st.cancelled.is_empty() {
            let _ = inner.work.wait_timeout(st, idle).unwrap_or_else(|p| p.into_inner());
        }
        idle = (idle * 2).min(crate::isa::dispatch::IDLE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    use super::*;
    use crate::isa::target::Target;
    use crate::kernels::Dispatch;
    use crate::kfd::memory::{MemKind, Range};

    /// A kernel (descriptor, then `code` 256 bytes on) in host memory the KFD table maps;
    /// returns the buffer (keep it alive) and the kernel object's address.
    fn kernel(memory: &Memory, code: u64) -> (Vec<u64>, u64) {
        let mut buf = vec![0u64; 64];
        buf[2] = 256; // kernel_code_entry_byte_offset
        buf[32] = code;
        let base = buf.as_ptr() as u64;
        memory.insert(Range { host: 0, start: base, size: 512, kind: MemKind::Vram, node: 1, flags: 0, mapped_nodes: vec![], user_data: 0, handle: base });
        (buf, base)
    }

    fn job(ko: u64) -> Job {
        let dispatch = Dispatch { kernel_object: ko, grid: [64, 1, 1], wg: [64, 1, 1], kernarg: 0, group_segment: 0, private_segment: 0 };
        let launch = Launch { dispatch, packet: 0, queue: 0, dispatch_id: 1, cus: 1, lds_per_cu: 65536, target: Target::Gfx90a };
        Job { launch, name: "test".into() }
    }

    fn until(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < Duration::from_secs(5), "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn results_come_back_with_a_wake_up_and_cancelled_dispatches_stop() {
        let memory = Arc::new(Memory::default());
        let (_end, ends) = kernel(&memory, 0xbf81_0000); // s_endpgm
        let (_spin, spins) = kernel(&memory, 0xbf82_ffff); // s_branch -1: never ends
        let woken = Arc::new(AtomicU32::new(0));
        let w = woken.clone();
        let ex = Executor::start(memory, Arc::new(Events::default()), Clock::new(1.0), 9, Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        let done = ex.submit(job(ends));
        until("the ending kernel's result", || woken.load(Ordering::Relaxed) > 0);
        let stats = ex.take(done).expect("a result").expect("no error");
        assert_eq!((stats.workgroups, stats.waves), (1, 1));
        assert!(ex.take(done).is_none(), "taken once");
        // A kernel that never ends runs (giving its turn up each quantum) until cancelled.
        let spin = ex.submit(job(spins));
        until("the spinning kernel running", || ex.running() == 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(ex.take(spin).is_none());
        ex.cancel(&[spin]);
        until("the cancelled kernel gone", || ex.running() == 0);
        assert!(ex.take(spin).is_none(), "a cancelled dispatch leaves no result");
        // The thread still serves new work.
        let again = ex.submit(job(ends));
        until("the next result", || ex.take(again).is_some());
        ex.stop();
    }
}
