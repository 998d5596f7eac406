//! The scheduler with fake queue memory and hardware.

use super::*;
use crate::path::aql_ring::QueueMemory;
use crate::path::aql_ring::{AqlRing, READ_DISPATCH_ID, WRITE_DISPATCH_ID};
use crate::path::packet::Packet;
use crate::path::packet::{FenceScope, PacketType, PACKET_SIZE};
use crate::path::shadow_queue::TRACKING_START;
use crate::path::shadow_queue::{HwQueue, ShadowQueue};
use crate::settings::fault::FaultPlan;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use xhsa_model::contention::ExternalWork;
use xhsa_model::ids::PartitionId;
use xhsa_model::ids::QueueId;
use xhsa_model::priority::Priority;
use xhsa_model::priority::{Level, StreamPriority};
use xhsa_model::stats::{QueueState, QueueStats};
use xhsa_model::window_size::WindowSize;

type Mem = crate::path::aql_ring::fake::Fake;

/// A hardware model: write indices owned here, read indices moved by `consume`, doorbells
/// and handler registrations recorded; every packet written is in `mem`.
#[derive(Default)]
struct Hw {
    write: RefCell<HashMap<u64, u64>>,
    read: RefCell<HashMap<u64, u64>>,
    rings: RefCell<Vec<(u64, u64)>>,
    armed: RefCell<Vec<(QueueId, i64)>>,
    refuse_arm: bool,
    /// Tracking signal values (the "GPU" decrements them).
    signals: RefCell<HashMap<u64, i64>>,
}

impl Hardware for Hw {
    fn reserve(&self, hw: &HwQueue, n: u64) -> u64 {
        let mut w = self.write.borrow_mut();
        let e = w.entry(hw.queue).or_default();
        let first = *e;
        *e += n;
        first
    }
    fn read_index(&self, hw: &HwQueue) -> u64 {
        *self.read.borrow().get(&hw.queue).unwrap_or(&0)
    }
    fn write_index(&self, hw: &HwQueue) -> u64 {
        *self.write.borrow().get(&hw.queue).unwrap_or(&0)
    }
    fn ring(&self, hw: &HwQueue, index: u64) {
        self.rings.borrow_mut().push((hw.queue, index));
    }
    fn arm(&self, queue: QueueId, _signal: u64, below: i64) -> bool {
        self.armed.borrow_mut().push((queue, below));
        !self.refuse_arm
    }
    fn signal_value(&self, signal: u64) -> i64 {
        *self.signals.borrow().get(&signal).unwrap_or(&TRACKING_START)
    }
}

const SLOTS: u64 = 8;

struct World {
    mem: Mem,
    hw: Hw,
    sched: Scheduler,
    /// Per queue: next shadow index the application writes.
    app_next: HashMap<u64, u64>,
    /// Per queue: packets the "GPU" executed, read from the hardware ring in order.
    executed: HashMap<u64, Vec<Packet>>,
    /// Per queue: tracking barriers executed.
    barriers: HashMap<u64, i64>,
    /// Per queue: no-op barriers executed (fillers of slots whose packet was not written).
    fillers: HashMap<u64, u64>,
}

fn shadow_ring(q: u64) -> AqlRing {
    AqlRing { base: 0x100_0000 * q, slots: SLOTS, amd_queue: 0x100_0000 * q - 0x1000 }
}
fn hw_queue(q: u64) -> HwQueue {
    HwQueue {
        queue: 0x8000_0000 + 0x100_0000 * q,
        ring: AqlRing {
            base: 0x8000_0000 + 0x100_0000 * q + 0x1000,
            slots: SLOTS,
            amd_queue: 0x8000_0000 + 0x100_0000 * q,
        },
        doorbell: 0xd00 + q,
    }
}
fn app_packet(q: u64, n: u64) -> Packet {
    let mut b = [0u8; PACKET_SIZE];
    b[0] = 2;
    b[1] = 1; // barrier bit
    b[8..16].copy_from_slice(&q.to_le_bytes());
    b[16..24].copy_from_slice(&n.to_le_bytes());
    Packet::from_bytes(b)
}
fn prio(level: i64) -> Priority {
    Priority::at_level(Level::new(level).unwrap())
}

