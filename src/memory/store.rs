//! The memory store: memory records in sled, written by the merge rules of [`super::merge`]
//! and read back by user-scoped recall ([`super::recall`]).
//!
//! Every read starts from a prefix scan on `<user>\0`, so one user's records are never even
//! loaded for another user. Writes are serialised by a lock shared by clones of one store
//! (open one `MemoryStore` per database and clone it), and [`MemoryStore::apply`] and
//! [`MemoryStore::forget`] return only after sled has flushed them to disk.

use crate::store::durability::Durable;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sled::transaction::{TransactionError, TransactionalTree};
use sled::Transactional;

use super::merge::{self, is_stale, normalize_key};
use super::record::{MemoryRecord, MemoryUpdate, Source, UpdateOp};
pub use super::store_recall::Tokens;
use super::user_index::IndexCache;

/// Name of the tree holding records: key `<user>\0<record id>` → JSON [`MemoryRecord`].
pub const MEMORIES_TREE: &str = "memories";
/// Name of the slot index: key `<user>\0<namespace>\0<key>` → record id (UTF-8).
pub const MEMORY_KEYS_TREE: &str = "memory_keys";
/// Name of the per-user write stamps: key `<user>` → u64 big-endian, bumped by every write
/// of that user's records (the recall index cache is valid for one stamp).
pub const MEMORY_STAMPS_TREE: &str = "memory_stamps";

/// What went wrong in the memory store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    #[error("memory store could not {action}: {source}; check that the data directory is writable, has free space and is not opened by another Hermes process")]
    Storage {
        action: &'static str,
        source: sled::Error,
    },
    #[error("memory record `{key}` is not valid JSON ({source}); remove it with `hermes memory forget` or restore the data directory from a backup")]
    Corrupt {
        key: String,
        source: serde_json::Error,
    },
    #[error("memory record `{id}` could not be encoded as JSON ({source}); this is a bug in Hermes, please report it")]
    Encode {
        id: String,
        source: serde_json::Error,
    },
    #[error("{what} `{value}` is not usable: {problem}; pass a non-empty name without NUL bytes")]
    InvalidName {
        what: &'static str,
        value: String,
        problem: &'static str,
    },
    #[error("memory update #{index} (key `{key}`) is invalid: {problem}; nothing of this batch was written — fix the extractor output (see memory::extract::UPDATES_SCHEMA)")]
    InvalidUpdate {
        index: usize,
        key: String,
        problem: &'static str,
    },
    #[error("embedding memories failed: {0}")]
    Embedding(String),
    #[error("the replicated memory log is unavailable: {0}; check that nats-server (with -js) is reachable — the write or read is retried with the job")]
    Replicated(String),
    #[error(transparent)]
    Flush(#[from] crate::store::durability::FlushError),
    #[error("a memory task stopped before it finished ({0}); the engine is shutting down or hit a bug — retry, and report it if it persists")]
    Interrupted(String),
}

pub use crate::protocol::memory::AppliedOp;

/// The outcome of one update, in the order the updates were given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedUpdate {
    pub op: AppliedOp,
    /// Added/updated: the record as stored now. Deleted: the record that was removed.
    /// Ignored as stale: the stored record that won. Noop: none.
    pub record: Option<MemoryRecord>,
    /// Why, in words, for logs and the status page.
    pub reason: String,
}

/// Memory records of all users in one sled database.
#[derive(Clone)]
pub struct MemoryStore {
    pub(super) db: Durable,
    pub(super) memories: sled::Tree,
    keys: sled::Tree,
    pub(super) stamps: sled::Tree,
    write_lock: Arc<Mutex<()>>,
    pub(super) index: Arc<IndexCache>,
    /// The users' stamps this process knows (shared by every store of the database).
    pub(super) known_stamps: Arc<super::in_memory::StampMirror>,
}

impl MemoryStore {
    /// Open (creating if needed) the trees [`MEMORIES_TREE`] — key `<user>\0<record id>`, value
    /// the record as JSON — and [`MEMORY_KEYS_TREE`] — key `<user>\0<namespace>\0<key>`, value
    /// the id of the record holding that slot.
    pub fn open(db: &Durable) -> Result<Self, MemoryError> {
        let open = |name: &str| {
            db.open_tree(name).map_err(|source| MemoryError::Storage {
                action: "open its sled trees",
                source,
            })
        };
        let stamps = open(MEMORY_STAMPS_TREE)?;
        Ok(Self {
            db: db.clone(),
            memories: open(MEMORIES_TREE)?,
            keys: open(MEMORY_KEYS_TREE)?,
            known_stamps: super::in_memory::shared_for(&stamps),
            stamps,
            write_lock: Arc::new(Mutex::new(())),
            index: Arc::default(),
        })
    }

