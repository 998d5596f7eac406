//! The CP driven by hand over fake memory: packets in, completions out, no runtime.

use std::sync::Arc;

use super::{aql, signal, Cp, Env};
use crate::config::Config;
use crate::kfd::events::Events;
use crate::kfd::memory::{MemKind, Memory, Range};
use crate::sys::devmem::{fake::FakeMemory, DeviceMemory};

const AMD_QUEUE: u64 = 0x10_0000;
const RING: u64 = 0x20_0000;
const SLOTS: u64 = 16;
const SIG: u64 = 0x30_0000;
const INACTIVE: u64 = 0x30_1000;

struct Rig {
    cp: Cp,
    mem: FakeMemory,
    events: Events,
    memory: Memory,
    next: u64,
}

impl Rig {
    fn new() -> Rig {
        let memory = Memory::default();
        memory.insert(Range { host: 0, start: 0x10_0000, size: 0x30_0000, kind: MemKind::System, node: 0, flags: 0, mapped_nodes: vec![1], user_data: 0, handle: 1 });
        let mem = FakeMemory::default();
        mem.store_u64(AMD_QUEUE + aql::QUEUE_INACTIVE_SIGNAL, INACTIVE);
        mem.write(AMD_QUEUE + aql::QUEUE_PROPERTIES, &aql::PROFILING.to_le_bytes());
        for i in 0..SLOTS {
            mem.store_u16(RING + 64 * i, u16::from(aql::TYPE_INVALID));
        }
        let mut cp = Cp::new(Arc::new(Config::default()), None);
        cp.add_aql(1, RING, SLOTS * 64, AMD_QUEUE + aql::READ_DISPATCH_ID, 7);
        Rig { cp, mem, events: Events::default(), memory, next: 0 }
    }

    fn run(&mut self, now: u64) -> Option<u64> {
        let clock = move || now;
        let to_host = |t| t;
        let env = Env { mem: &self.mem, events: &self.events, memory: &self.memory, gpu_id: 1, clock: &clock, to_host: &to_host };
        self.cp.run(&env, now)
    }

    /// Writes a packet (body, then header) and bumps the write index.
    fn push(&mut self, header: u16, body: &[(u64, u64)], completion: u64) {
        let slot = RING + 64 * (self.next % SLOTS);
        for &(off, v) in body {
            self.mem.store_u64(slot + off, v);
        }
        self.mem.store_u64(slot + 56, completion);
        self.mem.store_u16(slot, header);
        self.next += 1;
        self.mem.store_u64(AMD_QUEUE + aql::WRITE_DISPATCH_ID, self.next);
    }

    /// A one-dimensional dispatch of 640 workgroups of 64 work-items (one round on 80 CUs).
    fn kernel(&mut self, barrier: bool, completion: u64) {
        let slot = RING + 64 * (self.next % SLOTS);
        for (off, v) in [(2u64, 1u16), (4, 64), (6, 1), (8, 1)] {
            self.mem.write(slot + off, &v.to_le_bytes());
        }
        for (off, v) in [(12u64, 640u32), (16, 1), (20, 1)] {
            self.mem.write(slot + off, &v.to_le_bytes());
        }
        let header = u16::from(aql::TYPE_KERNEL_DISPATCH) | u16::from(barrier) << 8;
        self.push(header, &[(32, 0x9999)], completion);
    }

    fn read_index(&self) -> u64 {
        self.mem.load_u64(AMD_QUEUE + aql::READ_DISPATCH_ID)
    }
}

