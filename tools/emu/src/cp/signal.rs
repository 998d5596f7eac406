//! The packet processor's side of `amd_signal_t`: decrement a completion signal, write
//! profiling timestamps, and raise the interrupt that wakes blocked waiters.
//!
//! Offsets (amd_hsa_signal.h): kind @0, value @8, event_mailbox_ptr @16, event_id @24,
//! start_ts @32, end_ts @40. An `hsa_signal_t` handle is the address of its `amd_signal_t`.

use crate::kfd::events::Events;
use crate::sys::devmem::DeviceMemory;

pub const VALUE: u64 = 8;
pub const MAILBOX: u64 = 16;
pub const EVENT_ID: u64 = 24;
pub const START_TS: u64 = 32;
pub const END_TS: u64 = 40;
/// Bytes of an `amd_signal_t`.
pub const SIZE: u64 = 64;

/// The current value of a signal.
pub fn value(mem: &dyn DeviceMemory, handle: u64) -> i64 {
    mem.load_u64(handle + VALUE) as i64
}

/// Raises the signal's interrupt if it has an event: mailbox write, then the event.
pub fn interrupt(mem: &dyn DeviceMemory, events: &Events, handle: u64) {
    let mailbox = mem.load_u64(handle + MAILBOX);
    if mailbox != 0 {
        let id = mem.read_u32(handle + EVENT_ID);
        mem.store_u64(mailbox, u64::from(id));
        events.interrupt(id);
    }
}

/// Completes a packet's signal: timestamps (when profiling), decrement, interrupt.
pub fn complete(mem: &dyn DeviceMemory, events: &Events, handle: u64, timestamps: Option<(u64, u64)>) {
    if handle == 0 {
        return;
    }
    if let Some((start, end)) = timestamps {
        mem.store_u64(handle + START_TS, start);
        mem.store_u64(handle + END_TS, end);
    }
    mem.fetch_add_i64(handle + VALUE, -1);
    interrupt(mem, events, handle);
}

/// Stores a value into a signal and raises its interrupt (queue-error reporting).
pub fn store(mem: &dyn DeviceMemory, events: &Events, handle: u64, v: i64) {
    if handle == 0 {
        return;
    }
    mem.store_u64(handle + VALUE, v as u64);
    interrupt(mem, events, handle);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::devmem::fake::FakeMemory;
    use xhsa_ioctl::abi::event::KFD_IOC_EVENT_SIGNAL;

    #[test]
    fn completion_decrements_stamps_and_wakes() {
        let m = FakeMemory::default();
        let ev = Events::default();
        ev.set_page(0x9000);
        let (id, _, slot) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let sig = 0x1000;
        m.store_u64(sig + VALUE, 1);
        m.store_u64(sig + MAILBOX, 0x9000 + 8 * u64::from(slot));
        m.write(sig + EVENT_ID, &id.to_le_bytes());
        complete(&m, &ev, sig, Some((10, 20)));
        assert_eq!(value(&m, sig), 0);
        assert_eq!((m.load_u64(sig + START_TS), m.load_u64(sig + END_TS)), (10, 20));
        assert_eq!(m.load_u64(0x9000 + 8 * u64::from(slot)), u64::from(id));
        assert_eq!(ev.wait(&[id], true, 0).unwrap().result, 0);
    }
}
