//! The rule book for a session's cache (the sled trees of the process that owns it) and its
//! replicated log (JetStream) when they disagree. With NATS the log is the truth and the cache
//! is a cache; a new owner runs [`load`] before it serves the session, and each disagreement
//! has one rule:
//!
//! - **In step** — the log's last record is the one the cache last followed (its sequence,
//!   `SessionMeta::log_seq`, and its fingerprint, the `created_at`/`updated_at` written with
//!   it): the cache is served as it is. The usual case; one read of the log.
//! - **Cache behind the log** — another owner appended since: the records the cache has not
//!   seen are replayed into it. When the cache's messages are a prefix of the log's but its
//!   last record is gone (the log was rebuilt), the log's whole state replaces the cache.
//! - **Cache ahead of an empty or older log** — the stream was purged, the JetStream store
//!   wiped, or the log restored from an older backup than the data directory: the log holds a
//!   prefix of the cache's messages (or nothing). The log is re-seeded from the cache with one
//!   fenced append — the whole session, or the messages the log lacks — and a warning says so.
//!   Once: afterwards they are in step.
//! - **Diverged** — each holds messages the other does not (a rebuilt deployment served the
//!   session while this data directory was away): the log wins. The cache's diverging messages
//!   are kept aside in tree [`ASIDE_TREE`] (with the cache's metadata and task state), the
//!   session's metadata names them (`hermes sessions show` prints where), the cache is replaced
//!   by the log's state, and a warning says so.
//! - **Log unreachable** — nothing is served from the cache alone: [`load`] fails with
//!   [`super::super::replica::LogError::Unavailable`], and the session actor refuses the message
//!   or ends the turn with an `error` event naming the cause once handing it back has not helped
//!   (see `crate::actors::session`).
//!
//! A fenced append that loses a race (another process re-seeded or wrote first) fails with
//! `Fenced`: that process owns the session now, and the item goes back to the inbox.

use std::sync::Arc;

use chrono::Utc;

use super::{
    blocking, encode, message_prefix, next_seq_after, session_key, SessionMeta, SessionStore,
    SetAsideRecord, StoredMessage,
};
use crate::store::replica::{LogRecord, SessionLog};
use crate::store::tasks::TaskState;
use crate::store::StoreError;

/// A session as the cache serves it: metadata (none: never stored), messages, task state.
pub(super) type Loaded = (Option<SessionMeta>, Vec<StoredMessage>, TaskState);

/// The tree of the local records kept aside when the log won over a diverged cache:
/// `<agent>\0<session>\0<RFC 3339 time>` → JSON `{meta, messages, task}`.
pub const ASIDE_TREE: &str = "sessions_aside";

/// Which rule [`load_telling`] applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// In step, nothing cached, or the cache brought up to the log.
    Followed,
    /// The log was empty or behind: re-seeded from the cache.
    Reseeded,
    /// Diverged: the log won, the cache's messages kept aside.
    SetAside,
}

/// The session's state, the cache reconciled with the log first (see the module docs).
pub(super) async fn load(
    store: &SessionStore,
    log: &Arc<dyn SessionLog>,
    agent: &str,
    session: &str,
) -> Result<Loaded, StoreError> {
    Ok(load_telling(store, log, agent, session).await?.0)
}

/// Whether the log's last record of the session is the one the cache follows (or neither
/// holds anything): the cheap check of a sweep over every cached session.
pub(super) async fn in_step(
    store: &SessionStore,
    log: &Arc<dyn SessionLog>,
    agent: &str,
    session: &str,
) -> Result<bool, StoreError> {
    let meta = {
        let (store, a, s) = (store.clone(), agent.to_owned(), session.to_owned());
        blocking(move || store.meta(&a, &s)).await?
    };
    let tail = log.last_record(agent, session).await?;
    Ok(match (meta, tail) {
        (None, _) => true,
        // Behind the log: another owner has it; that owner's cache follows the log.
        (Some(meta), Some((seq, _))) if seq > meta.log_seq => true,
        (Some(meta), Some((seq, bytes))) => seq == meta.log_seq && follows(&meta, &bytes),
        (Some(_), None) => false,
    })
}

