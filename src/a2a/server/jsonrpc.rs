//! The JSON-RPC 2.0 binding: `POST /a2a/<agent>` with `{"jsonrpc": "2.0", "id", "method",
//! "params"}`; methods named as in the spec (`SendMessage`, `GetTask`, …); streaming methods
//! answer with Server-Sent Events whose data are JSON-RPC responses.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{HeaderMap, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{check_version, json, sse, A2aServer, Body, Caller};
use crate::a2a::wire::{
    methods, A2AError, JsonRpcId, JsonRpcRequest, JsonRpcResponse, StreamResponse,
};

/// Answer one JSON-RPC request for `agent`.
pub async fn handle(
    server: Arc<A2aServer>,
    agent: &str,
    headers: &HeaderMap,
    query: &str,
    body: Bytes,
) -> Response<Body> {
    let raw: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                JsonRpcId::Null,
                A2AError::parse_error(format!("the body is not JSON: {e}")),
            )
        }
    };
    let id = raw
        .get("id")
        .and_then(|v| serde_json::from_value::<JsonRpcId>(v.clone()).ok())
        .unwrap_or(JsonRpcId::Null);
    let request: JsonRpcRequest = match serde_json::from_value(raw) {
        Ok(r) => r,
        Err(e) => {
            return error(
                id,
                A2AError::invalid_request(format!(
                    "not a JSON-RPC 2.0 request ({e}); send {{\"jsonrpc\": \"2.0\", \"id\", \
                     \"method\", \"params\"}}"
                )),
            )
        }
    };
    if request.jsonrpc != "2.0" {
        return error(id, A2AError::invalid_request("`jsonrpc` must be \"2.0\""));
    }
    if let Err(e) = check_version(headers, query) {
        return error(id, e);
    }
    let caller = match server.authenticate(agent, headers) {
        Ok(caller) => caller,
        Err(e) => {
            let mut response = error(id, e);
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
    };
    let params = request.params.unwrap_or(Value::Object(Default::default()));
    match dispatch(&server, &caller, &request.method, params).await {
        Ok(Answer::Value(result)) => json(
            StatusCode::OK,
            "application/json",
            &JsonRpcResponse::success(id, result),
        ),
        Ok(Answer::Stream(updates)) => sse::response(updates, move |update| {
            let result = serde_json::to_value(update).unwrap_or(Value::Null);
            let line = serde_json::to_string(&JsonRpcResponse::success(id.clone(), result))
                .unwrap_or_default();
            sse::event(&line, None)
        }),
        Err(e) => error(id, e),
    }
}

enum Answer {
    Value(Value),
    Stream(mpsc::Receiver<StreamResponse>),
}

async fn dispatch(
    server: &Arc<A2aServer>,
    caller: &Caller,
    method: &str,
    params: Value,
) -> Result<Answer, A2AError> {
    let value = |v: Result<Value, serde_json::Error>| {
        v.map(Answer::Value)
            .map_err(|e| A2AError::internal(format!("the answer could not be encoded: {e}")))
    };
    match method {
        methods::SEND_MESSAGE => value(serde_json::to_value(
            server.send_message(caller, parse(params)?).await?,
        )),
        methods::SEND_STREAMING_MESSAGE => Ok(Answer::Stream(
            server.stream_message(caller, parse(params)?).await?,
        )),
        methods::GET_TASK => value(serde_json::to_value(
            server.get_task(caller, parse(params)?).await?,
        )),
        methods::LIST_TASKS => value(serde_json::to_value(
            server.list_tasks(caller, parse(params)?).await?,
        )),
        methods::CANCEL_TASK => value(serde_json::to_value(
            server.cancel_task(caller, parse(params)?).await?,
        )),
        methods::SUBSCRIBE_TO_TASK => Ok(Answer::Stream(
            server.subscribe(caller, parse(params)?).await?,
        )),
        methods::CREATE_PUSH_CONFIG => value(serde_json::to_value(
            server.create_push(caller, parse(params)?).await?,
        )),
        methods::GET_PUSH_CONFIG => value(serde_json::to_value(
            server.get_push(caller, parse(params)?).await?,
        )),
        methods::LIST_PUSH_CONFIGS => value(serde_json::to_value(
            server.list_push(caller, parse(params)?).await?,
        )),
        methods::DELETE_PUSH_CONFIG => {
            server.delete_push(caller, parse(params)?).await?;
            Ok(Answer::Value(Value::Object(Default::default())))
        }
        methods::GET_EXTENDED_AGENT_CARD => Err(A2AError::unsupported_operation(
            "this agent has no extended Agent Card (capabilities.extendedAgentCard is false)",
        )),
        other => Err(A2AError::method_not_found(other)),
    }
}

/// The params of a method, or `-32602` naming what is wrong.
pub(super) fn parse<T: DeserializeOwned>(params: Value) -> Result<T, A2AError> {
    serde_json::from_value(params)
        .map_err(|e| A2AError::invalid_params(format!("the params are not valid: {e}")))
}

fn error(id: JsonRpcId, e: A2AError) -> Response<Body> {
    json(
        StatusCode::OK,
        "application/json",
        &JsonRpcResponse::error(id, e.to_jsonrpc_error()),
    )
}
