//! Priority rings: the packets libxhsa holds, per shadow queue, inside one CU partition.
//!
//! A [`Partition`] is a set of CUs (an id and a [`CuMask`]; today one partition, the whole GPU)
//! with the shadow queues scheduled on it. For each queue it keeps a FIFO of pending packets, and
//! it picks the next packet to forward ([`Partition::next_forwardable`]):
//!
//! - queues of a higher [`Priority`] first;
//! - round-robin, one packet at a time, among queues of the same priority;
//! - only from a queue the level-1 window ([`crate::path::window`]) lets forward, and only
//!   while its hardware queue has room ([`Partition::set_capacity`]).
//!
//! Guarantees (property-tested in `tests` below): packets are never lost, duplicated or
//! reordered within a queue; a forwarded packet gets the sequence number it was pushed with; a
//! lower-priority queue never forwards a packet that would put more than `W` of its packets in
//! flight while higher-priority work is pending or in flight anywhere; with no higher-priority
//! work a queue is never held back; a queue of a higher priority is never passed over for a
//! lower one.
//!
//! Time enters only through [`Partition::observe`] (throttle accounting) and
//! [`Partition::stats`]; nothing here reads a clock or touches memory outside itself.
#![forbid(unsafe_code)]

use crate::path::packet::Packet;
use crate::path::window::{limit, CompletionError, Limit, Nanos, QueueWindow, Seq};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use xhsa_model::contention::Contention;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::Priority;
use xhsa_model::stats::{saturate_u32, QueueStats, FLAG_CONTENDED, FLAG_HELD};
use xhsa_model::window_size::WindowSize;

/// A set of CUs, bit `i` of word `i / 32` for CU `i` — the form `hsa_amd_queue_cu_set_mask`
/// takes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CuMask(Vec<u32>);

impl CuMask {
    /// All of `cu_count` CUs.
    pub fn all(cu_count: u32) -> CuMask {
        let full = cu_count / 32;
        let rest = cu_count - full * 32;
        let mut words = vec![u32::MAX; full as usize];
        if rest > 0 {
            words.push((1u32 << rest) - 1);
        }
        CuMask(words)
    }

    /// The mask made of these words.
    pub fn from_words(words: Vec<u32>) -> CuMask {
        CuMask(words)
    }

    /// The words, for `hsa_amd_queue_cu_set_mask`.
    pub fn words(&self) -> &[u32] {
        &self.0
    }

    /// Number of CUs in the mask.
    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether CU `cu` is in the mask.
    pub fn contains(&self, cu: u32) -> bool {
        self.0.get((cu / 32) as usize).is_some_and(|w| w & (1 << (cu % 32)) != 0)
    }

    /// The mask a hardware queue gets when its application asks for `app` (words as
    /// `hsa_amd_queue_cu_set_mask` takes them; empty: every CU, ROCr's reset) while its partition
    /// is `self`: the CUs of both — the application's mask is a bound the partition never widens.
    /// When they share no CU, the application's own mask (`Err`): the partition yields.
    pub fn bound_by(&self, app: &[u32]) -> Result<CuMask, CuMask> {
        if app.is_empty() {
            return Ok(self.clone());
        }
        let both: Vec<u32> =
            app.iter().enumerate().map(|(i, w)| w & self.0.get(i).copied().unwrap_or(0)).collect();
        if both.iter().all(|&w| w == 0) {
            Err(CuMask(app.to_vec()))
        } else {
            Ok(CuMask(both))
        }
    }
}

/// A packet chosen to go to the hardware.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Forward {
    /// The shadow queue it came from.
    pub queue: QueueId,
    /// Its position in that queue (0 for the first packet pushed).
    pub seq: Seq,
    /// The packet, unmodified.
    pub packet: Packet,
}

/// A queue on its way from one partition to another, with everything it holds.
#[derive(Clone, Debug)]
pub struct Detached(QueueState);

/// What a removed queue still held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// The packets not yet forwarded, oldest first; the caller forwards them (in this order)
    /// before the queue degrades to passthrough or is destroyed.
    pub pending: Vec<Packet>,
    /// Sequence number of `pending[0]`.
    pub first_seq: Seq,
    /// Packets forwarded and not seen completed.
    pub in_flight: u64,
}

/// A call about a queue that does not fit the partition's state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RingError {
    /// No such queue in this partition.
    UnknownQueue(QueueId),
    /// `add_queue` for a queue already there.
    DuplicateQueue(QueueId),
    /// A completion report that does not fit what was forwarded.
    Completion(QueueId, CompletionError),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::UnknownQueue(q) => write!(f, "{q} is not in this partition"),
            RingError::DuplicateQueue(q) => write!(f, "{q} was already added"),
            RingError::Completion(q, e) => write!(f, "{q}: {e}"),
        }
    }
}

impl std::error::Error for RingError {}

#[derive(Clone, Debug)]
struct QueueState {
    priority: Priority,
    fifo: VecDeque<Packet>,
    window: QueueWindow,
    capacity: u32,
    /// The first `expedite` packets of `fifo` go unthrottled (a passthrough library's
    /// dispatch and everything before it in the queue).
    expedite: usize,
    /// An operator paused the queue: nothing is forwarded, and its work holds nobody back.
    paused: bool,
    /// The preemption watcher holds the queue for higher work of another process: nothing is
    /// forwarded but what a passthrough library needs; its work still counts.
    held: bool,
    /// Beside a higher priority present but idle, at most this many packets in flight (0: no
    /// bound): the horizon ([`Partition::set_horizon`]).
    horizon: u32,
}

impl QueueState {
    fn has_work(&self) -> bool {
        !self.paused && (!self.fifo.is_empty() || self.window.in_flight() > 0)
    }

    fn submitted(&self) -> u64 {
        self.window.forwarded() + self.fifo.len() as u64
    }

