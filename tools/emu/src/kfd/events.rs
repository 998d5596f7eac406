//! KFD events: signal events backed by slots of the process's event page, and the other types
//! (hardware exception, memory fault, ...). Waiters block on a condition variable (a futex
//! underneath), never poll.
//!
//! As in amdkfd: a signal event's id is its slot index in the event page and its trigger data
//! is its id; a slot holds `UNSIGNALED` until the packet processor writes the event id into it
//! (the mailbox write that precedes the interrupt); the interrupt then sets the event and the
//! slot is reset. Other event types take ids from `FIRST_NONSIGNAL_ID` on.
//!
//! Event age (KFD 1.14, which ROCr 6.x relies on): a signal event counts its sets from 1; a
//! waiter may pass the age it last saw (`last_event_age`, 0 = none), and a wait on an event set
//! since then returns at once, with the current age written back. Without it an auto-reset
//! event set while one thread waits is consumed by that thread, and a second thread that read
//! the signal's value just before and starts its wait just after sleeps on.
//!
//! Deviation: a wait with timeout 0 that finds nothing set holds its thread for up to
//! [`ZERO_TIMEOUT_HOLD`] (returning at once when one of its events is set) instead of returning
//! at once. ROCr 6.x/7.x turn every blocked signal wait into such polls for its last partial
//! millisecond (`InterruptSignal::WaitRelaxed` rounds the time left down to whole milliseconds,
//! and HIP 6.4/7.2 wait in 4 ms slices), so a waiting HIP thread spins about a quarter of the
//! time. On a real host that costs a CPU core the GPU does not need; here the GPU is host
//! threads too, and the spinning took their CPU (an MI308X scenario's latency-critical
//! requests ran 2x slower in the emulation while the batch process's waiter spun).
//!
//! Deviation: a wait that a thread repeats with the same ids and the same stale ages it passed
//! last time, and that would return at once again only because of those ages (no event set
//! since), holds the thread for up to [`STALE_AGE_HOLD`] (ending at once when one of its events
//! is set, or at the caller's own timeout) before it returns what KFD returns. ROCr's async
//! events loop (6.4 to 7.x, `Runtime::AsyncEventsLoop`) keeps its ages by signal while KFD
//! writes them back by unique event: with two async signals on one event followed by another
//! signal, the later event's age never reaches the next wait, and every wait returns at once,
//! on a GPU as here. On a host whose GPU is a chip that spin costs one core; here it took the
//! interpreter's CPU (rocThrust's async tests: 4 ms per kernel, 20 s per test).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use xhsa_ioctl::abi::event::{
    HsaMemoryExceptionData, KFD_IOC_EVENT_MEMORY, KFD_IOC_EVENT_SIGNAL,
    KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_TIMEOUT, KFD_SIGNAL_EVENT_LIMIT,
};

/// Value of an event-page slot that holds no signal.
pub const UNSIGNALED: u64 = u64::MAX;
/// First id of events that are not signal events.
pub const FIRST_NONSIGNAL_ID: u32 = KFD_SIGNAL_EVENT_LIMIT;
/// `timeout_ms` meaning "wait forever".
pub const INFINITE: u32 = u32::MAX;
/// How long a wait with timeout 0 that finds none of its events set holds its thread before
/// reporting the timeout (see the module's deviation note). A set of one of its events ends the
/// hold at once, so a poller sees a completion as soon as it would have; only the time it
/// spends polling passes without taking a core.
pub const ZERO_TIMEOUT_HOLD: Duration = Duration::from_micros(100);
/// How long a repeated wait that only stale ages would end at once holds its thread (see the
/// module's second deviation note). A set of one of its events ends the hold at once.
pub const STALE_AGE_HOLD: Duration = Duration::from_millis(1);

