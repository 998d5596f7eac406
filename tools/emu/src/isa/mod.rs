//! The gfx90a/gfx942 ISA interpreter: executes a kernel dispatch's machine code for its memory
//! effect ([`target`] says which ISA a code object is).
//!
//! The CP runs a dispatch through [`run`] when the kernel has no CPU model (and is not a
//! timing-only kernel); the timing model still decides when it completes. Pieces, one concept
//! per file: [`decode`] (the encoding families and the opcode tables), [`operand`] (operand
//! codes, inline constants, literals), [`wave`] (a wave64's registers), [`descriptor`] (the
//! kernel descriptor), [`dispatch`] (workgroup and wave set-up, the turns of resident
//! workgroups' waves with barriers), [`gws`] (global wave sync barriers), [`lds`], [`memory`] (checked device memory), [`exec`] (the opcodes' semantics),
//! [`fp16`]; [`host`] runs a code object's kernels over host memory (tests, benchmark).
//!
//! An instruction the interpreter does not implement stops the dispatch with
//! [`IsaError::Unimplemented`] naming it (the CP turns that into the queue error of an illegal
//! instruction); it never continues with a wrong result.

pub mod decode;
pub mod descriptor;
pub mod dispatch;
pub mod exec;
pub mod fp16;
pub mod gws;
pub mod host;
pub mod lds;
pub mod memory;
pub mod operand;
pub mod profile;
pub mod target;
pub mod trace_file;
pub mod wave;

pub use dispatch::{Launch, Round, Run, Services, Stats};

use crate::kernels::Fault;
use crate::sys::devmem::DeviceMemory;

/// Why a dispatch stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum IsaError {
    /// A device access outside mapped memory (the GPU's memory fault).
    Fault(Fault),
    /// An instruction the interpreter does not implement (`op`: its gfx90a number when gfx90a
    /// has it, see [`decode::Inst::cdna3`]).
    Unimplemented { pc: u64, name: &'static str, family: decode::Family, op: u16 },
    /// Words that are no instruction of the target.
    Decode { pc: u64, error: decode::DecodeError },
    /// A trap, halt or invalid operands.
    Illegal { pc: u64, message: String },
}

impl std::fmt::Display for IsaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IsaError::Fault(x) => write!(
                f,
                "memory fault at {:#x} ({})",
                x.addr,
                if x.write { "write" } else { "read" }
            ),
            IsaError::Unimplemented { pc, name, family, op } => {
                write!(f, "instruction {name} ({family:?} opcode {op:#x}) at {pc:#x} is not implemented by xhsa-emu's ISA interpreter")
            }
            IsaError::Decode { pc, error } => write!(f, "illegal instruction at {pc:#x}: {error}"),
            IsaError::Illegal { pc, message } => {
                write!(f, "illegal instruction at {pc:#x}: {message}")
            }
        }
    }
}

/// Runs a dispatch: every workgroup, for its memory effect. Memory accesses go through `mem`
/// after `accessible(addr, len)` says the range is mapped; `services` give device time and
/// the host interrupt.
pub fn run(
    launch: &Launch,
    mem: &dyn DeviceMemory,
    accessible: &dyn Fn(u64, u64) -> bool,
    services: &Services,
) -> Result<Stats, IsaError> {
    dispatch::run(Run::new(launch, memory::Memory::new(mem, accessible))?, services)
}

/// Runs part `index` of `parts` of a dispatch ([`Run::part`]), as [`run`] runs all of it:
/// `parts` threads calling this together execute the dispatch.
pub fn run_part(
    launch: &Launch,
    mem: &dyn DeviceMemory,
    accessible: &dyn Fn(u64, u64) -> bool,
    services: &Services,
    index: u32,
    parts: u32,
) -> Result<Stats, IsaError> {
    dispatch::run(Run::part(launch, memory::Memory::new(mem, accessible), index, parts)?, services)
}

/// Adds the result of one part of a dispatch ([`run_part`]) to the dispatch's: the counts
/// summed, the first error kept.
pub fn add_part(sum: &mut Result<Stats, IsaError>, part: Result<Stats, IsaError>) {
    match part {
        Ok(b) => {
            if let Ok(a) = sum {
                a.workgroups += b.workgroups;
                a.waves += b.waves;
                a.instructions += b.instructions;
            }
        }
        Err(e) => {
            if sum.is_ok() {
                *sum = Err(e);
            }
        }
    }
}
