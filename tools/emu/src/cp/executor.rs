//! The threads that execute kernel code for one GPU: the CP hands them the dispatches at the
//! front of their queues whose code runs on the ISA interpreter ([`Executor::submit`]) and
//! completes each packet once its result is there ([`Executor::take`]); meanwhile the CP goes
//! on with other queues and the host's KFD calls (queue creation, priority, suspend) never
//! wait for a kernel's interpretation.
//!
//! Any number of worker threads ([`Executor::with_workers`]; the device model starts
//! `interpreter.threads` of its configuration). A dispatch's workgroups are shared out among the workers ([`crate::isa::Run::part`]: every `n`-th workgroup each), so a
//! long kernel uses every core, as a GPU's CUs run its workgroups side by side; the result
//! comes back when every part has finished (the counts summed, the first error). A dispatch of
//! a queue that holds GWS (a cooperative launch, whose grid syncs need the whole grid in one
//! run) and a single-workgroup one run whole on the least busy worker. Global atomics are
//! atomic across the workers ([`crate::isa::memory::Memory::atomic`]).
//!
//! Each worker runs its dispatches side by side, a round of workgroup turns each in turn (see
//! [`crate::isa::Run`]), as kernels of several queues share the GPU: a kernel that waits for
//! what a kernel on another queue writes finishes. When every dispatch of a worker waits on
//! time (its waves sleep), the worker sleeps on a condition variable (woken early by new
//! work); with nothing to do it blocks. It never spins.

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

/// Worker threads per GPU at most (one per host core below that).
pub const MAX_WORKERS: usize = 4;

/// A dispatch to execute, and the kernel's name for the log.
#[derive(Clone, Debug)]
pub struct Job {
    pub launch: Launch,
    pub name: Arc<str>,
    /// Its queue holds GWS: the dispatch runs whole on one worker (see the module's doc).
    pub whole: bool,
}

/// Part `index` of `parts` of dispatch `id`.
#[derive(Clone, Debug)]
struct Part {
    id: u64,
    index: u32,
    parts: u32,
    job: Arc<Job>,
}

#[derive(Default)]
struct State {
    /// Parts submitted to each worker, not yet taken up.
    new: Vec<Vec<Part>>,
    /// Dispatches with parts still to finish: how many, and the result so far.
    pending: HashMap<u64, (u32, Result<Stats, IsaError>)>,
    /// Finished, not yet taken by the CP.
    done: HashMap<u64, Result<Stats, IsaError>>,
    /// Dispatches each worker is to stop (their queue was destroyed, or a part failed).
    cancelled: Vec<Vec<u64>>,
    /// Parts each worker is executing.
    running: Vec<usize>,
    next_id: u64,
}

impl State {
    /// The worker with the fewest parts in hand.
    fn least_busy(&self) -> usize {
        (0..self.new.len()).min_by_key(|&w| self.running[w] + self.new[w].len()).unwrap_or(0)
    }

