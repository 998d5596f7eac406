//! `XHSA_TRACE`: a HIP program preloading libxhsa on the emulated GPU writes a Chrome
//! trace-event JSON file (docs/trace.md) with its queues' tracks — packets taken, forwarded and
//! completed, priority changes — under its own pid, valid JSON however often its buffers were
//! handed to the writer, and every packet libxhsa took accounted for (or the drop marked).
//! Preemption spans are checked with the preemption scene (tests/libxhsa_preempt.rs).
mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{
    assert_passed, libxhsa, numbers_after, program, read_trace, run_under_emu, trace_file,
    DeviceDir, RunOpts, RunOutput,
};
use serde_json::Value;

/// Runs hip_basic's kernels, streams, priority and launches checks (thousands of packets) with
/// libxhsa preloaded, tracing into `dir` (`trace-%p.json`) with `env` added.
fn traced_run(dir: &DeviceDir, env: &[(&str, &str)]) -> RunOutput {
    let mut e: Vec<(String, String)> = vec![
        ("LD_PRELOAD".into(), libxhsa()),
        ("XHSA_LOG".into(), "info".into()),
        ("XHSA_TRACE".into(), dir.file("trace-%p.json").display().to_string()),
    ];
    e.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let out = run_under_emu(
        &program("hip_basic"),
        &["kernels", "streams", "priority", "launches"],
        &RunOpts { env: e, ..RunOpts::default() },
    );
    assert_passed(&out);
    out
}

/// `(packets taken, packets forwarded)` from libxhsa's exit summary.
fn summary_packets(out: &RunOutput) -> (u64, u64) {
    let n = numbers_after(out, "shadow queues: ")
        .unwrap_or_else(|| panic!("no shadow summary\n{}", out.report()));
    (n[1], n[2])
}

/// Sum of `args.packets` of the instants called `name`.
fn packets(events: &[Value], name: &str) -> u64 {
    events
        .iter()
        .filter(|e| e["name"] == name && e["ph"] == "i")
        .map(|e| e["args"]["packets"].as_u64().unwrap())
        .sum()
}

/// The queue tracks: tid → its last thread name.
fn queue_tracks(events: &[Value]) -> BTreeMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
        .filter(|(_, n)| n.starts_with("queue "))
        .collect()
}

/// Checks what every trace of a passing run must show; returns the events dropped.
fn check_trace(dir: &DeviceDir, out: &RunOutput) -> (Vec<Value>, u64) {
    let (path, pid) = trace_file(&dir.path, "trace-");
    let events = read_trace(&path);
    for e in &events {
        assert_eq!(e["pid"].as_u64(), Some(u64::from(pid)), "every event is the process's: {e}");
        assert!(e["ts"].is_number() && e["tid"].is_u64() && e["ph"].is_string(), "{e}");
    }
    let tracks = queue_tracks(&events);
    assert!(tracks.len() >= 2, "a queue track per HIP stream: {tracks:?}");
    assert!(tracks.values().all(|n| n.contains(" (priority ")), "{tracks:?}");
    let on_queues = |name: &str| {
        events
            .iter()
            .filter(|e| {
                e["name"] == name && e["tid"].as_u64().is_some_and(|t| tracks.contains_key(&t))
            })
            .count()
    };
    for kind in ["created", "taken", "forwarded", "completed", "destroyed"] {
        assert!(on_queues(kind) > 0, "no `{kind}` event on a queue track");
    }
    // The application's stream priorities (hipStreamCreateWithPriority) appear as changes.
    let by_app: BTreeSet<&str> = events
        .iter()
        .filter(|e| {
            e["name"] == "priority"
                && e["args"]["by"].as_str().is_some_and(|b| b.starts_with("application"))
        })
        .map(|e| e["args"]["to"].as_str().unwrap())
        .collect();
    assert!(by_app.contains("0 high") && by_app.contains("0 low"), "stream priorities: {by_app:?}");
    assert!(
        tracks.values().any(|n| n.ends_with("(priority 0 high)")),
        "the track shows its priority: {tracks:?}"
    );
    let end = events.last().unwrap();
    assert_eq!(end["name"], "trace end", "the trace is closed at exit");
    let dropped = end["args"]["events_dropped"].as_u64().unwrap();
    let (taken, forwarded) = summary_packets(out);
    if dropped == 0 {
        assert_eq!(packets(&events, "taken"), taken, "every packet taken is on the trace");
        assert_eq!(
            packets(&events, "forwarded"),
            forwarded,
            "every packet forwarded is on the trace"
        );
    } else {
        let marked: u64 = events
            .iter()
            .filter(|e| e["name"] == "events dropped")
            .map(|e| e["args"]["events"].as_u64().unwrap())
            .sum();
        assert_eq!(marked, dropped, "the drops are marked where they happened");
    }
    let counts: BTreeMap<String, usize> = events.iter().fold(BTreeMap::new(), |mut m, e| {
        *m.entry(format!("{} {}", e["ph"].as_str().unwrap(), e["name"].as_str().unwrap()))
            .or_default() += 1;
        m
    });
    eprintln!("trace {}: {} events, {dropped} dropped; {counts:?}", path.display(), events.len());
    (events, dropped)
}