    /// The limit that holds the queue back: a pause, a hold, the window.
    fn gate(&self, limit: Limit) -> Limit {
        if self.paused {
            Limit::AtMost(0)
        } else if self.expedite > 0 {
            Limit::Unlimited
        } else if self.held {
            Limit::AtMost(0)
        } else {
            limit
        }
    }

    /// The limit that applies to the queue's next packet: the gate, and the horizon where
    /// nothing else bounds it (a horizon paces the queue; it does not count as holding it back).
    fn effective(&self, limit: Limit) -> Limit {
        match self.gate(limit) {
            Limit::Unlimited if self.horizon > 0 && self.expedite == 0 => {
                Limit::AtMost(self.horizon)
            }
            gate => gate,
        }
    }

    fn may_forward(&self, limit: Limit) -> bool {
        !self.fifo.is_empty() && self.window.may_forward(self.effective(limit), self.capacity)
    }

    /// Held back by the window, a hold or a pause (not by capacity or the horizon): packets
    /// waiting, and the gate closed.
    fn held(&self, limit: Limit) -> bool {
        !self.fifo.is_empty() && !self.gate(limit).allows(saturate_u32(self.window.in_flight()))
    }
}

/// The shadow queues of one CU partition and their pending packets.
#[derive(Clone, Debug)]
pub struct Partition {
    id: PartitionId,
    cu_mask: CuMask,
    window: WindowSize,
    queues: BTreeMap<QueueId, QueueState>,
    /// Round-robin order of the queues of each priority; the front is served first.
    levels: BTreeMap<Priority, VecDeque<QueueId>>,
}

impl Partition {
    /// An empty partition with window `W = window`.
    pub fn new(id: PartitionId, cu_mask: CuMask, window: WindowSize) -> Partition {
        Partition { id, cu_mask, window, queues: BTreeMap::new(), levels: BTreeMap::new() }
    }

    /// The partition id.
    pub fn id(&self) -> PartitionId {
        self.id
    }

    /// The partition's CUs.
    pub fn cu_mask(&self) -> &CuMask {
        &self.cu_mask
    }

    /// The window W.
    pub fn window(&self) -> WindowSize {
        self.window
    }

    /// Changes W (takes effect at the next selection; nothing in flight is recalled).
    pub fn set_window(&mut self, window: WindowSize) {
        self.window = window;
    }

    /// Adds a shadow queue at `priority`, last in its priority's round-robin order.
    pub fn add_queue(&mut self, queue: QueueId, priority: Priority) -> Result<(), RingError> {
        if self.queues.contains_key(&queue) {
            return Err(RingError::DuplicateQueue(queue));
        }
        self.queues.insert(
            queue,
            QueueState {
                priority,
                fifo: VecDeque::new(),
                window: QueueWindow::new(),
                capacity: u32::MAX,
                expedite: 0,
                paused: false,
                held: false,
                horizon: 0,
            },
        );
        self.levels.entry(priority).or_default().push_back(queue);
        Ok(())
    }

    fn unlink(&mut self, queue: QueueId, priority: Priority) {
        if let Some(ring) = self.levels.get_mut(&priority) {
            ring.retain(|&q| q != queue);
            if ring.is_empty() {
                self.levels.remove(&priority);
            }
        }
    }

    /// Removes a queue; returns what it still held, in order, for the caller to forward.
    pub fn remove_queue(&mut self, queue: QueueId) -> Result<Removed, RingError> {
        let state = self.queues.remove(&queue).ok_or(RingError::UnknownQueue(queue))?;
        self.unlink(queue, state.priority);
        Ok(Removed {
            first_seq: state.window.forwarded(),
            in_flight: state.window.in_flight(),
            pending: state.fifo.into_iter().collect(),
        })
    }

    /// Takes a queue out with everything it holds and its window's counts, for another partition
    /// ([`Partition::attach`]).
    pub fn detach(&mut self, queue: QueueId) -> Result<Detached, RingError> {
        let state = self.queues.remove(&queue).ok_or(RingError::UnknownQueue(queue))?;
        self.unlink(queue, state.priority);
        Ok(Detached(state))
    }

    /// Puts a detached queue in at `priority`, last in its round-robin order, as it was: its
    /// pending packets, packets in flight and sequence numbers carry on.
    pub fn attach(
        &mut self,
        queue: QueueId,
        detached: Detached,
        priority: Priority,
    ) -> Result<(), RingError> {
        if self.queues.contains_key(&queue) {
            return Err(RingError::DuplicateQueue(queue));
        }
        let mut state = detached.0;
        state.priority = priority;
        self.queues.insert(queue, state);
        self.levels.entry(priority).or_default().push_back(queue);
        Ok(())
    }

