//! A session store on the replicated log keeps its sled trees as a cache of the log: this
//! module brings that cache up to date before a session is served ([`SessionStore::load_synced`],
//! which falls back to the log alone when the cache cannot be used), heals every cached session
//! after a start ([`SessionStore::heal_cached`]), and writes records read from the log into the
//! trees, as it writes the write-behind saves ([`SessionStore::write_cache`]). Which side wins
//! when they disagree is [`super::reconcile`]'s.

use chrono::Utc;

use super::codec::{decode, encode, encode_session};
use super::{blocking, reconcile, session_key, SessionMeta, SessionStore, StoredMessage};
use crate::store::replica::LogRecord;
use crate::store::tasks::TaskState;
use crate::store::StoreError;

impl SessionStore {
    /// One save into the cache of the replicated log: messages, then the session's record
    /// (metadata and task state: what [`super::reconcile`] checks the cache against, so it
    /// goes last).
    pub(super) fn write_cache(
        &self,
        meta: &SessionMeta,
        seqs: &[u64],
        listed: &[Vec<u8>],
        task_bytes: &[u8],
    ) -> Result<(), StoreError> {
        self.insert_messages(&meta.agent, &meta.session, seqs, listed)?;
        let key = session_key(&meta.agent, &meta.session);
        self.sessions
            .insert(key, encode_session(meta, task_bytes)?)?;
        Ok(())
    }

    /// [`Self::write_cache`] of a session state read back from the log (records replayed,
    /// the log's state replacing a diverged cache).
    pub(super) fn write_cache_of(
        &self,
        meta: &SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
    ) -> Result<(), StoreError> {
        let seqs: Vec<u64> = messages.iter().map(|m| m.seq).collect();
        let listed = messages.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        self.write_cache(meta, &seqs, &listed, &encode(task)?)
    }

    /// [`Self::load`], after bringing the local cache up to date with the replicated log (the
    /// records other owners appended since this process last held the session).
    pub async fn load_synced(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<(Option<SessionMeta>, Vec<StoredMessage>, TaskState), StoreError> {
        let Some(log) = &self.log else {
            let (store, a, s) = (self.clone(), agent.to_string(), session.to_string());
            return blocking(move || store.load(&a, &s)).await;
        };
        match reconcile::load(self, log, agent, session).await {
            Ok(loaded) => Ok(loaded),
            Err(e @ StoreError::Log(_)) => Err(e),
            Err(e) => {
                // The cache cannot be read or brought up to date: the log alone has it all.
                cache_failed(session, &e);
                let records = log.read_after(agent, session, 0).await?;
                fold_records(records)
            }
        }
    }

    /// After a start on a cluster: every cached session whose replicated log is empty or
    /// behind this cache (the JetStream store wiped, or restored from an older backup) is
    /// reconciled now rather than when its next message comes — its log re-seeded, so readers
    /// of the log (`hermes sessions`, other owners) see it. Returns the sessions re-seeded
    /// with a turn that has work left (their inbox items may be gone with the old store), each
    /// with whether its turn waits for a job (whose final event may be gone too).
    pub async fn heal_cached(&self) -> Result<Vec<(String, String, bool)>, StoreError> {
        let Some(log) = &self.log else {
            return Ok(Vec::new());
        };
        let cached = {
            let store = self.clone();
            blocking(move || store.list(None)).await?
        };
        let mut resume = Vec::new();
        for meta in cached {
            let (agent, session) = (meta.agent.as_str(), meta.session.as_str());
            if reconcile::in_step(self, log, agent, session).await? {
                continue;
            }
            let ((_, _, task), outcome) =
                reconcile::load_telling(self, log, agent, session).await?;
            let waits_for_job = task.resumable_turn().is_none()
                && task
                    .turn
                    .as_ref()
                    .is_some_and(|t| t.phase == crate::store::tasks::TurnPhase::WaitingJob);
            let unfinished = task.resumable_turn().is_some()
                || task.pending_extraction().is_some()
                || !task.parked.is_empty()
                || waits_for_job;
            if outcome == reconcile::Outcome::Reseeded && unfinished {
                resume.push((agent.to_owned(), session.to_owned(), waits_for_job));
            }
        }
        Ok(resume)
    }

    /// Write records read from the replicated log into the local trees.
    pub(super) fn apply_records(
        &self,
        records: Vec<(u64, bytes::Bytes)>,
    ) -> Result<(), StoreError> {
        for (seq, bytes) in records {
            let record: LogRecord = decode("session log record", &bytes)?;
            let LogRecord {
                mut meta,
                messages,
                task,
                ..
            } = record;
            meta.log_seq = seq;
            self.write_cache_of(&meta, &messages, &task)?;
        }
        Ok(())
    }
}

/// A session as its whole replicated log says, without the cache (the shape `load` returns).
fn fold_records(
    records: Vec<(u64, bytes::Bytes)>,
) -> Result<(Option<SessionMeta>, Vec<StoredMessage>, TaskState), StoreError> {
    Ok(match crate::store::session_reader::fold(records)? {
        Some((meta, messages, task)) => (Some(meta), messages, task),
        None => (None, Vec::new(), TaskState::default()),
    })
}

/// Say (rarely: once a minute at most) that the local cache of the replicated log failed.
pub(super) fn cache_failed(session: &str, error: &StoreError) {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = Utc::now().timestamp();
    if now - LAST.swap(now, Ordering::Relaxed) >= 60 {
        tracing::warn!(session, %error, "the local session cache failed (disk full?); sessions are read from the replicated log until this process restarts");
    }
}
