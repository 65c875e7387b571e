//! The wire's JSON Schema, generated from the protocol's own types: one document per message
//! kind (the whole envelope, its `kind` fixed and its `body` typed) and an index by subject.
//!
//! `schema/` in the repository is this output (`hermes schema --out schema`); a test fails when
//! the types change and the committed files do not, so a client in another language can
//! validate what it sends and receives against files that match the engine.
//!
//! [`subjects`] holds the table of subjects and the index built from it.

mod subjects;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde_json::{json, Map, Value};

pub use subjects::{subjects, Pattern, SubjectEntry};

use super::envelope::{ErrorBody, ENVELOPE_VERSION, ERROR_KIND};
use super::kinds;
use super::request::{McpCatalogRequest, ToolsListRequest, ToolsMetricsRequest};
use super::{
    Accepted, AuditEntry, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, ExtractJob,
    JobCancelReply, JobCancelRequest, JobEvent, McpAuditReply, McpAuditRequest, McpCallReply,
    McpCallRequest, McpCatalog, McpPromptReply, McpPromptRequest, McpReadReply, McpReadRequest,
    McpTaskReply, McpTaskRequest, MemoryForgetRequest, MemoryListReply, MemoryListRequest,
    MemoryWriteReply, MemoryWriteRequest, PlanReply, PlanRequest, ProcessStatus, RecallReply,
    RecallRequest, SessionListReply, SessionListRequest, SessionSearchReply, SessionSearchRequest,
    SessionShowReply, SessionShowRequest, StatusRequest, SummariseReply, SummariseRequest,
    ToolCallRequest, ToolCallResult, ToolMetrics, ToolsCatalog, ToolsChanged, TurnEvent,
    TurnEvents, UserMessage,
};

/// The JSON Schema dialect of every document.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every kind, its body's schema and what it is.
fn bodies() -> Vec<(&'static str, &'static str, Value)> {
    fn of<T: JsonSchema>() -> Value {
        serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
    }
    vec![
        (
            kinds::USER_MESSAGE,
            "a user message or event for a session",
            of::<UserMessage>(),
        ),
        (
            kinds::ACCEPTED,
            "the session persisted a message",
            of::<Accepted>(),
        ),
        (
            kinds::CONFIRMATION,
            "approve or decline a waiting high-risk call",
            of::<Confirmation>(),
        ),
        (
            kinds::CONFIRMATION_ACCEPTED,
            "the decision is persisted",
            of::<ConfirmationAccepted>(),
        ),
        (
            kinds::CANCEL,
            "cancel the session's running turn",
            of::<Cancel>(),
        ),
        (
            kinds::CANCEL_ACCEPTED,
            "the cancellation is persisted",
            of::<CancelAccepted>(),
        ),
        (
            kinds::TURN_EVENT,
            "one event of a turn (`type` says which)",
            of::<TurnEvent>(),
        ),
        (
            kinds::TURN_EVENTS,
            "several events of one turn that left together, in order",
            of::<TurnEvents>(),
        ),
        (
            kinds::PLAN_REQUEST,
            "one planning step",
            of::<PlanRequest>(),
        ),
        (
            kinds::PLAN_REPLY,
            "the planner's tool calls or answer",
            of::<PlanReply>(),
        ),
        (
            kinds::SUMMARISE_REQUEST,
            "fold older turns into a summary",
            of::<SummariseRequest>(),
        ),
        (
            kinds::SUMMARISE_REPLY,
            "the summary",
            of::<SummariseReply>(),
        ),
        (
            kinds::SESSIONS_SEARCH,
            "search a user's past messages",
            of::<SessionSearchRequest>(),
        ),
        (
            kinds::SESSIONS_FOUND,
            "the messages found",
            of::<SessionSearchReply>(),
        ),
        (
            kinds::SESSIONS_LIST,
            "list stored sessions",
            of::<SessionListRequest>(),
        ),
        (
            kinds::SESSIONS_LISTED,
            "stored sessions, newest first",
            of::<SessionListReply>(),
        ),
        (
            kinds::SESSIONS_SHOW,
            "one stored session",
            of::<SessionShowRequest>(),
        ),
        (
            kinds::SESSIONS_SHOWN,
            "a session with its messages",
            of::<SessionShowReply>(),
        ),
        (
            kinds::TOOL_CALL,
            "execute one validated tool call",
            of::<ToolCallRequest>(),
        ),
        (
            kinds::TOOL_RESULT,
            "a tool call's result",
            of::<ToolCallResult>(),
        ),
        (
            kinds::TOOLS_LIST,
            "ask for the tool catalog",
            of::<ToolsListRequest>(),
        ),
        (
            kinds::TOOLS_CATALOG,
            "the tool catalog",
            of::<ToolsCatalog>(),
        ),
        (
            kinds::TOOLS_CHANGED,
            "the tool catalog changed",
            of::<ToolsChanged>(),
        ),
        (
            kinds::TOOLS_METRICS_REQUEST,
            "ask for the executor's counters",
            of::<ToolsMetricsRequest>(),
        ),
        (
            kinds::TOOLS_METRICS,
            "the executor's counters",
            of::<ToolMetrics>(),
        ),
        (
            kinds::JOB_SUBMITTED,
            "an async job was queued",
            of::<JobEvent>(),
        ),
        (
            kinds::JOB_PROGRESS,
            "an async job's progress",
            of::<JobEvent>(),
        ),
        (kinds::JOB_DONE, "an async job finished", of::<JobEvent>()),
        (kinds::JOB_FAILED, "an async job failed", of::<JobEvent>()),
        (
            kinds::MCP_CALL,
            "call a mounted MCP server's tool",
            of::<McpCallRequest>(),
        ),
        (
            kinds::MCP_RESULT,
            "the MCP call's result",
            of::<McpCallReply>(),
        ),
        (
            kinds::MCP_CATALOG_REQUEST,
            "ask for the mounted servers",
            of::<McpCatalogRequest>(),
        ),
        (
            kinds::MCP_CATALOG,
            "the mounted servers and their lists",
            of::<McpCatalog>(),
        ),
        (
            kinds::MCP_READ,
            "read a mounted server's resource",
            of::<McpReadRequest>(),
        ),
        (
            kinds::MCP_READ_RESULT,
            "the resource's contents",
            of::<McpReadReply>(),
        ),
        (
            kinds::MCP_PROMPT,
            "get a mounted server's prompt",
            of::<McpPromptRequest>(),
        ),
        (
            kinds::MCP_PROMPT_RESULT,
            "the prompt's messages",
            of::<McpPromptReply>(),
        ),
        (
            kinds::MCP_AUDIT_REQUEST,
            "the latest MCP audit records",
            of::<McpAuditRequest>(),
        ),
        (kinds::MCP_AUDIT, "MCP audit records", of::<McpAuditReply>()),
        (
            kinds::MCP_TASK,
            "follow or cancel a task a mounted server runs",
            of::<McpTaskRequest>(),
        ),
        (
            kinds::MCP_TASK_STATE,
            "the task's state as last seen",
            of::<McpTaskReply>(),
        ),
        (
            kinds::JOB_CANCEL,
            "stop a job whose turn no longer waits for it",
            of::<JobCancelRequest>(),
        ),
        (
            kinds::JOB_CANCEL_RESULT,
            "what the cancel did",
            of::<JobCancelReply>(),
        ),
        (kinds::AUDIT_EVENT, "one audit record", of::<AuditEntry>()),
        (
            kinds::RECALL_REQUEST,
            "recall a user's memories",
            of::<RecallRequest>(),
        ),
        (
            kinds::RECALL_REPLY,
            "the memories recalled",
            of::<RecallReply>(),
        ),
        (
            kinds::MEMORY_WRITE,
            "write memories for a user",
            of::<MemoryWriteRequest>(),
        ),
        (
            kinds::MEMORY_FORGET,
            "forget a user's memory",
            of::<MemoryForgetRequest>(),
        ),
        (
            kinds::MEMORY_WRITTEN,
            "what a write or forget changed",
            of::<MemoryWriteReply>(),
        ),
        (
            kinds::MEMORY_LIST,
            "list a user's memories",
            of::<MemoryListRequest>(),
        ),
        (
            kinds::MEMORY_LISTED,
            "a user's live memories",
            of::<MemoryListReply>(),
        ),
        (
            kinds::EXTRACT_JOB,
            "a finished turn to mine for memories",
            of::<ExtractJob>(),
        ),
        (
            kinds::STATUS_REQUEST,
            "ask every process for its status",
            of::<StatusRequest>(),
        ),
        (
            kinds::PROCESS_STATUS,
            "one process's status",
            of::<ProcessStatus>(),
        ),
        (
            ERROR_KIND,
            "a request failed: a code to branch on and a message",
            of::<ErrorBody>(),
        ),
    ]
}

