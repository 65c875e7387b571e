//! An A2A 1.0 client: a remote agent found by its Agent Card, called over the binding its card
//! prefers among those Hermes speaks (JSON-RPC 2.0 or HTTP+JSON), with the `A2A-Version`
//! header and a bearer token when configured.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::wire::{
    AgentCard, CancelTaskRequest, GetTaskRequest, JsonRpcResponse, ListTasksRequest,
    ListTasksResponse, Message, SendMessageConfiguration, SendMessageRequest, SendMessageResponse,
    Task, TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC,
};
use super::{PROTOCOL_VERSION, VERSION_HEADER};

#[derive(Debug, thiserror::Error)]
pub enum A2aClientError {
    #[error("the Agent Card at {url} cannot be read: {reason}; check agents.<name>.a2a.card_url and that the agent runs")]
    Card { url: String, reason: String },
    #[error("the remote agent at {url} speaks neither JSON-RPC nor HTTP+JSON A2A 1.0 (its card lists: {offered})")]
    NoBinding { url: String, offered: String },
    #[error("the remote agent could not be reached: {0}")]
    Http(String),
    /// The remote agent answered with an A2A error.
    #[error("the remote agent refused: {message} (A2A error {code})")]
    Remote { code: i32, message: String },
    #[error("the remote agent's answer is not valid A2A: {0}")]
    Invalid(String),
}

impl A2aClientError {
    /// The remote agent does not know the task (A2A `TaskNotFoundError`).
    pub fn is_not_found(&self) -> bool {
        matches!(self, A2aClientError::Remote { code, .. } if *code == super::wire::error_code::TASK_NOT_FOUND)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    JsonRpc,
    HttpJson,
}

/// A remote A2A agent.
#[derive(Debug, Clone)]
pub struct RemoteAgent {
    pub card: AgentCard,
    url: String,
    binding: Binding,
    token: Option<String>,
    http: reqwest::Client,
}

/// Where the card of an agent is: `card_url` itself when it names a `.json` file, else the
/// well-known path below it.
pub fn card_location(card_url: &str) -> String {
    if card_url.ends_with(".json") {
        card_url.to_owned()
    } else {
        format!(
            "{}{}",
            card_url.trim_end_matches('/'),
            super::server::CARD_PATH
        )
    }
}

impl RemoteAgent {
    /// Read the agent's card and pick the binding to call it with.
    pub async fn discover(
        card_url: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Self, A2aClientError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        let url = card_location(card_url);
        let card_error = |reason: String| A2aClientError::Card {
            url: url.clone(),
            reason,
        };
        let mut request = http.get(&url);
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| card_error(e.to_string()))?;
        if !response.status().is_success() {
            return Err(card_error(format!("HTTP {}", response.status())));
        }
        let card: AgentCard = response
            .json()
            .await
            .map_err(|e| card_error(e.to_string()))?;
        let pick = card.supported_interfaces.iter().find_map(|i| {
            let major = i.protocol_version.split('.').next() == Some("1");
            let binding = match i.protocol_binding.as_str() {
                TRANSPORT_PROTOCOL_JSONRPC => Some(Binding::JsonRpc),
                TRANSPORT_PROTOCOL_HTTP_JSON => Some(Binding::HttpJson),
                _ => None,
            }?;
            major.then(|| (binding, i.url.clone()))
        });
        let Some((binding, url)) = pick else {
            let offered: Vec<String> = card
                .supported_interfaces
                .iter()
                .map(|i| format!("{} {}", i.protocol_binding, i.protocol_version))
                .collect();
            return Err(A2aClientError::NoBinding {
                url: card_url.to_owned(),
                offered: offered.join(", "),
            });
        };
        Ok(Self {
            card,
            url: url.trim_end_matches('/').to_owned(),
            binding,
            token,
            http,
        })
    }

    /// `SendMessage` of `message`, answered at once (`returnImmediately`) when asked.
    pub async fn send(
        &self,
        message: Message,
        return_immediately: bool,
    ) -> Result<SendMessageResponse, A2aClientError> {
        let request = SendMessageRequest {
            message,
            configuration: Some(SendMessageConfiguration {
                accepted_output_modes: Some(vec!["text/plain".into(), "application/json".into()]),
                task_push_notification_config: None,
                history_length: Some(0),
                return_immediately: Some(return_immediately),
            }),
            metadata: None,
            tenant: None,
        };
        let params = to_value(&request)?;
        match self.binding {
            Binding::JsonRpc => self.rpc("SendMessage", params).await,
            Binding::HttpJson => {
                self.rest(reqwest::Method::POST, "/message:send", Some(params))
                    .await
            }
        }
    }

    pub async fn get_task(&self, id: &str) -> Result<Task, A2aClientError> {
        match self.binding {
            Binding::JsonRpc => {
                let request = GetTaskRequest {
                    id: id.to_owned(),
                    history_length: Some(0),
                    tenant: None,
                };
                self.rpc("GetTask", to_value(&request)?).await
            }
            Binding::HttpJson => {
                self.rest(
                    reqwest::Method::GET,
                    &format!("/tasks/{id}?historyLength=0"),
                    None,
                )
                .await
            }
        }
    }

    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aClientError> {
        let request = CancelTaskRequest {
            id: id.to_owned(),
            metadata: None,
            tenant: None,
        };
        match self.binding {
            Binding::JsonRpc => self.rpc("CancelTask", to_value(&request)?).await,
            Binding::HttpJson => {
                self.rest(
                    reqwest::Method::POST,
                    &format!("/tasks/{id}:cancel"),
                    Some(to_value(&request)?),
                )
                .await
            }
        }
    }