impl World {
    fn new(w: u64, faults: &str) -> World {
        let (plan, errs) = FaultPlan::parse(faults);
        assert!(errs.is_empty());
        World {
            mem: Mem::default(),
            hw: Hw::default(),
            sched: Scheduler::new(WindowSize::new(w).unwrap(), Arc::new(plan)),
            app_next: HashMap::new(),
            executed: HashMap::new(),
            barriers: HashMap::new(),
            fillers: HashMap::new(),
        }
    }
    fn add(&mut self, q: u64, p: Priority) {
        let ring = shadow_ring(q);
        for i in 0..SLOTS {
            // Both rings start INVALID, as ROCr's do.
            self.mem.store_header(ring.slot(i), 1);
            self.mem.store_header(hw_queue(q).ring.slot(i), 1);
        }
        assert!(self.sched.add(ShadowQueue::new(QueueId(q), ring, hw_queue(q), 0x5000 + q), p));
    }
    /// The application publishes `n` packets (as far as the shadow has room) and rings.
    fn submit(&mut self, q: u64, n: u64) -> u64 {
        self.submit_made(q, n, app_packet)
    }
    /// Submits `n` packets `make(q, n)` on queue `q`, as many as the ring has room for.
    fn submit_made(&mut self, q: u64, n: u64, make: impl Fn(u64, u64) -> Packet) -> u64 {
        let ring = shadow_ring(q);
        let mut done = 0;
        for _ in 0..n {
            let next = *self.app_next.get(&q).unwrap_or(&0);
            let read = self.mem.load_u64(ring.amd_queue + READ_DISPATCH_ID);
            if next - read >= SLOTS {
                break;
            }
            let p = make(q, next);
            self.mem.write_body(ring.slot(next), &p);
            self.mem.store_header(ring.slot(next), p.header());
            self.mem.store_u64(ring.amd_queue + WRITE_DISPATCH_ID, next + 1);
            self.app_next.insert(q, next + 1);
            done += 1;
        }
        self.sched.doorbell(QueueId(q), &self.mem, &self.hw, 0);
        done
    }
    /// The GPU executes up to `n` packets of queue `q`'s hardware ring; then the handler
    /// runs if a barrier completed.
    fn gpu(&mut self, q: u64, n: u64) {
        let h = hw_queue(q);
        let mut completed_barrier = false;
        for _ in 0..n {
            let read = self.hw.read_index(&h);
            if read >= self.hw.write_index(&h) {
                break;
            }
            let p = self.mem.read_packet(h.ring.slot(read));
            assert_ne!(
                p.packet_type(),
                PacketType::Invalid,
                "the doorbell was rung before the packet was written"
            );
            self.mem.store_header(h.ring.slot(read), 1);
            if p.completion_signal() == 0x5000 + q && p.packet_type() == PacketType::BarrierAnd {
                *self.barriers.entry(q).or_default() += 1;
                completed_barrier = true;
            } else if p == Packet::no_op() {
                *self.fillers.entry(q).or_default() += 1;
            } else {
                self.executed.entry(q).or_default().push(p);
            }
            self.hw.read.borrow_mut().insert(h.queue, read + 1);
        }
        if completed_barrier {
            let value = TRACKING_START - self.barriers[&q];
            self.hw.signals.borrow_mut().insert(0x5000 + q, value);
            // ROCr runs the handler only when one is registered.
            if self.sched.queue(QueueId(q)).is_some_and(|s| s.tracking.armed) {
                self.sched.on_tracking(QueueId(q), value, &self.mem, &self.hw, 0);
            }
        }
    }
    fn check_executed(&self, q: u64, n: u64) {
        let got = self.executed.get(&q).cloned().unwrap_or_default();
        let want: Vec<Packet> = (0..n).map(|i| app_packet(q, i)).collect();
        assert_eq!(got, want, "queue {q}: lost, duplicated, reordered or modified");
    }
}

#[test]
fn packets_written_untracked_count_as_unconfirmed_until_a_barrier_after_them_completes() {
    use xhsa_model::stats::FLAG_UNCONFIRMED;
    let mut w = World::new(1, "");
    w.add(1, prio(0));
    w.submit(1, 3);
    // Alone and holding nothing: written untracked, and the GPU runs them (no one sees it).
    w.gpu(1, 10);
    let s = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!(s.in_flight, 3, "their completions are not seen");
    assert!(s.has_flag(FLAG_UNCONFIRMED), "so the count is unconfirmed");
    // The watcher's ask: a barrier after them, its handler registered although nothing
    // else wants wake-ups.
    w.sched.track_now(&w.mem, &w.hw, 0);
    assert_eq!(w.hw.write_index(&hw_queue(1)), 4, "a tracking barrier after the three");
    assert!(w.sched.queue(QueueId(1)).unwrap().tracking.armed, "its completion wakes libxhsa");
    assert!(
        w.sched.stats(QueueId(1), 0).unwrap().has_flag(FLAG_UNCONFIRMED),
        "unconfirmed until the barrier completes"
    );
    w.gpu(1, 10);
    let s = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!((s.in_flight, s.completed), (0, 3), "the barrier's completion counts all three");
    assert!(!s.has_flag(FLAG_UNCONFIRMED));
    // A queue whose packets are tracked as they go is never unconfirmed.
    w.add(2, prio(5));
    w.submit(2, 1);
    w.submit(1, 2);
    let s = w.sched.stats(QueueId(1), 0).unwrap();
    assert!(s.in_flight > 0 && !s.has_flag(FLAG_UNCONFIRMED), "{s:?}");
    w.gpu(1, 10);
    w.gpu(2, 10);
    w.gpu(1, 10);
    w.check_executed(1, 5);
    w.check_executed(2, 1);
}

#[test]
fn alone_a_queue_forwards_everything_and_tracks_it_only_once_completions_matter() {
    let mut w = World::new(1, "");
    w.add(1, prio(0));
    assert_eq!(w.submit(1, 3), 3);
    assert_eq!(w.hw.write_index(&hw_queue(1)), 3, "alone and holding nothing: no tracking barrier");
    assert_eq!(
        *w.hw.rings.borrow(),
        vec![(hw_queue(1).queue, 2)],
        "one doorbell per pass, with the last packet's id"
    );
    assert!(w.hw.armed.borrow().is_empty(), "no completion handler, no wake-up");
    assert_eq!(
        w.mem.load_u64(shadow_ring(1).amd_queue + READ_DISPATCH_ID),
        3,
        "the application sees its packets taken"
    );
    w.gpu(1, 10);
    w.check_executed(1, 3);
    // A higher queue arrives and queue 1 gets held: now completions matter, and a barrier
    // after queue 1's untracked packets makes them observable.
    w.add(2, prio(5));
    w.submit(2, 1);
    w.submit(1, 2);
    assert_eq!(
        w.sched.stats(QueueId(1), 0).unwrap().pending,
        2,
        "held: W = 1 and 3 packets count as in flight"
    );
    assert_eq!(w.hw.write_index(&hw_queue(1)), 4, "a tracking barrier after the untracked packets");
    w.gpu(1, 10);
    let s = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!(
        (s.completed, s.pending),
        (3, 1),
        "the barrier's completion counts all three; one more may go"
    );
    w.gpu(2, 10);
    w.gpu(1, 10);
    w.gpu(1, 10);
    w.check_executed(1, 5);
    w.check_executed(2, 1);
}

