//! MCP on the wire: what mounted servers offer (tools, resources, prompts), calls to them
//! through the MCP-bridge and their results, the bridge's catalog, and audit entries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool a server offers, as the server describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// What the server says the tool does to the world (MCP `annotations`).
    #[serde(default)]
    pub hints: McpToolHints,
}

/// The behaviour hints of an MCP tool's `annotations`; `None` where the server said nothing.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct McpToolHints {
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub idempotent: Option<bool>,
    #[serde(default)]
    pub destructive: Option<bool>,
}

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpToolResult {
    /// The server flagged the result as an error (`isError`).
    pub is_error: bool,
    /// Text content blocks joined by newlines.
    pub text: String,
    /// `structuredContent`, when the server sent it.
    #[serde(default)]
    pub structured: Option<Value>,
}

/// A resource a server offers (`resources/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpResource {
    pub uri: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// One block of a `resources/read` result: text as is, binary summarised by its size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpResourceContent {
    pub uri: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    /// The text, or a bracketed summary of a binary blob (`[blob image/png 120 bytes]`).
    pub text: String,
}

/// A prompt template a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPrompt {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPromptArgument {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
}

/// The messages of a `prompts/get` result, each as role + text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPromptResult {
    #[serde(default)]
    pub description: Option<String>,
    pub messages: Vec<McpPromptMessage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
}

/// A call to a mounted MCP server's tool, on `hermes.mcp.call`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpCallRequest {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    /// Who the call is made for (the session's user or an MCP principal), for the audit.
    #[serde(default)]
    pub user: Option<String>,
    /// The caller can wait for a task: when the server answers with one, the reply carries
    /// it in [`McpCallReply::task`] at once. Otherwise the bridge follows the task itself
    /// and replies with its final result.
    #[serde(default)]
    pub accept_task: bool,
    /// The user's answers to the questions the server asked at the previous round of this
    /// call (`input_required`); the bridge sends them back with the server's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<McpInputAnswers>,
}

/// A server asked for the user's input before it completes a call (a 2026-07-28
/// `input_required` result, SEP-2322): the questions to put to the user, and the server's
/// result as it was sent, which goes back unchanged with the answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpInputRequired {
    /// The questions, in the server's order.
    pub questions: Vec<McpQuestion>,
    /// The server's `input_required` result as received (opaque to everyone but the bridge).
    pub asked: Value,
}

impl McpInputRequired {
    /// The questions' messages, one per line, for the person who answers.
    pub fn message(&self) -> String {
        let lines: Vec<&str> = self.questions.iter().map(|q| q.message.as_str()).collect();
        lines.join("\n")
    }
}

/// One question of an [`McpInputRequired`]: a form (its answer must match `schema`) or a URL
/// the user visits (`url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpQuestion {
    /// The server's key for the answer.
    pub key: String,
    pub message: String,
    /// The JSON Schema of a form's answer (an object of flat properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// The page a URL question sends the user to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The user's answers to an [`McpInputRequired`], for the next round of the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpInputAnswers {
    /// [`McpInputRequired::asked`], unchanged.
    pub asked: Value,
    /// Per question key; a question without an answer is cancelled.
    pub answers: std::collections::BTreeMap<String, McpAnswer>,
}

/// The user's answer to one [`McpQuestion`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum McpAnswer {
    /// Accepted, with the form's content (`{}` for a URL question).
    Accept {
        content: Value,
    },
    Decline,
    Cancel,
}

/// Read a mounted server's resource, on `hermes.mcp.read`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpReadRequest {
    pub server: String,
    pub uri: String,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpReadReply {
    #[serde(default)]
    pub contents: Vec<McpResourceContent>,
    #[serde(default)]
    pub error: Option<String>,
    /// The kind of `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<McpFailure>,
}

/// Get one of a mounted server's prompts, on `hermes.mcp.prompt`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPromptRequest {
    pub server: String,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpPromptReply {
    #[serde(default)]
    pub prompt: Option<McpPromptResult>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Ask for the latest MCP audit records, on `hermes.mcp.audit`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpAuditRequest {
    pub limit: usize,
}

/// Newest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpAuditReply {
    pub records: Vec<AuditEntry>,
}

