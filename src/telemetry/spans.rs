//! The spans Hermes records, named and attributed after the OpenTelemetry semantic
//! conventions: GenAI (`invoke_agent {agent}` around a turn, `chat {model}` around a model
//! call, `execute_tool {tool}` around a tool execution), MCP (`{mcp.method.name} {target}` on
//! both ends of an MCP request) and messaging (`process {subject}` for a request that arrived
//! over NATS with a trace context).
//!
//! They are ordinary `tracing` spans at INFO level: free while no layer wants them (telemetry
//! off and logs at `warn`), exported by [`super::otel`] when it is on, and shown as context in
//! the logs at `HERMES_LOG=info`. `otel.name` and `otel.kind` are the OpenTelemetry span name
//! and kind; fields declared `Empty` are filled in with the `record_*` functions.

use std::fmt;

use tracing::field::Empty;
use tracing::Span;

use super::trace_context;

/// `{operation} {target}` (or the operation alone), the span name the conventions ask for.
struct Name<'a>(&'a str, Option<&'a str>);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(target) => write!(f, "{} {target}", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// One turn of `agent` in `session` (the session actor running it).
pub fn invoke_agent(agent: &str, session: &str, turn_id: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %Name("invoke_agent", Some(agent)),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.conversation.id = session,
        hermes.turn.id = turn_id,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        "error.type" = Empty,
    )
}

/// One call of a chat model; the model is recorded by [`record_model`] once it is known.
pub fn chat() -> Span {
    tracing::info_span!(
        "chat",
        otel.name = "chat",
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        "error.type" = Empty,
    )
}

/// The model of a [`chat`] span, from a model id `provider:model` (e.g. `openai:gpt-4o-mini`).
pub fn record_model(span: &Span, model_id: &str) {
    if span.is_disabled() {
        return;
    }
    let (provider, model) = model_id.split_once(':').unwrap_or(("hermes", model_id));
    span.record(
        "otel.name",
        tracing::field::display(Name("chat", Some(model))),
    );
    span.record("gen_ai.provider.name", provider);
    span.record("gen_ai.request.model", model);
}

/// One execution of `tool` for the model's call `call_id`. MCP tools (`<server>__<tool>`) are
/// of type `extension`, the others `function`.
pub fn execute_tool(tool: &str, call_id: &str) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %Name("execute_tool", Some(tool)),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        "gen_ai.tool.type" = tool_type(tool),
        "error.type" = Empty,
    )
}

/// `extension` for an MCP server's tool, `function` for the others.
fn tool_type(tool: &str) -> &'static str {
    if tool.contains(crate::tools::remote::MCP_SEPARATOR) {
        "extension"
    } else {
        "function"
    }
}

/// Which end of an MCP request a span is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpSide {
    /// Hermes' MCP-bridge calling a mounted server.
    Client,
    /// Hermes' own MCP server answering.
    Server,
}

/// One MCP request: `method` (`tools/call`, `resources/read`, …) on `target` (the tool,
/// resource or prompt, when the method has one), to or from `server`.
pub fn mcp(side: McpSide, method: &str, target: Option<&str>, server: &str) -> Span {
    let kind = match side {
        McpSide::Client => "client",
        McpSide::Server => "server",
    };
    let span = tracing::info_span!(
        "mcp",
        otel.name = %Name(method, target),
        otel.kind = kind,
        otel.status_code = Empty,
        mcp.method.name = method,
        hermes.mcp.server = server,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        "error.type" = Empty,
    );
    if let Some(target) = target.filter(|_| !span.is_disabled()) {
        match method {
            "tools/call" => {
                span.record("gen_ai.operation.name", "execute_tool");
                span.record("gen_ai.tool.name", target);
            }
            "prompts/get" => {
                span.record("gen_ai.prompt.name", target);
            }
            "resources/read" => {
                span.record("mcp.resource.uri", target);
            }
            _ => {}
        }
    }
    span
}

/// The span of a request that arrived over NATS on a service for `pattern` with the sender's
/// `traceparent`: its remote parent is the sender's span. `Span::none()` when the message
/// carries no trace context or this process exports no traces.
pub fn process_message(pattern: &str, traceparent: Option<&str>) -> Span {
    let Some(traceparent) = traceparent.filter(|_| trace_context::enabled()) else {
        return Span::none();
    };
    let span = tracing::info_span!(
        "process",
        otel.name = %Name("process", Some(pattern)),
        otel.kind = "server",
        messaging.system = "nats",
        "messaging.operation.type" = "process",
        messaging.destination.name = pattern,
    );
    trace_context::follow(&span, Some(traceparent));
    span
}

/// Token usage of a [`chat`] or [`invoke_agent`] span.
pub fn record_usage(span: &Span, input_tokens: u64, output_tokens: u64) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.usage.input_tokens", input_tokens);
    span.record("gen_ai.usage.output_tokens", output_tokens);
}

/// Mark `span` failed with `error_type` (a stable code such as `timeout` or `plan_failed`).
pub fn record_error(span: &Span, error_type: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_operation_and_its_target() {
        assert_eq!(
            Name("execute_tool", Some("add")).to_string(),
            "execute_tool add"
        );
        assert_eq!(Name("tools/list", None).to_string(), "tools/list");
    }

    #[test]
    fn without_a_subscriber_spans_cost_nothing_and_recording_is_harmless() {
        let span = execute_tool("catalog__search", "c1");
        assert!(span.is_disabled());
        record_error(&span, "timeout");
        record_usage(&span, 1, 2);
        record_model(&span, "openai:gpt-4o-mini");
        assert!(process_message("hermes.plan", Some("00-x")).is_none());
    }
}
