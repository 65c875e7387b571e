//! What a memory is (DESIGN §7) and the update the extractor proposes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Preference,
    Fact,
    Constraint,
    Event,
}

/// Where a memory came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub session: String,
    pub message_id: String,
    /// When the user said it (not when it was stored): newer source time wins a conflict.
    pub source_time: DateTime<Utc>,
}

/// A stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    pub id: String,
    pub user: String,
    pub namespace: String,
    pub kind: MemoryKind,
    /// Stable slot name, e.g. `budget` or `headphone_brand`: same key → update, not a new record.
    pub key: String,
    pub content: String,
    pub importance: f32,
    pub confidence: f32,
    #[serde(default)]
    pub topics: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    pub source: Source,
    pub version: u32,
    /// Earlier contents, oldest first.
    #[serde(default)]
    pub history: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateOp {
    Add,
    Update,
    Delete,
    Noop,
}

/// One entry of the extractor's `{memory_updates: [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryUpdate {
    pub op: UpdateOp,
    pub kind: MemoryKind,
    pub key: String,
    #[serde(default)]
    pub content: String,
    #[serde(default = "default_importance")]
    pub importance: f32,
    /// Days until it expires; none for long-term memories.
    #[serde(default)]
    pub expiry_days: Option<u32>,
    #[serde(default)]
    pub topics: Vec<String>,
}

fn default_importance() -> f32 {
    0.5
}

/// A recalled memory with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallHit {
    pub record: MemoryRecord,
    pub score: f64,
}
