//! Async jobs: their persisted records (sled tree `jobs`, owned by the tool-executor) and
//! the status a job moves through.
//!
//! Keys: the job id (`job-<uuid v7>`, so keys sort by creation time), UTF-8. Values: one
//! [`JobRecord`] as JSON. A job is written `submitted` before the call is answered, `running`
//! when the work starts, and `done` or `failed` when it ends; every change is also published
//! on `hermes.job.<id>` as a [`crate::protocol::JobEvent`]. On start the executor resumes
//! the jobs it finds `submitted` or `running` (see `actors::tool_executor`).

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ProgressUpdate, ToolError};
use crate::bus::kv::{lookup, SharedKv};
use crate::store::durability::Durable;
use crate::store::tree::Tree;
use crate::store::StoreError;

use crate::protocol::tool::JobEvent;
pub use crate::protocol::tool::JobStatus;

/// The sled tree of job records.
pub const TREE: &str = "jobs";

/// One async job as persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: String,
    pub tool: String,
    pub call_id: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The validated arguments (with injected keys), so the job can run again after a restart.
    pub arguments: Value,
    pub status: JobStatus,
    #[serde(default)]
    pub progress: Option<ProgressUpdate>,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<ToolError>,
    /// Set for `write` tools: the call's idempotency key.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// How many times the work was started (more than 1 after a resume).
    #[serde(default)]
    pub attempts: u32,
    /// Work the tool started elsewhere and that this job follows (an MCP server's task):
    /// what [`crate::tools::Tool::follow`] needs. Stored before the turn waits, so whoever
    /// resumes the job follows the same work instead of starting it again.
    #[serde(default)]
    pub external: Option<Value>,
    /// Queued again by [`requeue_lost`](crate::actors::tool_executor) after the shared store
    /// lost it: the first delivery of its id runs it (on the usual safety rule) instead of
    /// being taken for a duplicate of a delivery some copy holds. Cleared once it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requeued: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

/// A fresh job id: `job-<uuid v7>`.
pub fn new_job_id() -> String {
    format!("job-{}", uuid::Uuid::now_v7().simple())
}

/// The shared bucket job records are copied to on a NATS cluster.
pub const BUCKET: &str = "hermes_jobs";

/// The `jobs` tree, and on a NATS cluster a copy of every record in the shared bucket
/// [`BUCKET`], so `job_status` answers from any copy of the tool-executor.
#[derive(Debug, Clone)]
pub struct JobStore {
    tree: Tree,
    durable: Durable,
    shared: Option<Arc<dyn SharedKv>>,
}