    /// Whether the agent's card offers streaming.
    pub fn streams(&self) -> bool {
        self.card.capabilities.streaming == Some(true)
    }

    /// `SubscribeToTask`: wait for task `id` to change, for at most `wait`. The state it
    /// reached when the stream said it ended or asked for input; none when the stream ended
    /// or the wait passed first (read it with [`Self::get_task`]).
    pub async fn wait_for_change(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<Option<super::wire::TaskState>, A2aClientError> {
        use futures::StreamExt;
        let request = match self.binding {
            Binding::JsonRpc => self.authorized(self.http.post(&self.url)).json(&json!({
                "jsonrpc": "2.0",
                "id": uuid::Uuid::now_v7().to_string(),
                "method": "SubscribeToTask",
                "params": {"id": id},
            })),
            Binding::HttpJson => self.authorized(
                self.http
                    .post(format!("{}/tasks/{id}:subscribe", self.url))
                    .header(reqwest::header::CONTENT_TYPE, "application/a2a+json")
                    .body("{}"),
            ),
        };
        let response = request
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .timeout(wait)
            .send()
            .await
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        if !response.status().is_success() {
            return Err(A2aClientError::Http(format!("HTTP {}", response.status())));
        }
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = tokio::time::timeout_at(deadline, body.next()).await;
            let chunk = match next {
                Err(_) | Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => return Err(A2aClientError::Http(e.to_string())),
                Ok(Some(Ok(chunk))) => chunk,
            };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if let Some(state) = settled_state(&event, self.binding) {
                    return Ok(Some(state));
                }
            }
        }
    }

    /// The tasks of `context`, with the history that shows which message started each.
    pub async fn list_tasks(&self, context: &str) -> Result<ListTasksResponse, A2aClientError> {
        match self.binding {
            Binding::JsonRpc => {
                let request = ListTasksRequest {
                    context_id: Some(context.to_owned()),
                    status: None,
                    page_size: Some(100),
                    page_token: None,
                    history_length: None,
                    status_timestamp_after: None,
                    include_artifacts: Some(true),
                    tenant: None,
                };
                self.rpc("ListTasks", to_value(&request)?).await
            }
            Binding::HttpJson => {
                let path = format!("/tasks?contextId={context}&pageSize=100&includeArtifacts=true");
                self.rest(reqwest::Method::GET, &path, None).await
            }
        }
    }

    async fn rpc<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
    ) -> Result<T, A2aClientError> {
        let body = json!({
            "jsonrpc": "2.0",
            "id": uuid::Uuid::now_v7().to_string(),
            "method": method,
            "params": params,
        });
        let response = self
            .authorized(self.http.post(&self.url))
            .json(&body)
            .send()
            .await
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        let reply: JsonRpcResponse = serde_json::from_str(&text).map_err(|_| {
            A2aClientError::Http(format!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            ))
        })?;
        if let Some(error) = reply.error {
            return Err(A2aClientError::Remote {
                code: error.code,
                message: error.message,
            });
        }
        let result = reply
            .result
            .ok_or_else(|| A2aClientError::Invalid("a JSON-RPC answer without result".into()))?;
        serde_json::from_value(result).map_err(|e| A2aClientError::Invalid(e.to_string()))
    }

    async fn rest<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, A2aClientError> {
        let mut request = self.authorized(self.http.request(method, format!("{}{path}", self.url)));
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/a2a+json")
                .body(body.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| A2aClientError::Http(e.to_string()))?;
        if !status.is_success() {
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let reason = value["error"]["details"]
                .as_array()
                .and_then(|d| d.iter().find_map(|x| x["reason"].as_str()))
                .unwrap_or("");
            let code = super::wire::reason_to_error_code(reason).unwrap_or(-32603);
            let message = value["error"]["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    format!(
                        "HTTP {status}: {}",
                        text.chars().take(300).collect::<String>()
                    )
                });
            return Err(A2aClientError::Remote { code, message });
        }
        serde_json::from_str(&text).map_err(|e| A2aClientError::Invalid(e.to_string()))
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.header(VERSION_HEADER, PROTOCOL_VERSION);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

fn to_value(value: &impl serde::Serialize) -> Result<Value, A2aClientError> {
    serde_json::to_value(value).map_err(|e| A2aClientError::Invalid(e.to_string()))
}

/// The state an SSE event reports when it ends a stream (terminal, or asking for input).
fn settled_state(event: &str, binding: Binding) -> Option<super::wire::TaskState> {
    let data: String = event
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim_start)
        .collect::<Vec<_>>()
        .join("\n");
    let value: Value = serde_json::from_str(&data).ok()?;
    let update = match binding {
        Binding::JsonRpc => value.get("result")?.clone(),
        Binding::HttpJson => value,
    };
    let state = update
        .pointer("/statusUpdate/status/state")
        .or_else(|| update.pointer("/task/status/state"))?;
    let state: super::wire::TaskState = serde_json::from_value(state.clone()).ok()?;
    let settled = state.is_terminal()
        || matches!(
            state,
            super::wire::TaskState::InputRequired | super::wire::TaskState::AuthRequired
        );
    settled.then_some(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_event_that_ends_or_asks_for_input_settles_the_wait() {
        let jsonrpc = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n";
        assert_eq!(
            settled_state(jsonrpc, Binding::JsonRpc),
            Some(super::super::wire::TaskState::Completed)
        );
        let working = "data: {\"statusUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}\n\n";
        assert_eq!(settled_state(working, Binding::HttpJson), None);
        let asks = "data: {\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_INPUT_REQUIRED\"}}}\n\n";
        assert_eq!(
            settled_state(asks, Binding::HttpJson),
            Some(super::super::wire::TaskState::InputRequired)
        );
    }
}
