//! Recall reads of the memory store: a user's live candidates with their BM25 tokens, served
//! from the per-user index ([`super::user_index`]) while the user's write stamp (tree
//! [`super::store::MEMORY_STAMPS_TREE`]) is unchanged, and BM25-only recall over them.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::recall;
use super::record::{MemoryRecord, RecallFilter, RecallHit};
use super::store::{check_name, MemoryError, MemoryStore};
use super::user_index::{UserIndex, VectorColumn};

/// A record's BM25 tokens, shared with the per-user index.
pub type Tokens = Arc<Vec<String>>;

/// Rank the records of `index` that `filter` admits (see [`recall::rank_candidates`]); only
/// the hits are cloned. `vectors`: the index's vectors by the embedder of `query_vector`.
pub fn rank_index(
    index: &UserIndex,
    filter: &RecallFilter,
    query: &str,
    vectors: Option<(&VectorColumn, &[f32])>,
    ranking: &recall::Ranking,
) -> Vec<RecallHit> {
    let candidates: Vec<recall::Candidate<'_>> = index
        .records
        .iter()
        .enumerate()
        .filter(|(_, r)| filter.admits(r, ranking.now))
        .map(|(i, record)| recall::Candidate {
            record,
            tokens: index.tokens[i].as_slice(),
            vector: vectors.and_then(|(column, _)| column.rows.get(i)?.as_deref()),
        })
        .collect();
    let query_vector = vectors.map(|(_, q)| q);
    recall::rank_candidates(&candidates, query, query_vector, ranking)
        .into_iter()
        .map(|(i, score)| RecallHit {
            record: candidates[i].record.clone(),
            score,
        })
        .collect()
}

/// A stored write stamp (8 bytes big-endian; anything else counts as 0).
pub(super) fn decode_stamp(bytes: &[u8]) -> u64 {
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_be_bytes)
}

impl MemoryStore {
    /// The best `limit` records of `user` for `query` scoring at least `min_score` (see
    /// [`super::recall`] for the scoring), restricted to `namespace` when given; expired
    /// records are left out. Reads only `user`'s records.
    pub fn recall(
        &self,
        user: &str,
        namespace: Option<&str>,
        query: &str,
        limit: usize,
        min_score: f64,
    ) -> Result<Vec<RecallHit>, MemoryError> {
        self.recall_at(user, namespace, query, limit, min_score, Utc::now())
    }

    pub(crate) fn recall_at(
        &self,
        user: &str,
        namespace: Option<&str>,
        query: &str,
        limit: usize,
        min_score: f64,
        now: DateTime<Utc>,
    ) -> Result<Vec<RecallHit>, MemoryError> {
        let filter = RecallFilter {
            namespace: namespace.map(str::to_owned),
            ..RecallFilter::default()
        };
        check_name("user", user)?;
        let index = self.user_index(user)?;
        let ranking = recall::Ranking {
            weights: recall::Weights::BM25,
            signals: recall::Signals::NONE,
            limit,
            min_score,
            now,
        };
        Ok(rank_index(&index, &filter, query, None, &ranking))
    }

    /// `user`'s records that `filter` admits at `now` (live, in namespace, kinds, topics):
    /// recall's candidate set.
    pub fn candidates(
        &self,
        user: &str,
        filter: &RecallFilter,
        now: DateTime<Utc>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        Ok(self.candidates_with_tokens(user, filter, now)?.0)
    }

    /// [`Self::candidates`] with each one's BM25 tokens, from the per-user index (rebuilt
    /// when the user's records changed since it was built).
    pub fn candidates_with_tokens(
        &self,
        user: &str,
        filter: &RecallFilter,
        now: DateTime<Utc>,
    ) -> Result<(Vec<MemoryRecord>, Vec<Tokens>), MemoryError> {
        check_name("user", user)?;
        let index = self.user_index(user)?;
        Ok(index
            .records
            .iter()
            .zip(&index.tokens)
            .filter(|(r, _)| filter.admits(r, now))
            .map(|(r, t)| (r.clone(), t.clone()))
            .unzip())
    }

    /// The user's cached index, rebuilt from sled when a write changed the user's stamp.
    pub(crate) fn user_index(&self, user: &str) -> Result<Arc<UserIndex>, MemoryError> {
        let stamp = self.stamp(user)?;
        if let Some(index) = self.index.get(user, stamp) {
            return Ok(index);
        }
        let index = Arc::new(UserIndex::build(stamp, self.user_records(user)?));
        // A write between reading the stamp and the records leaves a newer stamp, so this
        // entry is simply not used again.
        self.index.put(user, index.clone());
        Ok(index)
    }

    fn stamp(&self, user: &str) -> Result<u64, MemoryError> {
        self.known_stamps.read(user, || {
            let value =
                self.stamps
                    .get(user.as_bytes())
                    .map_err(|source| MemoryError::Storage {
                        action: "read a memory write stamp",
                        source,
                    })?;
            Ok(value.map_or(0, |v| decode_stamp(&v)))
        })
    }

    /// The user's index when it is cached and current, without reading sled (so without
    /// blocking); `None` sends the caller to [`Self::user_index`].
    pub(crate) fn cached_index(&self, user: &str) -> Option<Arc<UserIndex>> {
        self.index.get(user, self.known_stamps.known(user)?)
    }
}
