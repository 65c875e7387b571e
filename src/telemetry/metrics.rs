//! The engine's Prometheus metrics: their names, labels and buckets, and one named function per
//! fact recorded. This file is the only one that knows the `metrics` crates, so upgrading or
//! replacing them touches nothing else.
//!
//! Recording goes through the `metrics` facade's global recorder. Until [`install`] runs (it
//! does when a process serves `/metrics`) every function here is a no-op costing one atomic
//! load, so the engine pays nothing for metrics nobody reads. Each process records and serves
//! its own; nothing is shared between processes.
//!
//! | metric | kind | labels | recorded by |
//! |---|---|---|---|
//! | `hermes_turns_total` | counter | `agent`, `outcome` | [`turn_finished`] |
//! | `hermes_turn_duration_seconds` | histogram | | [`turn_finished`] (finished turns) |
//! | `hermes_task_tool_rounds` | histogram | | [`turn_finished`] (finished turns) |
//! | `hermes_turn_tokens` | histogram | `kind` = `prompt` / `completion` / `cached` (prompt tokens read from the provider's cache) / `reasoning` (completion tokens spent reasoning) | [`turn_finished`] (finished turns) |
//! | `hermes_tool_calls_total` | counter | `tool`, `status` | [`tool_call`] |
//! | `hermes_memory_recalls_total` | counter | `hit` = `true` / `false` | [`memory_recall`] |
//! | `hermes_memory_writes_total` | counter | `op` | [`memory_write`] |
//! | `hermes_model_errors_total` | counter | `kind` (a model error's code: `model_auth`, `context_length`, …) | [`model_error`] (each failed model call, a primary that fell back included) |
//! | `hermes_mcp_call_duration_seconds` | histogram | `server`, `status` | [`mcp_call`] |
//! | `hermes_jobs` | gauge | `state` | [`job_moved`] |
//! | `hermes_sessions_live` | gauge | | [`sessions_live`] |
//! | `hermes_flush_duration_seconds` | histogram | | [`flush`] |

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::protocol::tool::JobStatus;

pub const TURNS_TOTAL: &str = "hermes_turns_total";
pub const TURN_DURATION: &str = "hermes_turn_duration_seconds";
pub const TASK_TOOL_ROUNDS: &str = "hermes_task_tool_rounds";
pub const TURN_TOKENS: &str = "hermes_turn_tokens";
pub const TOOL_CALLS_TOTAL: &str = "hermes_tool_calls_total";
pub const MEMORY_RECALLS_TOTAL: &str = "hermes_memory_recalls_total";
pub const MEMORY_WRITES_TOTAL: &str = "hermes_memory_writes_total";
pub const MODEL_ERRORS_TOTAL: &str = "hermes_model_errors_total";
pub const MCP_CALL_DURATION: &str = "hermes_mcp_call_duration_seconds";
pub const JOBS: &str = "hermes_jobs";
pub const SESSIONS_LIVE: &str = "hermes_sessions_live";
pub const FLUSH_DURATION: &str = "hermes_flush_duration_seconds";

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Histogram bucket bounds, per metric.
const BUCKETS: [(&str, &[f64]); 5] = [
    (
        TURN_DURATION,
        &[
            0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ],
    ),
    (
        TASK_TOOL_ROUNDS,
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0],
    ),
    (
        TURN_TOKENS,
        &[
            100.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0, 64000.0,
            128000.0,
        ],
    ),
    (
        MCP_CALL_DURATION,
        &[
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ],
    ),
    (
        FLUSH_DURATION,
        &[
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
        ],
    ),
];

#[derive(Debug, Clone, thiserror::Error)]
pub enum MetricsError {
    #[error("cannot set up the Prometheus metrics: {0}; this is a bug in Hermes' metric buckets, please report it")]
    Build(String),
    #[error("another metrics recorder is installed in this process; install Hermes' metrics before any other")]
    Taken,
}

/// The installed recorder: renders what this process recorded. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

static INSTALLED: OnceLock<Result<Metrics, MetricsError>> = OnceLock::new();

/// Start recording this process's metrics (once per process; later calls return the same
/// recorder, or the same error).
pub fn install() -> Result<Metrics, MetricsError> {
    INSTALLED.get_or_init(build_and_install).clone()
}

/// This process's series as `/metrics` shows them, histogram buckets left out (sums and counts kept):
/// `name{labels}` → value. Empty when it does not record metrics.
pub fn series() -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Some(Ok(metrics)) = INSTALLED.get() else {
        return out;
    };
    for line in metrics.render().lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        if name.ends_with("_bucket") {
            continue;
        }
        if let Ok(value) = value.parse::<f64>() {
            out.insert(series.to_string(), value);
        }
    }
    out
}

/// Whether this process records metrics (`install` succeeded): callers skip gathering facts
/// that only the metrics need when it does not.
pub fn enabled() -> bool {
    INSTALLED.get().is_some_and(Result::is_ok)
}

