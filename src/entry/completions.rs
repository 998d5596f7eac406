//! The completion waiter: libxhsa's own thread (`xhsa-completions`) that waits for its tracking
//! signals and runs the scheduler's completion handler when one falls below the value it was
//! armed with.
//!
//! Why not ROCr's `hsa_amd_signal_async_handler`: ROCr 6.4 and 7.x (up to 7.2 at least) wait
//! for their async handlers in a loop that keys KFD event ages by position in its list and
//! compacts duplicate events without moving the ages with them. Every HSA queue registers a
//! handler on one event all queues share, so a process with two queues (the application's and
//! libxhsa's hardware queue) has a duplicate, and any handler registered after it (libxhsa's
//! tracking signal) gets a stale age on every wait: KFD returns at once, forever. ROCr's async
//! thread then spun a whole core in every process libxhsa scheduled (measured on the emulated
//! MI308X with ROCr 6.4.3 and 7.2.4; the same loop and KFD semantics on real hardware; fixed
//! upstream in rocm-systems PR 7425, July 2026). `hsa_amd_signal_wait_any`, which this thread
//! uses, sorts and deduplicates events and their ages together, and sleeps in KFD.
//!
//! How: [`arm`] records (queue, signal, "below") and wakes the thread through a wake signal of
//! its own (index 0 of every wait); the thread waits on the wake signal and every armed signal,
//! and when the wait returns, disarms every armed signal now below its value and calls the
//! handler with that value (outside any lock of this module; the handler may arm again). A signal libxhsa destroys goes through
//! [`retire`]: destroyed at once when the thread is not inside a wait, else by the thread when
//! its wait returns (a signal must not be destroyed while ROCr's wait may still be converting
//! its handle). [`stop`] ends the thread before the runtime shuts down.
//!
//! The submission path only takes this module's lock for a push (the thread holds it only to
//! copy the armed list), and stores to the wake signal (one KFD SET_EVENT): it never waits on
//! the thread.
//!
//! **At most [`MAX_ARMED_PER_WAIT`] armed signals per wait.** ROCr 6.x and 7.x's
//! `hsa_amd_signal_wait_any` hands `Signal::WaitMultiple` a vector of one element for the
//! satisfying value, which it then stores at the index of the signal that satisfied its
//! condition: an index above 0 writes past the vector (docs/preemption.md, "Open defect"). With
//! glibc an 8-byte allocation has 24 usable bytes, so indices 1 and 2 land in slack and 3 or more
//! corrupt the heap (seen: aborts in `free`). Until libxhsa waits on the signals' KFD events
//! itself, each wait takes the wake signal and at most two armed signals (rotating through them);
//! with more armed, a ticker thread (`xhsa-completions-tick`) wakes the wait every
//! [`ROTATE_NS`] through the wake signal (index 0; a timed wait is no way out: ROCr 7.2 indexes
//! its id list with a timeout's -1), and the values of all armed signals are read after every
//! return, so a completion outside the two is seen within that time. The ticker sleeps on a
//! condition variable while every armed signal fits in one wait. An allocator without slack
//! (jemalloc, tcmalloc) is still exposed at indices 1 and 2.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use xhsa_model::ids::QueueId;

use super::lifecycle::is_forked_child;
use super::rocr::Rocr;

/// The wake signal's value while nothing is asked of the thread; storing [`WAKE`] (below it)
/// ends its wait, which waits for "below `IDLE`" on index 0.
const IDLE: i64 = 1;
const WAKE: i64 = 0;
/// Armed signals one ROCr wait takes at most (with the wake signal: indices 0 to 2; see the
/// module doc).
const MAX_ARMED_PER_WAIT: usize = 2;
/// With more armed than one wait takes, how long each wait lasts before the ticker moves it on
/// to the next pair.
const ROTATE_NS: u64 = 5_000_000;

