//! The CU partitions of one GPU in one process, and which partition each shadow queue's rings are
//! in.
//!
//! Without `XHSA_RESERVE` there is one partition, the whole GPU. With it
//! ([`xhsa_model::partition::Split`]) a queue whose priority is at or above the reserve's is in
//! the reserved partition, every other queue in the shared one. A queue whose priority crosses
//! the threshold (HIP sets a stream's priority just after creating its queue; an operator's
//! `xhsactl set-priority`) moves with everything it holds; its hardware queue then needs the
//! other side's CU mask, which costs a device-wide unmap on an HWS GPU, so only such changes
//! move a queue.
//!
//! Each [`Partition`] has its own priority rings and level-1 window: a queue is held back only by
//! higher-priority work in its own partition — this process's queues there and the other
//! processes' work in partitions that overlap it ([`ExternalWork::contention_in`]). Work in the
//! two sides of a split never throttles each other.
//!
//! The queue-keyed calls find the queue's partition; they answer like [`Partition`]'s for an
//! unknown queue.
#![forbid(unsafe_code)]

use crate::path::partition::{CuMask, Forward, Partition, Removed, RingError};
use crate::path::window::{Nanos, Seq};
use std::collections::BTreeMap;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::partition::Split;
use xhsa_model::priority::Priority;
use xhsa_model::stats::QueueStats;
use xhsa_model::window_size::WindowSize;

/// The partitions of one GPU; see the module doc.
#[derive(Clone, Debug)]
pub struct Partitions {
    window: WindowSize,
    split: Option<Split>,
    parts: BTreeMap<PartitionId, Partition>,
    home: BTreeMap<QueueId, PartitionId>,
}

impl Partitions {
    /// One partition, the whole GPU, with window `W = window`.
    pub fn new(window: WindowSize) -> Partitions {
        Partitions { window, split: None, parts: BTreeMap::new(), home: BTreeMap::new() }
    }

    /// The window `W` of every partition.
    pub fn window(&self) -> WindowSize {
        self.window
    }

    /// Splits the GPU for queues added from now on (the ones already there stay where they are).
    pub fn set_split(&mut self, split: Option<Split>) {
        self.split = split;
    }

    /// Splits the GPU another way (the live size of an `auto` reserve), or not at all: every
    /// queue whose partition changes moves there with everything it holds, and partitions left
    /// empty go. Returns the queues moved, each with the CU mask its hardware queue needs now
    /// (every CU for the whole GPU; `None` only when no split ever told the GPU's CUs).
    pub fn resplit(&mut self, split: Option<Split>) -> Vec<(QueueId, PartitionId, Option<CuMask>)> {
        let all = self.split.as_ref().or(split.as_ref()).map(|s| CuMask::from_words(s.all()));
        self.split = split;
        let homes: Vec<(QueueId, PartitionId)> = self.home.iter().map(|(q, p)| (*q, *p)).collect();
        let mut moved = Vec::new();
        for (queue, from) in homes {
            let Some(priority) = self.priority(queue) else { continue };
            let (to, mask) = self.place(priority);
            if to == from {
                continue;
            }
            let Ok(detached) = self.of_mut(queue).and_then(|p| p.detach(queue)) else { continue };
            let window = self.window;
            let part = self.parts.entry(to).or_insert_with(|| {
                Partition::new(to, mask.clone().unwrap_or_else(|| CuMask::all(0)), window)
            });
            if part.attach(queue, detached, priority).is_ok() {
                self.home.insert(queue, to);
                moved.push((queue, to, mask.or_else(|| all.clone())));
            }
        }
        self.parts.retain(|_, p| !p.is_empty());
        moved
    }

    /// The split, if any.
    pub fn split(&self) -> Option<&Split> {
        self.split.as_ref()
    }

    /// The partition a new queue of `priority` goes to, and its CU mask (`None`: the whole GPU).
    pub fn place(&self, priority: Priority) -> (PartitionId, Option<CuMask>) {
        match &self.split {
            None => (PartitionId::WHOLE, None),
            Some(s) => {
                let side = s.side_for(priority);
                (s.id(side), Some(CuMask::from_words(s.mask(side).to_vec())))
            }
        }
    }

    /// Adds a shadow queue at `priority` to the partition [`Partitions::place`] gives it.
    pub fn add_queue(&mut self, queue: QueueId, priority: Priority) -> Result<(), RingError> {
        if self.home.contains_key(&queue) {
            return Err(RingError::DuplicateQueue(queue));
        }
        let (id, mask) = self.place(priority);
        let window = self.window;
        let part = self
            .parts
            .entry(id)
            .or_insert_with(|| Partition::new(id, mask.unwrap_or_else(|| CuMask::all(0)), window));
        part.add_queue(queue, priority)?;
        self.home.insert(queue, id);
        Ok(())
    }

