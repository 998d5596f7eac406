//! The packet movement of a shadow queue, as safe logic over an abstract queue memory: taking
//! the packets an application published into the shadow ring it sees (at its doorbell store),
//! and writing packets into the hardware queue libxhsa owns (body first, header last).
//!
//! The rules (docs/libxhsa-shadow-queues.md): packets are copied unchanged, in order, exactly
//! once; a slot whose header is still INVALID is not yet published and stops the intake; a
//! taken slot is set back to INVALID before the shadow read index moves past it, so the
//! application may reuse it; libxhsa takes no more than it has room to hold, so a full libxhsa
//! leaves the read index where it is and the application's own "queue full" wait applies; the
//! hardware ring is never overfilled.
#![forbid(unsafe_code)]

use crate::path::packet::{Packet, PacketType, PACKET_SIZE};

/// Offsets in `amd_queue_t` (amd_hsa_queue.h).
pub const WRITE_DISPATCH_ID: u64 = 56;
pub const READ_DISPATCH_ID: u64 = 128;

/// The memory a shadow queue and a hardware queue live in (the process's own, at the edge).
pub trait QueueMemory {
    /// Acquire load of a 64-bit index.
    fn load_u64(&self, addr: u64) -> u64;
    /// Release store of a 64-bit index.
    fn store_u64(&self, addr: u64, value: u64);
    fn read_packet(&self, addr: u64) -> Packet;
    /// Writes a packet's bytes 2..64 (all but the header).
    fn write_body(&self, addr: u64, packet: &Packet);
    /// Release store of a packet's 16-bit header (publishes the packet).
    fn store_header(&self, addr: u64, header: u16);
}

/// A ring of AQL packets with its `amd_queue_t` (the shadow the application sees, or the
/// hardware queue libxhsa owns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AqlRing {
    pub base: u64,
    /// Packets in the ring (a power of two).
    pub slots: u64,
    /// Address of the `amd_queue_t`.
    pub amd_queue: u64,
}

impl AqlRing {
    pub fn slot(&self, id: u64) -> u64 {
        self.base + (id % self.slots) * PACKET_SIZE as u64
    }
}

/// INVALID with the other header bits cleared.
fn invalid_header() -> u16 {
    u16::from(PacketType::Invalid.to_raw())
}

/// Takes the published packets of `shadow` from its read index on, at most `room` of them:
/// copies each, sets its slot back to INVALID and then publishes the new read index. Returns
/// the packets in queue order.
pub fn intake(mem: &dyn QueueMemory, shadow: &AqlRing, room: usize) -> Vec<Packet> {
    intake_until(mem, shadow, room, &|_| false)
}

/// [`intake`], stopping before the first packet `stop` holds back: it and everything after it
/// stay in the shadow ring, in order, for a later intake.
pub fn intake_until(
    mem: &dyn QueueMemory,
    shadow: &AqlRing,
    room: usize,
    stop: &dyn Fn(&Packet) -> bool,
) -> Vec<Packet> {
    let read = mem.load_u64(shadow.amd_queue + READ_DISPATCH_ID);
    let write = mem.load_u64(shadow.amd_queue + WRITE_DISPATCH_ID);
    let mut out = Vec::new();
    let mut id = read;
    while id < write && out.len() < room {
        let slot = shadow.slot(id);
        let p = mem.read_packet(slot);
        if p.packet_type() == PacketType::Invalid {
            break; // reserved but not yet published
        }
        if stop(&p) {
            break;
        }
        out.push(p);
        mem.store_header(slot, invalid_header());
        id += 1;
    }
    if id != read {
        mem.store_u64(shadow.amd_queue + READ_DISPATCH_ID, id);
    }
    out
}

/// Free slots of a hardware ring whose producer index libxhsa owns (`next_write`).
pub fn hw_room(mem: &dyn QueueMemory, hw: &AqlRing, next_write: u64) -> u64 {
    let read = mem.load_u64(hw.amd_queue + READ_DISPATCH_ID);
    hw.slots - (next_write - read).min(hw.slots)
}

/// Writes `packets` into the hardware ring from index `next_write` on (the caller checked
/// [`hw_room`]), each body first and header last, advances the ring's write index and returns
/// the index of the last packet (the doorbell value), or `None` when there was nothing to write.
pub fn forward(
    mem: &dyn QueueMemory,
    hw: &AqlRing,
    next_write: &mut u64,
    packets: &[Packet],
) -> Option<u64> {
    if packets.is_empty() {
        return None;
    }
    let first = *next_write;
    mem.store_u64(hw.amd_queue + WRITE_DISPATCH_ID, first + packets.len() as u64);
    for (i, p) in packets.iter().enumerate() {
        let slot = hw.slot(first + i as u64);
        mem.write_body(slot, p);
        mem.store_header(slot, p.header());
    }
    *next_write = first + packets.len() as u64;
    Some(*next_write - 1)
}

