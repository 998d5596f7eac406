//! A GPU's preemption track: the KFD calls the preemption mechanisms make, and the spans each
//! queue spends off the GPU.
//!
//! [`TracedKfd`] wraps the [`KfdPort`] the preemption uses (only when `XHSA_TRACE` is set):
//! every call is passed through unchanged and recorded as a span on the GPU's preemption track
//! (its duration, how many queues it named and how many it acted on, whether it failed), and a
//! queue taken off or put back is recorded on the queue's own track. The watcher and its policy
//! are untouched. The calls run on the watcher thread (and on a destroying or exiting thread,
//! under the preemption's lock), never on an application's submission path.
#![forbid(unsafe_code)]

use super::event::{Event, KfdCall, Track, What};
use super::recorder::Recorder;
use crate::preempt::{How, KfdFailure, KfdPort, Target};
use xhsa_model::ids::QueueId;

/// KFD's "queue id invalid" bit in a suspend/resume array (the queue was not acted on).
const INVALID_MASK: u32 = xhsa_ioctl::abi::debug::KFD_DBG_QUEUE_INVALID_MASK;

/// Which libxhsa queue has a KFD queue id.
pub type QueueOfKfd = Box<dyn Fn(u32) -> Option<QueueId> + Send>;

/// The traced port; see the module doc.
pub struct TracedKfd {
    inner: Box<dyn KfdPort>,
    rec: Recorder,
    gpu: u16,
    queue_of: QueueOfKfd,
    events: Vec<Event>,
}

impl TracedKfd {
    /// Traces `inner`, the port of GPU `gpu`; `queue_of` names the queues of suspend/resume.
    pub fn new(
        inner: Box<dyn KfdPort>,
        rec: Recorder,
        gpu: u16,
        queue_of: QueueOfKfd,
    ) -> TracedKfd {
        TracedKfd { inner, rec, gpu, queue_of, events: Vec::new() }
    }

    fn call(&mut self, call: KfdCall, start: u64, queues: u32, done: u32, ok: bool) {
        let dur = self.inner.now().saturating_sub(start);
        self.events.push(Event {
            at: start,
            track: Track::Preemption(self.gpu),
            what: What::Kfd { call, dur, queues, done, ok },
        });
    }

    fn queue(&mut self, q: QueueId, what: What) {
        let at = self.inner.now();
        self.events.push(Event::queue(at, q, what));
    }

    fn flush(&mut self) {
        self.rec.append(&mut self.events);
    }

    /// A suspend or resume of `asked` (the ids as given): `ids` as KFD left them.
    fn many(
        &mut self,
        call: KfdCall,
        start: u64,
        asked: &[u32],
        ids: &[u32],
        r: &Result<u32, KfdFailure>,
    ) {
        let acted: Vec<u32> = if r.is_ok() {
            asked.iter().zip(ids).filter(|(_, s)| *s & INVALID_MASK == 0).map(|(a, _)| *a).collect()
        } else {
            Vec::new()
        };
        self.call(call, start, asked.len() as u32, acted.len() as u32, r.is_ok());
        for id in acted {
            if let Some(q) = (self.queue_of)(id) {
                let what = if call == KfdCall::Suspend {
                    What::Off { how: How::Suspend }
                } else {
                    What::On
                };
                self.queue(q, what);
            }
        }
        self.flush();
    }
}

impl KfdPort for TracedKfd {
    fn update_queue(&mut self, t: &Target, percentage: u32) -> Result<(), KfdFailure> {
        let start = self.inner.now();
        let r = self.inner.update_queue(t, percentage);
        let call = if percentage == 0 { KfdCall::Deactivate } else { KfdCall::Reactivate };
        self.call(call, start, 1, u32::from(r.is_ok()), r.is_ok());
        if r.is_ok() {
            self.queue(
                t.queue,
                if percentage == 0 { What::Off { how: How::Deactivate } } else { What::On },
            );
        }
        self.flush();
        r
    }

