//! The completion waiter: libxhsa's own thread (`xhsa-completions`) that waits for its tracking
//! signals and runs the scheduler's completion handler when one falls below the value it was
//! armed with.
//!
//! How: [`arm`] records (queue, signal, "below") and wakes the thread; the thread sleeps until a
//! KFD event of the wake signal or of any armed signal fires ([`events`]: one `WAIT_EVENTS`
//! over all of them, however many), and when it wakes, disarms every armed signal now below its
//! value and calls the handler with that value (outside any lock of this module; the handler may
//! arm again). A signal libxhsa destroys goes through [`retire`]: destroyed at once when the
//! thread is not inside a wait, else by the thread when its wait returns (a signal must not be
//! destroyed while a wait names its event). [`stop`] ends the thread before the runtime shuts
//! down.
//!
//! Where a signal has no KFD event (`HSA_ENABLE_INTERRUPT=0`, the process's events ran out) or
//! KFD's wait fails, the thread looks at the armed signals' values every [`POLL`] instead
//! (ROCr itself polls memory for signals without events), and sleeps on a condition variable
//! while nothing is armed.
//!
//! Neither of ROCr's own ways to wait is used:
//! - `hsa_amd_signal_async_handler`: ROCr 6.4 and 7.x (up to 7.2 at least) wait for their
//!   async handlers in a loop that keys KFD event ages by position in its list and compacts
//!   duplicate events without moving the ages with them. Every HSA queue registers a handler on
//!   one event all queues share, so with two queues any handler registered after them (a
//!   tracking signal's) gets a stale age on every wait: KFD returns at once, forever, and ROCr's
//!   async thread spun a whole core (measured on the emulated MI308X with ROCr 6.4.3 and 7.2.4;
//!   fixed upstream in rocm-systems PR 7425, July 2026).
//! - `hsa_amd_signal_wait_any`: ROCr 6.x and 7.x hand `Signal::WaitMultiple` a vector of one
//!   element for the satisfying value, which it stores at the index of the signal that
//!   satisfied its condition: every return with an index above 0 writes past the vector and
//!   corrupted the application's heap (docs/preemption.md).
//!
//! The submission path only takes this module's lock for a push (the thread holds it only to
//! copy the armed list), and fires the wake signal's event (one KFD `SET_EVENT`): it never waits
//! on the thread.

mod events;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use xhsa_model::ids::QueueId;

use super::lifecycle::is_forked_child;
use super::rocr::Rocr;

/// How often armed signals are looked at when their events cannot be waited on.
const POLL: Duration = Duration::from_micros(250);

/// What the thread calls when a tracking signal armed for `queue` fell below its value.
pub(crate) type Handler = fn(QueueId, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Armed {
    queue: QueueId,
    signal: u64,
    below: i64,
}

struct State {
    /// The wake signal (0: none; the thread is not running): a signal of libxhsa's own, used
    /// only for its KFD event.
    wake: u64,
    /// That signal's KFD event (`None`: no signal, or it has none and the thread polls); set
    /// and cleared with `wake`.
    wake_event: Option<u32>,
    armed: Vec<Armed>,
    /// Signals to destroy once the thread is out of its wait.
    retired: Vec<u64>,
    /// The thread copied the armed list and may be inside KFD's wait with it.
    waiting: bool,
    /// Something was asked of the thread since it last looked (an arm, a retire, a stop).
    woken: bool,
    stop: bool,
    handler: Option<Handler>,
    thread: Option<JoinHandle<()>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    wake: 0,
    wake_event: None,
    armed: Vec::new(),
    retired: Vec::new(),
    waiting: false,
    woken: false,
    stop: false,
    handler: None,
    thread: None,
});
/// Wakes the thread while it polls or sleeps with nothing armed.
static WOKEN: Condvar = Condvar::new();
/// The wake signal's KFD event could not be fired: the thread polls from then on.
static KFD_WAKE_FAILED: AtomicBool = AtomicBool::new(false);
/// Signalled when the thread exits ([`stop`] waits for it).
static LEFT: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Arms `signal` of `queue`: `handler(queue, value)` runs on the waiter thread once the signal's
/// value is below `below` (once; arm again for the next). Replaces an earlier arming of the same
/// signal. `false` when the thread cannot run (no wake signal, no thread, a forked child).
pub(crate) fn arm(
    r: &'static Rocr,
    queue: QueueId,
    signal: u64,
    below: i64,
    handler: Handler,
) -> bool {
    if is_forked_child() {
        return false;
    }
    let wake = {
        let mut st = state();
        if st.stop {
            return false;
        }
        st.handler = Some(handler);
        if st.wake == 0 && !start(r, &mut st) {
            return false;
        }
        let entry = Armed { queue, signal, below };
        match st.armed.iter_mut().find(|a| a.signal == signal) {
            Some(a) => *a = entry,
            None => st.armed.push(entry),
        }
        woken(&mut st)
    };
    wake_up(wake);
    true
}

/// Marks the thread woken (under the state's lock) and wakes it where it sleeps on [`WOKEN`];
/// returns the wake signal's event, which [`wake_up`] then fires (outside the lock).
fn woken(st: &mut State) -> Option<u32> {
    st.woken = true;
    WOKEN.notify_all();
    st.wake_event
}

