//! The stored record and its wire form: [`MemoryRecord`] (sled) ↔ [`Memory`]
//! (`crate::protocol`), and recall hits likewise. Only the fields a reader needs travel.

use super::record::{MemoryRecord, RecallHit};
use crate::protocol::memory::{Memory, RecallHit as WireHit};

impl From<&MemoryRecord> for Memory {
    fn from(r: &MemoryRecord) -> Self {
        Memory {
            id: r.id.clone(),
            user: r.user.clone(),
            namespace: r.namespace.clone(),
            kind: r.kind,
            key: r.key.clone(),
            content: r.content.clone(),
            importance: r.importance,
            confidence: r.confidence,
            topics: r.topics.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
            expires_at: r.expires_at,
            source: r.source.clone(),
            version: r.version,
            history: r.history.clone(),
            demoted_at: r.demoted_at,
        }
    }
}

impl From<&RecallHit> for WireHit {
    fn from(h: &RecallHit) -> Self {
        WireHit {
            record: Memory::from(&h.record),
            score: h.score,
        }
    }
}

/// Records in their wire form.
pub fn to_wire(records: &[MemoryRecord]) -> Vec<Memory> {
    records.iter().map(Memory::from).collect()
}

/// Hits in their wire form.
pub fn hits_to_wire(hits: &[RecallHit]) -> Vec<WireHit> {
    hits.iter().map(WireHit::from).collect()
}
