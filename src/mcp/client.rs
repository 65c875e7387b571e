//! [`RmcpClient`]: one MCP server spoken to with rmcp behind our [`McpClient`] trait — a child
//! process over its stdin/stdout ([`RmcpClient::spawn`], alias [`StdioMcpClient`]) or a
//! Streamable HTTP endpoint ([`RmcpClient::connect_http`]), in the revision the server speaks
//! (2026-07-28 through `server/discover`, else the 2025-11-25 handshake). A tool call may come
//! back as a task (followed, [`tasks`]) or with questions, answered by the connection's
//! [`Elicitor`] if it has one ([`input`]). The link is watched (child exit, HTTP failure), so a
//! call to a dead server fails at once with [`McpError::Dead`] instead of waiting for its
//! timeout (one in flight when it dies with [`McpError::Lost`]: it may have taken effect),
//! and [`McpClient::closed`] tells a supervisor when to reconnect. An answer that cannot be
//! read is [`McpError::Unreadable`] (the server took the request), never a `Protocol` error,
//! which stays for what went wrong before anything was sent.

mod convert;
mod handler;
mod http;
mod input;
mod link;
mod oauth_http;
mod process;
mod stdio;
mod tasks;
mod traced;

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetPromptRequestParams,
    GetTaskParams, ReadResourceRequestParams, UpdateTaskParams,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{Peer, ServiceError};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use self::handler::Notifier;
use self::link::Link;
use super::elicit::Elicitor;
use super::oauth::Reauthorize;
use super::{
    McpCallOutcome, McpClient, McpError, McpInputAnswers, McpPrompt, McpPromptResult, McpResource,
    McpResourceContent, McpTaskState, McpTool, McpToolResult,
};
use crate::config::McpServerConfig;

/// The name this client gives in `initialize`.
pub const CLIENT_NAME: &str = "hermes";
/// How long a closing session may take to wind down before the child is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long an exited child's last stderr lines may take to arrive for an error message.
const STDERR_SETTLE: Duration = Duration::from_millis(500);
/// How long to wait for the exit status after the pipe to the server closed.
const EXIT_SETTLE: Duration = Duration::from_millis(500);

type Session = RunningService<RoleClient, Notifier>;

/// The stdio flavour of [`RmcpClient`] (the name older code uses).
pub type StdioMcpClient = RmcpClient;

/// A connected MCP server. Dropping it kills a stdio server's child process.
#[derive(Debug)]
pub struct RmcpClient {
    server: String,
    /// The command line (stdio) or URL (HTTP), for messages.
    target: String,
    request_timeout: Duration,
    peer: Peer<RoleClient>,
    session: tokio::sync::Mutex<Option<Session>>,
    link: Link,
    changed: watch::Receiver<u64>,
    tasks: tokio::sync::broadcast::Sender<super::McpTaskState>,
    /// Who answers the server's questions; none = an `input_required` call fails.
    elicitor: Option<Arc<dyn Elicitor>>,
    shut_down: AtomicBool,
}

/// Who acts for the user on one connection: logs in again mid-session, answers questions.
/// The engine's bridge has neither (nobody is at a terminal); `hermes mcp probe` has both.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub reauthorize: Option<Reauthorize>,
    pub elicitor: Option<Arc<dyn Elicitor>>,
}

impl RmcpClient {
    /// Connect to `config`'s server: start its `command` (`self` = `self_exe`) or open its
    /// `url`, and complete the handshake within `config.timeout_secs`.
    pub async fn connect(config: &McpServerConfig, self_exe: &Path) -> Result<Self, McpError> {
        match &config.url {
            Some(url) => Self::connect_http(config, url).await,
            None => Self::spawn(config, self_exe).await,
        }
    }

    fn ready(
        config: &McpServerConfig,
        target: String,
        session: Session,
        link: Link,
        heard: handler::Heard,
    ) -> Self {
        if let Some(info) = session.peer_info() {
            tracing::info!(
                server = %config.name,
                peer = info.server_info.as_ref().map_or("?", |server| server.name.as_str()),
                protocol = %info.protocol_version,
                "MCP session initialized"
            );
            if !info.protocol_version.has_initialize() {
                heard
                    .notifier
                    .clone()
                    .listen_for_list_changes(config.name.clone(), session.peer().clone());
            }
        }
        Self {
            server: config.name.clone(),
            target,
            request_timeout: Duration::from_secs(config.timeout_secs.max(1)),
            peer: session.peer().clone(),
            session: tokio::sync::Mutex::new(Some(session)),
            link,
            changed: heard.changed,
            tasks: heard.tasks,
            elicitor: heard.elicitor,
            shut_down: AtomicBool::new(false),
        }
    }

