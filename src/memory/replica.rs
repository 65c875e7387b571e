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

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::record::MemoryRecord;
use super::store::{MemoryError, MemoryStore};
use crate::store::durability::Durable;
use crate::store::replica::{LogError, SessionLog};

/// Per-user position in the memory log: key `<user>` → u64 big-endian sequence.
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
        Ok(Self { log, applied })
    }

    fn position(&self, user: &str) -> Result<u64, MemoryError> {
        let stored = self
            .applied
            .get(user.as_bytes())
            .map_err(|source| MemoryError::Storage {
                action: "read the memory log position",
                source,
            })?;
        Ok(stored
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map_or(0, u64::from_be_bytes))
    }

    fn set_position(&self, user: &str, seq: u64) -> Result<(), MemoryError> {
        self.applied
            .insert(user.as_bytes(), &seq.to_be_bytes())
            .map(|_| ())
            .map_err(|source| MemoryError::Storage {
                action: "write the memory log position",
                source,
            })
    }

    /// Apply the user's log entries this copy has not seen; whether anything changed.
    pub async fn catch_up(&self, store: &MemoryStore, user: &str) -> Result<bool, MemoryError> {
        let token = user_token(user);
        let position = self.position(user)?;
        let last = self.log.last(LOG_KEY, &token).await.map_err(unavailable)?;
        if last <= position {
            return Ok(false);
        }
        let entries = self
            .log
            .read_after(LOG_KEY, &token, position)
            .await
            .map_err(unavailable)?;
        let Some(newest) = entries.last().map(|(seq, _)| *seq) else {
            return Ok(false);
        };
        let (store_, user_) = (store.clone(), user.to_string());
        let changes = entries
            .into_iter()
            .map(|(seq, bytes)| {
                serde_json::from_slice::<Change>(&bytes).map_err(|source| MemoryError::Corrupt {
                    key: format!("memory log entry {seq} of user {user}"),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            for change in &changes {
                apply_locally(&store_, &user_, change)?;
            }
            this.set_position(&user_, newest)
        })
        .await
        .map_err(|e| MemoryError::Interrupted(e.to_string()))??;
        store.flush().await?;
        tracing::debug!(
            user,
            from = position,
            to = newest,
            "memory caught up from the log"
        );
        Ok(true)
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
        let bytes =
            Bytes::from(
                serde_json::to_vec(change).map_err(|source| MemoryError::Encode {
                    id: format!("memory log entry of user {user}"),
                    source,
                })?,
            );
        for _ in 0..FENCED_RETRIES {
            let expected = self.position(user)?;
            match self
                .log
                .append(LOG_KEY, &token, bytes.clone(), expected)
                .await
            {
                Ok(seq) => {
                    self.set_position(user, seq)?;
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

    #[test]
    fn user_tokens_are_subject_safe_and_distinct() {
        assert_eq!(user_token("u1"), "7531");
        assert_ne!(user_token("a.b"), user_token("a b"));
        assert!(user_token("ü ser.x>")
            .chars()
            .all(|c| c.is_ascii_hexdigit()));
    }
}
