//! The completion waiter's sleep on KFD events: one `AMDKFD_IOC_WAIT_EVENTS` over the KFD signal
//! events behind the wake signal and every armed tracking signal, whatever their number.
//!
//! ROCr makes each signal it creates an interrupt signal (unless `HSA_ENABLE_INTERRUPT=0` or
//! the process ran out of KFD events): its `amd_signal_t` names a KFD signal event, which the
//! command processor fires when it decrements the signal.
//! Waiting on those events here, instead of through ROCr's `hsa_amd_signal_wait_any`, avoids
//! that function's write past a one-element vector for every satisfying index above 0 in ROCr
//! 6.x/7.x (docs/preemption.md, "heap corruption through ROCr's hsa_amd_signal_wait_any").
//!
//! No wakeup is lost: the caller reads every armed signal's value after each return, and each
//! entry carries the event's age as of the last return (KFD, uapi 1.14+, returns at once when an
//! event's age differs, i.e. it fired since); a kernel without ages keeps an auto-reset event
//! "signaled" until a wait consumes it. A signal first met is waited for with age 1 (ROCr's own
//! starting point; at worst one early return).
//!
//! The wake signal is woken with an explicit `SET_EVENT` ([`fire`]): ROCr's stores to an
//! interrupt signal fire its event only while a ROCr wait is inside (`InterruptSignal::SetEvent`
//! checks `InWaiting()`), and this wait is not ROCr's. The command processor fires the event of
//! every signal it decrements that has one, whoever waits.
//!
//! The descriptor is one libxhsa opens once and keeps (close-on-exec): KFD finds a process by its
//! address space, so it reaches the runtime's events, and unlike the runtime's own it is never
//! closed under libxhsa (ROCr closes its descriptor at its last `hsa_shut_down`).
//!
//! What it is not: no conditions (the caller compares values), no signal lifetimes (the caller
//! never destroys a signal while a wait may name it).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use xhsa_ioctl::abi::SignalEventWait;
use xhsa_ioctl::Kfd;

use crate::entry::kfd::own_call;
use crate::entry::rocr::Rocr;

/// A wait that returns this fast, with no event's age moved, counts towards [`SPIN_LIMIT`].
const QUICK: Duration = Duration::from_micros(20);
/// So many quick returns in a row with nothing fired: KFD does not sleep on these events, and
/// the waiter falls back rather than spin.
const SPIN_LIMIT: u32 = 1000;

/// What one [`EventWait::wait`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// Slept in KFD until an event fired (or returned early; the caller looks either way).
    Returned,
    /// Not possible for these signals now (one has no KFD event, or no descriptor): the caller
    /// polls this time.
    NotHere,
    /// KFD's wait failed or did not sleep: the caller polls from now on.
    Failed,
}

/// libxhsa's `/dev/kfd` descriptor for events: opened by the waiter thread ([`EventWait::new`],
/// before its first look at the armed list), never on an application's thread.
static KFD: OnceLock<Option<Kfd>> = OnceLock::new();

/// The descriptor, opened the first time (`None`, logged once, when it cannot be opened).
fn kfd() -> Option<&'static Kfd> {
    KFD.get_or_init(|| match Kfd::open() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::info!("xhsa: /dev/kfd cannot be opened for the completion waiter ({e}): armed signals are looked at every 250 us");
            None
        }
    })
    .as_ref()
}

/// Fires KFD event `event_id` (the wake signal's), so that a wait here returns. `false` when it
/// could not (no descriptor, or KFD refused: logged once). Before the waiter thread opened the
/// descriptor there is no wait to end (it looks at the armed list after opening it): `true`.
pub(super) fn fire(event_id: u32) -> bool {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let kfd = match KFD.get() {
        None => return true,
        Some(None) => return false,
        Some(Some(k)) => k,
    };
    match own_call(|| kfd.set_event(event_id)) {
        Ok(()) => true,
        Err(e) => {
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) && !crate::entry::exiting() {
                tracing::error!("xhsa: waking the completion waiter through KFD failed ({e})");
            }
            false
        }
    }
}

/// The KFD side of the completion waiter: each event's last age.
pub(super) struct EventWait {
    /// Event id → its age as of the last return.
    ages: HashMap<u32, u64>,
    quick_in_a_row: u32,
    said_no_event: bool,
}

impl EventWait {
    /// On the waiter thread, before its first look: opens the descriptor.
    pub(super) fn new() -> EventWait {
        let _ = kfd();
        EventWait { ages: HashMap::new(), quick_in_a_row: 0, said_no_event: false }
    }

    /// Sleeps until one of `signals`' KFD events fires (see [`Waited`]). Every handle is a live
    /// signal libxhsa created, none destroyed before this returns.
    pub(super) fn wait(&mut self, r: &Rocr, signals: &[u64]) -> Waited {
        let mut entries = Vec::with_capacity(signals.len());
        for &s in signals {
            let Some(id) = r.signal_event(s) else {
                if !self.said_no_event {
                    self.said_no_event = true;
                    tracing::info!("xhsa: a tracking signal has no KFD event (interrupts off, or the process's events ran out): armed signals are looked at every 250 us while it is armed");
                }
                return Waited::NotHere;
            };
            entries.push(SignalEventWait::new(id, self.ages.get(&id).copied().unwrap_or(1)));
        }
        let Some(kfd) = kfd() else { return Waited::NotHere };
        let sent: Vec<u64> = entries.iter().map(|e| e.last_event_age).collect();
        let t0 = Instant::now();
        let got = own_call(|| kfd.wait_events(&mut entries, false, u32::MAX));
        let took = t0.elapsed();
        match got {
            Ok(_) => {}
            // A signal delivered to this thread: look, and wait again.
            Err(e) if e.errno == Errno::EINTR => return Waited::Returned,
            Err(e) => {
                if !crate::entry::exiting() {
                    tracing::error!("xhsa: waiting on KFD events for completions failed ({e}); armed signals are looked at every 250 us from now on");
                }
                return Waited::Failed;
            }
        }
        let mut moved = false;
        self.ages.clear();
        for (e, was) in entries.iter().zip(sent) {
            moved |= e.last_event_age != was;
            self.ages.insert(e.event_id, e.last_event_age);
        }
        if took < QUICK && !moved {
            self.quick_in_a_row += 1;
            if self.quick_in_a_row >= SPIN_LIMIT {
                tracing::error!("xhsa: KFD's event wait returns at once, {SPIN_LIMIT} times in a row with no event fired; armed signals are looked at every 250 us from now on");
                return Waited::Failed;
            }
        } else {
            self.quick_in_a_row = 0;
        }
        Waited::Returned
    }
}
