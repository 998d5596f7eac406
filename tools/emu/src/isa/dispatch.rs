//! Running a dispatch: workgroups become resident (up to what the device holds at once), their
//! waves set up as the CP does from the kernel descriptor (user and system SGPRs, work-item ids
//! in v0, EXEC), and run in turns on the calling thread: a wave runs until it ends, reaches
//! `s_barrier` (released when every wave of its workgroup still running is there), a GWS
//! barrier or `s_sleep`, or has run a quantum; see [`Run`] for when workgroups start. No
//! thread waits on another. Within its workgroup's turn the waves take turns of a few
//! instructions ([`SLICE`] at the start and after each barrier, doubling each round up to
//! [`MAX_SLICE`]), so that they leave a barrier together as on a compute unit, where they issue
//! side by side: code that reads LDS after a barrier while one wave goes on to overwrite it
//! before the next barrier sees what it sees on the GPU (rocSOLVER's potf2 small kernel does:
//! every wave reads the diagonal element, and thread 0 writes its square root over it about
//! forty instructions later; run one wave to its next barrier at a time, the others read the
//! square root).
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

use super::decode::{self, DecodeError, Family, Inst};
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

/// An instruction tracer (for diagnosis: the host rig's tests use it to check each instruction a
/// lane executed against an independent model): called before and after every instruction of
/// every wave while one is set, with the wave, the instruction's address and the instruction.
pub type Tracer = Box<dyn FnMut(&Wave, u64, &Inst, TracePoint) + Send>;

/// When a [`Tracer`] is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracePoint {
    Before,
    After,
}

/// Whether a tracer is set: looked at once per wave turn, so that untraced runs pay one load.
static TRACING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static TRACER: std::sync::Mutex<Option<Tracer>> = std::sync::Mutex::new(None);

/// Sets (or with `None` removes) the process's instruction tracer; returns the previous one.
/// Every interpreter thread calls it, one instruction at a time (it is behind a lock).
pub fn set_tracer(t: Option<Tracer>) -> Option<Tracer> {
    let mut g = TRACER.lock().unwrap_or_else(|p| p.into_inner());
    TRACING.store(t.is_some(), std::sync::atomic::Ordering::SeqCst);
    std::mem::replace(&mut *g, t)
}

fn trace(w: &Wave, pc: u64, i: &Inst, at: TracePoint) {
    if let Some(t) = TRACER.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        t(w, pc, i, at);
    }
}

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

/// A decoded instruction and what executes it (an unimplemented opcode's handler fails with
/// [`ExecError::Unimplemented`] when a wave reaches it).
struct Entry {
    inst: Inst,
    h: Handler,
}

fn unimplemented(_: &mut Wave, _: &Inst, _: &mut Ctx) -> Result<Step, ExecError> {
    Err(ExecError::Unimplemented)
}

/// Decoded code, in blocks: the instructions from an address up to and including the first
/// one that may change the flow (a SOPP other than `s_nop`/`s_waitcnt`, an unimplemented
/// one), at most [`BLOCK_MAX`] of them, or up to the first that does not decode. A wave runs a
/// block's instructions one after the other without looking its code up again; any step other
/// than the next instruction leaves the block. A branch into the middle of a block starts a
/// block of its own there.
struct Code {
    base: u64,
    target: Target,
    /// Block index + 1 by (address - base) / 4 for addresses within [`NEAR`] after the entry;
    /// 0: not decoded yet.
    near: Vec<u32>,
    far: HashMap<u64, u32>,
    blocks: Vec<Box<[Entry]>>,
}

/// Instructions within this many bytes after the entry are found through a vector.
const NEAR: u64 = 1 << 20;

/// Instructions in a block at most.
const BLOCK_MAX: usize = 256;

impl Code {
    fn new(base: u64, target: Target) -> Code {
        Code { base, target, near: Vec::new(), far: HashMap::new(), blocks: Vec::new() }
    }

