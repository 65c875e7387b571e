//! What a memory is (DESIGN §7) and the update the extractor proposes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::protocol::memory::{MemoryKind, MemoryUpdate, Source, UpdateOp, DEFAULT_NAMESPACE};

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
    /// When the event it tells of happened, when its text dates it relative to its source time
    /// ("yesterday", "last year"): resolved once at write time ([`super::temporal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<DateTime<Utc>>,
    /// When the sweep demoted this expired record (importance halved, out of recall); the
    /// next sweep removes it unless an open task references it. A new write clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demoted_at: Option<DateTime<Utc>>,
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
    /// Several namespaces; with `namespace`, a record in any of them passes.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub kinds: Vec<MemoryKind>,
    #[serde(default)]
    pub topics: Vec<String>,
}

impl RecallFilter {
    /// No namespace named: every namespace; otherwise any one named.
    fn admits_namespace(&self, namespace: &str) -> bool {
        if self.namespace.is_none() && self.namespaces.is_empty() {
            return true;
        }
        self.namespace.as_deref() == Some(namespace)
            || self.namespaces.iter().any(|ns| ns == namespace)
    }

    /// Whether `record` is live at `now` (not expired, not demoted) and passes the filter.
    /// Topics compare case-insensitively.
    pub fn admits(&self, record: &MemoryRecord, now: DateTime<Utc>) -> bool {
        record.expires_at.is_none_or(|at| at > now)
            && record.demoted_at.is_none()
            && self.admits_namespace(&record.namespace)
            && (self.kinds.is_empty() || self.kinds.contains(&record.kind))
            && (self.topics.is_empty()
                || record
                    .topics
                    .iter()
                    .any(|t| self.topics.iter().any(|want| want.eq_ignore_ascii_case(t))))
    }
}
