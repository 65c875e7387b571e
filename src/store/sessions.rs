//! The conversation layer: session metadata and every message, in sled.
//!
//! Trees (opened here):
//! - `sessions`: `<agent>\0<session>` → the session's record, JSON `{"meta": SessionMeta,
//!   "task": TaskState}` (goal, summary, turn state): one record a save writes besides its
//!   messages. Earlier versions wrote the metadata alone here and the task state in `tasks`.
//! - `messages`: `<agent>\0<session>\0<seq: u64 big-endian>` → JSON [`StoredMessage`], or a
//!   JSON array of the messages a save stored together, keyed by the first one's `seq`
//! - `tasks`: earlier versions' task states (`<agent>\0<session>` → JSON [`TaskState`]), moved
//!   into the session records when a store opens ([`SessionStore::open`]).
//!
//! With a replicated log ([`super::replica`], the NATS bus) every save is first appended to the
//! session's log, and these trees are a local cache that [`SessionStore::load_synced`] brings up
//! to date from the log: whichever process owns the session next sees its whole history. The
//! log is the truth; what happens when it and the cache disagree (the cache ahead of a purged
//! log, behind it, diverged from it, the log unreachable) is [`reconcile`]'s rule book. The
//! cache is written behind the turn, once the log holds the save, on the database's
//! write-behind thread ([`Durable::write_behind`]); this store's readers settle that queue
//! before they read, so they read every save made before.
//!
//! Messages are append-only. Writes are not flushed here: the turn calls [`SessionStore::commit`]
//! where its guarantees need it (before an acknowledgement or an answer leaves), so one flush of
//! the database's group commit serves every session that wrote since the last.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[cfg(test)]
mod behind_tests;
mod codec;
mod reconcile;
mod synced;

use codec::{
    decode, decode_batch, decode_session, decode_session_meta, encode, encode_batch, encode_record,
    encode_session, BATCH_MAX,
};

pub use reconcile::ASIDE_TREE;

use super::durability::{Durable, Mode, Ticket};
use super::replica::SessionLog;
use super::tasks::TaskState;
use super::StoreError;
use crate::protocol::chat::{ChatMessage, Usage};
use crate::protocol::ToolStatus;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub agent: String,
    pub session: String,
    pub user: String,
    #[serde(with = "crate::protocol::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "crate::protocol::timestamp")]
    pub updated_at: DateTime<Utc>,
    /// Messages stored so far; the next message gets this sequence number.
    pub next_seq: u64,
    /// Sequence of the last record of the replicated session log this state includes (0 with
    /// no replicated log, see [`super::replica`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub log_seq: u64,
    /// Every time an agent handed the conversation to another, oldest first; the last one's
    /// `to` answers the session's messages now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<HandoffRecord>,
    /// Local records a session process kept aside because the replicated log disagreed with
    /// them and won (see [`reconcile`]), oldest first; `hermes sessions show` names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<SetAsideRecord>,
}

/// Messages of a process' cache that the replicated log did not hold when the two diverged:
/// the log won, and these were kept aside for inspection instead of being served or lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetAsideRecord {
    #[serde(with = "crate::protocol::timestamp")]
    pub at: DateTime<Utc>,
    /// How many messages were kept aside, and their sequences in the cache.
    pub messages: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// Where they are: the sled tree and key, and the process' host.
    pub kept_in: String,
}

/// One handoff of the conversation from one agent to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRecord {
    pub from: String,
    pub to: String,
    pub reason: String,
    pub turn_id: String,
    #[serde(with = "crate::protocol::timestamp")]
    pub at: DateTime<Utc>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SessionMeta {
    /// The agent that answers this session's messages: the session's own agent, or the last
    /// one the conversation was handed to.
    pub fn active_agent(&self) -> &str {
        self.handoffs.last().map_or(&self.agent, |h| &h.to)
    }

    /// A new, empty session of `user`.
    pub fn new(agent: &str, session: &str, user: &str) -> Self {
        let now = Utc::now();
        Self {
            agent: agent.to_string(),
            session: session.to_string(),
            user: user.to_string(),
            created_at: now,
            updated_at: now,
            next_seq: 0,
            log_seq: 0,
            handoffs: Vec::new(),
            set_aside: Vec::new(),
        }
    }
}

/// One message of a session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub seq: u64,
    pub id: String,
    pub turn_id: String,
    #[serde(with = "crate::protocol::timestamp")]
    pub ts: DateTime<Utc>,
    /// Token count with the session model's tokenizer, computed once when stored.
    pub tokens: u32,
    /// What the provider reported for the model call that produced this message, beside
    /// our own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Shared with every planning request that sends it (a turn's context is most of its
    /// session's history), so assembling a context copies no message.
    pub message: Arc<ChatMessage>,
    /// A tool result's status, as the call ended (the loop guard counts failures by it, never
    /// by the text the model was shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_status: Option<ToolStatus>,
}