/// [`load`], saying which rule it applied.
pub(super) async fn load_telling(
    store: &SessionStore,
    log: &Arc<dyn SessionLog>,
    agent: &str,
    session: &str,
) -> Result<(Loaded, Outcome), StoreError> {
    let cached = {
        let (store, a, s) = (store.clone(), agent.to_owned(), session.to_owned());
        blocking(move || store.load(&a, &s)).await?
    };
    let tail = log.last_record(agent, session).await?;
    let last = tail.as_ref().map_or(0, |(seq, _)| *seq);
    let followed = |loaded| Ok((loaded, Outcome::Followed));
    let Some(meta) = cached.0.as_ref() else {
        if last == 0 {
            return followed(cached);
        }
        // Nothing cached: the log alone says what the session is.
        let records = log.read_after(agent, session, 0).await?;
        return followed(replay(store, records, agent, session).await?);
    };
    let seen = meta.log_seq;
    if seen > 0 && last == seen {
        if let Some((_, bytes)) = &tail {
            if follows(meta, bytes) {
                return followed(cached);
            }
        }
    } else if seen > 0 && last > seen {
        let mut records = log.read_after(agent, session, seen - 1).await?;
        let anchored = records
            .first()
            .is_some_and(|(seq, bytes)| *seq == seen && follows(meta, bytes));
        if anchored {
            records.remove(0);
            return followed(replay(store, records, agent, session).await?);
        }
    }
    reconcile(store, log, agent, session, cached, last).await
}

/// Whether the log record `bytes` is the one the cache's `meta` was written with.
fn follows(meta: &SessionMeta, bytes: &[u8]) -> bool {
    serde_json::from_slice::<LogRecord>(bytes).is_ok_and(|record| {
        record.meta.created_at == meta.created_at && record.meta.updated_at == meta.updated_at
    })
}

/// Write `records` into the cache, then read the session from it.
async fn replay(
    store: &SessionStore,
    records: Vec<(u64, bytes::Bytes)>,
    agent: &str,
    session: &str,
) -> Result<Loaded, StoreError> {
    let (store, a, s) = (store.clone(), agent.to_owned(), session.to_owned());
    blocking(move || {
        store.apply_records(records)?;
        store.load(&a, &s)
    })
    .await
}

/// The slow path: the cache is not in step with the log's last record. Read the whole log and
/// apply the rule its messages and the cache's call for.
async fn reconcile(
    store: &SessionStore,
    log: &Arc<dyn SessionLog>,
    agent: &str,
    session: &str,
    cached: Loaded,
    last: u64,
) -> Result<(Loaded, Outcome), StoreError> {
    let records = if last == 0 {
        Vec::new()
    } else {
        log.read_after(agent, session, 0).await?
    };
    let logged = crate::store::session_reader::fold(records)?;
    let (Some(cached_meta), cached_messages, cached_task) = cached else {
        return Ok(((None, Vec::new(), TaskState::default()), Outcome::Followed));
    };
    let cache_ids = ids(&cached_messages);
    let log_ids = logged.as_ref().map(|(_, m, _)| ids(m)).unwrap_or_default();
    let log_is_prefix = cache_ids.starts_with(&log_ids);
    if logged.is_none() || (log_is_prefix && cache_ids.len() > log_ids.len()) {
        let missing = cached_messages[log_ids.len()..].to_vec();
        let seen = cached_meta.log_seq;
        let cached_task = extraction_again(cached_task);
        let meta = reseed(store, log, cached_meta, &missing, &cached_task, last).await?;
        tracing::warn!(
            agent,
            session,
            log_last = last,
            cache_followed = seen,
            messages = missing.len(),
            "the replicated session log was {} this process' cache (a purged stream, a wiped JetStream store, or a log restored from an older backup); re-seeded the log from the cache with one fenced append",
            if last == 0 { "empty for this session, behind" } else { "behind" }
        );
        return Ok((
            (Some(meta), cached_messages, cached_task),
            Outcome::Reseeded,
        ));
    }
    let Some((log_meta, log_messages, log_task)) = logged else {
        return Ok(((None, Vec::new(), TaskState::default()), Outcome::Followed));
    };
    if log_ids.starts_with(&cache_ids) {
        tracing::info!(
            agent,
            session,
            log_last = last,
            cache_followed = cached_meta.log_seq,
            "the local session cache no longer follows the replicated log (the log was rebuilt); reloaded it from the log"
        );
        let loaded = replace(store, log_meta, log_messages, log_task).await?;
        return Ok((loaded, Outcome::Followed));
    }
    let split = cache_ids
        .iter()
        .zip(&log_ids)
        .take_while(|(a, b)| a == b)
        .count();
    let aside = cached_messages[split..].to_vec();
    let now = Utc::now();
    let key = format!("{agent}/{session}/{}", now.to_rfc3339());
    let note = SetAsideRecord {
        at: now,
        messages: aside.len(),
        first_seq: aside.first().map(|m| m.seq),
        last_seq: aside.last().map(|m| m.seq),
        kept_in: format!(
            "sled tree `{ASIDE_TREE}`, key `{key}`, in the data directory of the session process on host {}",
            host()
        ),
    };
    {
        let (store, meta, task) = (store.clone(), cached_meta.clone(), cached_task.clone());
        let (a, s, aside) = (agent.to_owned(), session.to_owned(), aside.clone());
        blocking(move || store.keep_aside(&a, &s, now, &meta, &aside, &task)).await?;
    }
    let mut meta = log_meta;
    meta.set_aside.push(note);
    meta.updated_at = now;
    let record = LogRecord {
        meta: meta.clone(),
        messages: Vec::new(),
        task: log_task.clone(),
        extract: None,
    };
    meta.log_seq = log
        .append(agent, session, bytes::Bytes::from(encode(&record)?), last)
        .await?;
    tracing::warn!(
        agent,
        session,
        kept_aside = aside.len(),
        first_seq = ?aside.first().map(|m| m.seq),
        kept_in = %key,
        "this process' session cache and the replicated log diverged; the log wins, and the cache's diverging messages are kept aside in tree {ASIDE_TREE} (`hermes sessions show` names them)"
    );
    let loaded = replace(store, meta, log_messages, log_task).await?;
    Ok((loaded, Outcome::SetAside))
}