thread_local! {
    /// The ids and ages of this thread's last wait that returned only because of stale ages.
    static LAST_STALE: std::cell::RefCell<Option<(Vec<u32>, Vec<u64>)>> =
        const { std::cell::RefCell::new(None) };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventError {
    /// No such event (EINVAL in KFD).
    NoSuchEvent,
    /// All signal-event slots are taken (ENOSPC in KFD).
    NoSlot,
    /// A signal event was requested before the event page was set (EINVAL).
    NoEventPage,
}

#[derive(Debug, Clone)]
struct Event {
    kind: u32,
    auto_reset: bool,
    signaled: bool,
    memory_fault: Option<HsaMemoryExceptionData>,
    /// Threads blocked in [`Events::wait`] on this event.
    waiters: u32,
    /// Bumped by every set: a waiter that saw another value when it began is woken.
    generation: u64,
    /// KFD's `event_age`: 1 at creation, +1 per set (never 0).
    age: u64,
}

impl Event {
    /// KFD's `set_event`: every thread waiting now is woken; an auto-reset event stays
    /// signaled only if nobody was waiting (otherwise the waiters consumed it).
    fn fire(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.signaled = !self.auto_reset || self.waiters == 0;
        self.age = match self.age.wrapping_add(1) {
            0 => 2,
            a => a,
        };
    }
}

#[derive(Debug, Default)]
struct Table {
    events: HashMap<u32, Event>,
    next_nonsignal: u32,
    page: Option<u64>,
}

/// The events of one process.
#[derive(Debug, Default)]
pub struct Events {
    table: Mutex<Table>,
    changed: Condvar,
    /// The stale-age hold; `None`: [`STALE_AGE_HOLD`] (tests choose another).
    stale_hold: Option<Duration>,
}

/// What a wait ended with, and the data of any memory-fault events it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitOutcome {
    pub result: u32,
    pub memory_faults: Vec<(u32, HsaMemoryExceptionData)>,
}

impl Events {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the address of the event page (the thunk's `event_page_offset` allocation).
    pub fn set_page(&self, addr: u64) {
        self.lock().page = Some(addr);
    }

    /// The event page's address, if set.
    pub fn page(&self) -> Option<u64> {
        self.lock().page
    }

    /// Creates an event; returns `(event_id, trigger_data, slot_index)`.
    pub fn create(&self, kind: u32, auto_reset: bool) -> Result<(u32, u32, u32), EventError> {
        let mut t = self.lock();
        let id = if kind == KFD_IOC_EVENT_SIGNAL {
            if t.page.is_none() {
                return Err(EventError::NoEventPage);
            }
            (0..KFD_SIGNAL_EVENT_LIMIT)
                .find(|i| !t.events.contains_key(i))
                .ok_or(EventError::NoSlot)?
        } else {
            let id = FIRST_NONSIGNAL_ID + t.next_nonsignal;
            t.next_nonsignal += 1;
            id
        };
        t.events.insert(
            id,
            Event {
                kind,
                auto_reset,
                signaled: false,
                memory_fault: None,
                waiters: 0,
                generation: 0,
                age: 1,
            },
        );
        let slot = if kind == KFD_IOC_EVENT_SIGNAL { id } else { 0 };
        Ok((id, id, slot))
    }

    pub fn destroy(&self, id: u32) -> Result<(), EventError> {
        let removed = self.lock().events.remove(&id);
        self.changed.notify_all();
        removed.map(|_| ()).ok_or(EventError::NoSuchEvent)
    }

    pub fn set(&self, id: u32) -> Result<(), EventError> {
        let mut t = self.lock();
        let e = t.events.get_mut(&id).ok_or(EventError::NoSuchEvent)?;
        e.fire();
        drop(t);
        self.changed.notify_all();
        Ok(())
    }

    pub fn reset(&self, id: u32) -> Result<(), EventError> {
        let mut t = self.lock();
        t.events.get_mut(&id).ok_or(EventError::NoSuchEvent)?.signaled = false;
        Ok(())
    }

    /// The interrupt that follows a mailbox write: sets signal event `id` if it exists.
    /// Unknown ids are ignored, as KFD ignores interrupts for events it does not have.
    pub fn interrupt(&self, id: u32) {
        let _ = self.set(id);
    }

    /// Ids of the signal events, ascending.
    pub fn signal_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .lock()
            .events
            .iter()
            .filter(|(_, e)| e.kind == KFD_IOC_EVENT_SIGNAL)
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Sets every memory-fault event with the fault's data (KFD's memory exception path).
    pub fn memory_fault(&self, data: HsaMemoryExceptionData) {
        let mut t = self.lock();
        for e in t.events.values_mut().filter(|e| e.kind == KFD_IOC_EVENT_MEMORY) {
            e.fire();
            e.memory_fault = Some(data);
        }
        drop(t);
        self.changed.notify_all();
    }