/// Read/write access to the conversation trees. Cheap to clone.
#[derive(Clone)]
pub struct SessionStore {
    db: Durable,
    sessions: sled::Tree,
    messages: sled::Tree,
    tasks: sled::Tree,
    /// The replicated log, when sessions may move between processes.
    log: Option<Arc<dyn SessionLog>>,
}

fn session_key(agent: &str, session: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(agent.len() + session.len() + 1);
    k.extend_from_slice(agent.as_bytes());
    k.push(0);
    k.extend_from_slice(session.as_bytes());
    k
}

fn message_prefix(agent: &str, session: &str) -> Vec<u8> {
    let mut k = session_key(agent, session);
    k.push(0);
    k
}

fn message_key(agent: &str, session: &str, seq: u64) -> Vec<u8> {
    let mut k = message_prefix(agent, session);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

impl SessionStore {
    /// The store of `db`; task states an earlier version kept apart (tree `tasks`) move into
    /// their sessions' records first.
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        let store = Self {
            db: db.clone(),
            sessions: db.open_tree("sessions")?,
            messages: db.open_tree("messages")?,
            tasks: db.open_tree("tasks")?,
            log: None,
        };
        store.merge_earlier_tasks()?;
        Ok(store)
    }

    /// Move each task state of the `tasks` tree into its session's record (written before the
    /// task is removed, so a crash in between leaves both, and the record wins). A task whose
    /// session has no record (an earlier version stopped between the two writes of a new
    /// session's first save) stays where it is, and is read from there.
    fn merge_earlier_tasks(&self) -> Result<(), StoreError> {
        if self.tasks.is_empty() {
            return Ok(());
        }
        let mut moved = 0usize;
        for item in self.tasks.iter() {
            let (key, task) = item?;
            let Some(record) = self.sessions.get(&key)? else {
                continue;
            };
            if let (meta, None) = decode_session(&record)? {
                self.sessions.insert(&key, encode_session(&meta, &task)?)?;
            }
            self.tasks.remove(&key)?;
            moved += 1;
        }
        if moved > 0 {
            tracing::info!(
                sessions = moved,
                "task states moved into their sessions' records"
            );
        }
        Ok(())
    }

    /// This store with every save appended to `log` first (see [`super::replica`]).
    pub fn with_log(mut self, log: Arc<dyn SessionLog>) -> Self {
        self.log = Some(log);
        self
    }

    /// Whether saves go to a replicated log (sessions may move between processes).
    pub fn is_replicated(&self) -> bool {
        self.log.is_some()
    }

    /// The replicated log saves go to, if any.
    pub fn log(&self) -> Option<Arc<dyn SessionLog>> {
        self.log.clone()
    }

    pub fn meta(&self, agent: &str, session: &str) -> Result<Option<SessionMeta>, StoreError> {
        self.cached()
            .sessions
            .get(session_key(agent, session))?
            .map(|v| decode_session_meta(&v))
            .transpose()
    }

    /// A session's metadata and task state, as its record holds them.
    fn record(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<(Option<SessionMeta>, TaskState), StoreError> {
        let key = session_key(agent, session);
        match self.cached().sessions.get(&key)? {
            Some(v) => match decode_session(&v)? {
                (meta, Some(task)) => Ok((Some(meta), task)),
                (meta, None) => Ok((Some(meta), self.earlier_task(&key)?)),
            },
            None => Ok((None, self.earlier_task(&key)?)),
        }
    }

    /// A task state an earlier version kept apart from its session's record (see
    /// [`Self::merge_earlier_tasks`]).
    fn earlier_task(&self, key: &[u8]) -> Result<TaskState, StoreError> {
        Ok(self
            .tasks
            .get(key)?
            .map(|v| decode::<TaskState>("task state", &v))
            .transpose()?
            .unwrap_or_default())
    }

    /// Metadata, messages and task state of a session, consistent with each other: `next_seq`
    /// follows the last stored message even if a crash came between the two writes.
    pub fn load(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<(Option<SessionMeta>, Vec<StoredMessage>, TaskState), StoreError> {
        let (mut meta, task) = self.record(agent, session)?;
        let messages = self.messages(agent, session)?;
        if let (Some(meta), Some(last)) = (meta.as_mut(), messages.last()) {
            meta.next_seq = meta.next_seq.max(last.seq + 1);
        }
        Ok((meta, messages, task))
    }

    /// Every message of a session, in order.
    pub fn messages(&self, agent: &str, session: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let mut out = Vec::new();
        for item in self
            .cached()
            .messages
            .scan_prefix(message_prefix(agent, session))
        {
            let (_, v) = item?;
            decode_batch(&v, &mut out)?;
        }
        if out.windows(2).any(|w| w[0].seq >= w[1].seq) {
            // A message stored twice, alone by an earlier version and in a later batch (a
            // record of the replicated log replayed): one copy, the later key's.
            out.reverse();
            let mut seen = std::collections::HashSet::new();
            out.retain(|m| seen.insert(m.seq));
            out.sort_by_key(|m| m.seq);
        }
        Ok(out)
    }

    /// Store `listed` (the encoded `messages`) in as few records as they fit: consecutive
    /// messages in batches of at most [`BATCH_MAX`], each keyed by its first message.
    fn insert_messages(
        &self,
        agent: &str,
        session: &str,
        seqs: &[u64],
        listed: &[Vec<u8>],
    ) -> Result<(), StoreError> {
        let mut start = 0;
        while start < listed.len() {
            let mut end = start + 1;
            while end < listed.len() && end - start < BATCH_MAX && seqs[end] > seqs[end - 1] {
                end += 1;
            }
            self.messages.insert(
                message_key(agent, session, seqs[start]),
                encode_batch(&listed[start..end]),
            )?;
            start = end;
        }
        Ok(())
    }

    pub fn task(&self, agent: &str, session: &str) -> Result<TaskState, StoreError> {
        Ok(self.record(agent, session)?.1)
    }

    /// Sessions whose last turn did not finish and can go on by itself (a restart resumes
    /// them; a turn waiting for the user's confirmation waits for that instead).
    pub fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        let unfinished = |task: &TaskState| {
            task.resumable_turn().is_some()
                || task.pending_extraction().is_some()
                || !task.parked.is_empty()
        };
        let named = |k: &[u8]| {
            let key = String::from_utf8_lossy(k).to_string();
            key.split_once('\0')
                .map(|(agent, session)| (agent.to_string(), session.to_string()))
        };
        let mut out = Vec::new();
        for item in self.cached().sessions.iter() {
            let (k, v) = item?;
            let task = match decode_session(&v)? {
                (_, Some(task)) => task,
                (_, None) => self.earlier_task(&k)?,
            };
            if unfinished(&task) {
                out.extend(named(&k));
            }
        }
        // An earlier version's task without its session's record.
        for item in self.tasks.iter() {
            let (k, v) = item?;
            if !self.sessions.contains_key(&k)? && unfinished(&decode("task state", &v)?) {
                out.extend(named(&k));
            }
        }
        Ok(out)
    }

    /// [`Self::save`], then [`Self::commit`]: durable as `engine.durability` says when this
    /// returns.
    pub async fn save_committed(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
    ) -> Result<(), StoreError> {
        self.save(meta, messages, task).await?;
        self.commit().await
    }

    /// Store the task state (and any messages) in one flush.
    ///
    /// With a replicated log the save is done once the log holds it: these trees are this
    /// process's cache of the log, and a cache that cannot be written — a full disk, after
    /// which sled fails every write until the process restarts — costs speed, not the turn
    /// ([`Self::load_synced`] then reads the log instead).
    pub async fn save(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
    ) -> Result<(), StoreError> {
        self.save_with(meta, messages, task, None).await
    }

    /// [`Self::save`] on the replicated log, the record carrying `extract_json` (an encoded
    /// extraction job: [`crate::store::replica::LogRecord::extract`]). Without a log there is
    /// nothing to carry it: the caller queues it itself.
    pub async fn save_carrying(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
        extract_json: &[u8],
    ) -> Result<(), StoreError> {
        self.save_with(meta, messages, task, Some(extract_json))
            .await
    }

    async fn save_with(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
        task: &TaskState,
        extract: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let now = Utc::now();
        let Some(log) = &self.log else {
            return self.append_at(meta, messages, &encode(task)?, now);
        };
        // The record carries the metadata as this save leaves it, so a reader of the log
        // alone (`hermes sessions ls` over the bus) sees what the local trees hold.
        let mut after = meta.clone();
        after.updated_at = now;
        after.next_seq = next_seq_after(after.next_seq, messages);
        // The messages and the task are encoded once, for the log record and the local cache.
        let task_bytes = encode(task)?;
        let listed = messages.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        let bytes = bytes::Bytes::from(encode_record(&after, &listed, &task_bytes, extract)?);
        meta.log_seq = log
            .append(&meta.agent, &meta.session, bytes, meta.log_seq)
            .await?;
        meta.next_seq = after.next_seq;
        meta.updated_at = now;
        // The cache is written behind the turn, in order with this process' other cache
        // writes; its readers settle the queue first (`cached`).
        let seqs: Vec<u64> = messages.iter().map(|m| m.seq).collect();
        let (store, cached_meta) = (self.clone(), meta.clone());
        self.db.write_behind(move || {
            if let Err(e) = store.write_cache(&cached_meta, &seqs, &listed, &task_bytes) {
                synced::cache_failed(&cached_meta.session, &e);
            }
        });
        Ok(())
    }

    /// The trees as every write made so far has left them: the cache writes a replicated
    /// log's saves hand to the write-behind thread are applied first (whichever store of the
    /// database handed them over). Blocks briefly while some are queued, so async callers
    /// read off the runtime ([`blocking`]), as they do; at once on a database without any.
    fn cached(&self) -> &Self {
        self.db.settle_behind();
        self
    }

    /// Append messages to a session (creating it), its task state as it was.
    /// `meta` is the caller's current view; it is updated in place.
    pub async fn append(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        let task = self.task(&meta.agent, &meta.session)?;
        self.append_at(meta, messages, &encode(&task)?, Utc::now())
    }

    /// Store `messages`, then the session's record with `task_json`, the session updated at
    /// `now`.
    fn append_at(
        &self,
        meta: &mut SessionMeta,
        messages: &[StoredMessage],
        task_json: &[u8],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        // Plain inserts, not `apply_batch`/transactions: those take sled's global write lock,
        // which deadlocks against its background flusher under concurrent load (seen with 200
        // sessions in flight). Messages go first; a crash before the record is written is
        // repaired on load (`load` derives `next_seq` from the messages), and the turn
        // resumes from the task state of the save before.
        let listed = messages.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        let seqs: Vec<u64> = messages.iter().map(|m| m.seq).collect();
        self.insert_messages(&meta.agent, &meta.session, &seqs, &listed)?;
        meta.next_seq = next_seq_after(meta.next_seq, messages);
        meta.updated_at = now;
        self.sessions.insert(
            session_key(&meta.agent, &meta.session),
            encode_session(meta, task_json)?,
        )?;
        Ok(())
    }

    /// Make everything written so far durable as `engine.durability` says (on disk before
    /// this returns in `sync` mode).
    ///
    /// With a replicated log this waits for nothing: every save was appended to the log, and
    /// acknowledged by the server, before it reached the local trees, so the log already holds
    /// what the guarantee covers. The trees are a cache that [`Self::load_synced`] brings up to
    /// date from the log, whatever a crash cut off from them; they are written behind the
    /// turn and flushed in the background within milliseconds ([`Durable::write_behind`]),
    /// one flush for many turns.
    pub async fn commit(&self) -> Result<(), StoreError> {
        if self.log.is_some() {
            self.db.flush_soon();
            return Ok(());
        }
        Ok(self.db.commit().await?)
    }

    /// Have what was written so far flushed in the background, without waiting: for a write
    /// whose loss in a crash is made good elsewhere (a job's result, found again where the
    /// job left it).
    pub fn flush_soon(&self) {
        self.db.flush_soon();
    }

    /// For a writer that must wait for its writes to be durable but may share a flush: in
    /// `sync` mode without a replicated log, a claim on everything written so far that a
    /// flush covers within `max` ([`Self::reached`] waits for it). `None` where
    /// [`Self::commit`] waits for nothing anyway (`batch` mode, a replicated log).
    pub fn commit_within(&self, max: std::time::Duration) -> Option<Ticket> {
        (self.log.is_none() && self.db.mode() == Mode::Sync).then(|| self.db.ticket_within(max))
    }

    /// Wait until the writes `ticket` claims are on disk.
    pub async fn reached(&self, ticket: Ticket) -> Result<(), StoreError> {
        Ok(self.db.reached(ticket).await?)
    }

    /// All sessions, optionally only one user's.
    pub fn list(&self, user: Option<&str>) -> Result<Vec<SessionMeta>, StoreError> {
        let mut out = Vec::new();
        for item in self.cached().sessions.iter() {
            let (_, v) = item?;
            let meta = decode_session_meta(&v)?;
            if user.is_none_or(|u| u == meta.user) {
                out.push(meta);
            }
        }
        out.sort_by_key(|m| std::cmp::Reverse(m.updated_at));
        Ok(out)
    }
}

/// The sequence the next message gets once `messages` are stored after `next_seq`.
pub fn next_seq_after(next_seq: u64, messages: &[StoredMessage]) -> u64 {
    messages
        .iter()
        .fold(next_seq, |next, m| next.max(m.seq + 1))
}

/// Run blocking sled work off the caller's thread.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Worker(e.to_string()))?
}

#[cfg(test)]
pub(super) mod tests;