    /// The child's OS process id (stdio servers).
    pub fn child_pid(&self) -> Option<u32> {
        self.link.pid()
    }

    /// Why the server is unusable, if it is: the child exited, the connection closed, or
    /// [`McpClient::shutdown`] was called.
    pub fn dead_reason(&self) -> Option<String> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Some("the client was shut down".to_owned());
        }
        if let Some(reason) = self.link.dead_reason() {
            return Some(reason);
        }
        self.peer
            .is_transport_closed()
            .then(|| "the connection to the server closed".to_owned())
    }

    /// Resolves when the server is gone (child exited, HTTP session failed); returns why.
    pub async fn exited(&self) -> String {
        let peer = self.peer.clone();
        self.link.died(move || peer.is_transport_closed()).await
    }

    /// The command line (stdio) or URL (HTTP) of the server.
    pub fn command_line(&self) -> &str {
        &self.target
    }

    fn dead(&self, reason: String) -> McpError {
        McpError::Dead {
            server: self.server.clone(),
            reason,
        }
    }

    /// Why a request in flight failed when the link went down: for `tools/call` the call may
    /// have reached the server (over HTTP even a failed send may have), so it is
    /// [`McpError::Lost`]; any other request had no effect to lose, and it is
    /// [`McpError::Dead`].
    fn gone(&self, method: &str, reason: String) -> McpError {
        if method == "tools/call" {
            McpError::Lost {
                server: self.server.clone(),
                reason,
            }
        } else {
            self.dead(reason)
        }
    }

    /// Run one request: fail at once if the server is dead (nothing was sent), fail as soon
    /// as it dies while waiting ([`Self::gone`]), and give up after `timeout` (dropping the
    /// request sends `notifications/cancelled`).
    async fn request<T>(
        &self,
        method: &str,
        timeout: Duration,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, McpError> {
        if let Some(reason) = self.dead_reason() {
            return Err(self.dead(reason));
        }
        let outcome = tokio::select! {
            biased;
            reason = self.exited() => return Err(self.gone(method, reason)),
            outcome = tokio::time::timeout(timeout, request) => outcome,
        };
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.service_error(method, error).await),
            Err(_) => Err(McpError::Timeout {
                server: self.server.clone(),
                method: method.to_owned(),
                after: timeout,
            }),
        }
    }

    async fn service_error(&self, method: &str, error: ServiceError) -> McpError {
        // The request was sent and answered: only the answer could not be read.
        let unreadable = |reason: String| McpError::Unreadable {
            server: self.server.clone(),
            method: method.to_owned(),
            reason,
        };
        match error {
            ServiceError::McpError(data) => McpError::Rejected {
                server: self.server.clone(),
                method: method.to_owned(),
                code: data.code.0,
                message: data.message.into_owned(),
            },
            ServiceError::TransportClosed
            | ServiceError::TransportSend(_)
            | ServiceError::Cancelled { .. } => {
                // The pipe usually closes a moment before the exit is reaped: prefer the
                // exit status as the reason.
                let reason = self
                    .link
                    .reason_after_transport_error(&error.to_string(), EXIT_SETTLE)
                    .await;
                self.gone(method, reason)
            }
            ServiceError::Timeout { timeout } => McpError::Timeout {
                server: self.server.clone(),
                method: method.to_owned(),
                after: timeout,
            },
            other => unreadable(other.to_string()),
        }
    }

    /// Whether the server announced a capability in `initialize` (`resources`, `prompts`).
    fn supports(&self, capability: &str) -> bool {
        self.peer.peer_info().is_some_and(|info| match capability {
            "resources" => info.capabilities.resources.is_some(),
            "prompts" => info.capabilities.prompts.is_some(),
            _ => false,
        })
    }
}

/// Why a caller that cannot ask its user fails a call the server answered with questions.
const NOBODY_ANSWERS: &str = "the server asked for the user's input (`input_required`), and \
    nobody answers questions on this connection; use a tool that does not ask for input";

#[async_trait]
impl McpClient for RmcpClient {
    fn server(&self) -> &str {
        &self.server
    }