    /// Sets every event of type `kind` (hardware exceptions, queue events).
    pub fn set_all_of_kind(&self, kind: u32) {
        let mut t = self.lock();
        for e in t.events.values_mut().filter(|e| e.kind == kind) {
            e.fire();
        }
        drop(t);
        self.changed.notify_all();
    }

    /// Waits until all (`wait_all`) or any of `ids` are signaled, or `timeout_ms` passes.
    /// As in KFD, an event set while this thread waits wakes it (and every other waiter of that
    /// event) even if the event is auto-reset; an auto-reset event found signaled is reset by
    /// the wait it satisfies. Unknown ids fail the wait.
    pub fn wait(
        &self,
        ids: &[u32],
        wait_all: bool,
        timeout_ms: u32,
    ) -> Result<WaitOutcome, EventError> {
        self.wait_aged(ids, &mut [], wait_all, timeout_ms)
    }

    /// [`Events::wait`] with event ages: `ages[i]` is the `last_event_age` passed for `ids[i]`
    /// (missing or 0: none). A signal event whose age differs from it counts as set when the
    /// wait begins; when the wait completes, each set signal event's entry with an age gets the
    /// event's current age (KFD's `init_event_waiter` and `copy_signaled_event_data`).
    pub fn wait_aged(
        &self,
        ids: &[u32],
        ages: &mut [u64],
        wait_all: bool,
        timeout_ms: u32,
    ) -> Result<WaitOutcome, EventError> {
        let deadline = match timeout_ms {
            INFINITE => None,
            0 => Some(Instant::now() + ZERO_TIMEOUT_HOLD),
            ms => Some(Instant::now() + Duration::from_millis(ms.into())),
        };
        // `try_with`: a wait from a thread's TLS destructors (at exit) finds no state, no hold.
        let repeated = LAST_STALE
            .try_with(|l| {
                l.borrow()
                    .as_ref()
                    .is_some_and(|(i, a)| i.as_slice() == ids && a.as_slice() == &*ages)
            })
            .unwrap_or(false);
        let mut hold_until = None;
        let mut t = self.lock();
        let mut seen = Vec::with_capacity(ids.len());
        let mut aged = vec![false; ids.len()];
        let mut older = vec![false; ids.len()];
        for (i, &id) in ids.iter().enumerate() {
            let e = t.events.get(&id).ok_or(EventError::NoSuchEvent)?;
            seen.push(e.generation);
            let last = ages.get(i).copied().unwrap_or(0);
            if e.kind == KFD_IOC_EVENT_SIGNAL && last != 0 {
                aged[i] = true;
                older[i] = e.age != last;
            }
        }
        for &id in ids {
            if let Some(e) = t.events.get_mut(&id) {
                e.waiters += 1;
            }
        }
        let leave = |t: &mut Table| {
            for &id in ids {
                if let Some(e) = t.events.get_mut(&id) {
                    e.waiters = e.waiters.saturating_sub(1);
                }
            }
        };
        loop {
            let mut ready = Vec::new();
            let mut stale_only = true;
            for (i, &id) in ids.iter().enumerate() {
                let Some(e) = t.events.get(&id) else {
                    leave(&mut t);
                    return Err(EventError::NoSuchEvent);
                };
                let set = e.signaled || e.generation != seen[i];
                if set || older[i] {
                    ready.push((i, id));
                }
                stale_only &= !set;
            }
            let done = if wait_all { ready.len() == ids.len() } else { !ready.is_empty() };
            if done && stale_only && repeated && !ids.is_empty() {
                // The second deviation note: hold, unless the hold or the caller's time is up.
                let now = Instant::now();
                let until =
                    *hold_until.get_or_insert(now + self.stale_hold.unwrap_or(STALE_AGE_HOLD));
                let until = deadline.map_or(until, |d| d.min(until));
                if now < until {
                    t = self
                        .changed
                        .wait_timeout(t, until - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
            }
            if done || ids.is_empty() {
                let _ = LAST_STALE.try_with(|l| {
                    *l.borrow_mut() = (done && stale_only && !ids.is_empty())
                        .then(|| (ids.to_vec(), ages.to_vec()))
                });
                leave(&mut t);
                let mut faults = Vec::new();
                for (i, id) in ready {
                    let e = t.events.get_mut(&id).expect("checked above");
                    if aged[i] {
                        ages[i] = e.age;
                    }
                    if let Some(d) = e.memory_fault {
                        faults.push((id, d));
                    }
                    if e.auto_reset {
                        e.signaled = false;
                    }
                }
                return Ok(WaitOutcome {
                    result: KFD_IOC_WAIT_RESULT_COMPLETE,
                    memory_faults: faults,
                });
            }
            match deadline {
                None => t = self.changed.wait(t).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        leave(&mut t);
                        let _ = LAST_STALE.try_with(|l| *l.borrow_mut() = None);
                        return Ok(WaitOutcome {
                            result: KFD_IOC_WAIT_RESULT_TIMEOUT,
                            memory_faults: Vec::new(),
                        });
                    }
                    t = self.changed.wait_timeout(t, d - now).unwrap_or_else(|p| p.into_inner()).0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A zero-timeout poll that finds nothing set holds its thread (instead of returning at
    /// once, so that ROCr's sub-millisecond polling loop does not take the device's CPU), and
    /// one that finds its event set returns at once.
    #[test]
    fn a_zero_timeout_poll_holds_until_its_event_is_set_or_the_hold_ends() {
        let ev = Arc::new(Events::default());
        ev.set_page(0x1000);
        let (id, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let t = Instant::now();
        assert_eq!(ev.wait(&[id], false, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
        assert!(t.elapsed() >= ZERO_TIMEOUT_HOLD, "held {:?}", t.elapsed());
        // A set during the hold ends it with the event.
        let ev2 = ev.clone();
        let poller = std::thread::spawn(move || loop {
            let r = ev2.wait(&[id], false, 0).unwrap().result;
            if r == KFD_IOC_WAIT_RESULT_COMPLETE {
                return;
            }
        });
        while ev.lock().events[&id].waiters < 1 {
            std::thread::sleep(Duration::from_micros(20));
        }
        ev.set(id).unwrap();
        poller.join().unwrap();
    }

    /// KFD's set_event wakes every thread waiting at that moment, auto-reset or not; the
    /// emulator once let the first waiter consume the event and left the others blocked
    /// forever (HIP threads waiting on one signal: an intermittent hang).
    #[test]
    fn one_set_wakes_every_waiter_of_an_auto_reset_event() {
        let ev = Arc::new(Events::default());
        ev.set_page(0x1000);
        let (id, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let ev = ev.clone();
                std::thread::spawn(move || ev.wait(&[id], false, 5_000).unwrap().result)
            })
            .collect();
        // Let them block, then one set.
        while ev.lock().events[&id].waiters < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        ev.set(id).unwrap();
        for w in waiters {
            assert_eq!(w.join().unwrap(), KFD_IOC_WAIT_RESULT_COMPLETE, "every waiter is woken");
        }
        assert!(!ev.lock().events[&id].signaled, "consumed by the waiters it woke");
        // With nobody waiting, a set stays until one wait consumes it.
        ev.set(id).unwrap();
        assert_eq!(ev.wait(&[id], false, 0).unwrap().result, KFD_IOC_WAIT_RESULT_COMPLETE);
        assert_eq!(ev.wait(&[id], false, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
    }

    #[test]
    fn signal_events_need_the_page_and_take_slots() {
        let ev = Events::default();
        assert_eq!(ev.create(KFD_IOC_EVENT_SIGNAL, true), Err(EventError::NoEventPage));
        ev.set_page(0x1000);
        assert_eq!(ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap(), (0, 0, 0));
        assert_eq!(ev.create(KFD_IOC_EVENT_SIGNAL, false).unwrap(), (1, 1, 1));
        let (id, _, _) = ev.create(KFD_IOC_EVENT_MEMORY, false).unwrap();
        assert!(id >= FIRST_NONSIGNAL_ID);
        ev.destroy(0).unwrap();
        assert_eq!(ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap().0, 0);
    }

    /// The race event age closes (ROCr 6.x: the async-handler thread and the application's
    /// thread both wait on one completion signal). One thread waits on an auto-reset event;
    /// another read the signal's value just before the set and begins its wait just after: the
    /// set was consumed by the first, so without an age the second sleeps on (here: times out);
    /// with the age it saw at the start (1) it returns at once and gets the new age, and a wait
    /// with that age sleeps until the next set.
    #[test]
    fn a_wait_with_an_older_event_age_returns_at_once_and_learns_the_age() {
        let ev = Arc::new(Events::default());
        ev.set_page(0x1000);
        let (id, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let first = {
            let ev = ev.clone();
            std::thread::spawn(move || ev.wait(&[id], false, 5_000).unwrap().result)
        };
        while ev.lock().events[&id].waiters < 1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        ev.set(id).unwrap();
        assert_eq!(first.join().unwrap(), KFD_IOC_WAIT_RESULT_COMPLETE);
        assert_eq!(
            ev.wait(&[id], false, 50).unwrap().result,
            KFD_IOC_WAIT_RESULT_TIMEOUT,
            "no age: the set is gone"
        );
        let mut ages = [1u64];
        assert_eq!(
            ev.wait_aged(&[id], &mut ages, false, 5_000).unwrap().result,
            KFD_IOC_WAIT_RESULT_COMPLETE,
            "set since age 1"
        );
        assert_eq!(ages, [2], "the event's age comes back");
        assert_eq!(
            ev.wait_aged(&[id], &mut ages, false, 50).unwrap().result,
            KFD_IOC_WAIT_RESULT_TIMEOUT,
            "not set since age 2"
        );
        assert_eq!(ages, [2], "a wait that timed out leaves the age");
        ev.set(id).unwrap();
        assert_eq!(
            ev.wait_aged(&[id], &mut ages, false, 5_000).unwrap().result,
            KFD_IOC_WAIT_RESULT_COMPLETE
        );
        assert_eq!(ages, [3]);
        // Ages are for signal events only; an age of 0 means none.
        let (mem, _, _) = ev.create(KFD_IOC_EVENT_MEMORY, true).unwrap();
        let mut other = [7u64, 0];
        assert_eq!(
            ev.wait_aged(&[mem, id], &mut other, false, 50).unwrap().result,
            KFD_IOC_WAIT_RESULT_TIMEOUT
        );
        assert_eq!(other, [7, 0]);
    }

    /// ROCr's async events loop passing the same stale age again (its ages kept by signal, KFD's
    /// written back by unique event): the first such wait returns at once as in KFD, a repeat
    /// holds the thread until one of its events is set (here the hold is 10 s, so only the set
    /// can end it early), and returns what KFD returns.
    #[test]
    fn a_wait_repeated_with_the_same_stale_age_holds_until_an_event_is_set() {
        let ev =
            Arc::new(Events { stale_hold: Some(Duration::from_secs(10)), ..Events::default() });
        ev.set_page(0x1000);
        let (id, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let (other, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        ev.set(id).unwrap();
        ev.set(id).unwrap();
        // First: the age is stale (1 against 3), KFD returns at once, and so does this.
        let t = Instant::now();
        let mut ages = [1u64, 1];
        let r = ev.wait_aged(&[id, other], &mut ages, false, INFINITE).unwrap();
        assert_eq!((r.result, ages), (KFD_IOC_WAIT_RESULT_COMPLETE, [3, 1]));
        assert!(t.elapsed() < Duration::from_secs(5), "first stale wait held {:?}", t.elapsed());
        // The caller lost the age and repeats: held until `other` is set, then KFD's answer.
        let waiter = {
            let ev = ev.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut ages = [1u64, 1];
                let r = ev.wait_aged(&[id, other], &mut ages, false, INFINITE).unwrap();
                let again = ev.wait_aged(&[id, other], &mut [1u64, 1], false, INFINITE).unwrap();
                (r.result, ages, t.elapsed(), again.result)
            })
        };
        // (On that thread the first wait returns at once, the second is the repeat; `other` is
        // set while it holds.)
        std::thread::sleep(Duration::from_millis(200));
        ev.set(other).unwrap();
        let (result, ages, took, again) = waiter.join().unwrap();
        assert_eq!((result, ages), (KFD_IOC_WAIT_RESULT_COMPLETE, [3, 1]));
        assert_eq!(again, KFD_IOC_WAIT_RESULT_COMPLETE);
        assert!(took < Duration::from_secs(5), "the set did not end the hold: {took:?}");
        // Without a set the hold ends at the caller's timeout, with KFD's answer.
        let t = Instant::now();
        let r = ev.wait_aged(&[id], &mut [1u64], false, INFINITE).unwrap();
        assert_eq!(r.result, KFD_IOC_WAIT_RESULT_COMPLETE);
        let r = ev.wait_aged(&[id], &mut [1u64], false, 300).unwrap();
        assert_eq!(r.result, KFD_IOC_WAIT_RESULT_COMPLETE);
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "the repeat did not hold: {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_blocked_waiter_wakes_on_interrupt_and_auto_resets() {
        let ev = Arc::new(Events::default());
        ev.set_page(0x1000);
        let (id, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let ev2 = ev.clone();
        let t = std::thread::spawn(move || ev2.wait(&[id], true, 10_000).unwrap().result);
        std::thread::sleep(Duration::from_millis(20));
        ev.interrupt(id);
        assert_eq!(t.join().unwrap(), KFD_IOC_WAIT_RESULT_COMPLETE);
        // Auto-reset: a second wait times out.
        assert_eq!(ev.wait(&[id], true, 10).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
    }

    #[test]
    fn wait_any_and_wait_all() {
        let ev = Events::default();
        ev.set_page(0x1000);
        let (a, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, false).unwrap();
        let (b, _, _) = ev.create(KFD_IOC_EVENT_SIGNAL, false).unwrap();
        ev.set(a).unwrap();
        assert_eq!(ev.wait(&[a, b], false, 0).unwrap().result, KFD_IOC_WAIT_RESULT_COMPLETE);
        assert_eq!(ev.wait(&[a, b], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
        ev.set(b).unwrap();
        assert_eq!(ev.wait(&[a, b], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_COMPLETE);
        // Manual reset: still signaled until reset.
        assert_eq!(ev.wait(&[a], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_COMPLETE);
        ev.reset(a).unwrap();
        assert_eq!(ev.wait(&[a], true, 0).unwrap().result, KFD_IOC_WAIT_RESULT_TIMEOUT);
        assert_eq!(ev.wait(&[999], true, 0), Err(EventError::NoSuchEvent));
    }

    #[test]
    fn memory_faults_reach_memory_events_with_their_data() {
        let ev = Events::default();
        let (m, _, _) = ev.create(KFD_IOC_EVENT_MEMORY, true).unwrap();
        let data = HsaMemoryExceptionData { va: 0xdead000, gpu_id: 7, ..Default::default() };
        ev.memory_fault(data);
        let out = ev.wait(&[m], true, 0).unwrap();
        assert_eq!(out.memory_faults, vec![(m, data)]);
    }
}
