//! A fake Anthropic Messages server (`POST /v1/messages`, `GET /v1/models`) on 127.0.0.1 that
//! plays a thinking model, keeps a prompt cache, and checks what the real API checks.
//!
//! With `thinking` enabled every reply starts with a thinking block signed by the fake; then a
//! text block or `tool_use` blocks. Streamed replies send the real event sequence
//! (`message_start` with usage, `content_block_start`, `thinking_delta` / `signature_delta`,
//! `text_delta`, `input_json_delta` in small pieces, `content_block_stop`, `ping`,
//! `message_delta` with `stop_reason` and output usage, `message_stop`) in frames that split
//! lines and characters.
//!
//! Like the real API it refuses (Anthropic error JSON): a request without `anthropic-version`,
//! a wrong `x-api-key` (when one is required), an unknown model, more than 4 `cache_control`
//! breakpoints, a `tool_result` without its `tool_use` in the message before, a thinking block
//! whose signature is not the fake's for that exact text, a tool loop whose assistant step does
//! not start with its thinking block while thinking is on, a temperature with thinking, and a
//! thinking budget below 1024 or not below `max_tokens`.
//!
//! The prompt cache works like the real one, in tokens of 4 bytes: the prompt is tools, then
//! system blocks, then message blocks; a breakpoint writes the prefix that ends at its block;
//! a request reads the longest prefix, ending at any of its block boundaries up to its last
//! breakpoint, that an earlier request wrote. Usage reports `cache_read_input_tokens`,
//! `cache_creation_input_tokens` and the rest as `input_tokens`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::fake_http::{self, digest, pieces, Body, Received, Server};

mod cache;
mod rules;

use cache::cache_usage;
use rules::check;

/// The models `GET /v1/models` lists and requests may name.
pub const MODELS: [&str; 3] = ["claude-sonnet-4-5", "claude-haiku-4-5", "fake-model"];

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Scripted {
    Text(String),
    ToolCalls(Vec<(String, Value)>),
    Error {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// Stream these calls but close the connection in the middle of the first call's input.
    CutToolCall(Vec<(String, Value)>),
    /// Start answering, then send an `error` event of this type.
    ErrorEvent(String),
    /// HTTP 429 with an exhausted token limit that resets this many seconds after the answer
    /// (no `retry-after`).
    RateLimitedFor(i64),
}

/// How the fake answers once its queue is empty (see `fake_openai::Auto`).
#[derive(Debug, Clone)]
pub struct Auto {
    pub tool: Option<(String, Value)>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Scripted>,
    auto: Option<Auto>,
    requests: Vec<Received>,
    /// Every request, model-list probes included.
    received: Vec<Received>,
    required_key: Option<String>,
    /// Prompt prefixes written to the cache (their hashes).
    cache: HashSet<String>,
    /// Thinking blocks issued, by reply number.
    issued: HashMap<usize, Value>,
    /// The usage of every reply, in order.
    usage: Vec<Value>,
}

/// The running fake; stops when dropped.
pub struct FakeAnthropic {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl FakeAnthropic {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let server = Server::start(Arc::new(move |req| {
            let state = shared.clone();
            Box::pin(async move { handle(req, &state) })
        }))
        .await;
        Self { server, state }
    }

    /// A fake on its own runtime in [`Auto`] mode calling `tool` with `arguments`.
    pub fn start_auto(tool: &str, arguments: Value) -> (tokio::runtime::Runtime, Self) {
        let runtime = fake_http::runtime();
        let fake = runtime.block_on(Self::start());
        fake.set_auto(Auto {
            tool: Some((tool.to_string(), arguments)),
        });
        (runtime, fake)
    }

    /// `http://127.0.0.1:<port>` (the API's paths begin with `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr)
    }

    pub fn set_auto(&self, auto: Auto) {
        self.state.lock().unwrap().auto = Some(auto);
    }

    /// Refuse requests whose `x-api-key` is not `key`.
    pub fn require_key(&self, key: &str) {
        self.state.lock().unwrap().required_key = Some(key.into());
    }

    pub fn push(&self, scripted: Scripted) {
        self.state.lock().unwrap().queue.push_back(scripted);
    }

    pub fn push_text(&self, text: &str) {
        self.push(Scripted::Text(text.into()));
    }

    pub fn push_tool_calls(&self, calls: Vec<(&str, Value)>) {
        self.push(Scripted::ToolCalls(
            calls.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
        ));
    }

    /// HTTP 529 `overloaded_error`, with `retry-after` when given.
    pub fn push_overloaded(&self, retry_after: Option<&str>) {
        self.push(Scripted::Error {
            status: 529,
            body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            headers: retry_after
                .map(|w| vec![("retry-after".to_string(), w.to_string())])
                .unwrap_or_default(),
        });
    }

    /// HTTP 429 with an exhausted token limit that resets `seconds` after the answer (no
    /// `retry-after`).
    pub fn push_rate_limited_until_reset(&self, seconds: i64) {
        self.push(Scripted::RateLimitedFor(seconds));
    }

    pub fn push_error(&self, status: u16, kind: &str, message: &str) {
        self.push(Scripted::Error {
            status,
            body: json!({"type": "error", "error": {"type": kind, "message": message}}),
            headers: Vec::new(),
        });
    }

    /// Every request body, parsed, in order.
    pub fn requests(&self) -> Vec<Value> {
        let state = self.state.lock().unwrap();
        state
            .requests
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    /// Every request body exactly as received.
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        let state = self.state.lock().unwrap();
        state.requests.iter().map(|r| r.body.to_vec()).collect()
    }

    /// Header `name` of every message request.
    pub fn headers(&self, name: &str) -> Vec<Option<String>> {
        let state = self.state.lock().unwrap();
        state.requests.iter().map(|r| r.header(name)).collect()
    }

    /// `(method path, header name)` of every request, model-list probes included.
    pub fn received(&self, name: &str) -> Vec<(String, Option<String>)> {
        let state = self.state.lock().unwrap();
        state
            .received
            .iter()
            .map(|r| (format!("{} {}", r.method, r.path), r.header(name)))
            .collect()
    }

    /// The `usage` of every reply sent, in order.
    pub fn reported_usage(&self) -> Vec<Value> {
        self.state.lock().unwrap().usage.clone()
    }

    /// The thinking block issued with reply number `n` (1-based), exactly as sent.
    pub fn issued_thinking(&self, n: usize) -> Option<Value> {
        self.state.lock().unwrap().issued.get(&n).cloned()
    }
}