fn build_and_install() -> Result<Metrics, MetricsError> {
    let mut builder = PrometheusBuilder::new();
    for (name, bounds) in BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_owned()), bounds)
            .map_err(|e: BuildError| MetricsError::Build(e.to_string()))?;
    }
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| MetricsError::Taken)?;
    describe();
    Ok(Metrics { handle })
}

impl Metrics {
    /// Everything recorded so far, as Prometheus text ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Drain histogram samples into their buckets; run every few seconds so memory stays
    /// bounded between scrapes.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        TURNS_TOTAL,
        "Turn runs that ended, by agent and outcome (answered, failed, waiting)"
    );
    describe_histogram!(
        TURN_DURATION,
        Unit::Seconds,
        "Time from a turn's message to its answer or failure"
    );
    describe_histogram!(
        TASK_TOOL_ROUNDS,
        "Planning steps that called tools, per finished turn"
    );
    describe_histogram!(
        TURN_TOKENS,
        "Model tokens per finished turn, as the provider reported them"
    );
    describe_counter!(
        TOOL_CALLS_TOTAL,
        "Tool call results stored in a conversation, by tool and status"
    );
    describe_counter!(
        MEMORY_RECALLS_TOTAL,
        "Memory recalls; a hit put at least one memory in the context"
    );
    describe_counter!(MEMORY_WRITES_TOTAL, "Memory changes applied, by operation");
    describe_counter!(MODEL_ERRORS_TOTAL, "Failed model calls, by kind of failure");
    describe_histogram!(
        MCP_CALL_DURATION,
        Unit::Seconds,
        "MCP tools/call round trips, by server and status"
    );
    describe_gauge!(
        JOBS,
        "Async jobs of this tool-executor by state (submitted, running: now; done, failed: since start)"
    );
    describe_gauge!(SESSIONS_LIVE, "Session actors in memory");
    describe_histogram!(
        FLUSH_DURATION,
        Unit::Seconds,
        "Group-commit flushes of the database"
    );
}

/// How one run of a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Answered,
    Failed,
    /// Paused for a job, the user's confirmation or delegated agents; it runs again later.
    Waiting,
}

impl TurnOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Answered => "answered",
            TurnOutcome::Failed => "failed",
            TurnOutcome::Waiting => "waiting",
        }
    }

    /// Answered or failed: nothing more will happen to the turn.
    pub fn is_final(self) -> bool {
        !matches!(self, TurnOutcome::Waiting)
    }
}

/// What is known about a turn when one of its runs ends.
#[derive(Debug, Clone)]
pub struct TurnFacts<'a> {
    pub agent: &'a str,
    pub outcome: TurnOutcome,
    /// From the turn's message to now.
    pub duration: Duration,
    /// Planning steps whose reply called tools.
    pub tool_rounds: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Of the completion tokens, those spent reasoning.
    pub reasoning_tokens: u64,
}

/// A run of a turn ended. Every run is counted; the histograms take finished turns only, so a
/// turn that waited and resumed counts once there.
pub fn turn_finished(facts: &TurnFacts<'_>) {
    if facts.outcome.is_final() {
        histogram!(TURN_DURATION).record(facts.duration.as_secs_f64());
        histogram!(TASK_TOOL_ROUNDS).record(f64::from(facts.tool_rounds));
        histogram!(TURN_TOKENS, "kind" => "prompt").record(facts.prompt_tokens as f64);
        histogram!(TURN_TOKENS, "kind" => "completion").record(facts.completion_tokens as f64);
        histogram!(TURN_TOKENS, "kind" => "cached").record(facts.cached_tokens as f64);
        histogram!(TURN_TOKENS, "kind" => "reasoning").record(facts.reasoning_tokens as f64);
    }
    // Counted last: a scrape that sees the turn sees its histograms too.
    turn_counted(facts.agent, facts.outcome);
}

/// A run of a turn ended, with nothing known to time or tally (a waiting turn cancelled).
pub fn turn_counted(agent: &str, outcome: TurnOutcome) {
    // Owned label values cost an allocation: none when nothing records.
    if !enabled() {
        return;
    }
    counter!(TURNS_TOTAL, "agent" => agent.to_owned(), "outcome" => outcome.as_str()).increment(1);
}

/// A tool call's result was stored in the conversation.
pub fn tool_call(tool: &str, ok: bool) {
    // Owned label values cost an allocation: none when nothing records.
    if !enabled() {
        return;
    }
    counter!(TOOL_CALLS_TOTAL, "tool" => tool.to_owned(), "status" => status(ok)).increment(1);
}