    /// Removes a queue; what it still held (see [`Partition::remove_queue`]).
    pub fn remove_queue(&mut self, queue: QueueId) -> Result<Removed, RingError> {
        let removed = self.of_mut(queue)?.remove_queue(queue)?;
        self.home.remove(&queue);
        Ok(removed)
    }

    /// The partition of `queue`.
    pub fn partition_of(&self, queue: QueueId) -> Option<PartitionId> {
        self.home.get(&queue).copied()
    }

    /// The partition `id`.
    pub fn get(&self, id: PartitionId) -> Option<&Partition> {
        self.parts.get(&id)
    }

    /// The CU mask of `queue`'s partition, `None` for the whole GPU or an unknown queue.
    pub fn cu_mask_of(&self, queue: QueueId) -> Option<CuMask> {
        let id = self.partition_of(queue)?;
        (id != PartitionId::WHOLE).then(|| self.parts.get(&id).map(|p| p.cu_mask().clone()))?
    }

    fn of(&self, queue: QueueId) -> Option<&Partition> {
        self.parts.get(self.home.get(&queue)?)
    }

    fn of_mut(&mut self, queue: QueueId) -> Result<&mut Partition, RingError> {
        let id = self.home.get(&queue).ok_or(RingError::UnknownQueue(queue))?;
        self.parts.get_mut(id).ok_or(RingError::UnknownQueue(queue))
    }

    /// See [`Partition::push`].
    pub fn push(
        &mut self,
        queue: QueueId,
        packet: crate::path::packet::Packet,
    ) -> Result<Seq, RingError> {
        self.of_mut(queue)?.push(queue, packet)
    }

    /// See [`Partition::push_expedited`].
    pub fn push_expedited(
        &mut self,
        queue: QueueId,
        packet: crate::path::packet::Packet,
    ) -> Result<Seq, RingError> {
        self.of_mut(queue)?.push_expedited(queue, packet)
    }

    /// See [`Partition::set_priority`]; a queue whose new priority belongs to the other side of
    /// the split moves there with everything it holds: returns its new partition then.
    pub fn set_priority(
        &mut self,
        queue: QueueId,
        priority: Priority,
    ) -> Result<Option<PartitionId>, RingError> {
        let from = self.partition_of(queue).ok_or(RingError::UnknownQueue(queue))?;
        let (to, mask) = self.place(priority);
        if to == from {
            return self.of_mut(queue)?.set_priority(queue, priority).map(|()| None);
        }
        let detached = self.of_mut(queue)?.detach(queue)?;
        let window = self.window;
        let part = self
            .parts
            .entry(to)
            .or_insert_with(|| Partition::new(to, mask.unwrap_or_else(|| CuMask::all(0)), window));
        part.attach(queue, detached, priority)?;
        self.home.insert(queue, to);
        Ok(Some(to))
    }

    /// See [`Partition::set_paused`].
    pub fn set_paused(&mut self, queue: QueueId, paused: bool) -> Result<(), RingError> {
        self.of_mut(queue)?.set_paused(queue, paused)
    }

    /// See [`Partition::set_horizon`].
    pub fn set_horizon(&mut self, queue: QueueId, packets: u32) -> Result<(), RingError> {
        self.of_mut(queue)?.set_horizon(queue, packets)
    }

    /// See [`Partition::set_held`].
    pub fn set_held(&mut self, queue: QueueId, held: bool) -> Result<(), RingError> {
        self.of_mut(queue)?.set_held(queue, held)
    }

    /// See [`Partition::is_paused`].
    pub fn is_paused(&self, queue: QueueId) -> Option<bool> {
        self.of(queue)?.is_paused(queue)
    }

    /// See [`Partition::set_capacity`].
    pub fn set_capacity(&mut self, queue: QueueId, capacity: Option<u32>) -> Result<(), RingError> {
        self.of_mut(queue)?.set_capacity(queue, capacity)
    }

    /// See [`Partition::priority`].
    pub fn priority(&self, queue: QueueId) -> Option<Priority> {
        self.of(queue)?.priority(queue)
    }

    /// See [`Partition::pending`].
    pub fn pending(&self, queue: QueueId) -> Option<usize> {
        self.of(queue)?.pending(queue)
    }

    /// See [`Partition::in_flight`].
    pub fn in_flight(&self, queue: QueueId) -> Option<u64> {
        self.of(queue)?.in_flight(queue)
    }

    /// Whether higher-priority work (this process's, or the other processes' in `external`)
    /// shares the queue's CUs now: the window throttles it.
    pub fn is_contended(&self, queue: QueueId, external: &ExternalWork) -> bool {
        let Some(id) = self.partition_of(queue) else { return false };
        self.parts
            .get(&id)
            .and_then(|part| part.limit(queue, &external.contention_in(id)))
            .is_some_and(|l| l.is_throttling())
    }

