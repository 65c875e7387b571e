//! Raw tool outputs (sled tree `tool_raw`, owned by the tool-executor), so a result trimmed
//! for the model's context stays reachable in full.
//!
//! Keys: the raw reference, `raw-<uuid v7>` (one per execution; it is the result's
//! `raw_reference`, and the built-in `tool_raw_get` reads it back). Values: a [`RawRecord`] as
//! JSON. Records older than `tools.raw_retention_days` are pruned by the tool-executor (at
//! start and hourly); uuid v7 keys sort by time, so pruning stops at the first young record.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::kv::{lookup, SharedKv};
use crate::store::tree::{Database, Tree};
use crate::store::StoreError;

/// The sled tree of raw outputs.
pub const TREE: &str = "tool_raw";
/// Prefix of every raw reference.
pub const REFERENCE_PREFIX: &str = "raw-";

/// One stored output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawRecord {
    pub reference: String,
    pub tool: String,
    pub call_id: String,
    pub output: Value,
    pub stored_at: DateTime<Utc>,
}

/// The shared bucket raw outputs are copied to on a NATS cluster.
pub const BUCKET: &str = "hermes_raw";

/// The `tool_raw` tree, and on a NATS cluster a copy of every output in the shared bucket
/// [`BUCKET`] (expiring after the retention), so `tool_raw_get` answers from any copy.
#[derive(Debug, Clone)]
pub struct RawStore {
    tree: Tree,
    shared: Option<Arc<dyn SharedKv>>,
}

impl RawStore {
    pub fn open(db: &impl Database) -> Result<Self, StoreError> {
        Ok(Self {
            tree: Tree::open(db, TREE)?,
            shared: None,
        })
    }

    /// Also keep every output in `bucket`.
    pub fn with_shared(mut self, bucket: Arc<dyn SharedKv>) -> Self {
        self.shared = Some(bucket);
        self
    }

    /// Store `output` here and in the shared bucket; returns its reference.
    pub async fn store(
        &self,
        tool: &str,
        call_id: &str,
        output: &Value,
    ) -> Result<String, StoreError> {
        let (reference, bytes) = self.insert(tool, call_id, output)?;
        if let Some(bucket) = &self.shared {
            bucket
                .put(&reference, Bytes::from(bytes))
                .await
                .map_err(|e| StoreError::Shared(e.to_string()))?;
        }
        Ok(reference)
    }

    /// An output by reference: from this copy, else from the shared bucket.
    pub async fn find(&self, reference: &str) -> Result<Option<RawRecord>, StoreError> {
        if let Some(record) = self.get(reference)? {
            return Ok(Some(record));
        }
        let Some(bucket) = &self.shared else {
            return Ok(None);
        };
        lookup(bucket.as_ref(), reference)
            .await
            .map_err(|e| StoreError::Shared(e.to_string()))?
            .map(|bytes| decode(reference, &bytes))
            .transpose()
    }

    /// Store `output` and return its reference.
    pub fn put(&self, tool: &str, call_id: &str, output: &Value) -> Result<String, StoreError> {
        self.insert(tool, call_id, output)
            .map(|(reference, _)| reference)
    }

    /// Store `output`; its reference and the record as stored.
    fn insert(
        &self,
        tool: &str,
        call_id: &str,
        output: &Value,
    ) -> Result<(String, Vec<u8>), StoreError> {
        let reference = format!("{REFERENCE_PREFIX}{}", uuid::Uuid::now_v7().simple());
        let record = RawRecord {
            reference: reference.clone(),
            tool: tool.to_string(),
            call_id: call_id.to_string(),
            output: output.clone(),
            stored_at: Utc::now(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Encode(e.to_string()))?;
        self.tree.insert(reference.as_bytes(), bytes.as_slice())?;
        Ok((reference, bytes))
    }

    /// Remove the records stored before `cutoff`; returns how many went.
    pub fn prune_before(&self, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
        let mut removed = 0;
        for item in self.tree.iter() {
            let (key, bytes) = item?;
            let stored_at = serde_json::from_slice::<RawRecord>(&bytes)
                .map(|r| r.stored_at)
                .ok();
            match stored_at {
                Some(at) if at >= cutoff => break,
                // Older, or unreadable (it can never be served): both go.
                _ => {
                    self.tree.remove(&key)?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    pub fn get(&self, reference: &str) -> Result<Option<RawRecord>, StoreError> {
        self.tree
            .get(reference.as_bytes())?
            .map(|bytes| decode(reference, &bytes))
            .transpose()
    }
}

fn decode(reference: &str, bytes: &[u8]) -> Result<RawRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: format!("raw output {reference}"),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_output_comes_back_by_reference() {
        let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
        let store = RawStore::open(&db).unwrap();
        let r = store
            .put("order_lookup", "c1", &json!({"orders": [1, 2]}))
            .unwrap();
        assert!(r.starts_with(REFERENCE_PREFIX));
        let back = store.get(&r).unwrap().unwrap();
        assert_eq!(back.output, json!({"orders": [1, 2]}));
        assert_eq!(back.call_id, "c1");
        assert!(store.get("raw-none").unwrap().is_none());
    }

    #[test]
    fn pruning_removes_only_records_older_than_the_cutoff() {
        let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
        let store = RawStore::open(&db).unwrap();
        let old = store.put("add", "c1", &json!(1)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let cutoff = Utc::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let young = store.put("add", "c2", &json!(2)).unwrap();
        assert_eq!(store.prune_before(cutoff).unwrap(), 1);
        assert!(store.get(&old).unwrap().is_none());
        assert!(store.get(&young).unwrap().is_some());
        assert_eq!(store.prune_before(cutoff).unwrap(), 0);
    }
}
