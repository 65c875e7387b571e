//! Raw tool outputs (sled tree `tool_raw`, owned by the tool-executor), so a result trimmed
//! for the model's context stays reachable in full.
//!
//! Keys: the raw reference, `raw-<uuid v7>` (one per execution; it is the result's
//! `raw_reference`, and the built-in `tool_raw_get` reads it back). Values: a [`RawRecord`] as
//! JSON. Records are kept until the data directory is removed (no pruning yet).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// The `tool_raw` tree.
#[derive(Debug, Clone)]
pub struct RawStore {
    tree: sled::Tree,
}

impl RawStore {
    pub fn open(db: &sled::Db) -> Result<Self, StoreError> {
        Ok(Self {
            tree: db.open_tree(TREE)?,
        })
    }

    /// Store `output` and return its reference.
    pub fn put(&self, tool: &str, call_id: &str, output: &Value) -> Result<String, StoreError> {
        let reference = format!("{REFERENCE_PREFIX}{}", uuid::Uuid::now_v7().simple());
        let record = RawRecord {
            reference: reference.clone(),
            tool: tool.to_string(),
            call_id: call_id.to_string(),
            output: output.clone(),
            stored_at: Utc::now(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Encode(e.to_string()))?;
        self.tree.insert(reference.as_bytes(), bytes)?;
        Ok(reference)
    }

    pub fn get(&self, reference: &str) -> Result<Option<RawRecord>, StoreError> {
        let Some(bytes) = self.tree.get(reference.as_bytes())? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                what: format!("raw output {reference}"),
                reason: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_output_comes_back_by_reference() {
        let db = sled::Config::new().temporary(true).open().unwrap();
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
}
