//! The process memory that shadow and hardware queues live in: the one place libxhsa reads and
//! writes queue rings and indices through raw addresses.
//!
//! Every address passed here comes from a queue libxhsa knows: a shadow queue it allocated
//! (alive until libxhsa frees it in `hsa_queue_destroy`) or the hardware queue behind one (alive
//! until libxhsa destroys it, after the shadow). Indices are 8-byte aligned fields of
//! `amd_queue_t`; ring slots are 64-byte aligned packets.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use crate::path::aql_ring::QueueMemory;
use crate::path::packet::{Packet, PACKET_SIZE};

/// The process's own memory (see the module doc for which addresses it is given).
pub(crate) struct ProcessMemory;

/// The 64-bit index at `addr` (a dispatch-id field of an `amd_queue_t` libxhsa knows).
pub(crate) fn index(addr: u64) -> &'static AtomicU64 {
    // SAFETY: `addr` is an 8-byte aligned u64 field of a live amd_queue_t (module doc); the
    // application, the runtime and the GPU access it only atomically, as AtomicU64 does.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }
}

impl QueueMemory for ProcessMemory {
    fn load_u64(&self, addr: u64) -> u64 {
        index(addr).load(Ordering::Acquire)
    }

    fn store_u64(&self, addr: u64, value: u64) {
        index(addr).store(value, Ordering::Release);
    }

    fn read_packet(&self, addr: u64) -> Packet {
        // The header first, with acquire: the body the producer wrote before publishing the
        // header (release) is then visible.
        // SAFETY: `addr` is a 64-byte aligned slot of a live ring (module doc); the header is
        // accessed atomically by every party.
        let header = unsafe { AtomicU16::from_ptr(addr as *mut u16) }.load(Ordering::Acquire);
        let mut bytes = [0u8; PACKET_SIZE];
        // SAFETY: the slot is PACKET_SIZE readable bytes; a published slot's body is not written
        // again until libxhsa frees the slot, so the copy is not torn.
        unsafe { std::ptr::copy_nonoverlapping((addr + 2) as *const u8, bytes.as_mut_ptr().add(2), PACKET_SIZE - 2) };
        bytes[..2].copy_from_slice(&header.to_le_bytes());
        Packet::from_bytes(bytes)
    }

    fn write_body(&self, addr: u64, packet: &Packet) {
        // SAFETY: a slot libxhsa reserved in a live ring (module doc); its header still says
        // INVALID, so the packet processor does not read the body being written.
        unsafe { std::ptr::copy_nonoverlapping(packet.as_bytes().as_ptr().add(2), (addr + 2) as *mut u8, PACKET_SIZE - 2) };
    }

    fn store_header(&self, addr: u64, header: u16) {
        // SAFETY: the header word of a live slot (module doc), accessed atomically by everyone.
        unsafe { AtomicU16::from_ptr(addr as *mut u16) }.store(header, Ordering::Release);
    }
}

/// Fills `len` bytes at `addr` with INVALID packets (the initial state of a ring).
pub(crate) fn invalidate_ring(addr: u64, slots: u64) {
    let invalid = Packet::invalid();
    for i in 0..slots {
        let slot = addr + i * PACKET_SIZE as u64;
        // SAFETY: `slots` packets at `addr` were just allocated by libxhsa and nobody else
        // knows them yet.
        unsafe { std::ptr::copy_nonoverlapping(invalid.as_bytes().as_ptr(), slot as *mut u8, PACKET_SIZE) };
    }
}

/// Copies `len` bytes from `from` to `to` (the hardware `amd_queue_t` into a new shadow's).
pub(crate) fn copy(from: u64, to: u64, len: usize) {
    // SAFETY: both are live allocations of at least `len` bytes that do not overlap: the
    // runtime's queue and libxhsa's fresh shadow.
    unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, len) };
}

/// Reads the `u64` at `addr` (a field of a live queue, not concurrently written).
pub(crate) fn read_u64(addr: u64) -> u64 {
    // SAFETY: an 8-byte aligned field of a live queue structure.
    unsafe { (addr as *const u64).read_volatile() }
}

/// Writes the `u64` at `addr` (a field of libxhsa's own shadow before it is handed out).
pub(crate) fn write_u64(addr: u64, value: u64) {
    // SAFETY: an 8-byte aligned field of a shadow libxhsa allocated and has not published yet.
    unsafe { (addr as *mut u64).write_volatile(value) }
}

/// Reads the `u32` at `addr`.
pub(crate) fn read_u32(addr: u64) -> u32 {
    // SAFETY: a 4-byte aligned field of a live queue structure.
    unsafe { (addr as *const u32).read_volatile() }
}

/// Writes the `u32` at `addr` (a field of a shadow libxhsa allocated).
pub(crate) fn write_u32(addr: u64, value: u32) {
    // SAFETY: a 4-byte aligned field of a shadow libxhsa allocated.
    unsafe { (addr as *mut u32).write_volatile(value) }
}
