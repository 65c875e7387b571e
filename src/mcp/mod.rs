//! MCP: the client the MCP-bridge uses to mount servers (behind [`McpClient`], so an rmcp
//! upgrade touches one folder), the small product-catalog server the demo mounts, Hermes' own
//! MCP server (memory and tools, [`server`]), and the audit trail of MCP calls ([`audit`]).

pub mod audit;
pub mod catalog_server;
pub mod client;
pub mod elicit;
pub mod oauth;
pub mod pool;
pub mod server;
pub mod tasks;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

pub use crate::protocol::mcp::{
    McpAnswer, McpFailure, McpInputAnswers, McpInputRequired, McpPrompt, McpPromptArgument,
    McpPromptMessage, McpPromptResult, McpQuestion, McpResource, McpResourceContent, McpTaskState,
    McpTaskStatus, McpTool, McpToolHints, McpToolResult,
};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    #[error("MCP server `{server}` could not be started: {reason}; check its command/args or url in [[mcp.servers]]")]
    Spawn { server: String, reason: String },
    #[error("MCP server `{server}` failed the handshake: {reason}")]
    Handshake { server: String, reason: String },
    #[error("MCP server `{server}` is not running (it exited or never started): {reason}")]
    Dead { server: String, reason: String },
    /// The server went away while a `tools/call` was in flight: the call may have run.
    #[error("MCP server `{server}` went away during the call, which may have taken effect: {reason}; check the server's side before calling again")]
    Lost { server: String, reason: String },
    #[error("MCP server `{server}` did not answer `{method}` within {after:?}")]
    Timeout {
        server: String,
        method: String,
        after: Duration,
    },
    /// The server took the request and answered it with something that could not be read:
    /// a `tools/call` may have taken effect.
    #[error("MCP server `{server}` answered `{method}` with something that could not be read: {reason}; the server took the request, so a tool call may have taken effect: check the server's side before calling again")]
    Unreadable {
        server: String,
        method: String,
        reason: String,
    },
    /// The server could not be understood, or broke the protocol.
    #[error("MCP server `{server}` answered `{method}` with an error: {reason}")]
    Protocol {
        server: String,
        method: String,
        reason: String,
    },
    /// The server answered the request with a JSON-RPC error (`code`, its `message`).
    #[error("MCP server `{server}` refused `{method}`: {message} (JSON-RPC error {code})")]
    Rejected {
        server: String,
        method: String,
        code: i32,
        message: String,
    },
    #[error("no MCP server named `{server}` is mounted; mounted: {mounted}")]
    NotMounted { server: String, mounted: String },
}

/// JSON-RPC's "invalid params": the request's arguments are wrong.
pub const INVALID_PARAMS: i32 = -32602;

impl McpError {
    /// A stable short code for what went wrong (a span's `error.type`).
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Spawn { .. } => "spawn_failed",
            McpError::Handshake { .. } => "handshake_failed",
            McpError::Dead { .. } => "server_dead",
            McpError::Lost { .. } => "lost_mid_call",
            McpError::Timeout { .. } => "timeout",
            McpError::Protocol { .. } => "protocol_error",
            McpError::Unreadable { .. } => "unreadable_answer",
            McpError::Rejected { .. } => "rejected",
            McpError::NotMounted { .. } => "not_mounted",
        }
    }

    /// What kind of failure this is for the caller: the one place an MCP error is classified.
    /// Only a server that cannot be reached is `Unavailable`; a server that refused the
    /// arguments is `InvalidArguments`, so the model fixes its call instead of giving up.
    pub fn failure(&self) -> McpFailure {
        match self {
            McpError::Spawn { .. } | McpError::Handshake { .. } | McpError::Dead { .. } => {
                McpFailure::Unavailable
            }
            McpError::Lost { .. } => McpFailure::Lost,
            McpError::Timeout { .. } => McpFailure::Timeout,
            McpError::Protocol { .. } => McpFailure::Protocol,
            McpError::Unreadable { .. } => McpFailure::Unreadable,
            McpError::Rejected { code, .. } if *code == INVALID_PARAMS => {
                McpFailure::InvalidArguments
            }
            McpError::Rejected { .. } => McpFailure::Rejected,
            McpError::NotMounted { .. } => McpFailure::NotMounted,
        }
    }
}

