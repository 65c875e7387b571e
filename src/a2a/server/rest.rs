//! The HTTP+JSON binding: the spec's routes below `/a2a/<agent>`, bodies and answers as the
//! protocol's JSON objects (`application/a2a+json`), GET parameters in the query (camelCase),
//! errors as `google.rpc.Status` with an `ErrorInfo` naming the A2A error, streams as
//! Server-Sent Events of `StreamResponse` objects.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{HeaderMap, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json as j, Value};

use super::routes::{query_param, RestOp};
use super::{check_version, json, sse, A2aServer, Body, Caller, UNAUTHENTICATED};
use crate::a2a::wire::{
    error_code, error_reason, A2AError, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SubscribeToTaskRequest, TaskPushNotificationConfig, TaskState,
    ERROR_INFO_TYPE, PROTOCOL_DOMAIN,
};

/// The media type of HTTP+JSON bodies.
pub const MEDIA_TYPE: &str = "application/a2a+json";

/// Answer one HTTP+JSON request `op` for `agent`.
pub async fn handle(
    server: Arc<A2aServer>,
    agent: &str,
    op: RestOp,
    headers: &HeaderMap,
    query: &str,
    body: Bytes,
) -> Response<Body> {
    if let Err(e) = check_version(headers, query) {
        return error(e);
    }
    let caller = match server.authenticate(agent, headers) {
        Ok(caller) => caller,
        Err(e) => {
            let mut response = error(e);
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
    };
    match run(&server, &caller, op, query, &body).await {
        Ok(value) => json(StatusCode::OK, MEDIA_TYPE, &value),
        Err(Streamed::Stream(updates)) => sse::response(updates, |update| {
            sse::event(&serde_json::to_string(update).unwrap_or_default(), None)
        }),
        Err(Streamed::Error(e)) => error(e),
    }
}

/// A stream, or an error: both leave the plain JSON path.
enum Streamed {
    Stream(tokio::sync::mpsc::Receiver<crate::a2a::wire::StreamResponse>),
    Error(A2AError),
}

impl From<A2AError> for Streamed {
    fn from(e: A2AError) -> Self {
        Streamed::Error(e)
    }
}

async fn run(
    server: &Arc<A2aServer>,
    caller: &Caller,
    op: RestOp,
    query: &str,
    body: &[u8],
) -> Result<Value, Streamed> {
    let encoded = |v: Result<Value, serde_json::Error>| {
        v.map_err(|e| {
            Streamed::Error(A2AError::internal(format!(
                "the answer could not be encoded: {e}"
            )))
        })
    };
    match op {
        RestOp::Send => encoded(serde_json::to_value(
            server.send_message(caller, parse_body(body)?).await?,
        )),
        RestOp::Stream => Err(Streamed::Stream(
            server.stream_message(caller, parse_body(body)?).await?,
        )),
        RestOp::GetTask(id) => encoded(serde_json::to_value(
            server
                .get_task(
                    caller,
                    GetTaskRequest {
                        id,
                        history_length: int_param(query, "historyLength")?,
                        tenant: None,
                    },
                )
                .await?,
        )),
        RestOp::ListTasks => encoded(serde_json::to_value(
            server.list_tasks(caller, list_request(query)?).await?,
        )),
        RestOp::Cancel(id) => {
            let mut request: CancelTaskRequest = if body.iter().all(u8::is_ascii_whitespace) {
                CancelTaskRequest {
                    id: id.clone(),
                    metadata: None,
                    tenant: None,
                }
            } else {
                parse_body_with_id(body, &id)?
            };
            request.id = id;
            encoded(serde_json::to_value(
                server.cancel_task(caller, request).await?,
            ))
        }
        RestOp::Subscribe(id) => Err(Streamed::Stream(
            server
                .subscribe(caller, SubscribeToTaskRequest { id, tenant: None })
                .await?,
        )),
        RestOp::CreatePush(task) => {
            let mut config: TaskPushNotificationConfig = parse_body_with_task(body, &task)?;
            config.task_id = task;
            encoded(serde_json::to_value(
                server.create_push(caller, config).await?,
            ))
        }
        RestOp::GetPush(task_id, id) => encoded(serde_json::to_value(
            server
                .get_push(
                    caller,
                    GetTaskPushNotificationConfigRequest {
                        task_id,
                        id,
                        tenant: None,
                    },
                )
                .await?,
        )),
        RestOp::ListPush(task_id) => encoded(serde_json::to_value(
            server
                .list_push(
                    caller,
                    ListTaskPushNotificationConfigsRequest {
                        task_id,
                        page_size: int_param(query, "pageSize")?,
                        page_token: query_param(query, "pageToken"),
                        tenant: None,
                    },
                )
                .await?,
        )),
        RestOp::DeletePush(task_id, id) => {
            server
                .delete_push(
                    caller,
                    DeleteTaskPushNotificationConfigRequest {
                        task_id,
                        id,
                        tenant: None,
                    },
                )
                .await?;
            Ok(j!({}))
        }
        RestOp::ExtendedCard => Err(Streamed::Error(A2AError::unsupported_operation(
            "this agent has no extended Agent Card (capabilities.extendedAgentCard is false)",
        ))),
    }
}

fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, A2AError> {
    serde_json::from_slice(body)
        .map_err(|e| A2AError::invalid_params(format!("the request body is not valid: {e}")))
}

/// The body, with the task id from the path filled in where the body left it out.
fn parse_body_with_id<T: DeserializeOwned>(body: &[u8], id: &str) -> Result<T, A2AError> {
    let mut value: Value = parse_body(body)?;
    if let Some(map) = value.as_object_mut() {
        map.entry("id").or_insert_with(|| Value::String(id.into()));
    }
    serde_json::from_value(value)
        .map_err(|e| A2AError::invalid_params(format!("the request body is not valid: {e}")))
}

fn parse_body_with_task<T: DeserializeOwned>(body: &[u8], task: &str) -> Result<T, A2AError> {
    let mut value: Value = parse_body(body)?;
    if let Some(map) = value.as_object_mut() {
        map.entry("taskId")
            .or_insert_with(|| Value::String(task.into()));
    }
    serde_json::from_value(value)
        .map_err(|e| A2AError::invalid_params(format!("the request body is not valid: {e}")))
}

fn int_param(query: &str, name: &str) -> Result<Option<i32>, A2AError> {
    query_param(query, name)
        .map(|v| {
            v.parse::<i32>().map_err(|_| {
                A2AError::invalid_params(format!("query parameter {name} must be an integer"))
            })
        })
        .transpose()
}

fn list_request(query: &str) -> Result<ListTasksRequest, A2AError> {
    let status = query_param(query, "status")
        .map(|s| {
            serde_json::from_value::<TaskState>(Value::String(s.clone())).map_err(|_| {
                A2AError::invalid_params(format!(
                    "status `{s}` is not a task state (TASK_STATE_WORKING, …)"
                ))
            })
        })
        .transpose()?;
    let after = query_param(query, "statusTimestampAfter")
        .map(|t| {
            chrono::DateTime::parse_from_rfc3339(&t)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|_| {
                    A2AError::invalid_params(format!(
                        "statusTimestampAfter `{t}` is not an ISO 8601 time \
                         (2026-01-02T03:04:05Z)"
                    ))
                })
        })
        .transpose()?;
    let include = query_param(query, "includeArtifacts").map(|v| v == "true");
    Ok(ListTasksRequest {
        context_id: query_param(query, "contextId"),
        status,
        page_size: int_param(query, "pageSize")?,
        page_token: query_param(query, "pageToken"),
        history_length: int_param(query, "historyLength")?,
        status_timestamp_after: after,
        include_artifacts: include,
        tenant: None,
    })
}

