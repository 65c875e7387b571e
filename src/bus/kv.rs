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
    /// Store `value` under `key` only if the key holds nothing. False when it already does:
    /// of two copies racing on one key, exactly one gets true.
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError>;
    /// Create or open the bucket itself (done on first use otherwise).
    async fn open(&self) -> Result<(), BusError> {
        Ok(())
    }
    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError>;
    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError>;
    async fn delete(&self, key: &str) -> Result<(), BusError>;
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
