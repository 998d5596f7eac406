//! libxhsa's logger: `tracing`'s formatter (filtered by `XHSA_LOG`, to stderr) behind a guard
//! that drops every event once the process exits. Libraries shut the runtime down and destroy
//! queues from their static destructors, after libxhsa's exit handler, when thread-local state
//! (the formatter's buffer among it) may already be gone: formatting an event then would panic,
//! and a panic in an exported C function aborts the application.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::span;
use tracing::subscriber::{Interest, Subscriber};
use tracing::{Event, Metadata};

/// `inner`, silent once [`super::exiting`] is true.
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
        !super::exiting() && self.0.enabled(metadata)
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
        if !super::exiting() {
            self.0.event(event)
        }
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
