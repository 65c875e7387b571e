//! Idempotency for `write` tools: the key of a call and the recorded results (sled tree
//! `tool_results_idem`, owned by the tool-executor).
//!
//! **Key**: `idem-` + hex SHA-256 of `session \x1f turn \x1f tool \x1f canonical arguments`,
//! where the canonical arguments are the validated arguments (repairs applied, `_user`
//! injected) as JSON with object keys sorted. Without a turn id the call id stands in, so
//! separate turns never share a key. **Value**: an [`IdemRecord`] as JSON: the result the
//! first execution returned (for an async tool: its `{job_id, status}` submission).
//!
//! The executor records before it replies; a call whose key is already recorded gets the
//! recorded result back (flagged `via = "idempotent-replay"`) and does not run again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::protocol::ToolCallResult;
use crate::store::durability::Durable;
use crate::store::tool_result::StoredToolResult;
use crate::store::StoreError;

/// The sled tree of recorded results.
pub const TREE: &str = "tool_results_idem";
/// `via` of a result served from the record instead of a new execution.
pub const REPLAY_VIA: &str = "idempotent-replay";

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

/// A recorded result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdemRecord {
    pub result: StoredToolResult,
    pub recorded_at: DateTime<Utc>,
}

/// The `tool_results_idem` tree.
#[derive(Debug, Clone)]
pub struct IdemStore {
    tree: sled::Tree,
    durable: Durable,
}

impl IdemStore {
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        Ok(Self {
            tree: db.open_tree(TREE)?,
            durable: db.clone(),
        })
    }

    pub fn get(&self, key: &str) -> Result<Option<IdemRecord>, StoreError> {
        let Some(bytes) = self.tree.get(key.as_bytes())? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                what: format!("idempotency record {key}"),
                reason: e.to_string(),
            })
    }

    /// Record `result` under `key` and make it durable before returning.
    pub async fn record(&self, key: &str, result: &ToolCallResult) -> Result<(), StoreError> {
        let record = IdemRecord {
            result: result.into(),
            recorded_at: Utc::now(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Encode(e.to_string()))?;
        self.tree.insert(key.as_bytes(), bytes)?;
        self.durable.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
