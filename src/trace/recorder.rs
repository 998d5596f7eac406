//! The bounded in-memory buffers and their hand-off to the writer thread.
//!
//! Each source of events (a GPU's scheduler, a GPU's preemption) has its own [`Recorder`]: a
//! buffer of at most `capacity` events that only its source appends to, so recording is a copy
//! into memory under a lock nobody else takes (the exit's flush aside, which only tries it).
//! When the buffer is full it is handed to the [`Sink`]'s queue (a lock held for a push or a pop,
//! never during I/O) and the writer thread, blocked on a condition variable, formats it into the
//! file ([`super::chrome`]). The source goes on with an empty buffer at once (a recycled one, or
//! a new allocation).
//!
//! If the writer falls behind — [`MAX_QUEUED`] full buffers already wait — the full buffer is
//! dropped instead: its events are counted, the new buffer starts with a
//! [`What::Dropped`] marker, the writer logs the first drop once, and the trace's end says how
//! many in all. Recording never waits for the writer and never does I/O.
//!
//! At exit ([`Sink::finish`]) recording stops, the queued buffers and every source's
//! remaining events are written on the exiting thread, and the JSON array is closed. A write
//! that fails disables the trace (logged once); nothing here panics into the application.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::chrome::Chrome;
use super::event::{Event, Track, What};
use crate::exit_lock::{lock_within, try_lock};
use crate::path::window::Nanos;

/// Full buffers that may wait for the writer; one more is dropped.
pub const MAX_QUEUED: usize = 2;
/// Emptied buffers kept for reuse.
const MAX_SPARES: usize = 2;
/// How long the exit waits for the writer to finish the buffer it is writing.
const EXIT_PATIENCE: Duration = Duration::from_secs(2);

type Buffer = Vec<Event>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The file side: the JSON writer, the first failure.
struct Output {
    chrome: Chrome<Box<dyn Write + Send>>,
    failed: Option<String>,
}

/// What the end of a trace did, for the exit's log line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// Records written to the file, in all.
    pub written: u64,
    /// Events dropped, in all.
    pub dropped: u64,
    /// Whether the first drop was already logged (by the writer).
    pub drop_logged: bool,
    /// Why the trace stopped early or could not be closed, unless the writer logged it.
    pub failure: Option<String>,
    /// Nothing was done: a forked child (the file is the parent's), or the trace was already
    /// finished.
    pub skipped: bool,
}

/// The process's trace: where the sources hand their full buffers, and the file.
pub struct Sink {
    capacity: usize,
    /// The process that opened the file: a forked child records nothing.
    pid: u32,
    /// Recording is on (off after a failure or at exit).
    on: AtomicBool,
    /// Full buffers waiting for the writer.
    queue: Mutex<VecDeque<Buffer>>,
    ready: Condvar,
    /// Signalled when the writer takes a buffer off the queue (tests wait on it for room).
    taken: Condvar,
    /// The writer must stop.
    closed: AtomicBool,
    spares: Mutex<Vec<Buffer>>,
    /// Every source's buffer, for the exit.
    sources: Mutex<Vec<Arc<Mutex<Buffer>>>>,
    output: Mutex<Output>,
    dropped: AtomicU64,
    drop_logged: AtomicBool,
    failure_logged: AtomicBool,
    /// Tests: runs between a full buffer leaving its source and entering the queue.
    #[cfg(test)]
    in_hand_off: Mutex<Option<Box<dyn Fn() + Send>>>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("capacity", &self.capacity)
            .field("on", &self.on)
            .field("dropped", &self.dropped)
            .finish()
    }
}

impl Sink {
    /// A trace of process `pid` into `out` (JSON started there), buffers of `capacity` events.
    /// `offset_ns` turns libxhsa's clock into `CLOCK_MONOTONIC`; `start` is now on it.
    pub fn new(
        out: Box<dyn Write + Send>,
        capacity: usize,
        pid: u32,
        offset_ns: u64,
        process: &str,
        start: Nanos,
    ) -> std::io::Result<Sink> {
        let chrome = Chrome::begin(out, pid, offset_ns, process, start)?;
        Ok(Sink {
            capacity: capacity.max(1),
            pid,
            on: AtomicBool::new(true),
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            taken: Condvar::new(),
            closed: AtomicBool::new(false),
            spares: Mutex::new(Vec::new()),
            sources: Mutex::new(Vec::new()),
            output: Mutex::new(Output { chrome, failed: None }),
            dropped: AtomicU64::new(0),
            drop_logged: AtomicBool::new(false),
            failure_logged: AtomicBool::new(false),
            #[cfg(test)]
            in_hand_off: Mutex::new(None),
        })
    }

