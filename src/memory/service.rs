//! The memory service: the store, its vectors and references, and the optional embedder, behind
//! the operations the memory-extractor serves on the bus and the CLI runs directly — recall,
//! list, write (merge), forget, sweep.
//!
//! Everything that scans many records (candidate filtering, ranking, the sweep) runs in
//! `spawn_blocking`, never on the calling async thread. Recall with an embedder embeds the query,
//! takes the user's vectors stored by *that* embedder from the per-user index (reading them from
//! sled once per write stamp, and lazily embedding records whose vector is missing or stale:
//! content changed, or written before the embedder was configured), then fuses BM25 and cosine
//! and applies the context signals ([`super::recall::rank_candidates`]). An embedder failure
//! degrades recall to BM25 with a warning; it never fails the turn. Writes are flushed before
//! they return; their vectors are computed right after, once, and stored beside the record,
//! and the user's recall index is rebuilt then (off the turn's path: extraction runs after the
//! turn), so a recall after a write does not pay for the rebuild.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::embed::SharedEmbedder;
use super::recall::{Ranking, Signals, Weights};
use super::record::{MemoryRecord, MemoryUpdate, RecallFilter, RecallHit, Source};
use super::refs::MemoryRefs;
use super::replica::{Change, MemoryReplica};
use super::store::{AppliedUpdate, MemoryError, MemoryStore};
use super::store_recall::rank_index;
use super::sweep::SweepReport;
use super::user_index::{UserIndex, VectorColumn};
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
    signals: Signals,
    /// On a NATS cluster: the memory log every memory-extractor copy shares.
    replica: Option<MemoryReplica>,
}

