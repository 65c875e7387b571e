//! Tools whose work happens elsewhere on the bus: an MCP server's tool, reached through the
//! MCP-bridge on `hermes.mcp.call`, and `mcp_read_resource`, which reads a mounted server's
//! resource on `hermes.mcp.read` (so a model can pull a resource into its context). The
//! tool-executor registers one proxy per mounted MCP tool, so MCP tools get the same whitelist,
//! validation and timeouts as built-ins. The session's user travels with each call (injected
//! `_user`, never from the model) for the MCP audit. Also `session_search`, answered by the
//! session service on `hermes.sessions.search`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::remote_task::Followed;
use super::{CallOutcome, Progress, Tool, ToolError, ToolErrorCode};
use crate::bus::rpc::{self, RpcError};
use crate::bus::{BusError, SharedBus};
use crate::llm::ToolSpec;
use crate::mcp::{McpFailure, McpInputAnswers, McpInputRequired, McpTool, McpToolHints};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{McpCallReply, McpCallRequest, McpReadRequest};
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolRisk};
use crate::tools::registry::{INPUT_ARG, USER_ARG};

/// The key of a job output that is an MCP task's questions for the user (see
/// [`asked_in_output`]), not a result.
pub const ASKED_OUTPUT: &str = "_mcp_input_required";

/// The questions a job's output carries instead of a result, if it does.
pub fn asked_in_output(output: &Value) -> Option<McpInputRequired> {
    let asked = output
        .as_object()
        .filter(|o| o.len() == 1)?
        .get(ASKED_OUTPUT)?;
    serde_json::from_value(asked.clone()).ok()
}

/// Separates server and tool in an MCP tool's Hermes name: `<server>__<tool>`.
pub const MCP_SEPARATOR: &str = "__";

/// An MCP server's tool as a Hermes tool.
pub struct McpProxyTool {
    spec: ToolSpec,
    server: String,
    tool: String,
    timeout: Duration,
    hints: McpToolHints,
    bus: SharedBus,
}

/// What an MCP tool's annotations say it does: `readOnlyHint` → `read`; else
/// `idempotentHint` → `idempotent`; else `write` (run once per idempotency key). An explicit
/// `destructiveHint` on a tool that is not read-only → `risk = high` (confirmed before it
/// runs). No annotations at all is the safe side: `write`, low risk. `[[tools.define]]`
/// overrides either.
pub fn effect_and_risk(hints: &McpToolHints) -> (ToolEffect, ToolRisk) {
    if hints.read_only == Some(true) {
        return (ToolEffect::Read, ToolRisk::Low);
    }
    let effect = if hints.idempotent == Some(true) {
        ToolEffect::Idempotent
    } else {
        ToolEffect::Write
    };
    let risk = if hints.destructive == Some(true) {
        ToolRisk::High
    } else {
        ToolRisk::Low
    };
    (effect, risk)
}

impl McpProxyTool {
    /// `None` when the combined name cannot be a subject token (the tool is then skipped).
    pub fn new(server: &str, tool: &McpTool, timeout: Duration, bus: SharedBus) -> Option<Self> {
        let name = format!("{server}{MCP_SEPARATOR}{}", tool.name);
        subjects::check_id("tool", &name).ok()?;
        let mut schema = tool.input_schema.clone();
        if !schema.is_object() {
            schema = serde_json::json!({"type": "object"});
        }
        declare_user(&mut schema);
        Some(Self {
            spec: ToolSpec {
                name,
                description: format!("[MCP server `{server}`] {}", tool.description),
                input_schema: schema,
            },
            server: server.to_string(),
            tool: tool.name.clone(),
            timeout,
            hints: tool.hints,
            bus,
        })
    }
}

#[async_trait]
impl Tool for McpProxyTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn definition(&self) -> ToolDefinition {
        let mut def = ToolDefinition::from_spec(self.spec(), self.timeout());
        (def.effect, def.risk) = effect_and_risk(&self.hints);
        def
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let reply = self.request(arguments, false).await?;
        self.output_of(reply)
    }

    async fn call_or_defer(&self, arguments: Value) -> Result<CallOutcome, ToolError> {
        let user = arguments
            .get(USER_ARG)
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut reply = self.request(arguments, true).await?;
        if let Some(asked) = reply.input_required.take() {
            return Ok(CallOutcome::InputRequired(asked));
        }
        match &reply.task {
            Some(task) => Ok(CallOutcome::Deferred(super::remote_task::handle(
                &self.server,
                user,
                task,
            ))),
            None => self.output_of(reply).map(CallOutcome::Done),
        }
    }

    async fn follow(&self, handle: Value, progress: Progress) -> Result<Value, ToolError> {
        match super::remote_task::follow(self.bus.as_ref(), handle, progress).await? {
            Followed::Done(result) => self.output_of(McpCallReply {
                result: Some(result),
                ..McpCallReply::default()
            }),
            // A job's output is all it has: the questions travel in it, under a key the turn
            // reads back as this call's questions.
            Followed::Asks(asked) => Ok(serde_json::json!({ ASKED_OUTPUT: asked })),
        }
    }

    async fn cancel_deferred(&self, handle: Value) -> Result<(), ToolError> {
        super::remote_task::cancel(self.bus.as_ref(), handle).await
    }
}