    /// Appends a packet the application submitted; returns its sequence number.
    pub fn push(&mut self, queue: QueueId, packet: Packet) -> Result<Seq, RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        let seq = state.submitted();
        state.fifo.push_back(packet);
        Ok(seq)
    }

    /// Appends a packet that must reach the hardware unthrottled (a dispatch of a passthrough
    /// library's kernel): it and every packet before it in its queue are forwarded without
    /// regard to the window, in order, as far as the hardware queue has room.
    pub fn push_expedited(&mut self, queue: QueueId, packet: Packet) -> Result<Seq, RingError> {
        let seq = self.push(queue, packet)?;
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.expedite = state.fifo.len();
        Ok(seq)
    }

    /// Moves a queue to another priority (last in that priority's round-robin order). Its pending
    /// packets stay in order.
    pub fn set_priority(&mut self, queue: QueueId, priority: Priority) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        let old = state.priority;
        if old == priority {
            return Ok(());
        }
        state.priority = priority;
        self.unlink(queue, old);
        self.levels.entry(priority).or_default().push_back(queue);
        Ok(())
    }

    /// Pauses the queue (nothing of it is forwarded, and its work holds no other queue back) or
    /// lets it go on.
    pub fn set_paused(&mut self, queue: QueueId, paused: bool) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.paused = paused;
        Ok(())
    }

    /// Whether the queue is paused.
    pub fn is_paused(&self, queue: QueueId) -> Option<bool> {
        self.queues.get(&queue).map(|s| s.paused)
    }

    /// Bounds the queue's packets in flight while no higher work contends it (`0`: no bound):
    /// the scheduler's horizon beside a higher priority that is present but idle. The window's
    /// `W` applies instead while higher work exists.
    pub fn set_horizon(&mut self, queue: QueueId, packets: u32) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.horizon = packets;
        Ok(())
    }

    /// Holds the queue (nothing of it is forwarded but expedited packets; its work still counts
    /// as work) or lets it go on.
    pub fn set_held(&mut self, queue: QueueId, held: bool) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.held = held;
        Ok(())
    }

    /// Bounds the queue's packets in flight by the room in its hardware queue (`None`: no bound).
    /// libxhsa's own tracking packets occupy hardware slots too; the caller accounts for them.
    pub fn set_capacity(&mut self, queue: QueueId, capacity: Option<u32>) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.capacity = capacity.unwrap_or(u32::MAX);
        Ok(())
    }

    /// The queue's priority.
    pub fn priority(&self, queue: QueueId) -> Option<Priority> {
        self.queues.get(&queue).map(|s| s.priority)
    }

    /// Packets the queue holds, not yet forwarded.
    pub fn pending(&self, queue: QueueId) -> Option<usize> {
        self.queues.get(&queue).map(|s| s.fifo.len())
    }

    /// Packets of the queue forwarded and not seen completed.
    pub fn in_flight(&self, queue: QueueId) -> Option<u64> {
        self.queues.get(&queue).map(|s| s.window.in_flight())
    }

    /// The queues, in id order.
    pub fn queues(&self) -> impl Iterator<Item = QueueId> + '_ {
        self.queues.keys().copied()
    }

    /// Number of queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// Whether there are no queues.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Highest priority of a queue here with packets pending or in flight.
    pub fn highest_with_work(&self) -> Option<Priority> {
        self.levels
            .iter()
            .rev()
            .find(|(_, ring)| {
                ring.iter().any(|q| self.queues.get(q).is_some_and(QueueState::has_work))
            })
            .map(|(&p, _)| p)
    }

    fn highest_anywhere(&self, contention: &Contention) -> Option<Priority> {
        self.highest_with_work().max(contention.external_highest)
    }

    /// The in-flight limit of the queue now.
    pub fn limit(&self, queue: QueueId, contention: &Contention) -> Option<Limit> {
        let state = self.queues.get(&queue)?;
        Some(limit(self.window, state.priority, self.highest_anywhere(contention)))
    }

    /// Picks the next packet to forward, takes it out of its queue and counts it in flight.
    /// `None` when no queue may forward (empty, window full, or hardware queue full). Call
    /// repeatedly to forward everything that may go now.
    pub fn next_forwardable(&mut self, contention: &Contention) -> Option<Forward> {
        // Forwarding moves a packet from pending to in flight: the highest priority with work is
        // the same before and after, so it is computed once.
        let highest = self.highest_anywhere(contention);
        let (priority, index) = self.levels.iter().rev().find_map(|(&priority, ring)| {
            let lim = limit(self.window, priority, highest);
            ring.iter()
                .position(|q| self.queues.get(q).is_some_and(|s| s.may_forward(lim)))
                .map(|index| (priority, index))
        })?;
        let ring = self.levels.get_mut(&priority)?;
        let queue = ring.remove(index)?;
        ring.push_back(queue);
        let state = self.queues.get_mut(&queue)?;
        let packet = state.fifo.pop_front()?;
        state.expedite = state.expedite.saturating_sub(1);
        let seq = state.window.on_forward();
        Some(Forward { queue, seq, packet })
    }

    /// Everything that may be forwarded now, in forwarding order.
    pub fn drain_forwardable(&mut self, contention: &Contention) -> Vec<Forward> {
        std::iter::from_fn(|| self.next_forwardable(contention)).collect()
    }

    /// The oldest `n` packets in flight of the queue completed.
    pub fn complete(&mut self, queue: QueueId, n: u64) -> Result<(), RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.window.complete(n).map_err(|e| RingError::Completion(queue, e))
    }

    /// Every packet of the queue up to and including `seq` completed (idempotent); returns how
    /// many this report completed.
    pub fn complete_through(&mut self, queue: QueueId, seq: Seq) -> Result<u64, RingError> {
        let state = self.queues.get_mut(&queue).ok_or(RingError::UnknownQueue(queue))?;
        state.window.complete_through(seq).map_err(|e| RingError::Completion(queue, e))
    }

    /// Whether the window holds the queue back now (packets waiting, window full).
    pub fn is_held(&self, queue: QueueId, contention: &Contention) -> Option<bool> {
        let lim = self.limit(queue, contention)?;
        self.queues.get(&queue).map(|s| s.held(lim))
    }

    /// Throttle accounting: records at `now` which queues the window holds back. Call after each
    /// scheduling pass and whenever the contention changes; time between calls is attributed to
    /// the state seen at the earlier call.
    pub fn observe(&mut self, now: Nanos, contention: &Contention) {
        let highest = self.highest_anywhere(contention);
        let window = self.window;
        for state in self.queues.values_mut() {
            let held = state.held(limit(window, state.priority, highest));
            state.window.observe(now, held);
        }
    }

    /// The queue's counters at `now`, as published on the board.
    pub fn stats(&self, queue: QueueId, now: Nanos, contention: &Contention) -> Option<QueueStats> {
        let state = self.queues.get(&queue)?;
        let lim = limit(self.window, state.priority, self.highest_anywhere(contention));
        let mut flags = 0;
        if state.window.is_held() {
            flags |= FLAG_HELD;
        }
        if state.paused {
            flags |= xhsa_model::stats::FLAG_PAUSED;
        }
        if lim.is_throttling() {
            flags |= FLAG_CONTENDED;
        }
        Some(QueueStats {
            priority: state.priority.rank(),
            flags,
            pending: saturate_u32(state.fifo.len() as u64),
            in_flight: saturate_u32(state.window.in_flight()),
            submitted: state.submitted(),
            forwarded: state.window.forwarded(),
            completed: state.window.completed(),
            throttle_ns: state.window.throttle_ns(now),
            throttle_events: state.window.throttle_events(),
            requested: state.priority.rank(),
            ..QueueStats::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::packet::PACKET_SIZE;
    use xhsa_model::priority::{Level, StreamPriority};

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    /// A distinct packet per (queue, n): the ids are in the bytes.
    fn pkt(queue: u64, n: u64) -> Packet {
        let mut b = [0u8; PACKET_SIZE];
        b[0] = 2;
        b[8..16].copy_from_slice(&queue.to_le_bytes());
        b[16..24].copy_from_slice(&n.to_le_bytes());
        Packet::from_bytes(b)
    }

    fn ids(p: &Packet) -> (u64, u64) {
        let b = p.as_bytes();
        (
            u64::from_le_bytes(b[8..16].try_into().unwrap()),
            u64::from_le_bytes(b[16..24].try_into().unwrap()),
        )
    }

    fn part(w: u64) -> Partition {
        Partition::new(PartitionId(0), CuMask::all(80), WindowSize::new(w).unwrap())
    }

    fn order(fs: &[Forward]) -> Vec<(u64, u64)> {
        fs.iter().map(|f| (f.queue.0, f.seq)).collect()
    }

    #[test]
    fn an_application_mask_bounds_the_partition_and_wins_when_they_share_nothing() {
        let part = CuMask::from_words(vec![0x8888_8888, 0x8888_8888, 0x8888]);
        assert_eq!(part.bound_by(&[]), Ok(part.clone()), "a reset gives the partition back");
        assert_eq!(
            part.bound_by(&[0xffff_0000]),
            Ok(CuMask::from_words(vec![0x8888_0000])),
            "only the application's CUs, and of those only the partition's"
        );
        assert_eq!(part.bound_by(&[0x7777_7777]), Err(CuMask::from_words(vec![0x7777_7777])));
        assert_eq!(part.bound_by(&[0, 0, 0, 0x8]).unwrap_err().count(), 1, "past the partition");
    }

    #[test]
    fn cu_mask() {
        let m = CuMask::all(80);
        assert_eq!(m.words(), &[u32::MAX, u32::MAX, 0xffff]);
        assert_eq!(m.count(), 80);
        assert!(m.contains(79) && !m.contains(80) && !m.contains(1000));
        assert_eq!(CuMask::all(64).words(), &[u32::MAX, u32::MAX]);
        assert_eq!(CuMask::all(0).count(), 0);
        assert_eq!(CuMask::from_words(vec![0b101]).count(), 2);
    }

    #[test]
    fn an_expedited_packet_and_those_before_it_go_unthrottled_in_order() {
        let mut r = part(1);
        r.add_queue(QueueId(1), p(5)).unwrap();
        r.add_queue(QueueId(2), p(0)).unwrap();
        r.push(QueueId(1), pkt(1, 0)).unwrap();
        for n in 0..3 {
            r.push(QueueId(2), pkt(2, n)).unwrap();
        }
        // Queue 1 has work: queue 2 gets W = 1.
        assert_eq!(order(&r.drain_forwardable(&Contention::NONE)), vec![(1, 0), (2, 0)]);
        assert!(r.is_held(QueueId(2), &Contention::NONE).unwrap());
        // A passthrough library's dispatch arrives on queue 2: it and the two before it go.
        r.push_expedited(QueueId(2), pkt(2, 3)).unwrap();
        assert!(!r.is_held(QueueId(2), &Contention::NONE).unwrap());
        r.push(QueueId(2), pkt(2, 4)).unwrap();
        assert_eq!(
            order(&r.drain_forwardable(&Contention::NONE)),
            vec![(2, 1), (2, 2), (2, 3)],
            "in order, and not the packet after it"
        );
        assert!(r.is_held(QueueId(2), &Contention::NONE).unwrap(), "throttled again after it");
    }

    #[test]
    fn queue_lifecycle_and_errors() {
        let mut r = part(2);
        assert!(r.is_empty());
        r.add_queue(QueueId(1), p(0)).unwrap();
        assert_eq!(r.add_queue(QueueId(1), p(3)), Err(RingError::DuplicateQueue(QueueId(1))));
        assert_eq!(r.push(QueueId(9), pkt(9, 0)), Err(RingError::UnknownQueue(QueueId(9))));
        assert_eq!(r.push(QueueId(1), pkt(1, 0)), Ok(0));
        assert_eq!(r.push(QueueId(1), pkt(1, 1)), Ok(1));
        assert_eq!(r.pending(QueueId(1)), Some(2));
        assert_eq!(r.priority(QueueId(1)), Some(p(0)));
        assert_eq!(r.len(), 1);
        let f = r.next_forwardable(&Contention::NONE).unwrap();
        assert_eq!((f.seq, ids(&f.packet)), (0, (1, 0)));
        assert_eq!(
            r.push(QueueId(1), pkt(1, 2)),
            Ok(2),
            "sequence numbers count forwarded packets too"
        );
        assert!(matches!(r.complete(QueueId(1), 2), Err(RingError::Completion(QueueId(1), _))));
        let removed = r.remove_queue(QueueId(1)).unwrap();
        assert_eq!(removed.first_seq, 1);
        assert_eq!(removed.in_flight, 1);
        assert_eq!(removed.pending.iter().map(ids).collect::<Vec<_>>(), vec![(1, 1), (1, 2)]);
        assert_eq!(r.remove_queue(QueueId(1)), Err(RingError::UnknownQueue(QueueId(1))));
        assert!(r.is_empty());
        assert_eq!(r.highest_with_work(), None);
        assert!(RingError::UnknownQueue(QueueId(4)).to_string().contains("queue 4"));
    }

    #[test]
    fn a_held_queue_forwards_nothing_but_expedited_packets_and_its_work_still_counts() {
        let mut part = part(2);
        part.add_queue(QueueId(1), p(0)).unwrap();
        part.add_queue(QueueId(2), p(-5)).unwrap();
        part.set_held(QueueId(1), true).unwrap();
        part.push(QueueId(1), pkt(1, 0)).unwrap();
        part.push(QueueId(1), pkt(1, 1)).unwrap();
        part.push(QueueId(2), pkt(2, 0)).unwrap();
        let none = Contention::NONE;
        // Held: nothing of it goes; its pending work still holds the lower queue to W.
        let f = part.drain_forwardable(&none);
        assert_eq!(order(&f), [(2, 0)]);
        assert_eq!(part.limit(QueueId(2), &none), Some(Limit::AtMost(2)));
        assert_eq!(part.is_held(QueueId(1), &none), Some(true));
        // A passthrough library's dispatch goes, with what is before it.
        part.push_expedited(QueueId(1), pkt(1, 2)).unwrap();
        assert_eq!(order(&part.drain_forwardable(&none)), [(1, 0), (1, 1), (1, 2)]);
        part.push(QueueId(1), pkt(1, 3)).unwrap();
        assert!(part.drain_forwardable(&none).is_empty());
        // Let go: the rest goes.
        part.set_held(QueueId(1), false).unwrap();
        assert_eq!(order(&part.drain_forwardable(&none)), [(1, 3)]);
        assert_eq!(part.set_held(QueueId(9), true), Err(RingError::UnknownQueue(QueueId(9))));
    }

    #[test]
    fn a_horizon_bounds_an_uncontended_queue_and_the_window_a_contended_one() {
        let mut part = part(2);
        part.add_queue(QueueId(1), p(0)).unwrap();
        part.set_horizon(QueueId(1), 5).unwrap();
        for n in 0..10 {
            part.push(QueueId(1), pkt(1, n)).unwrap();
        }
        assert_eq!(part.drain_forwardable(&Contention::NONE).len(), 5);
        assert_eq!(part.is_held(QueueId(1), &Contention::NONE), Some(false), "paced, not held");
        part.complete(QueueId(1), 5).unwrap();
        // Higher work: the window's W, not the horizon.
        let busy = Contention::external(Some(p(3)));
        assert_eq!(part.drain_forwardable(&busy).len(), 2);
        part.complete(QueueId(1), 2).unwrap();
        part.set_horizon(QueueId(1), 0).unwrap();
        assert_eq!(part.drain_forwardable(&Contention::NONE).len(), 3, "0: no bound");
        assert_eq!(part.set_horizon(QueueId(9), 1), Err(RingError::UnknownQueue(QueueId(9))));
    }

    #[test]
    fn alone_a_queue_forwards_everything() {
        let mut r = part(1);
        r.add_queue(QueueId(1), p(-256)).unwrap();
        for n in 0..100 {
            r.push(QueueId(1), pkt(1, n)).unwrap();
        }
        let fs = r.drain_forwardable(&Contention::NONE);
        assert_eq!(fs.len(), 100);
        assert!(fs
            .iter()
            .enumerate()
            .all(|(i, f)| f.seq == i as u64 && ids(&f.packet) == (1, i as u64)));
        assert_eq!(r.in_flight(QueueId(1)), Some(100));
    }

    #[test]
    fn higher_priority_first_and_lower_held_to_the_window() {
        let mut r = part(2);
        r.add_queue(QueueId(1), p(0)).unwrap();
        r.add_queue(QueueId(2), p(5)).unwrap();
        for n in 0..5 {
            r.push(QueueId(1), pkt(1, n)).unwrap();
            r.push(QueueId(2), pkt(2, n)).unwrap();
        }
        let fs = r.drain_forwardable(&Contention::NONE);
        // All of the high queue first, then two of the low one.
        assert_eq!(order(&fs), vec![(2, 0), (2, 1), (2, 2), (2, 3), (2, 4), (1, 0), (1, 1)]);
        assert_eq!(r.is_held(QueueId(1), &Contention::NONE), Some(true));
        assert_eq!(r.limit(QueueId(1), &Contention::NONE), Some(Limit::AtMost(2)));
        assert_eq!(r.limit(QueueId(2), &Contention::NONE), Some(Limit::Unlimited));
        // One low packet completes: one more may go.
        r.complete(QueueId(1), 1).unwrap();
        assert_eq!(order(&r.drain_forwardable(&Contention::NONE)), vec![(1, 2)]);
        // The high queue finishes: the low one is free.
        r.complete_through(QueueId(2), 4).unwrap();
        assert_eq!(order(&r.drain_forwardable(&Contention::NONE)), vec![(1, 3), (1, 4)]);
        assert_eq!(r.in_flight(QueueId(1)), Some(4));
    }

    #[test]
    fn round_robin_within_a_priority() {
        let mut r = part(2);
        for q in 1..=3 {
            r.add_queue(QueueId(q), p(1)).unwrap();
            for n in 0..3 {
                r.push(QueueId(q), pkt(q, n)).unwrap();
            }
        }
        r.add_queue(QueueId(9), p(0)).unwrap();
        r.push(QueueId(9), pkt(9, 0)).unwrap();
        let fs = r.drain_forwardable(&Contention::NONE);
        assert_eq!(
            order(&fs),
            vec![(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2), (9, 0)]
        );
    }

    #[test]
    fn round_robin_skips_queues_that_may_not_forward() {
        let mut r = part(2);
        r.add_queue(QueueId(1), p(0)).unwrap();
        r.add_queue(QueueId(2), p(0)).unwrap();
        r.set_capacity(QueueId(1), Some(1)).unwrap();
        for n in 0..3 {
            r.push(QueueId(1), pkt(1, n)).unwrap();
            r.push(QueueId(2), pkt(2, n)).unwrap();
        }
        assert_eq!(
            order(&r.drain_forwardable(&Contention::NONE)),
            vec![(1, 0), (2, 0), (2, 1), (2, 2)]
        );
        // Capacity is not throttling.
        assert_eq!(r.is_held(QueueId(1), &Contention::NONE), Some(false));
        r.complete(QueueId(1), 1).unwrap();
        r.set_capacity(QueueId(1), None).unwrap();
        assert_eq!(order(&r.drain_forwardable(&Contention::NONE)), vec![(1, 1), (1, 2)]);
    }

    #[test]
    fn external_work_throttles_and_stream_priority_orders_within_a_level() {
        let mut r = part(3);
        r.add_queue(QueueId(1), p(0)).unwrap();
        r.add_queue(QueueId(2), p(0).with_stream(StreamPriority::High)).unwrap();
        for n in 0..10 {
            r.push(QueueId(1), pkt(1, n)).unwrap();
        }
        let busy = Contention::external(Some(p(1)));
        assert_eq!(r.drain_forwardable(&busy).len(), 3);
        assert_eq!(r.is_held(QueueId(1), &busy), Some(true));
        // Other processes at a lower or equal priority do not throttle.
        let lower = Contention::external(Some(p(0)));
        assert_eq!(r.drain_forwardable(&lower).len(), 7);
        r.push(QueueId(1), pkt(1, 10)).unwrap();
        // A high-stream queue of the same level with work in flight throttles the normal one.
        r.push(QueueId(2), pkt(2, 0)).unwrap();
        let fs = r.drain_forwardable(&Contention::NONE);
        assert_eq!(order(&fs), vec![(2, 0)], "queue 1 has 10 in flight > W");
    }

    #[test]
    fn set_priority_moves_queue_and_keeps_fifo() {
        let mut r = part(1);
        r.add_queue(QueueId(1), p(0)).unwrap();
        r.add_queue(QueueId(2), p(1)).unwrap();
        for n in 0..3 {
            r.push(QueueId(1), pkt(1, n)).unwrap();
            r.push(QueueId(2), pkt(2, n)).unwrap();
        }
        r.set_priority(QueueId(1), p(2)).unwrap();
        r.set_priority(QueueId(1), p(2)).unwrap();
        assert_eq!(r.set_priority(QueueId(7), p(2)), Err(RingError::UnknownQueue(QueueId(7))));
        assert_eq!(r.highest_with_work(), Some(p(2)));
        let fs = r.drain_forwardable(&Contention::NONE);
        assert_eq!(order(&fs), vec![(1, 0), (1, 1), (1, 2), (2, 0)]);
    }

    #[test]
    fn throttle_time_and_stats() {
        let mut r = part(1);
        r.add_queue(QueueId(1), p(0)).unwrap();
        r.add_queue(QueueId(2), p(1)).unwrap();
        r.push(QueueId(2), pkt(2, 0)).unwrap();
        r.push(QueueId(1), pkt(1, 0)).unwrap();
        r.push(QueueId(1), pkt(1, 1)).unwrap();
        let c = Contention::NONE;
        assert_eq!(r.drain_forwardable(&c).len(), 2);
        r.observe(1_000, &c);
        let s = r.stats(QueueId(1), 1_500, &c).unwrap();
        assert_eq!(
            (s.pending, s.in_flight, s.submitted, s.forwarded, s.completed),
            (1, 1, 2, 1, 0)
        );
        assert_eq!(s.throttle_ns, 500);
        assert_eq!(s.flags, FLAG_HELD | FLAG_CONTENDED);
        assert_eq!(s.priority(), Some(p(0)));
        r.complete(QueueId(2), 1).unwrap();
        r.observe(3_000, &c);
        assert_eq!(r.drain_forwardable(&c).len(), 1);
        let s = r.stats(QueueId(1), 10_000, &c).unwrap();
        assert_eq!((s.throttle_ns, s.throttle_events, s.flags), (2_000, 1, 0));
        let hi = r.stats(QueueId(2), 10_000, &c).unwrap();
        assert_eq!((hi.throttle_ns, hi.completed, hi.flags), (0, 1, 0));
        assert_eq!(r.stats(QueueId(5), 0, &c), None);
    }
}

/// Property tests of rings, window and completion tracking together.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::path::packet::PACKET_SIZE;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use xhsa_model::priority::{Level, StreamPriority};

    const QUEUES: u64 = 6;

    #[derive(Clone, Debug)]
    enum Op {
        Add(u64, Priority),
        Push(u64, u8),
        Forward(u8),
        Drain,
        Complete(u64, u8),
        CompleteThrough(u64, u8),
        SetPriority(u64, Priority),
        Remove(u64),
        External(Option<Priority>),
        Capacity(u64, Option<u8>),
        Tick(u16),
    }

    fn priority() -> impl Strategy<Value = Priority> {
        // A few levels, so that ties (round-robin) and orders both occur.
        (-1i64..=2, 0u32..3).prop_map(|(l, s)| {
            Priority::new(Level::new(l).unwrap(), StreamPriority::from_hsa(s).unwrap())
        })
    }

    fn op() -> impl Strategy<Value = Op> {
        let q = 0..QUEUES;
        prop_oneof![
            2 => (q.clone(), priority()).prop_map(|(q, p)| Op::Add(q, p)),
            6 => (q.clone(), 1u8..6).prop_map(|(q, n)| Op::Push(q, n)),
            3 => (1u8..8).prop_map(Op::Forward),
            2 => Just(Op::Drain),
            4 => (q.clone(), 1u8..4).prop_map(|(q, n)| Op::Complete(q, n)),
            2 => (q.clone(), any::<u8>()).prop_map(|(q, n)| Op::CompleteThrough(q, n)),
            1 => (q.clone(), priority()).prop_map(|(q, p)| Op::SetPriority(q, p)),
            1 => q.clone().prop_map(Op::Remove),
            1 => proptest::option::of(priority()).prop_map(Op::External),
            1 => (q, proptest::option::of(1u8..5)).prop_map(|(q, c)| Op::Capacity(q, c)),
            1 => any::<u16>().prop_map(Op::Tick),
        ]
    }

    /// The model's view of one queue; `gen` distinguishes re-added queues with the same id.
    #[derive(Default)]
    struct Model {
        priority: Option<Priority>,
        gen: u64,
        pushed: u64,
        forwarded: u64,
        completed: u64,
        capacity: Option<u32>,
    }

    impl Model {
        fn pending(&self) -> u64 {
            self.pushed - self.forwarded
        }
        fn in_flight(&self) -> u64 {
            self.forwarded - self.completed
        }
        fn has_work(&self) -> bool {
            self.priority.is_some() && (self.pending() > 0 || self.in_flight() > 0)
        }
    }

    fn pkt(queue: u64, gen: u64, n: u64) -> Packet {
        let mut b = [0u8; PACKET_SIZE];
        b[0] = 2;
        b[8..16].copy_from_slice(&queue.to_le_bytes());
        b[16..24].copy_from_slice(&gen.to_le_bytes());
        b[24..32].copy_from_slice(&n.to_le_bytes());
        Packet::from_bytes(b)
    }

    struct Harness {
        part: Partition,
        models: BTreeMap<u64, Model>,
        external: Option<Priority>,
        w: u64,
        now: Nanos,
        /// Packets forwarded, per (queue, gen), in order; plus those handed back by remove.
        delivered: BTreeMap<(u64, u64), Vec<u64>>,
        pushed: BTreeMap<(u64, u64), u64>,
        completed_total: u64,
        forwarded_total: u64,
    }

    impl Harness {
        fn new(w: u64) -> Harness {
            Harness {
                part: Partition::new(PartitionId(0), CuMask::all(80), WindowSize::new(w).unwrap()),
                models: (0..QUEUES).map(|q| (q, Model::default())).collect(),
                external: None,
                w,
                now: 0,
                delivered: BTreeMap::new(),
                pushed: BTreeMap::new(),
                completed_total: 0,
                forwarded_total: 0,
            }
        }

        fn contention(&self) -> Contention {
            Contention::external(self.external)
        }

        /// The model's "higher-priority work exists" for a queue of priority `p`.
        fn higher_work(&self, p: Priority) -> bool {
            self.external.is_some_and(|e| e > p)
                || self.models.values().any(|m| m.has_work() && m.priority.is_some_and(|mp| mp > p))
        }

        fn may_forward(&self, q: u64) -> bool {
            let m = &self.models[&q];
            let Some(p) = m.priority else { return false };
            m.pending() > 0
                && m.capacity.is_none_or(|c| m.in_flight() < c as u64)
                && (!self.higher_work(p) || m.in_flight() < self.w)
        }

        fn forward_one(&mut self) -> Result<bool, TestCaseError> {
            let c = self.contention();
            let Some(f) = self.part.next_forwardable(&c) else {
                // Nothing may go: check the model agrees.
                for q in 0..QUEUES {
                    prop_assert!(
                        !self.may_forward(q),
                        "queue {} could forward but was not selected",
                        q
                    );
                }
                return Ok(false);
            };
            let q = f.queue.0;
            prop_assert!(self.may_forward(q), "queue {} forwarded against the window", q);
            let p = self.models[&q].priority.unwrap();
            // Never passed over: no queue of a higher priority could have gone instead.
            for (&r, m) in &self.models {
                if m.priority.is_some_and(|rp| rp > p) {
                    prop_assert!(
                        !self.may_forward(r),
                        "queue {} passed over for lower queue {}",
                        r,
                        q
                    );
                }
            }
            // Contents: the next packet of that queue, in order, unmodified.
            let m = self.models.get_mut(&q).unwrap();
            prop_assert_eq!(f.seq, m.forwarded);
            prop_assert_eq!(f.packet, pkt(q, m.gen, m.forwarded));
            m.forwarded += 1;
            self.forwarded_total += 1;
            self.delivered.entry((q, m.gen)).or_default().push(f.seq);
            // The window invariant, after the forward.
            let in_flight = m.in_flight();
            if self.higher_work(p) {
                prop_assert!(
                    in_flight <= self.w,
                    "queue {} has {} in flight under higher work",
                    q,
                    in_flight
                );
            }
            Ok(true)
        }

        fn check_idle_means_free(&self) -> Result<(), TestCaseError> {
            // After draining, any queue still holding packets is held by the window under higher
            // work, or by its capacity.
            for (&q, m) in &self.models {
                let Some(p) = m.priority else { continue };
                if m.pending() > 0 {
                    let by_capacity = m.capacity.is_some_and(|c| m.in_flight() >= c as u64);
                    prop_assert!(
                        by_capacity || (self.higher_work(p) && m.in_flight() >= self.w),
                        "queue {} holds {} packets without higher work",
                        q,
                        m.pending()
                    );
                    let held = self.part.is_held(QueueId(q), &self.contention()).unwrap();
                    prop_assert_eq!(held, self.higher_work(p) && m.in_flight() >= self.w);
                }
            }
            Ok(())
        }

        fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
            let c = self.contention();
            match op {
                Op::Add(q, p) => {
                    let r = self.part.add_queue(QueueId(q), p);
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_some() {
                        prop_assert_eq!(r, Err(RingError::DuplicateQueue(QueueId(q))));
                    } else {
                        prop_assert_eq!(r, Ok(()));
                        *m = Model { priority: Some(p), gen: m.gen + 1, ..Model::default() };
                    }
                }
                Op::Push(q, n) => {
                    for _ in 0..n {
                        let m = self.models.get_mut(&q).unwrap();
                        let r = self.part.push(QueueId(q), pkt(q, m.gen, m.pushed));
                        if m.priority.is_some() {
                            prop_assert_eq!(r, Ok(m.pushed));
                            m.pushed += 1;
                            *self.pushed.entry((q, m.gen)).or_default() += 1;
                        } else {
                            prop_assert_eq!(r, Err(RingError::UnknownQueue(QueueId(q))));
                        }
                    }
                }
                Op::Forward(n) => {
                    for _ in 0..n {
                        if !self.forward_one()? {
                            break;
                        }
                    }
                }
                Op::Drain => {
                    while self.forward_one()? {}
                    self.check_idle_means_free()?;
                }
                Op::Complete(q, n) => {
                    let r = self.part.complete(QueueId(q), n as u64);
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_none() {
                        prop_assert_eq!(r, Err(RingError::UnknownQueue(QueueId(q))));
                    } else if n as u64 <= m.in_flight() {
                        prop_assert_eq!(r, Ok(()));
                        m.completed += n as u64;
                        self.completed_total += n as u64;
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                Op::CompleteThrough(q, s) => {
                    let r = self.part.complete_through(QueueId(q), s as u64);
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_none() {
                        prop_assert_eq!(r, Err(RingError::UnknownQueue(QueueId(q))));
                    } else if (s as u64) < m.forwarded {
                        let newly = (s as u64 + 1).saturating_sub(m.completed);
                        prop_assert_eq!(r, Ok(newly));
                        m.completed += newly;
                        self.completed_total += newly;
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                Op::SetPriority(q, p) => {
                    let r = self.part.set_priority(QueueId(q), p);
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_some() {
                        prop_assert_eq!(r, Ok(()));
                        m.priority = Some(p);
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                Op::Remove(q) => {
                    let r = self.part.remove_queue(QueueId(q));
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_some() {
                        let removed = r.unwrap();
                        prop_assert_eq!(removed.first_seq, m.forwarded);
                        prop_assert_eq!(removed.in_flight, m.in_flight());
                        prop_assert_eq!(removed.pending.len() as u64, m.pending());
                        let delivered = self.delivered.entry((q, m.gen)).or_default();
                        for (i, packet) in removed.pending.iter().enumerate() {
                            let seq = removed.first_seq + i as u64;
                            prop_assert_eq!(*packet, pkt(q, m.gen, seq));
                            delivered.push(seq);
                        }
                        // The hardware finishes what was in flight; the model stops counting it.
                        self.completed_total += m.in_flight();
                        self.forwarded_total += m.pending();
                        self.completed_total += m.pending();
                        m.priority = None;
                    } else {
                        prop_assert_eq!(r, Err(RingError::UnknownQueue(QueueId(q))));
                    }
                }
                Op::External(e) => self.external = e,
                Op::Capacity(q, cap) => {
                    let cap = cap.map(u32::from);
                    let r = self.part.set_capacity(QueueId(q), cap);
                    let m = self.models.get_mut(&q).unwrap();
                    if m.priority.is_some() {
                        prop_assert_eq!(r, Ok(()));
                        m.capacity = cap;
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                Op::Tick(dt) => {
                    // Throttle time never exceeds the time that passed, and never goes down.
                    let before: Vec<u64> = (0..QUEUES)
                        .filter_map(|q| {
                            self.part.stats(QueueId(q), self.now, &c).map(|s| s.throttle_ns)
                        })
                        .collect();
                    self.part.observe(self.now, &c);
                    self.now += dt as u64;
                    let after: Vec<u64> = (0..QUEUES)
                        .filter_map(|q| {
                            self.part.stats(QueueId(q), self.now, &c).map(|s| s.throttle_ns)
                        })
                        .collect();
                    for (b, a) in before.iter().zip(&after) {
                        prop_assert!(a >= b && a - b <= dt as u64);
                        prop_assert!(*a <= self.now);
                    }
                }
            }
            // State agrees with the model after every step.
            for (&q, m) in &self.models {
                if m.priority.is_some() {
                    prop_assert_eq!(self.part.pending(QueueId(q)), Some(m.pending() as usize));
                    prop_assert_eq!(self.part.in_flight(QueueId(q)), Some(m.in_flight()));
                    prop_assert_eq!(self.part.priority(QueueId(q)), m.priority);
                } else {
                    prop_assert_eq!(self.part.pending(QueueId(q)), None);
                }
            }
            let local =
                self.models.values().filter(|m| m.has_work()).filter_map(|m| m.priority).max();
            prop_assert_eq!(self.part.highest_with_work(), local);
            Ok(())
        }

        /// Ends the run: other processes go idle, the hardware completes everything, libxhsa
        /// forwards what it holds, until nothing is left. Every packet pushed is then delivered
        /// exactly once, in order, and every forwarded packet's completion was observed.
        fn finish(&mut self) -> Result<(), TestCaseError> {
            self.external = None;
            loop {
                while self.forward_one()? {}
                let mut progressed = false;
                for q in 0..QUEUES {
                    let n = self.models[&q].in_flight();
                    if self.models[&q].priority.is_some() && n > 0 {
                        self.part
                            .complete(QueueId(q), n)
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let m = self.models.get_mut(&q).unwrap();
                        m.completed += n;
                        self.completed_total += n;
                        progressed = true;
                    }
                }
                if !progressed {
                    break;
                }
            }
            for (&q, m) in &self.models {
                if m.priority.is_some() {
                    prop_assert_eq!(m.pending(), 0, "queue {} left packets behind", q);
                    prop_assert_eq!(m.in_flight(), 0);
                }
            }
            for (key, &n) in &self.pushed {
                let got = self.delivered.get(key).cloned().unwrap_or_default();
                prop_assert_eq!(
                    got,
                    (0..n).collect::<Vec<_>>(),
                    "queue {:?}: lost, duplicated or reordered",
                    key
                );
            }
            prop_assert_eq!(
                self.forwarded_total,
                self.completed_total,
                "a completion was never observed"
            );
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn rings_window_and_completions(w in 1u64..5, ops in proptest::collection::vec(op(), 1..200)) {
            let mut h = Harness::new(w);
            // Start with every queue present, so most operations hit live queues.
            for q in 0..QUEUES {
                h.apply(Op::Add(q, Priority::at_level(Level::new(q as i64 % 3 - 1).unwrap())))?;
            }
            for op in ops {
                h.apply(op)?;
            }
            h.finish()?;
        }
    }
}
