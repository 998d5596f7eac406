//! The hardware scheduler (HWS) model: which queue's workgroups run where, and when.
//!
//! Kernels reach the HWS in queue order. Workgroups of all runnable queues share the CUs at
//! workgroup granularity: whenever slots free, pending workgroups are taken by queue priority
//! (0-15, higher first), round robin among queues of equal priority, one workgroup per CU with
//! room per turn so that equal queues interleave. A running workgroup is never preempted by
//! priority. A queue whose CU mask excludes a CU never runs there; a queue that is not runnable
//! (`queue_percentage == 0`, evicted or suspended) is not fetched from.
//!
//! Once placed, a batch of workgroups progresses at a rate set by contention
//! (docs/timing-model-contention.md): workgroups co-resident on a CU share its pipe, and
//! memory-bound workgroups share HBM ([`super::contention`]). Every placement, completion or
//! removal re-times the batches whose slowdown it changed (processor sharing); their old heap
//! entries become stale (version counter) and are skipped. Kernels without a contention
//! profile (the default) are never slowed, and a batch never slowed keeps the exact integer
//! end time it was placed with.
//!
//! Time is device time in nanoseconds, supplied by the caller; the model is pure and
//! deterministic, so it is tested without clocks or threads.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use super::contention::{Capacity, Demand, Loads, Profile};
use super::cu::{CuMask, CuPool, WgNeed};
use super::progress::Progress;

/// A device-wide hardware queue identifier.
pub type QueueKey = u32;

/// Highest queue priority KFD accepts.
pub const MAX_PRIORITY: u8 = 15;

/// A kernel as the HWS sees it: how many workgroups, what each occupies and how long it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelJob {
    /// The caller's identifier, handed back on completion.
    pub tag: u64,
    pub workgroups: u64,
    pub need: WgNeed,
    /// Run time of one workgroup once it is on a CU, uncontended (calibrated).
    pub wg_ns: u64,
    /// What one workgroup demands of its CU's pipe and of HBM (zero: never slowed).
    pub profile: Profile,
}

/// A kernel whose workgroups have all finished. Completions of one queue come in queue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub queue: QueueKey,
    pub tag: u64,
    /// When its first workgroup started.
    pub start_ns: u64,
    /// When it finished (never before an earlier kernel of the same queue).
    pub end_ns: u64,
}

#[derive(Debug)]
struct Job {
    kernel: KernelJob,
    /// One workgroup's demand, from the kernel's profile.
    demand: Demand,
    remaining: u64,
    in_flight: u64,
    /// Workgroups preempted (waves saved by CWSR) and waiting to resume.
    saved: u64,
    start: Option<u64>,
    last_end: u64,
}

impl Job {
    fn done(&self) -> bool {
        self.remaining == 0 && self.in_flight == 0 && self.saved == 0
    }
}

#[derive(Debug)]
struct HwQueue {
    priority: u8,
    runnable: bool,
    mask: CuMask,
    jobs: VecDeque<Job>,
    last_end: u64,
    /// Preempted workgroups, resumed before new ones.
    saved: VecDeque<Saved>,
}

/// Workgroups preempted with their progress saved (CWSR).
#[derive(Clone, Copy, Debug)]
struct Saved {
    tag: u64,
    need: WgNeed,
    demand: Demand,
    count: u64,
    /// Calibrated ns each has left.
    remaining: u64,
}

impl HwQueue {
    /// The job whose workgroups go next: the first with workgroups left, once all before it
    /// have been fully dispatched.
    fn next_job(&mut self) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.remaining > 0)
    }
}

#[derive(Debug)]
struct Batch {
    queue: QueueKey,
    tag: u64,
    need: WgNeed,
    demand: Demand,
    placements: Vec<(usize, u32)>,
    /// The CUs of `placements` (to find the batches a load change concerns).
    cus: CuMask,
    progress: Progress,
}

/// A heap entry: when batch `id` ends, as of its re-timing `version`.
type Entry = Reverse<(u64, u64, u32)>;

/// The HWS model of one device.
#[derive(Debug)]
pub struct Hws {
    pool: CuPool,
    queues: BTreeMap<QueueKey, HwQueue>,
    /// Batch ends; entries whose version is not the batch's current one are stale.
    running: BinaryHeap<Entry>,
    batches: HashMap<u64, Batch>,
    /// Pipe and HBM demand of the resident workgroups.
    loads: Loads,
    next_batch: u64,
    last_served: [Option<QueueKey>; MAX_PRIORITY as usize + 1],
    now: u64,
    /// No dispatch before this time (queues unmapped by a KFD preemption).
    paused_until: u64,
    /// Hardware queue slots: with more queues holding work, HWS maps them in turns.
    slots: usize,
    /// How long one set of mapped queues runs before the next turn.
    quantum_ns: u64,
    /// Offset of the first mapped queue (in key order) of the current turn.
    rotation: usize,
    /// When the current turn ends (meaningful while oversubscribed).
    turn_ends: u64,
    /// Workgroup run times vary by up to this fraction either way (0 = exact).
    jitter: f64,
    /// State of the deterministic generator behind the jitter.
    rng: u64,
    /// Batches re-timed by contention so far.
    retimed: u64,
}

