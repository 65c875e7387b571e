//! A deployment's status on the wire: `hermes status` publishes a [`StatusRequest`] on
//! `hermes.status`, and every running process answers with its [`ProcessStatus`] on the
//! request's `reply_to` subject, so one command sees every process at once.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Ask every process for its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusRequest {
    /// Where each process publishes its answer.
    pub reply_to: String,
}

/// One process's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessStatus {
    /// Random per process start.
    pub id: String,
    pub pid: u32,
    pub host: String,
    /// The actors this process runs (`session`, `planner`, …).
    pub actors: Vec<String>,
    pub started_at: DateTime<Utc>,
    /// Session actors in memory, when this process runs sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_live: Option<u64>,
    /// The `/metrics` series of this process (histogram buckets left out; `_sum` and `_count` kept, so means can be taken) by their
    /// full name with labels; empty when it does not record metrics (`--http`).
    #[serde(default)]
    pub series: BTreeMap<String, f64>,
}
