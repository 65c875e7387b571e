//! Push-notification configs of A2A tasks, kept where every process serving A2A reads them:
//! a JetStream KV bucket on a NATS cluster, a sled tree with the embedded bus (one entry per
//! task: the JSON list of its configs).

use std::sync::Arc;

use bytes::Bytes;

use super::wire::TaskPushNotificationConfig;
use crate::bus::kv::{is_valid_key, SharedKv};
use crate::bus::{BusError, SharedBus};
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

    /// The store every process of the deployment reads (see [`super::kv::bucket`]).
    pub fn open(bus: &SharedBus, db: Option<&Durable>) -> Result<Self, PushStoreError> {
        super::kv::bucket(bus, db, BUCKET)
            .map(Self::new)
            .map_err(|e| PushStoreError::Store(e.to_string()))
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
