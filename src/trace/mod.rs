//! `XHSA_TRACE`: a timeline of what libxhsa did in this process, for Perfetto's UI.
//!
//! What it is: per-queue tracks — packets taken from the application's shadow ring, held in
//! libxhsa's rings, forwarded to the hardware queue, completed (as libxhsa's tracking barriers
//! see them), the queue's priority changes and its time off the GPU — and a track per GPU of the
//! preemption's KFD calls, recorded in bounded memory and written as Chrome trace-event JSON
//! (`docs/trace.md`).
//!
//! - [`event`]: the fixed-size records.
//! - [`recorder`]: the bounded buffers, their hand-off to the writer thread, drops, the exit.
//! - [`chrome`]: the JSON writer (tracks, names, spans, counters).
//! - [`queue_track`]: a GPU's queue tracks, from the scheduler's counters after each use.
//! - [`kfd`]: a GPU's preemption track, from a wrapper of the preemption's KFD port.
//! - [`settings`]: `XHSA_TRACE` and `XHSA_TRACE_BUFFER`.
//!
//! What it is not: a profiler of the application's kernels (it sees packets as libxhsa moves
//! them, not kernel execution on the device), a log (`XHSA_LOG`), or anything the scheduler
//! depends on. With `XHSA_TRACE` unset nothing is created: the edge's only cost is one check of
//! an empty `Option` per use of a scheduler.
//!
//! Rules it keeps: the application's submission path never waits on I/O or on a lock a slower
//! thread holds (recording copies a few small values into the source's own buffer; formatting
//! and writing happen on the writer thread); memory is bounded (a few buffers of
//! `XHSA_TRACE_BUFFER` events); a failure turns tracing off, logged once, and never reaches the
//! application. Time is passed in (libxhsa's clock, the scheduler's `now`), so all of this is
//! tested without a runtime.
#![forbid(unsafe_code)]

pub mod chrome;
pub mod event;
pub mod kfd;
pub mod queue_track;
pub mod recorder;
pub mod settings;

use std::sync::Arc;

use crate::path::window::Nanos;
pub use recorder::{Finished, Recorder, Sink};
pub use settings::TraceSettings;

/// Opens the trace file of `settings` (created or truncated), writes the start of the JSON and
/// starts the writer thread. `offset_ns` turns libxhsa's clock (`start` is now on it) into
/// `CLOCK_MONOTONIC`; `process` names the process. `Ok(None)` when no trace is asked for; `Err`
/// says why it cannot be written (tracing is then off).
pub fn start(
    settings: &TraceSettings,
    pid: u32,
    offset_ns: u64,
    process: &str,
    start: Nanos,
) -> Result<Option<Arc<Sink>>, String> {
    let Some(path) = &settings.file else { return Ok(None) };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| {
            format!("{}: cannot open the trace file {} ({e})", settings::ENV_TRACE, path.display())
        })?;
    let sink = Sink::new(Box::new(file), settings.buffer, pid, offset_ns, process, start).map_err(
        |e| {
            format!("{}: cannot write the trace file {} ({e})", settings::ENV_TRACE, path.display())
        },
    )?;
    let sink = Arc::new(sink);
    let writer = sink.clone();
    std::thread::Builder::new()
        .name("xhsa-trace".into())
        .spawn(move || {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.run_writer())).is_err() {
                tracing::error!("xhsa: XHSA_TRACE: the trace writer failed internally; the events recorded from now on are dropped");
            }
        })
        .map_err(|e| format!("{}: cannot start the trace writer thread ({e})", settings::ENV_TRACE))?;
    Ok(Some(sink))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unopenable_file_is_an_error_and_no_file_no_trace() {
        let s = TraceSettings { file: Some("/nonexistent-dir/x/trace.json".into()), buffer: 64 };
        let e = start(&s, 1, 0, "p", 0).unwrap_err();
        assert!(
            e.starts_with("XHSA_TRACE: cannot open the trace file /nonexistent-dir/x/trace.json"),
            "{e}"
        );
        assert!(start(&TraceSettings::default(), 1, 0, "p", 0).unwrap().is_none());
    }

    #[test]
    fn a_started_trace_is_written_and_closed() {
        let path =
            std::env::temp_dir().join(format!("xhsa-trace-unit-{}.json", std::process::id()));
        let s = TraceSettings { file: Some(path.clone()), buffer: 16 };
        let sink = start(&s, std::process::id(), 0, "p", 0).unwrap().unwrap();
        let r = sink.recorder();
        for i in 0..100 {
            r.record(event::Event::queue(
                i,
                xhsa_model::ids::QueueId(1),
                event::What::Completed { packets: 1 },
            ));
            sink.wait_for_room();
        }
        let f = sink.finish(1_000);
        assert_eq!((f.written, f.dropped, f.failure), (100, 0, None));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v.as_array().unwrap().iter().filter(|e| e["name"] == "completed").count(), 100);
        let _ = std::fs::remove_file(path);
    }
}
