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

/// Raises the signal's interrupt if it has an event: mailbox write, then the interrupt with
/// the event id, which KFD acknowledges (the event's page slot back to unsignaled) and turns
/// into a set of the event.
pub fn interrupt(mem: &dyn DeviceMemory, events: &Events, handle: u64) {
    let mailbox = mem.load_u64(handle + MAILBOX);
    if mailbox != 0 {
        let id = mem.read_u32(handle + EVENT_ID);
        mem.store_u64(mailbox, u64::from(id));
        if events.page().is_some_and(|page| mailbox == page + 8 * u64::from(id)) {
            set_from_interrupt(mem, events, mailbox, id);
        } else {
            events.interrupt(id);
        }
    }
}

/// KFD's `set_event_from_interrupt`: the event's page slot (at `slot`) back to unsignaled,
/// then the event set.
fn set_from_interrupt(mem: &dyn DeviceMemory, events: &Events, slot: u64, id: u32) {
    mem.store_u64(slot, crate::kfd::events::UNSIGNALED);
    events.interrupt(id);
}

/// The interrupt a wave raises with `s_sendmsg(MSG_INTERRUPT)` after writing a signal's
/// event id into its mailbox: only the low `bits` bits of the id come with it (M0[7:0]). As
/// KFD's `kfd_signal_event_interrupt`: the first signal event whose id matches those bits and
/// whose event-page slot is signaled is acknowledged (slot back to unsignaled) and set; if
/// none matches, every event with a signaled slot is.
pub fn interrupt_partial(mem: &dyn DeviceMemory, events: &Events, partial: u32, bits: u32) {
    let Some(page) = events.page() else { return };
    let slot = |id: u32| page + 8 * u64::from(id);
    let signaled = |id: u32| mem.load_u64(slot(id)) != crate::kfd::events::UNSIGNALED;
    let ids = events.signal_ids();
    let mask = if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 };
    let first = ids
        .iter()
        .copied()
        .find(|&id| id >= partial && id & mask == partial & mask && signaled(id));
    let set: Vec<u32> = match first {
        Some(id) => vec![id],
        None => ids.into_iter().filter(|&id| signaled(id)).collect(),
    };
    for id in set {
        set_from_interrupt(mem, events, slot(id), id);
    }
}

/// Completes a packet's signal: timestamps (when profiling), decrement, interrupt.
pub fn complete(
    mem: &dyn DeviceMemory,
    events: &Events,
    handle: u64,
    timestamps: Option<(u64, u64)>,
) {
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
    use xhsa_ioctl::abi::event::{KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_TIMEOUT};

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
        // The mailbox write is acknowledged by KFD's interrupt handler: the slot is unsignaled
        // again, and a later interrupt that matches no slot does not set this event again.
        assert_eq!(m.load_u64(0x9000 + 8 * u64::from(slot)), crate::kfd::events::UNSIGNALED);
        assert_eq!(ev.wait(&[id], true, 0).unwrap().result, 0);
        interrupt_partial(&m, &ev, 0xff, 8);
        assert_eq!(ev.wait(&[id], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
    }

    #[test]
    fn a_partial_id_interrupt_sets_the_matching_signaled_event_else_every_signaled_one() {
        use crate::kfd::events::UNSIGNALED;
        let m = FakeMemory::default();
        let ev = Events::default();
        ev.set_page(0x9000);
        // Events 0..300: ids 5 and 261 share their low 8 bits.
        let ids: Vec<u32> =
            (0..300).map(|_| ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap().0).collect();
        for &id in &ids {
            m.store_u64(0x9000 + 8 * u64::from(id), UNSIGNALED);
        }
        let slot = |id: u32| 0x9000 + 8 * u64::from(id);
        // The wave wrote 261 into its mailbox; the interrupt carries 261 & 0xff = 5.
        m.store_u64(slot(261), 261);
        interrupt_partial(&m, &ev, 261 & 0xff, 8);
        assert_eq!(ev.wait(&[261], true, 0).unwrap().result, 0, "261 is set");
        assert_eq!(
            ev.wait(&[5], true, 0).unwrap().result,
            KFD_IOC_WAIT_RESULT_TIMEOUT,
            "5's slot was not signaled"
        );
        assert_eq!(m.load_u64(slot(261)), UNSIGNALED, "acknowledged");
        // A partial id that matches no signaled slot: every signaled slot is looked at.
        m.store_u64(slot(7), 7);
        m.store_u64(slot(42), 42);
        interrupt_partial(&m, &ev, 99, 8);
        assert_eq!(ev.wait(&[7, 42], true, 0).unwrap().result, 0);
        assert_eq!(ev.wait(&[99], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
    }
}
