//! Tools on the wire: definitions (what the engine knows of a tool), calls and their results,
//! structured errors, the catalog, async job events and the executor's counters.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chat::ToolSpec;

/// How a failed tool call is classified, so the model (and the loop guard) can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    /// The name is not in the whitelist.
    UnknownTool,
    /// The arguments do not match the schema and could not be safely repaired.
    InvalidArguments,
    /// The tool ran and reported a failure.
    ExecutionFailed,
    /// The tool did not finish in time.
    Timeout,
    /// The tool's backend (MCP server, worker) is not reachable.
    Unavailable,
    /// A `risk = high` call arrived without the user's confirmation; it was not run.
    ConfirmationRequired,
    /// The user was asked to confirm a `risk = high` call and said no; it was not run.
    DeclinedByUser,
    /// The tool's MCP server asks the user something before it goes on (the result's
    /// `output` holds the questions); the turn waits for the answer and calls again with it.
    InputRequired,
    /// The call reached its backend, which went away before the outcome was known: it may
    /// have taken effect. A `write` call is not run again on the same idempotency key; the
    /// user should check.
    OutcomeUnknown,
}

impl ToolErrorCode {
    /// The code as it is written on the wire (`unknown_tool`, `timeout`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTool => "unknown_tool",
            Self::InvalidArguments => "invalid_arguments",
            Self::ExecutionFailed => "execution_failed",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::ConfirmationRequired => "confirmation_required",
            Self::DeclinedByUser => "declined_by_user",
            Self::InputRequired => "input_required",
            Self::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// A structured error the model can act on.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error, schemars::JsonSchema,
)]
#[error("{code:?}: {message}")]
pub struct ToolError {
    pub code: ToolErrorCode,
    pub message: String,
    /// What the model should do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// For `unknown_tool`: the closest existing names; for `invalid_arguments`: one entry per
    /// schema violation (`/path: problem`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl ToolError {
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: None,
            details: Vec::new(),
        }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }
}

/// One progress report of a running job: how far (0.0–1.0) and what it is doing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgressUpdate {
    pub fraction: f32,
    pub message: String,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Submitted,
    Running,
    Done,
    Failed,
}

impl JobStatus {
    /// `done` or `failed`: nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Failed)
    }

    /// The envelope kind of the event announcing this status.
    pub fn event_kind(self) -> &'static str {
        match self {
            JobStatus::Submitted => super::kinds::JOB_SUBMITTED,
            JobStatus::Running => super::kinds::JOB_PROGRESS,
            JobStatus::Done => super::kinds::JOB_DONE,
            JobStatus::Failed => super::kinds::JOB_FAILED,
        }
    }

    /// The status an event kind announces; `None` for a kind that is no job event.
    pub fn of_event_kind(kind: &str) -> Option<Self> {
        [Self::Submitted, Self::Running, Self::Done, Self::Failed]
            .into_iter()
            .find(|s| s.event_kind() == kind)
    }
}

/// Default timeout of one call when a definition sets none, seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// How much longer than a tool's own timeout its caller waits for the reply: the executor
/// reports the tool's timeouts itself, and the caller must not give up first.
pub const TOOL_REPLY_MARGIN: Duration = Duration::from_secs(5);

/// How long a caller waits for the reply to a call of a tool that runs for at most
/// `tool_timeout` (its own timeout, or for an async tool its submission's): that plus
/// [`TOOL_REPLY_MARGIN`]. The executor reckons with this wait when it holds a repeated call.
pub fn tool_reply_wait(tool_timeout: Duration) -> Duration {
    tool_timeout + TOOL_REPLY_MARGIN
}

/// How long after a `write` tool's own timeout its execution may still be recording its
/// outcome: on a NATS cluster the record's write to the shared idempotency bucket is tried
/// through a JetStream failover until 1 s before this runs out.
pub const WRITE_SETTLE_GRACE: Duration = Duration::from_secs(20);

