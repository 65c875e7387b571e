//! The key-value buckets A2A keeps its records in, wherever the deployment keeps state: a
//! JetStream KV bucket on a NATS cluster (every process reads it), else a sled tree of this
//! process' database, else (no data directory) memory, with a warning.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use crate::bus::kv::SharedKv;
use crate::bus::{BusError, SharedBus};
use crate::store::durability::Durable;
use crate::store::tree::Tree;

/// The bucket `name`.
pub fn bucket(
    bus: &SharedBus,
    db: Option<&Durable>,
    name: &'static str,
) -> Result<Arc<dyn SharedKv>, BusError> {
    if let Some(cluster) = bus.cluster() {
        return Ok(cluster.bucket(name, None));
    }
    match db {
        Some(db) => {
            let tree = Tree::open(db, name)
                .map_err(|e| BusError::Storage(format!("sled tree `{name}`: {e}")))?;
            Ok(Arc::new(SledKv {
                tree,
                db: db.clone(),
                name,
            }))
        }
        None => {
            tracing::warn!(
                bucket = name,
                "A2A records are kept in memory: this process has no data directory and no cluster"
            );
            Ok(Arc::new(MemoryKv::default()))
        }
    }
}

/// A sled tree as a bucket; every write is flushed before it is acknowledged.
struct SledKv {
    tree: Tree,
    db: Durable,
    name: &'static str,
}

impl SledKv {
    fn error(&self, e: impl std::fmt::Display) -> BusError {
        BusError::Storage(format!("sled tree `{}`: {e}", self.name))
    }
}

#[async_trait]
impl SharedKv for SledKv {
    async fn create(&self, key: &str, value: Bytes) -> Result<bool, BusError> {
        let created = match self
            .tree
            .insert_new(key.as_bytes(), value.as_ref())
            .map_err(|e| self.error(e))?
        {
            None => true,
            Some(held) => held == value,
        };
        self.db.commit().await.map_err(|e| self.error(e))?;
        Ok(created)
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BusError> {
        Ok(self
            .tree
            .get(key.as_bytes())
            .map_err(|e| self.error(e))?
            .map(|v| Bytes::copy_from_slice(&v)))
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<(), BusError> {
        self.tree
            .insert(key.as_bytes(), value.as_ref())
            .map_err(|e| self.error(e))?;
        self.db.commit().await.map_err(|e| self.error(e))
    }

    async fn delete(&self, key: &str) -> Result<(), BusError> {
        self.tree
            .remove(key.as_bytes())
            .map_err(|e| self.error(e))?;
        self.db.commit().await.map_err(|e| self.error(e))
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
        if let Some(held) = map.get(key) {
            return Ok(*held == value);
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