/// The envelope around a body of `kind`, the body's definitions hoisted to the top.
fn envelope_document(kind: &str, what: &str, body: Value) -> Value {
    let Value::Object(mut body) = body else {
        return Value::Null;
    };
    body.remove("$schema");
    let defs = body.remove("$defs").unwrap_or_else(|| json!({}));
    let string = json!({"type": "string"});
    let mut document = Map::new();
    document.insert("$schema".into(), json!(DIALECT));
    document.insert("$id".into(), json!(file_name(kind)));
    document.insert("title".into(), json!(format!("Hermes `{kind}` envelope")));
    document.insert("description".into(), json!(format!("{what}.")));
    document.insert("type".into(), json!("object"));
    document.insert(
        "required".into(),
        json!(["v", "id", "kind", "ts", "trace_id", "body"]),
    );
    document.insert(
        "properties".into(),
        json!({
            "v": {"const": ENVELOPE_VERSION, "description": "the envelope version"},
            "id": {"type": "string", "description": "the envelope's own id (a UUID)"},
            "kind": {"const": kind},
            "ts": {"type": "string", "format": "date-time"},
            "trace_id": {"type": "string", "description": "one id for everything a request caused"},
            "agent": string,
            "session": string,
            "user": {"type": "string", "description": "whose data the message concerns"},
            "body": Value::Object(body),
        }),
    );
    document.insert("$defs".into(), defs);
    Value::Object(document)
}

/// The file a kind's document is written to (`user.message` → `user.message.json`).
pub fn file_name(kind: &str) -> String {
    format!("{kind}.json")
}

/// Every file of `schema/`: name → pretty JSON text (with a final newline).
pub fn files() -> BTreeMap<String, String> {
    let pretty = |value: &Value| {
        let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
        text.push('\n');
        text
    };
    let mut out: BTreeMap<String, String> = bodies()
        .into_iter()
        .map(|(kind, what, body)| {
            (
                file_name(kind),
                pretty(&envelope_document(kind, what, body)),
            )
        })
        .collect();
    out.insert("index.json".into(), pretty(&subjects::index()));
    out
}
