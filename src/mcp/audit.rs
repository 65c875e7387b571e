//! The MCP audit trail: one [`AuditRecord`] per `tools/call`, `resources/read` or `prompts/get`
//! the MCP-bridge makes to a mounted server, per call Hermes' own MCP server answers, and per
//! request it refuses.
//!
//! Records live in the sled tree `mcp_audit`, owned by the MCP-bridge (it writes its own calls
//! and the server-side events it hears on `hermes.audit.mcp_server` / `hermes.audit.auth_denied`).
//! Key: 8 bytes big-endian microseconds since the Unix epoch, then 8 bytes big-endian sequence
//! number of the writing process — so keys sort by time and never collide. Value: the record as
//! JSON. Every record is also published on `hermes.audit.<kind>`; on a NATS cluster that
//! publish is stored in the replicated stream `HERMES_AUDIT` (the deployment's one audit
//! trail, which `hermes.mcp.audit` answers from) and the sled tree is this bridge's copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::bus::{rpc, Bus};
use crate::protocol::envelope::Envelope;
use crate::protocol::mcp::AuditEntry;
use crate::protocol::subjects;
use crate::store::tree::{Database, Tree};
use crate::store::StoreError;

/// The sled tree of audit records.
pub const TREE: &str = "mcp_audit";

/// Status of a call's record written before the call.
pub const STARTED: &str = "started";

/// Drop each `started` record whose call has an outcome among `records`, so a finished call
/// reads as one line and only a call interrupted mid-way still shows `started`.
pub fn fold_started<T>(records: Vec<T>, key: impl Fn(&T) -> (&str, Option<&str>)) -> Vec<T> {
    let finished: std::collections::HashSet<String> = records
        .iter()
        .filter_map(|r| match key(r) {
            (status, Some(call)) if status != STARTED => Some(call.to_owned()),
            _ => None,
        })
        .collect();
    records
        .into_iter()
        .filter(|r| match key(r) {
            (STARTED, Some(call)) => !finished.contains(call),
            _ => true,
        })
        .collect()
}

/// One audited MCP operation, as stored in the `mcp_audit` tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub ts: DateTime<Utc>,
    /// `client` (the bridge called a mounted server) or `server` (a caller used Hermes' server).
    pub side: String,
    /// The user or principal the call was made for; `-` when unknown.
    pub who: String,
    /// The mounted server's name, or `hermes` for Hermes' own server.
    pub server: String,
    /// `tools/call`, `resources/read`, `prompts/get`, or `auth` for a refused token.
    pub method: String,
    /// The tool name or resource URI.
    pub target: String,
    pub duration_ms: u64,
    /// `ok`, `error` or `denied`; `started` for a `tools/call` whose outcome was never
    /// recorded (the bridge stopped mid-call, so the server may have run it).
    pub status: String,
    #[serde(default)]
    pub error: Option<String>,
    /// Links a call's `started` record to its outcome record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

impl From<AuditRecord> for AuditEntry {
    fn from(r: AuditRecord) -> Self {
        Self {
            ts: r.ts,
            side: r.side,
            who: r.who,
            server: r.server,
            method: r.method,
            target: r.target,
            duration_ms: r.duration_ms,
            status: r.status,
            error: r.error,
            call: r.call,
        }
    }
}

impl From<AuditEntry> for AuditRecord {
    fn from(e: AuditEntry) -> Self {
        Self {
            ts: e.ts,
            side: e.side,
            who: e.who,
            server: e.server,
            method: e.method,
            target: e.target,
            duration_ms: e.duration_ms,
            status: e.status,
            error: e.error,
            call: e.call,
        }
    }
}

impl AuditRecord {
    /// A record stamped now; `who` of `None` becomes `-`.
    pub fn new(side: &str, who: Option<&str>, server: &str, method: &str, target: &str) -> Self {
        Self {
            ts: Utc::now(),
            side: side.to_owned(),
            who: who.filter(|w| !w.is_empty()).unwrap_or("-").to_owned(),
            server: server.to_owned(),
            method: method.to_owned(),
            target: target.to_owned(),
            duration_ms: 0,
            status: "ok".to_owned(),
            error: None,
            call: None,
        }
    }

    /// The record written before an effectful call leaves: durable before the server can act,
    /// so a bridge killed mid-call still leaves the call in the trail. Its outcome record
    /// carries the same `call` id and hides it (see [`fold_started`]).
    pub fn started(&self, call: &str) -> Self {
        Self {
            status: STARTED.to_owned(),
            call: Some(call.to_owned()),
            ..self.clone()
        }
    }

    /// This record as the outcome of call `call`.
    pub fn for_call(mut self, call: &str) -> Self {
        self.call = Some(call.to_owned());
        self
    }

    /// Set the outcome: `Ok` → `ok`, `Err` → `error` with the message.
    pub fn outcome(mut self, started: std::time::Instant, error: Option<String>) -> Self {
        self.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(error) = error {
            self.status = "error".to_owned();
            self.error = Some(error);
        }
        self
    }

