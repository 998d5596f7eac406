//! The records the tracer keeps: small fixed-size values, copied into a buffer as they happen
//! and turned into text only by the writer ([`super::chrome`]).
//!
//! An [`Event`] is a time on libxhsa's clock (`entry::clock::now_ns`, the scheduler's `now`), a
//! [`Track`] (a queue, a GPU's preemption, or the process) and what happened ([`What`]). Nothing
//! in it points anywhere or owns memory: recording one is a copy.
#![forbid(unsafe_code)]

use crate::path::window::Nanos;
use crate::preempt::How;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::Priority;

/// Where an event is drawn.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Track {
    /// One shadow queue (its libxhsa id).
    Queue(QueueId),
    /// The KFD calls of the preemption of GPU `n` (the process's `n`th GPU).
    Preemption(u16),
    /// The process as a whole (the tracer's own markers).
    Process,
}

/// Who changed a queue's priority.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ChangedBy {
    /// The application (`hsa_amd_queue_set_priority`: a HIP stream priority).
    Application,
    /// An operator (`xhsactl set-priority`, applied by the owning process's watcher).
    Operator,
    /// libxhsa's settings: any other change the application did not ask for.
    Libxhsa,
}

/// A KFD call of the preemption mechanisms.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KfdCall {
    /// `UPDATE_QUEUE` with percentage 0: the queue taken off.
    Deactivate,
    /// `UPDATE_QUEUE` with the queue's percentage again: the queue put back.
    Reactivate,
    /// `DBG_TRAP SUSPEND_QUEUES`.
    Suspend,
    /// `DBG_TRAP RESUME_QUEUES`.
    Resume,
    /// `DBG_TRAP ENABLE` on the process.
    EnableDebugTrap,
    /// `DBG_TRAP DISABLE` on the process.
    DisableDebugTrap,
    /// `GET_QUEUE_SNAPSHOT` clearing KFD's new-queue flags.
    ClearNew,
    /// `GET_QUEUE_SNAPSHOT` finding the queues' KFD ids (in a debug-trap session of its own).
    QueueSnapshot,
}

impl KfdCall {
    /// The name shown in the trace.
    pub fn name(self) -> &'static str {
        match self {
            KfdCall::Deactivate => "deactivate (UPDATE_QUEUE 0%)",
            KfdCall::Reactivate => "reactivate (UPDATE_QUEUE)",
            KfdCall::Suspend => "suspend (DBG_TRAP SUSPEND_QUEUES)",
            KfdCall::Resume => "resume (DBG_TRAP RESUME_QUEUES)",
            KfdCall::EnableDebugTrap => "enable debug trap (DBG_TRAP ENABLE)",
            KfdCall::DisableDebugTrap => "disable debug trap (DBG_TRAP DISABLE)",
            KfdCall::ClearNew => "clear new-queue flags (GET_QUEUE_SNAPSHOT)",
            KfdCall::QueueSnapshot => "find KFD queue ids (GET_QUEUE_SNAPSHOT)",
        }
    }
}

/// What happened.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// A shadow queue was created at `priority`.
    QueueCreated { priority: Priority },
    /// A shadow queue was destroyed (after its drain).
    QueueDestroyed,
    /// `packets` were taken from the application's shadow ring; `held` are in libxhsa now.
    Taken { packets: u32, held: u32 },
    /// `packets` were written to the hardware queue; `in_flight` are on the hardware now.
    Forwarded { packets: u32, in_flight: u32 },
    /// `packets` were seen complete (through libxhsa's tracking barriers).
    Completed { packets: u32 },
    /// The queue's packets held in libxhsa and in flight changed.
    Counts { held: u32, in_flight: u32 },
    /// The queue's effective priority changed.
    PriorityChanged { from: Priority, to: Priority, by: ChangedBy },
    /// The queue degraded to passthrough (an internal failure).
    Passthrough,
    /// The queue's hardware queue was taken off the GPU.
    Off { how: How },
    /// The queue's hardware queue is back on the GPU.
    On,
    /// A KFD call took `dur` from `at`; it named `queues` queues of which `done` were acted on.
    Kfd { call: KfdCall, dur: Nanos, queues: u32, done: u32, ok: bool },
    /// The writer fell behind: `events` were dropped just before this point.
    Dropped { events: u64 },
}

/// One record; see the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds on libxhsa's clock.
    pub at: Nanos,
    pub track: Track,
    pub what: What,
}

impl Event {
    /// An event on queue `q`'s track.
    pub fn queue(at: Nanos, q: QueueId, what: What) -> Event {
        Event { at, track: Track::Queue(q), what }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recording is a copy of a small value: keep it small.
    #[test]
    fn an_event_is_small() {
        assert!(std::mem::size_of::<Event>() <= 48, "{} bytes", std::mem::size_of::<Event>());
    }
}
