//! The per-user recall index: a user's decoded records, their BM25 tokens and (once a vector
//! recall asked for them) their vectors by one embedder, kept in memory between recalls so a
//! recall does not decode, re-tokenise and re-read every record of the user.
//!
//! An entry is valid for one value of the user's write stamp (sled tree `memory_stamps`, key
//! `<user>`, bumped in the same transaction as every write of that user's records), so a write
//! through any `MemoryStore` on the same database makes the next recall rebuild the entry.
//! Vector writes bump the same stamp ([`super::vectors`]). The cache holds at most
//! [`MAX_CACHED_RECORDS`] records; the least recently used users go first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::recall::document_tokens;
use super::record::MemoryRecord;

/// Records kept in memory across all cached users (about 2 KiB each with their tokens and a
/// 256-dimension vector: ≈ 250 MB when full).
pub const MAX_CACHED_RECORDS: usize = 120_000;

/// One user's records and their tokens, as of one write stamp.
#[derive(Debug)]
pub struct UserIndex {
    pub stamp: u64,
    pub records: Vec<MemoryRecord>,
    /// `tokens[i]` are [`document_tokens`] of `records[i]`.
    pub tokens: Vec<Arc<Vec<String>>>,
    vectors: OnceLock<VectorColumn>,
}

/// The records' vectors by one embedder: `rows[i]` belongs to `records[i]` (`None`: no vector).
#[derive(Debug)]
pub struct VectorColumn {
    pub embedder: String,
    pub rows: Vec<Option<Vec<f32>>>,
}

impl UserIndex {
    pub fn build(stamp: u64, records: Vec<MemoryRecord>) -> Self {
        let tokens = records
            .iter()
            .map(|r| Arc::new(document_tokens(r)))
            .collect();
        Self {
            stamp,
            records,
            tokens,
            vectors: OnceLock::new(),
        }
    }

    /// The vectors by `embedder`, when they were attached.
    pub fn vectors(&self, embedder: &str) -> Option<&VectorColumn> {
        self.vectors.get().filter(|c| c.embedder == embedder)
    }

    /// Attach the vectors of one embedder (the first attached stays; an index is rebuilt at
    /// every write anyway). Returns the column now attached for `column.embedder`, if any.
    pub fn attach_vectors(&self, column: VectorColumn) -> Option<&VectorColumn> {
        let embedder = column.embedder.clone();
        let _ = self.vectors.set(column);
        self.vectors(&embedder)
    }
}

/// Cached [`UserIndex`]es by user, least recently used evicted first.
#[derive(Debug)]
pub struct IndexCache {
    inner: Mutex<Entries>,
    limit: usize,
}

impl Default for IndexCache {
    fn default() -> Self {
        Self::with_limit(MAX_CACHED_RECORDS)
    }
}

#[derive(Debug, Default)]
struct Entries {
    by_user: HashMap<String, (Arc<UserIndex>, u64)>,
    clock: u64,
    records: usize,
}

impl IndexCache {
    /// A cache holding at most `limit` records.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            inner: Mutex::default(),
            limit,
        }
    }

    /// The user's index if it was built at `stamp`.
    pub fn get(&self, user: &str, stamp: u64) -> Option<Arc<UserIndex>> {
        let mut e = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        e.clock += 1;
        let now = e.clock;
        let (index, used) = e.by_user.get_mut(user)?;
        if index.stamp != stamp {
            return None;
        }
        *used = now;
        Some(index.clone())
    }

    /// Keep `index` for `user`, evicting the least recently used users beyond the limit.
    pub fn put(&self, user: &str, index: Arc<UserIndex>) {
        let mut e = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        e.clock += 1;
        let now = e.clock;
        let added = index.records.len();
        if let Some((old, _)) = e.by_user.insert(user.to_string(), (index, now)) {
            e.records = e.records.saturating_sub(old.records.len());
        }
        e.records += added;
        while e.records > self.limit && e.by_user.len() > 1 {
            let Some(oldest) = e
                .by_user
                .iter()
                .filter(|(u, _)| u.as_str() != user)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(u, _)| u.clone())
            else {
                break;
            };
            if let Some((gone, _)) = e.by_user.remove(&oldest) {
                e.records = e.records.saturating_sub(gone.records.len());
            }
        }
    }

    /// Records held now (for tests and the status page).
    pub fn cached_records(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(stamp: u64, n: usize) -> Arc<UserIndex> {
        let record: MemoryRecord = serde_json::from_value(serde_json::json!({
            "id": "r", "user": "u", "namespace": "default", "kind": "fact", "key": "drink",
            "content": "likes green tea", "importance": 0.5, "confidence": 0.5, "topics": [],
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "source": {"session": "s", "message_id": "m", "source_time": "2026-01-01T00:00:00Z"},
            "version": 1, "history": []
        }))
        .unwrap();
        Arc::new(UserIndex::build(stamp, vec![record; n]))
    }

    #[test]
    fn an_entry_serves_only_the_stamp_it_was_built_at() {
        let cache = IndexCache::default();
        cache.put("alice", index(3, 2));
        assert!(cache.get("alice", 3).is_some());
        assert!(
            cache.get("alice", 4).is_none(),
            "a newer write stamp rebuilds"
        );
        assert!(cache.get("bob", 3).is_none());
        let hit = cache.get("alice", 3).unwrap();
        assert_eq!(hit.tokens.len(), 2);
        assert!(
            hit.tokens[0].contains(&"tea".to_string()),
            "{:?}",
            hit.tokens[0]
        );
    }

    #[test]
    fn least_recently_used_users_are_evicted_beyond_the_limit() {
        let cache = IndexCache::with_limit(20);
        cache.put("a", index(1, 10));
        cache.put("b", index(1, 10));
        assert!(cache.get("a", 1).is_some(), "touch a: b is now the oldest");
        cache.put("c", index(1, 5));
        assert!(cache.get("b", 1).is_none());
        assert!(cache.get("a", 1).is_some());
        assert!(cache.get("c", 1).is_some());
        assert_eq!(cache.cached_records(), 15);
    }
}
