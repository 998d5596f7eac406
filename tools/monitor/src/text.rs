//! A snapshot as a plain text table (`xhsa-top --once`, `xhsactl list`): one line per queue
//! under a header per GPU, in 80 columns (`*` after the state: paused by an operator; a note
//! after the line: a process in another container, gone, or not confirming its work; the JSON
//! form has every field).
#![forbid(unsafe_code)]

use crate::snapshot::{Prio, Snapshot};
use std::fmt::Write;

/// Milliseconds with one decimal, from nanoseconds.
pub fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// A priority, or `?` for a slot without a valid one.
pub fn prio(p: Option<Prio>) -> String {
    p.map_or_else(|| "?".into(), |p| p.to_string())
}

/// The column header of [`render`]'s queue lines.
pub const HEADER: &str =
    "    PID NAME         QID PRIO  REQ STATE     PEND INFL  DISPATCH PRMT  OFF_MS";

/// The snapshot as text.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    if s.gpus.is_empty() && s.problems.is_empty() {
        let _ = writeln!(out, "no xhsa board in {} (no process using libxhsa has opened a GPU there; XHSA_BOARD_DIR selects another directory)", s.dir.display());
    }
    for g in &s.gpus {
        let queues: usize = g.processes.iter().map(|p| p.queues.len()).sum();
        let _ = writeln!(
            out,
            "GPU node {} ({}): {} processes, {} queues",
            g.node,
            g.board.display(),
            g.processes.len(),
            queues
        );
        // CU partitions (XHSA_RESERVE), when the GPU is split: which queues run where.
        let mut parts: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for p in &g.processes {
            for q in &p.queues {
                parts
                    .entry(q.partition.to_string())
                    .or_default()
                    .push(format!("{}/{}", p.pid, q.id));
            }
        }
        if parts.keys().any(|k| k != "whole") {
            let list: Vec<String> = parts
                .iter()
                .map(|(name, qs)| format!("{name}: PID/QID {}", qs.join(",")))
                .collect();
            let _ = writeln!(out, "partitions: {}", list.join("; "));
        }
        // Sharing policies (XHSA_POLICY), when a process has one other than strict.
        let policies: Vec<String> = g
            .processes
            .iter()
            .filter(|p| p.policy != "strict")
            .map(|p| {
                format!(
                    "PID {} {} (held queues get {:.1} %)",
                    p.pid,
                    p.policy,
                    f64::from(p.held_share_permille) / 10.0
                )
            })
            .collect();
        if !policies.is_empty() {
            let _ = writeln!(out, "policies: {}", policies.join("; "));
        }
        let _ = writeln!(out, "{HEADER}");
        for p in &g.processes {
            for q in &p.queues {
                let state = if q.paused {
                    format!("{}*", q.state.name())
                } else {
                    q.state.name().to_string()
                };
                let name: String = p.name.chars().take(11).collect();
                let mut dead = if p.alive { String::new() } else { " (gone)".to_string() };
                if p.other_namespace {
                    let cg =
                        p.cgroup.as_deref().map(|c| format!(", cgroup {c}")).unwrap_or_default();
                    let seen = if p.visible { "" } else { ", not visible from here" };
                    dead.push_str(&format!(" (container: pid {} inside{seen}{cg})", p.ns_pid));
                }
                if q.stale && p.alive {
                    dead.push_str(&format!(
                        " (stopped? work unconfirmed for {} ms, not counted)",
                        q.confirmed_ns_ago / 1_000_000
                    ));
                }
                let _ = writeln!(
                    out,
                    "{:>7} {:<11} {:>4} {:>4} {:>4} {:<9} {:>4} {:>4} {:>9} {:>4} {:>7}{dead}",
                    p.pid,
                    name,
                    q.id,
                    prio(q.priority),
                    prio(q.requested),
                    state,
                    q.pending,
                    q.in_flight,
                    q.dispatched,
                    q.preemptions,
                    ms(q.preempted_ns),
                );
            }
        }
    }
    for p in &s.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    out
}
