//! The sled trees the tool-executor owns, opened together: `jobs`, `tool_results_idem` and
//! `tool_raw` (see [`super::jobs`], [`super::idempotency`], [`super::raw`] for keys and values).

use super::idempotency::IdemStore;
use super::jobs::JobStore;
use super::raw::RawStore;
use crate::store::durability::{Durable, Mode};
use crate::store::StoreError;

/// The executor's stores; clones share the trees.
#[derive(Debug, Clone)]
pub struct ToolStores {
    pub jobs: JobStore,
    pub idem: IdemStore,
    pub raw: RawStore,
}

impl ToolStores {
    pub fn open(db: &Durable) -> Result<Self, StoreError> {
        Ok(Self {
            jobs: JobStore::open(db)?,
            idem: IdemStore::open(db)?,
            raw: RawStore::open(db)?,
        })
    }

    /// Stores in a temporary database that vanishes on drop (tests, benches, and an executor
    /// started without a data directory).
    pub fn temporary() -> Result<Self, StoreError> {
        let db = sled::Config::new().temporary(true).open()?;
        Self::open(&Durable::new(
            db,
            Mode::Batch(std::time::Duration::from_millis(50)),
        ))
    }
}
