//! The trace of each call this client makes on a mounted server: a client span
//! (`tools/call <tool>`, `resources/read <uri>`, `prompts/get <name>`, with `mcp.method.name`),
//! whose W3C context goes into the request's `_meta.traceparent` so the server can continue
//! the trace. Without trace export nothing is added to the request.

use rmcp::model::RequestParamsMeta;
use tracing::Span;

use crate::mcp::McpError;
use crate::telemetry::spans::{self, McpSide};
use crate::telemetry::trace_context;

/// The client span of one request of `method` on `target` to `server`.
pub(super) fn span(server: &str, method: &str, target: &str) -> Span {
    spans::mcp(McpSide::Client, method, Some(target), server)
}

/// Put `span`'s context into the request's `_meta`.
pub(super) fn carry(params: &mut impl RequestParamsMeta, span: &Span) {
    if let Some(traceparent) = trace_context::of_span(span) {
        params.set_traceparent(&traceparent);
    }
}

/// A failed request marks its span.
pub(super) fn record<T>(span: &Span, result: &Result<T, McpError>) {
    if let Err(error) = result {
        spans::record_error(span, error.code());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolRequestParams;

    #[test]
    fn without_trace_export_the_request_meta_stays_untouched() {
        let span = span("catalog", "tools/call", "search_products");
        let mut params = CallToolRequestParams::new("search_products");
        carry(&mut params, &span);
        assert!(params.meta.is_none());
    }
}