/// Writes `packets` into slots `first..` of a hardware ring whose write index the caller already
/// moved past them (libxhsa reserves slots through ROCr's `add_write_index`, so whatever wraps the
/// hardware queue stays consistent): each body first, then its header with release.
pub fn write_reserved(mem: &dyn QueueMemory, hw: &AqlRing, first: u64, packets: &[Packet]) {
    for (i, p) in packets.iter().enumerate() {
        let slot = hw.slot(first + i as u64);
        mem.write_body(slot, p);
        mem.store_header(slot, p.header());
    }
}

/// Whether the packet at `ring`'s read index is published (reserved by the write index and its
/// header valid): what [`intake`] would take next.
pub fn next_published(mem: &dyn QueueMemory, ring: &AqlRing) -> bool {
    let read = mem.load_u64(ring.amd_queue + READ_DISPATCH_ID);
    read < mem.load_u64(ring.amd_queue + WRITE_DISPATCH_ID)
        && mem.read_packet(ring.slot(read)).packet_type() != PacketType::Invalid
}

/// Packets published in `ring` and not yet taken (its write index is ahead of its read index).
pub fn unconsumed(mem: &dyn QueueMemory, ring: &AqlRing) -> u64 {
    let read = mem.load_u64(ring.amd_queue + READ_DISPATCH_ID);
    let write = mem.load_u64(ring.amd_queue + WRITE_DISPATCH_ID);
    write.saturating_sub(read)
}

/// Process memory as a byte map, for the tests of this module and of [`crate::path::scheduler`].
#[cfg(test)]
pub(crate) mod fake {
    use super::QueueMemory;
    use crate::path::packet::{Packet, PACKET_SIZE};
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[derive(Default)]
    pub(crate) struct Fake(RefCell<HashMap<u64, u8>>, RefCell<Option<u64>>);

    impl Fake {
        /// The next `write_body` at `addr` panics (once): a failure in the middle of a write.
        pub(crate) fn panic_on_write_at(&self, addr: u64) {
            *self.1.borrow_mut() = Some(addr);
        }
        pub(crate) fn put(&self, addr: u64, bytes: &[u8]) {
            let mut m = self.0.borrow_mut();
            for (i, b) in bytes.iter().enumerate() {
                m.insert(addr + i as u64, *b);
            }
        }
        pub(crate) fn get(&self, addr: u64, n: usize) -> Vec<u8> {
            let m = self.0.borrow();
            (0..n).map(|i| *m.get(&(addr + i as u64)).unwrap_or(&0)).collect()
        }
    }

    impl QueueMemory for Fake {
        fn load_u64(&self, addr: u64) -> u64 {
            u64::from_le_bytes(self.get(addr, 8).try_into().unwrap())
        }
        fn store_u64(&self, addr: u64, value: u64) {
            self.put(addr, &value.to_le_bytes());
        }
        fn read_packet(&self, addr: u64) -> Packet {
            Packet::from_bytes(self.get(addr, PACKET_SIZE).try_into().unwrap())
        }
        fn write_body(&self, addr: u64, packet: &Packet) {
            if *self.1.borrow() == Some(addr) {
                self.1.borrow_mut().take();
                panic!("fake memory: write at {addr:#x} fails");
            }
            self.put(addr + 2, &packet.as_bytes()[2..]);
        }
        fn store_header(&self, addr: u64, header: u16) {
            self.put(addr, &header.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::Fake;
    use super::*;
    use crate::path::packet::FenceScope;

    const SHADOW: AqlRing = AqlRing { base: 0x10_000, slots: 4, amd_queue: 0x1000 };
    const HW: AqlRing = AqlRing { base: 0x20_000, slots: 4, amd_queue: 0x2000 };

    fn barrier(signal: u64) -> Packet {
        Packet::barrier_and([0; 5], signal, true, FenceScope::System, FenceScope::System)
    }

    fn publish(m: &Fake, id: u64, p: &Packet) {
        m.put(SHADOW.slot(id) + 2, &p.as_bytes()[2..]);
        m.store_header(SHADOW.slot(id), p.header());
        m.store_u64(
            SHADOW.amd_queue + WRITE_DISPATCH_ID,
            m.load_u64(SHADOW.amd_queue + WRITE_DISPATCH_ID).max(id + 1),
        );
    }

    fn fresh() -> Fake {
        let m = Fake::default();
        for id in 0..4 {
            m.store_header(SHADOW.slot(id), invalid_header());
        }
        m
    }

    #[test]
    fn intake_takes_published_packets_in_order_and_frees_their_slots() {
        let m = fresh();
        publish(&m, 0, &barrier(0xa));
        publish(&m, 1, &barrier(0xb));
        let got = intake(&m, &SHADOW, 16);
        assert_eq!(got.iter().map(Packet::completion_signal).collect::<Vec<_>>(), vec![0xa, 0xb]);
        assert_eq!(m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID), 2);
        assert_eq!(m.read_packet(SHADOW.slot(0)).packet_type(), PacketType::Invalid);
        // Nothing new: nothing taken, the read index stays.
        assert!(intake(&m, &SHADOW, 16).is_empty());
        assert_eq!(m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID), 2);
    }