    /// A refusal.
    pub fn denied(mut self, reason: &str) -> Self {
        self.status = "denied".to_owned();
        self.error = Some(reason.to_owned());
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the MCP audit store (sled tree `mcp_audit`) failed: {0}; check the data directory's disk space and permissions")]
    Store(#[from] StoreError),
    #[error("an MCP audit record could not be encoded or decoded: {0}; the record is skipped")]
    Codec(#[from] serde_json::Error),
}

/// The `mcp_audit` tree.
#[derive(Debug, Clone)]
pub struct AuditLog {
    tree: Tree,
    seq: Arc<AtomicU64>,
}

impl AuditLog {
    pub fn open(db: &impl Database) -> Result<Self, AuditError> {
        Ok(Self {
            tree: Tree::open(db, TREE)?,
            seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Store one record (inline: one small sled insert).
    pub fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let micros = u64::try_from(record.ts.timestamp_micros()).unwrap_or(0);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&micros.to_be_bytes());
        key[8..].copy_from_slice(&seq.to_be_bytes());
        self.tree.insert(&key, &serde_json::to_vec(record)?)?;
        Ok(())
    }

    /// The newest `limit` records, newest first, a finished call's `started` record folded
    /// into its outcome (undecodable ones are skipped with a warning).
    pub fn latest(&self, limit: usize) -> Result<Vec<AuditRecord>, AuditError> {
        let mut out = Vec::new();
        // Twice the limit read, so folding the started records still leaves `limit`.
        for entry in self.tree.iter().rev() {
            if out.len() >= limit.saturating_mul(2) {
                break;
            }
            let (_, value) = entry?;
            match serde_json::from_slice(&value) {
                Ok(record) => out.push(record),
                Err(error) => tracing::warn!(%error, "undecodable MCP audit record skipped"),
            }
        }
        let mut out = fold_started(out, |r: &AuditRecord| {
            (r.status.as_str(), r.call.as_deref())
        });
        out.truncate(limit);
        Ok(out)
    }
}

/// Publish `record` on `hermes.audit.<kind>`; a failure is logged, never fatal.
pub async fn publish(bus: &dyn Bus, kind: &str, record: &AuditRecord) {
    let subject = match subjects::audit(kind) {
        Ok(subject) => subject,
        Err(error) => {
            tracing::warn!(%error, "bad audit kind");
            return;
        }
    };
    let envelope = Envelope::event(AuditEntry::from(record.clone()));
    let stored = match (bus.cluster(), envelope.encode()) {
        (Some(cluster), Ok(payload)) => cluster
            .audit_trail()
            .record(&subject, payload)
            .await
            .map_err(|e| e.to_string()),
        (None, _) => rpc::publish(bus, &subject, &envelope)
            .await
            .map_err(|e| e.to_string()),
        (_, Err(e)) => Err(e.to_string()),
    };
    if let Err(error) = stored {
        tracing::warn!(%error, subject, "could not publish an MCP audit record");
    }
}

/// The newest `limit` records of the deployment's shared audit trail (NATS cluster), newest
/// first, a finished call's `started` record folded into its outcome; undecodable ones are
/// skipped with a warning.
pub async fn latest_shared(
    trail: &dyn crate::bus::cluster::AuditTrail,
    limit: usize,
) -> Result<Vec<AuditEntry>, crate::bus::BusError> {
    let subjects: Vec<String> = [
        subjects::audit_kinds::MCP,
        subjects::audit_kinds::MCP_SERVER,
        subjects::audit_kinds::AUTH_DENIED,
    ]
    .into_iter()
    .filter_map(|kind| subjects::audit(kind).ok())
    .collect();
    let payloads = trail.latest(limit.saturating_mul(2), &subjects).await?;
    let entries: Vec<AuditEntry> = payloads
        .iter()
        .filter_map(|payload| {
            match Envelope::<AuditEntry>::decode_event(payload, crate::bus::DEFAULT_MAX_PAYLOAD) {
                Ok(envelope) => Some(envelope.body),
                Err(error) => {
                    tracing::warn!(%error, "undecodable shared MCP audit record skipped");
                    None
                }
            }
        })
        .collect();
    let mut entries = fold_started(entries, |e: &AuditEntry| {
        (e.status.as_str(), e.call.as_deref())
    });
    entries.truncate(limit);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn latest_returns_newest_first_and_respects_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::open(dir.path()).unwrap();
        let log = AuditLog::open(&db).unwrap();
        for tool in ["a", "b", "c"] {
            let record = AuditRecord::new("client", Some("alice"), "srv", "tools/call", tool);
            log.record(&record).unwrap();
        }
        let latest = log.latest(2).unwrap();
        let targets: Vec<_> = latest.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, vec!["c", "b"]);
        assert_eq!(latest[0].who, "alice");
        assert_eq!(log.latest(10).unwrap().len(), 3);
    }

    #[test]
    fn outcome_and_denial_set_status_and_error() {
        let started = std::time::Instant::now();
        let record = AuditRecord::new("client", None, "s", "tools/call", "t")
            .outcome(started, Some("boom".into()));
        assert_eq!(record.status, "error");
        assert_eq!(record.who, "-");
        assert_eq!(record.error.as_deref(), Some("boom"));
        let denied = AuditRecord::new("server", Some("bob"), "hermes", "tools/call", "t")
            .denied("role lacks the tool");
        assert_eq!(denied.status, "denied");
    }

    #[test]
    fn a_finished_call_reads_as_one_record_and_an_interrupted_one_stays_started() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::open(dir.path()).unwrap();
        let log = AuditLog::open(&db).unwrap();
        let call = AuditRecord::new("client", Some("alice"), "srv", "tools/call", "pay");
        log.record(&call.started("c1")).unwrap();
        log.record(&call.clone().for_call("c1")).unwrap();
        let cut = AuditRecord::new("client", Some("alice"), "srv", "tools/call", "refund");
        log.record(&cut.started("c2")).unwrap();
        let latest = log.latest(10).unwrap();
        let shown: Vec<_> = latest
            .iter()
            .map(|r| (r.target.as_str(), r.status.as_str()))
            .collect();
        assert_eq!(shown, vec![("refund", STARTED), ("pay", "ok")]);
    }
}
