//! Which side answers a `tools/call`, `resources/read` or `prompts/get` of Hermes' MCP
//! server: its own memory tools, exposed tools and agents, memories and prompt, or — for
//! anything else, when `[mcp.server] passthrough` is set — the mounted server it serves. The
//! caller is authorised and audited either way.

use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, ReadResourceRequestParams, ReadResourceResponse,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::handler::{HermesMcpServer, FORGET, QA_PROMPT, SEARCH, WRITE};
use super::{agents, exposed, memory};

/// The answers behind the traced [`ServerHandler`] methods.
impl HermesMcpServer {
    /// Whether `task_id` is a task of the passthrough server rather than of an exposed agent.
    pub(super) fn passed_task(&self, task_id: &str) -> bool {
        self.passes_through()
            && !agents::parse_task_id(task_id)
                .is_some_and(|(agent, _, _)| agents::offered(&self.deps, agent))
    }

    pub(super) async fn answer_call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        let name = request.name.to_string();
        let is_agent = agents::offered(&self.deps, &name);
        let known = [WRITE, SEARCH, FORGET].contains(&name.as_str())
            || is_agent
            || exposed::offered(&self.deps, &name);
        if !known && self.passes_through() {
            if let Err(denied) = who.check_tool(&name) {
                return Err(self.deny(&who, "tools/call", &name, denied).await);
            }
            return self.passed_call(&who, request, &ctx).await;
        }
        if !known {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`; call tools/list"),
                None,
            ));
        }
        if let Err(denied) = who.check_tool(&name) {
            return Err(self.deny(&who, "tools/call", &name, denied).await);
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if is_agent {
            return self.call_agent(&who, &name, arguments, &ctx).await;
        }
        let started = Instant::now();
        let key = idempotency_key(&request, &ctx);
        let outcome = match self.run_tool(&who, &name, arguments, key.as_deref()).await {
            Ok(outcome) => outcome,
            Err(denied) => return Err(self.deny(&who, "tools/call", &name, denied).await),
        };
        self.audited(
            &who,
            "tools/call",
            &name,
            started,
            outcome.as_ref().err().cloned(),
        )
        .await;
        Ok(match outcome {
            Ok(value) => {
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
                result.structured_content = Some(value);
                result
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e)]),
        }
        .into())
    }

    pub(super) async fn answer_read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        if self.passes_through() && !request.uri.starts_with(memory::URI_SCHEME) {
            return self.passed_read(&who, request, &ctx).await;
        }
        let started = Instant::now();
        let outcome = match self.read_memory(&who, &request.uri).await {
            Ok(outcome) => outcome,
            Err(denied) => {
                return Err(self
                    .deny(&who, "resources/read", &request.uri, denied)
                    .await)
            }
        };
        self.audited(
            &who,
            "resources/read",
            &request.uri,
            started,
            outcome.as_ref().err().map(ToString::to_string),
        )
        .await;
        outcome.map(Into::into).map_err(|e| e.to_error_data())
    }

    pub(super) async fn answer_get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let who = self.principal(&ctx)?;
        if request.name != QA_PROMPT && self.passes_through() {
            return self.passed_prompt(request, &ctx).await;
        }
        if request.name != QA_PROMPT {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt `{}`; the prompt is `{QA_PROMPT}`",
                    request.name
                ),
                None,
            ));
        }
        self.qa_prompt(&who, request.arguments)
            .await
            .map(Into::into)
    }
}

/// The client's idempotency key of a call (`_meta["io.hermes/idempotencyKey"]`), if any.
fn idempotency_key(
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<String> {
    let in_params = request
        .meta
        .as_ref()
        .and_then(|meta| meta.0 .0.get(exposed::IDEMPOTENCY_KEY).cloned());
    in_params
        .or_else(|| ctx.meta.0 .0.get(exposed::IDEMPOTENCY_KEY).cloned())
        .and_then(|key| key.as_str().map(str::to_owned))
        .filter(|key| !key.is_empty())
}
