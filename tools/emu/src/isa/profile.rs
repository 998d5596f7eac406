//! An opcode profile of the kernels a process executes, for finding where the interpreter's time
//! goes on real programs: with `XHSA_EMU_ISA_PROFILE=N` set, every instruction is counted and
//! timed by name (through the [`super::dispatch::set_tracer`] hook, so the interpreter runs its
//! traced loop and is several times slower: the times are for comparing opcodes, not rates),
//! and every 2^26 instructions (and when a dispatch part ends) the N opcodes that took the most
//! time so far are logged (`xhsa_emu::isa::profile`, info level): name, count, share of the
//! count, nanoseconds per wave-instruction, share of the time. The per-instruction cost of the
//! hook itself (a lock and two clock reads) is in every row.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::decode::{Family, Inst};
use super::dispatch::{set_tracer, TracePoint};

/// Per opcode: (count, nanoseconds).
type Counts = HashMap<(Family, &'static str, bool), (u64, u64)>;

struct Profile {
    top: usize,
    counts: Counts,
    total: u64,
}

static PROFILE: Mutex<Option<Profile>> = Mutex::new(None);

thread_local! {
    static STARTED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

const REPORT_EVERY: u64 = 1 << 26;

/// Installs the profiler when `XHSA_EMU_ISA_PROFILE` asks for it (once per process).
pub fn install_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(top) =
            std::env::var("XHSA_EMU_ISA_PROFILE").ok().and_then(|v| v.trim().parse::<usize>().ok())
        else {
            return;
        };
        *PROFILE.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Profile { top: top.max(1), counts: HashMap::new(), total: 0 });
        set_tracer(Some(Box::new(|_w, _pc, i: &Inst, at| match at {
            TracePoint::Before => STARTED.with(|s| s.set(Some(Instant::now()))),
            TracePoint::After => {
                let ns = STARTED.with(|s| s.take()).map_or(0, |t| t.elapsed().as_nanos() as u64);
                record(i, ns);
            }
        })));
        tracing::info!(top, "xhsa-emu: ISA opcode profile on (XHSA_EMU_ISA_PROFILE)");
    });
}

fn record(i: &Inst, ns: u64) {
    let mut g = PROFILE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(p) = g.as_mut() else { return };
    let e = p.counts.entry((i.family, i.name, i.e64)).or_default();
    e.0 += 1;
    e.1 += ns;
    p.total += 1;
    if p.total.is_multiple_of(REPORT_EVERY) {
        report(p);
    }
}

/// Logs the profile so far (when one is being taken).
pub fn report_now() {
    if let Some(p) = PROFILE.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        report(p);
    }
}

fn report(p: &Profile) {
    let ns_all: u64 = p.counts.values().map(|e| e.1).sum();
    let mut v: Vec<_> = p.counts.iter().collect();
    v.sort_by_key(|(_, e)| std::cmp::Reverse(e.1));
    let mut s = String::new();
    for ((fam, name, e64), (n, ns)) in v.into_iter().take(p.top) {
        s += &format!(
            "\n  {name:<28} {:<6} {n:>12} {:5.1}% {:7.1} ns {:5.1}%",
            format!("{fam:?}{}", if *e64 { "/64" } else { "" }),
            100.0 * *n as f64 / p.total.max(1) as f64,
            *ns as f64 / (*n).max(1) as f64,
            100.0 * *ns as f64 / ns_all.max(1) as f64,
        );
    }
    tracing::info!(
        instructions = p.total,
        "xhsa-emu: ISA opcode profile (name, count, share, ns each, share of time):{s}"
    );
}
