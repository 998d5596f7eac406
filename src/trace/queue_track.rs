//! A GPU's queue tracks: what each shadow queue did, from the scheduler's counters.
//!
//! The edge calls [`QueueTracer::observe`] after every use of a GPU's scheduler (a doorbell's
//! forwarding pass, a completion, a create, a priority change, a destroy), under the scheduler's
//! lock, with every queue's counters ([`QueueStats`]) at that moment. The tracer compares them
//! with the last ones and records what changed: packets taken, forwarded and completed, the
//! held and in-flight counts, the priority, the degradation to passthrough, the queue's creation
//! and its end. Events carry the pass's time, so a pass's packets appear together. The
//! scheduler itself is untouched: with `XHSA_TRACE` unset no tracer exists and nothing is
//! called.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use super::event::{ChangedBy, Event, What};
use super::recorder::Recorder;
use crate::path::window::Nanos;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::Priority;
use xhsa_model::stats::{QueueStats, FLAG_PASSTHROUGH};

/// One queue at the moment the tracer looks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct QueueView {
    pub id: QueueId,
    pub stats: QueueStats,
    /// Degraded to passthrough (`Direct`).
    pub direct: bool,
}

/// What was recorded of a queue last.
#[derive(Copy, Clone, Debug, Default)]
struct Seen {
    taken: u64,
    forwarded: u64,
    completed: u64,
    held: u32,
    in_flight: u32,
    priority: i32,
    direct: bool,
    round: u64,
}

fn clamp(n: u64) -> u32 {
    n.min(u32::MAX as u64) as u32
}

/// The queue tracks of one GPU; see the module doc.
#[derive(Debug)]
pub struct QueueTracer {
    rec: Recorder,
    last: BTreeMap<QueueId, Seen>,
    events: Vec<Event>,
    round: u64,
    /// The queue whose priority the application (or an operator) is changing now.
    by_application: Option<(QueueId, ChangedBy)>,
}

impl QueueTracer {
    pub fn new(rec: Recorder) -> QueueTracer {
        QueueTracer {
            rec,
            last: BTreeMap::new(),
            events: Vec::with_capacity(64),
            round: 0,
            by_application: None,
        }
    }

    /// The next priority change of `q` is the application's (`hsa_amd_queue_set_priority`).
    pub fn application_priority(&mut self, q: QueueId) {
        self.by_application = Some((q, ChangedBy::Application));
    }

    /// The next priority change of `q` is an operator's (`xhsactl set-priority`).
    pub fn operator_priority(&mut self, q: QueueId) {
        self.by_application = Some((q, ChangedBy::Operator));
    }

    /// Records what changed since the last observation: `queues` are every queue of the GPU now;
    /// a queue no longer among them was destroyed.
    pub fn observe(&mut self, now: Nanos, queues: impl IntoIterator<Item = QueueView>) {
        self.round += 1;
        let round = self.round;
        let by_application = self.by_application.take();
        for v in queues {
            let (id, st) = (v.id, v.stats);
            let e = |what| Event::queue(now, id, what);
            let seen = match self.last.get_mut(&id) {
                Some(s) => s,
                None => {
                    let priority = st.priority().unwrap_or_default();
                    self.events.push(e(What::QueueCreated { priority }));
                    self.last.entry(id).or_insert(Seen { priority: st.priority, ..Seen::default() })
                }
            };
            seen.round = round;
            if v.direct && !seen.direct {
                self.events.push(e(What::Passthrough));
            }
            seen.direct = v.direct;
            // A queue out of the priority rings (passthrough, closing) has no priority to show.
            if !st.has_flag(FLAG_PASSTHROUGH) && st.priority != seen.priority {
                if let (Some(from), Some(to)) = (Priority::from_rank(seen.priority), st.priority())
                {
                    let by = match by_application {
                        Some((q, by)) if q == id => by,
                        _ => ChangedBy::Libxhsa,
                    };
                    self.events.push(e(What::PriorityChanged { from, to, by }));
                }
                seen.priority = st.priority;
            }
            if st.submitted > seen.taken {
                self.events.push(e(What::Taken {
                    packets: clamp(st.submitted - seen.taken),
                    held: st.pending,
                }));
            }
            if st.forwarded > seen.forwarded {
                self.events.push(e(What::Forwarded {
                    packets: clamp(st.forwarded - seen.forwarded),
                    in_flight: st.in_flight,
                }));
            }
            if st.completed > seen.completed {
                self.events
                    .push(e(What::Completed { packets: clamp(st.completed - seen.completed) }));
            }
            if (st.pending, st.in_flight) != (seen.held, seen.in_flight) {
                self.events.push(e(What::Counts { held: st.pending, in_flight: st.in_flight }));
            }
            seen.taken = seen.taken.max(st.submitted);
            seen.forwarded = seen.forwarded.max(st.forwarded);
            seen.completed = seen.completed.max(st.completed);
            (seen.held, seen.in_flight) = (st.pending, st.in_flight);
        }
        let events = &mut self.events;
        self.last.retain(|&id, s| {
            if s.round != round {
                if (s.held, s.in_flight) != (0, 0) {
                    events.push(Event::queue(now, id, What::Counts { held: 0, in_flight: 0 }));
                }
                events.push(Event::queue(now, id, What::QueueDestroyed));
            }
            s.round == round
        });
        self.rec.append(&mut self.events);
    }

