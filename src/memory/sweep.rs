//! The forgetting sweep (DESIGN §7): expired short-term memories are first demoted, then
//! removed by a later sweep unless an open task references them ([`super::refs`]).
//!
//! One sweep at time `now` looks at every record of every user:
//! * expired (`expires_at <= now`) and not yet demoted → **demoted**: `demoted_at = now` and
//!   importance halved. Recall already ignores expired and demoted records; the record stays
//!   visible to `hermes memory ls` for one sweep interval, and a new write to its slot revives it
//!   (the merge clears `demoted_at` and sets a new expiry).
//! * demoted by an earlier sweep (`demoted_at < now`) and still expired → **removed**, unless a
//!   task references it (then it is kept and counted).
//!
//! So a record leaves the store between one and two sweep intervals after it expired.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::refs::MemoryRefs;
use super::store::{decode, record_key, MemoryError, MemoryStore};

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Records looked at.
    pub scanned: usize,
    /// Expired records demoted by this sweep.
    pub demoted: usize,
    /// Demoted records removed by this sweep, as `(user, record id)`.
    pub removed: Vec<(String, String)>,
    /// Demoted records kept because an open task references them.
    pub kept_referenced: usize,
}

impl MemoryStore {
    /// Run one sweep at `now` and flush (see the module doc).
    pub async fn sweep(
        &self,
        refs: &MemoryRefs,
        now: DateTime<Utc>,
    ) -> Result<SweepReport, MemoryError> {
        let report = self.sweep_at(refs, now)?;
        self.flush().await?;
        Ok(report)
    }

    /// The synchronous part of [`Self::sweep`] (not flushed); scans every record, so run it off
    /// the actor threads.
    pub fn sweep_at(
        &self,
        refs: &MemoryRefs,
        now: DateTime<Utc>,
    ) -> Result<SweepReport, MemoryError> {
        let mut report = SweepReport::default();
        for entry in self.memories.iter() {
            let (key, value) = entry.map_err(|source| MemoryError::Storage {
                action: "scan memory records for the sweep",
                source,
            })?;
            report.scanned += 1;
            let Ok(record) = decode(&key, &value) else {
                continue;
            };
            if record.expires_at.is_none_or(|at| at > now) {
                continue;
            }
            match record.demoted_at {
                None => {
                    if self.demote(&record.user, &record.id, now)? {
                        report.demoted += 1;
                    }
                }
                Some(at) if at < now => {
                    if refs.is_referenced_at(&record.user, &record.id, now)? {
                        report.kept_referenced += 1;
                    } else if self.remove_record(&record.user, &record.id)? {
                        report.removed.push((record.user, record.id));
                    }
                }
                Some(_) => {}
            }
        }
        Ok(report)
    }

