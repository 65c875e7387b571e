//! The bodies that travel in envelopes, one per subject, with their `kind` names.
//!
//! Requests and replies are paired: `hermes.plan` takes [`PlanRequest`] and answers
//! [`PlanReply`], and so on. [`TurnEvent`] is everything published on `hermes.out…`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{ChatMessage, ToolCall, ToolSpec, Usage};
use crate::memory::RecallHit;
use crate::tools::ToolError;

/// Envelope kinds.
pub mod kinds {
    pub const USER_MESSAGE: &str = "user.message";
    pub const ACCEPTED: &str = "accepted";
    pub const CONFIRMATION: &str = "user.confirmation";
    pub const CONFIRMATION_ACCEPTED: &str = "confirmation.accepted";
    pub const PLAN_REQUEST: &str = "plan.request";
    pub const PLAN_REPLY: &str = "plan.reply";
    pub const SUMMARISE_REQUEST: &str = "summarise.request";
    pub const SUMMARISE_REPLY: &str = "summarise.reply";
    pub const SESSIONS_SEARCH: &str = "sessions.search";
    pub const SESSIONS_FOUND: &str = "sessions.found";
    pub const TOOL_CALL: &str = "tool.call";
    pub const TOOL_RESULT: &str = "tool.result";
    pub const TOOLS_LIST: &str = "tools.list";
    pub const TOOLS_CATALOG: &str = "tools.catalog";
    pub const TOOLS_METRICS_REQUEST: &str = "tools.metrics.request";
    pub const TOOLS_METRICS: &str = "tools.metrics";
    pub const JOB_SUBMITTED: &str = "job.submitted";
    pub const JOB_PROGRESS: &str = "job.progress";
    pub const JOB_DONE: &str = "job.done";
    pub const JOB_FAILED: &str = "job.failed";
    pub const MCP_CALL: &str = "mcp.call";
    pub const MCP_RESULT: &str = "mcp.result";
    pub const MCP_CATALOG_REQUEST: &str = "mcp.catalog.request";
    pub const MCP_CATALOG: &str = "mcp.catalog";
    pub const RECALL_REQUEST: &str = "memory.recall";
    pub const RECALL_REPLY: &str = "memory.recalled";
    pub const EXTRACT_JOB: &str = "memory.extract";
    pub const MEMORY_WRITE: &str = "memory.write";
    pub const MEMORY_FORGET: &str = "memory.forget";
    pub const MEMORY_WRITTEN: &str = "memory.written";
    pub const MEMORY_LIST: &str = "memory.list";
    pub const MEMORY_LISTED: &str = "memory.listed";
    pub const MCP_READ: &str = "mcp.read";
    pub const MCP_READ_RESULT: &str = "mcp.read.result";
    pub const MCP_PROMPT: &str = "mcp.prompt";
    pub const MCP_PROMPT_RESULT: &str = "mcp.prompt.result";
    pub const MCP_AUDIT_REQUEST: &str = "mcp.audit.request";
    pub const MCP_AUDIT: &str = "mcp.audit";
    pub const AUDIT_EVENT: &str = "audit.event";
    pub const TURN_EVENT: &str = "turn.event";
}

/// A user message (or an external event phrased as one) for `hermes.in.<agent>.<session>`.
/// The user is the envelope's `user`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub text: String,
}

/// The reply to a request on `hermes.in…`: the message is persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub message_id: String,
    pub session: String,
    /// Position of the message in the session's log.
    pub seq: u64,
}

/// The user's answer to `confirmation.required`, sent like a message to
/// `hermes.in.<agent>.<session>` with kind `user.confirmation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// `true` runs the call, `false` declines it (the model is told the user said no).
    pub approve: bool,
    /// The call to decide; absent decides every call the turn waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// The reply to a `user.confirmation`: the decision is persisted and the turn resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationAccepted {
    pub turn_id: String,
    pub call_ids: Vec<String>,
    pub approve: bool,
}

/// One planning step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanRequest {
    pub turn_id: String,
    pub step: u32,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// Where to publish `delta` events while the model streams (the session's out subject).
    #[serde(default)]
    pub stream_to: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanReply {
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Option<Usage>,
    pub model: String,
}