#[test]
fn the_window_holds_a_lower_queue_while_a_higher_one_works() {
    let mut w = World::new(1, "");
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.submit(1, 2);
    w.submit(2, 4);
    // The high queue has work in flight: the low one gets W = 1 packet.
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().in_flight, 1);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 3);
    w.gpu(2, 10); // its one packet and barrier complete: one more may go
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 2);
    w.gpu(1, 10); // the high queue finishes: the low one is free
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 0);
    w.gpu(2, 100);
    w.check_executed(1, 2);
    w.check_executed(2, 4);
}

/// The board as another process's work shows on it.
#[derive(Debug, Default)]
struct FakeBoard {
    external: std::sync::Mutex<Option<Priority>>,
    /// Other processes' work in named partitions, beside `external` on the whole GPU.
    external_in: std::sync::Mutex<Vec<(PartitionId, Priority)>>,
    /// Other processes' queues present (with work or not).
    present: std::sync::Mutex<Vec<(PartitionId, Priority)>>,
    /// The partitions queues joined in.
    partitions: std::sync::Mutex<Vec<(QueueId, PartitionId)>>,
    published: std::sync::Mutex<Vec<(QueueId, QueueStats)>>,
    /// No other process on the board.
    alone: std::sync::Mutex<bool>,
    joined: std::sync::Mutex<Vec<QueueId>>,
    left: std::sync::Mutex<Vec<QueueId>>,
}

impl Board for FakeBoard {
    fn join(&self, queue: QueueId, _: Priority, partition: PartitionId) -> bool {
        self.joined.lock().unwrap().push(queue);
        self.partitions.lock().unwrap().push((queue, partition));
        true
    }
    fn publish(&self, queue: QueueId, stats: &QueueStats) {
        self.published.lock().unwrap().push((queue, *stats));
    }
    fn leave(&self, queue: QueueId) {
        self.left.lock().unwrap().push(queue);
    }
    fn contention(&self) -> ExternalWork {
        let mut w = ExternalWork::none();
        if let Some(p) = *self.external.lock().unwrap() {
            w.add(PartitionId::WHOLE, p);
        }
        for &(part, p) in self.external_in.lock().unwrap().iter() {
            w.add(part, p);
        }
        for &(part, p) in self.present.lock().unwrap().iter() {
            w.add_present(part, p);
        }
        w
    }
    fn others_present(&self) -> bool {
        !*self.alone.lock().unwrap()
    }
}

impl FakeBoard {
    fn last(&self, q: u64) -> QueueStats {
        self.published
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(id, _)| *id == QueueId(q))
            .expect("published")
            .1
    }
}

#[test]
fn higher_work_of_another_process_on_the_board_holds_this_process_queue() {
    let mut w = World::new(1, "");
    let board = Arc::new(FakeBoard::default());
    *board.external.lock().unwrap() = Some(prio(10));
    w.add(1, prio(0));
    w.sched.attach_board(board.clone());
    w.add(2, prio(0));
    assert_eq!(
        *board.joined.lock().unwrap(),
        vec![QueueId(1), QueueId(2)],
        "queues join whenever the board comes"
    );
    w.submit(2, 4);
    let s = w.sched.stats(QueueId(2), 0).unwrap();
    assert_eq!((s.in_flight, s.pending), (1, 3), "contended from outside: W = 1 in flight");
    assert!(board.last(2).has_work() && board.last(2).has_flag(xhsa_model::stats::FLAG_CONTENDED));
    // The other process finishes; the next pass after the cached read expires sees it.
    *board.external.lock().unwrap() = None;
    w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS - 1);
    assert_eq!(
        w.sched.stats(QueueId(2), 0).unwrap().pending,
        3,
        "a read younger than the cache period is reused"
    );
    w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 0, "uncontended: everything goes");
    assert_eq!(
        w.sched.stats(QueueId(2), CONTENTION_CACHE_NS).unwrap().throttle_ns,
        CONTENTION_CACHE_NS,
        "held from 0 until the board cleared"
    );
    assert_eq!(w.sched.summary(CONTENTION_CACHE_NS).throttle_ns, CONTENTION_CACHE_NS);
    w.gpu(2, 100);
    w.check_executed(2, 4);
    assert!(!board.last(2).has_work(), "the end of the work is published");
    assert_eq!(board.last(2).completed, 4);
    w.sched.remove(QueueId(2), 0);
    w.sched.leave_board();
    assert_eq!(*board.left.lock().unwrap(), vec![QueueId(2), QueueId(1)]);
}