    #[test]
    fn a_packet_held_back_stays_in_the_shadow_ring_with_everything_after_it() {
        let m = fresh();
        for (i, s) in [0xa, 0xb, 0xc].iter().enumerate() {
            publish(&m, i as u64, &barrier(*s));
        }
        let got = intake_until(&m, &SHADOW, 16, &|p| p.completion_signal() == 0xb);
        assert_eq!(got.iter().map(Packet::completion_signal).collect::<Vec<_>>(), vec![0xa]);
        assert_eq!(m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID), 1);
        assert_eq!(
            intake(&m, &SHADOW, 16).iter().map(Packet::completion_signal).collect::<Vec<_>>(),
            vec![0xb, 0xc],
            "taken later, in order"
        );
    }

    #[test]
    fn a_reserved_but_unpublished_slot_stops_the_intake() {
        let m = fresh();
        publish(&m, 0, &barrier(0xa));
        // Slot 1 reserved (write index 3) but not published; slot 2 published.
        m.store_u64(SHADOW.amd_queue + WRITE_DISPATCH_ID, 3);
        m.put(SHADOW.slot(2), barrier(0xc).as_bytes());
        let got = intake(&m, &SHADOW, 16);
        assert_eq!(got.len(), 1);
        assert_eq!(m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID), 1);
    }

    #[test]
    fn a_full_libxhsa_leaves_the_rest_to_the_application() {
        let m = fresh();
        for id in 0..3 {
            publish(&m, id, &barrier(0x10 + id));
        }
        assert_eq!(intake(&m, &SHADOW, 2).len(), 2);
        assert_eq!(m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID), 2);
        assert_eq!(intake(&m, &SHADOW, 2)[0].completion_signal(), 0x12);
    }

    #[test]
    fn forwarding_writes_unchanged_packets_and_respects_the_hardware_ring() {
        let m = Fake::default();
        let mut next = 0;
        assert_eq!(hw_room(&m, &HW, next), 4);
        let ps: Vec<Packet> = (0..3).map(|i| barrier(0x100 + i)).collect();
        assert_eq!(forward(&m, &HW, &mut next, &ps), Some(2));
        assert_eq!(m.load_u64(HW.amd_queue + WRITE_DISPATCH_ID), 3);
        assert_eq!(hw_room(&m, &HW, next), 1);
        for (i, p) in ps.iter().enumerate() {
            assert_eq!(m.read_packet(HW.slot(i as u64)), *p);
        }
        // The device consumed two: room again, and slots wrap.
        m.store_u64(HW.amd_queue + READ_DISPATCH_ID, 2);
        assert_eq!(hw_room(&m, &HW, next), 3);
        assert_eq!(forward(&m, &HW, &mut next, &[barrier(0x200)]), Some(3));
        assert_eq!(forward(&m, &HW, &mut next, &[]), None);
    }

    #[test]
    fn write_reserved_leaves_the_write_index_alone() {
        let m = Fake::default();
        let ps: Vec<Packet> = (0..3).map(|i| barrier(0x300 + i)).collect();
        write_reserved(&m, &HW, 3, &ps);
        assert_eq!(m.load_u64(HW.amd_queue + WRITE_DISPATCH_ID), 0);
        assert_eq!(m.read_packet(HW.slot(3)), ps[0]);
        assert_eq!(m.read_packet(HW.slot(0)), ps[1], "wraps");
        assert_eq!(unconsumed(&m, &HW), 0);
        m.store_u64(HW.amd_queue + WRITE_DISPATCH_ID, 5);
        m.store_u64(HW.amd_queue + READ_DISPATCH_ID, 2);
        assert_eq!(unconsumed(&m, &HW), 3);
    }

    proptest::proptest! {
        /// However publishing and intake interleave (and however little room libxhsa has), the
        /// packets come out exactly once, in order, and the ring never loses a slot.
        #[test]
        fn intake_never_loses_duplicates_or_reorders(ops in proptest::collection::vec((0u8..3, 0usize..4), 1..200)) {
            let m = fresh();
            let mut published = 0u64;
            let mut taken = Vec::new();
            for (op, room) in ops {
                let read = m.load_u64(SHADOW.amd_queue + READ_DISPATCH_ID);
                if op < 2 && published - read < SHADOW.slots {
                    publish(&m, published, &barrier(published));
                    published += 1;
                } else {
                    taken.extend(intake(&m, &SHADOW, room).iter().map(Packet::completion_signal));
                }
            }
            taken.extend(intake(&m, &SHADOW, usize::MAX).iter().map(Packet::completion_signal));
            proptest::prop_assert_eq!(taken, (0..published).collect::<Vec<_>>());
        }
    }
}
