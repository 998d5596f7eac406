//! Processes sharing a board: the level-1 window holds across process boundaries, and a dead
//! process's entries stop throttling once cleaned up. Property-tested over the pure board
//! functions of `xhsa_board::layout` and this crate's [`Partition`].
#![cfg(test)]

use crate::path::packet::Packet;
use crate::path::partition::{CuMask, Partition};
use proptest::prelude::*;
use xhsa_board::layout::{claim, cleanup_stale, publish, summarize, Owner, Slot};
use xhsa_model::contention::Contention;
use xhsa_model::ids::{PartitionId, QueueId};
use xhsa_model::priority::{Level, Priority};
use xhsa_model::window_size::WindowSize;

const PROCS: usize = 3;
const QUEUES: u64 = 2;

struct Proc {
    owner: Owner,
    part: Partition,
    slots: Vec<(QueueId, usize)>,
    alive: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Push(usize, u64, u8),
    Schedule(usize),
    Complete(usize, u64, u8),
    Kill(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PROCS, 0..QUEUES, 1u8..5).prop_map(|(p, q, n)| Op::Push(p, q, n)),
        4 => (0..PROCS).prop_map(Op::Schedule),
        3 => (0..PROCS, 0..QUEUES, 1u8..4).prop_map(|(p, q, n)| Op::Complete(p, q, n)),
        1 => (0..PROCS).prop_map(Op::Kill),
    ]
}

fn publish_all(board: &mut [Slot], proc: &Proc) {
    let c = Contention::external(summarize(board, Some(proc.owner), 0).highest_with_work);
    for &(q, slot) in &proc.slots {
        let stats = proc.part.stats(q, 0, &c).unwrap();
        assert!(publish(board, slot, proc.owner, &stats));
    }
}

/// Highest priority with work among live processes' queues, from their true state.
fn true_highest(procs: &[Proc]) -> Option<Priority> {
    procs.iter().filter(|p| p.alive).filter_map(|p| p.part.highest_with_work()).max()
}

proptest! {
    #[test]
    fn window_holds_across_processes(
        w in 1u64..4,
        levels in proptest::collection::vec(-2i64..3, PROCS * QUEUES as usize),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let window = WindowSize::new(w).unwrap();
        let mut board = vec![Slot::default(); 8];
        let mut procs: Vec<Proc> = (0..PROCS).map(|i| {
            let owner = Owner { pid: 1000 + i as u32, token: 1 };
            let mut part = Partition::new(PartitionId(0), CuMask::all(80), window);
            let mut slots = Vec::new();
            for q in 0..QUEUES {
                let prio = Priority::at_level(Level::new(levels[i * QUEUES as usize + q as usize]).unwrap());
                part.add_queue(QueueId(q), prio).unwrap();
                slots.push((QueueId(q), claim(&mut board, owner, PartitionId(0), QueueId(q), prio).unwrap()));
            }
            Proc { owner, part, slots, alive: true }
        }).collect();
        let mut seq = 0u64;
        for op in ops {
            match op {
                Op::Push(p, q, n) if procs[p].alive => {
                    for _ in 0..n {
                        seq += 1;
                        let mut b = [0u8; 64];
                        b[8..16].copy_from_slice(&seq.to_le_bytes());
                        procs[p].part.push(QueueId(q), Packet::from_bytes(b)).unwrap();
                    }
                    publish_all(&mut board, &procs[p]);
                }
                Op::Schedule(p) if procs[p].alive => {
                    let view = summarize(&board, Some(procs[p].owner), 0).contention();
                    // The board view plus the local state is the truth about the GPU.
                    prop_assert_eq!(
                        view.external_highest.max(procs[p].part.highest_with_work()),
                        true_highest(&procs)
                    );
                    while let Some(f) = procs[p].part.next_forwardable(&view) {
                        let prio = procs[p].part.priority(f.queue).unwrap();
                        if true_highest(&procs).is_some_and(|h| h > prio) {
                            let in_flight = procs[p].part.in_flight(f.queue).unwrap();
                            prop_assert!(in_flight <= w, "{} in flight under higher work elsewhere", in_flight);
                        }
                    }
                    // Whatever stays pending is held by higher work somewhere.
                    for q in 0..QUEUES {
                        let q = QueueId(q);
                        if procs[p].part.pending(q).unwrap() > 0 {
                            let prio = procs[p].part.priority(q).unwrap();
                            prop_assert!(true_highest(&procs).is_some_and(|h| h > prio));
                        }
                    }
                    publish_all(&mut board, &procs[p]);
                }
                Op::Complete(p, q, n) if procs[p].alive => {
                    let n = (n as u64).min(procs[p].part.in_flight(QueueId(q)).unwrap());
                    procs[p].part.complete(QueueId(q), n).unwrap();
                    publish_all(&mut board, &procs[p]);
                }
                Op::Kill(p) => {
                    procs[p].alive = false;
                    let live: Vec<Owner> = procs.iter().filter(|p| p.alive).map(|p| p.owner).collect();
                    cleanup_stale(&mut board, |o| live.contains(&o));
                    prop_assert!(board.iter().all(|s| !s.is_live() || live.contains(&s.owner())));
                }
                _ => {}
            }
        }
    }
}