    /// The recorder (the exit flushes through the sink).
    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::Track;
    use crate::trace::recorder::test_support::Shared;
    use crate::trace::recorder::Sink;
    use std::sync::Arc;
    use xhsa_model::priority::{Level, StreamPriority};

    fn rank(level: i64, s: StreamPriority) -> i32 {
        Priority::new(Level::new(level).unwrap(), s).rank()
    }

    fn view(id: u64, f: impl FnOnce(&mut QueueStats)) -> QueueView {
        let mut stats =
            QueueStats { priority: rank(0, StreamPriority::Normal), ..QueueStats::default() };
        f(&mut stats);
        QueueView { id: QueueId(id), stats, direct: false }
    }

    fn tracer() -> (QueueTracer, Arc<Sink>, Shared) {
        let file = Shared::default();
        let sink = Arc::new(
            Sink::new(Box::new(file.clone()), 1024, std::process::id(), 0, "t", 0).unwrap(),
        );
        (QueueTracer::new(sink.recorder()), sink, file)
    }

    fn recorded(sink: &Sink, file: &Shared) -> Vec<serde_json::Value> {
        sink.finish(1_000_000);
        let v: serde_json::Value = serde_json::from_slice(&file.0.lock().unwrap()).unwrap();
        v.as_array().unwrap().clone()
    }

    /// A queue's life as the scheduler's counters show it: every change becomes one event, an
    /// unchanged pass none.
    #[test]
    fn changes_of_the_counters_become_events() {
        let (mut t, sink, file) = tracer();
        t.observe(10, [view(3, |_| {})]);
        t.observe(20, [view(3, |s| (s.submitted, s.pending) = (5, 5))]);
        t.observe(
            30,
            [view(3, |s| (s.submitted, s.forwarded, s.pending, s.in_flight) = (5, 2, 3, 2))],
        );
        t.observe(
            31,
            [view(3, |s| (s.submitted, s.forwarded, s.pending, s.in_flight) = (5, 2, 3, 2))],
        );
        assert_eq!(t.recorder().len(), 5, "created; taken, counts; forwarded, counts; nothing");
        t.application_priority(QueueId(3));
        t.observe(
            40,
            [view(3, |s| {
                (s.submitted, s.forwarded, s.completed, s.pending, s.in_flight) = (5, 5, 5, 0, 0);
                s.priority = rank(0, StreamPriority::High);
            })],
        );
        t.observe(50, [view(4, |_| {})]);
        let events = recorded(&sink, &file);
        let on_3: Vec<&str> = events
            .iter()
            .filter(|e| e["tid"] == 3 && e["ph"] != "M" && e["ph"] != "C")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            on_3,
            ["created", "taken", "forwarded", "priority", "forwarded", "completed", "destroyed"]
        );
        let prio = events.iter().find(|e| e["name"] == "priority").unwrap();
        assert_eq!(
            (prio["args"]["to"].as_str(), prio["args"]["by"].as_str()),
            (Some("0 high"), Some("application (hsa_amd_queue_set_priority)"))
        );
        let counters: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e["name"] == "queue 3")
            .map(|e| {
                (e["args"]["held"].as_u64().unwrap(), e["args"]["in_flight"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(counters, [(5, 0), (3, 2), (0, 0)]);
        let taken = events.iter().find(|e| e["name"] == "taken").unwrap();
        assert_eq!(
            (taken["args"]["packets"].as_u64(), taken["ts"].as_f64()),
            (Some(5), Some(0.02))
        );
        assert!(events.iter().any(|e| e["name"] == "created" && e["tid"] == 4));
    }

    /// A queue degrading to passthrough is marked once; its priority (no longer in the rings)
    /// is not shown as a change; a priority change nobody asked for is libxhsa's.
    #[test]
    fn passthrough_and_priority_changes() {
        let (mut t, sink, _) = tracer();
        let rec = |t: &QueueTracer| t.recorder().len();
        t.observe(1, [view(1, |_| {})]);
        t.observe(2, [view(1, |s| s.priority = rank(5, StreamPriority::Normal))]);
        assert_eq!(rec(&t), 2);
        let direct = QueueView {
            direct: true,
            ..view(1, |s| (s.flags, s.priority) = (FLAG_PASSTHROUGH, 0))
        };
        t.observe(3, [direct]);
        t.observe(4, [direct]);
        assert_eq!(rec(&t), 3, "one passthrough marker, no priority change");
        let f = sink.finish(5);
        assert_eq!(f.written, 3);
        let _ = Track::Process;
    }
}
