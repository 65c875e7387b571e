//! Push-notification configs of A2A tasks, kept where every process serving A2A reads them:
//! a JetStream KV bucket on a NATS cluster, a sled tree with the embedded bus (one entry per
//! task: the JSON list of its configs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::wire::TaskPushNotificationConfig;
use crate::bus::kv::{is_valid_key, SharedKv};
use crate::bus::BusError;
use crate::store::durability::Durable;

/// The bucket (or sled tree) of push configs.
pub const BUCKET: &str = "a2a_push";

#[derive(Debug, thiserror::Error)]
pub enum PushStoreError {
    #[error("the push-notification configs cannot be read or written: {0}")]
    Store(String),
    #[error("a stored push-notification config is unreadable: {0}")]
    Corrupt(String),
}

impl From<BusError> for PushStoreError {
    fn from(e: BusError) -> Self {
        PushStoreError::Store(e.to_string())
    }
}

/// The configs of every task.
#[derive(Clone)]
pub struct PushStore {
    kv: Arc<dyn SharedKv>,
}

impl PushStore {
    pub fn new(kv: Arc<dyn SharedKv>) -> Self {
        Self { kv }
    }

    /// A store in this process' sled database.
    pub fn sled(db: &Durable) -> Result<Self, PushStoreError> {
        let tree = db
            .db()
            .open_tree(BUCKET)
            .map_err(|e| PushStoreError::Store(e.to_string()))?;
        Ok(Self::new(Arc::new(SledKv {
            tree,
            db: db.clone(),
        })))
    }

    /// A store that lasts as long as this process (no sled database, no cluster).
    pub fn in_memory() -> Self {
        Self::new(Arc::new(MemoryKv::default()))
    }

    /// The configs of `task`.
    pub async fn list(
        &self,
        task: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, PushStoreError> {
        if !is_valid_key(task) {
            return Ok(Vec::new());
        }
        match self.kv.get(task).await? {
            None => Ok(Vec::new()),
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| PushStoreError::Corrupt(e.to_string()))
            }
        }
    }

    /// Add `config` to its task (replacing one with the same id).
    pub async fn put(&self, config: TaskPushNotificationConfig) -> Result<(), PushStoreError> {
        let task = config.task_id.clone();
        let mut all = self.list(&task).await?;
        all.retain(|c| c.id != config.id);
        all.push(config);
        self.write(&task, &all).await
    }

    /// Remove config `id` of `task`; false when there was none.
    pub async fn delete(&self, task: &str, id: &str) -> Result<bool, PushStoreError> {
        let mut all = self.list(task).await?;
        let before = all.len();
        all.retain(|c| c.id.as_deref() != Some(id));
        if all.len() == before {
            return Ok(false);
        }
        self.write(task, &all).await?;
        Ok(true)
    }

    async fn write(
        &self,
        task: &str,
        all: &[TaskPushNotificationConfig],
    ) -> Result<(), PushStoreError> {
        if all.is_empty() {
            return Ok(self.kv.delete(task).await?);
        }
        let bytes = serde_json::to_vec(all).map_err(|e| PushStoreError::Corrupt(e.to_string()))?;
        Ok(self.kv.put(task, Bytes::from(bytes)).await?)
    }
}

/// A sled tree as a bucket; every write is flushed before it is acknowledged.
struct SledKv {
    tree: sled::Tree,
    db: Durable,
}

fn sled_error(e: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!("sled tree `{BUCKET}`: {e}"))
}

#[async_trait]
impl SharedKv for SledKv {
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
        let swapped = self
            .tree
            .compare_and_swap(key, None::<&[u8]>, Some(value.as_ref()))
            .map_err(sled_error)?;
        self.db.commit().await.map_err(sled_error)?;
        Ok(swapped.is_ok())
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
        Ok(self
            .tree
            .get(key)
            .map_err(sled_error)?
            .map(|v| Bytes::copy_from_slice(&v)))
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError> {
        self.tree.insert(key, value.as_ref()).map_err(sled_error)?;
        self.db.commit().await.map_err(sled_error)
    }

    async fn delete(&self, key: &str) -> Result<(), BusError> {
        self.tree.remove(key).map_err(sled_error)?;
        self.db.commit().await.map_err(sled_error)
    }
}

#[derive(Default)]
struct MemoryKv(Mutex<HashMap<String, Bytes>>);

impl MemoryKv {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Bytes>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl SharedKv for MemoryKv {
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
        let mut map = self.map();
        if map.contains_key(key) {
            return Ok(false);
        }
        map.insert(key.to_owned(), value);
        Ok(true)
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
        Ok(self.map().get(key).cloned())
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError> {
        self.map().insert(key.to_owned(), value);
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), BusError> {
        self.map().remove(key);
        Ok(())
    }
}
