//! Running a dispatch: workgroups become resident (up to what the device holds at once), their
//! waves set up as the CP does from the kernel descriptor (user and system SGPRs, work-item ids
//! in v0, EXEC), and run in turns on the calling thread: a wave runs until it ends, reaches
//! `s_barrier` (released when every wave of its workgroup still running is there), a GWS
//! barrier or `s_sleep`, or has run a quantum; see [`Run`] for when workgroups start. No
//! thread waits on another.
//!
//! SGPR set-up (AMDGPUUsage "Initial Kernel Execution State", in this order from s0): private
//! segment buffer (4), dispatch ptr (2), queue ptr (2), kernarg segment ptr (2), dispatch id
//! (2), flat scratch init (2), private segment size (1), each if its kernel_code_properties
//! bit is set; then from s[USER_SGPR_COUNT]: workgroup id x, y, z (each if enabled in rsrc2),
//! workgroup info, private segment wave byte offset (if rsrc2's private segment is enabled;
//! not with gfx942's architected flat scratch, where the descriptor may not ask for the private
//! segment buffer or flat scratch init either). VGPRs: gfx90a and gfx942 pack the work-item ids
//! into v0 (x [9:0], y [19:10], z [29:20]).

use std::collections::HashMap;

use super::decode::{self, DecodeError, Inst};
use super::descriptor::{props, Descriptor};
use super::exec::{self, Ctx, ExecError, GwsOp, Handler, Step};
use super::gws::{Arrival, Gws};
use super::lds::Lds;
use super::memory::Memory;
use super::operand::{M0, VCC_LO};
use super::target::Target;
use super::wave::{Apertures, Wave, WaveState, LANES};
use super::IsaError;
use crate::kernels::{Dispatch, Fault};

/// What the dispatch's waves are given besides the packet's fields.
#[derive(Clone, Debug)]
pub struct Launch {
    pub dispatch: Dispatch,
    /// Address of the AQL dispatch packet (the dispatch ptr SGPRs).
    pub packet: u64,
    /// Address of the queue's `amd_queue_t` (the queue ptr SGPRs).
    pub queue: u64,
    pub dispatch_id: u64,
    /// Compute units, and LDS bytes per CU: how many workgroups are resident at once.
    pub cus: u32,
    pub lds_per_cu: u32,
    /// The ISA of the kernel's code object.
    pub target: Target,
}

/// What the waves reach outside the GPU.
#[derive(Clone, Copy)]
pub struct Services<'a> {
    /// Device nanoseconds (`s_memtime`).
    pub clock: &'a dyn Fn() -> u64,
    /// The host interrupt of `s_sendmsg(MSG_INTERRUPT)`, with M0[7:0].
    pub interrupt: &'a dyn Fn(u32),
}

/// Counts of what ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub workgroups: u64,
    pub waves: u64,
    /// Wave-instructions executed.
    pub instructions: u64,
}

/// A decoded instruction with its handler (None: not implemented).
type Decoded = (Inst, Option<Handler>);

/// Decoded instructions by address, with their handlers.
struct Code {
    base: u64,
    target: Target,
    near: Vec<Option<Box<Decoded>>>,
    far: HashMap<u64, Box<Decoded>>,
}

/// Instructions within this many bytes after the entry are cached in a vector.
const NEAR: u64 = 1 << 20;

impl Code {
    fn new(base: u64, target: Target) -> Code {
        Code { base, target, near: Vec::new(), far: HashMap::new() }
    }

