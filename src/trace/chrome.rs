//! The trace file: events as Chrome trace-event JSON (the "JSON Array Format" of the Trace Event
//! Format), which Perfetto's UI (ui.perfetto.dev) and `chrome://tracing` open.
//!
//! The file is one JSON array, one event per line, written a buffer at a time and closed (`]`)
//! at exit; a process killed before that leaves the array unterminated, which both viewers
//! still accept. Tracks: `pid` is the process; every shadow queue is a thread (`tid` = its
//! libxhsa id, named `queue 3 (priority 0 normal)`), each GPU's preemption another (named
//! `preemption, GPU 0`, `tid` [`PREEMPTION_TID`] + the GPU's index). Timestamps are
//! microseconds (with nanosecond fractions) on `CLOCK_MONOTONIC`, so the traces of several
//! processes line up.
//!
//! What each record becomes:
//!
//! | record | JSON |
//! |---|---|
//! | queue created | `thread_name` and `thread_sort_index` metadata, instant `created` |
//! | taken, forwarded, completed | instants on the queue's track, `args.packets` |
//! | held / in flight changed | counter `queue N` with series `held` and `in_flight` |
//! | priority changed | instant `priority` (`from`, `to`, `by`), the track renamed |
//! | off the GPU, back | one complete event `off the GPU` (`ph:"X"`) on the queue's track |
//! | a KFD call | complete event on the preemption track, `args.queues`/`done`/`ok` |
//! | events dropped | process instant `events dropped`, `args.events` |
//! | end of the trace | process instant `trace end`: events written and dropped in all |
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::io::{self, Write};

use super::event::{ChangedBy, Event, Track, What};
use crate::path::window::Nanos;
use crate::preempt::How;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::{Priority, StreamPriority};

/// `tid` of GPU 0's preemption track (GPU `n`'s is this plus `n`): far above any queue id.
pub const PREEMPTION_TID: u64 = 0x7000_0000;

/// A JSON string literal of `s`.
struct Json<'a>(&'a str);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// Nanoseconds as microseconds with three decimals.
struct Micros(u64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A priority as the trace shows it: `0 normal`.
fn priority_text(p: Priority) -> String {
    let stream = match p.stream() {
        StreamPriority::Low => "low",
        StreamPriority::Normal => "normal",
        StreamPriority::High => "high",
    };
    format!("{} {stream}", p.level())
}

fn how_text(how: How) -> &'static str {
    match how {
        How::Deactivate => "deactivated (UPDATE_QUEUE 0%)",
        How::Suspend => "suspended (DBG_TRAP SUSPEND_QUEUES)",
    }
}

/// The name of a record's kind, for counts.
pub fn kind(what: &What) -> &'static str {
    match what {
        What::QueueCreated { .. } => "created",
        What::QueueDestroyed => "destroyed",
        What::Taken { .. } => "taken",
        What::Forwarded { .. } => "forwarded",
        What::Completed { .. } => "completed",
        What::Counts { .. } => "counts",
        What::PriorityChanged { .. } => "priority",
        What::Passthrough => "passthrough",
        What::Off { .. } => "off",
        What::On => "on",
        What::Kfd { .. } => "kfd",
        What::Dropped { .. } => "dropped",
    }
}

/// The JSON writer over `W` (the trace file; a buffer in tests).
#[derive(Debug)]
pub struct Chrome<W: Write> {
    out: W,
    pid: u32,
    /// Added to every time: libxhsa's clock to `CLOCK_MONOTONIC`.
    offset_ns: u64,
    /// The text of the events being written.
    text: String,
    first: bool,
    named: BTreeSet<u64>,
    /// Queues off the GPU: since when and how.
    off: BTreeMap<QueueId, (Nanos, How)>,
    last_at: Nanos,
    /// Records written, by kind.
    counts: BTreeMap<&'static str, u64>,
    /// Events the drop markers written so far account for.
    dropped: u64,
    closed: bool,
}

impl<W: Write> Chrome<W> {
    /// Starts the array: the process's name (`process` and the pid) at `start`.
    pub fn begin(
        out: W,
        pid: u32,
        offset_ns: u64,
        process: &str,
        start: Nanos,
    ) -> io::Result<Chrome<W>> {
        let mut c = Chrome {
            out,
            pid,
            offset_ns,
            text: String::with_capacity(4096),
            first: true,
            named: BTreeSet::new(),
            off: BTreeMap::new(),
            last_at: start,
            counts: BTreeMap::new(),
            dropped: 0,
            closed: false,
        };
        c.text.push('[');
        c.meta(
            0,
            "process_name",
            start,
            format_args!("\"name\":{}", Json(&format!("{process} (pid {pid}, libxhsa)"))),
        );
        c.flush()?;
        Ok(c)
    }

