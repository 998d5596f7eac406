//! Execution: one handler per implemented opcode, looked up once when an instruction is
//! decoded ([`handler`]) and called each time a wave executes it. An opcode without a handler
//! stops the dispatch when a wave reaches it ([`ExecError::Unimplemented`]): never a silent
//! wrong result.
//!
//! Groups, one file each: scalar ALU (`salu`), program control (`sopp`), scalar memory
//! (`smem`), the vector ALU's operand machinery (`valu`: sources, modifiers, DPP, SDWA,
//! destinations) and its opcodes (`vop`, `vcmp`, `vlane`; `fast32` for the plain 32-bit integer
//! ones), matrix multiply-add (`mfma`), LDS (`ds`), flat/global/scratch
//! memory (`flat`) and buffer memory (`mubuf`); gfx942's own opcodes (`cdna3`).

pub mod cdna3;
pub mod ds;
pub mod fast32;
pub mod fast64;
pub mod flat;
pub mod gpr_idx;
pub mod mfma;
pub mod mubuf;
pub mod salu;
pub mod smem;
pub mod sopp;
pub mod valu;
pub mod vcmp;
pub mod vlane;
pub mod vmem;
pub mod vop;

use super::decode::{Family, Inst};
use super::lds::Lds;
use super::memory::Memory;
use super::target::Target;
use super::wave::{Apertures, Wave};
use crate::kernels::Fault;

/// What the wave does after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The next instruction.
    Next,
    /// Continue at this address.
    Jump(u64),
    /// Wait at the workgroup barrier, then continue with the next instruction.
    Barrier,
    /// The wave ended (`s_endpgm`).
    End,
    /// `s_sleep`: continue with the next instruction after the other waves had a turn.
    Sleep,
    /// A global wave sync operation (`ds_gws_*`), continuing with the next instruction once
    /// the dispatch's GWS state lets it.
    Gws(GwsOp),
}

/// A GWS (global wave sync) operation on resource `res` (the instruction's offset plus
/// M0[21:16], modulo 64); `value` is the first active lane's data0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GwsOp {
    /// `ds_gws_init`: the barrier of `res` completes when `value + 1` waves have arrived.
    Init { res: u32, value: u32 },
    /// `ds_gws_barrier`: wait until `value + 1` waves have arrived at `res`'s barrier.
    Barrier { res: u32, value: u32 },
}

/// Why a wave cannot go on.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecError {
    Fault(Fault),
    /// No handler for this opcode.
    Unimplemented,
    /// The instruction traps or its operands are not valid (a message says why).
    Illegal(String),
}

impl From<Fault> for ExecError {
    fn from(f: Fault) -> Self {
        ExecError::Fault(f)
    }
}

/// What a wave's instructions reach besides its own state.
pub struct Ctx<'a, 'm> {
    pub mem: &'a Memory<'m>,
    pub lds: &'a mut Lds,
    pub apertures: Apertures,
    /// Device nanoseconds for `s_memtime`/`s_memrealtime`.
    pub clock: &'a dyn Fn() -> u64,
    /// The interrupt `s_sendmsg sendmsg(MSG_INTERRUPT)` raises, with M0's low 8 bits (the
    /// partial event id KFD looks signal events up by).
    pub interrupt: &'a dyn Fn(u32),
    /// Per-lane working space of the vector ALU (three sources and a result), kept between
    /// instructions so that none has to clear it.
    pub lanes: &'a mut [[u64; super::wave::LANES]; 4],
    /// The same for 32-bit operations: constant splats and a result.
    pub lanes32: &'a mut [[u32; super::wave::LANES]; 4],
}

#[cfg(test)]
impl<'a, 'm> Ctx<'a, 'm> {
    /// A context for unit tests over `mem` and `lds`: the default apertures, a clock at 0, no
    /// interrupt, fresh working lanes (leaked: a test's lifetime).
    pub fn for_test(mem: &'a Memory<'m>, lds: &'a mut Lds) -> Ctx<'a, 'm> {
        fn clock() -> u64 {
            0
        }
        fn interrupt(_: u32) {}
        Ctx {
            mem,
            lds,
            apertures: Apertures::default(),
            clock: &clock,
            interrupt: &interrupt,
            lanes: Box::leak(Box::new([[0; super::wave::LANES]; 4])),
            lanes32: Box::leak(Box::new([[0; super::wave::LANES]; 4])),
        }
    }
}

/// The unit tests' random numbers (xorshift64), for the fast paths' differential tests.
#[cfg(test)]
pub struct TestRng(pub u64);

#[cfg(test)]
impl TestRng {
    /// The next number; the state must not start at 0.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

pub type Handler = fn(&mut Wave, &Inst, &mut Ctx) -> Result<Step, ExecError>;

/// The handler of a decoded instruction, if it is implemented.
pub fn handler(i: &Inst) -> Option<Handler> {
    if i.cdna3 {
        return cdna3::handler(i);
    }
    match i.family {
        Family::Sop2 => salu::sop2(i.op),
        Family::Sop1 => salu::sop1(i.op).or_else(|| gpr_idx::handler_of(i.family, i.op)),
        Family::Sopk => salu::sopk(i.op),
        Family::Sopc => salu::sopc(i.op).or_else(|| gpr_idx::handler_of(i.family, i.op)),
        Family::Sopp => sopp::sopp(i.op).or_else(|| gpr_idx::handler_of(i.family, i.op)),
        Family::Smem => smem::smem(i.op),
        Family::Vop1 | Family::Vop2 | Family::Vopc | Family::Vop3 => {
            let op = super::decode::vector::vop3_number(i.family, i.op);
            fast32::handler(i, op)
                .or_else(|| fast64::handler(i, op))
                .or_else(|| vcmp::vopc(op))
                .or_else(|| vlane::lane_op(op))
                .or_else(|| vop::valu(op))
        }
        Family::Vop3p if i.op == super::decode::names::vop3p::V_PK_MOV_B32 => {
            fast64::pk_mov_handler(i).or_else(|| vop::vop3p(i.op))
        }
        Family::Vop3p => vop::vop3p(i.op).or_else(|| mfma::mfma(i.op)),
        // GDS memory is not modelled: only the GWS barrier uses the gds bit here.
        Family::Ds if i.gds && !ds::is_gws(i.op) => None,
        Family::Ds => ds::ds(i.op),
        Family::Flat | Family::Global | Family::Scratch => flat::flat(i.family, i.op),
        Family::Mubuf => mubuf::mubuf(i.op),
        Family::Mtbuf => mubuf::mtbuf(i.op),
    }
}

/// Whether gfx90a opcode `op` of `family` is implemented.
pub fn implemented(family: Family, op: u16) -> bool {
    let Some(name) = family.name(op) else { return false };
    let mut i = crate::isa::decode::Inst::probe(family, op);
    i.name = name;
    handler(&i).is_some()
}

/// Whether `target`'s opcode `op` of `family` is implemented.
pub fn implemented_for(target: Target, family: Family, op: u16) -> bool {
    match target {
        Target::Gfx90a => implemented(family, op),
        Target::Gfx942 => {
            let Some(o) = crate::isa::decode::gfx942::op(family, op) else { return false };
            let mut i = crate::isa::decode::Inst::probe(family, o.gfx90a.unwrap_or(op));
            i.name = o.name;
            i.cdna3 = o.gfx90a.is_none();
            handler(&i).is_some()
        }
    }
}