/// Work arriving on an idle queue is published, and the watchers told, right after the intake:
/// before the packets are written (another process's take-off starts from it); the pass's own
/// publish follows with the packets in flight. A queue that already had work is not told again
/// at intake, nor is one of a process alone on the board or one no other process's queue is
/// below.
#[test]
fn an_arrival_is_published_and_told_before_its_packets_are_written() {
    let mut w = World::new(4, "");
    let board = Arc::new(FakeBoard::default());
    *board.alone.lock().unwrap() = true;
    w.sched.attach_board(board.clone());
    w.add(2, prio(0));
    w.sched.pass(&w.mem, &w.hw, 0);
    let after_the_write = |b: &FakeBoard| {
        b.published.lock().unwrap().iter().all(|(_, s)| s.in_flight > 0 || !s.has_work())
    };
    w.submit(2, 2);
    assert!(after_the_write(&board), "alone: published once, after the write");
    w.gpu(2, 100);
    // Another process comes, at the same priority: nobody it could yield to.
    *board.alone.lock().unwrap() = false;
    board.present.lock().unwrap().push((PartitionId::WHOLE, prio(0)));
    w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS);
    w.submit(2, 2);
    assert!(after_the_write(&board), "a peer: published after the write");
    w.gpu(2, 100);
    // A lower queue of another process is present: arrivals are told at intake.
    board.present.lock().unwrap().push((PartitionId::WHOLE, prio(-5)));
    w.sched.pass(&w.mem, &w.hw, 2 * CONTENTION_CACHE_NS);
    let told: Arc<std::sync::Mutex<Vec<Option<QueueStats>>>> = Arc::default();
    let (b, t) = (board.clone(), told.clone());
    w.sched.set_notifier(Notifier(Arc::new(move || {
        let last = b.published.lock().unwrap().last().map(|(_, s)| *s);
        t.lock().unwrap().push(last);
    })));
    w.add(1, prio(0));
    told.lock().unwrap().clear();
    w.submit(1, 3);
    let first = told.lock().unwrap().first().copied().flatten().expect("told, after a publish");
    assert_eq!((first.pending, first.in_flight), (3, 0), "told at intake, before the write");
    let last = board.last(1);
    assert_eq!((last.pending, last.in_flight), (0, 3), "then published with the packets in flight");
    // More packets while it has work: no second arrival (the pass's publish says the rest).
    let before = told.lock().unwrap().len();
    let published = board.published.lock().unwrap().len();
    w.submit(1, 1);
    assert_eq!(told.lock().unwrap().len(), before, "no change of has-work or busy: not told");
    assert!(
        board.published.lock().unwrap()[published..].iter().all(|(_, s)| s.in_flight > 0),
        "nothing published at intake"
    );
    w.gpu(1, 100);
    w.check_executed(1, 4);
    w.check_executed(2, 4);
    assert!(!board.last(1).has_work());
}

#[test]
fn beside_a_higher_priority_present_but_idle_a_queue_keeps_its_horizon_in_flight() {
    let mut w = World::new(1, "");
    let board = Arc::new(FakeBoard::default());
    board.present.lock().unwrap().push((PartitionId::WHOLE, prio(10)));
    w.sched.attach_board(board.clone());
    w.add(2, prio(0));
    // No horizon yet (no take-off measured): everything goes; its own time gets measured (the
    // test's clock stands still: 1 ns per packet).
    w.submit(2, 4);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().in_flight, 4);
    w.gpu(2, 100);
    assert_eq!(board.last(2).own_packet_ns, 1);
    // A horizon of 3 ns: 3 packets of 1 ns in flight at most, the rest held.
    w.sched.set_horizon(3);
    assert_eq!(w.submit(2, 6), 6);
    let s = w.sched.stats(QueueId(2), 0).unwrap();
    assert_eq!((s.in_flight, s.pending), (3, 3));
    assert!(!s.has_flag(xhsa_model::stats::FLAG_CONTENDED), "a horizon is not contention");
    // As they complete, the next go: still 3 in flight.
    w.gpu(2, 100);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().in_flight, 3);
    // A horizon one packet already fills (long packets: a take-off is worth it whatever is in
    // flight) bounds nothing.
    w.sched.set_horizon(1);
    assert_eq!(w.submit(2, 2), 2);
    assert!(w.sched.stats(QueueId(2), 0).unwrap().in_flight > 3, "no longer 3 at most");
    w.sched.set_horizon(3);
    // The higher priority goes: no bound.
    board.present.lock().unwrap().clear();
    w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 0);
    gpu_until_idle(&mut w, &[2]);
    w.check_executed(2, 12);
    // A present priority at or below the queue's bounds nothing.
    board.present.lock().unwrap().push((PartitionId::WHOLE, prio(0)));
    w.sched.pass(&w.mem, &w.hw, 2 * CONTENTION_CACHE_NS);
    assert_eq!(w.submit(2, 6), 6);
    assert_eq!(w.sched.stats(QueueId(2), 0).unwrap().pending, 0);
}

#[test]
fn with_a_reserve_queues_join_their_side_and_only_work_on_their_side_holds_them() {
    use xhsa_model::partition::{Reserve, Side, Split};
    let split = Split::plan(Reserve::parse("20@5").unwrap(), 80, 4).unwrap();
    let (reserved, shared) = (split.id(Side::Reserved), split.id(Side::Shared));
    let mut w = World::new(1, "");
    w.sched.set_split(Some(split.clone()));
    let board = Arc::new(FakeBoard::default());
    w.sched.attach_board(board.clone());
    w.add(1, prio(10));
    w.add(2, prio(-10));
    assert_eq!(
        *board.partitions.lock().unwrap(),
        vec![(QueueId(1), reserved), (QueueId(2), shared)]
    );
    assert_eq!(w.sched.cu_mask_of(QueueId(1)).unwrap().words(), split.mask(Side::Reserved));
    assert_eq!(w.sched.cu_mask_of(QueueId(2)).unwrap().words(), split.mask(Side::Shared));
    // Another process's urgent work on the reserved side: the batch queue is not held, even
    // while this process's own reserved queue has work too.
    board.external_in.lock().unwrap().push((reserved, prio(20)));
    w.submit(1, 3);
    w.submit(2, 4);
    let s2 = w.sched.stats(QueueId(2), 0).unwrap();
    assert_eq!((s2.in_flight, s2.pending), (4, 0), "nothing on its side outranks it");
    assert!(!board.last(2).has_flag(xhsa_model::stats::FLAG_CONTENDED));
    let s1 = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!((s1.in_flight, s1.pending), (1, 2), "held to W by the higher work on its side");
    // Work on the shared side above the batch queue holds it.
    board.external_in.lock().unwrap().push((shared, prio(0)));
    w.gpu(2, 100);
    w.sched.pass(&w.mem, &w.hw, CONTENTION_CACHE_NS);
    w.submit(2, 3);
    assert_eq!(w.sched.stats(QueueId(2), CONTENTION_CACHE_NS).unwrap().pending, 2);
}

