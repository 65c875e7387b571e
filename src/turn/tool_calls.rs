//! Running the model's tool calls from a turn: whitelist first, then a request on
//! `hermes.tool.<name>`, with every call and result published.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Emitter, TurnEnv};
use crate::bus::messages::{kinds, ToolCallRequest, ToolCallResult, ToolStatus, TurnEvent};
use crate::bus::{rpc, subjects, BusError};
use crate::envelope::Envelope;
use crate::llm::{ToolCall, ToolSpec};
use crate::store::sessions::SessionMeta;
use crate::tools::registry::closest_names;
use crate::tools::{ToolError, ToolErrorCode};

/// Extra time the session waits beyond the tool's own timeout (the executor reports timeouts).
const REPLY_MARGIN: Duration = Duration::from_secs(5);

pub(super) async fn execute(
    env: &TurnEnv,
    emitter: &Emitter,
    tools: &[ToolSpec],
    meta: &SessionMeta,
    turn_id: &str,
    call: &ToolCall,
) -> ToolCallResult {
    emitter
        .emit(TurnEvent::ToolCall {
            turn_id: turn_id.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await;
    let result = if tools.iter().any(|t| t.name == call.name) {
        dispatch(env, meta, turn_id, call).await
    } else {
        failed(call, unknown_tool(&call.name, tools))
    };
    emitter
        .emit(TurnEvent::ToolResult {
            turn_id: turn_id.to_string(),
            result: result.clone(),
        })
        .await;
    result
}

async fn dispatch(
    env: &TurnEnv,
    meta: &SessionMeta,
    turn_id: &str,
    call: &ToolCall,
) -> ToolCallResult {
    let subject = match subjects::tool(&call.name) {
        Ok(s) => s,
        Err(e) => {
            return failed(
                call,
                ToolError::new(ToolErrorCode::UnknownTool, e.to_string()),
            )
        }
    };
    let request = Envelope::new(
        kinds::TOOL_CALL,
        ToolCallRequest {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            user: Some(meta.user.clone()),
            turn_id: Some(turn_id.to_string()),
            session: Some(meta.session.clone()),
            confirmed: false,
        },
    )
    .for_session(&meta.agent, &meta.session, Some(&meta.user));
    let timeout = Duration::from_secs(env.config.tools.default_timeout_secs) + REPLY_MARGIN;
    match rpc::call::<_, ToolCallResult>(
        env.bus.as_ref(),
        &subject,
        &request,
        kinds::TOOL_RESULT,
        timeout,
    )
    .await
    {
        Ok(reply) => reply.body,
        Err(rpc::RpcError::Bus(BusError::NoResponders { .. })) => failed(
            call,
            ToolError::new(
                ToolErrorCode::Unavailable,
                format!("no executor serves `{}` right now", call.name),
            )
            .with_hint("the tool's service is down; tell the user instead of retrying"),
        ),
        Err(e) => failed(
            call,
            ToolError::new(ToolErrorCode::Unavailable, e.to_string())
                .with_hint("the tool did not answer; retry once at most"),
        ),
    }
}

fn unknown_tool(name: &str, tools: &[ToolSpec]) -> ToolError {
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
    ToolCallResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        status: ToolStatus::Error,
        output: Value::Null,
        error: Some(error),
        auto_corrected: false,
        corrections: Vec::new(),
        via: String::new(),
        duration_ms: 0,
        raw_reference: None,
    }
}

/// The compact JSON a tool result enters the model's context as.
pub(super) fn content_for_model(result: &ToolCallResult) -> String {
    let value = match result.status {
        ToolStatus::Ok if result.auto_corrected => json!({
            "status": "ok",
            "detail": result.output,
            "auto_corrected": true,
            "corrections": result.corrections,
        }),
        ToolStatus::Ok => json!({"status": "ok", "detail": result.output}),
        ToolStatus::Error => json!({"status": "error", "error": result.error}),
    };
    value.to_string()
}