/// What a `tools/call` came back with: the result, or a task the server runs on (tasks
/// extension, `io.modelcontextprotocol/tasks`) that is followed with
/// [`McpClient::get_task`].
#[derive(Debug, Clone, PartialEq)]
pub enum McpCallOutcome {
    Done(McpToolResult),
    Task(McpTaskState),
    /// The server asks the user first (2026-07-28 `input_required`) and nobody on this
    /// connection answers: the caller puts the questions to the user and calls again with
    /// the answers.
    InputRequired(McpInputRequired),
}

/// A connected MCP server.
#[async_trait]
pub trait McpClient: Send + Sync {
    /// The configured server name.
    fn server(&self) -> &str;
    async fn list_tools(&self) -> Result<Vec<McpTool>, McpError>;
    async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<McpToolResult, McpError>;
    /// [`McpClient::call_tool`], letting the server answer with a task or with questions for
    /// the user; `input` answers the questions of the call's previous round. A client that
    /// speaks neither the tasks extension nor 2026-07-28 answers like `call_tool`.
    async fn call_tool_or_task(
        &self,
        tool: &str,
        arguments: Value,
        input: Option<McpInputAnswers>,
        timeout: Duration,
    ) -> Result<McpCallOutcome, McpError> {
        if input.is_some() {
            return Err(McpError::Protocol {
                server: self.server().to_owned(),
                method: "tools/call".to_owned(),
                reason: "answers to a server's questions came for a client that never asks \
                         them; call the tool again without them"
                    .to_owned(),
            });
        }
        self.call_tool(tool, arguments, timeout)
            .await
            .map(McpCallOutcome::Done)
    }
    /// `tasks/get`: where a task the server runs stands now.
    async fn get_task(&self, task_id: &str, timeout: Duration) -> Result<McpTaskState, McpError> {
        let _ = (task_id, timeout);
        Err(self.no_tasks("tasks/get"))
    }
    /// `tasks/cancel`: ask the server to stop a task (cooperative; its state may lag).
    async fn cancel_task(&self, task_id: &str, timeout: Duration) -> Result<(), McpError> {
        let _ = (task_id, timeout);
        Err(self.no_tasks("tasks/cancel"))
    }
    /// Task states the server announces (`notifications/tasks`), so a follower need not wait
    /// for its next `tasks/get`. `None` when the client hears none.
    fn task_updates(&self) -> Option<tokio::sync::broadcast::Receiver<McpTaskState>> {
        None
    }
    /// The error for a task method on a client without the tasks extension.
    fn no_tasks(&self, method: &str) -> McpError {
        McpError::Protocol {
            server: self.server().to_owned(),
            method: method.to_owned(),
            reason: "this client does not speak the MCP tasks extension".to_owned(),
        }
    }
    /// The MCP revision agreed with the server, once connected.
    fn protocol(&self) -> Option<String> {
        None
    }
    /// The extensions the server declared in its capabilities.
    fn extensions(&self) -> Vec<String> {
        Vec::new()
    }
    /// Resources the server offers (empty when it has no resources capability).
    async fn list_resources(&self) -> Result<Vec<McpResource>, McpError>;
    async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<Vec<McpResourceContent>, McpError>;
    /// Prompt templates the server offers (empty when it has no prompts capability).
    async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError>;
    async fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<McpPromptResult, McpError>;
    /// Resolves when the connection is lost for good (the child exited, the HTTP session
    /// failed, or [`McpClient::shutdown`] ran); returns why. A supervisor reconnects then.
    async fn closed(&self) -> String;
    /// Bumped each time the server sends `notifications/{tools,resources,prompts}/list_changed`.
    fn list_changed(&self) -> tokio::sync::watch::Receiver<u64>;
    /// The child's OS process id (stdio servers).
    fn pid(&self) -> Option<u32> {
        None
    }
    /// Close the session and stop the child process.
    async fn shutdown(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_that_could_not_be_read_may_have_acted_and_a_protocol_error_did_not_send() {
        let unreadable = McpError::Unreadable {
            server: "shop".into(),
            method: "tools/call".into(),
            reason: "unexpected response type".into(),
        };
        assert_eq!(unreadable.failure(), McpFailure::Unreadable);
        assert_eq!(unreadable.code(), "unreadable_answer");
        assert!(unreadable.to_string().contains("may have taken effect"));
        let unsent = McpError::Protocol {
            server: "shop".into(),
            method: "tools/call".into(),
            reason: "arguments must be a JSON object".into(),
        };
        assert_eq!(unsent.failure(), McpFailure::Protocol);
    }
}
