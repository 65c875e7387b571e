//! One logical memory per user across several memory-extractor copies (NATS cluster).
//!
//! Every write to a user's memory — what the merge rules decided, records forgotten, records
//! imported — is appended to the replicated memory log ([`crate::bus::cluster::Cluster::
//! memory_log`], one subject per user) as a [`Change`]. Appends are fenced: a copy appends
//! only if the user's last entry is the one it last applied, so two copies writing one user
//! at once are put in one order. Before a copy reads or writes a user's memory it applies the
//! entries it has not seen to its sled store (a cache of the log, whose applied position is
//! kept per user in tree [`APPLIED_TREE`]). The merge rules therefore always run on the whole
//! of the user's memory, whichever copy runs them.
//!
//! The expiry sweep is not logged: expiry depends only on the records and the clock, so each
//! copy expires the same records itself.
//!
//! The log is the truth and the sled store a cache; [`MemoryReplica::catch_up`] applies the
//! rule for each way they can disagree, as the session log does
//! (`crate::store::sessions`' reconcile module):
//! - **in step** (the user's last entry is the one this copy applied — its sequence and a
//!   fingerprint of its bytes, kept together): nothing to do;
//! - **cache behind** (entries after the one applied): they are applied;
//! - **cache ahead of an empty or older log, or diverged from it** (the stream purged, the
//!   JetStream store wiped, the log restored from an older backup: the applied entry is gone or
//!   different): every entry the log holds is applied (the log wins where it speaks), then the
//!   user's whole memory is appended as one fenced entry — the log is re-seeded once, with a
//!   warning — so the log holds the union and the next write is fenced on that entry instead of
//!   failing "kept moving" forever;
//! - **log unreachable**: the read or write fails with [`MemoryError::Replicated`] naming the
//!   cause (a recall answers without memory and says so; an extraction is retried later).

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::record::MemoryRecord;
use super::store::{MemoryError, MemoryStore};
use crate::store::durability::Durable;
use crate::store::log_tails::{fingerprint, Heard, HeardTails};
use crate::store::replica::{LogError, SessionLog};

/// Per-user position in the memory log: key `<user>` → u64 big-endian sequence, then the
/// u64 big-endian fingerprint of that entry's bytes (absent in positions written before it was
/// kept).
pub const APPLIED_TREE: &str = "memory_log_applied";
/// The first key token of every memory log subject.
const LOG_KEY: &str = "user";
/// How often a fenced append is tried again after catching up.
const FENCED_RETRIES: usize = 5;

/// One write to a user's memory, as logged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Records written (added, updated or imported), whole.
    #[serde(default)]
    pub upserts: Vec<MemoryRecord>,
    /// Ids of records removed.
    #[serde(default)]
    pub removed: Vec<String>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.removed.is_empty()
    }
}

/// The memory log and this copy's position in it.
#[derive(Clone)]
pub struct MemoryReplica {
    log: Arc<dyn SessionLog>,
    /// What a live feed of the log has heard of each user's last entry, where the bus has one.
    feed: Option<Arc<dyn HeardTails>>,
    applied: sled::Tree,
}

fn unavailable(e: impl std::fmt::Display) -> MemoryError {
    MemoryError::Replicated(e.to_string())
}

/// The log subject token of `user`: hex, so any user id makes one valid token.
fn user_token(user: &str) -> String {
    user.bytes().map(|b| format!("{b:02x}")).collect()
}

impl MemoryReplica {
    pub fn open(db: &Durable, log: Arc<dyn SessionLog>) -> Result<Self, MemoryError> {
        let applied = db
            .open_tree(APPLIED_TREE)
            .map_err(|source| MemoryError::Storage {
                action: "open its sled trees",
                source,
            })?;
        Ok(Self {
            log,
            feed: None,
            applied,
        })
    }

    /// Let [`Self::catch_up_heard`] trust `feed` (a live feed of the log's appends).
    pub fn with_feed(mut self, feed: Option<Arc<dyn HeardTails>>) -> Self {
        self.feed = feed;
        self
    }