impl McpProxyTool {
    /// Send the call to the MCP-bridge; `accept_task`: a task (or the server's questions for
    /// the user) comes back as it is.
    async fn request(
        &self,
        mut arguments: Value,
        accept_task: bool,
    ) -> Result<McpCallReply, ToolError> {
        let input = take_input(&mut arguments)?;
        let user = take_user(&mut arguments);
        let request = Envelope::request(McpCallRequest {
            server: self.server.clone(),
            tool: self.tool.clone(),
            arguments,
            user,
            accept_task,
            input,
        });
        let reply = rpc::request(
            self.bus.as_ref(),
            request,
            self.timeout + Duration::from_secs(2),
        )
        .await
        .map_err(bridge_failure)?;
        Ok(reply.body)
    }

    /// The tool's output from the bridge's reply.
    fn output_of(&self, reply: McpCallReply) -> Result<Value, ToolError> {
        match (reply.result, reply.error) {
            (Some(r), _) if r.is_error => Err(ToolError::new(
                ToolErrorCode::ExecutionFailed,
                format!("MCP tool `{}` reported an error: {}", self.tool, r.text),
            )),
            (Some(r), _) => Ok(r.structured.unwrap_or_else(|| {
                serde_json::from_str::<Value>(&r.text)
                    .unwrap_or_else(|_| serde_json::json!({ "text": r.text }))
            })),
            (None, Some(e)) => Err(mcp_failure(reply.failure, e)),
            (None, None) => Err(ToolError::new(
                ToolErrorCode::Unavailable,
                "MCP bridge answered with neither a result nor an error",
            )),
        }
    }
}

/// The tool error of a call the MCP bridge never answered. Silence past the call's own
/// timeout means the bridge had the call and went away (or its answer was lost): the call
/// may have run. Any other failure is one of reaching the bridge at all.
fn bridge_failure(error: RpcError) -> ToolError {
    if matches!(error, RpcError::Bus(BusError::Timeout { .. })) {
        return ToolError::new(
            ToolErrorCode::OutcomeUnknown,
            format!("MCP bridge: {error}"),
        )
        .with_hint(
            "the MCP bridge took the call and never answered, so it may have taken effect: \
                 do not call it again, tell the user to check",
        );
    }
    ToolError::new(ToolErrorCode::Unavailable, format!("MCP bridge: {error}"))
        .with_hint("the MCP bridge is not reachable; tell the user the tool is unavailable")
}

/// The tool error of an MCP failure the bridge classified: the one place a kind becomes a
/// code and a hint for the model. A bridge that sent no kind (older than it) is read as the
/// server being unavailable, as it always was.
fn mcp_failure(failure: Option<McpFailure>, message: String) -> ToolError {
    let (code, hint) = match failure.unwrap_or(McpFailure::Unavailable) {
        McpFailure::InvalidArguments => (
            ToolErrorCode::InvalidArguments,
            "the MCP server refused these arguments: fix them as its message says and call \
             the tool again",
        ),
        McpFailure::Rejected => (
            ToolErrorCode::ExecutionFailed,
            "the MCP server refused the call: read its message, change the call if it says \
             how, else tell the user",
        ),
        McpFailure::Protocol => (
            ToolErrorCode::ExecutionFailed,
            "the MCP server answered something Hermes could not read: do not retry at once, \
             tell the user",
        ),
        McpFailure::Lost => (
            ToolErrorCode::OutcomeUnknown,
            "the MCP server went away during the call, which may have taken effect: do not \
             call it again, tell the user to check",
        ),
        McpFailure::Unreadable => (
            ToolErrorCode::OutcomeUnknown,
            "the MCP server took the call and answered something Hermes could not read; the \
             call may have taken effect: do not call it again, tell the user to check",
        ),
        McpFailure::Timeout => (
            ToolErrorCode::Timeout,
            "the MCP server did not answer in time: retry once later, or tell the user",
        ),
        McpFailure::NotMounted => (
            ToolErrorCode::InvalidArguments,
            "no MCP server of that name is mounted: use one the message lists",
        ),
        // `Unavailable`, and a kind of a newer bridge (the enum is the protocol crate's, open
        // to additions): the server is out of reach as far as this build can tell.
        _ => (
            ToolErrorCode::Unavailable,
            "the MCP server is down: do not retry at once, tell the user",
        ),
    };
    ToolError::new(code, message).with_hint(hint)
}

