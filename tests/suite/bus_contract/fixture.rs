//! The two backends behind one `Fixture` (bus + what keeps it alive + a simulated restart),
//! and the small waiting helpers every contract case uses.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hermes::bus::embedded::EmbeddedBus;
use hermes::bus::nats::NatsBus;
use hermes::bus::{
    DurableConsumer, DurableMessage, DurableOptions, Message, SharedBus, Subscription,
};
use tempfile::TempDir;
use tokio::sync::mpsc;

use crate::common::nats_server::NatsServer;

/// Longest wait for something that should happen.
pub const WAIT: Duration = Duration::from_secs(15);

pub fn short_ack(ack_wait_ms: u64) -> DurableOptions {
    DurableOptions {
        ack_wait: Duration::from_millis(ack_wait_ms),
        max_deliver: 10,
        ..Default::default()
    }
}

/// A bus plus whatever keeps it alive, and a way to simulate a restart.
pub struct Fixture {
    pub bus: SharedBus,
    backend: Backend,
}

enum Backend {
    Embedded(TempDir),
    Nats(NatsServer),
}

impl Fixture {
    pub async fn embedded() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bus = open_embedded(&dir).await;
        Self {
            bus,
            backend: Backend::Embedded(dir),
        }
    }

    pub async fn nats() -> Self {
        let server = tokio::task::block_in_place(NatsServer::start);
        let bus: SharedBus = std::sync::Arc::new(NatsBus::connect(&server.url()).await.unwrap());
        Self {
            bus,
            backend: Backend::Nats(server),
        }
    }

    /// The NATS server's URL (none for the embedded bus).
    pub fn nats_url(&self) -> Option<String> {
        match &self.backend {
            Backend::Nats(server) => Some(server.url()),
            Backend::Embedded(_) => None,
        }
    }

    /// Embedded: drop the bus and its sled database, reopen the same directory.
    /// NATS: restart nats-server on the same port and store, connect a new client.
    pub async fn restart(self) -> Self {
        let Self { bus, backend } = self;
        assert_eq!(
            std::sync::Arc::strong_count(&bus),
            1,
            "the test still holds the bus; drop every clone before restarting"
        );
        drop(bus);
        match backend {
            Backend::Embedded(dir) => Self {
                bus: open_embedded(&dir).await,
                backend: Backend::Embedded(dir),
            },
            Backend::Nats(mut server) => {
                tokio::task::block_in_place(|| server.restart());
                let bus = NatsBus::connect(&server.url()).await.unwrap();
                Self {
                    bus: std::sync::Arc::new(bus),
                    backend: Backend::Nats(server),
                }
            }
        }
    }
}

/// Open the embedded bus on `dir`. After a simulated restart, sled's own flush threads may
/// hold the old handle (and its file lock) for a few more milliseconds: retry briefly.
pub async fn open_embedded(dir: &TempDir) -> SharedBus {
    let deadline = Instant::now() + WAIT;
    let db = loop {
        match sled::open(dir.path().join("db")) {
            Ok(db) => break db,
            Err(err) if Instant::now() < deadline => {
                eprintln!("sled not released yet ({err}), retrying");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => panic!("cannot reopen sled (is an old handle still alive?): {err}"),
        }
    };
    std::sync::Arc::new(EmbeddedBus::open(db.into()).unwrap())
}

pub async fn recv(sub: &mut Subscription) -> Message {
    tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("no message within WAIT")
        .expect("subscription ended")
}

pub async fn next_durable(consumer: &mut DurableConsumer) -> DurableMessage {
    tokio::time::timeout(WAIT, consumer.next())
        .await
        .expect("no durable message within WAIT")
        .expect("consumer ended")
        .expect("consumer error")
}

pub async fn assert_no_durable(consumer: &mut DurableConsumer, within: Duration) {
    if let Ok(Some(item)) = tokio::time::timeout(within, consumer.next()).await {
        panic!("expected no delivery, got {item:?}");
    }
}

pub fn text(payload: &Bytes) -> String {
    String::from_utf8(payload.to_vec()).unwrap()
}

/// Forward every message of `sub` to `tx`, tagged with `member`.
pub fn forward(mut sub: Subscription, member: usize, tx: mpsc::UnboundedSender<(usize, String)>) {
    tokio::spawn(async move {
        while let Some(message) = sub.next().await {
            if tx.send((member, text(&message.payload))).is_err() {
                break;
            }
        }
    });
}

/// Collect exactly `count` forwarded messages, then check nothing more arrives shortly after.
pub async fn collect(
    rx: &mut mpsc::UnboundedReceiver<(usize, String)>,
    count: usize,
) -> Vec<(usize, String)> {
    let mut got = Vec::new();
    while got.len() < count {
        let item = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of {count} messages arrived", got.len()))
            .unwrap();
        got.push(item);
    }
    let extra = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
    assert!(extra.is_err(), "unexpected extra message {extra:?}");
    got
}