#[test]
fn a_kernel_completes_after_its_modelled_time_with_timestamps() {
    let mut r = Rig::new();
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.kernel(true, SIG);
    // One round of 640 single-wave workgroups on 80 CUs: the default workgroup time.
    let wg = Config::default().timing.default_wg_ns;
    let next = r.run(1_000).expect("a completion is pending");
    assert_eq!(next, 1_000 + wg);
    assert_eq!(signal::value(&r.mem, SIG), 1);
    assert_eq!(r.read_index(), 0);
    assert_eq!(r.run(next), None);
    assert_eq!(signal::value(&r.mem, SIG), 0);
    assert_eq!(r.read_index(), 1);
    assert_eq!(r.mem.load_u64(SIG + signal::START_TS), 1_000);
    assert_eq!(r.mem.load_u64(SIG + signal::END_TS), 1_000 + wg);
    // The consumed slot is invalid again.
    assert_eq!(r.mem.read_u32(RING) as u8, aql::TYPE_INVALID);
}

/// The ring wraps while its oldest packets are still in flight: the application has reserved
/// the next id (write index one ahead) but waits for its slot, which still holds the packet
/// `SLOTS` ids earlier with a valid header. A CP bounded by the write index alone would run
/// that old packet a second time and move the read index past the application's id, which
/// then waits forever (seen as a hang of the dispatch bench); each packet must run once.
#[test]
fn a_wrapped_slot_still_holding_an_older_packet_is_not_fetched_again() {
    let mut r = Rig::new();
    r.mem.store_u64(SIG + signal::VALUE, 1000);
    for _ in 0..SLOTS {
        r.kernel(false, SIG);
    }
    r.mem.store_u64(AMD_QUEUE + aql::WRITE_DISPATCH_ID, SLOTS + 1);
    let mut t = 0;
    while let Some(next) = r.run(t) {
        t = next;
    }
    assert_eq!(signal::value(&r.mem, SIG), 1000 - SLOTS as i64, "each packet completed exactly once");
    assert_eq!(r.read_index(), SLOTS, "the read index stops where the application's packets end");
}

#[test]
fn a_barrier_and_waits_for_its_dependency() {
    let mut r = Rig::new();
    let dep = SIG + 0x100;
    r.mem.store_u64(dep + signal::VALUE, 1);
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.push(u16::from(aql::TYPE_BARRIER_AND), &[(8, dep)], SIG);
    let poll = r.run(10).expect("blocked barrier re-checks later");
    assert!(poll > 10);
    assert_eq!(signal::value(&r.mem, SIG), 1);
    r.mem.store_u64(dep + signal::VALUE, 0);
    r.run(poll);
    assert_eq!(signal::value(&r.mem, SIG), 0);
    assert_eq!(r.read_index(), 1);
}

#[test]
fn the_barrier_bit_orders_packets_and_completions_stay_in_order() {
    let mut r = Rig::new();
    let (a, b) = (SIG, SIG + 0x100);
    r.mem.store_u64(a + signal::VALUE, 1);
    r.mem.store_u64(b + signal::VALUE, 1);
    r.kernel(false, a);
    r.push(u16::from(aql::TYPE_BARRIER_AND) | 1 << 8, &[], b);
    let t = r.run(0).unwrap();
    // The barrier packet waits for the kernel (barrier bit), then completes right after it.
    assert_eq!(signal::value(&r.mem, b), 1);
    r.run(t);
    assert_eq!((signal::value(&r.mem, a), signal::value(&r.mem, b)), (0, 0));
    assert_eq!(r.mem.load_u64(b + signal::END_TS), t);
}

#[test]
fn a_malformed_packet_stops_the_queue_with_the_code_rocr_decodes() {
    let mut r = Rig::new();
    r.mem.store_u64(INACTIVE + signal::VALUE, 0);
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.push(7, &[], 0);
    r.kernel(false, SIG);
    r.run(0);
    assert!(r.cp.failed(1));
    assert_eq!(signal::value(&r.mem, INACTIVE), aql::error::INVALID_PACKET);
    assert_eq!(r.read_index(), 0, "the faulting packet is not consumed");
    assert_eq!(r.run(1_000_000), None);
    assert_eq!(signal::value(&r.mem, SIG), 1, "nothing after the bad packet runs");
}
