//! `hermes.backup`: a `hermes serve` holding a data directory writes a backup of it while it
//! serves, asked by `hermes backup` through the control socket (sled allows one process per
//! directory, so the backup is taken by the process that has it open). The socket is the data
//! directory's, owner-only: the file is written where the asking user said.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{sled_snapshot, Manifest, Quiet};
use crate::bus::{Handler, Message};
use crate::store::durability::Durable;

/// Write a backup of this process's data directory to `out` (an absolute path).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackupRequest {
    pub out: PathBuf,
}

/// The backup's manifest, or why none was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackupReply {
    Written(Box<Manifest>),
    Failed(String),
}

/// Serves `hermes.backup` for the database `db` of the directory `dir`.
pub struct BackupService {
    db: Durable,
    dir: PathBuf,
}

impl BackupService {
    pub fn new(db: Durable, dir: PathBuf) -> Arc<Self> {
        Arc::new(Self { db, dir })
    }

    async fn write(&self, payload: &[u8]) -> BackupReply {
        let request: BackupRequest = match serde_json::from_slice(payload) {
            Ok(request) => request,
            Err(e) => return BackupReply::Failed(format!("unreadable backup request: {e}")),
        };
        if let Err(e) = self.db.flush_all().await {
            return BackupReply::Failed(format!("the data directory could not be flushed: {e}"));
        }
        let db = self.db.db().clone();
        let source = self.dir.display().to_string();
        let written = tokio::task::spawn_blocking(move || {
            sled_snapshot::backup(&db, &request.out, &source, &Quiet)
        })
        .await;
        match written {
            Ok(Ok(manifest)) => BackupReply::Written(Box::new(manifest)),
            Ok(Err(e)) => BackupReply::Failed(e.to_string()),
            Err(e) => BackupReply::Failed(format!("the backup task failed: {e}")),
        }
    }
}

#[async_trait]
impl Handler for BackupService {
    async fn handle(&self, message: Message) -> Option<Bytes> {
        let reply = self.write(&message.payload).await;
        serde_json::to_vec(&reply).ok().map(Bytes::from)
    }
}
