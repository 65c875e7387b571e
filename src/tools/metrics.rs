//! The tool-executor's counters, readable on `hermes.tools.metrics` and in the catalog.
//!
//! `high_risk_unconfirmed_executions` counts `risk = high` calls that ran without
//! `confirmed: true`; the executor refuses such calls (counted in `high_risk_refused`), so it
//! must stay 0 — tests and dashboards assert it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::protocol::tool::ToolMetrics;

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
    idempotent_unfinished: AtomicU64,
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
    IdempotentUnfinished,
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
            Counter::IdempotentUnfinished => &c.idempotent_unfinished,
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
            idempotent_unfinished: get(&c.idempotent_unfinished),
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
