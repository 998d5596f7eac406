//! An instruction trace of the kernels a process executes, for finding which instruction of a
//! real kernel computes something wrong: with `XHSA_EMU_ISA_TRACE=FILE` set, every executed
//! wave-instruction is written to FILE (through the [`super::dispatch::set_tracer`] hook, so the
//! interpreter runs its traced loop): before it, the wave, its program counter, the opcode, EXEC,
//! SCC, the first lanes of each VGPR source and of the register after it (a 64-bit operand's
//! pair), and each SGPR source with the next SGPR; after it, the first lanes of a VGPR destination
//! (and of the next register), or the SGPR pair at an SGPR destination. `XHSA_EMU_ISA_TRACE_LANES`
//! sets how many lanes (default 8, at most 64); `XHSA_EMU_ISA_TRACE_MAX` how many
//! wave-instructions at most (default 2 000 000; the trace stops there). Waves of concurrent
//! workgroups interleave in the file; each line names its wave.
//!
//! A debugging aid, not a model: it changes nothing the kernel computes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

use super::decode::Inst;
use super::dispatch::{set_tracer, TracePoint};
use super::operand;
use super::wave::{Wave, LANES};

struct Trace {
    out: BufWriter<File>,
    lanes: usize,
    left: u64,
}

static TRACE: Mutex<Option<Trace>> = Mutex::new(None);

/// Installs the trace when `XHSA_EMU_ISA_TRACE` names a file (once per process; a file that
/// cannot be created is reported and no trace is taken).
pub fn install_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(path) = std::env::var_os("XHSA_EMU_ISA_TRACE").filter(|p| !p.is_empty()) else {
            return;
        };
        let number = |name: &str, default: u64| {
            std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(default)
        };
        let lanes = number("XHSA_EMU_ISA_TRACE_LANES", 8).clamp(1, LANES as u64) as usize;
        let left = number("XHSA_EMU_ISA_TRACE_MAX", 2_000_000);
        let file = match File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = ?path, "xhsa-emu: XHSA_EMU_ISA_TRACE: cannot create: {e}");
                return;
            }
        };
        *TRACE.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Trace { out: BufWriter::new(file), lanes, left });
        set_tracer(Some(Box::new(record)));
        tracing::info!(path = ?path, lanes, "xhsa-emu: ISA instruction trace on (XHSA_EMU_ISA_TRACE)");
    });
}

fn vgpr(w: &Wave, code: u16, lanes: usize) -> Option<String> {
    if !operand::is_vgpr(code) {
        return None;
    }
    let r = usize::from(code - operand::VGPR0);
    let v = w.v.get(r * LANES..r * LANES + lanes)?;
    Some(format!("v{r}={v:x?}"))
}

fn record(w: &Wave, pc: u64, i: &Inst, at: TracePoint) {
    let mut g = TRACE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(t) = g.as_mut() else { return };
    if t.left == 0 {
        return;
    }
    let mut line = String::new();
    match at {
        TracePoint::Before => {
            line += &format!(
                "w{} {pc:#x} {}{} exec={:#x} scc={}",
                w.id,
                i.name,
                if i.e64 { "_e64" } else { "" },
                w.exec(),
                u8::from(w.scc)
            );
            // Each source register with the one after it (the pair of a 64-bit operand).
            for &c in &i.src {
                if let Some(s) = vgpr(w, c, t.lanes) {
                    line += " ";
                    line += &s;
                    if let Some(s) = vgpr(w, c + 1, t.lanes) {
                        line += " ";
                        line += &s;
                    }
                } else if c < operand::EXEC_HI {
                    let d = usize::from(c);
                    line += &format!(" s{d}={:#x}:{:#x}", w.s[d], w.s[d + 1]);
                }
            }
        }
        TracePoint::After => {
            t.left -= 1;
            line += "    ->";
            if let Some(s) = vgpr(w, i.dst, t.lanes) {
                line += " ";
                line += &s;
                if let Some(s) = vgpr(w, i.dst + 1, t.lanes) {
                    line += " ";
                    line += &s;
                }
            } else if usize::from(i.dst) + 1 < w.s.len() {
                let d = usize::from(i.dst);
                line += &format!(" s{d}={:#x} s{}={:#x}", w.s[d], d + 1, w.s[d + 1]);
            }
            if usize::from(i.sdst) + 1 < w.s.len() {
                let d = usize::from(i.sdst);
                line += &format!(" sdst s{d}={:#x}:{:#x}", w.s[d], w.s[d + 1]);
            }
            line += &format!(" scc={}", u8::from(w.scc));
        }
    }
    line.push('\n');
    if t.out.write_all(line.as_bytes()).is_err() || (t.left == 0 && t.out.flush().is_err()) {
        t.left = 0;
    }
    // Every 4096 instructions and at each wave's end (the file is a static's, never dropped).
    if (at == TracePoint::After && t.left.is_multiple_of(4096)) || i.name == "s_endpgm" {
        let _ = t.out.flush();
    }
}
