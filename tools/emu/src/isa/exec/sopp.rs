//! Program control (SOPP): branches (target = PC + 4 + simm16 * 4), `s_endpgm`, `s_barrier`,
//! `s_sleep` (the wave gives its turn up: it waits for something another wave or the host
//! does), `s_sendmsg` with `MSG_INTERRUPT` (the interrupt that wakes the host's waiters of a
//! signal event: M0[7:0] is the partial event id), and the instructions with no architectural
//! effect here: `s_waitcnt` (every memory operation completes before the next instruction),
//! `s_nop`, `s_setprio`, cache and perf-level hints. `s_trap` and `s_sethalt` stop the dispatch
//! as the hardware's trap would; other messages are not implemented.

use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::sopp as o;
use crate::isa::decode::Inst;
use crate::isa::operand::M0;
use crate::isa::wave::Wave;

/// `s_sendmsg`'s message id (SIMM16[3:0]) of the interrupt to the host.
const MSG_INTERRUPT: i32 = 1;

fn branch_if(w: &Wave, i: &Inst, cond: bool) -> Result<Step, ExecError> {
    Ok(if cond {
        Step::Jump((w.pc + 4).wrapping_add_signed(i64::from(i.imm) * 4))
    } else {
        Step::Next
    })
}

pub fn sopp(op: u16) -> Option<Handler> {
    match op {
        o::S_NOP
        | o::S_WAITCNT
        | o::S_SETPRIO
        | o::S_ICACHE_INV
        | o::S_INCPERFLEVEL
        | o::S_DECPERFLEVEL
        | o::S_TTRACEDATA
        | o::S_SETKILL
        | o::S_WAKEUP => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next)),
        o::S_ENDPGM | o::S_ENDPGM_SAVED | o::S_ENDPGM_ORDERED_PS_DONE => {
            Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::End))
        }
        o::S_BARRIER => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Barrier)),
        o::S_SLEEP => Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Sleep)),
        o::S_SENDMSG => Some(|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            if i.imm & 0xf != MSG_INTERRUPT {
                return Err(ExecError::Unimplemented);
            }
            (c.interrupt)(w.s[usize::from(M0)] & 0xff);
            Ok(Step::Next)
        }),
        o::S_BRANCH => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, true)),
        o::S_CBRANCH_SCC0 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, !w.scc)),
        o::S_CBRANCH_SCC1 => Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, w.scc)),
        o::S_CBRANCH_VCCZ => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, w.vcc() == 0))
        }
        o::S_CBRANCH_VCCNZ => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, w.vcc() != 0))
        }
        o::S_CBRANCH_EXECZ => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, w.exec() == 0))
        }
        o::S_CBRANCH_EXECNZ => {
            Some(|w: &mut Wave, i: &Inst, _: &mut Ctx| branch_if(w, i, w.exec() != 0))
        }
        // No debugger is attached: the debug branches are never taken.
        o::S_CBRANCH_CDBGSYS
        | o::S_CBRANCH_CDBGUSER
        | o::S_CBRANCH_CDBGSYS_OR_USER
        | o::S_CBRANCH_CDBGSYS_AND_USER => {
            Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Ok(Step::Next))
        }
        o::S_TRAP => Some(|_: &mut Wave, i: &Inst, _: &mut Ctx| {
            Err(ExecError::Illegal(format!("s_trap {} (no trap handler)", i.imm & 0xff)))
        }),
        o::S_SETHALT => {
            Some(|_: &mut Wave, _: &Inst, _: &mut Ctx| Err(ExecError::Illegal("s_sethalt".into())))
        }
        _ => None,
    }
}