/// What the thread calls when a tracking signal armed for `queue` fell below its value.
pub(crate) type Handler = fn(QueueId, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Armed {
    queue: QueueId,
    signal: u64,
    below: i64,
}

struct State {
    /// The wake signal (0: none; the thread is not running).
    wake: u64,
    armed: Vec<Armed>,
    /// Signals to destroy once the thread is out of its wait.
    retired: Vec<u64>,
    /// The thread copied the armed list and may be inside ROCr's wait with it.
    waiting: bool,
    stop: bool,
    handler: Option<Handler>,
    thread: Option<JoinHandle<()>>,
    /// The wait in progress takes only some of the armed signals: the ticker wakes it.
    partial: bool,
    /// The ticker thread runs (one at most, across stops and restarts).
    ticking: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    wake: 0,
    armed: Vec::new(),
    retired: Vec::new(),
    waiting: false,
    stop: false,
    handler: None,
    thread: None,
    partial: false,
    ticking: false,
});
/// Wakes the ticker when a wait takes only some of the armed signals, or at [`stop`].
static TICK: Condvar = Condvar::new();
/// Signalled when the thread exits ([`stop`] waits for it).
static LEFT: Condvar = Condvar::new();
/// ROCr's wait failed once (logged once).
static WAIT_FAILED: AtomicBool = AtomicBool::new(false);

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
        st.wake
    };
    r.signal_store(wake, WAKE);
    true
}

