//! Idempotency for `write` tools: the key of a call and the recorded results (sled tree
//! `tool_results_idem`, owned by the tool-executor).
//!
//! **Key**: `idem-` + hex SHA-256 of `session \x1f turn \x1f tool \x1f canonical arguments`,
//! where the canonical arguments are the validated arguments (repairs applied, `_user`
//! injected) as JSON with object keys sorted. Without a turn id the call id stands in, so
//! separate turns never share a key. **Value**: an [`IdemRecord`] as JSON: a reservation
//! (`reserved: true`, no result) written durably **before** the call runs, then the result
//! the first execution returned (for an async tool: its `{job_id, status}` submission).
//!
//! A call whose key is recorded gets the recorded result back (flagged `via =
//! "idempotent-replay"`) and does not run again. A call whose key is only reserved first
//! waits a while for that execution to settle ([`IdemStore::await_settled`]): on NATS a
//! request whose reply was lost is sent again while the first execution may still be running
//! or recording its result through a JetStream failover. If it settles, the call gets its
//! result (or, if it was released, runs); if it never does (the executor died mid-call), the
//! call is refused with an error saying so, never run a second time. A failed execution
//! releases its reservation, so a retry may run; one that timed out records its timeout (its
//! effect is unknown: it is not run again on the same key).
//!
//! An execution settles (records or releases) by a deadline, retrying through a failover
//! until then, and the copies waiting for it wait until about that deadline: see
//! [`IdemStore::record`]. One whose reservation write failed does not run the call and takes
//! back the reservation that write may have left ([`IdemStore::reserve`]).
//!
//! Where the records live: this process's sled, or with a NATS cluster the JetStream KV
//! bucket `hermes_idem`, whose create-only write makes exactly one of two racing copies the
//! one that runs the call.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::bus::kv::SharedKv;
use crate::protocol::ToolCallResult;
use crate::store::durability::Durable;
use crate::store::tool_result::StoredToolResult;
use crate::store::tree::Tree;
use crate::store::StoreError;

/// The sled tree of recorded results.
pub const TREE: &str = "tool_results_idem";
/// The shared bucket of recorded results on a NATS cluster.
pub const BUCKET: &str = "hermes_idem";
/// `via` of a result served from the record instead of a new execution.
pub const REPLAY_VIA: &str = "idempotent-replay";
const FIRST_POLL: Duration = Duration::from_millis(20);
const LONGEST_POLL: Duration = Duration::from_millis(500);

/// The idempotency key of a call (see the module doc).
pub fn idempotency_key(session: &str, turn_or_call: &str, tool: &str, arguments: &Value) -> String {
    let mut hasher = Sha256::new();
    for part in [session, turn_or_call, tool] {
        hasher.update(part.as_bytes());
        hasher.update([0x1f]);
    }
    hasher.update(canonical_json(arguments).as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("idem-{hex}")
}

/// JSON with every object's keys sorted, so equal arguments give equal text.
pub fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&map[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// A reservation, or a recorded result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdemRecord {
    /// Set while the call runs (or if it never finished); records written before
    /// reservations existed have none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<StoredToolResult>,
    pub recorded_at: DateTime<Utc>,
}

/// What [`IdemStore::reserve`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// The key is now reserved for this execution: run the call, then record or release.
    Reserved,
    /// An earlier execution recorded this result: return it, do not run.
    Recorded(Box<StoredToolResult>),
    /// An earlier execution reserved the key at `since` and recorded nothing.
    Pending { since: DateTime<Utc> },
}

#[derive(Debug, Clone)]
enum Backend {
    Local { tree: Tree, durable: Durable },
    Shared(Arc<dyn SharedKv>),
}

/// The idempotency records: the `tool_results_idem` tree, or a shared bucket.
#[derive(Debug, Clone)]
pub struct IdemStore {
    backend: Backend,
    /// Keys this process reserved and has not yet recorded or released: with the local tree,
    /// a reservation not in here was left by an executor that died.
    running: Arc<std::sync::Mutex<HashSet<String>>>,
}

