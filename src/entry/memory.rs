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

/// The process's own memory, for the scheduler (see the module doc for which addresses it is
/// given). Its methods take plain addresses; the obligation that they are valid is taken once,
/// by whoever makes one ([`ProcessMemory::new`]).
pub(crate) struct ProcessMemory {
    _vouched: (),
}

impl ProcessMemory {
    /// Memory access for a scheduler.
    ///
    /// # Safety
    ///
    /// Every address the holder passes to the [`QueueMemory`] methods is a 64-byte aligned
    /// packet slot of a ring, or an 8-byte aligned index field of an `amd_queue_t`, of a queue
    /// libxhsa registered with that scheduler (a shadow it allocated, or the hardware queue
    /// behind one), which stays mapped for as long as the scheduler holds the queue.
    pub(crate) const unsafe fn new() -> ProcessMemory {
        ProcessMemory { _vouched: () }
    }
}

/// The 64-bit index at `addr`.
///
/// # Safety
///
/// `addr` is an 8-byte aligned `u64` field of an `amd_queue_t` that stays mapped for as long as
/// the reference is used, accessed by every party (the application, the runtime, the GPU) only
/// atomically.
pub(crate) unsafe fn index(addr: u64) -> &'static AtomicU64 {
    // SAFETY: the caller's obligation: aligned, mapped, only accessed atomically.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }
}

impl QueueMemory for ProcessMemory {
    fn load_u64(&self, addr: u64) -> u64 {
        // SAFETY: an index field of a registered queue (`ProcessMemory::new`).
        unsafe { index(addr) }.load(Ordering::Acquire)
    }

    fn store_u64(&self, addr: u64, value: u64) {
        // SAFETY: an index field of a registered queue (`ProcessMemory::new`).
        unsafe { index(addr) }.store(value, Ordering::Release);
    }

    fn read_packet(&self, addr: u64) -> Packet {
        // The header first, with acquire: the body the producer wrote before publishing the
        // header (release) is then visible.
        // SAFETY: `addr` is a 64-byte aligned slot of a registered ring (`ProcessMemory::new`);
        // the header is accessed atomically by every party.
        let header = unsafe { AtomicU16::from_ptr(addr as *mut u16) }.load(Ordering::Acquire);
        let mut bytes = [0u8; PACKET_SIZE];
        // SAFETY: the slot is PACKET_SIZE readable bytes; a published slot's body is not written
        // again until libxhsa frees the slot, so the copy is not torn.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (addr + 2) as *const u8,
                bytes.as_mut_ptr().add(2),
                PACKET_SIZE - 2,
            )
        };
        bytes[..2].copy_from_slice(&header.to_le_bytes());
        Packet::from_bytes(bytes)
    }

    fn write_body(&self, addr: u64, packet: &Packet) {
        // SAFETY: a slot libxhsa reserved in a registered ring (`ProcessMemory::new`); its header still says
        // INVALID, so the packet processor does not read the body being written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                packet.as_bytes().as_ptr().add(2),
                (addr + 2) as *mut u8,
                PACKET_SIZE - 2,
            )
        };
    }

    fn store_header(&self, addr: u64, header: u16) {
        // SAFETY: the header word of a slot of a registered ring (`ProcessMemory::new`),
        // accessed atomically by everyone.
        unsafe { AtomicU16::from_ptr(addr as *mut u16) }.store(header, Ordering::Release);
    }
}

/// Fills the `slots` packets at `addr` with INVALID packets (the initial state of a ring).
///
/// # Safety
///
/// `slots` packets at `addr` are writable memory nobody else uses yet (a ring just allocated).
pub(crate) unsafe fn invalidate_ring(addr: u64, slots: u64) {
    let invalid = Packet::invalid();
    for i in 0..slots {
        let slot = addr + i * PACKET_SIZE as u64;
        // SAFETY: inside the caller's fresh ring.
        unsafe {
            std::ptr::copy_nonoverlapping(invalid.as_bytes().as_ptr(), slot as *mut u8, PACKET_SIZE)
        };
    }
}

/// Copies `len` bytes from `from` to `to` (the hardware `amd_queue_t` into a new shadow's).
///
/// # Safety
///
/// `from` is readable and `to` writable for `len` bytes, the two do not overlap, and nobody
/// writes `from` or uses `to` meanwhile.
pub(crate) unsafe fn copy(from: u64, to: u64, len: usize) {
    // SAFETY: the caller's obligation.
    unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, len) };
}

/// Reads the `u64` at `addr`.
///
/// # Safety
///
/// `addr` is an 8-byte aligned, readable field of a queue structure that is not written
/// concurrently (or only atomically).
pub(crate) unsafe fn read_u64(addr: u64) -> u64 {
    // SAFETY: the caller's obligation.
    unsafe { (addr as *const u64).read_volatile() }
}

/// Writes the `u64` at `addr`.
///
/// # Safety
///
/// `addr` is an 8-byte aligned field of a shadow libxhsa allocated and has not handed out yet.
pub(crate) unsafe fn write_u64(addr: u64, value: u64) {
    // SAFETY: the caller's obligation.
    unsafe { (addr as *mut u64).write_volatile(value) }
}

/// Reads the `u32` at `addr`.
///
/// # Safety
///
/// `addr` is a 4-byte aligned, readable field of a queue structure.
pub(crate) unsafe fn read_u32(addr: u64) -> u32 {
    // SAFETY: the caller's obligation.
    unsafe { (addr as *const u32).read_volatile() }
}

/// Writes the `u32` at `addr`.
///
/// # Safety
///
/// `addr` is a 4-byte aligned field of a shadow libxhsa allocated and has not handed out yet.
pub(crate) unsafe fn write_u32(addr: u64, value: u32) {
    // SAFETY: the caller's obligation.
    unsafe { (addr as *mut u32).write_volatile(value) }
}