impl JobStore {
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        Ok(Self {
            tree: Tree::open(db, TREE)?,
            durable: db.clone(),
            shared: None,
        })
    }

    /// Also keep every saved record in `bucket`.
    pub fn with_shared(mut self, bucket: Arc<dyn SharedKv>) -> Self {
        self.shared = Some(bucket);
        self
    }

    /// Write a record, commit it, and copy it to the shared bucket.
    pub async fn save(&self, record: &mut JobRecord) -> Result<(), StoreError> {
        let bytes = self.write(record)?;
        self.flush().await?;
        if let Some(bucket) = &self.shared {
            bucket
                .put(&record.job_id, Bytes::from(bytes))
                .await
                .map_err(|e| StoreError::Shared(e.to_string()))?;
        }
        Ok(())
    }

    /// End a submission whose [`Self::save`] failed as `failed` with `error`, so that it never
    /// runs: written and committed here (a restart resumes, and a cluster copy queues again,
    /// only this copy's unfinished records; nobody else runs a job that was never queued), then
    /// put into the shared bucket if it can be (a failure there is only logged: this copy's
    /// newer record wins wherever they are compared). Err when this copy's record could not be
    /// written and committed: the submission may then be stored as unfinished, and start.
    pub async fn withdraw(
        &self,
        record: &mut JobRecord,
        error: ToolError,
    ) -> Result<(), StoreError> {
        record.status = JobStatus::Failed;
        record.error = Some(error);
        let bytes = self.write(record)?;
        self.durable.flush_all().await?;
        if let Some(bucket) = &self.shared {
            if let Err(e) = bucket.put(&record.job_id, Bytes::from(bytes)).await {
                tracing::warn!(job = %record.job_id, error = %e, "a withdrawn submission's record is not in the shared bucket; job_status elsewhere may show it submitted until this copy re-seeds it");
            }
        }
        Ok(())
    }

    /// A job by id: from the shared bucket when there is one (on a cluster any copy may have
    /// run the job since this copy last saw it), else from this copy's records.
    ///
    /// The bucket is the truth and this copy's tree a cache, with one rule for each
    /// disagreement: the bucket's record wins when it is as new as this copy's or newer (this
    /// copy is behind); when this copy's record is newer, or the bucket has none (the bucket
    /// was wiped, or restored from an older backup than the data directory), this copy's
    /// record is put back into the bucket — re-seeded once, with a warning — and answers; a
    /// bucket that cannot be reached is an error naming it, never a silent answer.
    pub async fn find(&self, job_id: &str) -> Result<Option<JobRecord>, StoreError> {
        let Some(bucket) = &self.shared else {
            return self.get(job_id);
        };
        let shared = match lookup(bucket.as_ref(), job_id)
            .await
            .map_err(|e| StoreError::Shared(e.to_string()))?
        {
            Some(bytes) => Some(decode(job_id, &bytes)?),
            None => None,
        };
        let local = self.get(job_id)?;
        match (shared, local) {
            (shared, Some(local)) if shared.as_ref().is_none_or(|s| local.updated > s.updated) => {
                self.reseed(bucket.as_ref(), &local).await?;
                Ok(Some(local))
            }
            (shared, local) => Ok(shared.or(local)),
        }
    }

    /// Whether the shared bucket lost `local` (it holds none, or an older record: wiped, or
    /// restored from an older backup); if so, `local` is put back. False without a bucket.
    pub async fn restore_shared(&self, local: &JobRecord) -> Result<bool, StoreError> {
        let Some(bucket) = &self.shared else {
            return Ok(false);
        };
        let shared = lookup(bucket.as_ref(), &local.job_id)
            .await
            .map_err(|e| StoreError::Shared(e.to_string()))?
            .map(|bytes| decode(&local.job_id, &bytes))
            .transpose()?;
        if shared.is_some_and(|s| s.updated >= local.updated) {
            return Ok(false);
        }
        self.reseed(bucket.as_ref(), local).await?;
        Ok(true)
    }

    /// Put this copy's newer `record` back into the shared bucket.
    async fn reseed(&self, bucket: &dyn SharedKv, record: &JobRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record).map_err(|e| StoreError::Encode(e.to_string()))?;
        bucket
            .put(&record.job_id, Bytes::from(bytes))
            .await
            .map_err(|e| StoreError::Shared(e.to_string()))?;
        tracing::warn!(job = %record.job_id, "the shared job bucket was missing or behind this copy's record (wiped, or restored from an older backup); re-seeded it from this copy");
        Ok(())
    }

    /// Whether records are shared with the other copies of the tool-executor.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Write (or overwrite) a record, stamping `updated`.
    pub fn put(&self, record: &mut JobRecord) -> Result<(), StoreError> {
        self.write(record).map(|_| ())
    }

    /// [`Self::put`], returning the record as stored.
    fn write(&self, record: &mut JobRecord) -> Result<Vec<u8>, StoreError> {
        record.updated = Utc::now();
        let bytes = serde_json::to_vec(record).map_err(|e| StoreError::Encode(e.to_string()))?;
        self.tree
            .insert(record.job_id.as_bytes(), bytes.as_slice())?;
        Ok(bytes)
    }

    pub fn get(&self, job_id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.tree
            .get(job_id.as_bytes())?
            .map(|bytes| decode(job_id, &bytes))
            .transpose()
    }

    /// Every job not yet `done` or `failed`, oldest first.
    pub fn unfinished(&self) -> Result<Vec<JobRecord>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree.iter() {
            let (key, bytes) = item?;
            let record = decode(&String::from_utf8_lossy(&key), &bytes)?;
            if !record.status.is_final() {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// Commit the writes so far with the database's durability (before acknowledging a
    /// submission).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.durable.commit().await?;
        Ok(())
    }
}

fn decode(key: &str, bytes: &[u8]) -> Result<JobRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: format!("job {key}"),
        reason: e.to_string(),
    })
}

impl From<&JobRecord> for JobEvent {
    fn from(r: &crate::tools::jobs::JobRecord) -> Self {
        Self {
            job_id: r.job_id.clone(),
            tool: r.tool.clone(),
            call_id: r.call_id.clone(),
            agent: r.agent.clone(),
            session: r.session.clone(),
            user: r.user.clone(),
            turn_id: r.turn_id.clone(),
            status: r.status,
            progress: r.progress.clone(),
            result: r.result.clone(),
            error: r.error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(status: JobStatus) -> JobRecord {
        JobRecord {
            job_id: new_job_id(),
            tool: "generate_report".into(),
            call_id: "c1".into(),
            agent: None,
            session: Some("s1".into()),
            user: None,
            turn_id: None,
            arguments: json!({"topic": "x"}),
            status,
            progress: None,
            result: None,
            error: None,
            idempotency_key: None,
            attempts: 0,
            requeued: false,
            external: None,
            created: Utc::now(),
            updated: Utc::now(),
        }
    }

    #[test]
    fn unfinished_lists_only_jobs_still_to_do_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let ids = {
            let db =
                crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
            let store = JobStore::open(&db).unwrap();
            let mut ids = Vec::new();
            for status in [JobStatus::Running, JobStatus::Done, JobStatus::Submitted] {
                let mut r = record(status);
                store.put(&mut r).unwrap();
                ids.push(r.job_id);
            }
            db.flush().unwrap();
            ids
        };
        let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
        let store = JobStore::open(&db).unwrap();
        let open: Vec<String> = store
            .unfinished()
            .unwrap()
            .into_iter()
            .map(|r| r.job_id)
            .collect();
        assert_eq!(open, vec![ids[0].clone(), ids[2].clone()]);
        assert_eq!(store.get(&ids[1]).unwrap().unwrap().status, JobStatus::Done);
        assert!(store.get("job-missing").unwrap().is_none());
    }

    #[test]
    fn job_ids_are_subject_tokens() {
        crate::protocol::subjects::job(&new_job_id()).unwrap();
    }
}