    fn position(&self, user: &str) -> Result<u64, MemoryError> {
        Ok(self.anchor(user)?.0)
    }

    /// The sequence of the last entry applied, and its fingerprint when known.
    fn anchor(&self, user: &str) -> Result<(u64, Option<u64>), MemoryError> {
        let stored = self
            .applied
            .get(user.as_bytes())
            .map_err(|source| MemoryError::Storage {
                action: "read the memory log position",
                source,
            })?;
        let Some(v) = stored else {
            return Ok((0, None));
        };
        let word = |at: usize| {
            v.get(at..at + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
        };
        Ok((word(0).unwrap_or(0), word(8)))
    }

    fn set_position(&self, user: &str, seq: u64, entry: &[u8]) -> Result<(), MemoryError> {
        let mut value = seq.to_be_bytes().to_vec();
        value.extend_from_slice(&fingerprint(entry).to_be_bytes());
        self.applied
            .insert(user.as_bytes(), value)
            .map(|_| ())
            .map_err(|source| MemoryError::Storage {
                action: "write the memory log position",
                source,
            })
    }

    /// [`Self::catch_up`] for a recall: when the log's feed is live and has heard of no entry
    /// of the user's after the one this copy applied, nothing is read from the log. A recall
    /// runs at every turn, and the user's memory changes far less often: this keeps a request
    /// to the log's leader (two bus messages) off each turn. The feed hears an append as soon
    /// as the log's server delivers it (well under a millisecond on one host), so a recall may
    /// miss only a write acknowledged to another copy that instant, as it may miss one whose
    /// extraction is still running. Lists, writes and forgets read the log as before.
    pub async fn catch_up_heard(
        &self,
        store: &MemoryStore,
        user: &str,
    ) -> Result<bool, MemoryError> {
        if let Some(feed) = &self.feed {
            let (position, known) = self.anchor(user)?;
            let in_step = match feed.heard(LOG_KEY, &user_token(user)) {
                Heard::Unsure => false,
                Heard::Nothing => position == 0,
                // A position kept without a fingerprint matches any record at its sequence,
                // as in `catch_up`; a record heard without one cannot be compared.
                Heard::Record { seq, fingerprint } => {
                    seq == position
                        && match (known, fingerprint) {
                            (None, _) => true,
                            (Some(known), Some(heard)) => known == heard,
                            (Some(_), None) => false,
                        }
                }
            };
            if in_step {
                return Ok(false);
            }
        }
        self.catch_up(store, user).await
    }

    /// Apply the user's log entries this copy has not seen; whether anything changed. A log
    /// that no longer holds the entry this copy applied last (purged, wiped, restored from an
    /// older backup, rebuilt) is re-seeded (see the module docs).
    pub async fn catch_up(&self, store: &MemoryStore, user: &str) -> Result<bool, MemoryError> {
        let token = user_token(user);
        let (position, known) = self.anchor(user)?;
        let tail = self
            .log
            .last_record(LOG_KEY, &token)
            .await
            .map_err(unavailable)?;
        let last = tail.as_ref().map_or(0, |(seq, _)| *seq);
        let matches = |bytes: &[u8]| known.is_none_or(|fp| fp == fingerprint(bytes));
        if position == 0 && last == 0 {
            return Ok(false);
        }
        if position > 0 && last == position && tail.as_ref().is_some_and(|(_, b)| matches(b)) {
            return Ok(false);
        }
        if last > position {
            let mut entries = self
                .log
                .read_after(LOG_KEY, &token, position.saturating_sub(1))
                .await
                .map_err(unavailable)?;
            let anchored = position == 0
                || entries
                    .first()
                    .is_some_and(|(seq, bytes)| *seq == position && matches(bytes));
            if anchored {
                if position > 0 {
                    entries.remove(0);
                }
                self.apply_entries(store, user, entries).await?;
                return Ok(true);
            }
        }
        self.reseed(store, user, &token, position, last).await?;
        Ok(true)
    }

    /// Apply `entries` (oldest first) to `store` and remember the last as applied.
    async fn apply_entries(
        &self,
        store: &MemoryStore,
        user: &str,
        entries: Vec<(u64, Bytes)>,
    ) -> Result<(), MemoryError> {
        let Some((newest, newest_bytes)) = entries.last().cloned() else {
            return Ok(());
        };
        let changes = entries
            .iter()
            .map(|(seq, bytes)| {
                serde_json::from_slice::<Change>(bytes).map_err(|source| MemoryError::Corrupt {
                    key: format!("memory log entry {seq} of user {user}"),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (store_, user_, this) = (store.clone(), user.to_string(), self.clone());
        tokio::task::spawn_blocking(move || {
            for change in &changes {
                apply_locally(&store_, &user_, change)?;
            }
            this.set_position(&user_, newest, &newest_bytes)
        })
        .await
        .map_err(|e| MemoryError::Interrupted(e.to_string()))??;
        store.flush().await?;
        tracing::debug!(user, to = newest, "memory caught up from the log");
        Ok(())
    }

    /// The log no longer holds the entry this copy applied last: apply all it holds (it wins
    /// where it speaks), then append the user's whole memory as one entry fenced on `last`.
    async fn reseed(
        &self,
        store: &MemoryStore,
        user: &str,
        token: &str,
        position: u64,
        last: u64,
    ) -> Result<(), MemoryError> {
        let entries = if last == 0 {
            Vec::new()
        } else {
            self.log
                .read_after(LOG_KEY, token, 0)
                .await
                .map_err(unavailable)?
        };
        let applied = entries.len();
        self.apply_entries(store, user, entries).await?;
        let (store_, user_) = (store.clone(), user.to_string());
        let upserts = tokio::task::spawn_blocking(move || store_.list(&user_))
            .await
            .map_err(|e| MemoryError::Interrupted(e.to_string()))??;
        let records = upserts.len();
        let change = Change {
            upserts,
            removed: Vec::new(),
        };
        let bytes = encode(user, &change)?;
        let seq = self
            .log
            .append(LOG_KEY, token, bytes.clone(), last)
            .await
            .map_err(unavailable)?;
        self.set_position(user, seq, &bytes)?;
        tracing::warn!(
            user,
            applied_before = position,
            log_last = last,
            log_entries_applied = applied,
            records,
            "the replicated memory log no longer held what this copy applied (a purged stream, a wiped JetStream store, or a log restored from an older backup); applied what it holds and re-seeded it with this user's whole memory in one fenced append"
        );
        Ok(())
    }

    /// Log `change` (already applied to `store`) after everything this copy has applied. When
    /// another copy wrote the user meanwhile, catch up and apply `change` again on top, so this
    /// store holds what the log's order says, then append after the other copy's entries.
    pub async fn publish(
        &self,
        store: &MemoryStore,
        user: &str,
        change: &Change,
    ) -> Result<(), MemoryError> {
        if change.is_empty() {
            return Ok(());
        }
        let token = user_token(user);
        let bytes = encode(user, change)?;
        for _ in 0..FENCED_RETRIES {
            let expected = self.position(user)?;
            match self
                .log
                .append(LOG_KEY, &token, bytes.clone(), expected)
                .await
            {
                Ok(seq) => {
                    self.set_position(user, seq, &bytes)?;
                    return Ok(());
                }
                Err(LogError::Fenced { .. }) => {
                    self.catch_up(store, user).await?;
                    let (store_, user_, change_) =
                        (store.clone(), user.to_string(), change.clone());
                    tokio::task::spawn_blocking(move || apply_locally(&store_, &user_, &change_))
                        .await
                        .map_err(|e| MemoryError::Interrupted(e.to_string()))??;
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
        Err(MemoryError::Replicated(format!(
            "user {user}'s memory log kept moving ({FENCED_RETRIES} fenced appends in a row)"
        )))
    }
}

fn encode(user: &str, change: &Change) -> Result<Bytes, MemoryError> {
    serde_json::to_vec(change)
        .map(Bytes::from)
        .map_err(|source| MemoryError::Encode {
            id: format!("memory log entry of user {user}"),
            source,
        })
}

fn apply_locally(store: &MemoryStore, user: &str, change: &Change) -> Result<(), MemoryError> {
    for record in &change.upserts {
        store.insert_record(record)?;
    }
    for id in &change.removed {
        store.remove_record(user, id)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::memory::record::{MemoryKind, Source};
    use crate::store::log_tails::TailBoard;
    use crate::store::test_log::MemoryLog;

    fn record(id: &str, content: &str) -> MemoryRecord {
        let now = chrono::Utc::now();
        MemoryRecord {
            id: id.into(),
            user: "u1".into(),
            namespace: "default".into(),
            kind: MemoryKind::Fact,
            key: id.into(),
            content: content.into(),
            importance: 0.5,
            confidence: 0.6,
            topics: Vec::new(),
            created_at: now,
            updated_at: now,
            expires_at: None,
            source: Source {
                session: "s".into(),
                message_id: "m".into(),
                source_time: now,
            },
            version: 1,
            history: Vec::new(),
            event_time: None,
            demoted_at: None,
        }
    }

    /// A memory-extractor copy: its own sled store, the shared log.
    fn copy(log: &Arc<MemoryLog>) -> (tempfile::TempDir, MemoryStore, MemoryReplica) {
        let dir = tempfile::tempdir().unwrap();
        let db = Durable::from(crate::store::open(dir.path()).unwrap());
        let store = MemoryStore::open(&db).unwrap();
        let log: Arc<dyn SessionLog> = log.clone();
        let replica = MemoryReplica::open(&db, log).unwrap();
        (dir, store, replica)
    }

    async fn write(store: &MemoryStore, replica: &MemoryReplica, r: MemoryRecord) {
        store.insert_record(&r).unwrap();
        let change = Change {
            upserts: vec![r],
            removed: Vec::new(),
        };
        replica.publish(store, "u1", &change).await.unwrap();
    }

    #[tokio::test]
    async fn a_wiped_memory_log_is_reseeded_from_the_cache_instead_of_fencing_every_write() {
        let log = Arc::new(MemoryLog::default());
        let (_dir, store, replica) = copy(&log);
        write(&store, &replica, record("r1", "likes tea")).await;
        write(&store, &replica, record("r2", "lives in Lyon")).await;
        log.purge();

        // Once "kept moving (5 fenced appends in a row)" forever; now one re-seed, then it lands.
        write(&store, &replica, record("r3", "has a cat")).await;
        let (_other_dir, other, other_replica) = copy(&log);
        assert!(other_replica.catch_up(&other, "u1").await.unwrap());
        let mut ids: Vec<String> = other
            .list("u1")
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        assert_eq!(ids, ["r1", "r2", "r3"]);
        // In step afterwards: nothing more to apply, nothing appended.
        let entries = log
            .read_after(LOG_KEY, &user_token("u1"), 0)
            .await
            .unwrap()
            .len();
        assert!(!replica.catch_up(&store, "u1").await.unwrap());
        assert_eq!(
            log.read_after(LOG_KEY, &user_token("u1"), 0)
                .await
                .unwrap()
                .len(),
            entries
        );
    }

    #[tokio::test]
    async fn a_memory_log_rebuilt_by_another_copy_is_applied_whole_and_the_cache_added_to_it() {
        let log = Arc::new(MemoryLog::default());
        let (_a_dir, a, a_replica) = copy(&log);
        write(&a, &a_replica, record("old", "kept only in a's cache")).await;
        log.purge();
        let (_b_dir, b, b_replica) = copy(&log);
        write(&b, &b_replica, record("b1", "written after the rebuild")).await;
        write(&b, &b_replica, record("b2", "and another")).await;

        assert!(a_replica.catch_up(&a, "u1").await.unwrap());
        let mut ids: Vec<String> = a.list("u1").unwrap().into_iter().map(|r| r.id).collect();
        ids.sort();
        assert_eq!(ids, ["b1", "b2", "old"]);
        assert!(b_replica.catch_up(&b, "u1").await.unwrap());
        assert!(
            b.get("u1", "old").unwrap().is_some(),
            "the log now holds the union"
        );
    }

    /// What the log holds of user u1 now, as a feed would deliver it.
    async fn tell(board: &TailBoard, log: &MemoryLog) {
        let token = user_token("u1");
        if let Some((seq, bytes)) = log.last_record(LOG_KEY, &token).await.unwrap() {
            board.record(
                &format!("{LOG_KEY}.{token}"),
                seq,
                Some(fingerprint(&bytes)),
            );
        }
    }

    #[tokio::test]
    async fn a_recall_trusts_a_live_feed_and_reads_the_log_when_the_feed_cannot_vouch() {
        let log = Arc::new(MemoryLog::default());
        let board = Arc::new(TailBoard::default());
        let (_a_dir, a, a_replica) = copy(&log);
        let feed: Arc<dyn HeardTails> = board.clone();
        let a_replica = a_replica.with_feed(Some(feed));
        let (_b_dir, b, b_replica) = copy(&log);
        write(&b, &b_replica, record("b1", "likes tea")).await;
        assert!(
            a_replica.catch_up_heard(&a, "u1").await.unwrap(),
            "not live yet: the log is read"
        );
        assert!(a.get("u1", "b1").unwrap().is_some());

        tell(&board, &log).await;
        board.caught_up();
        assert!(
            !a_replica.catch_up_heard(&a, "u1").await.unwrap(),
            "in step, as heard"
        );

        // Another copy writes; until the feed delivers it, the recall trusts what it heard...
        write(&b, &b_replica, record("b2", "lives in Lyon")).await;
        assert!(!a_replica.catch_up_heard(&a, "u1").await.unwrap());
        assert!(a.get("u1", "b2").unwrap().is_none());
        // ...and once it is heard, the recall applies it.
        tell(&board, &log).await;
        assert!(a_replica.catch_up_heard(&a, "u1").await.unwrap());
        assert!(a.get("u1", "b2").unwrap().is_some());

        // A feed that broke vouches for nothing: the log is read again.
        write(&b, &b_replica, record("b3", "has a cat")).await;
        board.restart();
        assert!(a_replica.catch_up_heard(&a, "u1").await.unwrap());
        assert!(a.get("u1", "b3").unwrap().is_some());
    }

    #[tokio::test]
    async fn a_feed_that_cannot_tell_the_applied_entry_from_another_sends_the_recall_to_the_log() {
        let another = Some(fingerprint(b"another entry"));
        for heard in [another, None] {
            let log = Arc::new(MemoryLog::default());
            let board = Arc::new(TailBoard::default());
            let (_dir, store, replica) = copy(&log);
            let feed: Arc<dyn HeardTails> = board.clone();
            let replica = replica.with_feed(Some(feed));
            write(&store, &replica, record("r1", "likes tea")).await;
            // A rebuilt log with an entry at the sequence this copy applied: another one, or
            // one written without a fingerprint.
            board.record(&format!("{LOG_KEY}.{}", user_token("u1")), 1, heard);
            board.caught_up();
            log.purge();
            assert!(
                replica.catch_up_heard(&store, "u1").await.unwrap(),
                "heard {heard:?}: the log is read, found emptied, and re-seeded"
            );
            assert_eq!(log.last(LOG_KEY, &user_token("u1")).await.unwrap(), 1);
        }
    }

    #[test]
    fn user_tokens_are_subject_safe_and_distinct() {
        assert_eq!(user_token("u1"), "7531");
        assert_ne!(user_token("a.b"), user_token("a b"));
        assert!(user_token("ü ser.x>")
            .chars()
            .all(|c| c.is_ascii_hexdigit()));
    }
}