    /// Records part of dispatch `id` finishing with `res`; returns whether the dispatch's
    /// result is now complete. A part of a dispatch no longer pending (cancelled, or another
    /// part failed) counts for nothing.
    fn finish(&mut self, id: u64, res: Result<Stats, IsaError>) -> bool {
        let Some((left, sum)) = self.pending.get_mut(&id) else { return false };
        *left -= 1;
        let failed = res.is_err();
        crate::isa::add_part(sum, res);
        if *left > 0 && !failed {
            return false;
        }
        let (_, res) = self.pending.remove(&id).expect("pending");
        if failed {
            // The other parts need not run on (or start): the dispatch has failed.
            for c in self.cancelled.iter_mut() {
                c.push(id);
            }
            for new in self.new.iter_mut() {
                new.retain(|p| p.id != id);
            }
        }
        self.done.insert(id, res);
        true
    }
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
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Executor {
    /// Starts `workers` worker threads (at least one; the device model starts
    /// `interpreter.threads` of its configuration). `notify` wakes the device thread when a
    /// result is ready.
    pub fn with_workers(
        workers: usize,
        memory: Arc<Memory>,
        events: Arc<Events>,
        clock: Clock,
        gpu_id: u32,
        notify: Box<dyn Fn() + Send + Sync>,
    ) -> Executor {
        let workers = workers.max(1);
        crate::isa::profile::install_from_env();
        crate::isa::trace_file::install_from_env();
        let state = State {
            new: vec![Vec::new(); workers],
            cancelled: vec![Vec::new(); workers],
            running: vec![0; workers],
            ..State::default()
        };
        let inner = Arc::new(Inner {
            state: Mutex::new(state),
            work: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::from(notify);
        let threads = (0..workers)
            .map(|w| {
                let (i, memory, events, notify) =
                    (inner.clone(), memory.clone(), events.clone(), notify.clone());
                std::thread::Builder::new()
                    .name(format!("xhsa-emu-isa{gpu_id}.{w}"))
                    .spawn(move || run(w, &i, &memory, &events, clock, &*notify))
                    .expect("spawn an ISA interpreter thread")
            })
            .collect();
        Executor { inner, threads: Mutex::new(threads) }
    }

    /// Queues a dispatch; returns the id its result will carry.
    pub fn submit(&self, job: Job) -> u64 {
        let mut st = self.inner.lock();
        st.next_id += 1;
        let id = st.next_id;
        let parts = parts(&job, st.new.len());
        let job = Arc::new(job);
        st.pending.insert(id, (parts, Ok(Stats::default())));
        if parts == 1 {
            let w = st.least_busy();
            st.new[w].push(Part { id, index: 0, parts, job });
        } else {
            for index in 0..parts {
                st.new[index as usize].push(Part { id, index, parts, job: job.clone() });
            }
        }
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
        for new in st.new.iter_mut() {
            new.retain(|p| !ids.contains(&p.id));
        }
        st.pending.retain(|id, _| !ids.contains(id));
        st.done.retain(|id, _| !ids.contains(id));
        for c in st.cancelled.iter_mut() {
            c.extend_from_slice(ids);
        }
        drop(st);
        self.inner.work.notify_all();
    }

    /// How many dispatch parts the workers are executing or have still to take up.
    pub fn running(&self) -> usize {
        let st = self.inner.lock();
        st.running.iter().sum::<usize>() + st.new.iter().map(Vec::len).sum::<usize>()
    }

    /// The result of dispatch `id`, once every part of it has finished (taken once).
    pub fn take(&self, id: u64) -> Option<Result<Stats, IsaError>> {
        self.inner.lock().done.remove(&id)
    }

    /// Stops the workers (dispatches still running are abandoned).
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.work.notify_all();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many parts `job` is shared out in among `workers`: one per worker, at most one per
/// workgroup; one for a `whole` job.
fn parts(job: &Job, workers: usize) -> u32 {
    if job.whole {
        1
    } else {
        job.launch.dispatch.workgroups().min(workers as u64).max(1) as u32
    }
}

/// A dispatch part being executed.
struct Active<'m> {
    part: Part,
    run: Run<'m>,
    started: Instant,
    /// The worker thread's CPU time when the part started (µs).
    cpu_started: u64,
}

/// Drops the dispatches cancelled for worker `w` since its last look from `active`.
fn drop_cancelled(st: &mut State, w: usize, active: &mut Vec<Active>) {
    let gone = std::mem::take(&mut st.cancelled[w]);
    if !gone.is_empty() {
        active.retain(|a| !gone.contains(&a.part.id));
    }
}

/// Worker `w`'s loop.
fn run(
    w: usize,
    inner: &Inner,
    memory: &Arc<Memory>,
    events: &Events,
    clock: Clock,
    notify: &dyn Fn(),
) {
    let view = GpuView::new(memory);
    let accessible = |a: u64, l: u64| memory.device_accessible(a, l);
    let now = || clock.now();
    let interrupt = |partial: u32| signal::interrupt_partial(&view, events, partial, 8);
    let services = Services { clock: &now, interrupt: &interrupt };
    let mut active: Vec<Active> = Vec::new();
    let mut idle = crate::isa::dispatch::IDLE_FIRST;
    while !inner.stop.load(Ordering::Acquire) {
        // Take up new parts; with nothing to do, block until there is.
        let new = {
            let mut st = inner.lock();
            drop_cancelled(&mut st, w, &mut active);
            st.running[w] = active.len();
            while st.new[w].is_empty()
                && active.is_empty()
                && st.cancelled[w].is_empty()
                && !inner.stop.load(Ordering::Acquire)
            {
                st = inner.work.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            let new = std::mem::take(&mut st.new[w]);
            st.running[w] = active.len() + new.len();
            new
        };
        let mut finished: Vec<(u64, Result<Stats, IsaError>)> = Vec::new();
        for part in new {
            let mem = crate::isa::memory::Memory::new(&view, &accessible);
            match Run::part(&part.job.launch, mem, part.index, part.parts) {
                Ok(run) => active.push(Active {
                    part,
                    run,
                    started: Instant::now(),
                    cpu_started: crate::cp::clock::thread_cpu_us(),
                }),
                Err(e) => finished.push((part.id, Err(e))),
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
                    tracing::debug!(kernel = %a.part.job.name, part = a.part.index, parts = a.part.parts, workgroups = s.workgroups, waves = s.waves, instructions = s.instructions, us = a.started.elapsed().as_micros() as u64, cpu_us = crate::cp::clock::thread_cpu_us().saturating_sub(a.cpu_started), "xhsa-emu: executed");
                    crate::isa::profile::report_now();
                    finished.push((a.part.id, Ok(s)));
                }
                Err(e) => {
                    let a = active.swap_remove(k);
                    finished.push((a.part.id, Err(e)));
                }
            }
        }
        if !finished.is_empty() {
            let mut st = inner.lock();
            drop_cancelled(&mut st, w, &mut active);
            let mut complete = false;
            for (id, res) in finished {
                complete |= st.finish(id, res);
            }
            st.running[w] = active.len();
            drop(st);
            if complete {
                // Parts of a failed dispatch on other workers stop.
                inner.work.notify_all();
                notify();
            }
            moved = true;
        }
        if moved || active.is_empty() {
            idle = crate::isa::dispatch::IDLE_FIRST;
            continue;
        }
        // Every part waits on time: sleep, unless new work arrives.
        let st = inner.lock();
        if st.new[w].is_empty() && st.cancelled[w].is_empty() {
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
        memory.insert(Range {
            host: 0,
            start: base,
            size: 512,
            kind: MemKind::Vram,
            node: 1,
            flags: 0,
            mapped_nodes: vec![],
            user_data: 0,
            handle: base,
        });
        (buf, base)
    }

    fn job(ko: u64) -> Job {
        job_of(ko, 1)
    }

    /// A dispatch of `groups` one-wave workgroups.
    fn job_of(ko: u64, groups: u32) -> Job {
        let dispatch = Dispatch {
            kernel_object: ko,
            grid: [64 * groups, 1, 1],
            wg: [64, 1, 1],
            kernarg: 0,
            group_segment: 0,
            private_segment: 0,
        };
        let launch = Launch {
            dispatch,
            packet: 0,
            queue: 0,
            dispatch_id: 1,
            cus: 1,
            lds_per_cu: 65536,
            target: Target::Gfx90a,
        };
        Job { launch, name: "test".into(), whole: false }
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
        let ex = Executor::with_workers(
            1,
            memory,
            Arc::new(Events::default()),
            Clock::new(1.0),
            9,
            Box::new(move || {
                w.fetch_add(1, Ordering::Relaxed);
            }),
        );
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

    /// On three workers a dispatch of seven workgroups is shared out (three parts, one per
    /// worker) and comes back once, with every workgroup counted; a GWS queue's dispatch
    /// ("whole") is one part, and comes back the same.
    #[test]
    fn a_dispatch_is_shared_out_among_the_workers_and_its_result_summed() {
        let memory = Arc::new(Memory::default());
        let (_end, ends) = kernel(&memory, 0xbf81_0000); // s_endpgm
        let woken = Arc::new(AtomicU32::new(0));
        let w = woken.clone();
        let ex = Executor::with_workers(
            3,
            memory,
            Arc::new(Events::default()),
            Clock::new(1.0),
            9,
            Box::new(move || {
                w.fetch_add(1, Ordering::Relaxed);
            }),
        );
        assert_eq!(parts(&job_of(ends, 7), 3), 3);
        assert_eq!(parts(&job_of(ends, 2), 3), 2, "no more parts than workgroups");
        let shared = ex.submit(job_of(ends, 7));
        until("the shared dispatch's result", || woken.load(Ordering::Relaxed) > 0);
        let stats = ex.take(shared).expect("a result").expect("no error");
        assert_eq!((stats.workgroups, stats.waves), (7, 7));
        assert_eq!(woken.load(Ordering::Relaxed), 1, "one wake-up for the whole dispatch");
        let mut whole = job_of(ends, 7);
        whole.whole = true;
        assert_eq!(parts(&whole, 3), 1);
        let id = ex.submit(whole);
        until("the whole dispatch's result", || {
            ex.take(id).is_some_and(|r| r.is_ok_and(|s| s.workgroups == 7))
        });
        ex.stop();
    }

    /// Results of parts: counts add up; the first error is the dispatch's, at once, and the
    /// other workers are told to stop its parts; parts finishing after that count for nothing.
    #[test]
    fn parts_results_combine_and_a_failing_part_fails_the_dispatch_at_once() {
        let mut st = State { cancelled: vec![Vec::new(); 3], ..State::default() };
        let ok = |n: u64| Ok(Stats { workgroups: n, waves: 2 * n, instructions: 10 * n });
        st.pending.insert(1, (2, Ok(Stats::default())));
        assert!(!st.finish(1, ok(3)));
        assert!(st.finish(1, ok(4)));
        assert_eq!(st.done.remove(&1), Some(ok(7)));
        st.pending.insert(2, (3, Ok(Stats::default())));
        assert!(!st.finish(2, ok(1)));
        let err = Err(IsaError::Illegal { pc: 4, message: "x".into() });
        assert!(st.finish(2, err.clone()), "the error completes the dispatch");
        assert_eq!(st.done.remove(&2), Some(err));
        assert!(st.cancelled.iter().all(|c| c == &[2]), "every worker stops the dispatch's parts");
        assert!(!st.finish(2, ok(1)), "a late part counts for nothing");
        assert!(st.done.is_empty());
    }
}
