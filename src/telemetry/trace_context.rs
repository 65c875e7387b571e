//! W3C trace context across process boundaries: the `traceparent` of the current span, to
//! put on what leaves the process (a NATS message header, an MCP request's `_meta`), and the
//! remote parent it names, for the span of what arrives.
//!
//! All of it is off while this process exports no traces ([`enabled`] is false until
//! [`super::otel`] installs an exporter): [`current`] then returns `None` after one atomic load,
//! so the bus adds nothing to a message and allocates nothing for it.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header (NATS) and `_meta` key (MCP) that carries the context.
pub const TRACEPARENT: &str = "traceparent";

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether this process exports traces (and so propagates their context).
pub fn enabled() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Turn propagation on (an exporter is installed) or off (it shut down).
pub(super) fn set_enabled(on: bool) {
    EXPORTING.store(on, Ordering::Relaxed);
}

/// The `traceparent` of the current span, or `None` — without allocating — when this process
/// exports no traces or no span is active.
pub fn current() -> Option<String> {
    if !enabled() {
        return None;
    }
    of_span(&tracing::Span::current())
}

/// The `traceparent` of `span`, if it is recorded as an OpenTelemetry span.
pub fn of_span(span: &tracing::Span) -> Option<String> {
    if !enabled() || span.is_none() {
        return None;
    }
    inject(&span.context())
}

/// The `traceparent` of `cx`'s span; `None` when it has no valid span.
pub fn inject(cx: &Context) -> Option<String> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = Carrier(None);
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.0
}

/// The remote parent `traceparent` names; `None` when it is malformed.
pub fn extract(traceparent: &str) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&Received(traceparent));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Make `span` a child of the remote span `traceparent` names (a message from another process,
/// an MCP request). Nothing happens without a (valid) `traceparent`, for a disabled span, or
/// while this process exports no traces.
pub fn follow(span: &tracing::Span, traceparent: Option<&str>) {
    if !enabled() || span.is_disabled() {
        return;
    }
    if let Some(parent) = traceparent.and_then(extract) {
        // Fails only without the OpenTelemetry layer, i.e. with nothing to export to.
        let _ = span.set_parent(parent);
    }
}

/// Takes the `traceparent` the propagator writes; `tracestate` is not carried.
struct Carrier(Option<String>);

impl Injector for Carrier {
    fn set(&mut self, key: &str, value: String) {
        if key == TRACEPARENT {
            self.0 = Some(value);
        }
    }
}

/// Offers one received `traceparent` to the propagator.
struct Received<'a>(&'a str);

impl Extractor for Received<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == TRACEPARENT).then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn remote(trace: u128, span: u64) -> Context {
        Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        ))
    }

    #[test]
    fn a_context_goes_out_as_traceparent_and_comes_back_the_same() {
        let cx = remote(
            0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c,
            0xb7ad_6b71_6920_3331,
        );
        let header = inject(&cx).unwrap();
        assert_eq!(header, PARENT);
        let back = extract(&header).unwrap();
        let (sent, got) = (cx.span().span_context().clone(), back.span());
        assert_eq!(got.span_context().trace_id(), sent.trace_id());
        assert_eq!(got.span_context().span_id(), sent.span_id());
        assert!(got.span_context().is_remote());
        assert!(got.span_context().is_sampled());
    }

    #[test]
    fn malformed_or_empty_contexts_are_ignored() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert!(extract(bad).is_none(), "{bad}");
        }
        assert_eq!(inject(&Context::new()), None);
    }
}
