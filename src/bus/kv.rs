//! Key-value buckets every copy of a service reaches: on NATS, JetStream KV buckets (replicated
//! like the streams); the state one copy writes there (a reserved idempotency key, a job's
//! state, a raw tool output) is what every other copy reads.

use async_trait::async_trait;
use bytes::Bytes;

use super::BusError;

/// One bucket.
#[async_trait]
pub trait SharedKv: Send + Sync {
    /// Store `value` under `key` only if the key holds nothing. False when it already does:
    /// of two copies racing on one key, exactly one gets true.
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError>;
    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError>;
    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError>;
    async fn delete(&self, key: &str) -> Result<(), BusError>;
}