#[test]
fn a_stream_priority_across_the_reserve_moves_the_queue_and_asks_for_its_new_mask() {
    use xhsa_model::partition::{Reserve, Side, Split};
    use xhsa_model::priority::StreamPriority;
    let split = Split::plan(Reserve::parse("20@0:high").unwrap(), 80, 4).unwrap();
    let mut w = World::new(1, "");
    w.sched.set_split(Some(split.clone()));
    let board = Arc::new(FakeBoard::default());
    w.sched.attach_board(board.clone());
    w.add(1, prio(0));
    assert_eq!(w.sched.partition_of(QueueId(1)), split.id(Side::Shared));
    w.submit(1, 2);
    // HIP: hipStreamCreateWithPriority sets the queue's priority after creating it.
    w.sched.set_priority(QueueId(1), prio(0).with_stream(StreamPriority::High));
    assert_eq!(w.sched.partition_of(QueueId(1)), split.id(Side::Reserved));
    let remasks = w.sched.take_remasks();
    assert_eq!(remasks.len(), 1);
    assert_eq!(remasks[0].0, hw_queue(1).queue);
    assert_eq!(remasks[0].1.words(), split.mask(Side::Reserved));
    assert!(w.sched.take_remasks().is_empty(), "asked once");
    assert_eq!(*board.left.lock().unwrap(), vec![QueueId(1)]);
    assert_eq!(
        board.partitions.lock().unwrap().last(),
        Some(&(QueueId(1), split.id(Side::Reserved)))
    );
    // Nothing lost across the move.
    w.submit(1, 3);
    w.gpu(1, 100);
    w.check_executed(1, 5);
    // Same side: no move, no mask.
    w.sched.set_priority(QueueId(1), prio(3));
    assert!(w.sched.take_remasks().is_empty());
    // An application mask bounds the partition's, and is kept across a move back.
    let app = [0xffff_ffffu32, 0, 0];
    let bound = w.sched.bind_app_mask(QueueId(1), &app).unwrap().unwrap();
    assert!(bound.count() > 0 && (0..80).all(|c| !bound.contains(c) || (c < 32 && c % 4 == 3)));
    w.sched.set_priority(QueueId(1), prio(0));
    let back = w.sched.take_remasks();
    assert_eq!(back[0].1.count(), 24, "the shared side's CUs among the application's 32");
    let reset = w.sched.bind_app_mask(QueueId(1), &[]);
    assert_eq!(
        reset,
        Some(Ok(crate::path::partition::CuMask::from_words(split.mask(Side::Shared).to_vec())))
    );
    assert_eq!(w.sched.cu_mask_of(QueueId(1)).unwrap().words(), split.mask(Side::Shared));
}

#[test]
fn the_hardware_ring_is_never_overfilled_and_the_shadow_backs_up() {
    let mut w = World::new(2, "");
    w.add(1, prio(0));
    // 8 packets: 7 fit with a tracking barrier, the 8th waits in libxhsa.
    assert_eq!(w.submit(1, 8), 8);
    assert_eq!(w.hw.write_index(&hw_queue(1)), SLOTS);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 1);
    // The application keeps going: libxhsa holds at most a ring's worth.
    assert_eq!(w.submit(1, 16), 8);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 8);
    assert_eq!(
        w.mem.load_u64(shadow_ring(1).amd_queue + READ_DISPATCH_ID),
        15,
        "one left in the shadow ring"
    );
    for _ in 0..20 {
        w.gpu(1, 3);
        assert!(w.hw.write_index(&hw_queue(1)) - w.hw.read_index(&hw_queue(1)) <= SLOTS);
    }
    w.check_executed(1, 16);
}

#[test]
fn an_injected_forwarding_failure_degrades_the_queue_in_order() {
    let mut w = World::new(1, "forward:2");
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.submit(1, 2); // batch 1
    w.submit(2, 3); // batch 2 fails: queue 2 goes Direct with its packets in order
    assert!(w.sched.queue(QueueId(2)).unwrap().is_direct());
    assert!(!w.sched.queue(QueueId(1)).unwrap().is_direct());
    w.submit(2, 2);
    w.gpu(1, 100);
    w.gpu(2, 100);
    w.check_executed(1, 2);
    w.check_executed(2, 5);
    assert_eq!(w.sched.summary(0).degraded, 1);
    let s = w.sched.summary(0);
    assert_eq!((s.taken, s.forwarded), (7, 7));
}

/// A failure after the slots were reserved, half way through a batch: the slots not written
/// hold no-op barriers (the last one a tracking barrier), the doorbell is rung, the packets
/// not written follow them in order, and the queue degrades.
#[test]
fn an_injected_failure_after_the_reserve_fills_the_slots_and_degrades_in_order() {
    let mut w = World::new(1, "forward_after_reserve:1");
    w.add(1, prio(0));
    assert_eq!(w.submit(1, 4), 4);
    assert!(w.sched.queue(QueueId(1)).unwrap().is_direct());
    let h = hw_queue(1);
    // p0, p1, a no-op, a tracking barrier, then p2, p3 again.
    assert_eq!(w.hw.write_index(&h), 6);
    assert_eq!(w.mem.read_packet(h.ring.slot(2)), Packet::no_op());
    assert_eq!(w.mem.read_packet(h.ring.slot(3)), Packet::tracking_barrier(0x5001));
    assert_eq!(w.mem.read_packet(h.ring.slot(4)), app_packet(1, 2));
    assert_eq!(
        w.hw.rings.borrow().first(),
        Some(&(h.queue, 3)),
        "the doorbell covers the filled slots"
    );
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 4);
    assert_eq!((w.fillers[&1], w.barriers[&1]), (1, 1));
    let s = w.sched.summary(0);
    assert_eq!((s.taken, s.forwarded, s.held, s.degraded), (4, 4, 0, 1));
    // Destroy waits for every barrier issued, the filler included.
    assert!(w.sched.close(QueueId(1), &w.mem, 0));
    let Drain::Done { wait_for: Some((_, target)) } = w.sched.drain_step(QueueId(1), &w.mem, &w.hw)
    else {
        panic!("one step")
    };
    gpu_until_idle(&mut w, &[1]);
    assert_eq!(TRACKING_START - w.barriers[&1], target);
}

