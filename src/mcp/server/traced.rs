//! The trace of each call Hermes' MCP server answers: a server span (`tools/call <tool>`,
//! `resources/read <uri>`, `prompts/get <name>`, with `mcp.method.name`) that continues the
//! caller's trace when the request's `_meta` carries a W3C `traceparent` — so a call from an
//! agent framework (or Hermes' own MCP-bridge) and the memory work behind it are one trace.

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tracing::Span;

use super::SERVER_NAME;
use crate::telemetry::spans::{self, McpSide};
use crate::telemetry::trace_context;

/// The server span of one request; `in_params` is the `_meta.traceparent` of the request's
/// params, for when rmcp left it there rather than in `ctx.meta`.
pub(super) fn span(
    ctx: &RequestContext<RoleServer>,
    in_params: Option<&str>,
    method: &str,
    target: &str,
) -> Span {
    let span = spans::mcp(McpSide::Server, method, Some(target), SERVER_NAME);
    trace_context::follow(&span, ctx.meta.get_traceparent().or(in_params));
    span
}

/// An error answer marks the span with its JSON-RPC error code.
pub(super) fn record<T>(span: &Span, result: &Result<T, ErrorData>) {
    if let Err(error) = result {
        if !span.is_disabled() {
            spans::record_error(span, &error.code.0.to_string());
        }
    }
}
