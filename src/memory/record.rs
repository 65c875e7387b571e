//! What a memory is (DESIGN §7) and the update the extractor proposes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The namespace of a user's own memories: what extraction writes and what a write or forget
/// that names no namespace uses.
pub const DEFAULT_NAMESPACE: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Preference,
    Fact,
    Constraint,
    Event,
}

impl MemoryKind {
    /// `preference`, `fact`, `constraint` or `event` (any case); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(text.to_lowercase())).ok()
    }
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
    /// When the sweep demoted this expired record (importance halved, out of recall); the
    /// next sweep removes it unless an open task references it. A new write clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demoted_at: Option<DateTime<Utc>>,
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

/// What recall considers before scoring: beyond the user (always), an optional namespace and
/// optional kinds and topics (a record passes with any one of the listed kinds / topics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallFilter {
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub kinds: Vec<MemoryKind>,
    #[serde(default)]
    pub topics: Vec<String>,
}

impl RecallFilter {
    /// Whether `record` is live at `now` (not expired, not demoted) and passes the filter.
    /// Topics compare case-insensitively.
    pub fn admits(&self, record: &MemoryRecord, now: DateTime<Utc>) -> bool {
        record.expires_at.is_none_or(|at| at > now)
            && record.demoted_at.is_none()
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| &record.namespace == ns)
            && (self.kinds.is_empty() || self.kinds.contains(&record.kind))
            && (self.topics.is_empty()
                || record
                    .topics
                    .iter()
                    .any(|t| self.topics.iter().any(|want| want.eq_ignore_ascii_case(t))))
    }
}