    fn enable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        let start = self.inner.now();
        let r = self.inner.enable_debug_trap();
        self.call(KfdCall::EnableDebugTrap, start, 0, 0, r.is_ok());
        self.flush();
        r
    }

    fn disable_debug_trap(&mut self) -> Result<(), KfdFailure> {
        let start = self.inner.now();
        let r = self.inner.disable_debug_trap();
        self.call(KfdCall::DisableDebugTrap, start, 0, 0, r.is_ok());
        self.flush();
        r
    }

    fn suspend(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
        let asked = ids.to_vec();
        let start = self.inner.now();
        let r = self.inner.suspend(ids);
        self.many(KfdCall::Suspend, start, &asked, ids, &r);
        r
    }

    fn resume(&mut self, ids: &mut [u32]) -> Result<u32, KfdFailure> {
        let asked = ids.to_vec();
        let start = self.inner.now();
        let r = self.inner.resume(ids);
        self.many(KfdCall::Resume, start, &asked, ids, &r);
        r
    }

    fn clear_new(&mut self) -> Result<(), KfdFailure> {
        let start = self.inner.now();
        let r = self.inner.clear_new();
        self.call(KfdCall::ClearNew, start, 0, 0, r.is_ok());
        self.flush();
        r
    }

    fn queue_snapshot(&mut self) -> Result<Vec<crate::preempt::SnapshotQueue>, KfdFailure> {
        let start = self.inner.now();
        let r = self.inner.queue_snapshot();
        self.call(KfdCall::QueueSnapshot, start, 0, 0, r.is_ok());
        self.flush();
        r
    }

    fn now(&self) -> u64 {
        self.inner.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preempt::mechanism::fake::FakeKfd;
    use crate::preempt::mechanism::Mechanisms;
    use crate::preempt::PreemptMode;
    use crate::trace::recorder::test_support::Shared;
    use crate::trace::recorder::Sink;
    use std::sync::Arc;

    fn target(q: u64, id: u32) -> Target {
        Target {
            queue: QueueId(q),
            kfd_id: id,
            ring_base: 0x10000 * q,
            ring_bytes: 65536,
            priority: 7,
            percentage: 100,
        }
    }

    fn run(mode: PreemptMode, k: FakeKfd) -> Vec<serde_json::Value> {
        let file = Shared::default();
        let sink = Arc::new(
            Sink::new(Box::new(file.clone()), 1024, std::process::id(), 0, "t", 0).unwrap(),
        );
        let port = TracedKfd::new(
            Box::new(k),
            sink.recorder(),
            0,
            Box::new(|id| Some(QueueId(u64::from(id) + 100))),
        );
        let mut m = Mechanisms::new(Box::new(port), mode);
        let taken = m.take_off(&[target(1, 3), target(2, 4)]).unwrap();
        let back: Vec<(Target, How)> =
            taken.queues.iter().map(|(q, h)| (target(q.0, q.0 as u32 + 2), *h)).collect();
        m.put_back(&back).unwrap();
        sink.finish(1_000_000);
        let v: serde_json::Value = serde_json::from_slice(&file.0.lock().unwrap()).unwrap();
        v.as_array().unwrap().clone()
    }

    fn spans(events: &[serde_json::Value], tid: u64) -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == tid)
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Deactivation: one call per queue each way on the preemption track, and each queue's
    /// time off the GPU on its own track.
    #[test]
    fn deactivations_are_spans_and_each_queue_is_off_between() {
        let events = run(PreemptMode::Queue, FakeKfd::default());
        let pre = crate::trace::chrome::PREEMPTION_TID;
        assert_eq!(
            spans(&events, pre),
            [
                "deactivate (UPDATE_QUEUE 0%)",
                "deactivate (UPDATE_QUEUE 0%)",
                "reactivate (UPDATE_QUEUE)",
                "reactivate (UPDATE_QUEUE)"
            ]
        );
        assert_eq!(spans(&events, 1), ["off the GPU"]);
        assert_eq!(spans(&events, 2), ["off the GPU"]);
        let off = events.iter().find(|e| e["name"] == "off the GPU").unwrap();
        assert!(off["args"]["how"].as_str().unwrap().starts_with("deactivated"));
        assert!(
            off.get("args").and_then(|a| a.get("still_off_at_exit")).is_none(),
            "put back before the end"
        );
    }

    /// Suspend: one call for both queues, named through the KFD ids.
    #[test]
    fn a_suspend_names_its_queues_through_their_kfd_ids() {
        let events = run(PreemptMode::Suspend, FakeKfd { cost_ns: 0, ..Default::default() });
        let pre = crate::trace::chrome::PREEMPTION_TID;
        let calls = spans(&events, pre);
        assert!(
            calls.contains(&"suspend (DBG_TRAP SUSPEND_QUEUES)".to_string())
                && calls.contains(&"resume (DBG_TRAP RESUME_QUEUES)".to_string()),
            "{calls:?}"
        );
        let suspend =
            events.iter().find(|e| e["name"] == "suspend (DBG_TRAP SUSPEND_QUEUES)").unwrap();
        assert_eq!(
            (suspend["args"]["queues"].as_u64(), suspend["args"]["done"].as_u64()),
            (Some(2), Some(2))
        );
        assert_eq!(spans(&events, 103), ["off the GPU"]);
        assert_eq!(spans(&events, 104), ["off the GPU"]);
    }
}
