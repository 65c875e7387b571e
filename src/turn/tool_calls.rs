//! Running the model's tool calls from a turn: whitelist first, then a request on
//! `hermes.tool.<name>`, with every call and result published.

use std::time::Duration;

use serde_json::json;

use super::{Emitter, TurnEnv};
use crate::llm::ToolCall;
use crate::protocol::tool::tool_reply_wait;
use crate::protocol::{McpInputAnswers, ToolCallRequest, ToolCallResult, TurnEvent};
use crate::store::sessions::SessionMeta;
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode};
use crate::tools::suggest::closest_names;
use crate::tools::transform::{self, DEFAULT_DETAIL_CHARS};
use crate::tools::worker;
use crate::tools::{ToolError, ToolErrorCode};

/// What the user gave a call before it runs: a confirmation of a high-risk call, answers to
/// what the tool's MCP server asked at the call's previous round.
#[derive(Debug, Clone, Default)]
pub(super) struct UserGrant {
    pub confirmed: bool,
    pub input: Option<McpInputAnswers>,
}

pub(super) async fn execute(
    env: &TurnEnv,
    emitter: &Emitter,
    tools: &[ToolDefinition],
    meta: &SessionMeta,
    turn_id: &str,
    call: &ToolCall,
    grant: &UserGrant,
) -> ToolCallResult {
    emitter
        .emit(TurnEvent::ToolCall {
            turn_id: turn_id.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await;
    let result = match tools.iter().find(|t| t.name == call.name) {
        // Worker tools are validated here: the worker serves its subject directly.
        Some(def) if worker::is_worker(def) => {
            match worker::prepare_remote(def, call.arguments.clone()) {
                Ok(prepared) => {
                    let mut repaired = call.clone();
                    repaired.arguments = prepared.arguments;
                    let wait = tool_reply_wait(def.timeout());
                    let mut result =
                        dispatch(env, emitter, meta, turn_id, &repaired, grant, wait).await;
                    result.auto_corrected |= !prepared.corrections.is_empty();
                    result.corrections.extend(prepared.corrections);
                    result
                }
                Err(e) => failed(call, e),
            }
        }
        Some(def) => dispatch(env, emitter, meta, turn_id, call, grant, wait_for(env, def)).await,
        None => failed(call, unknown_tool(&call.name, tools)),
    };
    // A server's questions are announced as `confirmation.required` once they are stored.
    if super::questions::asked(&result).is_none() {
        emitter
            .emit(TurnEvent::ToolResult {
                turn_id: turn_id.to_string(),
                result: result.clone(),
            })
            .await;
    }
    result
}

/// How long the session waits for an executor tool's reply: its own timeout for a sync tool;
/// for an async one only the submission (the job's timeout runs in the executor), so a
/// submission lost with a dying executor is sent again in seconds, not after the job's
/// timeout.
fn wait_for(env: &TurnEnv, def: &ToolDefinition) -> Duration {
    match def.mode {
        ToolMode::Async => {
            tool_reply_wait(Duration::from_secs(env.config.engine.request_timeout_secs))
        }
        ToolMode::Sync => tool_reply_wait(def.timeout()),
    }
}

/// How long the session waits for a tool without a definition at hand (e.g. `job_status`).
pub(super) fn default_wait(env: &TurnEnv) -> Duration {
    tool_reply_wait(Duration::from_secs(env.config.tools.default_timeout_secs))
}

/// Send one call to its tool and wait up to `timeout` for its result (errors become results).
/// Callers pass the tool's own timeout plus a margin: the executor or worker reports its own
/// timeouts, and the session must not give up first.
pub(super) async fn dispatch(
    env: &TurnEnv,
    emitter: &Emitter,
    meta: &SessionMeta,
    turn_id: &str,
    call: &ToolCall,
    grant: &UserGrant,
    timeout: Duration,
) -> ToolCallResult {
    let request = ToolCallRequest {
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        user: Some(meta.user.clone()),
        turn_id: Some(turn_id.to_string()),
        session: Some(meta.session.clone()),
        confirmed: grant.confirmed,
        input: grant.input.clone(),
    };
    env.ports.call_tool(emitter.scope(), request, timeout).await
}

/// Can these calls run at the same time? Only when every one is a known `read` tool.
pub(super) fn all_reads(tools: &[ToolDefinition], calls: &[ToolCall]) -> bool {
    calls.len() > 1
        && calls.iter().all(|c| {
            tools
                .iter()
                .any(|t| t.name == c.name && t.effect == ToolEffect::Read)
        })
}

fn unknown_tool(name: &str, tools: &[ToolDefinition]) -> ToolError {
    let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let listed = if names.len() <= 15 {
        names.join(", ")
    } else {
        format!("{} (and {} more)", names[..15].join(", "), names.len() - 15)
    };
    ToolError::new(
        ToolErrorCode::UnknownTool,
        format!("no tool named `{name}`; available tools: {listed}"),
    )
    .with_hint("call one of the available tools, or answer without a tool")
    .with_details(closest_names(name, &names, 5))
}

fn failed(call: &ToolCall, error: ToolError) -> ToolCallResult {
    super::ports::failed(call.id.clone(), call.name.clone(), error)
}

/// A tool result as it enters the model's context (DESIGN §5):
/// `{tool_use_id, tool_name, status, summary ≤100 chars, detail (trimmed), raw_reference}`.
pub(super) fn content_for_model(result: &ToolCallResult) -> String {
    serde_json::to_string(&transform::transform(result, DEFAULT_DETAIL_CHARS))
        .unwrap_or_else(|e| json!({"status": "error", "summary": e.to_string()}).to_string())
}

/// Identifiers (order ids, tracking numbers, …) a result carries, for the key-facts region.
pub(super) fn key_facts(result: &ToolCallResult) -> Vec<String> {
    transform::extract_identifiers(&result.output)
        .into_iter()
        .map(|i| format!("{}={}", i.kind, i.value))
        .collect()
}
