//! Hermes' own tools offered over MCP (`[mcp.server] expose_tools`): listed from the
//! tool-executor's catalog (`hermes.tools.list`) and called on `hermes.tool.<name>` for the
//! caller's user, so they keep the executor's validation, timeouts and audit.
//!
//! The catalog holds the mounted MCP servers' tools too (`<server>__<tool>`), so naming them
//! (or a pattern, `catalog__*`) makes Hermes a gateway: a client reaches a mounted server's
//! tool behind Hermes' tokens, roles and per-user audit, and a `write` tool runs once per
//! idempotency key — the client's `_meta["io.hermes/idempotencyKey"]`, kept per user.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use serde_json::Value;

use super::auth::Principal;
use super::{glob, ServerDeps};
use crate::bus::rpc;
use crate::protocol::envelope::Envelope;
use crate::protocol::request::ToolsListRequest;
use crate::protocol::{ToolCallRequest, ToolStatus};

/// The exposed tools the executor serves, with their schemas (none when it does not answer).
pub(super) async fn list(deps: &ServerDeps) -> Vec<Tool> {
    if deps.expose_tools.is_empty() {
        return Vec::new();
    }
    let request = Envelope::request(ToolsListRequest);
    let catalog = rpc::request(deps.bus.as_ref(), request, deps.request_timeout).await;
    let catalog = match catalog {
        Ok(catalog) => catalog.body,
        Err(error) => {
            tracing::warn!(%error, "the tool-executor did not list its tools; exposed tools are not offered");
            return Vec::new();
        }
    };
    catalog
        .tools
        .into_iter()
        .filter(|spec| glob::any(&deps.expose_tools, &spec.name))
        .filter_map(|spec| {
            let schema = spec.input_schema.as_object()?.clone();
            Some(Tool::new(spec.name, spec.description, Arc::new(schema)))
        })
        .collect()
}

/// The `_meta` key of a client's idempotency key for a call.
pub const IDEMPOTENCY_KEY: &str = "io.hermes/idempotencyKey";

/// Whether `name` is offered (named in `expose_tools` or matching a pattern there).
pub(super) fn offered(deps: &ServerDeps, name: &str) -> bool {
    glob::any(&deps.expose_tools, name)
}

/// The call id a call travels under: one derived from the caller's user and idempotency key
/// (so a retry of a `write` tool replays its recorded result), else a fresh one.
fn call_id(who: &Principal, idempotency_key: Option<&str>) -> String {
    match idempotency_key {
        Some(key) => {
            let scoped = format!("mcp\u{1f}{}\u{1f}{key}", who.user);
            uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, scoped.as_bytes()).to_string()
        }
        None => uuid::Uuid::now_v7().to_string(),
    }
}

/// Call `name` for `who` on `hermes.tool.<name>`.
pub(super) async fn call(
    deps: &ServerDeps,
    who: &Principal,
    name: &str,
    arguments: Value,
    idempotency_key: Option<&str>,
) -> Result<Value, String> {
    let request = Envelope::request(ToolCallRequest {
        call_id: call_id(who, idempotency_key),
        name: name.to_owned(),
        arguments,
        user: Some(who.user.clone()),
        turn_id: None,
        session: None,
        // An MCP client has no way to ask the user: `risk = high` tools stay refused.
        confirmed: false,
        input: None,
    });
    let reply = rpc::request(
        deps.bus.as_ref(),
        request,
        deps.tool_timeout + Duration::from_secs(2),
    )
    .await
    .map_err(|e| format!("the tool-executor did not run `{name}`: {e}"))?;
    let result = reply.body;
    match result.status {
        ToolStatus::Ok => Ok(result.output),
        ToolStatus::Error => Err(result
            .error
            .map(|e| serde_json::to_string(&e).unwrap_or_default())
            .unwrap_or_else(|| format!("`{name}` failed without a reason"))),
    }
}
