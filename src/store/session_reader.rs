//! Reading stored sessions without owning them: for `hermes sessions ls|show|search`, and for
//! the services that answer them over the bus.
//!
//! A reader reads where a session's whole state is. With no replicated log (the embedded bus,
//! or a stopped data directory) that is the local sled trees. With one (`--bus nats://`, where
//! each session process holds in sled only the sessions it owned) it is the replicated session
//! log in JetStream, so any session process answers for every session; the log is folded in
//! memory, and the local cache — which only the owner writes — is never touched.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::replica::{LogRecord, SessionLog};
use super::sessions::{blocking, SessionMeta, SessionStore, StoredMessage};
use super::tasks::TaskState;
use super::StoreError;

/// A session's metadata with its task state.
pub type Snapshot = (SessionMeta, TaskState);

/// A whole session: metadata, every message in order, task state.
pub type Whole = (SessionMeta, Vec<StoredMessage>, TaskState);

/// Reads sessions from the local trees or from the replicated log. Cheap to clone.
#[derive(Clone)]
pub enum SessionReader {
    /// The sled trees of a process that holds every session.
    Local(SessionStore),
    /// The replicated session log (a cluster).
    Replicated(Arc<dyn SessionLog>),
}

impl SessionReader {
    /// The reader for sessions stored through `store`: its log when it has one.
    pub fn of(store: &SessionStore) -> Self {
        match store.log() {
            Some(log) => SessionReader::Replicated(log),
            None => SessionReader::Local(store.clone()),
        }
    }

    /// Every session (of `user`, of `agent`, when given) with its task state, newest first.
    pub async fn list(
        &self,
        user: Option<&str>,
        agent: Option<&str>,
    ) -> Result<Vec<Snapshot>, StoreError> {
        let mut all = match self {
            SessionReader::Local(store) => {
                let (store, user) = (store.clone(), user.map(str::to_owned));
                blocking(move || {
                    store
                        .list(user.as_deref())?
                        .into_iter()
                        .map(|meta| {
                            let task = store.task(&meta.agent, &meta.session)?;
                            Ok((meta, task))
                        })
                        .collect::<Result<Vec<_>, StoreError>>()
                })
                .await?
            }
            SessionReader::Replicated(log) => log
                .last_of_each(agent)
                .await?
                .into_iter()
                .map(|(seq, bytes)| {
                    let record = decode_record(&bytes)?;
                    let mut meta = record.meta;
                    meta.log_seq = seq;
                    meta.next_seq =
                        super::sessions::next_seq_after(meta.next_seq, &record.messages);
                    Ok((meta, record.task))
                })
                .collect::<Result<Vec<_>, StoreError>>()?,
        };
        all.retain(|(meta, _)| {
            user.is_none_or(|u| meta.user == u) && agent.is_none_or(|a| meta.agent == a)
        });
        all.sort_by(|(a, _), (b, _)| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| (&a.agent, &a.session).cmp(&(&b.agent, &b.session)))
        });
        Ok(all)
    }

    /// One session whole, or none when it was never stored.
    pub async fn load(&self, agent: &str, session: &str) -> Result<Option<Whole>, StoreError> {
        match self {
            SessionReader::Local(store) => {
                let (store, a, s) = (store.clone(), agent.to_owned(), session.to_owned());
                let (meta, messages, task) = blocking(move || store.load(&a, &s)).await?;
                Ok(meta.map(|meta| (meta, messages, task)))
            }
            SessionReader::Replicated(log) => fold(log.read_after(agent, session, 0).await?),
        }
    }

    /// Every session of `user` with all its messages (what a session search scans).
    pub async fn histories(
        &self,
        user: &str,
    ) -> Result<Vec<(SessionMeta, Vec<StoredMessage>)>, StoreError> {
        let mut out = Vec::new();
        for (meta, _) in self.list(Some(user), None).await? {
            let messages = match self {
                SessionReader::Local(store) => {
                    let (store, a, s) = (store.clone(), meta.agent.clone(), meta.session.clone());
                    blocking(move || store.messages(&a, &s)).await?
                }
                SessionReader::Replicated(_) => self
                    .load(&meta.agent, &meta.session)
                    .await?
                    .map(|(_, messages, _)| messages)
                    .unwrap_or_default(),
            };
            out.push((meta, messages));
        }
        Ok(out)
    }
}

fn decode_record(bytes: &[u8]) -> Result<LogRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: "session log record".into(),
        reason: e.to_string(),
    })
}

/// A session from its log records, oldest first, as a new owner's cache would hold it: the
/// last record's metadata and task state, and every message (a later copy of a sequence
/// number wins).
pub(super) fn fold(records: Vec<(u64, bytes::Bytes)>) -> Result<Option<Whole>, StoreError> {
    let mut last: Option<(SessionMeta, TaskState)> = None;
    let mut messages = BTreeMap::new();
    for (seq, bytes) in records {
        let record = decode_record(&bytes)?;
        for m in record.messages {
            messages.insert(m.seq, m);
        }
        let mut meta = record.meta;
        meta.log_seq = seq;
        last = Some((meta, record.task));
    }
    Ok(last.map(|(mut meta, task)| {
        let messages: Vec<StoredMessage> = messages.into_values().collect();
        meta.next_seq = super::sessions::next_seq_after(meta.next_seq, &messages);
        (meta, messages, task)
    }))
}

#[cfg(test)]
#[path = "session_reader_tests.rs"]
mod tests;
