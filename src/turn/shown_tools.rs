//! The tools of a turn: what the model is shown, and what it may call.

use std::borrow::Cow;

use super::{delegation, handoff};
use crate::config::{AgentConfig, Config};
use crate::llm::ToolSpec;
use crate::protocol::{ToolDefinition, ToolsCatalog};
use crate::tools::scenes;

/// The tools of one turn.
pub(super) struct TurnTools<'c> {
    /// Every tool the agent may call, with its timeout, effect and risk.
    pub definitions: Cow<'c, [ToolDefinition]>,
    /// What the model is shown: the active scene's (at most 15), the agents it may delegate
    /// to, and the handoff.
    pub shown: Vec<ToolSpec>,
}

/// The tools `agent` has at a turn that starts with `user_text`.
///
/// An agent's own tool list is a whitelist: nothing else is shown or callable, and an empty
/// list means no tools at all. Without one the catalog is read where it is (a catalog of many
/// tools is a lot of JSON Schema to copy at every turn). Only the active scene's tools are
/// shown; the rest stay callable. A catalog without definitions (an older executor's) still
/// names its tools.
pub(super) fn for_turn<'c>(
    config: &Config,
    agent: &AgentConfig,
    catalog: &'c ToolsCatalog,
    user_text: &str,
) -> TurnTools<'c> {
    let definitions: Cow<'c, [ToolDefinition]> = match &agent.tools {
        Some(allowed) => catalog
            .definitions
            .iter()
            .filter(|d| allows(allowed, &d.name))
            .cloned()
            .collect(),
        None => Cow::Borrowed(&catalog.definitions),
    };
    let mut shown: Vec<ToolSpec> = if catalog.definitions.is_empty() {
        let allowed = agent.tools.as_ref();
        catalog
            .tools
            .iter()
            .filter(|t| allowed.is_none_or(|allowed| allows(allowed, &t.name)))
            .cloned()
            .collect()
    } else {
        scenes::select_tools(
            &definitions,
            agent.scene.as_deref(),
            user_text,
            &["session_search"],
            scenes::MAX_TOOLS,
        )
        .into_iter()
        .map(|d| d.spec())
        .collect()
    };
    shown.extend(delegation::tool_specs(config, agent));
    shown.extend(handoff::tool_spec(config, agent));
    TurnTools { definitions, shown }
}

/// Whether an agent whose tool list is `allowed` may see and call `tool`: the tools it names,
/// and `session_search` with any of them.
fn allows(allowed: &[String], tool: &str) -> bool {
    allowed.iter().any(|a| a == tool) || (!allowed.is_empty() && tool == "session_search")
}