/// The task state a re-seeded log starts from: its answered turn's extraction marked not
/// queued. The job rode on a log record, or waited in a queue, that went with the store the
/// log was rebuilt from; a re-seed record carries none. The session's owner queues it again
/// (the extractors skip a turn they already mined), and sends the answer again, with its id.
fn extraction_again(mut task: TaskState) -> TaskState {
    if let Some(turn) = task
        .turn
        .as_mut()
        .filter(|t| t.phase == crate::store::tasks::TurnPhase::Answered)
    {
        if turn.extraction_queued || turn.inbox_item.is_some() {
            turn.extraction_queued = false;
            turn.inbox_item = None;
        }
    }
    task
}

/// Append the cache's state to the log (fenced on `last`), carrying `missing` — the messages
/// the log lacks — and make the cache follow that record.
async fn reseed(
    store: &SessionStore,
    log: &Arc<dyn SessionLog>,
    mut meta: SessionMeta,
    missing: &[StoredMessage],
    task: &TaskState,
    last: u64,
) -> Result<SessionMeta, StoreError> {
    meta.updated_at = Utc::now();
    meta.next_seq = next_seq_after(meta.next_seq, missing);
    let record = LogRecord {
        meta: meta.clone(),
        messages: missing.to_vec(),
        task: task.clone(),
        extract: None,
    };
    meta.log_seq = log
        .append(
            &meta.agent,
            &meta.session,
            bytes::Bytes::from(encode(&record)?),
            last,
        )
        .await?;
    let (store, written, task) = (store.clone(), meta.clone(), task.clone());
    blocking(move || store.write_record(&written, &task)).await?;
    Ok(meta)
}

/// The cache holds exactly the log's state of the session.
async fn replace(
    store: &SessionStore,
    meta: SessionMeta,
    messages: Vec<StoredMessage>,
    task: TaskState,
) -> Result<Loaded, StoreError> {
    let store = store.clone();
    blocking(move || {
        let prefix = message_prefix(&meta.agent, &meta.session);
        let stale = store
            .messages
            .scan_prefix(&prefix)
            .keys()
            .collect::<Result<Vec<_>, _>>()?;
        for key in stale {
            store.messages.remove(key)?;
        }
        store.write_cache_of(&meta, &messages, &task)?;
        Ok((Some(meta), messages, task))
    })
    .await
}

/// Each message's sequence and id, in order: what two copies of a session are compared by.
fn ids(messages: &[StoredMessage]) -> Vec<(u64, String)> {
    messages.iter().map(|m| (m.seq, m.id.clone())).collect()
}

/// This host's name, for saying where records were kept aside.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "(unknown)".into())
}

impl SessionStore {
    fn write_record(&self, meta: &SessionMeta, task: &TaskState) -> Result<(), StoreError> {
        let record = super::codec::encode_session(meta, &encode(task)?)?;
        self.sessions
            .insert(session_key(&meta.agent, &meta.session), record)?;
        Ok(())
    }

    /// Keep a diverged cache's records under [`ASIDE_TREE`].
    fn keep_aside(
        &self,
        agent: &str,
        session: &str,
        at: chrono::DateTime<Utc>,
        meta: &SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
    ) -> Result<(), StoreError> {
        let tree = self.db.open_tree(ASIDE_TREE)?;
        let mut key = session_key(agent, session);
        key.push(0);
        key.extend_from_slice(at.to_rfc3339().as_bytes());
        let value = serde_json::json!({ "meta": meta, "messages": messages, "task": task });
        tree.insert(key, encode(&value)?)?;
        Ok(())
    }

    /// The records kept aside for a session, oldest first (see [`ASIDE_TREE`]).
    pub fn kept_aside(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<serde_json::Value>, StoreError> {
        let tree = self.db.open_tree(ASIDE_TREE)?;
        let mut prefix = session_key(agent, session);
        prefix.push(0);
        tree.scan_prefix(prefix)
            .values()
            .map(|v| super::decode("kept-aside session records", &v?))
            .collect()
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
