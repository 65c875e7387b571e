//! A fake OpenAI-compatible chat-completions server on 127.0.0.1 (tokio + hyper 1), for tests
//! that need a real HTTP peer: it answers `POST /v1/chat/completions` from a queue of scripted
//! replies, streams real SSE when the request says `stream: true` (text in small deltas, tool-call
//! arguments split over several chunks, the bytes cut into small frames that split lines and
//! UTF-8 characters, a final usage chunk when `stream_options.include_usage`, `data: [DONE]`),
//! and records every request body and `Authorization` header.
//!
//! It can also fail the way real endpoints do, for the fault matrix (`examples/faults`): a
//! [`Scripted`] reply may be an HTTP error, a hang, a stream cut in the middle of a tool call's
//! arguments, a body that is not JSON, or any reply held until a gate opens; and a
//! [`Responder`] can compute each reply from the request instead of a queue.
//!
//! ```ignore
//! let fake = FakeOpenAi::start().await;
//! fake.push_tool_calls(vec![("add", json!({"a": 1, "b": 2}))]);
//! fake.push_text("3");
//! // point a model at fake.base_url() …
//! assert_eq!(fake.requests()[1]["messages"][2]["role"], "tool");
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// Usage the fake reports for every reply.
pub const PROMPT_TOKENS: u32 = 17;
pub const COMPLETION_TOKENS: u32 = 5;

/// Bytes per streamed frame: small, so frames split SSE lines and multi-byte characters.
const FRAME_BYTES: usize = 11;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Scripted {
    Text(String),
    ToolCalls(Vec<(String, Value)>),
    Error {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    Slow {
        delay: Duration,
        text: String,
    },
    /// Accept the request and never answer (until the client gives up).
    Hang,
    /// Stream these calls, but close the stream in the middle of the first call's arguments
    /// (no `finish_reason`, no `[DONE]`): a server that dropped the connection.
    CutToolCall(Vec<(String, Value)>),
    /// Answer 200 with a body that is not JSON (an SSE `data:` line that is not JSON when the
    /// request streams).
    InvalidJson,
    /// Answer with `then` once `open` is true (a reply held while a test acts).
    Gated {
        open: tokio::sync::watch::Receiver<bool>,
        then: Box<Scripted>,
    },
}

/// Computes the reply to a request (its JSON body) when the queue is empty.
pub type Responder = Arc<dyn Fn(&Value) -> Scripted + Send + Sync>;

/// How the fake answers once its queue is empty: like a small obliging model. An extraction
/// request (`response_format: json_object`) gets `{"memory_updates": []}`; a request whose last
/// message is a tool result gets `Done: <that result>`; a user message with tools offered gets
/// a call of `tool` (when that tool is offered); anything else gets `ok`.
#[derive(Debug, Clone)]
pub struct Auto {
    pub tool: Option<(String, Value)>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Scripted>,
    auto: Option<Auto>,
    responder: Option<Responder>,
    requests: Vec<Value>,
    authorizations: Vec<Option<String>>,
}

/// The running server; stops accepting when dropped.
pub struct FakeOpenAi {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FakeOpenAi {
    /// Bind a free port on 127.0.0.1 and serve.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, state.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            state,
            accept,
        }
    }

    /// A server on its own one-thread runtime (for tests that are not async themselves), in
    /// [`Auto`] mode calling `tool` with `arguments` whenever a user message offers that tool.
    /// Keep the runtime alive as long as the server.
    pub fn start_auto(tool: &str, arguments: Value) -> (tokio::runtime::Runtime, Self) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let fake = runtime.block_on(Self::start());
        fake.set_auto(Auto {
            tool: Some((tool.to_string(), arguments)),
        });
        (runtime, fake)
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push_text(&self, text: &str) {
        self.push(Scripted::Text(text.to_string()));
    }

    /// A reply calling these tools, in order, with these argument objects.
    pub fn push_tool_calls<N: Into<String>>(&self, calls: Vec<(N, Value)>) {
        let calls = calls.into_iter().map(|(n, v)| (n.into(), v)).collect();
        self.push(Scripted::ToolCalls(calls));
    }

    /// An HTTP error answer.
    pub fn push_error(&self, status: u16, body: &str) {
        self.push(Scripted::Error {
            status,
            body: body.to_string(),
            retry_after: None,
        });
    }

    /// A 429 with `Retry-After: <retry_after>`.
    pub fn push_rate_limited(&self, retry_after: &str) {
        self.push(Scripted::Error {
            status: 429,
            body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#.into(),
            retry_after: Some(retry_after.to_string()),
        });
    }

    /// Answer by [`Auto`] once the queue is empty.
    pub fn set_auto(&self, auto: Auto) {
        self.state.lock().unwrap().auto = Some(auto);
    }

    /// Answer every request by `responder` once the queue is empty (before [`Auto`]).
    pub fn set_responder(&self, responder: Responder) {
        self.state.lock().unwrap().responder = Some(responder);
    }

    /// A text reply that starts only after `delay` (for timeout tests).
    pub fn push_slow_text(&self, text: &str, delay: Duration) {
        self.push(Scripted::Slow {
            delay,
            text: text.to_string(),
        });
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().authorizations.clone()
    }

    fn push(&self, scripted: Scripted) {
        self.state.lock().unwrap().queue.push_back(scripted);
    }
}