fn status(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

/// A turn recalled memories; `hit`: at least one entered its context.
pub fn memory_recall(hit: bool) {
    let hit = if hit { "true" } else { "false" };
    counter!(MEMORY_RECALLS_TOTAL, "hit" => hit).increment(1);
}

/// A memory change was applied: `added`, `updated`, `deleted`, `ignored_stale`, `noop` (the
/// merge's operations), or by the sweep `expired` (demoted) and `removed`.
pub fn memory_write(op: &'static str) {
    memory_writes(op, 1);
}

/// `count` memory changes of one kind were applied (see [`memory_write`]).
pub fn memory_writes(op: &'static str, count: usize) {
    if count > 0 {
        counter!(MEMORY_WRITES_TOTAL, "op" => op).increment(count as u64);
    }
}

/// A model call failed with the error of code `kind` (see `llm::ModelErrorKind::code`).
pub fn model_error(kind: &'static str) {
    counter!(MODEL_ERRORS_TOTAL, "kind" => kind).increment(1);
}

/// How an MCP call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpStatus {
    Ok,
    /// The server answered with `isError`.
    ToolError,
    /// No answer: transport failure or timeout.
    Error,
    /// The server answered with a JSON-RPC error (arguments refused, protocol broken).
    Rejected,
}

impl McpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            McpStatus::Ok => "ok",
            McpStatus::ToolError => "tool_error",
            McpStatus::Error => "error",
            McpStatus::Rejected => "rejected",
        }
    }

    /// The status of a call that failed with `failure`.
    pub fn of(failure: crate::protocol::McpFailure) -> Self {
        use crate::protocol::McpFailure;
        match failure {
            McpFailure::InvalidArguments
            | McpFailure::Rejected
            | McpFailure::Protocol
            | McpFailure::Unreadable => McpStatus::Rejected,
            _ => McpStatus::Error,
        }
    }
}

/// An MCP `tools/call` round trip to `server` ended.
pub fn mcp_call(server: &str, status: McpStatus, duration: Duration) {
    // Owned label values cost an allocation: none when nothing records.
    if !enabled() {
        return;
    }
    histogram!(MCP_CALL_DURATION, "server" => server.to_owned(), "status" => status.as_str())
        .record(duration.as_secs_f64());
}

/// One group-commit flush of the database took `duration`.
pub fn flush(duration: Duration) {
    histogram!(FLUSH_DURATION).record(duration.as_secs_f64());
}

/// The `state` label of a job status.
fn job_state(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Submitted => "submitted",
        JobStatus::Running => "running",
        JobStatus::Done => "done",
        JobStatus::Failed => "failed",
    }
}

/// A job of this process left state `from` (`None`: it just arrived here) for `to` (`None`: it
/// left this process's hands without finishing here).
pub fn job_moved(from: Option<JobStatus>, to: Option<JobStatus>) {
    if let Some(from) = from {
        gauge!(JOBS, "state" => job_state(from)).decrement(1.0);
    }
    if let Some(to) = to {
        gauge!(JOBS, "state" => job_state(to)).increment(1.0);
    }
}

/// Session actors in memory now.
pub fn sessions_live(count: usize) {
    gauge!(SESSIONS_LIVE).set(count as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_statuses_use_the_documented_label_values() {
        assert_eq!(TurnOutcome::Answered.as_str(), "answered");
        assert_eq!(TurnOutcome::Failed.as_str(), "failed");
        assert_eq!(TurnOutcome::Waiting.as_str(), "waiting");
        assert!(TurnOutcome::Answered.is_final() && TurnOutcome::Failed.is_final());
        assert!(!TurnOutcome::Waiting.is_final());
        assert_eq!(status(true), "ok");
        assert_eq!(status(false), "error");
        assert_eq!(McpStatus::ToolError.as_str(), "tool_error");
        assert_eq!(job_state(JobStatus::Submitted), "submitted");
    }

    #[test]
    fn every_bucket_list_is_sorted_and_names_a_histogram() {
        for (name, bounds) in BUCKETS {
            assert!(name.starts_with("hermes_"));
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{name}");
        }
    }

    #[test]
    fn an_installed_recorder_renders_what_was_recorded_as_prometheus_histograms() {
        let metrics = install().unwrap();
        assert!(
            install().is_ok(),
            "a second install returns the same recorder"
        );
        turn_finished(&TurnFacts {
            agent: "unit-test-agent",
            outcome: TurnOutcome::Answered,
            duration: Duration::from_millis(300),
            tool_rounds: 1,
            prompt_tokens: 120,
            completion_tokens: 30,
            cached_tokens: 100,
            reasoning_tokens: 20,
        });
        tool_call("unit_test_tool", true);
        let text = metrics.render();
        assert!(
            text.contains(r#"hermes_turns_total{agent="unit-test-agent",outcome="answered"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"hermes_tool_calls_total{tool="unit_test_tool",status="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"hermes_turn_tokens_bucket{kind="prompt",le="250"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"hermes_turn_tokens_sum{kind="cached"}"#)
                && text.contains(r#"hermes_turn_tokens_sum{kind="reasoning"}"#),
            "{text}"
        );
        assert!(text.contains("hermes_task_tool_rounds_count"), "{text}");
    }
}