    /// Records written so far, by kind.
    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    /// Whether [`Chrome::finish`] closed the array.
    pub fn closed(&self) -> bool {
        self.closed
    }

    fn tid(track: Track) -> u64 {
        match track {
            Track::Queue(q) => q.0,
            Track::Preemption(gpu) => PREEMPTION_TID + u64::from(gpu),
            Track::Process => 0,
        }
    }

    fn sep(&mut self) {
        if !self.first {
            self.text.push(',');
        }
        self.first = false;
        self.text.push('\n');
    }

    /// One event with its common fields; `rest` follows them inside the object.
    fn event(&mut self, name: &str, ph: char, at: Nanos, tid: u64, rest: fmt::Arguments<'_>) {
        self.sep();
        let ts = Micros(at.saturating_add(self.offset_ns));
        let _ = write!(self.text, "{{\"name\":{},\"cat\":\"xhsa\",\"ph\":\"{ph}\",\"ts\":{ts},\"pid\":{},\"tid\":{tid}{rest}}}", Json(name), self.pid);
    }

    fn meta(&mut self, tid: u64, name: &str, at: Nanos, args: fmt::Arguments<'_>) {
        self.event(name, 'M', at, tid, format_args!(",\"args\":{{{args}}}"));
    }

    fn instant(&mut self, name: &str, at: Nanos, track: Track, args: fmt::Arguments<'_>) {
        let scope = if track == Track::Process { 'p' } else { 't' };
        self.event(
            name,
            'i',
            at,
            Self::tid(track),
            format_args!(",\"s\":\"{scope}\",\"args\":{{{args}}}"),
        );
    }

    fn complete(
        &mut self,
        name: &str,
        at: Nanos,
        dur: Nanos,
        track: Track,
        args: fmt::Arguments<'_>,
    ) {
        self.event(
            name,
            'X',
            at,
            Self::tid(track),
            format_args!(",\"dur\":{},\"args\":{{{args}}}", Micros(dur)),
        );
    }

    fn name_queue(&mut self, q: QueueId, at: Nanos, priority: Option<Priority>) {
        let name = match priority {
            Some(p) => format!("queue {} (priority {})", q.0, priority_text(p)),
            None => format!("queue {}", q.0),
        };
        self.meta(q.0, "thread_name", at, format_args!("\"name\":{}", Json(&name)));
        if self.named.insert(q.0) {
            self.meta(q.0, "thread_sort_index", at, format_args!("\"sort_index\":{}", q.0));
        }
    }

    /// Names a track the first time it appears (a queue whose creation was dropped, a GPU's
    /// preemption).
    fn ensure_named(&mut self, track: Track, at: Nanos) {
        let tid = Self::tid(track);
        if self.named.contains(&tid) {
            return;
        }
        match track {
            Track::Queue(q) => self.name_queue(q, at, None),
            Track::Preemption(gpu) => {
                self.named.insert(tid);
                self.meta(
                    tid,
                    "thread_name",
                    at,
                    format_args!("\"name\":\"preemption, GPU {gpu}\""),
                );
                // Above the queues.
                self.meta(tid, "thread_sort_index", at, format_args!("\"sort_index\":-1"));
            }
            Track::Process => {}
        }
    }