/// Declare the injected `_user` and `_input` in an object schema with properties (so the
/// registry fills them in and hides them from the model).
fn declare_user(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let properties = object
        .entry("properties")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(USER_ARG.to_owned(), serde_json::json!({"type": "string"}));
        properties.insert(INPUT_ARG.to_owned(), serde_json::json!({"type": "object"}));
    }
}

/// Take out the injected answers to the server's questions of the call's previous round.
fn take_input(arguments: &mut Value) -> Result<Option<McpInputAnswers>, ToolError> {
    let Some(input) = arguments.as_object_mut().and_then(|o| o.remove(INPUT_ARG)) else {
        return Ok(None);
    };
    serde_json::from_value(input).map(Some).map_err(|e| {
        ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("the answers to the MCP server's questions are malformed: {e}"),
        )
    })
}

/// Remove every injected (`_`) key and return the user, if one was injected.
fn take_user(arguments: &mut Value) -> Option<String> {
    let object = arguments.as_object_mut()?;
    let user = object
        .get(USER_ARG)
        .and_then(Value::as_str)
        .map(str::to_owned);
    object.retain(|k, _| !k.starts_with('_'));
    user
}

/// The name of the built-in tool that reads a mounted MCP server's resource.
pub const READ_RESOURCE_TOOL: &str = "mcp_read_resource";

/// `mcp_read_resource {server, uri}`: a mounted server's resource, through the MCP-bridge.
pub struct McpReadResourceTool {
    timeout: Duration,
    bus: SharedBus,
}

impl McpReadResourceTool {
    pub fn new(timeout: Duration, bus: SharedBus) -> Self {
        Self { timeout, bus }
    }
}

#[async_trait]
impl Tool for McpReadResourceTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: READ_RESOURCE_TOOL.to_owned(),
            description: "Read a resource (a file, document or record) that a mounted MCP server \
                offers, to bring its content into the conversation. `server` is the MCP server's \
                name (the prefix of its tools, before `__`), `uri` the resource URI it lists \
                (e.g. `file:///notes/todo.md`). Returns {contents: [{uri, mime_type, text}]}; \
                binary content is summarised by size. Fails with the reason when the server or \
                resource does not exist or the server is down. Do not use it for tools."
                .to_owned(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "MCP server name"},
                    "uri": {"type": "string", "description": "resource URI"},
                    USER_ARG: {"type": "string"}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn call(&self, mut arguments: Value) -> Result<Value, ToolError> {
        let user = take_user(&mut arguments);
        let field = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let request = Envelope::request(McpReadRequest {
            server: field("server"),
            uri: field("uri"),
            user,
        });
        let reply = rpc::request(
            self.bus.as_ref(),
            request,
            self.timeout + Duration::from_secs(2),
        )
        .await
        .map_err(|e| {
            ToolError::new(ToolErrorCode::Unavailable, format!("MCP bridge: {e}")).with_hint(
                "the MCP bridge is not reachable; tell the user the resource is unavailable",
            )
        })?;
        match reply.body.error {
            Some(error) => Err(mcp_failure(reply.body.failure, error)),
            None => Ok(serde_json::json!({ "contents": reply.body.contents })),
        }
    }
}

/// `session_search`: the user's past conversations, searched by the session service over
/// `hermes.sessions.search` (the session layer owns the messages).
pub struct SessionSearchTool {
    /// `None` when the registry is built only to list or lint definitions.
    bus: Option<SharedBus>,
}

impl SessionSearchTool {
    pub const NAME: &'static str = "session_search";

    pub fn new(bus: Option<SharedBus>) -> Self {
        Self { bus }
    }
}

