//! Backup and restore of a deployment's state (`hermes backup`, `hermes restore`): one file
//! with a manifest ([`Manifest`]: format version, bus kind, what it holds and how much) and
//! the records ([`archive`]).
//!
//! - Embedded bus: every tree of the sled database in the data directory ([`sled_snapshot`]),
//!   read after a flush — by the `hermes serve` holding the directory when one does.
//! - NATS: the JetStream streams and key-value buckets Hermes owns ([`owned_stream`]), read
//!   message by message through [`crate::bus::snapshot::Snapshots`]; a process's data
//!   directory is a cache of those and is rebuilt from them.
//!
//! A restore refuses a target that already holds data unless forced, and reads the whole
//! file (checking its digest) before it writes anything.

pub mod archive;
pub mod nats_streams;
pub mod service;
mod spill;
// The sled half lives with the database it reads (sled stays inside `store/`).
pub use crate::store::sled_snapshot;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The backup format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const FORMAT: &str = "hermes-backup";

/// Which bus the backed-up deployment ran on: what the file holds and where it restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BusKind {
    /// The sled trees of one data directory.
    Embedded,
    /// JetStream streams and buckets.
    Nats,
}

impl std::fmt::Display for BusKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BusKind::Embedded => "embedded",
            BusKind::Nats => "nats",
        })
    }
}

/// The head of a backup file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `hermes-backup`.
    pub format: String,
    pub version: u32,
    pub bus: BusKind,
    /// The Hermes version that wrote it.
    pub hermes: String,
    /// When it was written (RFC 3339).
    pub created_at: String,
    /// Where it was read from: a data directory or a NATS URL.
    pub source: String,
    /// Records per sled tree (embedded).
    #[serde(default)]
    pub trees: BTreeMap<String, u64>,
    /// Messages per stream (NATS).
    #[serde(default)]
    pub streams: BTreeMap<String, u64>,
    /// Every record in the body.
    pub records: u64,
    /// The body's sha256, checked before a restore writes anything.
    pub sha256: String,
}

impl Manifest {
    pub fn new(bus: BusKind, source: String) -> Self {
        Self {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            bus,
            hermes: env!("CARGO_PKG_VERSION").into(),
            created_at: chrono::Utc::now().to_rfc3339(),
            source,
            trees: BTreeMap::new(),
            streams: BTreeMap::new(),
            records: 0,
            sha256: String::new(),
        }
    }

    fn check_version(&self) -> Result<(), BackupError> {
        if self.format != FORMAT || self.version > FORMAT_VERSION {
            return Err(BackupError::Version {
                format: self.format.clone(),
                version: self.version,
            });
        }
        Ok(())
    }
}

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("cannot {what} {path}: {reason}")]
    Io {
        path: String,
        what: String,
        reason: String,
    },
    #[error("{path} is not a Hermes backup: {reason}")]
    NotABackup { path: String, reason: String },
    #[error(
        "this backup is `{format}` version {version}; this hermes reads `hermes-backup` up to \
         version {FORMAT_VERSION}: restore it with the hermes that wrote it, or a newer one"
    )]
    Version { format: String, version: u32 },
    #[error("a record of {size} bytes is too large for the backup format (4 GiB at most)")]
    TooLarge { size: usize },
    #[error("cannot encode the backup: {0}")]
    Encode(String),
    #[error(
        "the target already holds data ({what}); restoring would mix two deployments. Restore \
         into a fresh one, or pass --force to replace what is there"
    )]
    NotEmpty { what: String },
    #[error(
        "this backup is of a deployment on the {backup} bus, and the target is on the {target} \
         bus: restore it with --bus {hint}"
    )]
    WrongBus {
        backup: BusKind,
        target: BusKind,
        hint: &'static str,
    },
    #[error("the data directory's database failed: {0}")]
    Store(String),
    #[error(transparent)]
    Bus(#[from] crate::bus::BusError),
}

impl BackupError {
    fn encode(e: serde_json::Error) -> Self {
        BackupError::Encode(e.to_string())
    }
}

/// How far a long backup or restore is: the CLI draws it (a progress bar).
pub trait Progress: Send + Sync {
    /// `total` units of work in all, when known.
    fn start(&self, what: &str, total: Option<u64>);
    /// `n` more done.
    fn advance(&self, n: u64);
}

/// A [`Progress`] that shows nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _what: &str, _total: Option<u64>) {}
    fn advance(&self, _n: u64) {}
}

/// Whether Hermes owns the JetStream stream `name`: its streams, and the streams behind its
/// key-value buckets (its own and A2A's).
pub fn owned_stream(name: &str) -> bool {
    name.starts_with("HERMES_") || name.starts_with("KV_hermes_") || name.starts_with("KV_a2a_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_owns_its_streams_and_buckets_only() {
        for ours in [
            "HERMES_SESSION_LOG",
            "HERMES_AUDIT",
            "KV_hermes_jobs",
            "KV_a2a_push",
        ] {
            assert!(owned_stream(ours), "{ours}");
        }
        for theirs in ["ORDERS", "KV_config", "hermes_x"] {
            assert!(!owned_stream(theirs), "{theirs}");
        }
    }

    #[test]
    fn a_newer_format_is_refused_naming_the_fix() {
        let mut manifest = Manifest::new(BusKind::Nats, "x".into());
        manifest.version = FORMAT_VERSION + 1;
        let err = manifest.check_version().unwrap_err().to_string();
        assert!(err.contains("newer one"), "{err}");
    }
}