/// A real panic while writing a batch (the memory write fails half way), as the edge sees
/// it: nothing escapes the pass; no reserved slot is left invalid (the model GPU asserts
/// that); every packet runs once, in order, without the application's help.
#[test]
fn a_panic_while_writing_leaves_no_invalid_slot_and_loses_nothing() {
    let mut w = World::new(1, "");
    w.add(1, prio(5));
    w.add(2, prio(0));
    let h = hw_queue(2);
    w.mem.panic_on_write_at(h.ring.slot(1));
    // What the edge does (`run` in src/entry/queues.rs): catch, then degrade everything.
    let edge = |w: &mut World, q: u64, n: u64| {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.submit(q, n))).is_err() {
            w.sched.degrade_all("libxhsa failed internally", &w.mem, &w.hw);
        }
    };
    edge(&mut w, 2, 3); // a batch of three: the second one's write panics
    edge(&mut w, 1, 2);
    edge(&mut w, 2, 2);
    gpu_until_idle(&mut w, &[1, 2]);
    w.check_executed(1, 2);
    w.check_executed(2, 5);
    assert!(
        w.sched.queue(QueueId(2)).unwrap().is_direct(),
        "the queue whose write failed passes through"
    );
    assert!(
        !w.sched.queue(QueueId(1)).unwrap().is_direct(),
        "the others stay scheduled: the failure never left the pass"
    );
}

/// The same failure in a passthrough flush and in a destroy's drain: the rest goes again
/// after the fillers (woken by their tracking barrier), nothing is lost.
#[test]
fn failures_after_the_reserve_in_passthrough_and_destroy_lose_nothing() {
    // forward:1 degrades queue 1 at once; its second write fails half way.
    let mut w = World::new(1, "forward:1,forward_after_reserve:2");
    w.add(1, prio(0));
    w.submit(1, 1);
    assert_eq!(w.submit(1, 4), 4);
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 5);
    assert!(w.fillers.get(&1).is_some_and(|&n| n >= 1));
    // Destroy with six published and not taken: the drain's write fails once, then goes on.
    let mut w = World::new(1, "forward_after_reserve:1");
    w.add(1, prio(0));
    let ring = shadow_ring(1);
    for i in 0..6 {
        let p = app_packet(1, i);
        w.mem.write_body(ring.slot(i), &p);
        w.mem.store_header(ring.slot(i), p.header());
    }
    w.mem.store_u64(ring.amd_queue + WRITE_DISPATCH_ID, 6);
    assert!(w.sched.close(QueueId(1), &w.mem, 0));
    let wait = loop {
        match w.sched.drain_step(QueueId(1), &w.mem, &w.hw) {
            Drain::NeedRoom => gpu_until_idle(&mut w, &[1]),
            Drain::Done { wait_for } => break wait_for,
        }
    };
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 6);
    assert_eq!(
        TRACKING_START - w.barriers[&1],
        wait.unwrap().1,
        "the final barrier covers the fillers' too"
    );
}

/// Runs the GPU until nothing moves (completion handlers run as ROCr would run them); no
/// doorbell, no read-index poll: what the application leaves behind must still complete.
fn gpu_until_idle(w: &mut World, queues: &[u64]) {
    for _ in 0..1000 {
        let before: usize = w.executed.values().map(Vec::len).sum::<usize>()
            + w.barriers.values().sum::<i64>() as usize;
        for &q in queues {
            w.gpu(q, 1000);
        }
        let after: usize = w.executed.values().map(Vec::len).sum::<usize>()
            + w.barriers.values().sum::<i64>() as usize;
        if after == before {
            return;
        }
    }
    panic!("the GPU never went idle");
}

/// A queue degraded to passthrough whose packets do not all fit in the hardware ring: a
/// tracking barrier after what was written, and its completion writes the rest. Before,
/// the rest waited for the application's next doorbell or read-index poll.
#[test]
fn a_degraded_queue_left_with_packets_drains_without_the_application() {
    let mut w = World::new(1, "forward:1");
    w.add(1, prio(0));
    let mut submitted = 0;
    // One doorbell per packet, the GPU busy (executing nothing) meanwhile; the application
    // publishes as long as the shadow has room.
    while w.submit(1, 1) == 1 {
        submitted += 1;
        let h = hw_queue(1);
        assert!(w.hw.write_index(&h) - w.hw.read_index(&h) <= SLOTS);
    }
    assert!(w.sched.queue(QueueId(1)).unwrap().is_direct());
    assert_eq!(
        submitted, 15,
        "7 written untracked, a barrier in the last slot, 8 in the shadow ring"
    );
    assert!(!w.sched.stalled(), "a completion will run the next pass");
    assert_eq!(w.hw.armed.borrow().len(), 1, "one handler, on the barrier");
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 15);
    let s = w.sched.summary(0);
    assert_eq!((s.taken, s.forwarded, s.held), (15, 15, 0));
    // The queue goes on normally afterwards.
    assert_eq!(w.submit(1, 3), 3);
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 18);
}