/// The models `GET /v1/models` lists.
pub const MODELS: [&str; 3] = ["gpt-4o-mini", "qwen2.5:7b", "fake-model"];

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Body>, Infallible> {
    if req.method() == Method::GET && req.uri().path() == "/v1/models" {
        let data: Vec<Value> = MODELS
            .iter()
            .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
            .collect();
        let list = json!({"object": "list", "data": data});
        return Ok(Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(list.to_string())).boxed_unsync())
            .unwrap());
    }
    if req.method() != Method::POST || req.uri().path() != "/v1/chat/completions" {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "fake OpenAI serves only POST /v1/chat/completions",
        ));
    }
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let Ok(collected) = req.into_body().collect().await else {
        return Ok(plain(
            StatusCode::BAD_REQUEST,
            "could not read the request body",
        ));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&collected.to_bytes()) else {
        return Ok(plain(
            StatusCode::BAD_REQUEST,
            "the request body is not JSON",
        ));
    };
    let (queued, responder, number) = {
        let mut state = state.lock().unwrap();
        state.requests.push(body.clone());
        state.authorizations.push(authorization);
        let queued = state.queue.pop_front();
        let responder = state.responder.clone().filter(|_| queued.is_none());
        let queued = match (queued, &responder) {
            (None, None) => state.auto.as_ref().map(|auto| auto_reply(auto, &body)),
            (queued, _) => queued,
        };
        (queued, responder, state.requests.len())
    };
    // The responder runs outside the lock: it may look at state of its own.
    let scripted = queued.or_else(|| responder.map(|respond| respond(&body)));
    let Some(mut scripted) = scripted else {
        return Ok(plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake OpenAI: no scripted reply left",
        ));
    };
    while let Scripted::Gated { mut open, then } = scripted {
        // A closed sender leaves the gate as it is: answer anyway.
        let _ = open.wait_for(|open| *open).await;
        scripted = *then;
    }
    if let Scripted::Slow { delay, text } = scripted {
        tokio::time::sleep(delay).await;
        scripted = Scripted::Text(text);
    }
    if let Scripted::Hang = scripted {
        // Long past any client's timeout; the client closing the connection ends it.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        return Ok(plain(StatusCode::GATEWAY_TIMEOUT, "fake OpenAI hung"));
    }
    if let Scripted::InvalidJson = scripted {
        return Ok(invalid_json(body["stream"] == json!(true)));
    }
    if let Scripted::CutToolCall(calls) = &scripted {
        let calls = tool_calls(&Scripted::ToolCalls(calls.clone()), number);
        return Ok(cut_stream(&calls));
    }
    if let Scripted::Error {
        status,
        body,
        retry_after,
    } = scripted
    {
        let status = StatusCode::from_u16(status).unwrap();
        let mut response = plain(status, &body);
        if let Some(wait) = retry_after {
            response
                .headers_mut()
                .insert("retry-after", wait.parse().unwrap());
        }
        return Ok(response);
    }
    let calls = tool_calls(&scripted, number);
    let text = match &scripted {
        Scripted::Text(text) => text.clone(),
        _ => String::new(),
    };
    if body["stream"] == json!(true) {
        let usage = body["stream_options"]["include_usage"] == json!(true);
        return Ok(streamed(&text, &calls, usage));
    }
    Ok(whole(&text, &calls))
}