    async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let tools = self
            .request(
                "tools/list",
                self.request_timeout,
                self.peer.list_all_tools(),
            )
            .await?;
        Ok(tools.into_iter().map(convert::tool_from_rmcp).collect())
    }

    async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<McpToolResult, McpError> {
        let until = tokio::time::Instant::now() + timeout;
        let task = match self
            .call_tool_or_task(tool, arguments, None, timeout)
            .await?
        {
            McpCallOutcome::Done(result) => return Ok(result),
            McpCallOutcome::Task(task) => task,
            McpCallOutcome::InputRequired(_) => {
                return Err(McpError::Protocol {
                    server: self.server.clone(),
                    method: "tools/call".to_owned(),
                    reason: NOBODY_ANSWERS.to_owned(),
                })
            }
        };
        // This caller cannot wait for a task: follow it here, within the call's timeout.
        let state = super::tasks::follow(self, task, until, self.request_timeout).await?;
        task_result(self, state, timeout).await
    }

    async fn call_tool_or_task(
        &self,
        tool: &str,
        arguments: Value,
        input: Option<McpInputAnswers>,
        timeout: Duration,
    ) -> Result<McpCallOutcome, McpError> {
        let arguments = convert::arguments_object(&self.server, tool, "tools/call", arguments)?;
        let span = traced::span(&self.server, "tools/call", tool);
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        traced::carry(&mut params, &span);
        let refused = |reason: String| McpError::Protocol {
            server: self.server.clone(),
            method: "tools/call".to_owned(),
            reason,
        };
        if let Some(task_id) = input.as_ref().and_then(input::task_of) {
            // A task's questions: the answers go to the task, which goes on.
            let (responses, _) = input
                .map(input::answered)
                .transpose()
                .map_err(|e| refused(e.to_string()))?
                .unwrap_or_default();
            let params = UpdateTaskParams::new(&task_id, responses.unwrap_or_default());
            self.request("tasks/update", timeout, self.peer.update_task(params))
                .instrument(span.clone())
                .await?;
            return Ok(McpCallOutcome::Task(
                self.get_task(&task_id, timeout).await?,
            ));
        }
        if let Some(input) = input {
            let (responses, state) = input::answered(input).map_err(|e| refused(e.to_string()))?;
            params.input_responses = responses;
            params.request_state = state;
        }
        // A 2026-07-28 server may answer with questions (`input_required`): each round's
        // answers go back in a new request carrying the server's `requestState` unchanged.
        // Without an elicitor here, the caller asks its user and calls again.
        for _round in 0..input::MAX_ROUNDS {
            let response = self
                .request(
                    "tools/call",
                    timeout,
                    self.peer.call_tool_once(params.clone()),
                )
                .instrument(span.clone())
                .await;
            traced::record(&span, &response);
            let asked = match response? {
                CallToolResponse::Complete(result) => {
                    return Ok(McpCallOutcome::Done(convert::result_from_rmcp(result)))
                }
                CallToolResponse::Task(created) => {
                    return Ok(McpCallOutcome::Task(tasks::created(created)))
                }
                CallToolResponse::InputRequired(asked) => asked,
                _ => {
                    return Err(refused(
                        "the server answered with an unknown result type".into(),
                    ))
                }
            };
            let Some(elicitor) = &self.elicitor else {
                let questions = input::to_ask(&asked).map_err(|e| refused(e.to_string()))?;
                return Ok(McpCallOutcome::InputRequired(questions));
            };
            let (responses, state) = input::retry(elicitor, asked)
                .await
                .map_err(|e| refused(e.to_string()))?;
            params.input_responses = responses;
            params.request_state = state;
        }
        Err(refused(format!(
            "the server still asked for input after {} rounds of answers; giving up",
            input::MAX_ROUNDS
        )))
    }

    async fn get_task(&self, task_id: &str, timeout: Duration) -> Result<McpTaskState, McpError> {
        let result = self
            .request(
                "tasks/get",
                timeout,
                self.peer.get_task(GetTaskParams::new(task_id)),
            )
            .await?;
        Ok(tasks::detailed(result.task))
    }

    async fn cancel_task(&self, task_id: &str, timeout: Duration) -> Result<(), McpError> {
        self.request(
            "tasks/cancel",
            timeout,
            self.peer.cancel_task(CancelTaskParams::new(task_id)),
        )
        .await
    }

    fn task_updates(&self) -> Option<tokio::sync::broadcast::Receiver<McpTaskState>> {
        Some(self.tasks.subscribe())
    }

    async fn list_resources(&self) -> Result<Vec<McpResource>, McpError> {
        if !self.supports("resources") {
            return Ok(Vec::new());
        }
        let resources = self
            .request(
                "resources/list",
                self.request_timeout,
                self.peer.list_all_resources(),
            )
            .await?;
        Ok(resources
            .into_iter()
            .map(convert::resource_from_rmcp)
            .collect())
    }

    async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<Vec<McpResourceContent>, McpError> {
        let span = traced::span(&self.server, "resources/read", uri);
        let mut params = ReadResourceRequestParams::new(uri);
        traced::carry(&mut params, &span);
        let result = self
            .request("resources/read", timeout, self.peer.read_resource(params))
            .instrument(span.clone())
            .await;
        traced::record(&span, &result);
        Ok(result?
            .contents
            .into_iter()
            .map(convert::content_from_rmcp)
            .collect())
    }

    async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError> {
        if !self.supports("prompts") {
            return Ok(Vec::new());
        }
        let prompts = self
            .request(
                "prompts/list",
                self.request_timeout,
                self.peer.list_all_prompts(),
            )
            .await?;
        Ok(prompts.into_iter().map(convert::prompt_from_rmcp).collect())
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<McpPromptResult, McpError> {
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_null() {
            params = params.with_arguments(convert::arguments_object(
                &self.server,
                name,
                "prompts/get",
                arguments,
            )?);
        }
        let span = traced::span(&self.server, "prompts/get", name);
        traced::carry(&mut params, &span);
        let result = self
            .request("prompts/get", timeout, self.peer.get_prompt(params))
            .instrument(span.clone())
            .await;
        traced::record(&span, &result);
        Ok(convert::prompt_result_from_rmcp(result?))
    }

    async fn closed(&self) -> String {
        self.exited().await
    }

    fn list_changed(&self) -> watch::Receiver<u64> {
        self.changed.clone()
    }

    fn pid(&self) -> Option<u32> {
        self.child_pid()
    }

    fn protocol(&self) -> Option<String> {
        self.peer
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    fn extensions(&self) -> Vec<String> {
        self.peer
            .peer_info()
            .and_then(|info| {
                info.capabilities
                    .extensions
                    .as_ref()
                    .map(|extensions| extensions.keys().cloned().collect())
            })
            .unwrap_or_default()
    }

    async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        let session = self.session.lock().await.take();
        if let Some(mut session) = session {
            // Cancelling the session closes the child's stdin (or deletes the HTTP session).
            if let Err(error) = session.close_with_timeout(CLOSE_GRACE).await {
                tracing::warn!(server = %self.server, %error, "MCP session task failed while closing");
            }
        }
        match &self.link {
            Link::Child(process) => {
                if process.exited_within(CLOSE_GRACE).await.is_none() {
                    process.kill();
                }
                let reason = process.exited().await;
                tracing::info!(server = %self.server, "MCP server stopped: {reason}");
            }
            Link::Http(_) => {
                self.link.fail("the client was shut down");
                tracing::info!(server = %self.server, "MCP HTTP session closed");
            }
        }
    }
}

