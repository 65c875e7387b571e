//! `hermes agents ls`: every configured agent with its model, the tools it sees, the agents it
//! may delegate to or hand the conversation to, its memory namespaces and limits, and the
//! triggers that start it, its effective token window and where that came from — read from
//! the configuration, as `hermes tools ls` is.

use std::collections::BTreeSet;

use clap::{Args, Subcommand};
use serde_json::json;

use hermes::actors::tool_executor::configured_definitions;
use hermes::config::{AgentConfig, Config, ModelConfig};
use hermes::tools::definition::ToolDefinition;

#[derive(Subcommand)]
pub enum AgentsCommand {
    /// List the agents: model, tools, delegation and handoff targets, memory, limits,
    /// triggers. Example: `hermes agents ls --config config/team.toml`.
    Ls(LsArgs),
}

#[derive(Args)]
pub struct LsArgs {
    /// Print one JSON object per agent instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(config: Config, command: AgentsCommand) -> anyhow::Result<()> {
    match command {
        AgentsCommand::Ls(args) => ls(&config, &args),
    }
}

fn ls(config: &Config, args: &LsArgs) -> anyhow::Result<()> {
    let definitions = configured_definitions(&config.tools).map_err(anyhow::Error::msg)?;
    for (name, agent) in &config.agents {
        let tools = shown_tools(config, agent, &definitions);
        let model = model_of(config, agent);
        let window = agent.window(&config.models);
        let triggers: Vec<String> = config
            .triggers
            .iter()
            .filter(|t| &t.agent == name)
            .map(|t| format!("{} ({})", t.name, t.subject))
            .collect();
        let a2a = agent.a2a.clone().unwrap_or_default();
        if let Some(card_url) = &a2a.card_url {
            if args.json {
                println!(
                    "{}",
                    json!({"agent": name, "description": agent.description, "remote": card_url})
                );
            } else {
                println!("{name}");
                if !agent.description.is_empty() {
                    println!("  {}", agent.description);
                }
                println!("  remote       an A2A agent at {card_url}");
                println!();
            }
            continue;
        }
        if args.json {
            println!(
                "{}",
                json!({
                    "agent": name,
                    "a2a": a2a.expose,
                    "description": agent.description,
                    "model": agent.model,
                    "provider": model,
                    "tools": tools,
                    "delegates_to": agent.delegates_to,
                    "handoffs_to": agent.handoffs_to,
                    "memory": {"read": agent.memory.read, "write": agent.memory.writes()},
                    "max_steps": agent.max_steps,
                    "context_window": {"value": window.context_window, "from": window.window_from.to_string()},
                    "reply_reserve": {"value": window.reply_reserve, "from": window.reserve_from.to_string()},
                    "token_budget": agent.token_budget,
                    "triggers": triggers,
                })
            );
            continue;
        }
        println!("{name}");
        if !agent.description.is_empty() {
            println!("  {}", agent.description);
        }
        println!("  model        {} ({model})", agent.model);
        println!("  tools        {}", list(&tools));
        println!(
            "  delegates to {}",
            list(
                &agent
                    .delegates_to
                    .iter()
                    .map(|a| AgentConfig::delegation_tool(a))
                    .collect::<Vec<_>>()
            )
        );
        println!("  hands off to {}", list(&agent.handoffs_to));
        if a2a.expose {
            println!("  served       over A2A at /a2a/{name} (hermes serve --http)");
        }
        println!(
            "  memory       reads {}; {}",
            list(&agent.memory.read),
            match agent.memory.writes() {
                Some(ns) => format!("writes {ns}"),
                None => "writes nothing".into(),
            }
        );
        let budget = match agent.token_budget {
            0 => "no token budget".to_string(),
            n => format!("token budget {n}"),
        };
        println!(
            "  limits       {} steps, {budget}, delegations wait {} s",
            agent.max_steps, agent.delegation_timeout_secs
        );
        println!(
            "  window       {} tokens ({}), {} kept for the reply ({})",
            window.context_window, window.window_from, window.reply_reserve, window.reserve_from
        );
        if !triggers.is_empty() {
            println!("  triggers     {}", triggers.join(", "));
        }
        println!();
    }
    Ok(())
}

/// The tools an agent's model is shown (besides its `agent__` tools), read from the
/// configuration: MCP servers' tools are known only once they are mounted.
pub(super) fn shown_tools(
    config: &Config,
    agent: &AgentConfig,
    definitions: &[ToolDefinition],
) -> Vec<String> {
    if let Some(allowed) = &agent.tools {
        let mut names = allowed.clone();
        if !names.is_empty() && !names.iter().any(|n| n == "session_search") {
            names.push("session_search".into());
        }
        return names;
    }
    let mcp_servers = config.mcp.servers.len();
    let names: BTreeSet<String> = definitions
        .iter()
        .filter(|d| {
            agent
                .scene
                .as_ref()
                .is_none_or(|scene| d.scenes.is_empty() || d.scenes.contains(scene))
        })
        .map(|d| d.name.clone())
        .collect();
    let mut names: Vec<String> = names.into_iter().collect();
    if mcp_servers > 0 {
        names.push(format!("+ the tools of {mcp_servers} MCP server(s)"));
    }
    names
}

pub(super) fn model_of(config: &Config, agent: &AgentConfig) -> String {
    match config.models.model(&agent.model) {
        Some(ModelConfig::Openai(table)) => format!("openai {}", table.model),
        Some(ModelConfig::OpenaiResponses(table)) => format!("openai-responses {}", table.model),
        Some(ModelConfig::Anthropic(table)) => format!("anthropic {}", table.model),
        Some(ModelConfig::Replay { scenario }) => format!("replay {scenario}"),
        Some(ModelConfig::Bench {}) => "bench".into(),
        None => "missing".into(),
    }
}

pub(super) fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}
