//! [`Tree`]: one named tree of this process's database, for the owners outside `store/` (the
//! tool-executor's jobs, idempotency records and raw outputs, the MCP audit, the mined-turns
//! set, the A2A bucket fallback). They see bytes in and out and a [`StoreError`]; the sled
//! types stay in this module, so the storage engine can change in one place. Keys and values
//! are stored exactly as given: the on-disk format is the callers'.

use super::durability::{Durable, Mode};
use super::StoreError;

/// One named tree; cheap to clone (a handle).
#[derive(Debug, Clone)]
pub struct Tree {
    inner: sled::Tree,
}

/// A database trees open in: a [`Durable`] or a plain [`super::open`]ed one.
pub trait Database {
    fn tree(&self, name: &str) -> Result<Tree, StoreError>;
}

impl Database for sled::Db {
    fn tree(&self, name: &str) -> Result<Tree, StoreError> {
        Ok(Tree {
            inner: self.open_tree(name)?,
        })
    }
}

impl Database for Durable {
    fn tree(&self, name: &str) -> Result<Tree, StoreError> {
        self.db().tree(name)
    }
}

/// A key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

impl Tree {
    /// Open (or create) the tree `name` in `db`.
    pub fn open(db: &impl Database, name: &str) -> Result<Self, StoreError> {
        db.tree(name)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.get(key)?.map(|value| value.to_vec()))
    }

    pub fn contains_key(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.inner.contains_key(key)?)
    }

    /// Set `key` to `value`, replacing what was there.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.inner.insert(key, value)?;
        Ok(())
    }

    /// Set `key` to `value` only when it has no value: `Ok(None)` when set, else the value
    /// already there (atomic: of two racing callers one wins).
    pub fn insert_new(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self
            .inner
            .compare_and_swap(key, None::<&[u8]>, Some(value))?
        {
            Ok(()) => Ok(None),
            Err(conflict) => Ok(Some(
                conflict.current.map(|v| v.to_vec()).unwrap_or_default(),
            )),
        }
    }

    /// Remove `key`; the value it had.
    pub fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.remove(key)?.map(|value| value.to_vec()))
    }

    /// Every entry in key order (`.rev()` for newest first with time-ordered keys).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Result<Entry, StoreError>> + '_ {
        self.inner.iter().map(|item| {
            item.map(|(key, value)| (key.to_vec(), value.to_vec()))
                .map_err(StoreError::from)
        })
    }

    /// Write this tree's changes to disk now (sled's own flush, not the durability policy).
    pub async fn flush_async(&self) -> Result<(), StoreError> {
        self.inner.flush_async().await?;
        Ok(())
    }
}

/// A database in a temporary directory that vanishes on drop, committing as `mode` says: for
/// tests, benches, and an executor started without a data directory.
pub fn temporary(mode: Mode) -> Result<Durable, StoreError> {
    let db = sled::Config::new().temporary(true).open()?;
    Ok(Durable::new(db, mode))
}