/// The result of a followed task that ended, or why there is none; a task still running
/// (its caller's time ran out) is cancelled.
async fn task_result(
    client: &RmcpClient,
    state: super::McpTaskState,
    timeout: Duration,
) -> Result<McpToolResult, McpError> {
    let failed = |reason: String| McpError::Protocol {
        server: client.server.clone(),
        method: "tools/call".to_owned(),
        reason,
    };
    match state.status {
        super::McpTaskStatus::Completed => state.result.ok_or_else(|| McpError::Unreadable {
            server: client.server.clone(),
            method: "tools/call".to_owned(),
            reason: format!("task {} completed without a result", state.task_id),
        }),
        super::McpTaskStatus::Failed => Err(failed(format!(
            "task {} failed: {}",
            state.task_id,
            state.error.as_deref().unwrap_or("no reason given")
        ))),
        super::McpTaskStatus::Cancelled => Err(failed(format!(
            "task {} was cancelled by the server",
            state.task_id
        ))),
        _ => {
            if let Err(e) = client
                .cancel_task(&state.task_id, client.request_timeout)
                .await
            {
                tracing::warn!(server = %client.server, task = %state.task_id, error = %e, "an abandoned MCP task was not cancelled");
            }
            Err(McpError::Timeout {
                server: client.server.clone(),
                method: "tools/call".to_owned(),
                after: timeout,
            })
        }
    }
}

/// Start every configured server concurrently; one result per server, in config order.
pub async fn connect_all(
    configs: &[McpServerConfig],
    self_exe: &Path,
) -> Vec<(String, Result<Arc<dyn McpClient>, McpError>)> {
    let connecting = configs.iter().map(|config| async move {
        let client = RmcpClient::connect(config, self_exe)
            .await
            .map(|client| Arc::new(client) as Arc<dyn McpClient>);
        (config.name.clone(), client)
    });
    futures::future::join_all(connecting).await
}