    fn fetch(&mut self, mem: &Memory, pc: u64) -> Result<&Decoded, IsaError> {
        let off = pc.wrapping_sub(self.base);
        let near = off < NEAR && pc.is_multiple_of(4);
        let cached = if near { self.near.get((off / 4) as usize).is_some_and(Option::is_some) } else { self.far.contains_key(&pc) };
        if !cached {
            let mut words = [0u32; 3];
            let mut n = 0;
            for (k, w) in words.iter_mut().enumerate() {
                match mem.read_u32(pc + 4 * k as u64) {
                    Ok(x) => {
                        *w = x;
                        n += 1;
                    }
                    Err(f) if k == 0 => return Err(IsaError::Fault(f)),
                    Err(_) => break,
                }
            }
            let inst = match decode::decode_for(self.target, &words[..n]) {
                Ok(i) => i,
                Err(DecodeError::Truncated) => return Err(IsaError::Fault(Fault { addr: pc + 4 * n as u64, write: false })),
                Err(e) => return Err(IsaError::Decode { pc, error: e }),
            };
            let h = exec::handler(&inst);
            let entry = Box::new((inst, h));
            if near {
                let idx = (off / 4) as usize;
                if self.near.len() <= idx {
                    self.near.resize_with(idx + 1, || None);
                }
                self.near[idx] = Some(entry);
            } else {
                self.far.insert(pc, entry);
            }
        }
        Ok(if near { self.near[(off / 4) as usize].as_deref().expect("cached") } else { &self.far[&pc] })
    }
}

/// Workgroups resident on the device at once, as HIP's occupancy calculation for gfx9 counts
/// them (and checks cooperative launches against): 32 waves per CU (8 per SIMD), the LDS a
/// CU has, times the CUs. Register limits are left out, so the count is never below HIP's.
pub fn resident_limit(cus: u32, waves_per_group: usize, lds_bytes: u64, lds_per_cu: u32) -> usize {
    let by_waves = (32 / waves_per_group.max(1)).max(1);
    let by_lds = u64::from(lds_per_cu).checked_div(lds_bytes).map_or(usize::MAX, |n| n.max(1) as usize);
    (cus.max(1) as usize).saturating_mul(by_waves.min(by_lds))
}

/// A resident workgroup: its waves and its LDS.
struct Group {
    waves: Vec<Wave>,
    lds: Lds,
}

/// Instructions a wave runs before it gives its turn up at a taken branch, so that a wave
/// spinning on memory lets the wave it waits for run.
const QUANTUM: u64 = 1 << 18;

/// Real time to sleep when every wave sleeps or waits (`s_sleep` loops waiting for the host),
/// first and at most; doubled each idle round.
pub const IDLE_FIRST: std::time::Duration = std::time::Duration::from_micros(10);
pub const IDLE_MAX: std::time::Duration = std::time::Duration::from_millis(1);

/// What a round of turns did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Something moved (a wave ended, passed a barrier, used its quantum up, or a workgroup
    /// started): run another round.
    Moved,
    /// Every wave sleeps or waits: only time (the host, another dispatch) can move it.
    Idle,
    /// Every workgroup ran to its end.
    Done(Stats),
}

/// A dispatch in progress: the workgroups started and not ended, and what is left.
///
/// Workgroups become resident in order (x fastest) up to [`resident_limit`]: one at first, one
/// more whenever one ends, and one more whenever a round of turns ends with every resident
/// workgroup waiting (`s_sleep`, a GWS barrier, or a quantum used up), since those may wait
/// for a workgroup that has not started. So ordinary kernels run one workgroup after another
/// and kernels whose workgroups wait on each other (grid syncs, spin locks, host calls) have
/// them side by side, as on the GPU. [`Run::round`] gives each resident workgroup one turn;
/// callers run rounds until [`Round::Done`], and between [`Round::Idle`] ones let time pass
/// (sleep) rather than spin.
pub struct Run<'m> {
    mem: Memory<'m>,
    launch: Launch,
    kd: Descriptor,
    code: Code,
    apertures: Apertures,
    nwaves: usize,
    vgprs: (usize, usize),
    private_size: u32,
    lds_size: u32,
    counts: [u64; 3],
    /// This run's workgroups: flat ids `first`, `first + stride`, ... below the grid's count
    /// (all of them but for a part, [`Run::part`]); `total` of them.
    first: u64,
    stride: u64,
    total: u64,
    limit: usize,
    stats: Stats,
    progress: Progress,
    resident: Vec<Group>,
    spare: Vec<Group>,
    next: u64,
    admit: usize,
    gws: Gws,
    current_lds: Lds,
    lanes: Box<[[u64; LANES]; 4]>,
    lanes32: Box<[[u32; LANES]; 4]>,
}

