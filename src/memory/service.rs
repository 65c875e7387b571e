//! The memory service: the store, its vectors and references, and the optional embedder, behind
//! the operations the memory-extractor serves on the bus and the CLI runs directly — recall,
//! list, write (merge), forget, sweep.
//!
//! Everything that scans many records (candidate filtering, ranking, the sweep) runs in
//! `spawn_blocking`, never on the calling async thread. Recall with an embedder embeds the query,
//! reads the user's vectors stored by *that* embedder, lazily embeds records whose vector is
//! missing or stale (content changed, or written before the embedder was configured), then fuses
//! BM25 and cosine ([`super::recall::rank_fused`]). An embedder failure degrades recall to BM25
//! with a warning; it never fails the turn. Writes are flushed before they return; their vectors
//! are computed after, best-effort (recall fills any gap).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::embed::SharedEmbedder;
use super::recall::{self, QueryVectors, Weights};
use super::record::{MemoryRecord, MemoryUpdate, RecallFilter, RecallHit, Source};
use super::refs::MemoryRefs;
use super::store::{AppliedUpdate, MemoryError, MemoryStore};
use super::sweep::SweepReport;
use super::vectors::{embed_text, text_hash, StoredVector, VectorStore};
use crate::config::MemoryConfig;

/// One recall.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    pub user: String,
    pub text: String,
    pub filter: RecallFilter,
    pub limit: usize,
    pub min_score: f64,
    /// Which signals to fuse; `None` = the service's default (config weights with an embedder,
    /// BM25 only without).
    pub weights: Option<Weights>,
    pub now: DateTime<Utc>,
}

/// The memory service (cheap to clone).
#[derive(Clone)]
pub struct MemoryService {
    store: MemoryStore,
    vectors: VectorStore,
    refs: MemoryRefs,
    embedder: Option<SharedEmbedder>,
    weights: Weights,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, MemoryError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| MemoryError::Interrupted(e.to_string()))?
}

impl MemoryService {
    /// Open the memory trees of `db`; `embedder` from [`super::embed::from_config`].
    pub fn open(
        db: &crate::store::durability::Durable,
        config: &MemoryConfig,
        embedder: Option<SharedEmbedder>,
    ) -> Result<Self, MemoryError> {
        Ok(Self {
            store: MemoryStore::open(db)?,
            vectors: VectorStore::open(db)?,
            refs: MemoryRefs::open(db)?,
            embedder,
            weights: Weights {
                bm25: config.fusion.bm25_weight,
                vector: config.fusion.vector_weight,
            },
        })
    }

    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    pub fn refs(&self) -> &MemoryRefs {
        &self.refs
    }

    /// Id of the configured embedder, if any.
    pub fn embedder_id(&self) -> Option<&str> {
        self.embedder.as_deref().map(|e| e.id())
    }