/// How long a caller waits for the reply to a `write` call it sent again after `first_wait`
/// passed in silence: the executor holds the copy until the earlier execution settles (up to
/// [`WRITE_SETTLE_GRACE`] past the tool's timeout) and answers with its outcome, so the caller
/// must outwait that.
pub fn repeated_write_wait(first_wait: Duration) -> Duration {
    first_wait + WRITE_SETTLE_GRACE
}

/// How a call returns.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// The result is the reply.
    #[default]
    Sync,
    /// The reply is `{job_id, status: "submitted"}`; the result arrives on `hermes.job.<id>`.
    Async,
}

/// What a call does to the world.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    /// Only reads; safe to run again and in parallel.
    #[default]
    Read,
    /// Changes state, but running it twice is the same as once.
    Idempotent,
    /// Changes state; the executor runs one call per idempotency key.
    Write,
}

/// Whether a call needs the user's confirmation first.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolRisk {
    #[default]
    Low,
    /// The executor refuses the call unless the request says `confirmed: true`.
    High,
}

/// Where a tool runs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// In the tool-executor (built-ins and MCP proxies).
    #[default]
    Executor,
    /// In an external worker process serving `hermes.tool.<name>` in queue group `tool`.
    Worker,
}

/// A tool as the engine knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolDefinition {
    pub name: String,
    /// What it does, when to use it and when not, parameters, returns and errors.
    pub description: String,
    /// JSON Schema of the arguments object (as the model sees it).
    pub input_schema: Value,
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default)]
    pub mode: ToolMode,
    #[serde(default)]
    pub effect: ToolEffect,
    #[serde(default)]
    pub risk: ToolRisk,
    /// The scenes (tool groups) that show this tool; empty means every scene.
    #[serde(default)]
    pub scenes: Vec<String>,
    #[serde(default)]
    pub source: ToolSource,
}

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

impl ToolDefinition {
    /// A sync, read-only, low-risk executor tool in every scene.
    pub fn from_spec(spec: ToolSpec, timeout: Duration) -> Self {
        Self {
            name: spec.name,
            description: spec.description,
            input_schema: spec.input_schema,
            timeout_secs: timeout.as_secs().max(1),
            mode: ToolMode::Sync,
            effect: ToolEffect::Read,
            risk: ToolRisk::Low,
            scenes: Vec::new(),
            source: ToolSource::Executor,
        }
    }

    /// The part the model sees.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// Whether the tool is shown in `scene` (a tool with no scenes is shown everywhere).
    pub fn in_scene(&self, scene: &str) -> bool {
        self.scenes.is_empty() || self.scenes.iter().any(|s| s == scene)
    }
}

/// A snapshot of the counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
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
    /// Write calls refused because an earlier execution with the same key started and never
    /// recorded an outcome.
    #[serde(default)]
    pub idempotent_unfinished: u64,
    #[serde(default)]
    pub jobs_submitted: u64,
    /// Jobs found unfinished at start and run again.
    #[serde(default)]
    pub jobs_resumed: u64,
    /// Jobs found unfinished at start and failed (write tools with no record of completion).
    #[serde(default)]
    pub jobs_failed_on_restart: u64,
}

/// Execute one call on `hermes.tool.<name>`. `user` is injected by the engine, never by the
/// model.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallRequest {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The calling session (part of a `write` call's idempotency key; when absent the
    /// envelope's `session` is used).
    #[serde(default)]
    pub session: Option<String>,
    /// The user confirmed this call; a `risk = high` tool is refused without it.
    #[serde(default)]
    pub confirmed: bool,
    /// The user's answers to what the tool's MCP server asked at the call's previous round
    /// (a result with error `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<super::mcp::McpInputAnswers>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallResult {
    pub call_id: String,
    pub name: String,
    pub status: ToolStatus,
    /// The tool's output (status ok) or `null`.
    #[serde(default)]
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Safe repairs applied to the arguments before the call.
    #[serde(default)]
    pub auto_corrected: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrections: Vec<String>,
    /// `builtin`, `mcp:<server>`, `worker`, `idempotent-replay` (a recorded result), or
    /// [`DEFERRED_VIA`] (a sync tool's backend deferred the work: the output is a job).
    #[serde(default)]
    pub via: String,
    pub duration_ms: u64,
    /// Where the full output is kept (`raw-…`; read it with the `tool_raw_get` tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_reference: Option<String>,
}