impl<'m> Run<'m> {
    /// Reads the kernel descriptor and prepares the dispatch; no workgroup has started.
    pub fn new(launch: &Launch, mem: Memory<'m>) -> Result<Run<'m>, IsaError> {
        Run::part(launch, mem, 0, 1)
    }

    /// Part `index` of `parts` of the dispatch: its workgroups `index`, `index + parts`, ...
    /// (flat ids, x fastest), with the resident limit shared out, so that `parts` threads run
    /// a dispatch together. Workgroups of different parts never share a run's turns: a GWS
    /// barrier (a grid sync) needs the whole grid in one run.
    pub fn part(launch: &Launch, mem: Memory<'m>, index: u32, parts: u32) -> Result<Run<'m>, IsaError> {
        let d = &launch.dispatch;
        let kd = Descriptor::read(&mem, d.kernel_object).map_err(IsaError::Fault)?;
        if kd.has(props::WAVEFRONT_SIZE32) {
            return Err(IsaError::Illegal { pc: kd.entry, message: "wave32 kernel on a wave64 device".into() });
        }
        let items = d.work_items_per_wg() as usize;
        let nwaves = items.div_ceil(LANES).max(1);
        let total_v = kd.vgprs().min(512);
        let (nv, na) = if total_v > kd.accum_offset() { (kd.accum_offset(), total_v - kd.accum_offset()) } else { (total_v, 0) };
        let lds_size = kd.group_segment_fixed_size.max(d.group_segment);
        let counts: [u64; 3] = std::array::from_fn(|k| u64::from(d.grid[k]).div_ceil(u64::from(d.wg[k].max(1))));
        Ok(Run {
            launch: launch.clone(),
            code: Code::new(kd.entry, launch.target),
            apertures: Apertures::default(),
            nwaves,
            vgprs: (nv.min(256), na.min(256)),
            private_size: kd.private_segment_fixed_size.max(d.private_segment),
            lds_size,
            counts,
            first: u64::from(index),
            stride: u64::from(parts.max(1)),
            total: (counts[0] * counts[1] * counts[2]).saturating_sub(u64::from(index)).div_ceil(u64::from(parts.max(1))),
            limit: resident_limit(launch.cus, nwaves, u64::from(lds_size), launch.lds_per_cu).div_ceil(parts.max(1) as usize),
            stats: Stats::default(),
            progress: Progress { started: std::time::Instant::now(), next_report: REPORT_EVERY, kernel: d.kernel_object },
            resident: Vec::new(),
            spare: Vec::new(),
            next: 0,
            admit: 1,
            gws: Gws::default(),
            current_lds: Lds::default(),
            lanes: Box::new([[0; LANES]; 4]),
            lanes32: Box::new([[0; LANES]; 4]),
            kd,
            mem,
        })
    }

    /// Starts the workgroups due, then gives each resident workgroup one turn.
    pub fn round(&mut self, services: &Services) -> Result<Round, IsaError> {
        let mut started = false;
        while self.admit > 0 && self.resident.len() < self.limit && self.next < self.total {
            let (nwaves, (nv, na), private_size, lds_size) = (self.nwaves, self.vgprs, self.private_size, self.lds_size);
            let mut g = self.spare.pop().unwrap_or_else(|| Group {
                waves: (0..nwaves).map(|_| Wave::new(nv, na, private_size)).collect(),
                lds: Lds::new(lds_size as usize),
            });
            let (next, c) = (self.first + self.next * self.stride, self.counts);
            let id = [(next % c[0]) as u32, ((next / c[0]) % c[1]) as u32, (next / (c[0] * c[1])) as u32];
            g.lds.clear();
            setup_workgroup(&mut g.waves, &self.kd, &self.launch, id, &self.apertures);
            self.resident.push(g);
            self.next += 1;
            self.admit -= 1;
            started = true;
        }
        if self.resident.is_empty() {
            return Ok(Round::Done(self.stats));
        }
        let mut ctx = Ctx {
            mem: &self.mem,
            lds: &mut self.current_lds,
            apertures: self.apertures,
            clock: services.clock,
            interrupt: services.interrupt,
            lanes: &mut self.lanes,
            lanes32: &mut self.lanes32,
        };
        let mut moved = started;
        for g in self.resident.iter_mut() {
            std::mem::swap(ctx.lds, &mut g.lds);
            let turn = run_group(&mut g.waves, &mut self.code, &mut ctx, &mut self.gws, &mut self.progress);
            std::mem::swap(ctx.lds, &mut g.lds);
            moved |= turn?;
        }
        let before = self.resident.len();
        let mut k = 0;
        while k < self.resident.len() {
            if self.resident[k].waves.iter().all(|w| w.state == WaveState::Ended) {
                let g = self.resident.swap_remove(k);
                self.stats.workgroups += 1;
                self.stats.waves += g.waves.iter().filter(|w| w.executed > 0).count() as u64;
                self.stats.instructions += g.waves.iter().map(|w| w.executed).sum::<u64>();
                self.spare.push(g);
            } else {
                k += 1;
            }
        }
        let finished = before - self.resident.len();
        // Every resident workgroup waits: one more may be what they wait for.
        self.admit = finished.max(1);
        if finished > 0 || moved || (self.resident.len() < self.limit && self.next < self.total) {
            // (When the last workgroup ended, the next round says Done.)
            return Ok(Round::Moved);
        }
        if let Some(e) = stuck(&self.resident, &self.gws, self.total - self.next) {
            return Err(e);
        }
        Ok(Round::Idle)
    }
}

/// Runs every workgroup of `r` for its memory effect, on the calling thread (see [`Run`]);
/// sleeps (10 µs doubling to 1 ms) while every wave sleeps. It never spins.
pub fn run(mut r: Run, services: &Services) -> Result<Stats, IsaError> {
    let mut idle = IDLE_FIRST;
    loop {
        match r.round(services)? {
            Round::Done(s) => return Ok(s),
            Round::Moved => idle = IDLE_FIRST,
            Round::Idle => {
                std::thread::sleep(idle);
                idle = (idle * 2).min(IDLE_MAX);
            }
        }
    }
}

/// When every wave left waits at a GWS barrier or at its workgroup's barrier, and no
/// workgroup can start, nothing can ever move: the error says so (the GPU would hang).
fn stuck(resident: &[Group], gws: &Gws, not_started: u64) -> Option<IsaError> {
    let mut at = None;
    for w in resident.iter().flat_map(|g| g.waves.iter()) {
        match w.state {
            WaveState::Ended | WaveState::Barrier => {}
            WaveState::Gws { res, generation } if !gws.released(res, generation) => at = Some((res, w.pc)),
            _ => return None,
        }
    }
    let (res, pc) = at?;
    Some(IsaError::Illegal {
        pc,
        message: format!(
            "ds_gws_barrier: {} waves wait at GWS resource {res} and no other wave can arrive ({} workgroups are resident, all waiting; {not_started} more cannot start until one ends: a grid sync needs the whole grid resident at once)",
            gws.waiting(res),
            resident.len()
        ),
    })
}

fn setup_workgroup(waves: &mut [Wave], kd: &Descriptor, launch: &Launch, id: [u32; 3], ap: &Apertures) {
    let d = &launch.dispatch;
    // A partial workgroup at the grid's edge has fewer work-items in that dimension.
    let dims: [u32; 3] = std::array::from_fn(|k| {
        let wg = u32::from(d.wg[k].max(1));
        wg.min(d.grid[k].saturating_sub(id[k] * wg)).max(1)
    });
    let items = (dims[0] * dims[1] * dims[2]) as usize;
    for (k, w) in waves.iter_mut().enumerate() {
        w.s = [0; 128];
        w.scc = false;
        w.v.fill(0);
        w.a.fill(0);
        w.private.clear();
        w.executed = 0;
        w.id = k as u32;
        w.pc = kd.entry;
        w.mode = kd.initial_mode();
        let mut s = 0u16;
        let mut push = |w: &mut Wave, v: u32| {
            w.set_s32(s, v);
            s += 1;
        };
        if kd.has(props::PRIVATE_SEGMENT_BUFFER) {
            push(w, ap.private_buffer as u32);
            push(w, (ap.private_buffer >> 32) as u32 & 0xffff);
            push(w, u32::MAX);
            push(w, 0x00e0_0000); // add_tid_enable (swizzled scratch)
        }
        // The 64-bit user SGPR pairs, in this order.
        for (prop, value) in [(props::DISPATCH_PTR, launch.packet), (props::QUEUE_PTR, launch.queue), (props::KERNARG_SEGMENT_PTR, d.kernarg), (props::DISPATCH_ID, launch.dispatch_id)] {
            if kd.has(prop) {
                push(w, value as u32);
                push(w, (value >> 32) as u32);
            }
        }
        if kd.has(props::FLAT_SCRATCH_INIT) {
            push(w, 0);
            push(w, w.private_size);
        }
        if kd.has(props::PRIVATE_SEGMENT_SIZE) {
            let size = w.private_size;
            push(w, size);
        }
        let mut s = kd.user_sgprs() as u16;
        for (k, &x) in id.iter().enumerate() {
            if kd.workgroup_id_enabled(k) {
                w.set_s32(s, x);
                s += 1;
            }
        }
        if kd.workgroup_info() {
            w.set_s32(s, 0);
            s += 1;
        }
        if kd.private_segment() && !launch.target.architected_flat_scratch() {
            w.set_s32(s, 0); // private segment wave byte offset: each wave has its own memory
        }
        w.set_s32(M0, 0);
        w.set_s64(VCC_LO, 0);
        let mut exec = 0u64;
        for l in 0..LANES {
            let t = k * LANES + l;
            if t >= items {
                break;
            }
            let t = t as u32;
            let (x, y, z) = (t % dims[0], (t / dims[0]) % dims[1], t / (dims[0] * dims[1]));
            w.set_vr(0, l, x | y << 10 | z << 20);
            exec |= 1 << l;
        }
        w.set_exec(exec);
        w.state = if exec == 0 { WaveState::Ended } else { WaveState::Running };
    }
}

/// A dispatch that runs long says so (a kernel waiting for memory that nobody writes never
/// ends, as on the GPU).
struct Progress {
    started: std::time::Instant,
    next_report: std::time::Duration,
    kernel: u64,
}

const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Instructions between two looks at the clock.
const CLOCK_EVERY: u64 = 1 << 22;

impl Progress {
    /// Called every `CLOCK_EVERY` instructions of a wave.
    fn check(&mut self, w: &Wave) {
        if self.started.elapsed() >= self.next_report {
            self.next_report += REPORT_EVERY;
            tracing::warn!(
                kernel_object = format_args!("{:#x}", self.kernel),
                wave = w.id,
                pc = format_args!("{:#x}", w.pc),
                wave_instructions = w.executed,
                secs = self.started.elapsed().as_secs(),
                "xhsa-emu: the ISA interpreter is still running this dispatch"
            );
        }
    }
}

/// One turn of a workgroup: its waves run until each has ended or waits (workgroup barrier
/// released whenever every wave not ended is at it). Returns whether anything moved: a wave
/// ended, used its quantum up, passed a barrier or a GWS barrier.
fn run_group(waves: &mut [Wave], code: &mut Code, ctx: &mut Ctx, gws: &mut Gws, progress: &mut Progress) -> Result<bool, IsaError> {
    for w in waves.iter_mut().filter(|w| matches!(w.state, WaveState::Sleeping | WaveState::Preempted)) {
        w.state = WaveState::Running;
    }
    let mut moved = release_gws(waves, gws);
    loop {
        for w in waves.iter_mut() {
            if w.state == WaveState::Running {
                moved |= run_wave(w, code, ctx, gws, progress)?;
            }
        }
        if waves.iter().all(|w| w.state == WaveState::Ended) {
            return Ok(true);
        }
        let mut again = false;
        if waves.iter().all(|w| matches!(w.state, WaveState::Ended | WaveState::Barrier)) {
            // Every wave not ended waits at the barrier: release them.
            for w in waves.iter_mut().filter(|w| w.state == WaveState::Barrier) {
                w.state = WaveState::Running;
            }
            again = true;
        }
        // A GWS barrier completed by a later wave of this workgroup releases earlier ones.
        again |= release_gws(waves, gws);
        if !again {
            return Ok(moved);
        }
        moved = true;
    }
}

/// Sets the waves whose GWS barrier has completed running again; returns whether there were any.
fn release_gws(waves: &mut [Wave], gws: &Gws) -> bool {
    let mut any = false;
    for w in waves.iter_mut() {
        if let WaveState::Gws { res, generation } = w.state {
            if gws.released(res, generation) {
                w.state = WaveState::Running;
                any = true;
            }
        }
    }
    any
}

/// Runs one wave until it ends, waits (workgroup barrier, GWS barrier, `s_sleep`) or has run
/// [`QUANTUM`] instructions and takes a branch. Returns whether it passed a GWS barrier or
/// used its quantum up (ending is seen by the caller).
fn run_wave(w: &mut Wave, code: &mut Code, ctx: &mut Ctx, gws: &mut Gws, progress: &mut Progress) -> Result<bool, IsaError> {
    let yield_at = w.executed + QUANTUM;
    let mut moved = false;
    loop {
        let pc = w.pc;
        let (inst, h) = code.fetch(ctx.mem, pc)?;
        let Some(h) = h else {
            return Err(IsaError::Unimplemented { pc, name: inst.name, family: inst.family, op: inst.op });
        };
        w.executed += 1;
        if w.executed.is_multiple_of(CLOCK_EVERY) {
            progress.check(w);
        }
        let step = h(w, inst, ctx).map_err(|e| match e {
            ExecError::Fault(f) => IsaError::Fault(f),
            ExecError::Unimplemented => IsaError::Unimplemented { pc, name: inst.name, family: inst.family, op: inst.op },
            ExecError::Illegal(m) => IsaError::Illegal { pc, message: format!("{}: {m}", inst.name) },
        })?;
        // The common case first, as a plain branch rather than through the match's jump table.
        if step == Step::Next {
            w.pc = pc + u64::from(inst.len);
            continue;
        }
        match step {
            Step::Next => w.pc = pc + u64::from(inst.len),
            Step::Jump(t) => {
                w.pc = t;
                if w.executed >= yield_at {
                    w.state = WaveState::Preempted;
                    return Ok(true);
                }
            }
            Step::Barrier => {
                w.pc = pc + u64::from(inst.len);
                w.state = WaveState::Barrier;
                return Ok(moved);
            }
            Step::Sleep => {
                w.pc = pc + u64::from(inst.len);
                w.state = WaveState::Sleeping;
                return Ok(moved);
            }
            Step::Gws(op) => {
                w.pc = pc + u64::from(inst.len);
                match op {
                    GwsOp::Init { res, .. } => gws.init(res),
                    GwsOp::Barrier { res, value } => match gws.arrive(res, value) {
                        Arrival::Released => moved = true,
                        Arrival::Wait { generation } => {
                            w.state = WaveState::Gws { res, generation };
                            return Ok(moved);
                        }
                    },
                }
            }
            Step::End => {
                w.state = WaveState::Ended;
                return Ok(moved);
            }
        }
    }
}