    /// Apply the extractor's `updates` for `user` in `namespace`, in order, by the merge rules
    /// of [`super::merge`]: same slot key or near-duplicate content → update (unless the
    /// update's source time is older than the stored one: `ignored_stale`); otherwise add;
    /// `delete` removes the slot's record unless the delete is older; `noop` does nothing.
    /// The batch is validated first (nothing is written if one update is malformed) and is on
    /// disk when this returns.
    pub async fn apply(
        &self,
        user: &str,
        namespace: &str,
        updates: &[MemoryUpdate],
        source: &Source,
    ) -> Result<Vec<AppliedUpdate>, MemoryError> {
        let applied = self.apply_at(user, namespace, updates, source, Utc::now())?;
        if !updates.is_empty() {
            self.flush().await?;
        }
        Ok(applied)
    }

    /// The synchronous part of [`Self::apply`], with the clock passed in.
    pub(crate) fn apply_at(
        &self,
        user: &str,
        namespace: &str,
        updates: &[MemoryUpdate],
        source: &Source,
        now: DateTime<Utc>,
    ) -> Result<Vec<AppliedUpdate>, MemoryError> {
        check_name("user", user)?;
        check_name("namespace", namespace)?;
        for (index, update) in updates.iter().enumerate() {
            check_update(index, update)?;
        }
        let _guard = self.lock();
        updates
            .iter()
            .map(|update| match update.op {
                UpdateOp::Noop => Ok(AppliedUpdate {
                    op: AppliedOp::Noop,
                    record: None,
                    reason: "the extractor proposed no change".into(),
                }),
                UpdateOp::Delete => self.delete_slot(user, namespace, update, source),
                UpdateOp::Add | UpdateOp::Update => {
                    self.upsert(user, namespace, update, source, now)
                }
            })
            .collect()
    }

    /// Store `record` as it is, bypassing the merge rules (imports, evaluation, benches): its
    /// slot points at it afterwards. Not flushed; call [`Self::flush`] after a batch.
    pub fn insert_record(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        check_name("user", &record.user)?;
        check_name("namespace", &record.namespace)?;
        let _guard = self.lock();
        self.put(record)
    }

