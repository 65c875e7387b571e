//! The tool-executor's counters, readable on `hermes.tools.metrics` and in the catalog.
//!
//! `high_risk_unconfirmed_executions` counts `risk = high` calls that ran without
//! `confirmed: true`; the executor refuses such calls (counted in `high_risk_refused`), so it
//! must stay 0 — tests and dashboards assert it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A snapshot of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolMetrics {
    /// Calls that ran (sync calls and async submissions; replays excluded).
    #[serde(default)]
    pub executions: u64,
    /// High-risk calls refused for lack of confirmation.
    #[serde(default)]
    pub high_risk_refused: u64,
    /// High-risk calls executed with `confirmed: true`.
    #[serde(default)]
    pub high_risk_confirmed_executions: u64,
    /// High-risk calls executed without confirmation. Must stay 0.
    #[serde(default)]
    pub high_risk_unconfirmed_executions: u64,
    /// Write calls answered from the idempotency record instead of running again.
    #[serde(default)]
    pub idempotent_replays: u64,
    #[serde(default)]
    pub jobs_submitted: u64,
    /// Jobs found unfinished at start and run again.
    #[serde(default)]
    pub jobs_resumed: u64,
    /// Jobs found unfinished at start and failed (write tools with no record of completion).
    #[serde(default)]
    pub jobs_failed_on_restart: u64,
}

/// The live counters; clones share them.
#[derive(Debug, Clone, Default)]
pub struct ExecutorMetrics {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    executions: AtomicU64,
    high_risk_refused: AtomicU64,
    high_risk_confirmed: AtomicU64,
    high_risk_unconfirmed: AtomicU64,
    idempotent_replays: AtomicU64,
    jobs_submitted: AtomicU64,
    jobs_resumed: AtomicU64,
    jobs_failed_on_restart: AtomicU64,
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Execution,
    HighRiskRefused,
    HighRiskConfirmed,
    HighRiskUnconfirmed,
    IdempotentReplay,
    JobSubmitted,
    JobResumed,
    JobFailedOnRestart,
}

impl ExecutorMetrics {
    pub fn bump(&self, counter: Counter) {
        let c = &self.inner;
        let cell = match counter {
            Counter::Execution => &c.executions,
            Counter::HighRiskRefused => &c.high_risk_refused,
            Counter::HighRiskConfirmed => &c.high_risk_confirmed,
            Counter::HighRiskUnconfirmed => &c.high_risk_unconfirmed,
            Counter::IdempotentReplay => &c.idempotent_replays,
            Counter::JobSubmitted => &c.jobs_submitted,
            Counter::JobResumed => &c.jobs_resumed,
            Counter::JobFailedOnRestart => &c.jobs_failed_on_restart,
        };
        cell.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ToolMetrics {
        let c = &self.inner;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ToolMetrics {
            executions: get(&c.executions),
            high_risk_refused: get(&c.high_risk_refused),
            high_risk_confirmed_executions: get(&c.high_risk_confirmed),
            high_risk_unconfirmed_executions: get(&c.high_risk_unconfirmed),
            idempotent_replays: get(&c.idempotent_replays),
            jobs_submitted: get(&c.jobs_submitted),
            jobs_resumed: get(&c.jobs_resumed),
            jobs_failed_on_restart: get(&c.jobs_failed_on_restart),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_counters() {
        let m = ExecutorMetrics::default();
        let clone = m.clone();
        clone.bump(Counter::HighRiskRefused);
        clone.bump(Counter::HighRiskRefused);
        m.bump(Counter::IdempotentReplay);
        let s = m.snapshot();
        assert_eq!(s.high_risk_refused, 2);
        assert_eq!(s.idempotent_replays, 1);
        assert_eq!(s.high_risk_unconfirmed_executions, 0);
    }
}
