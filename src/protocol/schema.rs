//! The wire's JSON Schema, generated from the protocol's own types: one document per message
//! kind (the whole envelope, its `kind` fixed and its `body` typed) and an index by subject.
//!
//! `schema/` in the repository is this output (`hermes schema --out schema`); a test fails when
//! the types change and the committed files do not, so a client in another language can
//! validate what it sends and receives against files that match the engine.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use super::envelope::{ErrorBody, ENVELOPE_VERSION, ERROR_KIND};
use super::request::{McpCatalogRequest, ToolsListRequest, ToolsMetricsRequest};
use super::{kinds, subjects};
use super::{
    Accepted, AuditEntry, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, ExtractJob,
    JobEvent, McpAuditReply, McpAuditRequest, McpCallReply, McpCallRequest, McpCatalog,
    McpPromptReply, McpPromptRequest, McpReadReply, McpReadRequest, MemoryForgetRequest,
    MemoryListReply, MemoryListRequest, MemoryWriteReply, MemoryWriteRequest, PlanReply,
    PlanRequest, ProcessStatus, RecallReply, RecallRequest, SessionListReply, SessionListRequest,
    SessionSearchReply, SessionSearchRequest, SessionShowReply, SessionShowRequest, StatusRequest,
    SummariseReply, SummariseRequest, ToolCallRequest, ToolCallResult, ToolMetrics, ToolsCatalog,
    ToolsChanged, TurnEvent, UserMessage,
};

/// The JSON Schema dialect of every document.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// How a subject is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// A request answered on its reply subject.
    RequestReply,
    /// Published; whoever subscribes receives it.
    Publish,
    /// A durable queue (a JetStream stream on NATS).
    Queue,
}

impl Pattern {
    fn as_str(self) -> &'static str {
        match self {
            Self::RequestReply => "request/reply",
            Self::Publish => "publish",
            Self::Queue => "durable queue",
        }
    }
}

/// One subject (a pattern with `<placeholders>`) and the kinds that travel on it.
#[derive(Debug, Clone)]
pub struct SubjectEntry {
    pub subject: String,
    pub pattern: Pattern,
    /// Kinds sent to the subject.
    pub sends: Vec<&'static str>,
    /// Kinds that answer them (every request may also be answered by `error`).
    pub replies: Vec<&'static str>,
}

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

