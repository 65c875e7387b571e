//! Publish a business event for a trigger (`[[triggers]]` in the Hermes config) with its
//! dedupe id, and wait for the agent's answer on the trigger's `reply_subject`.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hermes_protocol::envelope::{Envelope, EnvelopeError};
use serde::Serialize;
use serde_json::Value;

use crate::{ClientError, Hermes};

/// The agent's answer to an event: the session that answered and its text.
#[derive(Debug, Clone)]
pub struct Reply {
    pub agent: Option<String>,
    pub session: Option<String>,
    pub text: String,
    pub envelope: Envelope<Value>,
}

/// Largest answer accepted.
const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

impl Hermes {
    /// Publish `event` (as JSON) on `subject` with `Nats-Msg-Id: <event_id>`, so JetStream
    /// and the trigger's `dedupe` handle a repeated event once; without an id, a fresh one.
    /// Returns the id used, once the event reached the server.
    pub async fn publish_event(
        &self,
        subject: &str,
        event: &impl Serialize,
        event_id: Option<&str>,
    ) -> Result<String, ClientError> {
        let event_id = match event_id {
            Some(id) => id.to_string(),
            None => format!("evt-{}", uuid::Uuid::new_v4().simple()),
        };
        let payload = serde_json::to_vec(event)
            .map_err(|e| EnvelopeError::Encode(format!("the event is not JSON: {e}")))?;
        self.transport
            .publish(subject, Bytes::from(payload), Some(&event_id))
            .await?;
        self.transport.flush().await?;
        Ok(event_id)
    }

    /// Subscribe to `reply_subject`, publish the event, and return the agent's answer.
    pub async fn publish_and_wait(
        &self,
        subject: &str,
        event: &impl Serialize,
        reply_subject: &str,
        event_id: Option<&str>,
        timeout: Duration,
    ) -> Result<Reply, ClientError> {
        let mut replies = self.transport.subscribe(reply_subject, None).await?;
        self.transport.flush().await?;
        self.publish_event(subject, event, event_id).await?;
        let msg = match tokio::time::timeout(timeout, replies.next()).await {
            Err(_) => return Err(ClientError::Timeout(timeout)),
            Ok(None) => return Err(ClientError::Closed),
            Ok(Some(msg)) => msg,
        };
        let envelope = Envelope::decode(&msg.payload, MAX_REPLY_BYTES)?;
        let text = envelope
            .body
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(Reply {
            agent: envelope.agent.clone(),
            session: envelope.session.clone(),
            text,
            envelope,
        })
    }
}