/// The fake's signature of a thinking text.
pub fn signature(thinking: &str) -> String {
    format!(
        "EqQBCkYIBxgC{}",
        digest(&format!("fake-anthropic-secret {thinking}"))
    )
}

pub(super) fn error(status: u16, kind: &str, message: &str) -> hyper::Response<Body> {
    fake_http::json(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

fn handle(req: Received, state: &Mutex<State>) -> hyper::Response<Body> {
    let mut state = state.lock().unwrap();
    state.received.push(req.clone());
    if req.header("anthropic-version").is_none() {
        return error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        );
    }
    if let Some(key) = &state.required_key {
        if req.header("x-api-key").as_deref() != Some(key) {
            return error(401, "authentication_error", "invalid x-api-key");
        }
    }
    if req.method == "GET" && req.path == "/v1/models" {
        let data: Vec<Value> = MODELS
            .iter()
            .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-09-29T00:00:00Z"}))
            .collect();
        return fake_http::json(
            200,
            &json!({"data": data, "has_more": false,
            "first_id": MODELS[0], "last_id": MODELS[2]}),
        );
    }
    if req.method != "POST" || req.path != "/v1/messages" {
        return error(404, "not_found_error", "Not found");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return error(
            400,
            "invalid_request_error",
            "There was an error parsing the body of your request.",
        );
    };
    state.requests.push(req.clone());
    let number = state.requests.len();
    let model = body["model"].as_str().unwrap_or_default().to_string();
    if !MODELS.contains(&model.as_str()) {
        return error(404, "not_found_error", &format!("model: {model}"));
    }
    if let Some(refusal) = check(&body) {
        return refusal;
    }
    let scripted = match state.queue.pop_front() {
        Some(s) => s,
        None => match &state.auto {
            Some(auto) => auto_reply(auto, &body),
            None => return error(500, "api_error", "fake Anthropic: no scripted reply left"),
        },
    };
    let scripted = match scripted {
        Scripted::RateLimitedFor(seconds) => {
            let reset = (chrono::Utc::now() + chrono::Duration::seconds(seconds)).to_rfc3339();
            Scripted::Error {
                status: 429,
                body: json!({"type": "error", "error": {"type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your organization."}}),
                headers: vec![
                    ("anthropic-ratelimit-tokens-remaining".into(), "0".into()),
                    ("anthropic-ratelimit-tokens-reset".into(), reset),
                ],
            }
        }
        other => other,
    };
    if let Scripted::Error {
        status,
        body,
        headers,
    } = &scripted
    {
        let mut response = fake_http::json(*status, body);
        for (name, value) in headers {
            response.headers_mut().insert(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        return response;
    }
    let thinking = body["thinking"]["type"] == "enabled";
    let blocks = content(&scripted, number, thinking);
    if thinking {
        state.issued.insert(number, blocks[0].clone());
    }
    let usage = cache_usage(&body, &mut state.cache, &blocks);
    state.usage.push(usage.clone());
    let stop = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let message = json!({"id": format!("msg_{number}"), "type": "message", "role": "assistant",
        "model": model, "content": blocks, "stop_reason": stop, "stop_sequence": null,
        "usage": usage});
    if body["stream"] != json!(true) {
        return fake_http::json(200, &message);
    }
    fake_http::sse(fake_http::sse_bytes(&stream_events(&scripted, &message)))
}

fn auto_reply(auto: &Auto, body: &Value) -> Scripted {
    let system = body["system"].to_string();
    if system.contains("JSON object") || system.contains("memory_updates") {
        return Scripted::Text(r#"{"memory_updates": []}"#.into());
    }
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let last_block = last["content"]
        .as_array()
        .and_then(|b| b.last())
        .cloned()
        .unwrap_or(Value::Null);
    if last_block["type"] == "tool_result" {
        let result = last_block["content"].as_str().unwrap_or_default();
        return Scripted::Text(format!("Done: {result}"));
    }
    let offered = |name: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == name))
    };
    match &auto.tool {
        Some((name, args)) if last["role"] == "user" && offered(name) => {
            Scripted::ToolCalls(vec![(name.clone(), args.clone())])
        }
        _ => Scripted::Text("ok".into()),
    }
}

/// The reply's content blocks: signed thinking first when enabled, then text or tool calls.
fn content(scripted: &Scripted, number: usize, thinking: bool) -> Vec<Value> {
    let mut blocks = Vec::new();
    if thinking {
        let text = format!("Request {number}: thinking it over before I answer.");
        blocks.push(json!({"type": "thinking", "thinking": text, "signature": signature(&text)}));
    }
    match scripted {
        Scripted::Text(text) | Scripted::ErrorEvent(text) => {
            blocks.push(json!({"type": "text", "text": text}))
        }
        Scripted::ToolCalls(calls) | Scripted::CutToolCall(calls) => {
            for (i, (name, input)) in calls.iter().enumerate() {
                blocks.push(
                    json!({"type": "tool_use", "id": format!("toolu_{number}_{i}"),
                    "name": name, "input": input}),
                );
            }
        }
        Scripted::Error { .. } | Scripted::RateLimitedFor(_) => {}
    }
    blocks
}

/// The SSE events of a streamed reply.
fn stream_events(scripted: &Scripted, message: &Value) -> Vec<(String, String)> {
    let mut events: Vec<(&str, Value)> = Vec::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    events.push(("message_start", json!({"message": start})));
    events.push(("ping", json!({})));
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut empty = block.clone();
        match block["type"].as_str() {
            Some("thinking") => {
                empty["thinking"] = json!("");
                empty["signature"] = json!("");
                events.push((
                    "content_block_start",
                    json!({"index": index, "content_block": empty}),
                ));
                for piece in pieces(block["thinking"].as_str().unwrap_or_default(), 7) {
                    events.push((
                        "content_block_delta",
                        json!({"index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece}}),
                    ));
                }
                events.push((
                    "content_block_delta",
                    json!({"index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]}}),
                ));
            }
            Some("text") => {
                empty["text"] = json!("");
                events.push((
                    "content_block_start",
                    json!({"index": index, "content_block": empty}),
                ));
                for (n, piece) in pieces(block["text"].as_str().unwrap_or_default(), 3)
                    .into_iter()
                    .enumerate()
                {
                    events.push((
                        "content_block_delta",
                        json!({"index": index,
                        "delta": {"type": "text_delta", "text": piece}}),
                    ));
                    if let (0, Scripted::ErrorEvent(kind)) = (n, scripted) {
                        events.push((
                            "error",
                            json!({"error": {"type": kind, "message": "Overloaded"}}),
                        ));
                        return typed(events);
                    }
                }
            }
            Some("tool_use") => {
                empty["input"] = json!({});
                events.push((
                    "content_block_start",
                    json!({"index": index, "content_block": empty}),
                ));
                events.push((
                    "content_block_delta",
                    json!({"index": index,
                    "delta": {"type": "input_json_delta", "partial_json": ""}}),
                ));
                let parts = pieces(&block["input"].to_string(), 4);
                let half = parts.len() / 2;
                for (n, piece) in parts.into_iter().enumerate() {
                    if n == half && matches!(scripted, Scripted::CutToolCall(_)) {
                        return typed(events);
                    }
                    events.push((
                        "content_block_delta",
                        json!({"index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    ));
                }
            }
            _ => {}
        }
        events.push(("content_block_stop", json!({"index": index})));
    }
    events.push((
        "message_delta",
        json!({"delta": {"stop_reason": message["stop_reason"],
        "stop_sequence": null}, "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    ));
    events.push(("message_stop", json!({})));
    typed(events)
}

/// Each event's data with its `type`.
fn typed(events: Vec<(&str, Value)>) -> Vec<(String, String)> {
    events
        .into_iter()
        .map(|(name, mut data)| {
            data["type"] = json!(name);
            (name.to_string(), data.to_string())
        })
        .collect()
}
