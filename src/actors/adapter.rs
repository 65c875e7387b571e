//! Bridges bus subscriptions into actor mailboxes.
//!
//! The loops here run on the multi-threaded I/O runtime, never on an actix arbiter: they read a
//! subscription and hand each message to an actor's `Recipient`. [`serve`] answers requests
//! (each message handled concurrently); [`forward`] keeps arrival order and does not answer.

use actix::prelude::*;
use bytes::Bytes;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::bus::{BusError, SharedBus, Subscription};

/// A bus message delivered to an actor. The actor's answer, if any, is sent to the reply
/// subject.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Option<Bytes>")]
pub struct Incoming {
    pub subject: String,
    pub reply: Option<String>,
    pub payload: Bytes,
}

/// Subscribe `pattern` (in queue `group`, if any) and answer each request with the actor's
/// reply. Requests are handled concurrently.
pub async fn serve(
    io: &Handle,
    bus: SharedBus,
    pattern: &str,
    group: Option<&str>,
    recipient: Recipient<Incoming>,
) -> Result<JoinHandle<()>, BusError> {
    let sub = subscribe(&bus, pattern, group).await?;
    let pattern = pattern.to_string();
    let spawner = io.clone();
    Ok(io.spawn(serve_loop(spawner, bus, pattern, sub, recipient)))
}

async fn serve_loop(
    io: Handle,
    bus: SharedBus,
    pattern: String,
    mut sub: Subscription,
    recipient: Recipient<Incoming>,
) {
    while let Some(msg) = sub.next().await {
        let bus = bus.clone();
        let recipient = recipient.clone();
        io.spawn(async move {
            let reply_to = msg.reply.clone();
            let incoming = Incoming {
                subject: msg.subject,
                reply: msg.reply,
                payload: msg.payload,
            };
            match recipient.send(incoming).await {
                Ok(Some(answer)) => {
                    if let Some(reply) = reply_to {
                        if let Err(e) = bus.publish(&reply, answer).await {
                            tracing::warn!(error = %e, "could not send a reply");
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "actor is gone; request dropped"),
            }
        });
    }
    tracing::debug!(pattern, "subscription closed");
}

/// Subscribe `pattern` and hand every message, in arrival order, to the actor.
pub async fn forward(
    io: &Handle,
    bus: SharedBus,
    pattern: &str,
    group: Option<&str>,
    recipient: Recipient<Incoming>,
) -> Result<JoinHandle<()>, BusError> {
    let mut sub = subscribe(&bus, pattern, group).await?;
    let pattern = pattern.to_string();
    Ok(io.spawn(async move {
        while let Some(msg) = sub.next().await {
            let incoming = Incoming {
                subject: msg.subject,
                reply: msg.reply,
                payload: msg.payload,
            };
            if recipient.send(incoming).await.is_err() {
                tracing::warn!(pattern, "actor is gone; stop forwarding");
                break;
            }
        }
    }))
}

async fn subscribe(
    bus: &SharedBus,
    pattern: &str,
    group: Option<&str>,
) -> Result<Subscription, BusError> {
    match group {
        Some(g) => bus.queue_subscribe(pattern, g).await,
        None => bus.subscribe(pattern).await,
    }
}