    /// See [`Partition::complete_through`].
    pub fn complete_through(&mut self, queue: QueueId, seq: Seq) -> Result<u64, RingError> {
        self.of_mut(queue)?.complete_through(queue, seq)
    }

    /// Everything each partition lets go now, against the other processes' work that overlaps
    /// it; partitions in id order, each in its forwarding order.
    pub fn drain_forwardable(&mut self, external: &ExternalWork) -> Vec<Forward> {
        let mut out = Vec::new();
        for (&id, part) in &mut self.parts {
            out.extend(part.drain_forwardable(&external.contention_in(id)));
        }
        out
    }

    /// See [`Partition::observe`], for every partition.
    pub fn observe(&mut self, now: Nanos, external: &ExternalWork) {
        for (&id, part) in &mut self.parts {
            part.observe(now, &external.contention_in(id));
        }
    }

    /// See [`Partition::stats`], against the work that overlaps the queue's partition.
    pub fn stats(&self, queue: QueueId, now: Nanos, external: &ExternalWork) -> Option<QueueStats> {
        let id = self.partition_of(queue)?;
        self.parts.get(&id)?.stats(queue, now, &external.contention_in(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::packet::{Packet, PACKET_SIZE};
    use xhsa_model::partition::{Reserve, Side};
    use xhsa_model::priority::Level;

    fn p(level: i64) -> Priority {
        Priority::at_level(Level::new(level).unwrap())
    }

    fn pkt(n: u8) -> Packet {
        let mut b = [0u8; PACKET_SIZE];
        b[0] = 2;
        b[8] = n;
        Packet::from_bytes(b)
    }

    fn split() -> Split {
        Split::plan(Reserve::parse("20@10").unwrap(), 80, 4).unwrap()
    }

    #[test]
    fn a_queue_whose_priority_crosses_the_threshold_moves_with_what_it_holds() {
        let mut ps = Partitions::new(WindowSize::new(1).unwrap());
        ps.set_split(Some(split()));
        let s = split();
        ps.add_queue(QueueId(1), p(0)).unwrap();
        ps.add_queue(QueueId(2), p(-10)).unwrap();
        for n in 0..3 {
            ps.push(QueueId(1), pkt(n)).unwrap();
            ps.push(QueueId(2), pkt(n)).unwrap();
        }
        // Shared side: queue 1 outranks queue 2, which is held to W = 1.
        let f = ps.drain_forwardable(&ExternalWork::none());
        assert_eq!(f.iter().filter(|f| f.queue == QueueId(1)).count(), 3);
        assert_eq!(f.iter().filter(|f| f.queue == QueueId(2)).count(), 1);
        // Within its side: no move.
        assert_eq!(ps.set_priority(QueueId(2), p(-5)), Ok(None));
        // Queue 1 becomes latency-critical: it moves, its in-flight packets with it.
        assert_eq!(ps.set_priority(QueueId(1), p(10)), Ok(Some(s.id(Side::Reserved))));
        assert_eq!(ps.in_flight(QueueId(1)), Some(3));
        assert_eq!(ps.priority(QueueId(1)), Some(p(10)));
        assert_eq!(ps.cu_mask_of(QueueId(1)).unwrap().words(), s.mask(Side::Reserved));
        // Queue 2 is alone on its side now: nothing holds it.
        let f = ps.drain_forwardable(&ExternalWork::none());
        assert_eq!(
            f.iter().map(|f| (f.queue, f.seq)).collect::<Vec<_>>(),
            [(QueueId(2), 1), (QueueId(2), 2)]
        );
        // Sequence numbers carry on after the move.
        assert_eq!(ps.push(QueueId(1), pkt(9)), Ok(3));
        assert_eq!(ps.complete_through(QueueId(1), 2), Ok(3));
    }

    #[test]
    fn a_new_split_moves_every_queue_with_what_it_holds_and_back() {
        let mut ps = Partitions::new(WindowSize::new(1).unwrap());
        ps.add_queue(QueueId(1), p(10)).unwrap();
        ps.add_queue(QueueId(2), p(-10)).unwrap();
        for n in 0..3 {
            ps.push(QueueId(1), pkt(n)).unwrap();
            ps.push(QueueId(2), pkt(n)).unwrap();
        }
        let f = ps.drain_forwardable(&ExternalWork::none());
        assert_eq!(f.len(), 4, "one partition: queue 2 held to W = 1");
        let live = |cus| Split::plan(Reserve::parse("auto@5").unwrap().sized(cus), 80, 4).unwrap();
        let s40 = live(40);
        let moved = ps.resplit(Some(s40.clone()));
        assert_eq!(moved.len(), 2);
        assert_eq!(moved[0].0, QueueId(1));
        assert_eq!(moved[0].1, s40.id(Side::Reserved));
        assert_eq!(moved[0].2.as_ref().unwrap().words(), s40.mask(Side::Reserved));
        assert_eq!(ps.in_flight(QueueId(1)), Some(3), "what was in flight moved with it");
        assert_eq!(ps.pending(QueueId(2)), Some(2), "and what was held");
        // On separate sides now: queue 2 is not held.
        let f = ps.drain_forwardable(&ExternalWork::none());
        assert_eq!(
            f.iter().map(|f| (f.queue, f.seq)).collect::<Vec<_>>(),
            [(QueueId(2), 1), (QueueId(2), 2)]
        );
        // Another size: both move again, to the new ids; the same size again moves nobody.
        let s20 = live(20);
        assert_eq!(ps.resplit(Some(s20.clone())).len(), 2);
        assert_eq!(ps.partition_of(QueueId(2)), Some(s20.id(Side::Shared)));
        assert!(ps.resplit(Some(s20)).is_empty());
        // No split: back to the whole GPU, every CU.
        let moved = ps.resplit(None);
        assert_eq!(moved.len(), 2);
        assert!(moved
            .iter()
            .all(|(_, to, m)| *to == PartitionId::WHOLE && m.as_ref().unwrap().count() == 80));
        assert_eq!(ps.push(QueueId(1), pkt(9)), Ok(3), "sequence numbers carry on");
        assert_eq!(ps.complete_through(QueueId(2), 2), Ok(3));
    }

    #[test]
    fn without_a_split_every_queue_is_in_the_whole_gpu() {
        let mut ps = Partitions::new(WindowSize::new(1).unwrap());
        ps.add_queue(QueueId(1), p(10)).unwrap();
        ps.add_queue(QueueId(2), p(-10)).unwrap();
        assert_eq!(ps.partition_of(QueueId(1)), Some(PartitionId::WHOLE));
        assert_eq!(ps.cu_mask_of(QueueId(2)), None);
        assert_eq!(ps.add_queue(QueueId(2), p(0)), Err(RingError::DuplicateQueue(QueueId(2))));
        // One partition: the high queue's work holds the low one to W = 1.
        for n in 0..3 {
            ps.push(QueueId(1), pkt(n)).unwrap();
            ps.push(QueueId(2), pkt(n)).unwrap();
        }
        let f = ps.drain_forwardable(&ExternalWork::none());
        assert_eq!(f.iter().filter(|f| f.queue == QueueId(2)).count(), 1);
    }

    #[test]
    fn the_two_sides_of_a_split_never_hold_each_other_back() {
        let mut ps = Partitions::new(WindowSize::new(1).unwrap());
        ps.set_split(Some(split()));
        ps.add_queue(QueueId(1), p(10)).unwrap();
        ps.add_queue(QueueId(2), p(-10)).unwrap();
        ps.add_queue(QueueId(3), p(-5)).unwrap();
        let s = split();
        assert_eq!(ps.partition_of(QueueId(1)), Some(s.id(Side::Reserved)));
        assert_eq!(ps.partition_of(QueueId(2)), Some(s.id(Side::Shared)));
        assert_eq!(ps.cu_mask_of(QueueId(1)).unwrap().words(), s.mask(Side::Reserved));
        assert_eq!(ps.cu_mask_of(QueueId(3)).unwrap().words(), s.mask(Side::Shared));
        for n in 0..4 {
            for q in 1..=3 {
                ps.push(QueueId(q), pkt(n)).unwrap();
            }
        }
        // Another process's high work on the reserved side holds nobody on the shared side.
        let mut external = ExternalWork::none();
        external.add(s.id(Side::Reserved), p(20));
        let f = ps.drain_forwardable(&external);
        let sent = |q| f.iter().filter(|f| f.queue == QueueId(q)).count();
        assert_eq!(sent(1), 1, "the reserved queue is held by the higher work on its side");
        assert_eq!(sent(3), 4, "the shared side's highest queue is not held");
        assert_eq!(sent(2), 1, "within the shared side, the window holds the lower queue");
        let st = ps.stats(QueueId(3), 0, &external).unwrap();
        assert_eq!(st.in_flight, 4);
        // Queues removed leave their partition.
        assert_eq!(ps.remove_queue(QueueId(2)).unwrap().pending.len(), 3);
        assert_eq!(ps.partition_of(QueueId(2)), None);
        assert_eq!(ps.push(QueueId(2), pkt(9)), Err(RingError::UnknownQueue(QueueId(2))));
    }
}
