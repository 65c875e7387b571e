//! Handoff: an agent hands the whole conversation to another agent (tool `handoff`, offered to
//! agents with `handoffs_to`). The session keeps its address and history; from its next
//! message on, the new agent (its prompt, model, tools, memory) answers. Each handoff is
//! recorded in the session's metadata, shown by `hermes sessions show`, and announced as an
//! `agent.handoff` event.

use chrono::Utc;
use serde_json::json;

use super::TurnState;
use crate::config::{AgentConfig, Config};
use crate::llm::{ToolCall, ToolSpec};
use crate::protocol::{ToolCallResult, ToolStatus, TurnEvent};
use crate::store::sessions::HandoffRecord;
use crate::tools::{ToolError, ToolErrorCode};

/// The tool's name.
pub const HANDOFF: &str = "handoff";

/// The `handoff` tool, when the agent may hand the conversation to anyone.
pub(super) fn tool_spec(config: &Config, agent: &AgentConfig) -> Option<ToolSpec> {
    if agent.handoffs_to.is_empty() {
        return None;
    }
    let choices: Vec<String> = agent
        .handoffs_to
        .iter()
        .map(|name| match config.agents.get(name) {
            Some(a) if !a.description.is_empty() => format!("`{name}` ({})", a.description),
            _ => format!("`{name}`"),
        })
        .collect();
    Some(ToolSpec {
        name: HANDOFF.into(),
        description: format!(
            "Hand the whole conversation to another agent, who answers the user's next \
             messages instead of you. Use it when the user's request belongs to them: {}. \
             After it, tell the user in one sentence who takes over.",
            choices.join(", ")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": agent.handoffs_to},
                "reason": {"type": "string", "description": "Why, in a few words (shown to the user and the next agent)"}
            },
            "required": ["agent"],
            "additionalProperties": false
        }),
    })
}

/// Is this call the agent handing the conversation on?
pub(super) fn is_handoff(agent: &AgentConfig, call: &ToolCall) -> bool {
    call.name == HANDOFF && !agent.handoffs_to.is_empty()
}

/// Record the handoff in the session (stored with the call's result) and announce it.
pub(super) async fn run(
    state: &mut TurnState<'_>,
    agent_name: &str,
    agent: &AgentConfig,
    call: &ToolCall,
    turn_id: &str,
) -> ToolCallResult {
    let target = call.arguments["agent"].as_str().unwrap_or("").trim();
    let reason = call.arguments["reason"]
        .as_str()
        .unwrap_or("")
        .trim()
        .to_string();
    if !agent.handoffs_to.iter().any(|a| a == target) {
        let error = ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!(
                "`{target}` is not an agent `{agent_name}` may hand the conversation to; \
                 choose one of: {}",
                agent.handoffs_to.join(", ")
            ),
        )
        .with_hint("call handoff again with one of the listed agents, or keep answering");
        return super::ports::failed(call.id.clone(), call.name.clone(), error);
    }
    state.meta.handoffs.push(HandoffRecord {
        from: agent_name.to_string(),
        to: target.to_string(),
        reason: reason.clone(),
        turn_id: turn_id.to_string(),
        at: Utc::now(),
    });
    state
        .emitter
        .emit(TurnEvent::Handoff {
            turn_id: turn_id.to_string(),
            from: agent_name.to_string(),
            to: target.to_string(),
            reason,
        })
        .await;
    ToolCallResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        status: ToolStatus::Ok,
        output: json!({
            "handed_to": target,
            "note": format!("`{target}` answers this conversation from the next message on; close this turn with one sentence to the user"),
        }),
        error: None,
        auto_corrected: false,
        corrections: Vec::new(),
        via: "session".into(),
        duration_ms: 0,
        raw_reference: None,
    }
}