    /// Whether events are still recorded.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Stops recording (a failure of the tracer); the exit still closes the file.
    pub fn disable(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A new source with its own buffer.
    pub fn recorder(self: &Arc<Self>) -> Recorder {
        let buf = Arc::new(Mutex::new(Vec::with_capacity(self.capacity)));
        lock(&self.sources).push(buf.clone());
        Recorder { sink: self.clone(), buf }
    }

    /// Full buffers waiting for the writer.
    pub fn queued(&self) -> usize {
        lock(&self.queue).len()
    }

    /// Blocks until fewer than [`MAX_QUEUED`] buffers wait (tests: a recorder that must not
    /// drop lets the writer thread catch up; the application's threads never wait).
    #[cfg(test)]
    pub fn wait_for_room(&self) {
        let mut q = lock(&self.queue);
        while q.len() >= MAX_QUEUED {
            q = self.taken.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn spare(&self) -> Buffer {
        try_lock(&self.spares)
            .and_then(|mut s| s.pop())
            .unwrap_or_else(|| Vec::with_capacity(self.capacity))
    }

    fn recycle(&self, mut buf: Buffer) {
        buf.clear();
        let mut s = lock(&self.spares);
        if s.len() < MAX_SPARES {
            s.push(buf);
        }
    }

    /// Hands the full `buf` to the writer and leaves an empty one in its place, or, when the
    /// writer is [`MAX_QUEUED`] buffers behind, drops its events and leaves the drop marker (at
    /// `at`).
    fn hand_off(&self, buf: &mut Buffer, at: Nanos) {
        if std::process::id() != self.pid {
            // A forked child: the file and the writer are the parent's.
            self.on.store(false, Ordering::Relaxed);
            buf.clear();
            return;
        }
        if self.queued() >= MAX_QUEUED {
            // The new marker also stands for the drops an earlier marker in this buffer counted:
            // a run of drops ends as one marker with the whole count.
            let (mut earlier, mut now) = (0, 0);
            for e in buf.iter() {
                match e.what {
                    What::Dropped { events } => earlier += events,
                    _ => now += 1,
                }
            }
            self.dropped.fetch_add(now, Ordering::Relaxed);
            buf.clear();
            buf.push(Event {
                at,
                track: Track::Process,
                what: What::Dropped { events: earlier + now },
            });
            return;
        }
        let full = std::mem::replace(buf, self.spare());
        #[cfg(test)]
        if let Some(f) = lock(&self.in_hand_off).as_ref() {
            f();
        }
        lock(&self.queue).push_back(full);
        self.ready.notify_one();
    }

    /// Writes the queued buffers (the writer thread's work; tests call it directly). Returns
    /// how many were written.
    pub fn write_queued(&self) -> usize {
        let mut n = 0;
        loop {
            // The output lock is held from the pop to the write: `finish` (which takes it
            // first) never meets a buffer that left the queue but is not written yet.
            let mut out = lock(&self.output);
            let Some(buf) = lock(&self.queue).pop_front() else { return n };
            self.write_locked(&mut out, &buf);
            drop(out);
            self.recycle(buf);
            n += 1;
        }
    }

    fn write_locked(&self, out: &mut Output, buf: &[Event]) {
        if out.failed.is_some() || out.chrome.closed() {
            return;
        }
        if let Err(e) = out.chrome.write(buf) {
            self.fail(out, format!("writing the trace failed ({e})"));
        }
    }

    fn fail(&self, out: &mut Output, why: String) {
        self.on.store(false, Ordering::Relaxed);
        self.closed.store(true, Ordering::Release);
        out.failed = Some(why);
    }

    /// The writer thread's loop: blocks until a buffer is handed off, writes it; returns at
    /// exit or after a failure (logged once).
    pub fn run_writer(&self) {
        loop {
            {
                let mut q = lock(&self.queue);
                loop {
                    if self.closed.load(Ordering::Acquire) {
                        return;
                    }
                    if !q.is_empty() {
                        break;
                    }
                    q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            }
            // The output lock first, then the pop, held until the buffer is written: `finish`
            // (output, then queue) either drains this buffer itself or waits for its write; a
            // buffer popped and not yet written when the file closed was lost before.
            let mut out = lock(&self.output);
            let Some(buf) = lock(&self.queue).pop_front() else { continue };
            self.taken.notify_all();
            self.write_locked(&mut out, &buf);
            if let Some(why) = &out.failed {
                self.failure_logged.store(true, Ordering::Relaxed);
                tracing::error!("xhsa: XHSA_TRACE: {why}; tracing is off from now on");
                return;
            }
            drop(out);
            let dropped = self.dropped();
            if dropped > 0 && !self.drop_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "xhsa: XHSA_TRACE: the trace writer fell behind and {dropped} events were dropped so far (marked in the trace; a larger XHSA_TRACE_BUFFER makes this rarer)"
                );
            }
            self.recycle(buf);
        }
    }

    /// Ends the trace at `now`: recording stops; what the writer has queued and what every
    /// source still holds are written on this thread; the JSON is closed. Never waits more
    /// than a moment for the writer; a source busy recording at this instant loses its
    /// events (counted as dropped). Idempotent.
    pub fn finish(&self, now: Nanos) -> Finished {
        self.on.store(false, Ordering::Relaxed);
        let mut report = Finished {
            dropped: self.dropped(),
            drop_logged: self.drop_logged.load(Ordering::Relaxed),
            ..Finished::default()
        };
        if std::process::id() != self.pid {
            report.skipped = true;
            return report;
        }
        let Some(mut out) = lock_within(&self.output, EXIT_PATIENCE) else {
            report.failure = Some(
                "the trace writer did not finish its write in time; the trace is left unterminated"
                    .into(),
            );
            return report;
        };
        report.skipped = out.chrome.closed();
        if !out.chrome.closed() && out.failed.is_none() {
            let queued: Vec<Buffer> = lock_within(&self.queue, EXIT_PATIENCE)
                .map(|mut q| q.drain(..).collect())
                .unwrap_or_default();
            for buf in &queued {
                self.write_locked(&mut out, buf);
            }
            let sources: Vec<Arc<Mutex<Buffer>>> =
                lock_within(&self.sources, EXIT_PATIENCE).map(|s| s.clone()).unwrap_or_default();
            for src in sources {
                // A source's thread may be inside an append at this instant: a moment's wait.
                match lock_within(&src, Duration::from_millis(50)) {
                    Some(mut b) => {
                        self.write_locked(&mut out, &b);
                        b.clear();
                    }
                    // Its events are lost; counted as one (their number is unknown).
                    None => {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // A source that was handing a full buffer off when the queue was drained (the buffer
            // out of the source, not yet queued; it is queued under the source's lock, which
            // the loop above waited for) left it in the queue meanwhile: written too.
            let late: Vec<Buffer> = lock_within(&self.queue, EXIT_PATIENCE)
                .map(|mut q| q.drain(..).collect())
                .unwrap_or_default();
            for buf in &late {
                self.write_locked(&mut out, buf);
            }
            report.dropped = self.dropped();
            if out.failed.is_none() {
                if let Err(e) = out.chrome.finish(now, report.dropped) {
                    self.fail(&mut out, format!("closing the trace failed ({e})"));
                }
            }
        }
        report.written = out.chrome.counts().values().sum();
        report.failure =
            out.failed.clone().filter(|_| !self.failure_logged.load(Ordering::Relaxed));
        self.closed.store(true, Ordering::Release);
        drop(out);
        // Lets a writer blocked on the queue return.
        drop(lock_within(&self.queue, Duration::from_millis(10)));
        self.ready.notify_all();
        self.taken.notify_all();
        report
    }

    /// Records written so far, by kind.
    pub fn counts(&self) -> std::collections::BTreeMap<&'static str, u64> {
        lock(&self.output).chrome.counts().clone()
    }
}

/// One source's buffer; see the module doc.
#[derive(Debug)]
pub struct Recorder {
    sink: Arc<Sink>,
    buf: Arc<Mutex<Buffer>>,
}

impl Recorder {
    /// Records one event.
    pub fn record(&self, e: Event) {
        self.add(std::iter::once(e), 1);
    }

    /// Records `events` (emptying it, so that the caller can reuse its allocation).
    pub fn append(&self, events: &mut Vec<Event>) {
        let n = events.len();
        self.add(events.drain(..), n);
    }

    /// Records the `n` `events`. Never blocks: if the buffer is busy (only the exit's flush
    /// takes it) the events are counted as dropped.
    fn add(&self, events: impl Iterator<Item = Event>, n: usize) {
        if n == 0 || !self.sink.is_on() {
            return;
        }
        let Some(mut buf) = try_lock(&self.buf) else {
            self.sink.dropped.fetch_add(n as u64, Ordering::Relaxed);
            return;
        };
        for e in events {
            if buf.len() >= self.sink.capacity {
                self.sink.hand_off(&mut buf, e.at);
                if !self.sink.is_on() {
                    return;
                }
            }
            buf.push(e);
        }
    }

    /// Events in this source's buffer now.
    pub fn len(&self) -> usize {
        lock(&self.buf).len()
    }

    /// Whether this source's buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The process's sink.
    pub fn sink(&self) -> &Arc<Sink> {
        &self.sink
    }
}

/// What the trace modules' tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::lock;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A `Write` the test can read back.
    #[derive(Clone, Default)]
    pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use xhsa_model::ids::QueueId;

    use super::test_support::Shared;

    /// Fails every write after the first `ok` bytes.
    struct Failing(usize);

    impl Write for Failing {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 < b.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn sink(capacity: usize) -> (Arc<Sink>, Shared) {
        let file = Shared::default();
        let s =
            Sink::new(Box::new(file.clone()), capacity, std::process::id(), 0, "test", 0).unwrap();
        (Arc::new(s), file)
    }

    fn taken(i: u64) -> Event {
        Event::queue(i, QueueId(1), What::Taken { packets: 1, held: 0 })
    }

    fn events(file: &Shared) -> Vec<Value> {
        let v: Value = serde_json::from_slice(&lock(&file.0)).expect("valid JSON");
        v.as_array().unwrap().clone()
    }

    fn times_of(file: &Shared, name: &str) -> Vec<f64> {
        events(file)
            .iter()
            .filter(|e| e["name"] == name)
            .map(|e| e["ts"].as_f64().unwrap())
            .collect()
    }

    /// The buffer never holds more than its capacity: a full one goes to the writer's queue and
    /// recording goes on in an empty one; nothing is written before the writer runs.
    #[test]
    fn a_full_buffer_is_handed_off_and_recording_goes_on() {
        let (s, file) = sink(4);
        let r = s.recorder();
        for i in 0..4 {
            r.record(taken(i));
        }
        assert_eq!((r.len(), s.queued()), (4, 0));
        r.record(taken(4));
        assert_eq!((r.len(), s.queued()), (1, 1), "handed off when the fifth arrived");
        for i in 5..9 {
            r.record(taken(i));
        }
        assert_eq!((r.len(), s.queued()), (1, 2));
        assert!(r.len() <= 4);
        assert_eq!(s.write_queued(), 2);
        assert_eq!(s.queued(), 0);
        let f = s.finish(1_000);
        assert_eq!((f.written, f.dropped, f.failure), (9, 0, None));
        let times = times_of(&file, "taken");
        assert_eq!(
            times,
            (0..9).map(|i| i as f64 / 1000.0).collect::<Vec<_>>(),
            "every event, in order"
        );
    }

    /// A writer more than MAX_QUEUED buffers behind: the next full buffer is dropped and
    /// counted, the drop is marked in the trace (one marker for a run of drops), and what was
    /// queued is still written: every event is in the file or counted.
    #[test]
    fn a_writer_that_falls_behind_makes_drops_which_are_counted_and_marked() {
        let (s, file) = sink(2);
        let r = s.recorder();
        for i in 0..10 {
            r.record(taken(i));
        }
        // [0,1] and [2,3] queued; [4,5] dropped, then [marker,6], [marker,7], [marker,8].
        assert_eq!(s.queued(), MAX_QUEUED);
        assert_eq!(s.dropped(), 5);
        let f = s.finish(100);
        assert_eq!(f.dropped, 5);
        let all = events(&file);
        let markers: Vec<u64> = all
            .iter()
            .filter(|e| e["name"] == "events dropped")
            .map(|e| e["args"]["events"].as_u64().unwrap())
            .collect();
        assert_eq!(markers, vec![5]);
        let end = all.iter().find(|e| e["name"] == "trace end").unwrap();
        assert_eq!(end["args"]["events_dropped"].as_u64(), Some(5));
        assert_eq!(
            times_of(&file, "taken"),
            vec![0.0, 0.001, 0.002, 0.003, 0.009],
            "the queued buffers and the last event are written"
        );
    }

    /// With a writer thread that keeps up, a tiny buffer loses nothing and the file is one
    /// valid JSON array.
    #[test]
    fn a_writer_thread_that_keeps_up_loses_nothing() {
        let (s, file) = sink(16);
        let w = s.clone();
        let t = std::thread::spawn(move || w.run_writer());
        let r = s.recorder();
        for i in 0..2_000 {
            r.record(taken(i));
            if i % 16 == 0 {
                // Let the writer keep up (what the test is about is the hand-off, not speed).
                s.wait_for_room();
            }
        }
        let f = s.finish(5_000);
        t.join().unwrap();
        assert_eq!((f.dropped, f.failure), (0, None));
        assert_eq!(times_of(&file, "taken").len(), 2_000);
        assert_eq!(f.written, 2_000);
    }

    /// Several sources (a scheduler and a preemption) write into one file; the exit writes
    /// what each still holds.
    #[test]
    fn the_exit_writes_every_source() {
        let (s, file) = sink(8);
        let a = s.recorder();
        let b = s.recorder();
        a.record(taken(1));
        b.record(Event { at: 2, track: Track::Preemption(0), what: What::On });
        s.finish(3);
        assert_eq!(times_of(&file, "taken").len(), 1);
        assert!(events(&file)
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "preemption, GPU 0"));
        // After the exit nothing more is recorded, and finishing again changes nothing.
        a.record(taken(9));
        assert!(a.is_empty());
        let before = lock(&file.0).len();
        s.finish(4);
        assert_eq!(lock(&file.0).len(), before);
    }

    /// A buffer on its way from a full source to the queue when the exit drains the queue is
    /// written too (the exit waits for the source, which queues it under its lock, then drains
    /// the queue again).
    #[test]
    fn a_buffer_handed_off_during_the_exit_is_written() {
        let (s, file) = sink(4);
        let r = s.recorder();
        let (at_hand_off, paused) = std::sync::mpsc::channel();
        *lock(&s.in_hand_off) = Some(Box::new(move || {
            at_hand_off.send(()).unwrap();
            // The exit drains the queue meanwhile, then waits for this source's lock.
            std::thread::sleep(Duration::from_millis(20));
        }));
        let recording = std::thread::spawn(move || {
            for i in 0..5 {
                r.record(taken(i));
            }
        });
        paused.recv().unwrap();
        let f = s.finish(10);
        recording.join().unwrap();
        assert_eq!(f.dropped, 0);
        assert_eq!(
            times_of(&file, "taken").len(),
            4,
            "the four events of the buffer in hand are in the file"
        );
    }

    /// A failing file stops the trace: recording is off, the failure is reported once.
    #[test]
    fn a_write_failure_turns_tracing_off() {
        let s =
            Arc::new(Sink::new(Box::new(Failing(200)), 2, std::process::id(), 0, "t", 0).unwrap());
        let r = s.recorder();
        for i in 0..6 {
            r.record(taken(i));
        }
        s.write_queued();
        assert!(!s.is_on());
        r.record(taken(7));
        let f = s.finish(10);
        assert!(f.failure.unwrap().contains("disk full"));
    }

    /// The writer thread blocks (no spinning) and returns when the trace ends.
    #[test]
    fn the_writer_thread_ends_with_the_trace() {
        let (s, _) = sink(4);
        let w = s.clone();
        let t = std::thread::spawn(move || w.run_writer());
        std::thread::sleep(Duration::from_millis(20));
        s.finish(1);
        t.join().unwrap();
    }
}