/// Ends the thread's KFD wait: fires the wake signal's KFD event `event`. (A store to the
/// signal would not: ROCr fires an interrupt signal's event on a host store only while a ROCr
/// wait is inside, `InterruptSignal::SetEvent`'s `InWaiting()`.)
fn wake_up(event: Option<u32>) {
    if let Some(id) = event {
        if !events::fire(id) {
            KFD_WAKE_FAILED.store(true, Ordering::Relaxed);
            WOKEN.notify_all();
        }
    }
}

/// Starts the thread with a new wake signal (under the state's lock).
fn start(r: &'static Rocr, st: &mut State) -> bool {
    let Some(wake) = r.signal_create(1) else {
        tracing::error!("xhsa: no signal for the completion waiter (hsa_signal_create failed)");
        return false;
    };
    let spawned =
        std::thread::Builder::new().name("xhsa-completions".into()).spawn(move || run(r, wake));
    match spawned {
        Ok(t) => {
            st.wake = wake;
            st.wake_event = r.signal_event(wake);
            st.thread = Some(t);
            true
        }
        Err(e) => {
            r.signal_destroy(wake);
            tracing::error!("xhsa: the completion waiter thread could not be started: {e}");
            false
        }
    }
}

/// Destroys `signal` (a tracking signal libxhsa no longer uses) as soon as the waiter cannot be
/// using it; disarms it first.
pub(crate) fn retire(r: &Rocr, signal: u64) {
    if is_forked_child() {
        r.signal_destroy(signal);
        return;
    }
    // `Some(wake event)`: destroyed by the thread once out of its wait.
    let deferred = {
        let mut st = state();
        st.armed.retain(|a| a.signal != signal);
        if !st.waiting {
            None
        } else {
            st.retired.push(signal);
            Some(woken(&mut st))
        }
    };
    match deferred {
        None => r.signal_destroy(signal),
        Some(wake) => wake_up(wake),
    }
}

/// Ends the thread (before the runtime shuts down: its signals go with it), waiting up to 2 s
/// for it. Armed entries are kept for [`resume`].
pub(crate) fn stop() {
    if is_forked_child() {
        return;
    }
    let (wake, thread) = {
        let mut st = state();
        if st.wake == 0 {
            return;
        }
        st.stop = true;
        (woken(&mut st), st.thread.take())
    };
    wake_up(wake);
    let mut st = state();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while st.wake != 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            tracing::warn!("xhsa: the completion waiter did not stop within 2 s");
            return;
        }
        st = LEFT.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
    }
    drop(st);
    if let Some(t) = thread {
        let _ = t.join();
    }
}

/// After the runtime's `hsa_shut_down`: if the runtime is `down`, forgets what was armed (its
/// signals went with it); either way the waiter may start again at the next [`arm`], and starts
/// at once when armed signals are still waited for.
pub(crate) fn resume(r: &'static Rocr, down: bool) {
    if is_forked_child() {
        return;
    }
    let mut st = state();
    st.stop = false;
    if down {
        st.armed.clear();
        st.retired.clear();
    } else if !st.armed.is_empty() && st.wake == 0 {
        start(r, &mut st);
        let wake = woken(&mut st);
        drop(st);
        wake_up(wake);
    }
}

fn run(r: &'static Rocr, wake: u64) {
    let mut events = events::EventWait::new();
    let mut through_kfd = true;
    loop {
        through_kfd &= !KFD_WAKE_FAILED.load(Ordering::Relaxed);
        let (snapshot, retired, handler) = {
            let mut st = state();
            if st.stop {
                let retired = std::mem::take(&mut st.retired);
                st.wake = 0;
                st.wake_event = None;
                drop(st);
                for s in retired {
                    r.signal_destroy(s);
                }
                r.signal_destroy(wake);
                LEFT.notify_all();
                return;
            }
            let retired = std::mem::take(&mut st.retired);
            st.woken = false;
            st.waiting = through_kfd;
            (st.armed.clone(), retired, st.handler)
        };
        for s in retired {
            r.signal_destroy(s);
        }
        let t0 = std::time::Instant::now();
        let mut waited = events::Waited::NotHere;
        if through_kfd {
            let mut signals = Vec::with_capacity(snapshot.len() + 1);
            signals.push(wake);
            signals.extend(snapshot.iter().map(|a| a.signal));
            waited = events.wait(r, &signals);
            through_kfd = waited != events::Waited::Failed;
        }
        if waited != events::Waited::Returned {
            // Polling: out of any wait (a retire destroys at once), sleeping until something is
            // asked of the thread, and at most POLL while signals are armed.
            let mut st = state();
            st.waiting = false;
            while !st.woken && !st.stop {
                if st.armed.is_empty() {
                    st = WOKEN.wait(st).unwrap_or_else(|p| p.into_inner());
                } else {
                    st = WOKEN.wait_timeout(st, POLL).unwrap_or_else(|p| p.into_inner()).0;
                    break;
                }
            }
        }
        tracing::trace!(target: "xhsa::completions", armed = snapshot.len(), kfd = (waited == events::Waited::Returned), waited_us = t0.elapsed().as_micros() as u64, "xhsa: completion wait returned");
        // Every armed signal now below its value fires, whichever woke the wait. The values are
        // read here, under the lock (no retire meanwhile).
        let due: Vec<(QueueId, i64)> = {
            let mut st = state();
            st.waiting = false;
            let mut due = Vec::new();
            st.armed.retain(|a| {
                let v = r.signal_value(a.signal);
                let fired = v < a.below;
                if fired {
                    due.push((a.queue, v));
                }
                !fired
            });
            due
        };
        if let Some(h) = handler {
            for (queue, value) in due {
                h(queue, value);
            }
        }
    }
}