/// Without a completion handler (the runtime refused it) the leftover waits for the
/// application's next doorbell or read-index poll, as the edge retries when `stalled`.
#[test]
fn a_degraded_queue_without_a_handler_is_reported_stalled() {
    let mut w = World::new(1, "forward:1");
    w.hw.refuse_arm = true;
    w.add(1, prio(0));
    while w.submit(1, 1) == 1 {}
    assert!(w.sched.stalled());
    gpu_until_idle(&mut w, &[1]);
    w.sched.pass(&w.mem, &w.hw, 0); // the application polls its read index
    gpu_until_idle(&mut w, &[1]);
    w.sched.pass(&w.mem, &w.hw, 0);
    gpu_until_idle(&mut w, &[1]);
    w.check_executed(1, 15);
    assert!(!w.sched.stalled());
}

#[test]
fn a_refused_completion_handler_degrades_the_queue() {
    let mut w = World::new(1, "");
    w.hw.refuse_arm = true;
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.submit(1, 1);
    assert!(!w.sched.queue(QueueId(1)).unwrap().is_direct(), "nothing held, no handler needed");
    // Queue 2 holds packets behind queue 1: it needs a handler, which is refused.
    w.submit(2, 3);
    assert!(w.sched.queue(QueueId(2)).unwrap().is_direct());
    w.submit(2, 3);
    w.gpu(1, 100);
    w.gpu(2, 100);
    w.check_executed(1, 1);
    w.check_executed(2, 6);
}

#[test]
fn destroy_drains_everything_in_several_passes() {
    let mut w = World::new(1, "");
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.submit(1, 1);
    w.submit(2, 8); // one in flight, seven held by the window
    assert!(w.sched.close(QueueId(2), &w.mem, 0));
    assert_eq!(w.sched.queue(QueueId(2)).unwrap().backlog.len(), 7);
    let mut steps = 0;
    let wait = loop {
        steps += 1;
        match w.sched.drain_step(QueueId(2), &w.mem, &w.hw) {
            Drain::NeedRoom => w.gpu(2, 2),
            Drain::Done { wait_for } => break wait_for,
        }
        assert!(steps < 50);
    };
    assert!(steps > 1, "the hardware ring was too short for one pass");
    let (signal, target) = wait.unwrap();
    assert_eq!(signal, 0x5002);
    w.gpu(2, 100);
    assert_eq!(TRACKING_START - w.barriers[&2], target, "the final barrier covers everything");
    w.check_executed(2, 8);
    let q = w.sched.remove(QueueId(2), 0).unwrap();
    assert_eq!((q.taken, q.forwarded), (8, 8));
    assert_eq!(w.sched.summary(0).forwarded, 9);
    // Queue 1 is unaffected.
    w.gpu(1, 10);
    w.check_executed(1, 1);
}

#[test]
fn inactive_and_failed_queues_drop_what_they_hold_and_ignore_doorbells() {
    let mut w = World::new(1, "");
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.add(3, prio(0));
    w.submit(1, 1);
    w.submit(2, 3);
    w.submit(3, 3);
    w.sched.inactivate(QueueId(2));
    w.sched.fail(QueueId(3));
    assert_eq!(w.submit(2, 1), 1);
    assert!(!w.sched.doorbell(QueueId(2), &w.mem, &w.hw, 0));
    assert!(w.sched.close(QueueId(3), &w.mem, 0));
    assert_eq!(w.sched.drain_step(QueueId(3), &w.mem, &w.hw), Drain::Done { wait_for: None });
}

#[test]
fn stream_priority_orders_queues_within_a_level() {
    let mut w = World::new(1, "");
    w.add(1, prio(0));
    w.add(2, prio(0));
    w.sched.set_priority(QueueId(2), prio(0).with_stream(StreamPriority::High));
    assert_eq!(w.sched.priority(QueueId(2)), Some(prio(0).with_stream(StreamPriority::High)));
    w.submit(2, 2);
    w.submit(1, 3);
    assert_eq!(
        w.sched.stats(QueueId(1), 0).unwrap().in_flight,
        1,
        "held to W under the high stream"
    );
    let _ = FenceScope::None;
}

#[test]
fn an_operator_level_overrides_the_requested_priority_and_keeps_the_stream() {
    let mut w = World::new(1, "");
    w.add(1, prio(0));
    w.sched.set_priority(QueueId(1), prio(0).with_stream(StreamPriority::High));
    let p = w.sched.set_override(QueueId(1), Some(Level::new(-7).unwrap())).unwrap();
    assert_eq!(p, prio(-7).with_stream(StreamPriority::High));
    assert_eq!(w.sched.priority(QueueId(1)), Some(p));
    let st = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!(
        (st.priority, st.requested),
        (p.rank(), prio(0).with_stream(StreamPriority::High).rank())
    );
    assert!(st.has_flag(xhsa_model::stats::FLAG_OVERRIDDEN));
    // The application changes its stream priority meanwhile: the operator's level stays.
    w.sched.set_priority(QueueId(1), prio(0).with_stream(StreamPriority::Low));
    assert_eq!(w.sched.priority(QueueId(1)), Some(prio(-7).with_stream(StreamPriority::Low)));
    // Cleared: back to what was asked.
    assert_eq!(
        w.sched.set_override(QueueId(1), None),
        Some(prio(0).with_stream(StreamPriority::Low))
    );
    assert!(!w.sched.stats(QueueId(1), 0).unwrap().has_flag(xhsa_model::stats::FLAG_OVERRIDDEN));
    assert_eq!(w.sched.set_override(QueueId(9), None), None, "unknown queue");
}

