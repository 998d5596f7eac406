//! Running a dispatch: each workgroup in turn, its waves set up as the CP does from the kernel
//! descriptor (user and system SGPRs, work-item ids in v0, EXEC), then run cooperatively on the
//! calling thread: a wave runs until it ends or reaches `s_barrier`; when every wave still
//! running waits at the barrier, all are released. No thread waits on another.
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
use super::exec::{self, Ctx, ExecError, Handler, Step};
use super::lds::Lds;
use super::memory::Memory;
use super::operand::{M0, VCC_LO};
use super::target::Target;
use super::wave::{Apertures, Wave, WaveState, LANES};
use super::IsaError;
use crate::kernels::{Dispatch, Fault};

/// What the dispatch's waves are given besides the packet's fields.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    pub dispatch: &'a Dispatch,
    /// Address of the AQL dispatch packet (the dispatch ptr SGPRs).
    pub packet: u64,
    /// Address of the queue's `amd_queue_t` (the queue ptr SGPRs).
    pub queue: u64,
    pub dispatch_id: u64,
    /// The ISA of the kernel's code object.
    pub target: Target,
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

/// Runs every workgroup of the dispatch for its memory effect.
pub fn run(launch: &Launch, mem: &Memory, clock: &dyn Fn() -> u64) -> Result<Stats, IsaError> {
    let d = launch.dispatch;
    let kd = Descriptor::read(mem, d.kernel_object).map_err(IsaError::Fault)?;
    if kd.has(props::WAVEFRONT_SIZE32) {
        return Err(IsaError::Illegal { pc: kd.entry, message: "wave32 kernel on a wave64 device".into() });
    }
    let apertures = Apertures::default();
    let mut code = Code::new(kd.entry, launch.target);
    let items = d.work_items_per_wg() as usize;
    let nwaves = items.div_ceil(LANES).max(1);
    let total_v = kd.vgprs().min(512);
    let (nv, na) = if total_v > kd.accum_offset() { (kd.accum_offset(), total_v - kd.accum_offset()) } else { (total_v, 0) };
    let private_size = kd.private_segment_fixed_size.max(d.private_segment);
    let mut waves: Vec<Wave> = (0..nwaves).map(|_| Wave::new(nv.min(256), na.min(256), private_size)).collect();
    let mut lds = Lds::new((kd.group_segment_fixed_size.max(d.group_segment)) as usize);
    let counts: [u64; 3] = std::array::from_fn(|k| u64::from(d.grid[k]).div_ceil(u64::from(d.wg[k].max(1))));
    let mut stats = Stats::default();
    let mut progress = Progress { started: std::time::Instant::now(), next_report: REPORT_EVERY, kernel: d.kernel_object };
    for wz in 0..counts[2] {
        for wy in 0..counts[1] {
            for wx in 0..counts[0] {
                let id = [wx as u32, wy as u32, wz as u32];
                lds = Lds::new(lds.len());
                setup_workgroup(&mut waves, &kd, launch, id, &apertures);
                let mut ctx = Ctx { mem, lds: &mut lds, apertures, clock, lanes: Box::new([[0; LANES]; 4]), lanes32: Box::new([[0; LANES]; 4]) };
                run_workgroup(&mut waves, &mut code, &mut ctx, &mut progress)?;
                stats.workgroups += 1;
                stats.waves += waves.iter().filter(|w| w.executed > 0).count() as u64;
                stats.instructions += waves.iter().map(|w| w.executed).sum::<u64>();
            }
        }
    }
    Ok(stats)
}

fn setup_workgroup(waves: &mut [Wave], kd: &Descriptor, launch: &Launch, id: [u32; 3], ap: &Apertures) {
    let d = launch.dispatch;
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

/// A dispatch that runs long says so (a kernel waiting for memory the host or another
/// workgroup writes never ends here: workgroups run one after another).
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

fn run_workgroup(waves: &mut [Wave], code: &mut Code, ctx: &mut Ctx, progress: &mut Progress) -> Result<(), IsaError> {
    loop {
        for w in waves.iter_mut() {
            if w.state == WaveState::Running {
                run_wave(w, code, ctx, progress)?;
            }
        }
        if waves.iter().all(|w| w.state == WaveState::Ended) {
            return Ok(());
        }
        // Every wave not ended waits at the barrier: release them.
        for w in waves.iter_mut().filter(|w| w.state == WaveState::Barrier) {
            w.state = WaveState::Running;
        }
    }
}

/// Runs one wave until it ends or waits at a barrier.
fn run_wave(w: &mut Wave, code: &mut Code, ctx: &mut Ctx, progress: &mut Progress) -> Result<(), IsaError> {
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
        match step {
            Step::Next => w.pc = pc + u64::from(inst.len),
            Step::Jump(t) => w.pc = t,
            Step::Barrier => {
                w.pc = pc + u64::from(inst.len);
                w.state = WaveState::Barrier;
                return Ok(());
            }
            Step::End => {
                w.state = WaveState::Ended;
                return Ok(());
            }
        }
    }
}