fn auto_reply(auto: &Auto, body: &Value) -> Scripted {
    if body["response_format"]["type"] == "json_object" {
        return Scripted::Text(r#"{"memory_updates": []}"#.into());
    }
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or_default();
        return Scripted::Text(format!("Done: {result}"));
    }
    let offered = |name: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == name))
    };
    match &auto.tool {
        Some((name, args)) if last["role"] == "user" && offered(name) => {
            Scripted::ToolCalls(vec![(name.clone(), args.clone())])
        }
        _ => Scripted::Text("ok".into()),
    }
}

/// `(id, name, arguments JSON text)` of the scripted calls; ids are `call_<request>_<index>`.
fn tool_calls(scripted: &Scripted, request_number: usize) -> Vec<(String, String, String)> {
    match scripted {
        Scripted::ToolCalls(calls) => calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                (
                    format!("call_{request_number}_{i}"),
                    name.clone(),
                    args.to_string(),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn usage() -> Value {
    json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
           "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS})
}

fn finish_reason(calls: &[(String, String, String)]) -> &'static str {
    if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn whole(text: &str, calls: &[(String, String, String)]) -> Response<Body> {
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["content"] = Value::Null;
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    let reply = json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(calls)}],
        "usage": usage(),
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(reply.to_string())).boxed_unsync())
        .unwrap()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

/// Pieces of about `size` characters.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn stream_events(
    text: &str,
    calls: &[(String, String, String)],
    include_usage: bool,
) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in pieces(text, 3) {
        events.push(chunk(json!({"content": piece}), None));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let head = json!({"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
        events.push(chunk(json!({"tool_calls": [head]}), None));
        for piece in pieces(args, 4) {
            let part = json!({"index": i, "function": {"arguments": piece}});
            events.push(chunk(json!({"tool_calls": [part]}), None));
        }
    }
    events.push(chunk(json!({}), Some(finish_reason(calls))));
    if include_usage {
        events.push(
            json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                           "usage": usage()})
            .to_string(),
        );
    }
    events.push("[DONE]".into());
    events
}

fn streamed(text: &str, calls: &[(String, String, String)], include_usage: bool) -> Response<Body> {
    let bytes: Vec<u8> = stream_events(text, calls, include_usage)
        .iter()
        .flat_map(|data| format!("data: {data}\n\n").into_bytes())
        .collect();
    let frames: VecDeque<Bytes> = bytes
        .chunks(FRAME_BYTES)
        .map(Bytes::copy_from_slice)
        .collect();
    let stream = futures::stream::unfold(frames, |mut frames| async move {
        let frame = frames.pop_front()?;
        tokio::time::sleep(Duration::from_millis(1)).await;
        Some((Ok::<_, Infallible>(Frame::data(frame)), frames))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap()
}

/// A 200 whose body is not JSON: an SSE stream whose first event's data is broken, or a
/// truncated JSON object.
fn invalid_json(stream: bool) -> Response<Body> {
    let (content_type, body) = if stream {
        (
            "text/event-stream",
            "data: {\"id\": \"chatcmpl-fake\", \"choices\": [{\n\n",
        )
    } else {
        (
            "application/json",
            "{\"id\": \"chatcmpl-fake\", \"choices\": [{\"message\": ",
        )
    };
    Response::builder()
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .unwrap()
}

/// The stream of a tool-call reply cut in the middle of the first call's arguments.
fn cut_stream(calls: &[(String, String, String)]) -> Response<Body> {
    let events = stream_events("", calls, false);
    // The role chunk, the call's head, then half of its argument chunks.
    let argument_chunks = events.len().saturating_sub(4);
    let keep = 2 + (argument_chunks / 2).max(1);
    let bytes: Vec<u8> = events
        .iter()
        .take(keep)
        .flat_map(|data| format!("data: {data}\n\n").into_bytes())
        .collect();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Full::new(Bytes::from(bytes)).boxed_unsync())
        .unwrap()
}

fn plain(status: StatusCode, body: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body.to_string())).boxed_unsync())
        .unwrap()
}
