//! The subjects of the wire and the envelope kinds on each: the table behind `index.json`.

use serde_json::{json, Value};

use super::file_name;
use crate::envelope::{ENVELOPE_VERSION, ERROR_KIND};
use crate::{kinds, subjects};

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
            "hermes.out.<agent>.<session>.<reader>",
            Publish,
            &[kinds::TURN_EVENT, kinds::TURN_EVENTS],
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
        entry(
            subjects::MCP_TASK,
            RequestReply,
            &[kinds::MCP_TASK],
            &[kinds::MCP_TASK_STATE],
        ),
        entry(subjects::MCP_CHANGED, Publish, &[kinds::MCP_CATALOG], &[]),
        entry(
            subjects::JOBS_CANCEL,
            RequestReply,
            &[kinds::JOB_CANCEL],
            &[kinds::JOB_CANCEL_RESULT],
        ),
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

/// The index: every subject, how it is used and the kinds on it, with their files.
pub(super) fn index() -> Value {
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