    /// The block that starts at `pc`, decoded on first use. An instruction at `pc` itself that
    /// cannot be read or decoded is the error; a later one only ends the block.
    fn block(&mut self, mem: &Memory, pc: u64) -> Result<&[Entry], IsaError> {
        let off = pc.wrapping_sub(self.base);
        let near = off < NEAR && pc.is_multiple_of(4);
        let found = if near {
            self.near.get((off / 4) as usize).copied().unwrap_or(0)
        } else {
            self.far.get(&pc).copied().unwrap_or(0)
        };
        if found != 0 {
            return Ok(&self.blocks[found as usize - 1]);
        }
        let mut entries = Vec::new();
        let mut at = pc;
        // The entry of the `s_set_gpr_idx_on` whose region is open (exec::gpr_idx): the vector
        // ALU instructions up to its `s_set_gpr_idx_off` run with the index applied, and the
        // block goes on past BLOCK_MAX until the region ends.
        let mut region: Option<usize> = None;
        while entries.len() < BLOCK_MAX || region.is_some() {
            let inst = match self.decode(mem, at) {
                Ok(i) => i,
                Err(e) if entries.is_empty() => return Err(e),
                Err(_) => break,
            };
            let mut h = exec::handler(&inst);
            if region.is_some() && h.is_some() && exec::gpr_idx::applies_to(&inst) {
                h = Some(exec::gpr_idx::indexed);
            }
            if exec::gpr_idx::starts_region(&inst) {
                region = Some(entries.len());
            } else if exec::gpr_idx::ends_region(&inst) {
                region = None;
            }
            let last = h.is_none() || ends_block(&inst) || entries.len() >= 2 * BLOCK_MAX;
            at += u64::from(inst.len);
            entries.push(Entry { inst, h: h.unwrap_or(unimplemented) });
            if last {
                break;
            }
        }
        if let Some(start) = region {
            // The region does not end in this block: its instructions after the block would
            // run without the index.
            entries[start].h = exec::gpr_idx::unclosed;
        }
        self.blocks.push(entries.into_boxed_slice());
        let id = self.blocks.len() as u32;
        if near {
            let idx = (off / 4) as usize;
            if self.near.len() <= idx {
                self.near.resize(idx + 1, 0);
            }
            self.near[idx] = id;
        } else {
            self.far.insert(pc, id);
        }
        Ok(&self.blocks[id as usize - 1])
    }

    /// Reads and decodes the instruction at `pc`.
    fn decode(&self, mem: &Memory, pc: u64) -> Result<Inst, IsaError> {
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
        match decode::decode_for(self.target, &words[..n]) {
            Ok(i) => Ok(i),
            Err(DecodeError::Truncated) => {
                Err(IsaError::Fault(Fault { addr: pc + 4 * n as u64, write: false }))
            }
            Err(e) => Err(IsaError::Decode { pc, error: e }),
        }
    }
}

/// Whether a block ends after `i`: program control (branches, `s_endpgm`, barriers, sleeps,
/// traps: the SOPP group but for `s_nop` and `s_waitcnt`) and the SOP1 jumps.
fn ends_block(i: &Inst) -> bool {
    use super::decode::names::{sop1, sopp};
    match i.family {
        Family::Sopp => !matches!(i.op, sopp::S_NOP | sopp::S_WAITCNT | sopp::S_SET_GPR_IDX_MODE),
        Family::Sop1 => matches!(
            i.op,
            sop1::S_SETPC_B64 | sop1::S_SWAPPC_B64 | sop1::S_RFE_B64 | sop1::S_CBRANCH_JOIN
        ),
        _ => false,
    }
}