#[test]
fn a_hip_program_is_traced_on_its_queue_tracks() {
    let dir = DeviceDir::new("trace");
    let out = traced_run(&dir, &[]);
    let (_, dropped) = check_trace(&dir, &out);
    assert_eq!(dropped, 0, "the default buffer never drops here");
    assert!(out.stderr.contains("xhsa: tracing to "), "{}", out.report());
    assert!(
        out.stderr.contains("INFO xhsa: trace: "),
        "the exit says what was written\n{}",
        out.report()
    );
}

/// Small buffers are handed to the writer again and again: the file is still one valid JSON
/// array, and either every packet is on it or the drops are marked and logged once. With 16
/// events a buffer the writer usually falls behind (drops); with 1024 it usually keeps up.
#[test]
fn small_buffers_are_flushed_when_full_into_one_valid_file() {
    for buffer in ["16", "1024"] {
        let dir = DeviceDir::new("trace-small");
        let out = traced_run(&dir, &[("XHSA_TRACE_BUFFER", buffer)]);
        let (events, dropped) = check_trace(&dir, &out);
        let n: usize = buffer.parse().unwrap();
        assert!(
            events.len() as u64 + dropped > 10 * n as u64,
            "{buffer}: ten buffers' worth at least: {} events",
            events.len()
        );
        let drop_lines = out
            .stderr
            .lines()
            .filter(|l| l.contains("XHSA_TRACE") && l.contains("dropped"))
            .count();
        assert_eq!(
            drop_lines,
            usize::from(dropped > 0),
            "{buffer}: one log line about drops, if any\n{}",
            out.report()
        );
    }
}

/// A malformed buffer size is reported once by name with the accepted forms (and the default
/// used); a trace file that cannot be opened is one error line, and the program is undisturbed.
#[test]
fn bad_trace_settings_are_reported_once_and_disturb_nothing() {
    let dir = DeviceDir::new("trace-bad");
    let out = traced_run(&dir, &[("XHSA_TRACE_BUFFER", "lots")]);
    let bad: Vec<&str> =
        out.stderr.lines().filter(|l| l.contains("XHSA_TRACE_BUFFER=\"lots\"")).collect();
    assert_eq!(bad.len(), 1, "{}", out.report());
    assert!(
        bad[0].contains("ERROR")
            && bad[0].contains("16..=16777216")
            && bad[0].contains("using 65536"),
        "{}",
        bad[0]
    );
    check_trace(&dir, &out);

    let e = vec![
        ("LD_PRELOAD".to_string(), libxhsa()),
        ("XHSA_LOG".into(), "info".into()),
        ("XHSA_TRACE".into(), dir.file("no/such/dir/trace.json").display().to_string()),
    ];
    let out = run_under_emu(
        &program("hip_basic"),
        &["kernels"],
        &RunOpts { env: e, ..RunOpts::default() },
    );
    assert_passed(&out);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{}", out.report());
    assert!(
        errors[0].contains("XHSA_TRACE: cannot open the trace file")
            && errors[0].contains("no trace is written"),
        "{}",
        errors[0]
    );
    assert!(!out.stderr.contains("trace: "), "no trace summary without a trace\n{}", out.report());
}
