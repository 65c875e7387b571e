//! Agent Cards: what an agent is, where and how to reach it (`supportedInterfaces`: JSON-RPC
//! and HTTP+JSON on its base URL), what it can do (`capabilities`, one skill for the agent and
//! one per tool it may use) and how to authenticate (`securitySchemes`: a bearer token).

use std::collections::HashMap;
use std::time::Duration;

use hyper::{HeaderMap, Response, StatusCode};

use super::{json, A2aServer, Body};
use crate::a2a::wire::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    SecurityScheme, TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC,
};
use crate::bus::rpc;
use crate::protocol::envelope::Envelope;
use crate::protocol::request::ToolsListRequest;
use crate::protocol::ToolSpec;

/// The name of the bearer scheme in cards.
pub const BEARER: &str = "bearer";

/// `GET …/agent-card.json`.
pub async fn response(server: &A2aServer, agent: &str, headers: &HeaderMap) -> Response<Body> {
    let base = base_url(server, headers);
    let tools = tool_specs(server).await;
    let card = build(server, agent, &base, &tools);
    json(StatusCode::OK, "application/json", &card)
}

/// Where clients reach this listener: `[a2a] public_url`, else the request's `Host`, else
/// the listen address.
pub fn base_url(server: &A2aServer, headers: &HeaderMap) -> String {
    if let Some(url) = &server.config.a2a.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    match headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
    {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", server.listen),
    }
}

/// The tool-executor's catalog; empty when it does not answer quickly.
async fn tool_specs(server: &A2aServer) -> Vec<ToolSpec> {
    let request = Envelope::request(ToolsListRequest);
    match rpc::request(server.bus.as_ref(), request, Duration::from_secs(2)).await {
        Ok(reply) => reply.body.tools,
        Err(error) => {
            tracing::debug!(%error, "no tool catalog for the Agent Card; its skills name the agent only");
            Vec::new()
        }
    }
}

/// The card of `agent` served at `base`.
pub fn build(server: &A2aServer, agent: &str, base: &str, tools: &[ToolSpec]) -> AgentCard {
    let config = server.config.agents.get(agent);
    let description = config
        .map(|a| a.description.clone())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("The Hermes agent `{agent}`"));
    let url = format!("{base}/a2a/{agent}");
    let mut skills = vec![AgentSkill {
        id: agent.to_owned(),
        name: agent.to_owned(),
        description: description.clone(),
        tags: vec!["hermes".into(), "agent".into()],
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }];
    let allowed = config.and_then(|a| a.tools.clone());
    for spec in tools {
        let visible = allowed
            .as_ref()
            .is_none_or(|list| list.contains(&spec.name));
        if visible {
            skills.push(AgentSkill {
                id: spec.name.clone(),
                name: spec.name.clone(),
                description: first_sentence(&spec.description),
                tags: vec!["tool".into()],
                examples: None,
                input_modes: None,
                output_modes: None,
                security_requirements: None,
            });
        }
    }
    if let Some(a) = config {
        for delegate in &a.delegates_to {
            skills.push(AgentSkill {
                id: format!("agent__{delegate}"),
                name: format!("delegates to {delegate}"),
                description: server
                    .config
                    .agents
                    .get(delegate)
                    .map(|d| d.description.clone())
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| format!("hands tasks to agent `{delegate}`")),
                tags: vec!["delegation".into()],
                examples: None,
                input_modes: None,
                output_modes: None,
                security_requirements: None,
            });
        }
    }
    let interface = |binding: &str| AgentInterface {
        url: url.clone(),
        protocol_binding: binding.into(),
        protocol_version: crate::a2a::PROTOCOL_VERSION.into(),
        tenant: None,
    };
    let (security_schemes, security_requirements) = if server.has_tokens() {
        let scheme = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            scheme: "Bearer".into(),
            description: Some(
                "A token of [[mcp.server.tokens]] in the Hermes deployment's config".into(),
            ),
            bearer_format: None,
        });
        let requirement = server
            .needs_token()
            .then(|| vec![HashMap::from([(BEARER.to_owned(), Vec::new())])]);
        (
            Some(HashMap::from([(BEARER.to_owned(), scheme)])),
            requirement,
        )
    } else {
        (None, None)
    };
    AgentCard {
        name: agent.to_owned(),
        description,
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![
            interface(TRANSPORT_PROTOCOL_JSONRPC),
            interface(TRANSPORT_PROTOCOL_HTTP_JSON),
        ],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: None,
            extended_agent_card: Some(false),
        },
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes,
        security_requirements,
        signatures: None,
    }
}

/// The first sentence of a tool description (the rest says how to call it).
fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map(|i| i + 1).unwrap_or(text.len());
    text[..end].trim().to_owned()
}