/// Execute one call on `hermes.tool.<name>`. `user` is injected by the engine, never by the
/// model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// `builtin`, `mcp:<server>`, `worker`, or `idempotent-replay` (a recorded result).
    #[serde(default)]
    pub via: String,
    pub duration_ms: u64,
    /// Where the full output is kept (`raw-…`; read it with the `tool_raw_get` tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_reference: Option<String>,
}

/// The tool catalog served on `hermes.tools.list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolsCatalog {
    /// What the model sees, executor and worker tools alike.
    pub tools: Vec<ToolSpec>,
    /// The same tools with timeout, mode, effect, risk, scenes and source.
    #[serde(default)]
    pub definitions: Vec<crate::tools::definition::ToolDefinition>,
    /// The answering executor's counters.
    #[serde(default)]
    pub metrics: crate::tools::metrics::ToolMetrics,
}

/// One change of an async job, published on `hermes.job.<id>` with kind `job.submitted`,
/// `job.progress` (the work started or reported progress), `job.done` or `job.failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub status: crate::tools::jobs::JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<crate::tools::ProgressUpdate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

impl From<&crate::tools::jobs::JobRecord> for JobEvent {
    fn from(r: &crate::tools::jobs::JobRecord) -> Self {
        Self {
            job_id: r.job_id.clone(),
            tool: r.tool.clone(),
            call_id: r.call_id.clone(),
            agent: r.agent.clone(),
            session: r.session.clone(),
            user: r.user.clone(),
            turn_id: r.turn_id.clone(),
            status: r.status,
            progress: r.progress.clone(),
            result: r.result.clone(),
            error: r.error.clone(),
        }
    }
}

/// A call to a mounted MCP server's tool, on `hermes.mcp.call`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpCallRequest {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    /// Who the call is made for (the session's user or an MCP principal), for the audit.
    #[serde(default)]
    pub user: Option<String>,
}

/// Read a mounted server's resource, on `hermes.mcp.read`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpReadRequest {
    pub server: String,
    pub uri: String,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpReadReply {
    #[serde(default)]
    pub contents: Vec<crate::mcp::McpResourceContent>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Get one of a mounted server's prompts, on `hermes.mcp.prompt`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpPromptRequest {
    pub server: String,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpPromptReply {
    #[serde(default)]
    pub prompt: Option<crate::mcp::McpPromptResult>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Ask for the latest MCP audit records, on `hermes.mcp.audit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpAuditRequest {
    pub limit: usize,
}

/// Newest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpAuditReply {
    pub records: Vec<crate::mcp::audit::AuditRecord>,
}

/// A user's memories, or the one with `id`, on `hermes.memory.list` (read-only).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryListRequest {
    pub user: String,
    /// Only this namespace (all when none).
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemoryListReply {
    pub records: Vec<crate::memory::MemoryRecord>,
}

/// The bridge's answer: the server's result, or why there is none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpCallReply {
    #[serde(default)]
    pub result: Option<crate::mcp::McpToolResult>,
    #[serde(default)]
    pub error: Option<String>,
}

/// The mounted servers, on `hermes.mcp.catalog`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpCatalog {
    pub servers: Vec<McpServerStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    /// `ready`, `failed` (never connected; retrying) or `reconnecting` (was up, died).
    pub status: String,
    /// Why it is not ready (the last connection error or how it died).
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub tools: Vec<crate::mcp::McpTool>,
    #[serde(default)]
    pub timeout_secs: u64,
    #[serde(default)]
    pub resources: Vec<crate::mcp::McpResource>,
    #[serde(default)]
    pub prompts: Vec<crate::mcp::McpPrompt>,
    /// `stdio` or `http`.
    #[serde(default)]
    pub transport: String,
    /// The child's process id while a stdio server runs.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Successful connections after the first.
    #[serde(default)]
    pub reconnects: u32,
}

/// Ask memory for what it knows about the current message. Besides the user, recall can be
/// narrowed to a namespace and to kinds / topics (a record passes with any listed one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecallRequest {
    pub user: String,
    pub query: String,
    pub limit: usize,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub kinds: Vec<crate::memory::MemoryKind>,
    #[serde(default)]
    pub topics: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecallReply {
    pub hits: Vec<RecallHit>,
}

/// A finished turn to mine for memories (durable queue `hermes.memory.extract`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExtractJob {
    pub agent: String,
    pub session: String,
    pub user: String,
    pub turn_id: String,
    pub message_id: String,
    pub source_time: chrono::DateTime<chrono::Utc>,
    pub transcript: Vec<ChatMessage>,
}

/// A recalled memory as shown in the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecalledMemory {
    pub key: String,
    pub content: String,
    pub score: f64,
}

/// Everything published on `hermes.out.<agent>.<session>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnEvent {
    #[serde(rename = "turn.started")]
    TurnStarted { turn_id: String, message_id: String },
    #[serde(rename = "memory.recalled")]
    MemoryRecalled {
        turn_id: String,
        memories: Vec<RecalledMemory>,
    },
    #[serde(rename = "delta")]
    Delta { turn_id: String, text: String },
    #[serde(rename = "tool.call")]
    ToolCall {
        turn_id: String,
        call_id: String,
        name: String,
        arguments: Value,
    },
    #[serde(rename = "tool.result")]
    ToolResult {
        turn_id: String,
        result: ToolCallResult,
    },
    /// A `risk = high` call waits for the user: answer with a `user.confirmation`
    /// (`hermes send --confirm` / `--deny`). The turn is in `waiting_user` until then.
    #[serde(rename = "confirmation.required")]
    ConfirmationRequired {
        turn_id: String,
        call_id: String,
        name: String,
        arguments: Value,
        /// What will happen, for the person who decides.
        message: String,
    },
    /// An async tool's job runs; the turn is in `waiting_job` and continues by itself when
    /// the job's completion arrives on `hermes.job.<id>`.
    #[serde(rename = "job.waiting")]
    JobWaiting {
        turn_id: String,
        call_id: String,
        name: String,
        job_id: String,
    },
    #[serde(rename = "answer")]
    Answer { turn_id: String, text: String },
    #[serde(rename = "memory.written")]
    MemoryWritten {
        turn_id: String,
        changes: Vec<MemoryChange>,
    },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        turn_id: Option<String>,
        code: String,
        message: String,
    },
}

/// One memory write, as reported after extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryChange {
    pub op: String,
    pub key: String,
    #[serde(default)]
    pub content: String,
}