/// The bridge's answer: the server's result, or why there is none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpCallReply {
    #[serde(default)]
    pub result: Option<McpToolResult>,
    #[serde(default)]
    pub error: Option<String>,
    /// The kind of `error` (absent from a bridge older than it: read as unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<McpFailure>,
    /// The server answered with a task (MCP tasks extension) that is still running; only
    /// for a request with `accept_task`.
    #[serde(default)]
    pub task: Option<McpTaskState>,
    /// The server asks the user first (only for a request with `accept_task`: other callers
    /// get an error saying nobody can answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_required: Option<McpInputRequired>,
}

/// What kind of failure an MCP operation ended in, classified once by the bridge (from the
/// client's error) so the tool result tells the model what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum McpFailure {
    /// The server refused the arguments (JSON-RPC `-32602`): the caller fixes its call.
    InvalidArguments,
    /// The server answered with another JSON-RPC error.
    Rejected,
    /// The server's answer broke the protocol.
    Protocol,
    /// The server did not answer in time.
    Timeout,
    /// The server is down, exited or could not be started.
    Unavailable,
    /// No server of that name is mounted.
    NotMounted,
    /// The server went away while a `tools/call` was in flight: the call may have taken
    /// effect before it did, so it is not run again on the same idempotency key.
    Lost,
    /// The server took the request and answered with something that could not be read (a
    /// result of the wrong shape, a task completed without one): a `tools/call` may have
    /// taken effect, so it is not run again on the same idempotency key.
    Unreadable,
}

/// Where an MCP task (extension `io.modelcontextprotocol/tasks`) stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpTaskState {
    pub task_id: String,
    pub status: McpTaskStatus,
    /// The server's `statusMessage`.
    #[serde(default)]
    pub message: Option<String>,
    /// How often the server wants to be asked (`pollIntervalMs`).
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
    /// The final `tools/call` result of a `completed` task.
    #[serde(default)]
    pub result: Option<McpToolResult>,
    /// Why a `failed` task failed.
    #[serde(default)]
    pub error: Option<String>,
    /// What an `input_required` task asks the user (answered with `tasks/update`: the call is
    /// made again with the answers, whose `asked` names the task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_required: Option<McpInputRequired>,
}

/// A task's lifecycle status, as the extension names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpTaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl McpTaskStatus {
    /// `completed`, `failed` or `cancelled`: the task will not change again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Follow or cancel a task a mounted server runs, on `hermes.mcp.task`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpTaskRequest {
    pub server: String,
    pub task_id: String,
    /// `true`: ask the server to cancel it (`tasks/cancel`), then report its state.
    #[serde(default)]
    pub cancel: bool,
    /// Follow the task until it ends or this many milliseconds pass, then report its state.
    #[serde(default)]
    pub wait_ms: u64,
    /// Who the task runs for, for the audit.
    #[serde(default)]
    pub user: Option<String>,
}

/// The task's state as last seen, or why it could not be seen.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpTaskReply {
    #[serde(default)]
    pub state: Option<McpTaskState>,
    #[serde(default)]
    pub error: Option<String>,
}

/// The mounted servers, on `hermes.mcp.catalog`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpCatalog {
    pub servers: Vec<McpServerStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerStatus {
    pub name: String,
    /// `ready`, `failed` (never connected; retrying) or `reconnecting` (was up, died).
    pub status: String,
    /// Why it is not ready (the last connection error or how it died).
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub tools: Vec<McpTool>,
    #[serde(default)]
    pub timeout_secs: u64,
    #[serde(default)]
    pub resources: Vec<McpResource>,
    #[serde(default)]
    pub prompts: Vec<McpPrompt>,
    /// `stdio` or `http`.
    #[serde(default)]
    pub transport: String,
    /// The child's process id while a stdio server runs.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Successful connections after the first.
    #[serde(default)]
    pub reconnects: u32,
    /// The MCP revision agreed with the server (`2026-07-28`, `2025-11-25`, …) while connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The extensions the server declared (`io.modelcontextprotocol/tasks`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// One audited MCP operation, as `hermes.mcp.audit` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
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