fn encode(record: &IdemRecord) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(record).map_err(|e| StoreError::Encode(e.to_string()))
}

fn decode(key: &str, bytes: &[u8]) -> Result<IdemRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: format!("idempotency record {key}"),
        reason: e.to_string(),
    })
}

fn shared_error(e: crate::bus::BusError) -> StoreError {
    StoreError::Shared(e.to_string())
}

impl IdemStore {
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Local {
                tree: Tree::open(db, TREE)?,
                durable: db.clone(),
            },
            running: Arc::default(),
        })
    }

    /// Records kept in a bucket every copy of the tool-executor reaches.
    pub fn shared(bucket: Arc<dyn SharedKv>) -> Self {
        Self {
            backend: Backend::Shared(bucket),
            running: Arc::default(),
        }
    }

    /// Whether the execution holding a reserved `key` may still be running: with the local
    /// tree only this process runs calls, so only its own running keys; with a shared bucket
    /// any copy may hold it.
    pub fn may_be_running(&self, key: &str) -> bool {
        match self.backend {
            Backend::Local { .. } => self.running().contains(key),
            Backend::Shared(_) => true,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub async fn get(&self, key: &str) -> Result<Option<IdemRecord>, StoreError> {
        let bytes = match &self.backend {
            Backend::Local { tree, .. } => tree.get(key.as_bytes())?,
            Backend::Shared(bucket) => bucket
                .get(key)
                .await
                .map_err(shared_error)?
                .map(|b| b.to_vec()),
        };
        bytes.map(|b| decode(key, &b)).transpose()
    }

    /// Reserve `key` for an execution, durably, unless an earlier execution holds it.
    ///
    /// When the shared bucket fails the write, the caller does not run the call; but the
    /// write may have landed before its answer was lost, leaving a reservation nobody would
    /// settle, and a copy of the call sent again would wait for it and report its outcome as
    /// unknown. So such a reservation is taken back (until `by`), and that copy runs the call.
    pub async fn reserve(
        &self,
        key: &str,
        by: tokio::time::Instant,
    ) -> Result<Reservation, StoreError> {
        let reservation = encode(&IdemRecord {
            reserved: true,
            result: None,
            recorded_at: Utc::now(),
        })?;
        let created = match &self.backend {
            Backend::Local { tree, durable } => {
                let created = tree.insert_new(key.as_bytes(), &reservation)?.is_none();
                if created {
                    durable.commit().await?;
                }
                created
            }
            Backend::Shared(bucket) => {
                let ours = Bytes::from(reservation);
                match bucket.create(key, ours.clone()).await {
                    Ok(created) => created,
                    Err(e) => {
                        tracing::warn!(key, error = %e, "a write call's key could not be reserved; the call is not run, and a reservation the failed write may have left is taken back");
                        withdraw(bucket.as_ref(), key, &ours, by).await;
                        return Err(shared_error(e));
                    }
                }
            }
        };
        if created {
            self.running().insert(key.to_string());
            return Ok(Reservation::Reserved);
        }
        // Held by an earlier execution: what did it leave?
        match self.get(key).await? {
            Some(IdemRecord {
                result: Some(result),
                ..
            }) => Ok(Reservation::Recorded(Box::new(result))),
            Some(record) => Ok(Reservation::Pending {
                since: record.recorded_at,
            }),
            // Released between our write and our read: the caller may try again.
            None => Ok(Reservation::Pending { since: Utc::now() }),
        }
    }

    /// Wait up to `patience` for the execution holding `key` to settle. Its recorded result
    /// comes back as [`Reservation::Recorded`]; if it released the key, the key is reserved
    /// for this caller ([`Reservation::Reserved`]: run the call); if it is still pending when
    /// patience runs out, [`Reservation::Pending`].
    pub async fn await_settled(
        &self,
        key: &str,
        patience: Duration,
    ) -> Result<Reservation, StoreError> {
        let gives_up = tokio::time::Instant::now() + patience;
        let mut pause = FIRST_POLL;
        loop {
            let pending = match self.get(key).await? {
                Some(IdemRecord {
                    result: Some(result),
                    ..
                }) => return Ok(Reservation::Recorded(Box::new(result))),
                Some(record) => Reservation::Pending {
                    since: record.recorded_at,
                },
                None => match self.reserve(key, gives_up).await? {
                    pending @ Reservation::Pending { .. } => pending,
                    settled => return Ok(settled),
                },
            };
            if tokio::time::Instant::now() + pause > gives_up {
                return Ok(pending);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_POLL);
        }
    }

    /// Record `result` under `key` and make it durable before returning.
    ///
    /// With a shared bucket the write is tried again until `by` (a JetStream failover can
    /// outlast one write's own retries), and never past it. The executor picks `by` just
    /// before the copies waiting for this execution stop waiting ([`Self::await_settled`]),
    /// or later when the call itself ended late.
    pub async fn record(
        &self,
        key: &str,
        result: &ToolCallResult,
        by: tokio::time::Instant,
    ) -> Result<(), StoreError> {
        self.running().remove(key);
        let bytes = Bytes::from(encode(&IdemRecord {
            reserved: false,
            result: Some(result.into()),
            recorded_at: Utc::now(),
        })?);
        match &self.backend {
            Backend::Local { tree, durable } => {
                tree.insert(key.as_bytes(), bytes.as_ref())?;
                durable.commit().await?;
            }
            Backend::Shared(bucket) => bucket.put_by(key, bytes, by).await.map_err(shared_error)?,
        }
        Ok(())
    }

    /// The execution failed without effect: free the key so a retry may run. Tried until
    /// `by`, as [`Self::record`].
    pub async fn release(&self, key: &str, by: tokio::time::Instant) -> Result<(), StoreError> {
        self.running().remove(key);
        match &self.backend {
            Backend::Local { tree, durable } => {
                tree.remove(key.as_bytes())?;
                durable.commit().await?;
            }
            Backend::Shared(bucket) => bucket.delete_by(key, by).await.map_err(shared_error)?,
        }
        Ok(())
    }
}

/// Pause between two looks at a reservation being taken back.
const WITHDRAW_PAUSE: Duration = Duration::from_millis(500);

/// Delete `key` if it holds exactly `ours` (a reservation this execution wrote and will not
/// settle), trying until `by`.
async fn withdraw(bucket: &dyn SharedKv, key: &str, ours: &Bytes, by: tokio::time::Instant) {
    loop {
        match tokio::time::timeout_at(by, bucket.get(key)).await {
            Ok(Ok(Some(held))) if held == *ours => {
                if let Err(e) = bucket.delete_by(key, by).await {
                    tracing::warn!(key, error = %e, "a reservation left by a failed write could not be taken back; a copy of the call sent again will report its outcome as unknown");
                }
                return;
            }
            // Never written, or another execution's: nothing of ours to take back.
            Ok(Ok(_)) => return,
            Ok(Err(_)) if tokio::time::Instant::now() + WITHDRAW_PAUSE < by => {
                tokio::time::sleep(WITHDRAW_PAUSE).await;
            }
            _ => {
                tracing::warn!(key, "could not look for a reservation left by a failed write in time; a copy of the call sent again may report its outcome as unknown");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use tokio::time::Instant;

    use crate::bus::BusError;

    /// A bucket that takes reservations but never acknowledges a later write, as JetStream
    /// while a stream has no leader.
    #[derive(Default)]
    struct Unacknowledged(Mutex<HashMap<String, Bytes>>);

    #[async_trait]
    impl SharedKv for Unacknowledged {
        async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
            Ok(self.0.lock().unwrap().insert(key.into(), value).is_none())
        }
        async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        async fn put(&self, _: &str, _: Bytes) -> Result<(), BusError> {
            std::future::pending().await
        }
        async fn delete(&self, _: &str) -> Result<(), BusError> {
            std::future::pending().await
        }
    }

    fn outcome() -> ToolCallResult {
        serde_json::from_value(json!({
            "call_id": "c1", "name": "refund", "status": "ok",
            "output": {"refunded": true}, "duration_ms": 3
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_outcome_not_recorded_by_its_deadline_is_given_up_then_and_the_key_stays_reserved() {
        let store = IdemStore::shared(Arc::new(Unacknowledged::default()));
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(
            store.reserve("k", far).await.unwrap(),
            Reservation::Reserved
        );
        let by = Instant::now() + Duration::from_secs(10);
        let error = store.record("k", &outcome(), by).await.unwrap_err();
        assert_eq!(Instant::now(), by);
        assert!(
            error.to_string().contains("not acknowledged in time"),
            "{error}"
        );
        let by = Instant::now() + Duration::from_secs(1);
        assert!(store.release("k", by).await.is_err());
        // Copies waiting for it find the reservation: they report the outcome as unknown.
        assert!(matches!(
            store.await_settled("k", Duration::ZERO).await.unwrap(),
            Reservation::Pending { .. }
        ));
    }

    /// A bucket whose creates land but whose answers are lost, as while a stream's leader
    /// moves: the writer hears an error.
    #[derive(Default)]
    struct AnswersLost(Mutex<HashMap<String, Bytes>>);

    #[async_trait]
    impl SharedKv for AnswersLost {
        async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
            self.0.lock().unwrap().entry(key.into()).or_insert(value);
            Err(BusError::Storage(
                "timed out: didn't receive ack in time".into(),
            ))
        }
        async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError> {
            self.0.lock().unwrap().insert(key.into(), value);
            Ok(())
        }
        async fn delete(&self, key: &str) -> Result<(), BusError> {
            self.0.lock().unwrap().remove(key);
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_reservation_whose_answer_was_lost_is_taken_back_so_a_copy_sent_again_runs() {
        let bucket = Arc::new(AnswersLost::default());
        let store = IdemStore::shared(bucket.clone());
        let far = Instant::now() + Duration::from_secs(60);
        assert!(
            store.reserve("k", far).await.is_err(),
            "the call is not run"
        );
        assert_eq!(
            bucket.get("k").await.unwrap(),
            None,
            "nothing left reserved"
        );
        // Another execution's reservation is not ours to take back.
        let theirs = Bytes::from_static(b"{\"reserved\":true}");
        bucket.0.lock().unwrap().insert("k2".into(), theirs.clone());
        assert!(store.reserve("k2", far).await.is_err());
        assert_eq!(bucket.get("k2").await.unwrap(), Some(theirs));
    }

    #[test]
    fn key_ignores_key_order_but_not_values_turns_or_tools() {
        let a = idempotency_key("s1", "t1", "refund", &json!({"id": "A", "amount": 5}));
        let b = idempotency_key("s1", "t1", "refund", &json!({"amount": 5, "id": "A"}));
        assert_eq!(a, b);
        assert!(a.starts_with("idem-") && a.len() == 5 + 64);
        let other_value = idempotency_key("s1", "t1", "refund", &json!({"id": "A", "amount": 6}));
        let other_turn = idempotency_key("s1", "t2", "refund", &json!({"id": "A", "amount": 5}));
        let other_tool = idempotency_key("s1", "t1", "cancel", &json!({"id": "A", "amount": 5}));
        let other_session = idempotency_key("s2", "t1", "refund", &json!({"id": "A", "amount": 5}));
        for k in [other_value, other_turn, other_tool, other_session] {
            assert_ne!(k, a);
        }
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        let v = json!({"b": [{"z": 1, "a": 2}], "a": null});
        assert_eq!(canonical_json(&v), r#"{"a":null,"b":[{"a":2,"z":1}]}"#);
    }
}
