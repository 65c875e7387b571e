//! Push-notification configs of A2A tasks, kept where every process serving A2A reads them:
//! a JetStream KV bucket on a NATS cluster, a sled tree with the embedded bus (one entry per
//! task: the JSON list of its configs). Beside them: the tasks with configs that have not ended
//! yet (one index entry, [`OPEN_KEY`]) and the last state notified per task
//! (`notified/<task>`), so a sweep can notify what no process saw happen.

use std::sync::Arc;

use bytes::Bytes;

use super::wire::TaskPushNotificationConfig;
use crate::bus::kv::{is_valid_key, SharedKv};
use crate::bus::{BusError, SharedBus};
use crate::store::durability::Durable;

/// The bucket (or sled tree) of push configs.
pub const BUCKET: &str = "a2a_push";
/// The index of tasks with configs that have not ended.
pub const OPEN_KEY: &str = "open";

/// A task with push configs that has not ended yet.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpenTask {
    pub agent: String,
    pub task: String,
}

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

    /// Remember that `task` of `agent` has configs and has not ended.
    pub async fn mark_open(&self, agent: &str, task: &str) -> Result<(), PushStoreError> {
        let mut open = self.open_tasks().await?;
        if !open.iter().any(|o| o.task == task) {
            open.push(OpenTask {
                agent: agent.to_owned(),
                task: task.to_owned(),
            });
            self.write_open(&open).await?;
        }
        Ok(())
    }

    /// The tasks with configs that have not ended.
    pub async fn open_tasks(&self) -> Result<Vec<OpenTask>, PushStoreError> {
        match self.kv.get(OPEN_KEY).await? {
            None => Ok(Vec::new()),
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| PushStoreError::Corrupt(e.to_string()))
            }
        }
    }

    /// `task` ended: no sweep looks at it again.
    pub async fn close(&self, task: &str) -> Result<(), PushStoreError> {
        let mut open = self.open_tasks().await?;
        let before = open.len();
        open.retain(|o| o.task != task);
        if open.len() != before {
            self.write_open(&open).await?;
        }
        Ok(())
    }

    /// The state last notified for `task` (`TASK_STATE_…`).
    pub async fn notified(&self, task: &str) -> Result<Option<String>, PushStoreError> {
        let key = format!("notified/{task}");
        if !is_valid_key(&key) {
            return Ok(None);
        }
        Ok(self
            .kv
            .get(&key)
            .await?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// `state` was notified for `task`.
    pub async fn set_notified(&self, task: &str, state: &str) -> Result<(), PushStoreError> {
        let key = format!("notified/{task}");
        if !is_valid_key(&key) {
            return Ok(());
        }
        Ok(self
            .kv
            .put(&key, Bytes::from(state.as_bytes().to_vec()))
            .await?)
    }

    async fn write_open(&self, open: &[OpenTask]) -> Result<(), PushStoreError> {
        let bytes = serde_json::to_vec(open).map_err(|e| PushStoreError::Corrupt(e.to_string()))?;
        Ok(self.kv.put(OPEN_KEY, Bytes::from(bytes)).await?)
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
