//! The Prometheus text exposition (format 0.0.4) of a snapshot, and a small HTTP server that
//! serves it on `/metrics` (`xhsactl metrics --listen ADDR`).
//!
//! Families are prefixed `xhsa_`; every queue series carries the labels `gpu` (KFD node), `pid`,
//! `process` (its name) and `queue` (the owner's queue id). Counters: dispatches, submissions,
//! completions, preemptions, time preempted and time held back; gauges: pending, in flight,
//! effective and requested priority, paused, and the state (one series per state, 1 for the
//! current one). A scrape takes a fresh snapshot: nothing is cached between scrapes.
#![forbid(unsafe_code)]

use crate::snapshot::Snapshot;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;
use xhsa_model::stats::QueueState;

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    lines: Vec<String>,
}

/// The families, in exposition order: name, kind, help. `xhsa_queue_state` is last.
const FAMILIES: [(&str, &str, &str); 13] = [
    ("xhsa_queue_dispatches_total", "counter", "Packets libxhsa forwarded to the hardware queue."),
    ("xhsa_queue_submitted_total", "counter", "Packets the application submitted."),
    ("xhsa_queue_completed_total", "counter", "Packets seen completed."),
    ("xhsa_queue_preemptions_total", "counter", "Times the queue was taken off the GPU."),
    ("xhsa_queue_preempted_seconds_total", "counter", "Time the queue spent off the GPU."),
    ("xhsa_queue_held_seconds_total", "counter", "Time the level-1 window held the queue back."),
    ("xhsa_queue_busy_seconds_total", "counter", "Time the queue had packets on the hardware."),
    ("xhsa_queue_pending", "gauge", "Packets held in libxhsa now."),
    ("xhsa_queue_in_flight", "gauge", "Packets forwarded and not yet complete."),
    (
        "xhsa_queue_priority",
        "gauge",
        "Effective priority level (-256..=255, higher is more urgent).",
    ),
    (
        "xhsa_queue_requested_priority",
        "gauge",
        "Priority level the application and the config asked for.",
    ),
    ("xhsa_queue_paused", "gauge", "1 while an operator keeps the queue paused."),
    ("xhsa_queue_state", "gauge", "1 for the queue's current state."),
];

/// The exposition of `s`.
pub fn render(s: &Snapshot) -> String {
    let mut fams: Vec<Family> = FAMILIES
        .iter()
        .map(|&(name, kind, help)| Family { name, kind, help, lines: Vec::new() })
        .collect();
    let mut processes = Vec::new();
    for g in &s.gpus {
        processes.push(format!("xhsa_gpu_processes{{gpu=\"{}\"}} {}", g.node, g.processes.len()));
    }
    for (g, p, q) in s.queues() {
        let labels = format!(
            "gpu=\"{}\",pid=\"{}\",process=\"{}\",queue=\"{}\"",
            g.node,
            p.pid,
            escape(&p.name),
            q.id
        );
        let secs = |ns: u64| format!("{:.9}", ns as f64 / 1e9);
        let values: [String; 12] = [
            q.dispatched.to_string(),
            q.submitted.to_string(),
            q.completed.to_string(),
            q.preemptions.to_string(),
            secs(q.preempted_ns),
            secs(q.held_ns),
            secs(q.busy_ns),
            q.pending.to_string(),
            q.in_flight.to_string(),
            q.priority.map_or("NaN".into(), |p| p.level.to_string()),
            q.requested.map_or("NaN".into(), |p| p.level.to_string()),
            u8::from(q.paused).to_string(),
        ];
        for (f, v) in fams.iter_mut().zip(values) {
            f.lines.push(format!("{}{{{labels}}} {v}", f.name));
        }
        let state = fams.last_mut().expect("the state family");
        for st in QueueState::ALL {
            state.lines.push(format!(
                "xhsa_queue_state{{{labels},state=\"{}\"}} {}",
                st.name(),
                u8::from(q.state == st)
            ));
        }
    }
    let mut out = String::new();
    for f in &fams {
        let _ = writeln!(out, "# HELP {} {}\n# TYPE {} {}", f.name, f.help, f.name, f.kind);
        for l in &f.lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let _ = writeln!(out, "# HELP xhsa_gpu_processes Processes with queues on the GPU's board.\n# TYPE xhsa_gpu_processes gauge");
    for l in processes {
        let _ = writeln!(out, "{l}");
    }
    let _ = writeln!(out, "# HELP xhsa_board_problems Boards that could not be read.\n# TYPE xhsa_board_problems gauge\nxhsa_board_problems {}", s.problems.len());
    out
}

/// Answers one HTTP request on `stream`: `GET /metrics` with a fresh snapshot of `dir`, `/` with
/// a pointer to it, anything else 404 or 405.
pub fn serve_one(mut stream: TcpStream, dir: &Path) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Headers are read and ignored, up to the blank line.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(&crate::snapshot::take(dir)),
        ),
        ("GET", "/") => {
            ("200 OK", "text/plain; charset=utf-8", "xhsa metrics: see /metrics\n".to_string())
        }
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: the metrics are at /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET is served\n".to_string(),
        ),
    };
    write!(stream, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    stream.flush()
}

/// Serves `/metrics` on `listener` until the process ends; one request at a time (accept
/// blocks: no polling).
pub fn serve(listener: TcpListener, dir: &Path) -> ! {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = serve_one(stream, dir) {
                    eprintln!("xhsactl metrics: a request failed: {e}");
                }
            }
            Err(e) => {
                eprintln!("xhsactl metrics: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}