impl Hws {
    pub fn new(pool: CuPool) -> Self {
        let loads = Loads::new(pool.len(), Capacity::default());
        Hws {
            pool,
            queues: BTreeMap::new(),
            running: BinaryHeap::new(),
            batches: HashMap::new(),
            loads,
            next_batch: 0,
            last_served: [None; MAX_PRIORITY as usize + 1],
            now: 0,
            paused_until: 0,
            slots: usize::MAX,
            quantum_ns: 10_000_000,
            rotation: 0,
            turn_ends: 0,
            jitter: 0.0,
            rng: 0x9e37_79b9_7f4a_7c15,
            retimed: 0,
        }
    }

    /// Lets workgroup run times vary uniformly by up to `fraction` either way, so that the
    /// workgroups of a kernel do not all finish at the same instant (deterministic sequence).
    pub fn with_jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction.clamp(0.0, 0.9);
        self
    }

    /// Sets the capacities of the CU pipe and of HBM that contention profiles are measured
    /// against (before any kernel is submitted).
    pub fn with_capacity(mut self, cap: Capacity) -> Self {
        self.loads = Loads::new(self.pool.len(), cap);
        self
    }

    /// A run time drawn around `ns`.
    fn jittered(&mut self, ns: u64) -> u64 {
        if self.jitter == 0.0 {
            return ns;
        }
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let u = (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        (ns as f64 * (1.0 + self.jitter * (2.0 * u - 1.0))).round().max(1.0) as u64
    }

    /// Limits the hardware queue slots (the CP's 120 on an MI308X); queues with work beyond
    /// that are mapped in turns of `quantum_ns`, round robin in key order.
    pub fn with_slots(mut self, slots: usize, quantum_ns: u64) -> Self {
        self.slots = slots.max(1);
        self.quantum_ns = quantum_ns.max(1);
        self
    }

    fn has_work(q: &HwQueue) -> bool {
        q.runnable && (!q.saved.is_empty() || q.jobs.iter().any(|j| j.remaining > 0))
    }

    fn oversubscribed(&self) -> bool {
        self.slots != usize::MAX
            && self.queues.values().filter(|q| Self::has_work(q)).count() > self.slots
    }

    /// The queues mapped in the current turn (all of them unless oversubscribed).
    fn mapped(&self) -> Option<std::collections::HashSet<QueueKey>> {
        if !self.oversubscribed() {
            return None;
        }
        let with_work: Vec<QueueKey> =
            self.queues.iter().filter(|(_, q)| Self::has_work(q)).map(|(k, _)| *k).collect();
        let n = with_work.len();
        Some((0..self.slots).map(|i| with_work[(self.rotation + i) % n]).collect())
    }

    /// Device time the model has reached.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn cus(&self) -> usize {
        self.pool.len()
    }

    /// Adds a queue, runnable, on all CUs. Priorities above 15 are clamped.
    pub fn add_queue(&mut self, key: QueueKey, priority: u8) {
        let mask = CuMask::all(self.pool.len());
        let q = HwQueue {
            priority: priority.min(MAX_PRIORITY),
            runnable: true,
            mask,
            jobs: VecDeque::new(),
            last_end: 0,
            saved: VecDeque::new(),
        };
        self.queues.insert(key, q);
    }

    /// Removes a queue; its running workgroups are dropped (as a destroyed queue's waves are) and
    /// the tags of its unfinished kernels returned.
    pub fn remove_queue(&mut self, key: QueueKey) -> Vec<u64> {
        let Some(q) = self.queues.remove(&key) else { return Vec::new() };
        let ids: Vec<u64> =
            self.batches.iter().filter(|(_, b)| b.queue == key).map(|(id, _)| *id).collect();
        for id in ids {
            self.release(id);
        }
        self.fill();
        q.jobs.iter().map(|j| j.kernel.tag).collect()
    }

    pub fn set_priority(&mut self, key: QueueKey, priority: u8) {
        if let Some(q) = self.queues.get_mut(&key) {
            q.priority = priority.min(MAX_PRIORITY);
        }
        self.fill();
    }

    /// Makes a queue fetchable or not (queue percentage 0, eviction, suspension).
    pub fn set_runnable(&mut self, key: QueueKey, runnable: bool) {
        if let Some(q) = self.queues.get_mut(&key) {
            q.runnable = runnable;
        }
        self.fill();
    }

    pub fn set_cu_mask(&mut self, key: QueueKey, mask: CuMask) {
        let cus = self.pool.len();
        if let Some(q) = self.queues.get_mut(&key) {
            q.mask = mask.within(cus);
        }
        self.fill();
    }

    /// KFD unmapping and remapping every queue of the device (UPDATE_QUEUE, SET_CU_MASK and
    /// debug-trap suspend/resume on HWS devices): running waves are saved and restored
    /// (CWSR), so everything running finishes `cost_ns` later, and nothing is dispatched until
    /// the queues are mapped again.
    pub fn preempt_all(&mut self, now: u64, cost_ns: u64) {
        self.now = self.now.max(now);
        self.running.clear();
        for (&id, b) in self.batches.iter_mut() {
            b.progress.pause(self.now, cost_ns);
            self.running.push(Reverse((b.progress.end, id, b.progress.version)));
        }
        self.paused_until = self.paused_until.max(self.now) + cost_ns;
    }

    /// Suspends a queue (debug-trap SUSPEND_QUEUES): not fetched any more, and its running
    /// workgroups are preempted with their progress saved (those that finish within the
    /// `grace_ns` grace period are left to finish); the saved ones resume first on
    /// [`Hws::resume`].
    pub fn suspend(&mut self, key: QueueKey, now: u64, grace_ns: u64) -> bool {
        self.now = self.now.max(now);
        let Some(q) = self.queues.get_mut(&key) else { return false };
        q.runnable = false;
        let deadline = self.now + grace_ns;
        let mut ids: Vec<u64> = self
            .batches
            .iter()
            .filter(|(_, b)| b.queue == key && b.progress.end > deadline)
            .map(|(id, _)| *id)
            .collect();
        // In placement order, as they will resume.
        ids.sort_unstable();
        for id in ids {
            let b = self.release(id);
            let n: u64 = b.placements.iter().map(|&(_, k)| u64::from(k)).sum();
            let remaining = b.progress.remaining(self.now);
            let q = self.queues.get_mut(&key).expect("checked above");
            if let Some(job) = q.jobs.iter_mut().find(|j| j.kernel.tag == b.tag) {
                job.in_flight -= n;
                job.saved += n;
            }
            q.saved.push_back(Saved {
                tag: b.tag,
                need: b.need,
                demand: b.demand,
                count: n,
                remaining,
            });
        }
        self.fill();
        true
    }

    /// Resumes a suspended queue.
    pub fn resume(&mut self, key: QueueKey, now: u64) -> bool {
        self.now = self.now.max(now);
        let Some(q) = self.queues.get_mut(&key) else { return false };
        q.runnable = true;
        self.fill();
        true
    }

    /// Workgroups of `key` preempted with their progress saved (CWSR) and not yet resumed.
    pub fn saved(&self, key: QueueKey) -> u64 {
        self.queues.get(&key).map_or(0, |q| q.saved.iter().map(|s| s.count).sum())
    }

    /// Kernels of `key` not yet completed.
    /// The CUs queue `key` may run on (`SET_CU_MASK`; every CU until set).
    pub fn cu_mask(&self, key: QueueKey) -> Option<CuMask> {
        self.queues.get(&key).map(|q| q.mask)
    }

    pub fn outstanding(&self, key: QueueKey) -> usize {
        self.queues.get(&key).map_or(0, |q| q.jobs.len())
    }

    /// How many times contention has re-timed a batch (0: every time so far is exactly the
    /// fixed-end model's).
    pub fn retimed(&self) -> u64 {
        self.retimed
    }

    /// Wave slots busy over the device.
    pub fn busy_waves(&self) -> u64 {
        self.pool.busy_waves()
    }

    /// Queues a kernel at device time `now` (after the caller advanced the model to `now`).
    /// A workgroup too large for any CU is clamped to one CU's resources.
    pub fn submit(&mut self, key: QueueKey, mut kernel: KernelJob, now: u64) {
        self.now = self.now.max(now);
        if !self.pool.can_ever_fit(kernel.need) {
            kernel.need = self.clamp(kernel.need);
        }
        let Some(q) = self.queues.get_mut(&key) else { return };
        let demand = Demand::of(kernel.profile, kernel.wg_ns);
        let job = Job {
            kernel,
            demand,
            remaining: kernel.workgroups,
            in_flight: 0,
            saved: 0,
            start: None,
            last_end: 0,
        };
        q.jobs.push_back(job);
        if kernel.workgroups == 0 {
            // Nothing to run: it completes at once, in order.
            q.jobs.back_mut().expect("just pushed").start = Some(self.now);
        }
        self.fill();
    }

    fn clamp(&self, need: WgNeed) -> WgNeed {
        let mut n = need;
        while !self.pool.can_ever_fit(n) && (n.waves > 1 || n.lds > 0) {
            n.waves = n.waves.div_ceil(2);
            n.lds /= 2;
        }
        n
    }

    /// When the next workgroup batch finishes, if any runs.
    pub fn next_event(&self) -> Option<u64> {
        let batch = self.running.peek().map(|Reverse((t, _, _))| *t);
        let resume = (self.paused_until > self.now).then_some(self.paused_until);
        let turn = self.oversubscribed().then_some(self.turn_ends.max(self.now));
        batch.into_iter().chain(resume).chain(turn).min()
    }

    /// Runs the model to the earliest batch end at or before `now`, if any, and returns that
    /// time with the kernels that completed then (queue order within a queue). The model's
    /// clock stays at that time, so work the caller submits in response starts exactly when
    /// the finished work ended. Call until it returns `None`, then [`Hws::sync`].
    pub fn step(&mut self, now: u64) -> Option<(u64, Vec<Completion>)> {
        let mut done = Vec::new();
        self.collect(&mut done);
        if !done.is_empty() {
            return Some((self.now, done));
        }
        if self.oversubscribed()
            && self.turn_ends <= now
            && self.running.peek().is_none_or(|Reverse((t, _, _))| *t >= self.turn_ends)
        {
            // The next set of queues is mapped.
            self.now = self.now.max(self.turn_ends);
            self.rotation = self.rotation.wrapping_add(self.slots);
            self.turn_ends = self.now + self.quantum_ns;
            self.fill();
            return Some((self.now, done));
        }
        if self.paused_until > self.now
            && self.paused_until <= now
            && self.running.peek().is_none_or(|Reverse((t, _, _))| *t >= self.paused_until)
        {
            // The queues are mapped again: dispatch resumes at the end of the pause.
            self.now = self.paused_until;
            self.fill();
            return Some((self.now, done));
        }
        let &Reverse((t, _, _)) = self.running.peek()?;
        if t > now {
            return None;
        }
        while let Some(&Reverse((t2, id, version))) = self.running.peek() {
            if t2 != t {
                break;
            }
            self.running.pop();
            if !self.current(id, version) {
                continue;
            }
            let b = self.release(id);
            let n: u64 = b.placements.iter().map(|&(_, k)| u64::from(k)).sum();
            if let Some(job) = self
                .queues
                .get_mut(&b.queue)
                .and_then(|q| q.jobs.iter_mut().find(|j| j.kernel.tag == b.tag))
            {
                job.in_flight -= n;
                job.last_end = job.last_end.max(t);
            }
        }
        self.now = self.now.max(t);
        self.fill();
        self.collect(&mut done);
        Some((self.now, done))
    }

    /// Moves the model's clock to `now` once no batch ends before it.
    pub fn sync(&mut self, now: u64) {
        if self.running.peek().is_none_or(|Reverse((t, _, _))| *t > now) {
            self.now = self.now.max(now);
        }
    }

    /// Runs the model up to `now`, returning every completion (for callers that do not react
    /// between steps).
    pub fn advance(&mut self, now: u64) -> Vec<Completion> {
        let mut all = Vec::new();
        while let Some((_, done)) = self.step(now) {
            all.extend(done);
        }
        self.sync(now);
        all
    }

    /// Pops the finished kernels at the front of every queue.
    fn collect(&mut self, done: &mut Vec<Completion>) {
        for (&key, q) in self.queues.iter_mut() {
            while q.jobs.front().is_some_and(Job::done) {
                let j = q.jobs.pop_front().expect("front exists");
                let start = j.start.unwrap_or(self.now);
                let end = j.last_end.max(start).max(q.last_end);
                q.last_end = end;
                done.push(Completion {
                    queue: key,
                    tag: j.kernel.tag,
                    start_ns: start,
                    end_ns: end,
                });
            }
        }
    }

    /// Whether a heap entry is batch `id`'s current end.
    fn current(&self, id: u64, version: u32) -> bool {
        self.batches.get(&id).is_some_and(|b| b.progress.version == version)
    }

    /// Drops stale entries from the top of the heap, so that `next_event`, `step` and `sync`
    /// see the earliest real end.
    fn purge(&mut self) {
        while let Some(&Reverse((_, id, version))) = self.running.peek() {
            if self.current(id, version) {
                break;
            }
            self.running.pop();
        }
    }

    /// Takes batch `id` off its CUs (finished, removed or preempted); its heap entry goes
    /// stale.
    fn release(&mut self, id: u64) -> Batch {
        let b = self.batches.remove(&id).expect("a running batch");
        for &(cu, k) in &b.placements {
            self.pool.give(cu, b.need, k);
        }
        self.loads.remove(b.demand, &b.placements);
        b
    }

    /// Puts a batch on its CUs at the current time with `work_ns` calibrated ns to run.
    fn place(
        &mut self,
        queue: QueueKey,
        tag: u64,
        need: WgNeed,
        demand: Demand,
        placements: Vec<(usize, u32)>,
        work_ns: u64,
    ) {
        for &(cu, k) in &placements {
            self.pool.take(cu, need, k);
        }
        let id = self.next_batch;
        self.next_batch += 1;
        let mut cus = CuMask::none();
        if !demand.is_zero() {
            self.loads.add(demand, &placements);
            for &(cu, _) in &placements {
                cus.set(cu);
            }
        }
        let progress = Progress::new(self.now, work_ns);
        self.running.push(Reverse((progress.end, id, progress.version)));
        self.batches.insert(id, Batch { queue, tag, need, demand, placements, cus, progress });
    }

    /// Re-times the batches whose slowdown the loads' changes since the last call altered.
    /// Changes under 0.5 % are ignored to bound heap churn, except a return to full speed.
    fn retime(&mut self) {
        let Some(dirty) = self.loads.take_dirty() else { return };
        let now = self.now;
        for (&id, b) in self.batches.iter_mut() {
            if !dirty.concerns(b.demand, &b.cus) {
                continue;
            }
            let slow = self.loads.slowdown(b.demand, &b.placements);
            let old = b.progress.slowdown();
            if slow == old || (slow != 1.0 && (slow / old - 1.0).abs() < 0.005) {
                continue;
            }
            b.progress.retime(now, slow);
            self.retimed += 1;
            self.running.push(Reverse((b.progress.end, id, b.progress.version)));
        }
    }

    /// Dispatches pending workgroups into free CU slots at the current time, then re-times
    /// the batches whose contention changed.
    fn fill(&mut self) {
        self.dispatch();
        self.retime();
        self.purge();
    }

    fn dispatch(&mut self) {
        if self.now < self.paused_until {
            return;
        }
        // The mapped set is a property of the turn, not of each placement: computed once.
        let mapped = self.mapped();
        if mapped.is_some() && self.turn_ends <= self.now {
            self.turn_ends = self.now + self.quantum_ns;
        }
        // Resources only shrink while this loop places work, so a (need, mask) that found no
        // room stays without room until the next event: remembered to spare the CU scan.
        let mut no_room: Vec<(WgNeed, CuMask)> = Vec::new();
        while let Some(key) = self.pick(mapped.as_ref(), &mut no_room) {
            self.dispatch_turn(key);
        }
    }

    /// The queue served next: highest priority with a placeable workgroup, round robin after the
    /// queue served last at that priority.
    fn pick(
        &mut self,
        mapped: Option<&std::collections::HashSet<QueueKey>>,
        no_room: &mut Vec<(WgNeed, CuMask)>,
    ) -> Option<QueueKey> {
        let mut best: Option<(u8, QueueKey)> = None;
        let mut candidates: Vec<(u8, QueueKey)> = Vec::new();
        for (&key, q) in self.queues.iter_mut() {
            if !q.runnable || mapped.is_some_and(|m| !m.contains(&key)) {
                continue;
            }
            let mask = q.mask;
            let need = match q.saved.front() {
                Some(s) => s.need,
                None => match q.next_job() {
                    Some(job) => job.kernel.need,
                    None => continue,
                },
            };
            if no_room.contains(&(need, mask)) {
                continue;
            }
            if (0..self.pool.len()).any(|cu| mask.contains(cu) && self.pool.fits(cu, need)) {
                candidates.push((q.priority, key));
                if best.is_none_or(|(p, _)| q.priority > p) {
                    best = Some((q.priority, key));
                }
            } else {
                no_room.push((need, mask));
            }
        }
        let (prio, _) = best?;
        let after = self.last_served[prio as usize];
        let same: Vec<QueueKey> =
            candidates.iter().filter(|(p, _)| *p == prio).map(|(_, k)| *k).collect();
        let chosen = after.and_then(|a| same.iter().copied().find(|&k| k > a)).unwrap_or(same[0]);
        self.last_served[prio as usize] = Some(chosen);
        Some(chosen)
    }

    /// One turn of queue `key`: one workgroup on each allowed CU with room (the least loaded
    /// CUs first when fewer workgroups remain than CUs have room).
    fn dispatch_turn(&mut self, key: QueueKey) {
        let q = self.queues.get_mut(&key).expect("picked queue exists");
        let mask = q.mask;
        if let Some(&s) = q.saved.front() {
            let mut cus: Vec<usize> = (0..self.pool.len())
                .filter(|&cu| mask.contains(cu) && self.pool.fits(cu, s.need))
                .collect();
            cus.truncate(s.count as usize);
            let n = cus.len() as u64;
            if n == s.count {
                q.saved.pop_front();
            } else if let Some(front) = q.saved.front_mut() {
                front.count -= n;
            }
            if let Some(job) = q.jobs.iter_mut().find(|j| j.kernel.tag == s.tag) {
                job.saved -= n;
                job.in_flight += n;
            }
            self.place(
                key,
                s.tag,
                s.need,
                s.demand,
                cus.into_iter().map(|cu| (cu, 1)).collect(),
                s.remaining,
            );
            return;
        }
        let now = self.now;
        let job = q.next_job().expect("picked queue has a job");
        let need = job.kernel.need;
        let mut cus: Vec<usize> = (0..self.pool.len())
            .filter(|&cu| mask.contains(cu) && self.pool.fits(cu, need))
            .collect();
        if (cus.len() as u64) > job.remaining {
            cus.sort_by_key(|&cu| Reverse(self.pool.free_waves(cu)));
            cus.truncate(job.remaining as usize);
        }
        let placements: Vec<(usize, u32)> = cus.into_iter().map(|cu| (cu, 1)).collect();
        let n = placements.len() as u64;
        job.remaining -= n;
        job.in_flight += n;
        job.start.get_or_insert(now);
        let (wg_ns, tag, demand) = (job.kernel.wg_ns, job.kernel.tag, job.demand);
        let work = self.jittered(wg_ns);
        self.place(key, tag, need, demand, placements, work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hws(cus: usize) -> Hws {
        Hws::new(CuPool::new(cus, 32, 65536))
    }

    fn job(tag: u64, workgroups: u64, waves: u32, wg_ns: u64) -> KernelJob {
        KernelJob {
            tag,
            workgroups,
            need: WgNeed { waves, lds: 0 },
            wg_ns,
            profile: Profile::default(),
        }
    }

    fn run(h: &mut Hws) -> Vec<Completion> {
        let mut all = Vec::new();
        while let Some(t) = h.next_event() {
            all.extend(h.advance(t));
        }
        all
    }

    #[test]
    fn a_kernel_takes_as_many_rounds_as_its_workgroups_need() {
        let mut h = hws(4);
        h.add_queue(1, 7);
        // 4 CUs x 8 workgroups of 4 waves = 32 at once; 64 workgroups = 2 rounds of 100 ns.
        h.submit(1, job(9, 64, 4, 100), 0);
        let c = run(&mut h);
        assert_eq!(c, vec![Completion { queue: 1, tag: 9, start_ns: 0, end_ns: 200 }]);
        assert_eq!(h.busy_waves(), 0);
    }

    #[test]
    fn completions_of_a_queue_come_in_order() {
        let mut h = hws(4);
        h.add_queue(1, 7);
        h.submit(1, job(1, 4, 32, 1000), 0);
        h.submit(1, job(2, 1, 1, 10), 0);
        let c = run(&mut h);
        assert_eq!(c.iter().map(|c| c.tag).collect::<Vec<_>>(), vec![1, 2]);
        assert!(c[1].end_ns >= c[0].end_ns);
    }

    #[test]
    fn higher_priority_takes_freed_slots_first_but_never_preempts() {
        let mut h = hws(1);
        h.add_queue(1, 1);
        h.add_queue(2, 15);
        h.submit(1, job(10, 2, 32, 100), 0); // one at a time: fills the only CU
        h.submit(2, job(20, 1, 32, 100), 10);
        let c = run(&mut h);
        // The low kernel's first workgroup keeps running; its second waits for the high one.
        assert_eq!(c[0].tag, 20);
        assert_eq!((c[0].start_ns, c[0].end_ns), (100, 200));
        assert_eq!(c[1].end_ns, 300);
    }

    #[test]
    fn equal_priorities_share_round_robin() {
        let mut h = hws(2);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, job(1, 8, 32, 100), 0);
        h.submit(2, job(2, 8, 32, 100), 0);
        let c = run(&mut h);
        // Both finish within one round of each other.
        let diff = c[0].end_ns.abs_diff(c[1].end_ns);
        assert!(diff <= 100, "{c:?}");
        assert_eq!(c.iter().map(|c| c.end_ns).max(), Some(800));
    }

    #[test]
    fn cu_masks_separate_queues() {
        let mut h = hws(4);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.set_cu_mask(1, CuMask::from_words(&[0b0011], 4));
        h.set_cu_mask(2, CuMask::from_words(&[0b1100], 4));
        h.submit(1, job(1, 4, 32, 100), 0);
        h.submit(2, job(2, 2, 32, 100), 0);
        let c = run(&mut h);
        let end = |t| c.iter().find(|c| c.tag == t).unwrap().end_ns;
        assert_eq!(end(1), 200);
        assert_eq!(end(2), 100);
    }

    #[test]
    fn an_unrunnable_queue_makes_no_progress_until_runnable_again() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.set_runnable(1, false);
        h.submit(1, job(1, 1, 1, 100), 0);
        assert_eq!(h.next_event(), None);
        assert!(h.advance(10_000).is_empty());
        h.set_runnable(1, true);
        let c = run(&mut h);
        assert_eq!((c[0].start_ns, c[0].end_ns), (10_000, 10_100));
    }

    #[test]
    fn removing_a_queue_frees_its_cus() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, job(1, 10, 32, 100), 0);
        h.submit(2, job(2, 1, 32, 100), 0);
        assert_eq!(h.remove_queue(1), vec![1]);
        let c = run(&mut h);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].tag, 2);
        assert_eq!(h.busy_waves(), 0);
    }

    #[test]
    fn preempting_all_queues_delays_everyone_by_the_cost() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.submit(1, job(1, 1, 32, 1000), 0);
        h.preempt_all(100, 450);
        h.submit(1, job(2, 1, 1, 10), 200);
        let c = run(&mut h);
        assert_eq!(c[0].end_ns, 1450);
        // Nothing new was dispatched during the pause; the second kernel follows the first.
        assert_eq!(c[1].start_ns, 1450);
    }

    #[test]
    fn a_suspended_queue_saves_its_waves_and_resumes_them() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, job(1, 1, 32, 1000), 0);
        assert!(h.suspend(1, 400, 0));
        // The CU is free for another queue while queue 1 is suspended.
        h.submit(2, job(2, 1, 32, 100), 400);
        let c = h.advance(10_000);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].tag, c[0].end_ns), (2, 500));
        assert_eq!(h.saved(1), 1);
        assert!(h.resume(1, 10_000));
        let c = run(&mut h);
        assert_eq!(h.saved(1), 0);
        // 600 ns of the workgroup were left when it was saved.
        assert_eq!((c[0].tag, c[0].end_ns), (1, 10_600));
    }

    #[test]
    fn more_queues_than_slots_are_mapped_in_turns() {
        let mut h = Hws::new(CuPool::new(4, 32, 65536)).with_slots(2, 1000);
        for k in 1..=3 {
            h.add_queue(k, 5);
            // Each queue wants one CU for 100 ns at a time, 100 times.
            h.submit(k, job(u64::from(k), 100, 32, 100), 0);
        }
        let c = run(&mut h);
        // Two of the three queues are mapped in the first turn; the third starts when the
        // first turn ends, and every queue finishes.
        let start = |c: &[Completion], q| c.iter().find(|c| c.queue == q).unwrap().start_ns;
        assert_eq!((start(&c, 1), start(&c, 3)), (0, 1000), "{c:?}");
        assert_eq!(c.len(), 3);
        let mut k = Hws::new(CuPool::new(4, 32, 65536));
        for q in 1..=3 {
            k.add_queue(q, 5);
            k.submit(q, job(u64::from(q), 100, 32, 100), 0);
        }
        let c2 = run(&mut k);
        assert!(start(&c2, 3) < 1000, "{c2:?}");
    }

    #[test]
    fn jitter_spreads_workgroup_ends_around_the_mean() {
        let mut h = Hws::new(CuPool::new(80, 32, 65536)).with_jitter(0.2);
        h.add_queue(1, 5);
        h.submit(1, job(1, 100 * 2560, 1, 1000), 0);
        let c = run(&mut h);
        // 100 rounds of 1000 ns, each round's end drawn within +-20 %.
        let end = c[0].end_ns as f64;
        assert!((90_000.0..=125_000.0).contains(&end), "{end}");
        assert_eq!(h.busy_waves(), 0);
    }

    fn pjob(tag: u64, workgroups: u64, wg_ns: u64, cu_util: f32, hbm_bytes: u64) -> KernelJob {
        KernelJob { profile: Profile { cu_util, hbm_bytes }, ..job(tag, workgroups, 4, wg_ns) }
    }

    fn end_of(c: &[Completion], tag: u64) -> u64 {
        c.iter().find(|c| c.tag == tag).expect("completed").end_ns
    }

    #[test]
    fn a_profiled_kernel_alone_keeps_its_exact_times() {
        // Two workgroups per CU at u = 0.33 each (D_c = 0.66 < U) and memory demand under B:
        // the same completions, to the ns, as without profiles, jitter included.
        let go = |profile: Profile| {
            let mut h = Hws::new(CuPool::new(8, 32, 65536)).with_jitter(0.1);
            h.add_queue(1, 5);
            let k = KernelJob {
                need: WgNeed { waves: 4, lds: 32768 },
                profile,
                ..job(1, 100, 4, 10_000)
            };
            h.submit(1, k, 0);
            h.submit(1, KernelJob { tag: 2, ..k }, 0);
            run(&mut h)
        };
        let plain = go(Profile::default());
        assert_eq!(go(Profile { cu_util: 0.33, hbm_bytes: 10_000 }), plain);
        assert_eq!(plain.len(), 2);
    }

    #[test]
    fn workgroups_sharing_a_cu_pipe_slow_each_other() {
        for (u, end) in [(0.6, 1200), (0.4, 1000)] {
            let mut h = hws(1);
            h.add_queue(1, 5);
            h.add_queue(2, 5);
            h.submit(1, pjob(1, 1, 1000, u, 0), 0);
            h.submit(2, pjob(2, 1, 1000, u, 0), 0);
            let c = run(&mut h);
            assert_eq!((end_of(&c, 1), end_of(&c, 2)), (end, end), "u = {u}");
        }
        // Placed mid-run: both at 1/1.2 from 500 until the first ends, then full speed again.
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, pjob(1, 1, 1000, 0.6, 0), 0);
        h.advance(500);
        h.submit(2, pjob(2, 1, 1000, 0.6, 0), 500);
        let c = run(&mut h);
        assert_eq!((end_of(&c, 1), end_of(&c, 2)), (1100, 1600));
        // A kernel without a profile is neither slowed nor slows.
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, pjob(1, 1, 1000, 0.9, 0), 0);
        h.submit(2, job(2, 1, 4, 1000), 0);
        let c = run(&mut h);
        assert_eq!((end_of(&c, 1), end_of(&c, 2)), (1000, 1000));
    }

    #[test]
    fn hbm_oversubscription_slows_memory_kernels_until_one_ends() {
        let cap = Capacity { cu_pipe: 1.0, hbm_bytes_per_ns: 1000.0 };
        let mut h = Hws::new(CuPool::new(2, 32, 65536)).with_capacity(cap);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        // Each alone asks 0.75 B: together 1.5 B, so both run at 1/1.5.
        h.submit(1, pjob(1, 1, 1000, 0.0, 750_000), 0);
        h.submit(2, pjob(2, 1, 2000, 0.0, 1_500_000), 0);
        let c = run(&mut h);
        // The first needs 1000 ns of work: 1500 ns at 1/1.5. By then the second has done
        // 1000 of its 2000 and runs the rest at full speed.
        assert_eq!((end_of(&c, 1), end_of(&c, 2)), (1500, 2500));
    }

    #[test]
    fn suspending_mid_slowdown_saves_the_work_left() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, pjob(1, 1, 1000, 0.6, 0), 0);
        h.submit(2, pjob(2, 1, 1000, 0.6, 0), 0);
        // At 600 each has done 500 (at 1/1.2); queue 1 saves its 500 left.
        assert!(h.suspend(1, 600, 0));
        let c = h.advance(10_000);
        assert_eq!(c.len(), 1);
        assert_eq!(end_of(&c, 2), 1100, "alone again from 600: 500 left at full speed");
        assert!(h.resume(1, 10_000));
        let c = run(&mut h);
        assert_eq!(end_of(&c, 1), 10_500);
        assert_eq!(h.busy_waves(), 0);
    }

    #[test]
    fn a_preemption_pause_during_a_slowdown_delays_by_the_cost() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.add_queue(2, 5);
        h.submit(1, pjob(1, 1, 1000, 0.6, 0), 0);
        h.submit(2, pjob(2, 1, 1000, 0.6, 0), 0);
        h.preempt_all(600, 450);
        let c = run(&mut h);
        assert_eq!((end_of(&c, 1), end_of(&c, 2)), (1650, 1650));
    }

    #[test]
    fn contention_is_deterministic() {
        let go = || {
            let mut h = Hws::new(CuPool::new(8, 32, 65536))
                .with_jitter(0.2)
                .with_capacity(Capacity { cu_pipe: 1.0, hbm_bytes_per_ns: 500.0 });
            for q in 1..=3 {
                h.add_queue(q, 5);
            }
            for i in 0..20u64 {
                let q = (i % 3) as u32 + 1;
                h.submit(
                    q,
                    pjob(i, 10 + 7 * i, 1000 + 130 * i, 0.1 * (i % 5) as f32, 2_000 * (i % 2)),
                    50 * i,
                );
            }
            run(&mut h)
        };
        let a = go();
        assert_eq!(a.len(), 20);
        assert_eq!(a, go());
    }

    #[test]
    fn empty_and_oversized_kernels_still_complete() {
        let mut h = hws(1);
        h.add_queue(1, 5);
        h.submit(1, job(1, 0, 1, 100), 5);
        h.submit(1, job(2, 1, 1000, 100), 5);
        let mut c = h.advance(5);
        c.extend(run(&mut h));
        assert_eq!(c.iter().map(|c| c.tag).collect::<Vec<_>>(), vec![1, 2]);
    }
}
