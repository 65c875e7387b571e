//! A tap on every message the NATS server carries (`>`), counted by kind: what `hermes bench`
//! reports as `bus_msgs_by_kind`. It is a connection of its own, so what it counts is the
//! deployment's traffic as the server routes it — envelopes on `hermes.*`, JetStream API calls,
//! acks, KV operations, replies — not one process's view. Delivering every message once more
//! costs the server CPU: open a tap for a counted pass, never for a timed one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;

use super::AbortOnDrop;
use crate::bus::auth::NatsAuth;
use crate::bus::BusError;

/// Counts every message the server routes, by [`kind_of`] its subject, until dropped.
pub struct MessageTap {
    client: async_nats::Client,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    _reader: AbortOnDrop,
}

impl MessageTap {
    /// Connect to `url` as `credentials` allow and subscribe to `>`. The credentials need
    /// permission to subscribe to everything (a least-privilege identity cannot tap).
    pub async fn start(url: &str, credentials: &NatsAuth) -> Result<Self, BusError> {
        let failed = |reason: String| BusError::Connect {
            url: url.to_string(),
            reason,
        };
        let servers: Vec<&str> = url
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let options = async_nats::ConnectOptions::new()
            .name("hermes-tap")
            .connection_timeout(super::CONNECT_TIMEOUT);
        let options = super::auth::apply(options, credentials)
            .await
            .map_err(|error| BusError::Credentials {
                url: url.to_string(),
                error,
            })?;
        let client = options
            .connect(servers.as_slice())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut all = client
            .subscribe(">")
            .await
            .map_err(|e| failed(format!("cannot subscribe to `>` to count messages: {e}")))?;
        client
            .flush()
            .await
            .map_err(|e| failed(format!("the tap's subscription was not confirmed: {e}")))?;
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let counting = counts.clone();
        let reader = tokio::spawn(async move {
            while let Some(message) = all.next().await {
                *counting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(kind_of(message.subject.as_str()))
                    .or_insert(0) += 1;
            }
        });
        Ok(Self {
            client,
            counts,
            _reader: AbortOnDrop(reader),
        })
    }

    /// The counts so far. A round trip to the server first, so every message it routed before
    /// this call has reached the tap; then a moment for the reader to count them.
    pub async fn counts(&self) -> BTreeMap<String, u64> {
        if let Err(e) = self.client.flush().await {
            tracing::warn!(error = %e, "the message tap could not reach the server; counts may be short");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The kind of JetStream's advisories and metrics (`$JS.EVENT.>`). The server publishes them
/// only to a subject someone listens on, and the tap listens on everything: without a tap a
/// deployment carries none (a traced run without it shows no `$JS.EVENT` message), so they are
/// reported apart and left out of a turn's total.
pub const TAP_CAUSED: &str = "js.event (advisories, sent only because the tap listens)";

/// The kind a subject is counted under: Hermes subjects by their family
/// (`hermes.in`, `hermes.memory.recall`, …), JetStream API calls by operation
/// (`$JS.API.CONSUMER.MSG.NEXT.s.c` → `js.api.consumer.msg`), acks, flow control, KV buckets
/// and replies to inboxes; stream and consumer names, sessions and ids are dropped.
pub fn kind_of(subject: &str) -> String {
    let tokens: Vec<&str> = subject.split('.').collect();
    let lower = |t: &[&str]| t.join(".").to_ascii_lowercase();
    match tokens.as_slice() {
        ["$JS", "API", rest @ ..] => format!("js.api.{}", lower(&rest[..rest.len().min(2)])),
        ["$JS", "ACK", ..] => "js.ack".into(),
        ["$JS", "FC", ..] => "js.flow_control".into(),
        ["$JS", "EVENT", ..] => TAP_CAUSED.into(),
        ["$KV", bucket, ..] => format!("kv.{bucket}"),
        ["_INBOX", ..] => "inbox (replies, pulled messages)".into(),
        ["hermes", family @ ("memory" | "mcp" | "tools" | "sessions" | "jobs" | "audit"), verb, ..] =>
        {
            format!("hermes.{family}.{verb}")
        }
        ["hermes", family, ..] => format!("hermes.{family}"),
        [first, ..] => (*first).to_string(),
        [] => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::kind_of;

    #[test]
    fn subjects_are_counted_by_family_without_names_or_ids() {
        assert_eq!(kind_of("hermes.in.assistant.p3"), "hermes.in");
        assert_eq!(kind_of("hermes.out.assistant.s1._"), "hermes.out");
        assert_eq!(kind_of("hermes.memory.recall"), "hermes.memory.recall");
        assert_eq!(kind_of("hermes.plan"), "hermes.plan");
        assert_eq!(
            kind_of("$JS.API.CONSUMER.MSG.NEXT.HERMES_IN.sessions"),
            "js.api.consumer.msg"
        );
        assert_eq!(
            kind_of("$JS.API.STREAM.INFO.HERMES_LOG"),
            "js.api.stream.info"
        );
        assert_eq!(kind_of("$JS.API.INFO"), "js.api.info");
        assert_eq!(kind_of("$JS.ACK.HERMES_IN.sessions.1.2.3.4.5"), "js.ack");
        assert_eq!(kind_of("$KV.hermes_jobs.j-1"), "kv.hermes_jobs");
        assert_eq!(
            kind_of("$JS.EVENT.ADVISORY.API"),
            super::TAP_CAUSED,
            "advisories exist only for a listener"
        );
        assert_eq!(
            kind_of("_INBOX.abc.def"),
            "inbox (replies, pulled messages)"
        );
    }
}