/// Every subject and the kinds on it.
pub fn subjects() -> Vec<SubjectEntry> {
    use Pattern::*;
    let entry =
        |subject: &str, pattern, sends: &[&'static str], replies: &[&'static str]| SubjectEntry {
            subject: subject.to_string(),
            pattern,
            sends: sends.to_vec(),
            replies: replies.to_vec(),
        };
    vec![
        entry(
            "hermes.in.<agent>.<session>[.<publisher>]",
            RequestReply,
            &[kinds::USER_MESSAGE, kinds::CONFIRMATION, kinds::CANCEL],
            &[
                kinds::ACCEPTED,
                kinds::CONFIRMATION_ACCEPTED,
                kinds::CANCEL_ACCEPTED,
            ],
        ),
        entry(
            "hermes.out.<agent>.<session>",
            Publish,
            &[kinds::TURN_EVENT],
            &[],
        ),
        entry(
            subjects::PLAN,
            RequestReply,
            &[kinds::PLAN_REQUEST],
            &[kinds::PLAN_REPLY],
        ),
        entry(
            subjects::SUMMARISE,
            RequestReply,
            &[kinds::SUMMARISE_REQUEST],
            &[kinds::SUMMARISE_REPLY],
        ),
        entry(
            subjects::SESSIONS_SEARCH,
            RequestReply,
            &[kinds::SESSIONS_SEARCH],
            &[kinds::SESSIONS_FOUND],
        ),
        entry(
            subjects::SESSIONS_LIST,
            RequestReply,
            &[kinds::SESSIONS_LIST],
            &[kinds::SESSIONS_LISTED],
        ),
        entry(
            subjects::SESSIONS_SHOW,
            RequestReply,
            &[kinds::SESSIONS_SHOW],
            &[kinds::SESSIONS_SHOWN],
        ),
        entry(
            "hermes.tool.<name>",
            RequestReply,
            &[kinds::TOOL_CALL],
            &[kinds::TOOL_RESULT],
        ),
        entry(
            subjects::TOOLS_LIST,
            RequestReply,
            &[kinds::TOOLS_LIST],
            &[kinds::TOOLS_CATALOG],
        ),
        entry(
            subjects::TOOLS_METRICS,
            RequestReply,
            &[kinds::TOOLS_METRICS_REQUEST],
            &[kinds::TOOLS_METRICS],
        ),
        entry(
            subjects::TOOLS_CHANGED,
            Publish,
            &[kinds::TOOLS_CHANGED],
            &[],
        ),
        entry(
            "hermes.job.<id>",
            Publish,
            &[
                kinds::JOB_SUBMITTED,
                kinds::JOB_PROGRESS,
                kinds::JOB_DONE,
                kinds::JOB_FAILED,
            ],
            &[],
        ),
        entry(
            subjects::MCP_CALL,
            RequestReply,
            &[kinds::MCP_CALL],
            &[kinds::MCP_RESULT],
        ),
        entry(
            subjects::MCP_CATALOG,
            RequestReply,
            &[kinds::MCP_CATALOG_REQUEST],
            &[kinds::MCP_CATALOG],
        ),
        entry(
            subjects::MCP_READ,
            RequestReply,
            &[kinds::MCP_READ],
            &[kinds::MCP_READ_RESULT],
        ),
        entry(
            subjects::MCP_PROMPT,
            RequestReply,
            &[kinds::MCP_PROMPT],
            &[kinds::MCP_PROMPT_RESULT],
        ),
        entry(
            subjects::MCP_AUDIT,
            RequestReply,
            &[kinds::MCP_AUDIT_REQUEST],
            &[kinds::MCP_AUDIT],
        ),
        entry(subjects::MCP_CHANGED, Publish, &[kinds::MCP_CATALOG], &[]),
        entry(
            subjects::MEMORY_RECALL,
            RequestReply,
            &[kinds::RECALL_REQUEST],
            &[kinds::RECALL_REPLY],
        ),
        entry(
            subjects::MEMORY_WRITE,
            RequestReply,
            &[kinds::MEMORY_WRITE],
            &[kinds::MEMORY_WRITTEN],
        ),
        entry(
            subjects::MEMORY_FORGET,
            RequestReply,
            &[kinds::MEMORY_FORGET],
            &[kinds::MEMORY_WRITTEN],
        ),
        entry(
            subjects::MEMORY_LIST,
            RequestReply,
            &[kinds::MEMORY_LIST],
            &[kinds::MEMORY_LISTED],
        ),
        entry(subjects::MEMORY_EXTRACT, Queue, &[kinds::EXTRACT_JOB], &[]),
        entry("hermes.audit.<kind>", Publish, &[kinds::AUDIT_EVENT], &[]),
        entry(
            subjects::STATUS,
            Publish,
            &[kinds::STATUS_REQUEST],
            &[kinds::PROCESS_STATUS],
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

/// The index: every subject, how it is used and the kinds on it, with their files.
fn index() -> Value {
    let entries: Vec<Value> = subjects()
        .into_iter()
        .map(|entry| {
            let files =
                |kinds: &[&str]| -> Vec<String> { kinds.iter().map(|k| file_name(k)).collect() };
            let mut replies = files(&entry.replies);
            if entry.pattern == Pattern::RequestReply {
                replies.push(file_name(ERROR_KIND));
            }
            json!({
                "subject": entry.subject,
                "pattern": entry.pattern.as_str(),
                "sends": files(&entry.sends),
                "replies": replies,
            })
        })
        .collect();
    json!({
        "title": "Hermes wire: subjects and the envelope kinds on them",
        "envelope_version": ENVELOPE_VERSION,
        "id_rule": format!(
            "a subject token (<agent>, <session>, <publisher>, <name>, <id>) is 1–{} characters \
             of A–Z a–z 0–9 _ -",
            subjects::MAX_ID_LEN
        ),
        "subjects": entries,
    })
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
    out.insert("index.json".into(), pretty(&index()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(kind: &str) -> Value {
        let text = &files()[&file_name(kind)];
        serde_json::from_str(text).unwrap()
    }

    fn validates(kind: &str, instance: &Value) -> Result<(), String> {
        let schema = document(kind);
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        validator.validate(instance).map_err(|e| e.to_string())
    }

    #[test]
    fn every_kind_of_the_index_has_its_document() {
        let all = files();
        for entry in subjects() {
            for kind in entry.sends.iter().chain(&entry.replies) {
                assert!(all.contains_key(&file_name(kind)), "{kind} has no document");
            }
        }
        assert!(all.contains_key("index.json"));
    }

    #[test]
    fn a_real_user_message_envelope_validates_and_a_wrong_one_does_not() {
        let envelope = crate::protocol::envelope::Envelope::request(UserMessage::text("hi"))
            .for_session("assistant", "s1", Some("u-1"));
        let value = serde_json::to_value(&envelope).unwrap();
        validates(kinds::USER_MESSAGE, &value).unwrap();
        let mut wrong = value.clone();
        wrong["body"]["text"] = json!(42);
        assert!(validates(kinds::USER_MESSAGE, &wrong).is_err());
        let mut other_kind = value;
        other_kind["kind"] = json!("user.cancel");
        assert!(validates(kinds::USER_MESSAGE, &other_kind).is_err());
    }

    #[test]
    fn turn_events_of_every_type_validate() {
        let events = [
            TurnEvent::Answer {
                turn_id: "t".into(),
                text: "done".into(),
            },
            TurnEvent::Delta {
                turn_id: "t".into(),
                text: "do".into(),
            },
            TurnEvent::TurnStarted {
                turn_id: "t".into(),
                message_id: "m".into(),
            },
        ];
        for event in events {
            let envelope = crate::protocol::envelope::Envelope::event(event);
            let value = serde_json::to_value(&envelope).unwrap();
            validates(kinds::TURN_EVENT, &value).unwrap();
        }
    }

    /// `schema/` holds exactly what the types generate; `HERMES_UPDATE_SCHEMA=1` rewrites it.
    #[test]
    fn the_committed_schema_matches_the_protocol_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
        let generated = files();
        if std::env::var_os("HERMES_UPDATE_SCHEMA").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "json") {
                    std::fs::remove_file(path).unwrap();
                }
            }
            for (name, text) in &generated {
                std::fs::write(dir.join(name), text).unwrap();
            }
        }
        let mut committed = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).expect("schema/ exists (HERMES_UPDATE_SCHEMA=1)") {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                committed.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&committed),
            names(&generated),
            "schema/ lists other files than the types generate; run \
             HERMES_UPDATE_SCHEMA=1 cargo test --lib protocol::schema"
        );
        for (name, text) in &generated {
            assert!(
                committed[name] == *text,
                "schema/{name} is out of date with the protocol types; run \
                 HERMES_UPDATE_SCHEMA=1 cargo test --lib protocol::schema and commit schema/"
            );
        }
    }
}