    fn one(&mut self, e: &Event) {
        *self.counts.entry(kind(&e.what)).or_default() += 1;
        self.last_at = self.last_at.max(e.at);
        let (at, track) = (e.at, e.track);
        if !matches!(e.what, What::QueueCreated { .. }) {
            self.ensure_named(track, at);
        }
        match (e.what, track) {
            (What::QueueCreated { priority }, Track::Queue(q)) => {
                self.name_queue(q, at, Some(priority));
                self.instant(
                    "created",
                    at,
                    track,
                    format_args!("\"priority\":{}", Json(&priority_text(priority))),
                );
            }
            (What::QueueDestroyed, Track::Queue(q)) => {
                self.close_off(q, at, false);
                self.instant("destroyed", at, track, format_args!(""));
            }
            (What::Taken { packets, held }, _) => self.instant(
                "taken",
                at,
                track,
                format_args!("\"packets\":{packets},\"held\":{held}"),
            ),
            (What::Forwarded { packets, in_flight }, _) => self.instant(
                "forwarded",
                at,
                track,
                format_args!("\"packets\":{packets},\"in_flight\":{in_flight}"),
            ),
            (What::Completed { packets }, _) => {
                self.instant("completed", at, track, format_args!("\"packets\":{packets}"))
            }
            (What::Counts { held, in_flight }, Track::Queue(q)) => {
                let name = format!("queue {}", q.0);
                self.event(
                    &name,
                    'C',
                    at,
                    q.0,
                    format_args!(",\"args\":{{\"held\":{held},\"in_flight\":{in_flight}}}"),
                );
            }
            (What::PriorityChanged { from, to, by }, Track::Queue(q)) => {
                let by = match by {
                    ChangedBy::Application => "application (hsa_amd_queue_set_priority)",
                    ChangedBy::Operator => "operator (xhsactl set-priority)",
                    ChangedBy::Libxhsa => "libxhsa",
                };
                let (f, t) = (priority_text(from), priority_text(to));
                self.instant(
                    "priority",
                    at,
                    track,
                    format_args!("\"from\":{},\"to\":{},\"by\":{}", Json(&f), Json(&t), Json(by)),
                );
                self.name_queue(q, at, Some(to));
            }
            (What::Passthrough, _) => self.instant(
                "passthrough",
                at,
                track,
                format_args!(
                    "\"why\":\"an internal failure: the queue passes through unscheduled\""
                ),
            ),
            (What::Off { how }, Track::Queue(q)) => {
                self.off.entry(q).or_insert((at, how));
            }
            (What::On, Track::Queue(q)) => self.close_off(q, at, false),
            (What::Kfd { call, dur, queues, done, ok }, _) => {
                self.complete(
                    call.name(),
                    at,
                    dur,
                    track,
                    format_args!("\"queues\":{queues},\"done\":{done},\"ok\":{ok}"),
                );
                self.last_at = self.last_at.max(at.saturating_add(dur));
            }
            (What::Dropped { events }, _) => {
                self.dropped += events;
                self.instant(
                    "events dropped",
                    at,
                    Track::Process,
                    format_args!("\"events\":{events}"),
                );
            }
            // A queue record on another track: nothing to draw.
            _ => {}
        }
    }

    fn close_off(&mut self, q: QueueId, at: Nanos, at_exit: bool) {
        if let Some((since, how)) = self.off.remove(&q) {
            let extra = if at_exit { ",\"still_off_at_exit\":true" } else { "" };
            self.complete(
                "off the GPU",
                since,
                at.saturating_sub(since),
                Track::Queue(q),
                format_args!("\"how\":{}{extra}", Json(how_text(how))),
            );
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.out.write_all(self.text.as_bytes()).and_then(|_| self.out.flush());
        self.text.clear();
        r
    }

    /// Writes `events` (one buffer) and flushes.
    pub fn write(&mut self, events: &[Event]) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        for e in events {
            self.one(e);
        }
        self.flush()
    }