impl TurnEvent {
    /// The event's type name as it appears in the JSON (`turn.started`, `answer`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            TurnEvent::TurnStarted { .. } => "turn.started",
            TurnEvent::MemoryRecalled { .. } => "memory.recalled",
            TurnEvent::Delta { .. } => "delta",
            TurnEvent::ToolCall { .. } => "tool.call",
            TurnEvent::ToolResult { .. } => "tool.result",
            TurnEvent::ConfirmationRequired { .. } => "confirmation.required",
            TurnEvent::JobWaiting { .. } => "job.waiting",
            TurnEvent::Answer { .. } => "answer",
            TurnEvent::MemoryWritten { .. } => "memory.written",
            TurnEvent::Error { .. } => "error",
        }
    }
}

/// Write one memory for a user directly (the MCP server's `memory_write`, other agents), on
/// `hermes.memory.write`. Merged by the same rules as extracted memories.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryWriteRequest {
    pub user: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub update: crate::memory::MemoryUpdate,
    /// Who wrote it (session id, agent name or MCP principal), for the record's source.
    pub source: String,
}

/// Forget memories on `hermes.memory.forget`: by record id, or by key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryForgetRequest {
    pub user: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
}

/// The answer to a write or forget: what changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemoryWriteReply {
    pub changes: Vec<MemoryChange>,
}

fn default_namespace() -> String {
    crate::memory::DEFAULT_NAMESPACE.into()
}

/// Fold older turns into the running summary, on `hermes.summarise`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummariseRequest {
    /// The summary so far (empty at first).
    pub previous: String,
    /// The turns to fold in, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The pinned goal, so the summary keeps what matters for it.
    #[serde(default)]
    pub goal: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummariseReply {
    pub summary: String,
}

/// Search a user's past messages, on `hermes.sessions.search`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSearchRequest {
    pub user: String,
    pub query: String,
    #[serde(default = "default_search_limit")]
    pub limit: usize,
}

fn default_search_limit() -> usize {
    5
}

/// One message found by a session search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHit {
    pub agent: String,
    pub session: String,
    pub seq: u64,
    pub role: crate::llm::Role,
    pub ts: chrono::DateTime<chrono::Utc>,
    pub text: String,
    pub score: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionSearchReply {
    pub hits: Vec<SessionHit>,
}
