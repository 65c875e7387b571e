//! The trace context in NATS message headers: the publisher's current span goes out as a
//! W3C `traceparent` header (on publishes, requests, durable and inbox messages), and comes
//! back out of the headers of what arrives. While this process exports no traces nothing is
//! added (no header map is built) and nothing is read.

use async_nats::HeaderMap;

use crate::telemetry::trace_context::{self, TRACEPARENT};

/// Headers carrying the current span's context; `None` when there is none to send.
pub fn headers() -> Option<HeaderMap> {
    trace_context::current().map(|traceparent| with_traceparent(&traceparent))
}

/// Add the current span's context to `headers`, if there is one.
pub fn add(headers: &mut HeaderMap) {
    if let Some(traceparent) = trace_context::current() {
        headers.insert(TRACEPARENT, traceparent.as_str());
    }
}

/// The sender's context from a received message's headers, when this process exports traces.
pub fn received(headers: Option<&HeaderMap>) -> Option<String> {
    if !trace_context::enabled() {
        return None;
    }
    traceparent_in(headers?)
}

fn with_traceparent(traceparent: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(TRACEPARENT, traceparent);
    headers
}

fn traceparent_in(headers: &HeaderMap) -> Option<String> {
    headers
        .get(TRACEPARENT)
        .map(|value| value.as_str().to_string())
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_traceparent_header_goes_out_and_is_read_back() {
        let headers = with_traceparent(PARENT);
        assert_eq!(traceparent_in(&headers).as_deref(), Some(PARENT));
        // What the receiving side hands its span: the same remote parent.
        let parent = trace_context::extract(&traceparent_in(&headers).unwrap()).unwrap();
        let back = trace_context::inject(&parent).unwrap();
        assert_eq!(back, PARENT);
    }

    #[test]
    fn a_message_without_the_header_has_no_context() {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, "m1");
        assert_eq!(traceparent_in(&headers), None);
        assert_eq!(received(None), None);
    }

    #[test]
    fn nothing_is_sent_while_no_traces_are_exported() {
        // Unit tests install no exporter.
        let span = tracing::info_span!("turn");
        let _entered = span.enter();
        assert!(headers().is_none());
        let mut map = HeaderMap::new();
        add(&mut map);
        assert!(map.get(TRACEPARENT).is_none());
    }
}