/// Workgroups resident on the device at once, as HIP's occupancy calculation for gfx9 counts
/// them (and checks cooperative launches against): 32 waves per CU (8 per SIMD), the LDS a
/// CU has, times the CUs. Register limits are left out, so the count is never below HIP's.
pub fn resident_limit(cus: u32, waves_per_group: usize, lds_bytes: u64, lds_per_cu: u32) -> usize {
    let by_waves = (32 / waves_per_group.max(1)).max(1);
    let by_lds =
        u64::from(lds_per_cu).checked_div(lds_bytes).map_or(usize::MAX, |n| n.max(1) as usize);
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

/// Instructions a wave runs before the next wave of its workgroup has its turn, in the first
/// round after the workgroup starts or leaves a barrier; each further round doubles it, up to
/// [`MAX_SLICE`] (see the module's doc).
pub const SLICE: u64 = 4;
pub const MAX_SLICE: u64 = 4096;

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
/// more whenever one ends, and more whenever a round of turns ends with no workgroup ended
/// (every resident one waiting at `s_sleep` or a GWS barrier, or its waves having used a
/// quantum up), since those may wait for a workgroup that has not started: one after the first
/// such round, twice as many after each further one in a row. So ordinary kernels run one
/// workgroup after another
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
    /// Workgroups to start after a round in which none ended: 1, doubling with each such round
    /// in a row (see [`Run`]).
    grow: usize,
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
    pub fn part(
        launch: &Launch,
        mem: Memory<'m>,
        index: u32,
        parts: u32,
    ) -> Result<Run<'m>, IsaError> {
        let d = &launch.dispatch;
        let kd = Descriptor::read(&mem, d.kernel_object).map_err(IsaError::Fault)?;
        if kd.has(props::WAVEFRONT_SIZE32) {
            return Err(IsaError::Illegal {
                pc: kd.entry,
                message: "wave32 kernel on a wave64 device".into(),
            });
        }
        let items = d.work_items_per_wg() as usize;
        let nwaves = items.div_ceil(LANES).max(1);
        let total_v = kd.vgprs().min(512);
        let (nv, na) = if total_v > kd.accum_offset() {
            (kd.accum_offset(), total_v - kd.accum_offset())
        } else {
            (total_v, 0)
        };
        let lds_size = kd.group_segment_fixed_size.max(d.group_segment);
        let counts = d.workgroup_counts();
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
            total: d
                .workgroups()
                .saturating_sub(u64::from(index))
                .div_ceil(u64::from(parts.max(1))),
            limit: resident_limit(launch.cus, nwaves, u64::from(lds_size), launch.lds_per_cu)
                .div_ceil(parts.max(1) as usize),
            stats: Stats::default(),
            progress: Progress {
                started: std::time::Instant::now(),
                cpu_started: crate::cp::clock::thread_cpu_us(),
                next_report: REPORT_EVERY,
                kernel: d.kernel_object,
            },
            resident: Vec::new(),
            spare: Vec::new(),
            next: 0,
            admit: 1,
            grow: 1,
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
            let (nwaves, (nv, na), private_size, lds_size) =
                (self.nwaves, self.vgprs, self.private_size, self.lds_size);
            let mut g = self.spare.pop().unwrap_or_else(|| Group {
                waves: (0..nwaves).map(|_| Wave::new(nv, na, private_size)).collect(),
                lds: Lds::new(lds_size as usize),
            });
            let (next, c) = (self.first + self.next * self.stride, self.counts);
            let id = [
                (next % c[0]) as u32,
                ((next / c[0]) % c[1]) as u32,
                (next / (c[0] * c[1])) as u32,
            ];
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
            let turn = run_group(
                &mut g.waves,
                &mut self.code,
                &mut ctx,
                &mut self.gws,
                &mut self.progress,
            );
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
        // As many start as ended. When none ended, the resident ones may wait for one that has
        // not started: one more, then twice as many with each such round in a row, so that
        // workgroups that wait for all the others (a grid barrier of hundreds of workgroups
        // spinning on a flag) are all resident after a few rounds, not one round per
        // workgroup with every resident wave spinning its quantum in each.
        if finished > 0 {
            self.grow = 1;
            self.admit = finished;
        } else {
            self.admit = self.grow;
            self.grow = (self.grow * 2).min(self.limit.max(1));
        }
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
            WaveState::Gws { res, generation } if !gws.released(res, generation) => {
                at = Some((res, w.pc))
            }
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

fn setup_workgroup(
    waves: &mut [Wave],
    kd: &Descriptor,
    launch: &Launch,
    id: [u32; 3],
    ap: &Apertures,
) {
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
        for (prop, value) in [
            (props::DISPATCH_PTR, launch.packet),
            (props::QUEUE_PTR, launch.queue),
            (props::KERNARG_SEGMENT_PTR, d.kernarg),
            (props::DISPATCH_ID, launch.dispatch_id),
        ] {
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
    /// The thread's CPU time then (µs): the warning's `cpu_secs` is the thread's CPU time
    /// since (shared with any other dispatch the thread runs meanwhile).
    cpu_started: u64,
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
            let cpu = crate::cp::clock::thread_cpu_us().saturating_sub(self.cpu_started);
            tracing::warn!(
                kernel_object = format_args!("{:#x}", self.kernel),
                wave = w.id,
                pc = format_args!("{:#x}", w.pc),
                wave_instructions = w.executed,
                secs = self.started.elapsed().as_secs(),
                cpu_secs = format_args!("{:.1}", cpu as f64 * 1e-6),
                "xhsa-emu: the ISA interpreter is still running this dispatch"
            );
        }
    }
}

