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
/// Kernel descriptors (their code 256 bytes after each): `s_endpgm` only, and a kernel that
/// stores its workgroup id through the pointer in its kernarg.
const KERNEL: u64 = 0x38_0000;
const STORE_KERNEL: u64 = 0x38_1000;
const ILLEGAL_KERNEL: u64 = 0x38_2000;
const KERNARG: u64 = 0x39_0000;
const OUT: u64 = 0x39_1000;
/// The queue's doorbell (host memory outside the device's ranges, as the doorbell page is).
const DOORBELL: u64 = 0x3a_0000;

/// A gfx90a kernel descriptor: kernarg pointer in s[0:1], workgroup id x in s2, code at +256.
fn put_kernel(mem: &FakeMemory, at: u64, code: &[u32]) {
    let mut kd = [0u8; 64];
    kd[16..24].copy_from_slice(&256i64.to_le_bytes());
    kd[52..56].copy_from_slice(&(2u32 << 1 | 1 << 7).to_le_bytes());
    kd[56..58].copy_from_slice(&(1u16 << 3).to_le_bytes());
    mem.write(at, &kd);
    let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
    mem.write(at + 256, &bytes);
}

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
        memory.insert(Range {
            host: 0,
            start: 0x10_0000,
            size: 0x30_0000,
            kind: MemKind::System,
            node: 0,
            flags: 0,
            mapped_nodes: vec![1],
            user_data: 0,
            handle: 1,
        });
        let mem = FakeMemory::default();
        mem.store_u64(AMD_QUEUE + aql::QUEUE_INACTIVE_SIGNAL, INACTIVE);
        mem.write(AMD_QUEUE + aql::QUEUE_PROPERTIES, &aql::PROFILING.to_le_bytes());
        for i in 0..SLOTS {
            mem.store_u16(RING + 64 * i, u16::from(aql::TYPE_INVALID));
        }
        put_kernel(&mem, KERNEL, &[0xBF81_0000]);
        // s_load_dwordx2 s[4:5], s[0:1], 0; s_waitcnt lgkmcnt(0); v_mov_b32 v1, s2;
        // v_mov_b32 v2, 0; global_store_dword v2, v1, s[4:5]; s_endpgm
        put_kernel(
            &mem,
            STORE_KERNEL,
            &[
                0xC006_0100,
                0,
                0xBF8C_C07F,
                0x7E02_0202,
                0x7E04_0280,
                0xDC70_8000,
                0x0004_0102,
                0xBF81_0000,
            ],
        );
        // s_rfe_b64 s[0:1] (no trap handler to return from: not implemented); s_endpgm
        put_kernel(&mem, ILLEGAL_KERNEL, &[0xBE80_1F00, 0xBF81_0000]);
        mem.store_u64(KERNARG, OUT);
        mem.store_u64(DOORBELL, u64::MAX);
        let mut cp = Cp::new(Arc::new(Config::default()), None);
        cp.add_aql(1, RING, SLOTS * 64, AMD_QUEUE + aql::READ_DISPATCH_ID, DOORBELL, 7);
        Rig { cp, mem, events: Events::default(), memory, next: 0 }
    }

    fn run(&mut self, now: u64) -> Option<u64> {
        let clock = move || now;
        let to_host = |t| t;
        let env = Env {
            mem: &self.mem,
            events: &self.events,
            memory: &self.memory,
            gpu_id: 1,
            clock: &clock,
            to_host: &to_host,
            executor: None,
        };
        self.cp.run(&env, now)
    }

    /// Writes a packet (body, then header), bumps the write index and rings the doorbell.
    fn push(&mut self, header: u16, body: &[(u64, u64)], completion: u64) {
        self.write_packet(header, body, completion);
        self.ring();
    }

    /// Stores the id of the last packet written into the doorbell.
    fn ring(&mut self) {
        self.mem.store_u64(DOORBELL, self.next - 1);
    }

    /// Writes a packet (body, then header) and bumps the write index, without a doorbell ring.
    fn write_packet(&mut self, header: u16, body: &[(u64, u64)], completion: u64) {
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
        self.kernel_at(KERNEL, barrier, completion);
    }

    fn kernel_at(&mut self, object: u64, barrier: bool, completion: u64) {
        let slot = RING + 64 * (self.next % SLOTS);
        for (off, v) in [(2u64, 1u16), (4, 64), (6, 1), (8, 1)] {
            self.mem.write(slot + off, &v.to_le_bytes());
        }
        for (off, v) in [(12u64, 640u32), (16, 1), (20, 1)] {
            self.mem.write(slot + off, &v.to_le_bytes());
        }
        let header = u16::from(aql::TYPE_KERNEL_DISPATCH) | u16::from(barrier) << 8;
        self.push(header, &[(32, object), (40, KERNARG)], completion);
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
    // The doorbell announced the SLOTS packets only; a (re)map reads the write index itself,
    // which counts the reserved id too.
    r.cp.set_runnable(1, false);
    r.cp.set_runnable(1, true);
    let mut t = 0;
    while let Some(next) = r.run(t) {
        t = next;
    }
    assert_eq!(
        signal::value(&r.mem, SIG),
        1000 - SLOTS as i64,
        "each packet completed exactly once"
    );
    assert_eq!(r.read_index(), SLOTS, "the read index stops where the application's packets end");
}