/// An A2A error as `google.rpc.Status` JSON with the HTTP status the spec maps it to.
pub fn error(e: A2AError) -> Response<Body> {
    let (http, status, reason) = match e.code {
        UNAUTHENTICATED => (401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
        error_code::TASK_NOT_FOUND => (404, "NOT_FOUND", error_reason(e.code)),
        error_code::METHOD_NOT_FOUND => (404, "NOT_FOUND", error_reason(e.code)),
        error_code::CONTENT_TYPE_NOT_SUPPORTED
        | error_code::INVALID_PARAMS
        | error_code::INVALID_REQUEST
        | error_code::PARSE_ERROR => (400, "INVALID_ARGUMENT", error_reason(e.code)),
        error_code::TASK_NOT_CANCELABLE
        | error_code::PUSH_NOTIFICATION_NOT_SUPPORTED
        | error_code::UNSUPPORTED_OPERATION
        | error_code::EXTENDED_CARD_NOT_CONFIGURED
        | error_code::EXTENSION_SUPPORT_REQUIRED
        | error_code::VERSION_NOT_SUPPORTED => (400, "FAILED_PRECONDITION", error_reason(e.code)),
        _ => (500, "INTERNAL", "INTERNAL_ERROR"),
    };
    let body = j!({
        "error": {
            "code": http,
            "status": status,
            "message": e.message,
            "details": [{
                "@type": ERROR_INFO_TYPE,
                "reason": reason,
                "domain": PROTOCOL_DOMAIN,
                "metadata": {"timestamp": chrono::Utc::now().to_rfc3339()},
            }],
        }
    });
    let code = StatusCode::from_u16(http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(code, MEDIA_TYPE, &body)
}
