//! Which memories an open task still needs, so the expiry sweep does not remove a memory a
//! running turn planned around.
//!
//! A turn's recall holds the memories it returned for that turn ([`MemoryRefs::hold`], fed
//! by `hermes.memory.recall` requests that name their turn); the turn's extraction job — sent
//! once the turn is finished — releases them ([`MemoryRefs::release_task`]). A turn that never
//! finishes (it failed) stops holding its memories after [`HOLD_LIMIT`].
//!
//! Trees: [`REFS_TREE`], key `<user>\0<record id>\0<task id>` → 8 bytes big-endian Unix
//! seconds when the hold was taken; [`REFS_BY_TASK_TREE`], key `<task id>\0<user>\0<record
//! id>` → empty, so a release reads only its own task's entries.

use chrono::{DateTime, Utc};

use super::store::MemoryError;

/// Name of the references tree.
pub const REFS_TREE: &str = "memory_refs";
/// Name of the same references by task.
pub const REFS_BY_TASK_TREE: &str = "memory_refs_by_task";
/// A hold older than this no longer protects its memory (its task never closed).
pub const HOLD_LIMIT: chrono::Duration = chrono::Duration::days(7);

/// Open tasks' references to memory records.
#[derive(Clone)]
pub struct MemoryRefs {
    tree: sled::Tree,
    by_task: sled::Tree,
    /// The tasks holding memories, known without a scan (shared per database).
    holding: std::sync::Arc<super::in_memory::Holding>,
}

fn storage(action: &'static str) -> impl FnOnce(sled::Error) -> MemoryError {
    move |source| MemoryError::Storage { action, source }
}

fn joined(parts: &[&str]) -> Vec<u8> {
    let mut k = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            k.push(0);
        }
        k.extend_from_slice(part.as_bytes());
    }
    k
}

fn prefix(user: &str, record_id: &str) -> Vec<u8> {
    let mut k = joined(&[user, record_id]);
    k.push(0);
    k
}

impl MemoryRefs {
    pub fn open(db: &sled::Db) -> Result<Self, MemoryError> {
        let open = |name: &str| {
            db.open_tree(name)
                .map_err(storage("open the memory references tree"))
        };
        let by_task = open(REFS_BY_TASK_TREE)?;
        Ok(Self {
            tree: open(REFS_TREE)?,
            holding: super::in_memory::shared_for(&by_task),
            by_task,
        })
    }

    /// Whether `task` certainly holds no memories, known without reading sled (`false` when
    /// unsure: ask [`Self::release_task`]).
    pub fn holds_nothing(&self, task: &str) -> bool {
        self.holding.may_hold(task) == Some(false)
    }

    /// Read the holding tasks from sled once (blocking).
    fn know_holding(&self) -> Result<(), MemoryError> {
        self.holding.load(|| {
            let mut tasks = std::collections::HashSet::new();
            for entry in self.by_task.iter() {
                let (k, _) = entry.map_err(storage("scan memory references"))?;
                let task = k.split(|b| *b == 0).next().unwrap_or_default();
                tasks.insert(String::from_utf8_lossy(task).into_owned());
            }
            Ok(tasks)
        })
    }

    /// Task `task` of `user` relies on record `record_id` from `now` on.
    pub fn add_at(
        &self,
        user: &str,
        record_id: &str,
        task: &str,
        now: DateTime<Utc>,
    ) -> Result<(), MemoryError> {
        self.know_holding()?;
        let stamp = now.timestamp().to_be_bytes();
        self.tree
            .insert(joined(&[user, record_id, task]), &stamp[..])
            .map_err(storage("write a memory reference"))?;
        self.by_task
            .insert(joined(&[task, user, record_id]), &[][..])
            .map_err(storage("write a memory reference"))?;
        self.holding.add(task);
        Ok(())
    }

    /// Task `task` of `user` relies on record `record_id`.
    pub fn add(&self, user: &str, record_id: &str, task: &str) -> Result<(), MemoryError> {
        self.add_at(user, record_id, task, Utc::now())
    }

