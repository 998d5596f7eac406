//! libxhsa's logger: `tracing`'s formatter (filtered by `XHSA_LOG`, to stderr) behind a guard
//! that drops every event once the process exits, and every event of a thread whose
//! thread-locals are being destroyed. Libraries shut the runtime down and destroy queues from
//! their static and thread-local destructors (HIP 7.2 calls `hsa_shut_down` from one), after
//! libxhsa's exit handler, when thread-local state (the formatter's buffer among it) may already
//! be gone: formatting an event then would panic, and a panic in an exported C function aborts
//! the application.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::span;
use tracing::subscriber::{Interest, Subscriber};
use tracing::{Event, Metadata};

/// Where this thread's logging stands: not armed yet, armed ([`ALIVE`] set up after the
/// formatter's thread-local buffer), or over ([`ALIVE`] destroyed: the thread is exiting).
const NOT_ARMED: u8 = 0;
const ARMED: u8 = 1;
const OVER: u8 = 2;

thread_local! {
    // A const Cell has no destructor: readable while the thread's other thread-locals are being
    // destroyed.
    static LOG_STATE: std::cell::Cell<u8> = const { std::cell::Cell::new(NOT_ARMED) };
    static ALIVE: AliveGuard = const { AliveGuard };
}

/// Its destruction marks the thread's logging as over. Set up after the thread's first event
/// (when the formatter's buffer exists): thread-local destructors run in reverse order of
/// registration, so it goes before the buffer, and no event reaches the formatter without it.
struct AliveGuard;

impl Drop for AliveGuard {
    fn drop(&mut self) {
        let _ = LOG_STATE.try_with(|s| s.set(OVER));
    }
}

/// Whether this thread may still log.
fn thread_alive() -> bool {
    LOG_STATE.try_with(|s| s.get() != OVER).unwrap_or(false)
}

/// `inner`, silent once [`super::exiting`] is true, and on a thread whose thread-locals are
/// being destroyed.
pub(crate) struct ExitSafe<S>(pub S);

impl<S: Subscriber> Subscriber for ExitSafe<S> {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // Never cached as "always": every event then asks `enabled`, which checks for the exit.
        let interest = self.0.register_callsite(metadata);
        if interest.is_never() {
            interest
        } else {
            Interest::sometimes()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        !super::exiting() && thread_alive() && self.0.enabled(metadata)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        self.0.max_level_hint()
    }

    fn new_span(&self, span: &span::Attributes<'_>) -> span::Id {
        self.0.new_span(span)
    }

    fn record(&self, span: &span::Id, values: &span::Record<'_>) {
        self.0.record(span, values)
    }

    fn record_follows_from(&self, span: &span::Id, follows: &span::Id) {
        self.0.record_follows_from(span, follows)
    }

    fn event(&self, event: &Event<'_>) {
        if super::exiting() || !thread_alive() {
            return;
        }
        self.0.event(event);
        let _ = LOG_STATE.try_with(|s| {
            if s.get() == NOT_ARMED && ALIVE.try_with(|_| ()).is_ok() {
                s.set(ARMED);
            }
        });
    }

    fn enter(&self, span: &span::Id) {
        self.0.enter(span)
    }

    fn exit(&self, span: &span::Id) {
        self.0.exit(span)
    }

    fn clone_span(&self, id: &span::Id) -> span::Id {
        self.0.clone_span(id)
    }

    fn try_close(&self, id: span::Id) -> bool {
        self.0.try_close(id)
    }
}

/// Runs `f` once per `flag`: the first time it is called with it.
pub(crate) fn log_once(flag: &AtomicBool, f: impl FnOnce()) {
    if !flag.swap(true, Ordering::Relaxed) {
        f();
    }
}