/// One turn of a workgroup: its waves run until each has ended or waits (workgroup barrier
/// released whenever every wave not ended is at it). Returns whether anything moved: a wave
/// ended, used its quantum up, passed a barrier or a GWS barrier.
fn run_group(
    waves: &mut [Wave],
    code: &mut Code,
    ctx: &mut Ctx,
    gws: &mut Gws,
    progress: &mut Progress,
) -> Result<bool, IsaError> {
    for w in
        waves.iter_mut().filter(|w| matches!(w.state, WaveState::Sleeping | WaveState::Preempted))
    {
        w.state = WaveState::Running;
    }
    let mut moved = release_gws(waves, gws);
    loop {
        // Slices round the waves until none is running (each has ended or waits). A wave's
        // quantum counts from here (the turn's start, or the barrier the waves left), across
        // its slices.
        let yield_at: Vec<u64> = waves.iter().map(|w| w.executed + QUANTUM).collect();
        let mut slice = SLICE;
        loop {
            let mut sliced = false;
            for (w, &y) in waves.iter_mut().zip(&yield_at) {
                if w.state == WaveState::Running {
                    // A set tracer runs the traced copy of the loop, out of line (looked at once
                    // per turn; the untraced loops carry no test for it).
                    moved |= if TRACING.load(std::sync::atomic::Ordering::Relaxed) {
                        run_wave_traced(w, code, ctx, gws, progress, slice, y)?
                    } else if slice < MAX_SLICE {
                        run_wave::<true, false>(w, code, ctx, gws, progress, slice, y)?
                    } else {
                        run_wave::<false, false>(w, code, ctx, gws, progress, slice, y)?
                    };
                    sliced |= w.state == WaveState::Running;
                }
            }
            if !sliced {
                break;
            }
            slice = (slice * 2).min(MAX_SLICE);
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

/// [`run_wave`] with the tracer called around every instruction.
#[cold]
#[inline(never)]
fn run_wave_traced(
    w: &mut Wave,
    code: &mut Code,
    ctx: &mut Ctx,
    gws: &mut Gws,
    progress: &mut Progress,
    slice: u64,
    yield_at: u64,
) -> Result<bool, IsaError> {
    run_wave::<true, true>(w, code, ctx, gws, progress, slice, yield_at)
}

/// Runs one wave until it ends, waits (workgroup barrier, GWS barrier, `s_sleep`), has reached
/// `yield_at` instructions (its [`QUANTUM`]) and takes a branch (it is then preempted), or has run `slice`
/// instructions (it stays running: the next wave of the workgroup has its turn): with `FINE`
/// the slice is looked at after every instruction (the short slices after a barrier), else
/// between blocks only (the hot loop stays as it was). Returns whether it passed a GWS barrier
/// or used its quantum up (ending is seen by the caller).
fn run_wave<const FINE: bool, const TRACED: bool>(
    w: &mut Wave,
    code: &mut Code,
    ctx: &mut Ctx,
    gws: &mut Gws,
    progress: &mut Progress,
    slice: u64,
    yield_at: u64,
) -> Result<bool, IsaError> {
    let slice_end = w.executed + slice;
    let mut moved = false;
    loop {
        let block = code.block(ctx.mem, w.pc)?;
        for Entry { inst, h } in block {
            let pc = w.pc;
            w.executed += 1;
            if w.executed.is_multiple_of(CLOCK_EVERY) {
                progress.check(w);
            }
            let step = if TRACED {
                trace(w, pc, inst, TracePoint::Before);
                let step = h(w, inst, ctx);
                trace(w, pc, inst, TracePoint::After);
                step
            } else {
                h(w, inst, ctx)
            };
            let step = step.map_err(|e| match e {
                ExecError::Fault(f) => IsaError::Fault(f),
                ExecError::Unimplemented => IsaError::Unimplemented {
                    pc,
                    name: inst.name,
                    family: inst.family,
                    op: inst.op,
                },
                ExecError::Illegal(m) => {
                    IsaError::Illegal { pc, message: format!("{}: {m}", inst.name) }
                }
            })?;
            // The common case first, as a plain test of the variant rather than through a jump
            // table (`==` compiles to one): the block's next instruction.
            if matches!(step, Step::Next) {
                w.pc = pc + u64::from(inst.len);
                if FINE && w.executed >= slice_end {
                    return Ok(moved);
                }
                continue;
            }
            match step {
                Step::Next => unreachable!("handled above"),
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
            // Any step but the next instruction leaves the block: look the code up at the new pc.
            break;
        }
        // The slice is looked at between blocks (they end at program control), not after each
        // instruction.
        if w.executed >= slice_end {
            return Ok(moved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::operand;
    use crate::sys::devmem::fake::FakeMemory;
    use crate::sys::devmem::DeviceMemory;

    const BASE: u64 = 0x1000;
    const S_MOV_B32_S0_1: u32 = 0xbe80_0081;
    const S_ADD_U32_S0_S0_1: u32 = 0x8000_8100;
    const S_ENDPGM: u32 = 0xbf81_0000;
    const S_NOP: u32 = 0xbf80_0000;
    /// Not implemented (tests/isa/unimplemented.hip's instruction).
    const S_RFE_B64: u32 = 0xbe80_1f00;
    /// A MIMG word: an encoding the decoder does not take.
    const MIMG: u32 = 0xf000_0000;

    /// Code words at `BASE`, the only memory accessible.
    fn with_code<R>(words: &[u32], f: impl FnOnce(&Memory, &mut Code) -> R) -> R {
        let mem = FakeMemory::default();
        for (k, w) in words.iter().enumerate() {
            mem.write(BASE + 4 * k as u64, &w.to_le_bytes());
        }
        let end = BASE + 4 * words.len() as u64;
        let accessible = move |a: u64, n: u64| a >= BASE && a + n <= end;
        let m = Memory::new(&mem, &accessible);
        f(&m, &mut Code::new(BASE, Target::Gfx90a))
    }

    fn names(block: &[Entry]) -> Vec<&'static str> {
        block.iter().map(|e| e.inst.name).collect()
    }

    #[test]
    fn a_block_ends_at_program_control_and_before_what_does_not_decode() {
        with_code(
            &[S_MOV_B32_S0_1, S_NOP, S_ADD_U32_S0_S0_1, S_ENDPGM, MIMG, S_MOV_B32_S0_1],
            |m, code| {
                // s_nop does not end a block; s_endpgm does, so the MIMG word after it is never
                // decoded (and is no error).
                assert_eq!(
                    names(code.block(m, BASE).unwrap()),
                    ["s_mov_b32", "s_nop", "s_add_u32", "s_endpgm"]
                );
            },
        );
        with_code(&[S_MOV_B32_S0_1, MIMG], |m, code| {
            // A word that does not decode ends the block before it, and is the error of a
            // block that starts there.
            assert_eq!(names(code.block(m, BASE).unwrap()), ["s_mov_b32"]);
            assert!(
                matches!(code.block(m, BASE + 4), Err(IsaError::Decode { pc, .. }) if pc == BASE + 4)
            );
        });
        with_code(&[S_MOV_B32_S0_1], |m, code| {
            // So does the end of accessible memory: the fault of the instruction reached there.
            assert_eq!(names(code.block(m, BASE).unwrap()), ["s_mov_b32"]);
            assert!(
                matches!(code.block(m, BASE + 4), Err(IsaError::Fault(f)) if f.addr == BASE + 4 && !f.write)
            );
        });
    }

    #[test]
    fn an_unimplemented_instruction_ends_its_block_and_fails_only_when_run() {
        with_code(&[S_MOV_B32_S0_1, S_RFE_B64, S_MOV_B32_S0_1], |m, code| {
            let block = code.block(m, BASE).unwrap();
            assert_eq!(names(block), ["s_mov_b32", "s_rfe_b64"]);
            let mut w = Wave::new(4, 0, 0);
            let mut lds = Lds::new(0);
            let mut ctx = Ctx::for_test(m, &mut lds);
            assert_eq!((block[0].h)(&mut w, &block[0].inst, &mut ctx), Ok(Step::Next));
            assert_eq!(w.s[0], 1);
            assert_eq!(
                (block[1].h)(&mut w, &block[1].inst, &mut ctx),
                Err(ExecError::Unimplemented)
            );
        });
    }

    /// Runs the code at `BASE` on `w` until `s_endpgm`, block by block.
    fn run_to_end(m: &Memory, code: &mut Code, w: &mut Wave) -> Result<(), ExecError> {
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(m, &mut lds);
        let mut pc = BASE;
        loop {
            let block = code.block(m, pc).unwrap();
            for e in block {
                match (e.h)(w, &e.inst, &mut ctx)? {
                    Step::Next => pc += u64::from(e.inst.len),
                    Step::End => return Ok(()),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    /// Encodings from llvm-mc-15 -mcpu=gfx90a.
    const SET_GPR_IDX_ON_S2_SRC0: u32 = 0xbf11_0102;
    const SET_GPR_IDX_ON_3_SRC1_DST: u32 = 0xbf11_0a83;
    const SET_GPR_IDX_OFF: u32 = 0xbf9c_0000;
    const SET_GPR_IDX_MODE_DST: u32 = 0xbf9d_0008;
    const SET_GPR_IDX_IDX_S3: u32 = 0xbe80_3203;
    const V_MOV_B32_V0_V1: u32 = 0x7e00_0301;
    const V_MOV_B32_V2_V1: u32 = 0x7e04_0301;
    const V_MOV_B32_V0_V2: u32 = 0x7e00_0302;
    /// `v_add_f32_e64 v4, v5, v6`.
    const V_ADD_F32_V4_V5_V6: [u32; 2] = [0xd101_0004, 0x0002_0d05];
    const S_BRANCH_1: u32 = 0xbf82_0001;

    fn indexed_wave() -> Wave {
        let mut w = Wave::new(16, 0, 0);
        w.set_exec(!0);
        for l in 0..crate::isa::wave::LANES {
            for r in 0..16u16 {
                w.set_reg(
                    operand::VGPR0 + r,
                    l,
                    ((100 * u32::from(r) + l as u32) as f32).to_bits(),
                );
            }
        }
        w
    }

    #[test]
    fn vgpr_indexing_offsets_the_enabled_operands_inside_its_region_only() {
        use crate::isa::operand::{self as o, VGPR0};
        let v = |w: &Wave, r: u16, l: usize| f32::from_bits(w.reg(VGPR0 + r, l));
        // Index s2 = 3 on source 0: `v_mov_b32 v0, v1` reads v4; after the region, v1.
        with_code(
            &[SET_GPR_IDX_ON_S2_SRC0, V_MOV_B32_V0_V1, SET_GPR_IDX_OFF, V_MOV_B32_V2_V1, S_ENDPGM],
            |m, code| {
                let mut w = indexed_wave();
                w.s[2] = 3;
                run_to_end(m, code, &mut w).unwrap();
                assert_eq!((v(&w, 0, 5), v(&w, 2, 5)), (405.0, 105.0));
                assert_eq!(w.s[usize::from(o::M0)] & 0xf0ff, 3 | 1 << 12);
                assert_eq!(w.mode & exec::gpr_idx::MODE_GPR_IDX_EN, 0, "off again");
            },
        );
        // Index 3 on source 1 and the destination: v7 = v5 + v9; then index s3 = 1 and the
        // destination only: `v_mov_b32 v0, v2` writes v1.
        let [a0, a1] = V_ADD_F32_V4_V5_V6;
        with_code(
            &[
                SET_GPR_IDX_ON_3_SRC1_DST,
                a0,
                a1,
                SET_GPR_IDX_IDX_S3,
                SET_GPR_IDX_MODE_DST,
                V_MOV_B32_V0_V2,
                SET_GPR_IDX_OFF,
                S_ENDPGM,
            ],
            |m, code| {
                let mut w = indexed_wave();
                w.s[3] = 1;
                run_to_end(m, code, &mut w).unwrap();
                assert_eq!(v(&w, 7, 2), 502.0 + 902.0);
                assert_eq!(v(&w, 4, 2), 402.0, "the destination named is not written");
                assert_eq!((v(&w, 1, 2), v(&w, 0, 2)), (202.0, 2.0));
            },
        );
    }

    #[test]
    fn a_vgpr_index_past_the_registers_or_a_region_across_a_branch_is_refused() {
        with_code(
            &[SET_GPR_IDX_ON_S2_SRC0, V_MOV_B32_V0_V1, SET_GPR_IDX_OFF, S_ENDPGM],
            |m, code| {
                let mut w = indexed_wave();
                w.s[2] = 255;
                let e = run_to_end(m, code, &mut w).unwrap_err();
                assert!(
                    matches!(&e, ExecError::Illegal(msg) if msg.contains("past v255")),
                    "{e:?}"
                );
            },
        );
        with_code(
            &[
                SET_GPR_IDX_ON_S2_SRC0,
                S_BRANCH_1,
                S_NOP,
                V_MOV_B32_V0_V1,
                SET_GPR_IDX_OFF,
                S_ENDPGM,
            ],
            |m, code| {
                let mut w = indexed_wave();
                let e = run_to_end(m, code, &mut w).unwrap_err();
                assert!(
                    matches!(&e, ExecError::Illegal(msg) if msg.contains("across a branch")),
                    "{e:?}"
                );
            },
        );
    }

    #[test]
    fn a_branch_into_a_block_starts_a_block_there() {
        with_code(&[S_MOV_B32_S0_1, S_ADD_U32_S0_S0_1, S_ADD_U32_S0_S0_1, S_ENDPGM], |m, code| {
            assert_eq!(code.block(m, BASE).unwrap().len(), 4);
            assert_eq!(names(code.block(m, BASE + 8).unwrap()), ["s_add_u32", "s_endpgm"]);
            // Each is decoded once and found again.
            assert_eq!(code.block(m, BASE).unwrap().len(), 4);
            assert_eq!(code.blocks.len(), 2);
        });
    }
}