#[test]
fn a_paused_queue_is_held_without_holding_others_back_and_resumes_in_order() {
    let mut w = World::new(1, "");
    w.add(1, prio(5));
    w.add(2, prio(0));
    w.sched.set_paused(QueueId(1), true, 0);
    assert!(w.sched.is_paused(QueueId(1)));
    w.submit(1, 3);
    w.submit(2, 3);
    let st = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!((st.pending, st.in_flight), (3, 0), "nothing of a paused queue is forwarded");
    assert_eq!(st.state(), QueueState::Held);
    assert!(
        st.has_flag(xhsa_model::stats::FLAG_PAUSED) && !st.has_work(),
        "its work holds nobody back"
    );
    assert_eq!(
        w.sched.stats(QueueId(2), 0).unwrap().in_flight,
        3,
        "the lower queue runs unthrottled"
    );
    w.sched.set_paused(QueueId(1), false, 0);
    w.sched.pass(&w.mem, &w.hw, 0);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().pending, 0);
    w.gpu(1, 10);
    w.check_executed(1, 3);
}

#[test]
fn completions_fill_the_latency_histogram_and_degradation_shows_in_the_state() {
    let mut w = World::new(1, "");
    w.add(1, prio(0));
    w.add(2, prio(5));
    w.submit(2, 1); // completions matter: queue 1's packets are tracked
    w.submit(1, 2);
    w.gpu(1, 10);
    w.gpu(2, 10);
    let st = w.sched.stats(QueueId(1), 0).unwrap();
    assert_eq!(
        st.latency.iter().sum::<u32>() as u64,
        st.completed,
        "one sample per completed packet"
    );
    assert!(st.completed > 0);
    assert_eq!(st.state(), QueueState::Running);
    w.sched.degrade(QueueId(1), Vec::new(), "test", &w.mem, &w.hw);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().state(), QueueState::Degraded);
}

proptest::proptest! {
    /// Random submissions, GPU progress and a destroy at the end: every queue's packets run
    /// exactly once, in order, unmodified, and the hardware ring is never overfilled.
    #[test]
    fn packets_are_never_lost_duplicated_or_reordered(
        w in 1u64..4,
        ops in proptest::collection::vec((0u8..3, 1u64..4, 1u64..6), 1..120),
        fault in proptest::option::of((proptest::bool::ANY, 1u64..20)),
    ) {
        let faults = match fault {
            Some((false, n)) => format!("forward:{n}"),
            Some((true, n)) => format!("forward_after_reserve:{n}"),
            None => String::new(),
        };
        let mut world = World::new(w, &faults);
        for q in 1..=3 {
            world.add(q, prio(q as i64));
        }
        let mut submitted: HashMap<u64, u64> = HashMap::new();
        for (op, q, n) in ops {
            match op {
                0 | 1 => *submitted.entry(q).or_default() += world.submit(q, n),
                _ => world.gpu(q, n),
            }
            for q in 1..=3 {
                let h = hw_queue(q);
                proptest::prop_assert!(world.hw.write_index(&h) - world.hw.read_index(&h) <= SLOTS);
            }
        }
        // Whatever the application left behind completes without it: no doorbell, no poll.
        gpu_until_idle(&mut world, &[1, 2, 3]);
        for q in 1..=3 {
            world.check_executed(q, *submitted.get(&q).unwrap_or(&0));
        }
        for q in 1..=3 {
            proptest::prop_assert!(world.sched.close(QueueId(q), &world.mem, 0));
            let mut guard = 0;
            while world.sched.drain_step(QueueId(q), &world.mem, &world.hw) == Drain::NeedRoom {
                for r in 1..=3 { world.gpu(r, 4); }
                guard += 1;
                proptest::prop_assert!(guard < 1000);
            }
        }
        for q in 1..=3 {
            world.gpu(q, 1000);
            world.check_executed(q, *submitted.get(&q).unwrap_or(&0));
        }
    }
}

#[test]
fn each_queue_counts_its_dispatches_rounds_of_work_groups_on_the_parts_of_the_gpu() {
    use crate::path::packet_width::Occupancy;
    // 480 work-groups of 256 work-items with 10 KiB of LDS: six to a CU.
    let wide = |_, _| {
        let mut b = [0u8; PACKET_SIZE];
        b[0] = 2;
        b[4..6].copy_from_slice(&256u16.to_le_bytes());
        b[6..8].copy_from_slice(&1u16.to_le_bytes());
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        b[12..16].copy_from_slice(&(480u32 * 256).to_le_bytes());
        b[16..20].copy_from_slice(&1u32.to_le_bytes());
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        b[28..32].copy_from_slice(&10_240u32.to_le_bytes());
        Packet::from_bytes(b)
    };
    let mut w = World::new(8, "");
    let board = Arc::new(FakeBoard::default());
    w.sched.attach_board(board.clone());
    w.add(1, prio(0));
    // Before the GPU's occupancy is known nothing is counted.
    assert_eq!(w.submit_made(1, 1, wide), 1);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().rounds, [0; 8]);
    w.sched.set_occupancy(Occupancy::gfx9(80));
    assert_eq!(w.submit_made(1, 2, wide), 2);
    // Barriers and other packets need no CUs.
    assert_eq!(w.submit_made(1, 1, |_, _| Packet::tracking_barrier(7)), 1);
    let per = [8u64, 4, 3, 2, 2, 2, 2, 1];
    let two = per.map(|r| 2 * r);
    assert_eq!(w.sched.stats(QueueId(1), 0).unwrap().rounds, two);
    // Published with the other counters (at least every publishing period).
    w.sched.pass(&w.mem, &w.hw, PUBLISH_PERIOD_NS);
    assert_eq!(board.last(1).rounds, two, "published on the board");
}