/// What changed in a tool-executor's catalog, published on `hermes.tools.changed` so
/// sessions that cache the catalog fetch it again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolsChanged {
    pub mounted: Vec<String>,
    pub unmounted: Vec<String>,
}

/// The tool catalog served on `hermes.tools.list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolsCatalog {
    /// What the model sees, executor and worker tools alike.
    pub tools: Vec<ToolSpec>,
    /// The same tools with timeout, mode, effect, risk, scenes and source.
    #[serde(default)]
    pub definitions: Vec<ToolDefinition>,
    /// The answering executor's counters.
    #[serde(default)]
    pub metrics: ToolMetrics,
}

/// One change of an async job, published on `hermes.job.<id>` with kind `job.submitted`,
/// `job.progress` (the work started or reported progress), `job.done` or `job.failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobEvent {
    pub job_id: String,
    pub tool: String,
    pub call_id: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub turn_id: Option<String>,
    pub status: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressUpdate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

impl JobEvent {
    /// A job event from a decoded envelope: its kind must be a job event's, and the status
    /// its body states must be the one that kind announces.
    pub fn from_envelope(
        raw: super::envelope::Envelope<Value>,
    ) -> Result<super::envelope::Envelope<JobEvent>, super::envelope::EnvelopeError> {
        use super::envelope::EnvelopeError;
        let Some(announced) = JobStatus::of_event_kind(&raw.kind) else {
            return Err(EnvelopeError::Kind {
                found: raw.kind,
                expected: "a job event (job.submitted, job.progress, job.done, job.failed)".into(),
            });
        };
        let kind = announced.event_kind();
        let event = raw.into_typed::<JobEvent>(kind)?;
        if event.body.status != announced {
            return Err(EnvelopeError::Body {
                kind: kind.into(),
                reason: format!(
                    "the body's status `{:?}` is not the one `{kind}` announces",
                    event.body.status
                ),
            });
        }
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::ToolErrorCode;

    #[test]
    fn error_codes_read_as_on_the_wire() {
        use ToolErrorCode::*;
        for code in [
            UnknownTool,
            InvalidArguments,
            ExecutionFailed,
            Timeout,
            Unavailable,
            ConfirmationRequired,
            DeclinedByUser,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::json!(code.as_str())
            );
        }
    }

    #[test]
    fn a_job_event_must_carry_a_job_kind_and_the_status_it_announces() {
        use super::super::envelope::Envelope;
        let body = |status: &str| serde_json::json!({"job_id": "j", "tool": "t", "call_id": "c", "status": status});
        let raw = |kind: &str, status: &str| Envelope::new(kind, body(status));
        assert!(crate::JobEvent::from_envelope(raw("job.done", "done")).is_ok());
        assert!(crate::JobEvent::from_envelope(raw("job.bogus", "done")).is_err());
        assert!(crate::JobEvent::from_envelope(raw("job.done", "failed")).is_err());
    }
}

/// The `via` of a sync call whose backend deferred its work (an MCP server answered with a
/// task): the output is `{job_id, status: "submitted"}` and the turn waits for the job.
pub const DEFERRED_VIA: &str = "deferred";

/// Stop a job whose turn no longer waits for it (the turn was cancelled or failed), on
/// `hermes.jobs.cancel`. Work a tool deferred to a backend (an MCP server's task) is
/// cancelled there; other jobs run to their end.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobCancelRequest {
    pub job_id: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a [`JobCancelRequest`] did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobCancelReply {
    /// The backend was asked to stop the job's work.
    pub cancelled: bool,
    /// Why not, when not.
    #[serde(default)]
    pub note: Option<String>,
}