/// Up to this many records of a user are ranked on the calling thread.
const INLINE_RANK_RECORDS: usize = 512;

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
            weights: Weights::from_config(&config.fusion),
            signals: Signals::DEFAULT,
            replica: None,
        })
    }

    /// The same service sharing each user's memory with the other copies through `log` (see
    /// [`super::replica`]); recalls trust `feed`, a live feed of the log's appends, when there
    /// is one ([`MemoryReplica::catch_up_heard`]).
    pub fn replicated(
        mut self,
        db: &crate::store::durability::Durable,
        log: Arc<dyn crate::store::replica::SessionLog>,
        feed: Option<Arc<dyn crate::store::log_tails::HeardTails>>,
    ) -> Result<Self, MemoryError> {
        self.replica = Some(MemoryReplica::open(db, log)?.with_feed(feed));
        Ok(self)
    }

    /// Bring `user`'s memory up to date with the other copies' writes.
    async fn catch_up(&self, user: &str) -> Result<(), MemoryError> {
        match &self.replica {
            Some(replica) => replica.catch_up(&self.store, user).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// [`Self::catch_up`] for a recall: nothing is read when the log's feed vouches that no
    /// other copy wrote the user since.
    async fn catch_up_heard(&self, user: &str) -> Result<(), MemoryError> {
        match &self.replica {
            Some(replica) => replica.catch_up_heard(&self.store, user).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Share a write with the other copies.
    async fn share(&self, user: &str, change: Change) -> Result<(), MemoryError> {
        match &self.replica {
            Some(replica) => replica.publish(&self.store, user, &change).await,
            None => Ok(()),
        }
    }

    /// Hold `user`'s records `ids` for task `task` against the expiry sweep ([`MemoryRefs`]).
    pub async fn hold(&self, user: &str, task: &str, ids: &[&str]) -> Result<(), MemoryError> {
        let (refs, user, task) = (self.refs.clone(), user.to_owned(), task.to_owned());
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        blocking(move || {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            refs.hold(&user, &task, &ids)
        })
        .await
    }

    /// Task `task` is finished: its memories are no longer held. How many holds ended.
    pub async fn release_task(&self, task: &str) -> Result<usize, MemoryError> {
        // Most turns recalled nothing and hold nothing: no sled work, no blocking thread.
        if self.refs.holds_nothing(task) {
            return Ok(0);
        }
        let (refs, task) = (self.refs.clone(), task.to_owned());
        blocking(move || refs.release_task(&task)).await
    }

    /// The same service with other context signals (evaluation ablations).
    pub fn with_signals(mut self, signals: Signals) -> Self {
        self.signals = signals;
        self
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
        // A turn waits on recall: with the log out of reach, recall what this copy has.
        if let Err(e) = self.catch_up_heard(&query.user).await {
            tracing::warn!(user = %query.user, error = %e, "recalling from this copy's memory without the latest writes of other copies");
        }
        super::store::check_name("user", &query.user)?;
        // A cached, current index is used where the request arrived; only building one reads
        // sled, on a blocking thread.
        let index = match self.store.cached_index(&query.user) {
            Some(index) => index,
            None => {
                let (store, user) = (self.store.clone(), query.user.clone());
                blocking(move || store.user_index(&user)).await?
            }
        };
        if index.records.is_empty() {
            return Ok(Vec::new());
        }
        let records = index.records.len();
        let weights = query.weights.unwrap_or(match self.embedder {
            Some(_) => self.weights,
            None => Weights::BM25,
        });
        let vectors = match (&self.embedder, weights.vector > 0.0) {
            (Some(embedder), true) if !index.records.is_empty() => {
                match self.query_and_vectors(embedder, &query, &index).await {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!(error = %e, "embedding failed; recall falls back to BM25");
                        None
                    }
                }
            }
            _ => None,
        };
        let ranking = Ranking {
            weights: if vectors.is_some() {
                weights
            } else {
                Weights::BM25
            },
            signals: self.signals,
            limit: query.limit,
            min_score: query.min_score,
            now: query.now,
        };
        let rank = move || {
            let vectors = vectors
                .as_ref()
                .and_then(|(q, id)| Some((index.vectors(id)?, q.as_slice())));
            Ok(rank_index(
                &index,
                &query.filter,
                &query.text,
                vectors,
                &ranking,
            ))
        };
        // Ranking a few hundred records takes microseconds: cheaper here than a thread hop.
        if records <= INLINE_RANK_RECORDS {
            rank()
        } else {
            blocking(rank).await
        }
    }

    /// The query vector and the embedder id whose vectors are attached to `index` (attaching
    /// them first when needed).
    async fn query_and_vectors(
        &self,
        embedder: &SharedEmbedder,
        query: &RecallQuery,
        index: &Arc<UserIndex>,
    ) -> Result<(Vec<f32>, String), Box<dyn std::error::Error + Send + Sync>> {
        let id = embedder.id().to_string();
        if index.vectors(&id).is_none() {
            let column = self.vector_column(embedder, &query.user, index).await?;
            index.attach_vectors(column);
        }
        let query_vector = embedder
            .embed(std::slice::from_ref(&query.text))
            .await?
            .pop()
            .ok_or("the embedder returned no vectors")?;
        Ok((query_vector, id))
    }

    /// A current vector for every record of `index`, embedding what is missing or stale.
    async fn vector_column(
        &self,
        embedder: &SharedEmbedder,
        user: &str,
        index: &Arc<UserIndex>,
    ) -> Result<VectorColumn, Box<dyn std::error::Error + Send + Sync>> {
        let id = embedder.id().to_string();
        let (vectors, u, id2) = (self.vectors.clone(), user.to_string(), id.clone());
        let mut stored = blocking(move || vectors.for_user(&u, &id2)).await?;
        let mut stale = Vec::new();
        let mut texts = Vec::new();
        for record in &index.records {
            let text = embed_text(record);
            let hash = text_hash(&text);
            if stored.get(&record.id).is_none_or(|v| v.text_hash != hash) {
                stale.push((record.id.clone(), hash));
                texts.push(text);
            }
        }
        if !texts.is_empty() {
            let embedded = embedder.embed(&texts).await?;
            let fresh: Vec<(String, StoredVector)> = stale
                .into_iter()
                .zip(embedded)
                .map(|((record_id, text_hash), vector)| {
                    (record_id, StoredVector { text_hash, vector })
                })
                .collect();
            let items: Vec<(&str, &StoredVector)> =
                fresh.iter().map(|(i, v)| (i.as_str(), v)).collect();
            self.vectors.put_many(user, &id, &items)?;
            stored.extend(fresh);
        }
        let rows = index
            .records
            .iter()
            .map(|r| stored.remove(&r.id).map(|v| v.vector))
            .collect();
        Ok(VectorColumn { embedder: id, rows })
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
        self.catch_up(user).await?;
        let applied = self.store.apply(user, namespace, updates, source).await?;
        let mut change = Change::default();
        for a in &applied {
            crate::telemetry::metrics::memory_write(a.op.as_str());
            match (a.op, &a.record) {
                (super::AppliedOp::Added | super::AppliedOp::Updated, Some(r)) => {
                    change.upserts.push(r.clone());
                }
                (super::AppliedOp::Deleted, Some(r)) => change.removed.push(r.id.clone()),
                _ => {}
            }
        }
        self.share(user, change).await?;
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
        if !applied.is_empty() {
            self.warm(user).await;
        }
        Ok(applied)
    }

    /// Rebuild `user`'s recall index and attach the embedder's vectors right after a write, so
    /// the next recall — a turn waiting for it — finds them ready instead of decoding,
    /// tokenising and reading vectors of every record of the user first (a write invalidates
    /// the index). Best-effort: a failure only leaves that work to the next recall.
    async fn warm(&self, user: &str) {
        let (store, u) = (self.store.clone(), user.to_string());
        let index = match blocking(move || store.user_index(&u)).await {
            Ok(index) => index,
            Err(e) => {
                tracing::debug!(user, error = %e, "recall index not warmed after a write");
                return;
            }
        };
        let Some(embedder) = &self.embedder else {
            return;
        };
        if index.records.is_empty() || index.vectors(embedder.id()).is_some() {
            return;
        }
        match self.vector_column(embedder, user, &index).await {
            Ok(column) => {
                index.attach_vectors(column);
            }
            Err(e) => tracing::debug!(user, error = %e, "recall vectors not warmed after a write"),
        }
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
        let stored: Vec<StoredVector> = texts
            .iter()
            .zip(vectors)
            .map(|(text, vector)| StoredVector {
                text_hash: text_hash(text),
                vector,
            })
            .collect();
        let items: Vec<(&str, &StoredVector)> =
            records.iter().map(|r| r.id.as_str()).zip(&stored).collect();
        self.vectors.put_many(user, embedder.id(), &items)?;
        Ok(())
    }

    /// Store `records` as they are, bypassing the merge rules (imports, evaluation, benches),
    /// and embed them once with the configured embedder; durable when this returns.
    pub async fn import(&self, records: &[MemoryRecord]) -> Result<(), MemoryError> {
        let store = self.store.clone();
        let owned = records.to_vec();
        blocking(move || owned.iter().try_for_each(|r| store.insert_record(r))).await?;
        self.store.flush().await?;
        if let Some(embedder) = &self.embedder {
            let mut by_user: HashMap<&str, Vec<&MemoryRecord>> = HashMap::new();
            for r in records {
                by_user.entry(r.user.as_str()).or_default().push(r);
            }
            for (user, records) in by_user {
                self.embed_records(embedder, user, &records)
                    .await
                    .map_err(|e| MemoryError::Embedding(e.to_string()))?;
            }
        }
        let mut users: Vec<&str> = records.iter().map(|r| r.user.as_str()).collect();
        users.sort_unstable();
        users.dedup();
        for user in users {
            if self.replica.is_some() {
                let upserts = records.iter().filter(|r| r.user == user).cloned().collect();
                let change = Change {
                    upserts,
                    ..Change::default()
                };
                self.share(user, change).await?;
            }
            self.warm(user).await;
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
        self.catch_up(user).await?;
        let removed = match (id, key) {
            (Some(id), _) => {
                let record = self.store.get(user, id)?;
                self.store.forget(user, id).await?;
                record
            }
            (None, Some(key)) => self.store.forget_key(user, namespace, key).await?,
            (None, None) => {
                return Err(MemoryError::InvalidName {
                    what: "forget target",
                    value: String::new(),
                    problem: "neither a record id nor a key was given",
                })
            }
        };
        if let Some(record) = &removed {
            crate::telemetry::metrics::memory_write(super::AppliedOp::Deleted.as_str());
            let change = Change {
                removed: vec![record.id.clone()],
                ..Change::default()
            };
            self.share(user, change).await?;
        }
        Ok(removed)
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
        self.list_where(user, namespace, id, Some(now)).await
    }

    /// [`Self::list`] with expired and demoted records too (`hermes memory ls --all`).
    pub async fn list_including_inactive(
        &self,
        user: &str,
        namespace: Option<&str>,
        id: Option<&str>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.list_where(user, namespace, id, None).await
    }

    /// `user`'s records of `namespace` (all when none) or the one with `id`, newest first;
    /// only those live at `live_at` when it is given.
    async fn list_where(
        &self,
        user: &str,
        namespace: Option<&str>,
        id: Option<&str>,
        live_at: Option<DateTime<Utc>>,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.catch_up(user).await?;
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
                .filter(|r| match live_at {
                    Some(now) => filter.admits(r, now),
                    None => filter
                        .namespace
                        .as_deref()
                        .is_none_or(|ns| r.namespace == ns),
                })
                .collect())
        })
        .await
    }

    /// One sweep at `now` (durable when this returns), then drop vectors of removed records.
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<SweepReport, MemoryError> {
        let (store, refs) = (self.store.clone(), self.refs.clone());
        let report = blocking(move || store.sweep_at(&refs, now)).await?;
        self.store.flush().await?;
        crate::telemetry::metrics::memory_writes("expired", report.demoted);
        crate::telemetry::metrics::memory_writes("removed", report.removed.len());
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
