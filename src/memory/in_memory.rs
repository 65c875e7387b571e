//! What this process knows about a memory database without reading sled, so the per-turn
//! memory work (recall from a cached index, releasing a task that held nothing) needs no
//! blocking thread: the users' write stamps as last read or written here ([`StampMirror`]) and
//! the tasks that hold memories ([`Holding`]).
//!
//! sled is single-process, so every write of a database goes through this process; but
//! several stores may be opened on one database (the MCP server's, the extractor's, tests').
//! The state is therefore shared per sled tree — every handle of one tree derefs to the same
//! allocation, whose address names it — not per store.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The one `T` of `tree` (of its database) in this process.
pub(super) fn shared_for<T: Default + Send + Sync + 'static>(tree: &sled::Tree) -> Arc<T> {
    type Registry = Mutex<HashMap<(usize, TypeId), Weak<dyn Any + Send + Sync>>>;
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    let inner: &_ = &**tree;
    let key = (
        std::ptr::from_ref(inner).cast::<u8>() as usize,
        TypeId::of::<T>(),
    );
    let mut registry = lock(REGISTRY.get_or_init(Registry::default));
    if let Some(found) = registry.get(&key).and_then(Weak::upgrade) {
        if let Ok(shared) = found.downcast::<T>() {
            return shared;
        }
    }
    registry.retain(|_, w| w.strong_count() > 0);
    let shared = Arc::new(T::default());
    let erased: Arc<dyn Any + Send + Sync> = shared.clone();
    registry.insert(key, Arc::downgrade(&erased));
    shared
}

/// Most users whose stamp [`StampMirror`] remembers (about 100 bytes each).
const MAX_KNOWN_STAMPS: usize = 100_000;

/// Users' write stamps as this process last read or wrote them.
///
/// A stamp is remembered when read from sled and forgotten by every write of the user, both
/// under one lock, so a remembered stamp is always the one in sled.
#[derive(Default)]
pub(super) struct StampMirror {
    known: Mutex<HashMap<String, u64>>,
}

impl StampMirror {
    /// The user's stamp if this process knows it (no sled read).
    pub(super) fn known(&self, user: &str) -> Option<u64> {
        lock(&self.known).get(user).copied()
    }

    /// The user's stamp, read with `from_sled` (blocking) unless known.
    pub(super) fn read<E>(
        &self,
        user: &str,
        from_sled: impl FnOnce() -> Result<u64, E>,
    ) -> Result<u64, E> {
        let mut known = lock(&self.known);
        if let Some(stamp) = known.get(user) {
            return Ok(*stamp);
        }
        let stamp = from_sled()?;
        // Bounded: past this many users the table starts over (the next reads go to sled).
        if known.len() >= MAX_KNOWN_STAMPS {
            known.clear();
        }
        known.insert(user.to_string(), stamp);
        Ok(stamp)
    }

    /// Run `write`, which bumps the user's stamp in sled, and forget the remembered one.
    pub(super) fn write<T>(&self, user: &str, write: impl FnOnce() -> T) -> T {
        let mut known = lock(&self.known);
        let out = write();
        known.remove(user);
        out
    }
}

/// Tasks that hold memories against the expiry sweep, as this process has them.
#[derive(Default)]
pub(super) struct Holding {
    tasks: Mutex<Option<HashSet<String>>>,
}

impl Holding {
    /// Whether `task` may hold memories; `None` until [`Self::load`] ran.
    pub(super) fn may_hold(&self, task: &str) -> Option<bool> {
        lock(&self.tasks).as_ref().map(|t| t.contains(task))
    }

    /// Fill the set once from the tasks sled has (`read`, blocking), unless filled.
    pub(super) fn load<E>(
        &self,
        read: impl FnOnce() -> Result<HashSet<String>, E>,
    ) -> Result<(), E> {
        let mut tasks = lock(&self.tasks);
        if tasks.is_none() {
            *tasks = Some(read()?);
        }
        Ok(())
    }

    /// `task` holds memories now.
    pub(super) fn add(&self, task: &str) {
        if let Some(tasks) = lock(&self.tasks).as_mut() {
            tasks.insert(task.to_string());
        }
    }

    /// `task` holds nothing any more.
    pub(super) fn remove(&self, task: &str) {
        if let Some(tasks) = lock(&self.tasks).as_mut() {
            tasks.remove(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_handles_of_one_tree_share_the_state_and_other_trees_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let a = shared_for::<StampMirror>(&db.open_tree("stamps").unwrap());
        let b = shared_for::<StampMirror>(&db.open_tree("stamps").unwrap());
        let other = shared_for::<StampMirror>(&db.open_tree("else").unwrap());
        a.read::<()>("alice", || Ok(7)).unwrap();
        assert_eq!(b.known("alice"), Some(7));
        assert_eq!(other.known("alice"), None);
        b.write("alice", || ());
        assert_eq!(
            a.known("alice"),
            None,
            "a write forgets the stamp everywhere"
        );
    }
}
