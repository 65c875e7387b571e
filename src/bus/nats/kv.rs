//! [`SharedKv`] on a JetStream KV bucket, created on first use with the cluster's replicas.

use async_nats::jetstream::kv::{Config, CreateErrorKind, Store};
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, StorageType};
use async_nats::jetstream::Context;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::jetstream::{through_failover, through_failover_until, while_forming};
use crate::bus::kv::SharedKv;
use crate::bus::BusError;

pub struct NatsKv {
    jetstream: Context,
    bucket: String,
    replicas: usize,
    max_age: Option<Duration>,
    store: OnceCell<Store>,
}

impl NatsKv {
    pub fn new(
        jetstream: Context,
        bucket: &str,
        replicas: usize,
        max_age: Option<Duration>,
    ) -> Self {
        Self {
            jetstream,
            bucket: bucket.to_string(),
            replicas,
            max_age,
            store: OnceCell::new(),
        }
    }

    fn error(&self, what: &str, err: impl std::fmt::Display) -> BusError {
        BusError::Storage(format!(
            "{what} in bucket {}: {err}; is JetStream enabled (nats-server -js), with as many \
             nodes as cluster.replicas?",
            self.bucket
        ))
    }

    async fn store(&self) -> Result<&Store, BusError> {
        self.store
            .get_or_try_init(|| async {
                if let Ok(store) = self.jetstream.get_key_value(&self.bucket).await {
                    return Ok(store);
                }
                let config = Config {
                    bucket: self.bucket.clone(),
                    history: 1,
                    storage: StorageType::File,
                    num_replicas: self.replicas.max(1),
                    max_age: self.max_age.unwrap_or_default(),
                    ..Default::default()
                };
                while_forming("creating a key-value bucket", || {
                    self.jetstream.create_key_value(config.clone())
                })
                .await
                .map_err(|e| self.error("cannot create the bucket", e))
            })
            .await
    }
}

#[async_trait]
impl SharedKv for NatsKv {
    /// A bucket with replicas cannot be created while one of its nodes is down: opening it at
    /// start keeps that out of the first call's way.
    async fn open(&self) -> Result<(), BusError> {
        self.store().await.map(|_| ())
    }

    /// A create whose answer was lost in a failover finds the key its own write stored: the
    /// key then holds exactly `value`, and counts as created.
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
        let store = self.store().await?;
        let created = through_failover("creating a key", || store.create(key, value.clone())).await;
        // A clustered stream answers a failed create with error code 10164 ("wrong last
        // sequence"), which the client reports as another error rather than AlreadyExists.
        let exists = |e: &async_nats::jetstream::kv::CreateError| {
            e.kind() == CreateErrorKind::AlreadyExists
                || e.to_string().contains("wrong last sequence")
        };
        match created {
            Ok(_) => Ok(true),
            // Taken, perhaps by this very create: when the write's answer is lost, the client's
            // create reads the key and reports what the write itself stored as AlreadyExists
            // (and a retried attempt finds what the lost one wrote).
            Err(e) if exists(&e) => Ok(self.get(key).await?.as_ref() == Some(&value)),
            Err(e) => Err(self.error(&format!("cannot create key {key}"), e)),
        }
    }

    /// Read from the bucket's stream leader. The client's own `get` is a direct get, which
    /// any replica answers: a follower still catching up (a node just restarted) answers with
    /// an older value or none, and a copy would miss what another copy has just written (a
    /// queued job's record, a reserved idempotency key).
    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
        let store = self.store().await?;
        let subject = format!("{}{key}", store.prefix);
        let read = through_failover("reading a key", || {
            store.stream.get_last_raw_message_by_subject(&subject)
        })
        .await;
        match read {
            Ok(message) => Ok(holds_value(&message).then_some(message.payload)),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(self.error(&format!("cannot read key {key}"), e)),
        }
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError> {
        let store = self.store().await?;
        through_failover("writing a key", || store.put(key, value.clone()))
            .await
            .map(|_| ())
            .map_err(|e| self.error(&format!("cannot write key {key}"), e))
    }

    async fn delete(&self, key: &str) -> Result<(), BusError> {
        let store = self.store().await?;
        through_failover("deleting a key", || store.delete(key))
            .await
            .map_err(|e| self.error(&format!("cannot delete key {key}"), e))
    }

    async fn put_by(&self, key: &str, value: Bytes, by: Instant) -> Result<(), BusError> {
        let store = self.store().await?;
        let late = || crate::bus::kv::late(key);
        through_failover_until("writing a key", by, late, || {
            let put = store.put(key, value.clone());
            async move { put.await.map(|_| ()).map_err(|e| e.to_string()) }
        })
        .await
        .map_err(|e| self.error(&format!("cannot write key {key}"), e))
    }

    async fn delete_by(&self, key: &str, by: Instant) -> Result<(), BusError> {
        let store = self.store().await?;
        let late = || crate::bus::kv::late(key);
        through_failover_until("deleting a key", by, late, || {
            let delete = store.delete(key);
            async move { delete.await.map_err(|e| e.to_string()) }
        })
        .await
        .map_err(|e| self.error(&format!("cannot delete key {key}"), e))
    }
}

/// Whether a bucket's message is a value, not the marker a delete or purge leaves.
fn holds_value(message: &StreamMessage) -> bool {
    !message
        .headers
        .get(KV_OPERATION)
        .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"))
}

/// The header a KV delete or purge marks its message with.
const KV_OPERATION: &str = "KV-Operation";
