//! Which memories an open task still needs: sled tree [`REFS_TREE`], key
//! `<user>\0<record id>\0<task id>` → empty. The sweep never removes a referenced record.
//!
//! There is no task store yet: the session layer (durable turn state, issue 3) is expected to
//! call [`MemoryRefs::add`] when a task starts relying on a memory (for example a recalled
//! constraint it plans around) and [`MemoryRefs::release_task`] when the task closes. Until then
//! the tree stays empty and every expired record is removable.

use super::store::MemoryError;

/// Name of the references tree.
pub const REFS_TREE: &str = "memory_refs";

/// Open tasks' references to memory records.
#[derive(Clone)]
pub struct MemoryRefs {
    tree: sled::Tree,
}

fn storage(action: &'static str) -> impl FnOnce(sled::Error) -> MemoryError {
    move |source| MemoryError::Storage { action, source }
}

fn prefix(user: &str, record_id: &str) -> Vec<u8> {
    let mut k = user.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(record_id.as_bytes());
    k.push(0);
    k
}

impl MemoryRefs {
    pub fn open(db: &sled::Db) -> Result<Self, MemoryError> {
        Ok(Self {
            tree: db
                .open_tree(REFS_TREE)
                .map_err(storage("open the memory references tree"))?,
        })
    }

    /// Task `task` of `user` relies on record `record_id`.
    pub fn add(&self, user: &str, record_id: &str, task: &str) -> Result<(), MemoryError> {
        let mut k = prefix(user, record_id);
        k.extend_from_slice(task.as_bytes());
        self.tree
            .insert(k, &[][..])
            .map_err(storage("write a memory reference"))?;
        Ok(())
    }

    /// Task `task` closed: drop all its references; returns how many there were.
    pub fn release_task(&self, task: &str) -> Result<usize, MemoryError> {
        let mut removed = 0;
        for entry in self.tree.iter() {
            let (k, _) = entry.map_err(storage("scan memory references"))?;
            if k.rsplit(|b| *b == 0).next() == Some(task.as_bytes()) {
                self.tree
                    .remove(&k)
                    .map_err(storage("remove a memory reference"))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Whether any open task references `user`'s record `record_id`.
    pub fn is_referenced(&self, user: &str, record_id: &str) -> Result<bool, MemoryError> {
        match self.tree.scan_prefix(prefix(user, record_id)).next() {
            Some(entry) => entry
                .map(|_| true)
                .map_err(storage("read memory references")),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_hold_until_their_task_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let refs = MemoryRefs::open(&sled::open(dir.path()).unwrap()).unwrap();
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
}