#[async_trait]
impl Tool for SessionSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: "Search the user's earlier conversations (all sessions, full history, \
                Chinese or English). Use it when the user refers to something said before that \
                is not in the current context. Do not use it for facts about the world. \
                Parameters: query (keywords), limit (1-10, default 5). Returns {hits: [{session, \
                role, ts, text, score}]} best first; an empty list when nothing matches. \
                Errors: unavailable when the session service does not answer (tell the user \
                instead of retrying)."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "keywords to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10, "description": "most hits, default 5"},
                    "_user": {"type": "string"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        use crate::protocol::SessionSearchRequest;
        let user = arguments
            .get("_user")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ToolError::new(ToolErrorCode::ExecutionFailed, "no user to search for")
            })?;
        let request = Envelope::request(SessionSearchRequest {
            user: user.to_string(),
            query: arguments["query"].as_str().unwrap_or_default().to_string(),
            limit: arguments.get("limit").and_then(Value::as_u64).unwrap_or(5) as usize,
        });
        let bus = self.bus.as_ref().ok_or_else(|| {
            ToolError::new(ToolErrorCode::Unavailable, "session search has no bus here")
        })?;
        let reply = rpc::request(bus.as_ref(), request, Duration::from_secs(10))
            .await
            .map_err(|e| {
                ToolError::new(ToolErrorCode::Unavailable, format!("session search: {e}"))
            })?;
        Ok(serde_json::json!({ "hits": reply.body.hits }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn injected_user_is_taken_out_and_other_private_keys_dropped() {
        let mut arguments = json!({"a": 1, "_user": "alice", "_other": true});
        assert_eq!(take_user(&mut arguments).as_deref(), Some("alice"));
        assert_eq!(arguments, json!({"a": 1}));
        let mut none = json!({"a": 1});
        assert_eq!(take_user(&mut none), None);
    }

    #[test]
    fn mcp_annotations_decide_effect_and_risk_and_silence_means_write() {
        let hints = |read_only, idempotent, destructive| McpToolHints {
            read_only,
            idempotent,
            destructive,
        };
        let cases = [
            (
                hints(Some(true), None, Some(true)),
                ToolEffect::Read,
                ToolRisk::Low,
            ),
            (
                hints(None, Some(true), None),
                ToolEffect::Idempotent,
                ToolRisk::Low,
            ),
            (
                hints(Some(false), Some(false), Some(true)),
                ToolEffect::Write,
                ToolRisk::High,
            ),
            (
                hints(None, Some(true), Some(true)),
                ToolEffect::Idempotent,
                ToolRisk::High,
            ),
            (McpToolHints::default(), ToolEffect::Write, ToolRisk::Low),
        ];
        for (given, effect, risk) in cases {
            assert_eq!(effect_and_risk(&given), (effect, risk), "{given:?}");
        }
    }

    #[test]
    fn a_bridge_silent_past_the_calls_timeout_may_have_run_it_and_an_absent_one_did_not() {
        let silent = bridge_failure(RpcError::Bus(BusError::Timeout {
            subject: "hermes.mcp.call".into(),
            after: Duration::from_secs(32),
        }));
        assert_eq!(silent.code, ToolErrorCode::OutcomeUnknown);
        assert!(silent
            .hint
            .unwrap_or_default()
            .contains("do not call it again"));
        let absent = bridge_failure(RpcError::Bus(BusError::NoResponders {
            subject: "hermes.mcp.call".into(),
        }));
        assert_eq!(absent.code, ToolErrorCode::Unavailable);
    }

    #[test]
    fn refused_arguments_tell_the_model_to_fix_the_call_and_only_a_down_server_is_unavailable() {
        let refused = mcp_failure(Some(McpFailure::InvalidArguments), "bad `date`".into());
        assert_eq!(refused.code, ToolErrorCode::InvalidArguments);
        assert_eq!(refused.message, "bad `date`");
        assert!(refused
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("fix them"));
        let cases = [
            (Some(McpFailure::Rejected), ToolErrorCode::ExecutionFailed),
            (Some(McpFailure::Protocol), ToolErrorCode::ExecutionFailed),
            (Some(McpFailure::Lost), ToolErrorCode::OutcomeUnknown),
            (Some(McpFailure::Unreadable), ToolErrorCode::OutcomeUnknown),
            (Some(McpFailure::Timeout), ToolErrorCode::Timeout),
            (
                Some(McpFailure::NotMounted),
                ToolErrorCode::InvalidArguments,
            ),
            (Some(McpFailure::Unavailable), ToolErrorCode::Unavailable),
            (None, ToolErrorCode::Unavailable),
        ];
        for (failure, code) in cases {
            assert_eq!(mcp_failure(failure, "m".into()).code, code, "{failure:?}");
        }
    }

    #[test]
    fn proxy_schema_declares_the_injected_user() {
        let mut schema = json!({"type": "object"});
        declare_user(&mut schema);
        assert_eq!(schema["properties"]["_user"], json!({"type": "string"}));
    }
}
