//! The stores the tool-executor owns, opened together: sled trees `jobs`, `tool_results_idem`
//! and `tool_raw` (see [`super::jobs`], [`super::idempotency`], [`super::raw`] for keys and
//! values), and on a NATS cluster the shared buckets behind them.

use std::sync::Arc;
use std::time::Duration;

use super::idempotency::{self, IdemStore};
use super::jobs::{self, JobStore};
use super::raw::{self, RawStore};
use crate::bus::cluster::Cluster;
use crate::bus::kv::SharedKv;
use crate::bus::BusError;
use crate::store::durability::{Durable, Mode};
use crate::store::StoreError;

/// The executor's stores; clones share the trees.
#[derive(Debug, Clone)]
pub struct ToolStores {
    pub jobs: JobStore,
    pub idem: IdemStore,
    pub raw: RawStore,
    /// The shared buckets behind them, on a NATS cluster.
    shared: Vec<Arc<dyn SharedKv>>,
}

impl ToolStores {
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        Ok(Self {
            jobs: JobStore::open(db)?,
            idem: IdemStore::open(db)?,
            raw: RawStore::open(db)?,
            shared: Vec::new(),
        })
    }

    /// On a NATS cluster: idempotency records live only in the shared bucket (so two copies
    /// racing on one key execute once), and job records and raw outputs are copied there (so
    /// any copy answers `job_status` and `tool_raw_get`).
    pub fn shared_through(self, cluster: &dyn Cluster, raw_retention_days: u64) -> Self {
        let raw_age = (raw_retention_days > 0)
            .then(|| Duration::from_secs(raw_retention_days.saturating_mul(86_400)));
        let (jobs, idem, raw) = (
            cluster.bucket(jobs::BUCKET, None),
            cluster.bucket(idempotency::BUCKET, None),
            cluster.bucket(raw::BUCKET, raw_age),
        );
        Self {
            jobs: self.jobs.with_shared(jobs.clone()),
            idem: IdemStore::shared(idem.clone()),
            raw: self.raw.with_shared(raw.clone()),
            shared: vec![jobs, idem, raw],
        }
    }

    /// Create or open the shared buckets now, so they exist before the first call needs them.
    pub async fn open_shared(&self) -> Result<(), BusError> {
        for bucket in &self.shared {
            bucket.open().await?;
        }
        Ok(())
    }

    /// Stores in a temporary database that vanishes on drop (tests, benches, and an executor
    /// started without a data directory).
    pub fn temporary() -> Result<Self, StoreError> {
        Self::open(&crate::store::tree::temporary(Mode::Batch(
            std::time::Duration::from_millis(50),
        ))?)
    }
}