    /// The best records for `query` (see the module doc).
    pub async fn recall(&self, query: RecallQuery) -> Result<Vec<RecallHit>, MemoryError> {
        let store = self.store.clone();
        let (user, filter, now) = (query.user.clone(), query.filter.clone(), query.now);
        let (candidates, tokens) =
            blocking(move || store.candidates_with_tokens(&user, &filter, now)).await?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let weights = query.weights.unwrap_or(match self.embedder {
            Some(_) => self.weights,
            None => Weights::BM25,
        });
        let vectors = match (&self.embedder, weights.vector > 0.0) {
            (Some(embedder), true) if !candidates.is_empty() => {
                match self.vectors_for(embedder, &query, &candidates).await {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!(error = %e, "embedding failed; recall falls back to BM25");
                        None
                    }
                }
            }
            _ => None,
        };
        let weights = if vectors.is_none() {
            Weights::BM25
        } else {
            weights
        };
        tokio::task::spawn_blocking(move || {
            let q = vectors
                .as_ref()
                .map(|(q, records)| QueryVectors { query: q, records });
            let docs: Vec<&[String]> = tokens.iter().map(|t| t.as_slice()).collect();
            recall::rank_tokenised(
                candidates,
                &docs,
                &query.text,
                q,
                weights,
                query.limit,
                query.min_score,
                query.now,
            )
        })
        .await
        .map_err(|e| MemoryError::Interrupted(e.to_string()))
    }

    /// The query vector and a current vector for every candidate, embedding what is missing.
    async fn vectors_for(
        &self,
        embedder: &SharedEmbedder,
        query: &RecallQuery,
        candidates: &[MemoryRecord],
    ) -> Result<(Vec<f32>, HashMap<String, Vec<f32>>), Box<dyn std::error::Error + Send + Sync>>
    {
        let id = embedder.id().to_string();
        let (vectors, user, id2) = (self.vectors.clone(), query.user.clone(), id.clone());
        let mut stored = blocking(move || vectors.for_user(&user, &id2)).await?;
        let mut texts = vec![query.text.clone()];
        let mut stale = Vec::new();
        for record in candidates {
            let text = embed_text(record);
            let hash = text_hash(&text);
            if stored.get(&record.id).is_none_or(|v| v.text_hash != hash) {
                stale.push((record.id.clone(), hash));
                texts.push(text);
            }
        }
        let mut embedded = embedder.embed(&texts).await?.into_iter();
        let query_vector = embedded.next().ok_or("the embedder returned no vectors")?;
        for ((record_id, text_hash), vector) in stale.into_iter().zip(embedded) {
            let fresh = StoredVector { text_hash, vector };
            self.vectors.put(&query.user, &id, &record_id, &fresh)?;
            stored.insert(record_id, fresh);
        }
        let by_id = stored.into_iter().map(|(k, v)| (k, v.vector)).collect();
        Ok((query_vector, by_id))
    }

    /// Embed every live record of `user` whose vector by the configured embedder is missing or
    /// stale; how many were embedded (0 without an embedder).
    pub async fn reindex(&self, user: &str) -> Result<usize, MemoryError> {
        let Some(embedder) = &self.embedder else {
            return Ok(0);
        };
        let (store, vectors, u, id) = (
            self.store.clone(),
            self.vectors.clone(),
            user.to_string(),
            embedder.id().to_string(),
        );
        let (records, stored) = blocking(move || {
            let records = store.candidates(&u, &RecallFilter::default(), Utc::now())?;
            Ok((records, vectors.for_user(&u, &id)?))
        })
        .await?;
        let stale: Vec<&MemoryRecord> = records
            .iter()
            .filter(|r| {
                stored
                    .get(&r.id)
                    .is_none_or(|v| v.text_hash != text_hash(&embed_text(r)))
            })
            .collect();
        self.embed_records(embedder, user, &stale)
            .await
            .map_err(|e| MemoryError::Embedding(e.to_string()))?;
        Ok(stale.len())
    }

    /// Merge `updates` into `user`'s memories (durable when this returns), then embed what was
    /// written (best-effort).
    pub async fn apply(
        &self,
        user: &str,
        namespace: &str,
        updates: &[MemoryUpdate],
        source: &Source,
    ) -> Result<Vec<AppliedUpdate>, MemoryError> {
        let applied = self.store.apply(user, namespace, updates, source).await?;
        if let Some(embedder) = &self.embedder {
            let written: Vec<&MemoryRecord> = applied
                .iter()
                .filter(|a| matches!(a.op, super::AppliedOp::Added | super::AppliedOp::Updated))
                .filter_map(|a| a.record.as_ref())
                .collect();
            if let Err(e) = self.embed_records(embedder, user, &written).await {
                tracing::warn!(error = %e, "memory written, its vector not (recall will retry)");
            }
        }
        Ok(applied)
    }

    async fn embed_records(
        &self,
        embedder: &SharedEmbedder,
        user: &str,
        records: &[&MemoryRecord],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if records.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = records.iter().map(|r| embed_text(r)).collect();
        let vectors = embedder.embed(&texts).await?;
        for ((record, text), vector) in records.iter().zip(&texts).zip(vectors) {
            let stored = StoredVector {
                text_hash: text_hash(text),
                vector,
            };
            self.vectors.put(user, embedder.id(), &record.id, &stored)?;
        }
        Ok(())
    }

    /// Forget `user`'s record `id`, or the record in slot `key` of `namespace`; the removed
    /// record, if there was one. Durable when this returns.
    pub async fn forget(
        &self,
        user: &str,
        namespace: &str,
        id: Option<&str>,
        key: Option<&str>,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        match (id, key) {
            (Some(id), _) => {
                let record = self.store.get(user, id)?;
                self.store.forget(user, id).await?;
                Ok(record)
            }
            (None, Some(key)) => self.store.forget_key(user, namespace, key).await,
            (None, None) => Err(MemoryError::InvalidName {
                what: "forget target",
                value: String::new(),
                problem: "neither a record id nor a key was given",
            }),
        }
    }

    /// `user`'s live records at `now` (not expired, not demoted), newest first: all of them,
    /// one namespace's, or the one with `id`. What `hermes.memory.list` answers.
    pub async fn list(
        &self,
        user: &str,
        namespace: Option<&str>,
        id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let store = self.store.clone();
        let (user, id) = (user.to_owned(), id.map(str::to_owned));
        let filter = RecallFilter {
            namespace: namespace.map(str::to_owned),
            ..RecallFilter::default()
        };
        blocking(move || {
            let records = match id {
                Some(id) => store.get(&user, &id)?.into_iter().collect(),
                None => store.list(&user)?,
            };
            Ok(records
                .into_iter()
                .filter(|r| filter.admits(r, now))
                .collect())
        })
        .await
    }

    /// One sweep at `now` (durable when this returns), then drop vectors of removed records.
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<SweepReport, MemoryError> {
        let (store, refs) = (self.store.clone(), self.refs.clone());
        let report = blocking(move || store.sweep_at(&refs, now)).await?;
        self.store.flush().await?;
        let (store, vectors) = (self.store.clone(), self.vectors.clone());
        let pruned = blocking(move || {
            vectors.prune(|user, id| matches!(store.get(user, id), Ok(Some(_)) | Err(_)))
        })
        .await?;
        tracing::info!(
            demoted = report.demoted,
            removed = report.removed.len(),
            kept = report.kept_referenced,
            vectors_pruned = pruned,
            "memory sweep"
        );
        Ok(report)
    }
}

/// A shared service, as actors and commands hold it.
pub type SharedService = Arc<MemoryService>;

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