    /// Task `task` of `user` relies on each of `record_ids` (the memories its recall returned).
    pub fn hold(&self, user: &str, task: &str, record_ids: &[&str]) -> Result<(), MemoryError> {
        let now = Utc::now();
        record_ids
            .iter()
            .try_for_each(|id| self.add_at(user, id, task, now))
    }

    /// Task `task` closed: drop all its references; returns how many there were.
    pub fn release_task(&self, task: &str) -> Result<usize, MemoryError> {
        self.know_holding()?;
        let mut own = task.as_bytes().to_vec();
        own.push(0);
        let mut removed = 0;
        for entry in self.by_task.scan_prefix(&own) {
            let (k, _) = entry.map_err(storage("scan memory references"))?;
            let rest = &k[own.len()..];
            let mut parts = rest.splitn(2, |b| *b == 0);
            let (Some(user), Some(id)) = (parts.next(), parts.next()) else {
                continue;
            };
            let mut forward = user.to_vec();
            forward.push(0);
            forward.extend_from_slice(id);
            forward.push(0);
            forward.extend_from_slice(task.as_bytes());
            self.tree
                .remove(forward)
                .map_err(storage("remove a memory reference"))?;
            self.by_task
                .remove(&k)
                .map_err(storage("remove a memory reference"))?;
            removed += 1;
        }
        self.holding.remove(task);
        Ok(removed)
    }

    /// Whether a task holding `user`'s record `record_id` is still open at `now` (it took its
    /// hold less than [`HOLD_LIMIT`] ago).
    pub fn is_referenced_at(
        &self,
        user: &str,
        record_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, MemoryError> {
        let oldest = (now - HOLD_LIMIT).timestamp();
        for entry in self.tree.scan_prefix(prefix(user, record_id)) {
            let (_, stamp) = entry.map_err(storage("read memory references"))?;
            let taken = <[u8; 8]>::try_from(stamp.as_ref())
                .map(i64::from_be_bytes)
                // A hold written before holds carried their time: treat it as current.
                .unwrap_or(i64::MAX);
            if taken >= oldest {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether any open task references `user`'s record `record_id` now.
    pub fn is_referenced(&self, user: &str, record_id: &str) -> Result<bool, MemoryError> {
        self.is_referenced_at(user, record_id, Utc::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> (tempfile::TempDir, MemoryRefs) {
        let dir = tempfile::tempdir().unwrap();
        let refs = MemoryRefs::open(&sled::open(dir.path()).unwrap()).unwrap();
        (dir, refs)
    }

    #[test]
    fn references_hold_until_their_task_is_released() {
        let (_dir, refs) = refs();
        refs.add("alice", "r1", "task-a").unwrap();
        refs.add("alice", "r1", "task-b").unwrap();
        assert!(refs.is_referenced("alice", "r1").unwrap());
        assert!(
            !refs.is_referenced("alice", "r").unwrap(),
            "no prefix matches"
        );
        assert!(!refs.is_referenced("bob", "r1").unwrap());
        assert_eq!(refs.release_task("task-a").unwrap(), 1);
        assert!(refs.is_referenced("alice", "r1").unwrap());
        assert_eq!(refs.release_task("task-b").unwrap(), 1);
        assert!(!refs.is_referenced("alice", "r1").unwrap());
    }

    #[test]
    fn a_recall_holds_every_returned_memory_for_its_turn_only() {
        let (_dir, refs) = refs();
        refs.hold("alice", "turn-1", &["r1", "r2"]).unwrap();
        refs.hold("alice", "turn-10", &["r3"]).unwrap();
        assert_eq!(refs.release_task("turn-1").unwrap(), 2, "not turn-10's");
        assert!(!refs.is_referenced("alice", "r1").unwrap());
        assert!(refs.is_referenced("alice", "r3").unwrap());
    }

    #[test]
    fn a_hold_of_a_task_that_never_closed_lapses() {
        let (_dir, refs) = refs();
        let taken = Utc::now() - HOLD_LIMIT - chrono::Duration::hours(1);
        refs.add_at("alice", "r1", "failed-turn", taken).unwrap();
        assert!(!refs.is_referenced("alice", "r1").unwrap());
        assert!(refs
            .is_referenced_at("alice", "r1", taken + chrono::Duration::hours(1))
            .unwrap());
    }
}
