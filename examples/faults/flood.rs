//! Bad input under load: malformed, oversized and mis-addressed envelopes on the subjects an
//! outside publisher can reach. Every fifth one is a request, whose reply must be an error;
//! none may start a turn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hermes::bus::SharedBus;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::UserMessage;
use serde_json::{json, Value};

use crate::drive::AGENT;

/// What the flood saw.
#[derive(Debug, Default)]
pub struct Flooded {
    pub sent: usize,
    pub requests: usize,
    /// Requests answered `accepted` (each a fault).
    pub accepted: usize,
    /// Requests answered with an error envelope.
    pub refused: usize,
    /// Requests with no reply in time.
    pub unanswered: usize,
}

/// One bad envelope: (subject, payload). `sessions` are sessions that exist (their user is
/// `u-<session>`), so a message under another user's name is a hijack attempt.
fn bad(i: usize, sessions: &[String]) -> (String, Bytes) {
    let session = &sessions[i % sessions.len()];
    let inbound = format!("hermes.in.{AGENT}.{session}");
    let good = |text: String| {
        Envelope::request(UserMessage::text(text)).for_session(
            AGENT,
            session,
            Some(&format!("u-{session}")),
        )
    };
    let encode = |envelope: &Envelope<UserMessage>| envelope.encode().unwrap_or_default();
    let value = |envelope: &Envelope<UserMessage>| -> Value {
        serde_json::to_value(envelope).unwrap_or(Value::Null)
    };
    match i % 12 {
        0 => (
            inbound,
            Bytes::from(vec![0xff, 0xfe, 0x00, (i % 251) as u8]),
        ),
        1 => (inbound, Bytes::from_static(b"{not json")),
        2 => (
            inbound,
            Bytes::from(json!({"hello": "world", "n": i}).to_string()),
        ),
        3 => {
            let mut v = value(&good("wrong version".into()));
            v["v"] = json!(99);
            (inbound, Bytes::from(v.to_string()))
        }
        4 => {
            let mut v = value(&good("no text".into()));
            v["body"] = json!({"txet": "typo"});
            (inbound, Bytes::from(v.to_string()))
        }
        5 => (inbound, encode(&good("x".repeat(20_000)))),
        6 => (inbound, encode(&good("y".repeat(5_000)))),
        7 => {
            let mut envelope = good("addressed elsewhere".into());
            envelope.session = Some(format!("other{i}"));
            (inbound, encode(&envelope))
        }
        8 => {
            let mut envelope = good("unknown agent".into());
            envelope.agent = Some("nobody".into());
            (format!("hermes.in.nobody.{session}"), encode(&envelope))
        }
        9 => {
            let mut envelope = good("bad ids".into());
            envelope.user = Some("u ser".into());
            (format!("{inbound}.extra"), encode(&envelope))
        }
        10 => {
            let mut envelope = good("hijack".into());
            envelope.user = Some("mallory".into());
            (inbound, encode(&envelope))
        }
        _ => {
            let services = [
                "hermes.plan",
                "hermes.tool.add",
                "hermes.memory.recall",
                "hermes.mcp.call",
            ];
            (
                services[(i / 12) % services.len()].to_string(),
                Bytes::from_static(b"{\"v\":1,\"kind\":\"garbage\"}"),
            )
        }
    }
}

/// Send `count` bad envelopes to the sessions' subjects, 32 requests at a time.
pub async fn flood(bus: &SharedBus, sessions: &[String], count: usize) -> Flooded {
    let accepted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let unanswered = Arc::new(AtomicUsize::new(0));
    let mut requests = 0;
    let mut pending = Vec::new();
    for i in 0..count {
        let (subject, payload) = bad(i, sessions);
        if i % 5 == 0 {
            requests += 1;
            let (bus, accepted, refused, unanswered) = (
                bus.clone(),
                accepted.clone(),
                refused.clone(),
                unanswered.clone(),
            );
            pending.push(async move {
                match bus
                    .request(&subject, payload, Duration::from_secs(10))
                    .await
                {
                    Ok(reply) => {
                        let kind = serde_json::from_slice::<Value>(&reply)
                            .ok()
                            .and_then(|v| v["kind"].as_str().map(str::to_string));
                        if kind.as_deref() == Some("accepted") {
                            accepted.fetch_add(1, Ordering::Relaxed);
                        } else {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        unanswered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        } else {
            let _ = bus.publish(&subject, payload).await;
        }
    }
    futures::stream::iter(pending)
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    let _ = bus.flush().await;
    Flooded {
        sent: count,
        requests,
        accepted: accepted.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        unanswered: unanswered.load(Ordering::Relaxed),
    }
}