/// Starts the thread with a new wake signal (under the state's lock).
fn start(r: &'static Rocr, st: &mut State) -> bool {
    let Some(wake) = r.signal_create(IDLE) else {
        tracing::error!("xhsa: no signal for the completion waiter (hsa_signal_create failed)");
        return false;
    };
    let spawned =
        std::thread::Builder::new().name("xhsa-completions".into()).spawn(move || run(r, wake));
    match spawned {
        Ok(t) => {
            st.wake = wake;
            st.thread = Some(t);
            // Without the ticker a wait over part of the armed signals could last until the
            // next arm: logged, and the waiter goes on (completions outside the pair wait).
            if !st.ticking {
                let ticker = std::thread::Builder::new()
                    .name("xhsa-completions-tick".into())
                    .spawn(move || tick(r));
                match ticker {
                    Ok(_) => st.ticking = true,
                    Err(e) => tracing::error!(
                        "xhsa: the completion waiter's ticker could not be started: {e}"
                    ),
                }
            }
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
    let wake = {
        let mut st = state();
        st.armed.retain(|a| a.signal != signal);
        if !st.waiting {
            0
        } else {
            st.retired.push(signal);
            st.wake
        }
    };
    if wake == 0 {
        r.signal_destroy(signal);
    } else {
        r.signal_store(wake, WAKE);
    }
}

/// Ends the thread (before the runtime shuts down: its signals go with it), waiting up to 2 s
/// for it. Armed entries are kept for [`resume`].
pub(crate) fn stop(r: &Rocr) {
    if is_forked_child() {
        return;
    }
    let (wake, thread) = {
        let mut st = state();
        if st.wake == 0 {
            return;
        }
        st.stop = true;
        TICK.notify_all();
        (st.wake, st.thread.take())
    };
    r.signal_store(wake, WAKE);
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
        let wake = st.wake;
        drop(st);
        if wake != 0 {
            r.signal_store(wake, WAKE);
        }
    }
}

/// The armed entries one wait takes: all of them up to [`MAX_ARMED_PER_WAIT`], else that many,
/// `round` rotating through them.
fn this_wait(armed: &[Armed], round: usize) -> Vec<Armed> {
    if armed.len() <= MAX_ARMED_PER_WAIT {
        return armed.to_vec();
    }
    let start = round.wrapping_mul(MAX_ARMED_PER_WAIT) % armed.len();
    (0..MAX_ARMED_PER_WAIT).map(|k| armed[(start + k) % armed.len()]).collect()
}

/// The ticker: while a wait takes only part of the armed signals, stores the wake value every
/// [`ROTATE_NS`] (under the state's lock, so never to a wake signal already destroyed); sleeps
/// on [`TICK`] otherwise; ends at [`stop`].
fn tick(r: &'static Rocr) {
    let mut st = state();
    loop {
        while !st.partial && !st.stop {
            st = TICK.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.stop {
            st.ticking = false;
            return;
        }
        drop(st);
        std::thread::sleep(Duration::from_nanos(ROTATE_NS));
        st = state();
        // Not once the process exits: the runtime may be tearing its signals down without an
        // `hsa_shut_down` libxhsa sees (ROCr 7.2 under HSA_TOOLS_LIB asserts on such a store).
        if st.partial && !st.stop && st.wake != 0 && !super::exiting() {
            r.signal_store(st.wake, WAKE);
        }
    }
}

fn run(r: &'static Rocr, wake: u64) {
    let mut round = 0usize;
    loop {
        let (snapshot, retired, handler) = {
            let mut st = state();
            if st.stop {
                let retired = std::mem::take(&mut st.retired);
                st.wake = 0;
                drop(st);
                for s in retired {
                    r.signal_destroy(s);
                }
                r.signal_destroy(wake);
                LEFT.notify_all();
                return;
            }
            let retired = std::mem::take(&mut st.retired);
            st.waiting = true;
            st.partial = st.armed.len() > MAX_ARMED_PER_WAIT;
            if st.partial {
                TICK.notify_all();
            }
            (st.armed.clone(), retired, st.handler)
        };
        for s in retired {
            r.signal_destroy(s);
        }
        let taken = this_wait(&snapshot, round);
        round = round.wrapping_add(1);
        let mut signals = Vec::with_capacity(taken.len() + 1);
        signals.push(wake);
        signals.extend(taken.iter().map(|a| a.signal));
        let mut below = Vec::with_capacity(taken.len() + 1);
        below.push(IDLE);
        below.extend(taken.iter().map(|a| a.below));
        let t0 = std::time::Instant::now();
        let got = r.wait_any_below(&signals, &below);
        tracing::trace!(target: "xhsa::completions", armed = snapshot.len(), got = ?got, waited_us = t0.elapsed().as_micros() as u64, "xhsa: completion wait returned");
        match got {
            Some((0, _)) => r.signal_store(wake, IDLE),
            Some(_) => {}
            None => {
                if !WAIT_FAILED.swap(true, Ordering::Relaxed) {
                    tracing::error!("xhsa: hsa_amd_signal_wait_any failed; completions are looked for every 10 ms instead");
                }
                // Still `waiting`: no armed signal is destroyed meanwhile.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Every armed signal now below its value fires, whichever woke the wait. The values are
        // read here, under the lock (no retire meanwhile), not taken from ROCr: 7.2's
        // `hsa_amd_signal_wait_any` reports 0.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn armed(n: u64) -> Vec<Armed> {
        (1..=n).map(|i| Armed { queue: QueueId(i), signal: 0x1000 * i, below: 5 }).collect()
    }

    #[test]
    fn a_wait_takes_at_most_two_armed_signals_and_rotates_through_the_rest() {
        // Two or fewer: all of them.
        for n in 0..=2 {
            assert_eq!(this_wait(&armed(n), 7), armed(n), "{n}");
        }
        // Five: two per wait, and every one taken within three rounds.
        let all = armed(5);
        let mut seen = std::collections::BTreeSet::new();
        for round in 0..3 {
            let taken = this_wait(&all, round);
            assert_eq!(taken.len(), MAX_ARMED_PER_WAIT);
            assert!(taken.iter().all(|a| all.contains(a)));
            seen.extend(taken.iter().map(|a| a.signal));
        }
        assert_eq!(seen.len(), 5, "{seen:?}");
    }
}
