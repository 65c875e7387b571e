//! The sled database and the trees each owner keeps in it.
//!
//! One database per process, under `engine.data_dir`. Trees and their owners:
//! - `sessions` (metadata and task state), `messages`, and `tasks` (earlier versions' task
//!   states) — the Session actors ([`sessions::SessionStore`]);
//!   `sessions_aside` — their messages kept aside when a replicated log won over a diverged
//!   cache ([`sessions::ASIDE_TREE`])
//! - `memories`, `memory_keys`, `memory_vectors`, `memory_refs` — the Memory-extractor (`memory::MemoryStore`)
//! - `bus.queue.<name>` — the embedded bus' durable queues
//! - `jobs`, `tool_results_idem`, `tool_raw` — the Tool-executor (`tools::stores`: async job
//!   records, idempotency records, raw tool outputs)
//! - `mcp_audit` — the MCP-bridge's audit of MCP calls (`mcp::audit`)
//! - `memory_extracted` — the Memory-extractor's set of mined turns
//! - `a2a_push`, `a2a_remote` — A2A push configs and delegated remote tasks when there is no
//!   NATS cluster (`a2a::kv`)
//!
//! sled's types stay inside `store/` and `memory/` (and the embedded bus' durable queue):
//! the other owners reach their trees through [`tree::Tree`], bytes in and out, and a backup
//! reads every tree through [`sled_snapshot`].
//!
//! sled is single-process: other processes ask the owner over the bus, never open the files.
//! [`session_reader`] reads sessions for those who ask (`hermes sessions`), [`session_wire`]
//! gives them their wire form.

pub mod durability;
pub mod log_tails;
pub mod replica;
pub mod session_reader;
pub mod session_wire;
pub mod sessions;
pub mod sled_snapshot;
#[cfg(test)]
mod sled_split_tests;
pub mod tasks;
#[cfg(test)]
pub mod test_log;
pub mod tool_result;
pub mod tree;
pub mod write_behind;

use std::path::Path;

/// Why the database could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the data directory {path}: {reason}; is another hermes process using it? (sled allows one process per directory)")]
    Open { path: String, reason: String },
    #[error("storage failed: {0}")]
    Sled(#[from] sled::Error),
    #[error("stored record is corrupt ({what}): {reason}")]
    Corrupt { what: String, reason: String },
    #[error("cannot encode record: {0}")]
    Encode(String),
    #[error("storage worker failed: {0}; the operation was not done, retry it")]
    Worker(String),
    #[error(transparent)]
    Flush(#[from] durability::FlushError),
    #[error(transparent)]
    Log(#[from] replica::LogError),
    #[error("shared store failed: {0}")]
    Shared(String),
}

impl StoreError {
    /// The session's work must go back to its partition inbox rather than fail: another
    /// process owns the session now (fenced), or the replicated log is briefly unreachable (a
    /// node restarting, a stream electing its leader). The actor stops without settling, and
    /// the item comes back — to this process or the new owner — which carries on from the log.
    /// Not forever: after a few deliveries the client is told the cause instead (see
    /// `crate::actors::session`'s `unservable` module).
    pub fn hands_back(&self) -> bool {
        matches!(
            self,
            StoreError::Log(replica::LogError::Fenced { .. } | replica::LogError::Unavailable(_))
        )
    }
}

/// Open the database under `dir` (see [`open`]) with its flusher, committing as `mode` says.
pub fn open_durable(dir: &Path, mode: durability::Mode) -> Result<durability::Durable, StoreError> {
    Ok(durability::Durable::new(open(dir)?, mode))
}

/// How long [`open`] waits for a previous owner of the directory to let go of its lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Open (or create) the database under `dir`. A lock still held by a database that is being
/// closed (sled releases it from a background thread after the last handle drops, and a
/// restarted service may start while the old one exits) is waited for up to [`LOCK_WAIT`].
pub fn open(dir: &Path) -> Result<sled::Db, StoreError> {
    open_with_cache(dir, crate::config::DEFAULT_CACHE_MB)
}

/// [`open`] with a page cache of at most `cache_mb` MiB (sled's own default is 1 GiB, which an
/// engine holding thousands of sessions grows into).
pub fn open_with_cache(dir: &Path, cache_mb: u64) -> Result<sled::Db, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match sled::Config::new()
            .path(dir)
            .mode(sled::Mode::HighThroughput)
            .cache_capacity(cache_mb.max(1).saturating_mul(1024 * 1024))
            .open()
        {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => {
                return Err(StoreError::Open {
                    path: dir.display().to_string(),
                    reason: e.to_string(),
                })
            }
        }
    }
}
