//! Key-value buckets every copy of a service reaches: on NATS, JetStream KV buckets (replicated
//! like the streams); the state one copy writes there (a reserved idempotency key, a job's
//! state, a raw tool output) is what every other copy reads.

use async_trait::async_trait;
use bytes::Bytes;

use super::BusError;

/// Whether `key` may name an entry: letters, digits, `-`, `_`, `=`, `.` and `/`, not starting
/// or ending with `.` (what a JetStream KV key allows). Ids a model passes in are checked
/// with this before they are looked up.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=' | '.' | '/'))
}

/// One bucket.
#[async_trait]
pub trait SharedKv: Send + Sync {
    /// Store `value` under `key` only if the key holds nothing. False when it holds anything
    /// but `value`: of two copies racing on one key with different values, exactly one gets
    /// true. A key found holding exactly `value` counts as created — it is this writer's own
    /// earlier attempt, whose answer was lost in a failover — so a writer that needs one
    /// winner gives each attempt a value of its own (a reservation carries its time).
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError>;
    /// Create or open the bucket itself (done on first use otherwise).
    async fn open(&self) -> Result<(), BusError> {
        Ok(())
    }
    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError>;
    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError>;
    async fn delete(&self, key: &str) -> Result<(), BusError>;
    /// [`Self::put`], tried through a failover until `by` (rather than for the backend's
    /// usual while) and never past it: for a write others stop waiting for at `by`.
    async fn put_by(
        &self,
        key: &str,
        value: Bytes,
        by: tokio::time::Instant,
    ) -> Result<(), BusError> {
        by_deadline(key, by, self.put(key, value)).await
    }
    /// [`Self::delete`], tried until `by` as [`Self::put_by`].
    async fn delete_by(&self, key: &str, by: tokio::time::Instant) -> Result<(), BusError> {
        by_deadline(key, by, self.delete(key)).await
    }
}

/// `write`, given up at `by`.
async fn by_deadline(
    key: &str,
    by: tokio::time::Instant,
    write: impl std::future::Future<Output = Result<(), BusError>>,
) -> Result<(), BusError> {
    tokio::time::timeout_at(by, write)
        .await
        .unwrap_or_else(|_| Err(BusError::Storage(late(key))))
}

/// What a write to `key` not acknowledged by its deadline reports.
pub fn late(key: &str) -> String {
    format!(
        "the write of key {key} was not acknowledged in time, and whoever waits for it has \
         stopped waiting; is the NATS cluster up and electing its stream leaders?"
    )
}

/// The entry under `key`, or none when the key holds nothing or could never name an entry
/// (ids a model passes in are looked up this way).
pub async fn lookup(bucket: &dyn SharedKv, key: &str) -> Result<Option<Bytes>, BusError> {
    if !is_valid_key(key) {
        return Ok(None);
    }
    bucket.get(key).await
}

impl std::fmt::Debug for dyn SharedKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedKv")
    }
}