/// The CP fetches what the doorbell announced, not what the write index counts: packets
/// written without a ring wait (a test can catch a missing ring) and a ring releases them.
#[test]
fn packets_wait_for_their_doorbell_ring() {
    let mut r = Rig::new();
    assert_eq!(r.run(0), None, "the creation's map read the write index: 0");
    r.mem.store_u64(SIG + signal::VALUE, 2);
    let header = u16::from(aql::TYPE_KERNEL_DISPATCH);
    r.kernel(false, SIG); // rung: id 0
    let slot = RING + 64;
    for (off, v) in [(2u64, 1u16), (4, 64), (6, 1), (8, 1)] {
        r.mem.write(slot + off, &v.to_le_bytes());
    }
    for (off, v) in [(12u64, 640u32), (16, 1), (20, 1)] {
        r.mem.write(slot + off, &v.to_le_bytes());
    }
    r.write_packet(header, &[(32, KERNEL), (40, KERNARG)], SIG); // id 1, not rung
    let mut t = 0;
    while let Some(next) = r.run(t) {
        t = next;
    }
    assert_eq!(signal::value(&r.mem, SIG), 1, "only the rung packet ran");
    assert_eq!(r.read_index(), 1);
    r.ring();
    while let Some(next) = r.run(t) {
        t = next;
    }
    assert_eq!(signal::value(&r.mem, SIG), 0, "the ring released the second packet");
    assert_eq!(r.read_index(), 2);
}

/// A queue mapped again (made runnable after being taken off) picks up the write index from
/// memory, as the CP does when a queue is mapped (at creation too): a packet written without a
/// ring runs then.
#[test]
fn a_remapped_queue_picks_up_the_write_index() {
    let mut r = Rig::new();
    assert_eq!(r.run(0), None, "the creation's map read the write index: 0");
    r.mem.store_u64(SIG + signal::VALUE, 1);
    let slot = RING;
    for (off, v) in [(2u64, 1u16), (4, 64), (6, 1), (8, 1)] {
        r.mem.write(slot + off, &v.to_le_bytes());
    }
    for (off, v) in [(12u64, 640u32), (16, 1), (20, 1)] {
        r.mem.write(slot + off, &v.to_le_bytes());
    }
    r.write_packet(u16::from(aql::TYPE_KERNEL_DISPATCH), &[(32, KERNEL), (40, KERNARG)], SIG);
    assert_eq!(r.run(0), None, "nothing announced, nothing to do");
    r.cp.set_runnable(1, false);
    r.cp.set_runnable(1, true);
    let mut t = 0;
    while let Some(next) = r.run(t) {
        t = next;
    }
    assert_eq!(signal::value(&r.mem, SIG), 0, "the remap picked up the unannounced packet");
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

#[test]
fn a_kernel_without_a_model_runs_its_code_when_it_completes() {
    let mut r = Rig::new();
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.mem.write(OUT, &u32::MAX.to_le_bytes());
    r.kernel_at(STORE_KERNEL, false, SIG);
    let next = r.run(0).expect("a completion is pending");
    assert_eq!(r.mem.read_u32(OUT), u32::MAX, "no memory effect before the kernel completes");
    r.run(next);
    assert_eq!(signal::value(&r.mem, SIG), 0);
    // 640 work-items in workgroups of 64 run in order; the last workgroup's id stays.
    assert_eq!(r.mem.read_u32(OUT), 9);
    assert!(!r.cp.failed(1));
}

#[test]
fn an_unimplemented_instruction_stops_the_queue_as_an_illegal_instruction() {
    let mut r = Rig::new();
    r.mem.store_u64(INACTIVE + signal::VALUE, 0);
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.kernel_at(ILLEGAL_KERNEL, false, SIG);
    let next = r.run(0).expect("a completion is pending");
    r.run(next);
    assert!(r.cp.failed(1));
    assert_eq!(signal::value(&r.mem, INACTIVE), aql::error::ILLEGAL_INSTRUCTION);
    assert_eq!(signal::value(&r.mem, SIG), 1, "the kernel never completes");
}

#[test]
fn a_profiled_kernel_stays_timing_only() {
    let mut cfg = Config::default();
    cfg.kernels.push(crate::config::KernelProfile {
        name: format!("kernel@{ILLEGAL_KERNEL:#x}"),
        wg_ns: 1000,
        util: 0.0,
        hbm_bytes_per_wg: 0,
    });
    let mut r = Rig::new();
    r.cp = Cp::new(Arc::new(cfg), None);
    r.cp.add_aql(1, RING, SLOTS * 64, AMD_QUEUE + aql::READ_DISPATCH_ID, DOORBELL, 7);
    r.mem.store_u64(SIG + signal::VALUE, 1);
    r.kernel_at(ILLEGAL_KERNEL, false, SIG);
    let next = r.run(0).expect("a completion is pending");
    r.run(next);
    assert!(!r.cp.failed(1), "a [[kernel]] profile is a timing stand-in: its code does not run");
    assert_eq!(signal::value(&r.mem, SIG), 0);
}