    /// Remove the record holding slot `key` of `user` in `namespace`; the removed record, or
    /// `None` when the slot is empty. On disk when this returns.
    pub async fn forget_key(
        &self,
        user: &str,
        namespace: &str,
        key: &str,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        check_name("user", user)?;
        check_name("namespace", namespace)?;
        let found = self.find_slot(user, namespace, &normalize_key(key))?;
        match found {
            Some(record) => {
                self.forget(user, &record.id).await?;
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    /// All of `user`'s records, expired ones included, newest `updated_at` first (ties by id).
    pub fn list(&self, user: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        check_name("user", user)?;
        let mut records = self.user_records(user)?;
        sort_newest_first(&mut records);
        Ok(records)
    }

    /// [`Self::list`] from the user's cached recall index when it is current (no sled read);
    /// `None` otherwise.
    pub fn cached_list(&self, user: &str) -> Option<Vec<MemoryRecord>> {
        let mut records = self.cached_index(user)?.records.clone();
        sort_newest_first(&mut records);
        Some(records)
    }

    /// One of `user`'s records by id; another user's id finds nothing.
    pub fn get(&self, user: &str, id: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        check_name("user", user)?;
        let key = record_key(user, id);
        let value = self
            .memories
            .get(&key)
            .map_err(|source| MemoryError::Storage {
                action: "read a memory record",
                source,
            })?;
        value.map(|bytes| decode(&key, &bytes)).transpose()
    }

    /// Remove `user`'s record `id` and its slot index entry; `false` when there was none.
    /// Works on unreadable (corrupt) records too. On disk when this returns.
    pub async fn forget(&self, user: &str, id: &str) -> Result<bool, MemoryError> {
        check_name("user", user)?;
        let removed = self.remove_record(user, id)?;
        self.flush().await?;
        Ok(removed)
    }

    /// The synchronous part of [`Self::forget`] (not flushed).
    pub(super) fn remove_record(&self, user: &str, id: &str) -> Result<bool, MemoryError> {
        let _guard = self.lock();
        let slots = self.slots_pointing_to(user, id)?;
        let key = record_key(user, id);
        let existed = self
            .memories
            .contains_key(&key)
            .map_err(|source| MemoryError::Storage {
                action: "read a memory record",
                source,
            })?;
        self.write(user, |memories, keys| {
            memories.remove(key.as_slice())?;
            for slot in &slots {
                keys.remove(slot.as_slice())?;
            }
            Ok(())
        })?;
        Ok(existed)
    }

    fn upsert(
        &self,
        user: &str,
        namespace: &str,
        update: &MemoryUpdate,
        source: &Source,
        now: DateTime<Utc>,
    ) -> Result<AppliedUpdate, MemoryError> {
        let key = normalize_key(&update.key);
        let (existing, why) = match self.find_slot(user, namespace, &key)? {
            Some(record) => (Some(record), format!("same key `{key}`")),
            None => match self.find_near_duplicate(user, namespace, update)? {
                Some((record, sim)) => {
                    let why = format!("near-duplicate of `{}` (similarity {sim:.2})", record.key);
                    (Some(record), why)
                }
                None => (None, String::new()),
            },
        };
        let Some(existing) = existing else {
            let record = merge::new_record(user, namespace, update, source, now);
            self.put(&record)?;
            return Ok(AppliedUpdate {
                op: AppliedOp::Added,
                reason: format!("new memory `{key}`"),
                record: Some(record),
            });
        };
        if is_stale(&existing, source) {
            return Ok(stale(existing, source, &why));
        }
        let record = merge::merged(&existing, update, source, now);
        self.put(&record)?;
        Ok(AppliedUpdate {
            op: AppliedOp::Updated,
            reason: format!("{why}: version {}", record.version),
            record: Some(record),
        })
    }

    fn delete_slot(
        &self,
        user: &str,
        namespace: &str,
        update: &MemoryUpdate,
        source: &Source,
    ) -> Result<AppliedUpdate, MemoryError> {
        let key = normalize_key(&update.key);
        let Some(existing) = self.find_slot(user, namespace, &key)? else {
            return Ok(AppliedUpdate {
                op: AppliedOp::Noop,
                record: None,
                reason: format!("no memory `{key}` in namespace `{namespace}` to delete"),
            });
        };
        if is_stale(&existing, source) {
            return Ok(stale(existing, source, &format!("delete of `{key}`")));
        }
        let record_k = record_key(user, &existing.id);
        let slot_k = slot_key(user, namespace, &key);
        self.write(user, |memories, keys| {
            memories.remove(record_k.as_slice())?;
            keys.remove(slot_k.as_slice())?;
            Ok(())
        })?;
        Ok(AppliedUpdate {
            op: AppliedOp::Deleted,
            reason: format!("deleted memory `{key}`"),
            record: Some(existing),
        })
    }

    /// The record holding slot `key`, if the index points at a record that exists.
    fn find_slot(
        &self,
        user: &str,
        namespace: &str,
        key: &str,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        let id = self
            .keys
            .get(slot_key(user, namespace, key))
            .map_err(|source| MemoryError::Storage {
                action: "read the memory key index",
                source,
            })?;
        match id {
            Some(id) => self.get(user, &String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    fn find_near_duplicate(
        &self,
        user: &str,
        namespace: &str,
        update: &MemoryUpdate,
    ) -> Result<Option<(MemoryRecord, f64)>, MemoryError> {
        let candidates: Vec<MemoryRecord> = self
            .user_records(user)?
            .into_iter()
            .filter(|r| r.namespace == namespace)
            .collect();
        Ok(
            merge::near_duplicate(&candidates, update.kind, &update.content)
                .map(|(record, sim)| (record.clone(), sim)),
        )
    }

    /// Every readable record of `user` (prefix scan on `<user>\0`). Unreadable records are
    /// skipped with a warning so one bad record cannot block a user's recall.
    pub(super) fn user_records(&self, user: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        let mut records = Vec::new();
        for entry in self.memories.scan_prefix(user_prefix(user)) {
            let (key, value) = entry.map_err(|source| MemoryError::Storage {
                action: "scan memory records",
                source,
            })?;
            match decode(&key, &value) {
                Ok(record) => records.push(record),
                Err(err) => tracing::warn!(user, error = %err, "skipping unreadable memory record"),
            }
        }
        Ok(records)
    }

    /// Slot index keys of `user` whose value is `id`.
    fn slots_pointing_to(&self, user: &str, id: &str) -> Result<Vec<Vec<u8>>, MemoryError> {
        let mut slots = Vec::new();
        for entry in self.keys.scan_prefix(user_prefix(user)) {
            let (key, value) = entry.map_err(|source| MemoryError::Storage {
                action: "scan the memory key index",
                source,
            })?;
            if value.as_ref() == id.as_bytes() {
                slots.push(key.to_vec());
            }
        }
        Ok(slots)
    }

    /// Store `record` and point its slot at it, atomically.
    pub(super) fn put(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        let json = serde_json::to_vec(record).map_err(|source| MemoryError::Encode {
            id: record.id.clone(),
            source,
        })?;
        let record_k = record_key(&record.user, &record.id);
        let slot_k = slot_key(&record.user, &record.namespace, &record.key);
        self.write(&record.user, |memories, keys| {
            memories.insert(record_k.as_slice(), json.as_slice())?;
            keys.insert(slot_k.as_slice(), record.id.as_bytes())?;
            Ok(())
        })
    }

    /// Run `f` as one sled transaction over both trees, bumping `user`'s write stamp in it.
    fn write<F>(&self, user: &str, f: F) -> Result<(), MemoryError>
    where
        F: Fn(
            &TransactionalTree,
            &TransactionalTree,
        ) -> sled::transaction::ConflictableTransactionResult<(), ()>,
    {
        self.known_stamps
            .write(user, || {
                (&self.memories, &self.keys, &self.stamps).transaction(
                    |(memories, keys, stamps)| {
                        f(memories, keys)?;
                        super::vectors::bump_stamp(stamps, user)
                    },
                )
            })
            .map_err(|err| MemoryError::Storage {
                action: "write memory records",
                source: match err {
                    TransactionError::Storage(source) => source,
                    TransactionError::Abort(()) => {
                        sled::Error::ReportableBug("memory write aborted without a reason".into())
                    }
                },
            })
    }

    /// Commit every write so far with the database's durability (on disk before this
    /// returns in `sync` mode).
    pub async fn flush(&self) -> Result<(), MemoryError> {
        Ok(self.db.commit().await?)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn stale(existing: MemoryRecord, source: &Source, what: &str) -> AppliedUpdate {
    AppliedUpdate {
        op: AppliedOp::IgnoredStale,
        reason: format!(
            "{what}: source time {} is older than the stored memory's {}; kept the stored one",
            source.source_time, existing.source.source_time
        ),
        record: Some(existing),
    }
}

fn user_prefix(user: &str) -> Vec<u8> {
    let mut k = user.as_bytes().to_vec();
    k.push(0);
    k
}

pub(super) fn record_key(user: &str, id: &str) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.extend_from_slice(id.as_bytes());
    k
}

fn slot_key(user: &str, namespace: &str, key: &str) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.extend_from_slice(namespace.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

pub(super) fn decode(key: &[u8], bytes: &[u8]) -> Result<MemoryRecord, MemoryError> {
    serde_json::from_slice(bytes).map_err(|source| MemoryError::Corrupt {
        key: String::from_utf8_lossy(key).replace('\0', "/"),
        source,
    })
}

pub(super) fn check_name(what: &'static str, value: &str) -> Result<(), MemoryError> {
    let problem = if value.is_empty() {
        "it is empty"
    } else if value.contains('\0') {
        "it contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(MemoryError::InvalidName {
        what,
        value: value.replace('\0', "\\0"),
        problem,
    })
}

fn sort_newest_first(records: &mut [MemoryRecord]) {
    records.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
}

fn check_update(index: usize, update: &MemoryUpdate) -> Result<(), MemoryError> {
    let key = normalize_key(&update.key);
    let problem = match update.op {
        UpdateOp::Noop => return Ok(()),
        _ if key.is_empty() => "its key is empty",
        _ if key.contains('\0') => "its key contains a NUL byte",
        UpdateOp::Add | UpdateOp::Update if update.content.trim().is_empty() => "it has no content",
        _ => return Ok(()),
    };
    Err(MemoryError::InvalidUpdate {
        index,
        key: key.replace('\0', "\\0"),
        problem,
    })
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
