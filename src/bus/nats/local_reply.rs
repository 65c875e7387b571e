//! This process's in-process reply inbox, for the requests it hands to a service of its own
//! that answers later, by publishing to the reply subject (the session router: the session
//! acknowledges the message once it is stored; see [`super::local`]).
//!
//! The inbox is a real NATS subject, `<inbox prefix>.<nuid>.<token>`, subscribed once: a
//! session owned by another process answers over NATS as it would any publisher. A reply
//! published by this very process (the session is owned here) is handed over in-process
//! instead: no message through the server, no wake-up of the connection's reader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::AbortOnDrop;
use crate::bus::{BusError, Handler, Message};

type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<Bytes>>>>;

fn lock(waiting: &Waiting) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Bytes>>> {
    waiting.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reply subjects of this process's in-process requests and who waits on each.
pub struct LocalReplies {
    /// `<inbox prefix>.<nuid>.`: every reply subject starts with it.
    prefix: String,
    next: AtomicU64,
    waiting: Waiting,
    _listener: AbortOnDrop,
}

impl LocalReplies {
    /// Subscribe to this process's reply subjects (on `runtime`, the connection's).
    pub async fn start(client: &async_nats::Client, runtime: &Handle) -> Result<Self, BusError> {
        let prefix = format!("{}.", client.new_inbox());
        let mut replies = client.subscribe(format!("{prefix}*")).await.map_err(|e| {
            BusError::Io(format!(
                "cannot subscribe to this process's reply inbox `{prefix}*`: {e}; check that \
                     nats-server is reachable and this user may subscribe to its inbox prefix"
            ))
        })?;
        let waiting = Waiting::default();
        let routing = waiting.clone();
        let listener = runtime.spawn(async move {
            while let Some(reply) = replies.next().await {
                hand_over(&routing, reply.subject.as_str(), reply.payload);
            }
        });
        Ok(Self {
            prefix,
            next: AtomicU64::new(0),
            waiting,
            _listener: AbortOnDrop(listener),
        })
    }

    /// A new reply subject and the reply that will come to it; dropping the [`Pending`]
    /// forgets the subject.
    pub fn expect(&self) -> (String, Pending) {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let subject = format!("{}{token}", self.prefix);
        let (send, receive) = oneshot::channel();
        lock(&self.waiting).insert(subject.clone(), send);
        let pending = Pending {
            receive,
            subject: subject.clone(),
            waiting: self.waiting.clone(),
        };
        (subject, pending)
    }

    /// Hand `payload` over in-process when `subject` is one of this process's reply subjects
    /// (true; a reply to a request that gave up is dropped, as the server would drop it), or
    /// leave it to NATS (false).
    pub fn deliver(&self, subject: &str, payload: &Bytes) -> bool {
        if !subject.starts_with(&self.prefix) {
            return false;
        }
        hand_over(&self.waiting, subject, payload.clone());
        true
    }
}

impl LocalReplies {
    /// A request that a router of this process takes ([`super::local`]): handed to it
    /// in-process, on `runtime` (the connection's, as a message from NATS would be, whatever
    /// runtime asks: a session actor's arbiter delegating); its answer comes either at once (a
    /// refusal) or later on this inbox, from whichever process owns the session.
    pub async fn request(
        &self,
        runtime: &Handle,
        router: Arc<dyn Handler>,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Failed> {
        let started = tokio::time::Instant::now();
        let (reply, pending) = self.expect();
        let message = Message {
            subject: subject.to_string(),
            reply: Some(reply),
            payload,
            traceparent: crate::telemetry::trace_context::current(),
            local: None,
        };
        let routing = runtime.spawn(async move { router.handle(message).await }.in_current_span());
        let answered = tokio::time::timeout(timeout, routing)
            .await
            .map_err(|_| Failed::TimedOut)?
            .map_err(|e| Failed::Broken(format!("routing a message in-process failed: {e}")))?;
        if let Some(answer) = answered {
            return Ok(answer);
        }
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, pending.reply()).await {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err(Failed::Broken("this process's reply inbox closed".into())),
            Err(_) => Err(Failed::TimedOut),
        }
    }
}

/// Why an in-process request got no answer.
#[derive(Debug)]
pub enum Failed {
    TimedOut,
    Broken(String),
}

/// Give `payload` to whoever waits on `subject`; nobody does when the request gave up.
fn hand_over(waiting: &Waiting, subject: &str, payload: Bytes) {
    let waiter = lock(waiting).remove(subject);
    if let Some(waiter) = waiter {
        let _ = waiter.send(payload);
    }
}

/// The reply an in-process request waits for.
pub struct Pending {
    receive: oneshot::Receiver<Bytes>,
    subject: String,
    waiting: Waiting,
}

impl Pending {
    /// The reply, or `None` when the inbox closed (the bus was dropped).
    pub async fn reply(mut self) -> Option<Bytes> {
        (&mut self.receive).await.ok()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        lock(&self.waiting).remove(&self.subject);
    }
}