    /// Mark `user`'s record `id` demoted if it is still expired and undemoted under the lock
    /// (a write may have revived it since the scan read it).
    fn demote(&self, user: &str, id: &str, now: DateTime<Utc>) -> Result<bool, MemoryError> {
        let _guard = self.lock();
        let key = record_key(user, id);
        let current = self
            .memories
            .get(&key)
            .map_err(|source| MemoryError::Storage {
                action: "read a memory record",
                source,
            })?;
        let Some(bytes) = current else {
            return Ok(false);
        };
        let mut record = decode(&key, &bytes)?;
        if record.demoted_at.is_some() || record.expires_at.is_none_or(|at| at > now) {
            return Ok(false);
        }
        record.demoted_at = Some(now);
        record.importance /= 2.0;
        self.put(&record)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::{MemoryKind, MemoryUpdate, Source, UpdateOp};
    use chrono::Duration;

    fn update(key: &str, content: &str, expiry_days: Option<u32>) -> MemoryUpdate {
        MemoryUpdate {
            op: UpdateOp::Add,
            kind: MemoryKind::Event,
            key: key.into(),
            content: content.into(),
            importance: 0.8,
            expiry_days,
            topics: Vec::new(),
        }
    }

    fn source(at: DateTime<Utc>) -> Source {
        Source {
            session: "s".into(),
            message_id: "m".into(),
            source_time: at,
        }
    }

    #[test]
    fn expired_record_is_demoted_then_removed_and_long_term_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
        let store = MemoryStore::open(&db).unwrap();
        let refs = MemoryRefs::open(&db).unwrap();
        let t0 = Utc::now();
        let updates = [
            update("parcel", "parcel arrives friday", Some(3)),
            update("home_city", "lives in hangzhou", None),
        ];
        store
            .apply_at("alice", "default", &updates, &source(t0), t0)
            .unwrap();
        let before_expiry = store.sweep_at(&refs, t0 + Duration::days(2)).unwrap();
        assert_eq!((before_expiry.demoted, before_expiry.removed.len()), (0, 0));

        let first = store.sweep_at(&refs, t0 + Duration::days(4)).unwrap();
        assert_eq!((first.scanned, first.demoted), (2, 1));
        assert!(first.removed.is_empty(), "demoted first, not removed");
        let parcel = store
            .list("alice")
            .unwrap()
            .into_iter()
            .find(|r| r.key == "parcel")
            .unwrap();
        assert_eq!(parcel.demoted_at, Some(t0 + Duration::days(4)));
        assert!((parcel.importance - 0.4).abs() < 1e-6);

        let second = store.sweep_at(&refs, t0 + Duration::days(5)).unwrap();
        assert_eq!(
            second.removed,
            vec![("alice".to_string(), parcel.id.clone())]
        );
        let left: Vec<String> = store
            .list("alice")
            .unwrap()
            .into_iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(left, ["home_city"]);
    }

    #[test]
    fn referenced_expired_record_is_kept_until_its_task_closes() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
        let store = MemoryStore::open(&db).unwrap();
        let refs = MemoryRefs::open(&db).unwrap();
        let t0 = Utc::now();
        let applied = store
            .apply_at(
                "bob",
                "default",
                &[update("trip", "flies to tokyo", Some(1))],
                &source(t0),
                t0,
            )
            .unwrap();
        let id = applied[0].record.as_ref().unwrap().id.clone();
        refs.add("bob", &id, "task-7").unwrap();
        store.sweep_at(&refs, t0 + Duration::days(2)).unwrap();
        let kept = store.sweep_at(&refs, t0 + Duration::days(3)).unwrap();
        assert_eq!((kept.kept_referenced, kept.removed.len()), (1, 0));
        refs.release_task("task-7").unwrap();
        let gone = store.sweep_at(&refs, t0 + Duration::days(4)).unwrap();
        assert_eq!(gone.removed.len(), 1);
        assert!(store.get("bob", &id).unwrap().is_none());
    }

    #[test]
    fn a_new_write_revives_a_demoted_record() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
        let store = MemoryStore::open(&db).unwrap();
        let refs = MemoryRefs::open(&db).unwrap();
        let t0 = Utc::now();
        let u = update("parcel", "parcel arrives friday", Some(1));
        store
            .apply_at(
                "carol",
                "default",
                std::slice::from_ref(&u),
                &source(t0),
                t0,
            )
            .unwrap();
        let t1 = t0 + Duration::days(2);
        assert_eq!(store.sweep_at(&refs, t1).unwrap().demoted, 1);
        let mut again = u;
        again.op = UpdateOp::Update;
        again.content = "parcel now arrives monday".into();
        again.expiry_days = Some(7);
        store
            .apply_at("carol", "default", &[again], &source(t1), t1)
            .unwrap();
        let later = store.sweep_at(&refs, t1 + Duration::days(1)).unwrap();
        assert!(later.removed.is_empty());
        let r = store.list("carol").unwrap().remove(0);
        assert_eq!(r.demoted_at, None);
        assert_eq!(r.content, "parcel now arrives monday");
    }
}