    /// Ends the trace at `now`: spans still open end there, a `trace end` marker says how many
    /// events were dropped in all (`dropped`, of which markers not written yet are counted as
    /// well), and the array is closed.
    pub fn finish(&mut self, now: Nanos, dropped: u64) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let now = now.max(self.last_at);
        let open: Vec<QueueId> = self.off.keys().copied().collect();
        for q in open {
            self.close_off(q, now, true);
        }
        let written: u64 = self.counts.values().sum();
        let dropped = dropped.max(self.dropped);
        self.instant(
            "trace end",
            now,
            Track::Process,
            format_args!("\"events\":{written},\"events_dropped\":{dropped}"),
        );
        self.text.push_str("\n]\n");
        self.closed = true;
        self.flush()
    }

    /// The writer, once finished (tests read the buffer).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use xhsa_model::priority::Level;

    fn prio(level: i64, s: StreamPriority) -> Priority {
        Priority::new(Level::new(level).unwrap(), s)
    }

    fn q(n: u64) -> Track {
        Track::Queue(QueueId(n))
    }

    fn ev(at: Nanos, track: Track, what: What) -> Event {
        Event { at, track, what }
    }

    fn parse(bytes: &[u8]) -> Vec<Value> {
        let v: Value = serde_json::from_slice(bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", String::from_utf8_lossy(bytes)));
        v.as_array().expect("an array").clone()
    }

    fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
        events.iter().filter(|e| e["name"] == name).collect()
    }

    /// A queue's life in two buffers, a preemption of it, and the end: valid JSON with every
    /// event on its track, named tracks, and well-formed spans.
    #[test]
    fn a_trace_is_valid_json_with_named_tracks_and_spans() {
        let mut c = Chrome::begin(Vec::new(), 4242, 1_000_000_000, "app \"x\"", 0).unwrap();
        c.write(&[
            ev(1_000, q(3), What::QueueCreated { priority: prio(0, StreamPriority::Normal) }),
            ev(2_000, q(3), What::Taken { packets: 4, held: 2 }),
            ev(2_000, q(3), What::Forwarded { packets: 2, in_flight: 2 }),
            ev(2_000, q(3), What::Counts { held: 2, in_flight: 2 }),
            ev(
                2_500,
                q(3),
                What::PriorityChanged {
                    from: prio(0, StreamPriority::Normal),
                    to: prio(0, StreamPriority::High),
                    by: ChangedBy::Application,
                },
            ),
        ])
        .unwrap();
        c.write(&[
            ev(
                3_000,
                Track::Preemption(0),
                What::Kfd {
                    call: super::super::event::KfdCall::Deactivate,
                    dur: 1_500,
                    queues: 1,
                    done: 1,
                    ok: true,
                },
            ),
            ev(4_500, q(3), What::Off { how: How::Deactivate }),
            ev(9_000, q(3), What::On),
            ev(9_500, q(3), What::Completed { packets: 4 }),
            ev(9_600, Track::Process, What::Dropped { events: 7 }),
            ev(9_700, q(5), What::Off { how: How::Suspend }),
        ])
        .unwrap();
        c.finish(20_000, 9).unwrap();
        assert!(c.closed());
        let counts = c.counts().clone();
        let events = parse(&c.into_inner());
        for e in &events {
            assert_eq!(e["pid"], 4242, "{e}");
            assert!(e["ts"].is_number() && e["ph"].is_string() && e["tid"].is_u64(), "{e}");
        }
        let names: Vec<&Value> = events.iter().filter(|e| e["name"] == "thread_name").collect();
        let name_of = |tid: u64| {
            names
                .iter()
                .rev()
                .find(|e| e["tid"] == tid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        };
        assert_eq!(
            name_of(3).unwrap(),
            "queue 3 (priority 0 high)",
            "renamed at the priority change"
        );
        assert!(names.iter().any(|e| e["args"]["name"] == "queue 3 (priority 0 normal)"));
        assert_eq!(name_of(PREEMPTION_TID).unwrap(), "preemption, GPU 0");
        assert_eq!(
            name_of(5).unwrap(),
            "queue 5",
            "a queue first seen without its creation is named too"
        );
        assert_eq!(
            named(&events, "process_name")[0]["args"]["name"],
            "app \"x\" (pid 4242, libxhsa)"
        );
        // Times: microseconds on CLOCK_MONOTONIC (the offset added), nanosecond fractions.
        let taken = named(&events, "taken");
        assert_eq!(
            (taken[0]["ph"].as_str(), taken[0]["s"].as_str(), taken[0]["tid"].as_u64()),
            (Some("i"), Some("t"), Some(3))
        );
        assert_eq!(taken[0]["ts"].as_f64().unwrap(), 1_000_002.0);
        assert_eq!(taken[0]["args"]["packets"], 4);
        let prio_change = named(&events, "priority");
        assert_eq!(prio_change[0]["args"]["to"], "0 high");
        let counter = named(&events, "queue 3");
        assert_eq!(
            (counter[0]["ph"].as_str(), &counter[0]["args"]["in_flight"]),
            (Some("C"), &Value::from(2))
        );
        // The KFD call and the off-GPU spans are complete events, the latter closed at exit.
        let kfd = named(&events, "deactivate (UPDATE_QUEUE 0%)");
        assert_eq!(
            (kfd[0]["ph"].as_str(), kfd[0]["dur"].as_f64(), kfd[0]["tid"].as_u64()),
            (Some("X"), Some(1.5), Some(PREEMPTION_TID))
        );
        let off = named(&events, "off the GPU");
        assert_eq!(off.len(), 2);
        let of = |tid: u64| off.iter().find(|e| e["tid"] == tid).unwrap();
        assert_eq!((of(3)["ts"].as_f64(), of(3)["dur"].as_f64()), (Some(1_000_004.5), Some(4.5)));
        assert_eq!(of(5)["args"]["still_off_at_exit"], true);
        assert_eq!(of(5)["dur"].as_f64(), Some(10.3));
        let end = named(&events, "trace end");
        assert_eq!(
            (end[0]["args"]["events_dropped"].as_u64(), end[0]["args"]["events"].as_u64()),
            (Some(9), Some(11))
        );
        assert_eq!(named(&events, "events dropped")[0]["args"]["events"], 7);
        assert_eq!(counts.get("taken"), Some(&1));
        assert_eq!(counts.values().sum::<u64>(), 11);
    }

    /// A trace never finished (the process killed) is an unterminated array; finishing an
    /// empty one gives `[`, the process name and the end marker.
    #[test]
    fn an_empty_trace_is_still_valid() {
        let mut c = Chrome::begin(Vec::new(), 1, 0, "p", 0).unwrap();
        c.write(&[]).unwrap();
        c.finish(5, 0).unwrap();
        c.finish(6, 0).unwrap();
        c.write(&[ev(7, q(1), What::On)]).unwrap();
        let events = parse(&c.into_inner());
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[1]["name"], "trace end");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(Json("a\"b\\c\n\u{1}").to_string(), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(Micros(1_234_567).to_string(), "1234.567");
        assert_eq!(Micros(5).to_string(), "0.005");
    }
}
