//! A fake OpenAI Responses server (`POST /v1/responses`, `GET /v1/models`) on 127.0.0.1 that
//! plays a reasoning model and checks what a real one checks.
//!
//! Every reply starts with a reasoning item (a summary, and `encrypted_content` when the
//! request asks for it with `include`), then a message or `function_call` items. Streamed
//! replies send the real event sequence (`response.created`, `output_item.added`,
//! `reasoning_summary_text.delta`, `output_text.delta` in small pieces,
//! `function_call_arguments.delta` in pieces, `output_item.done`, `response.completed` with
//! usage), each with its `sequence_number`, in frames that split lines and characters.
//!
//! Like the real API it refuses (400/404, OpenAI error JSON) an unknown model, a strict
//! function tool (the default) whose schema is open to other properties, a
//! `function_call_output` without its `function_call`, and a reasoning item that is not the
//! one it issued byte for byte (or that lacks its `encrypted_content` when `store` is false).
//!
//! Usage: `input_tokens` is the body's length / 4; `cached_tokens` is the part of that shared,
//! byte for byte, with the previous request of the same `prompt_cache_key` (in 16-token
//! steps) — so it measures exactly the prefix stability a real prompt cache rewards;
//! `reasoning_tokens` is 12 per reply.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::fake_http::{self, common_prefix, digest, pieces, Body, Received, Server};

/// The models `GET /v1/models` lists and requests may name.
pub const MODELS: [&str; 4] = ["gpt-5-mini", "o4-mini", "openai/gpt-oss-20b", "fake-model"];
/// Reasoning tokens reported per reply.
pub const REASONING_TOKENS: u64 = 12;

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Scripted {
    Text(String),
    ToolCalls(Vec<(String, Value)>),
    Error {
        status: u16,
        body: Value,
        retry_after: Option<String>,
    },
    /// Stream these calls but close the connection in the middle of the first call's
    /// arguments (no `response.completed`).
    CutToolCall(Vec<(String, Value)>),
    /// Start answering, then send an `error` event.
    ErrorEvent(String),
}

/// How the fake answers once its queue is empty: like a small obliging model (see
/// `fake_openai::Auto`).
#[derive(Debug, Clone)]
pub struct Auto {
    pub tool: Option<(String, Value)>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Scripted>,
    auto: Option<Auto>,
    requests: Vec<Received>,
    /// Reasoning items issued, by id, exactly as sent.
    issued: HashMap<String, Value>,
    /// The last body per `prompt_cache_key`.
    last_body: HashMap<String, Vec<u8>>,
    /// The usage of every reply, in order.
    usage: Vec<Value>,
}

/// The running fake; stops when dropped.
pub struct FakeResponses {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl FakeResponses {
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

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr)
    }

    pub fn set_auto(&self, auto: Auto) {
        self.state.lock().unwrap().auto = Some(auto);
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

    /// A 429 with `Retry-After`.
    pub fn push_rate_limited(&self, retry_after: &str) {
        self.push(Scripted::Error {
            status: 429,
            body: json!({"error": {"message": "Rate limit reached for requests",
                "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
            retry_after: Some(retry_after.into()),
        });
    }

    pub fn push_error(&self, status: u16, body: Value) {
        self.push(Scripted::Error {
            status,
            body,
            retry_after: None,
        });
    }

    /// Every request body, parsed, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .lock()
            .unwrap()
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

    /// The `Authorization` header of every request.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        let state = self.state.lock().unwrap();
        state
            .requests
            .iter()
            .map(|r| r.header("authorization"))
            .collect()
    }

    /// The `usage` of every reply sent, in order.
    pub fn reported_usage(&self) -> Vec<Value> {
        self.state.lock().unwrap().usage.clone()
    }

    /// The reasoning item issued with reply number `n` (1-based), exactly as sent.
    pub fn issued_reasoning(&self, n: usize) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .issued
            .get(&format!("rs_{n}"))
            .cloned()
    }
}

fn error(status: u16, message: &str, code: &str, param: Option<&str>) -> hyper::Response<Body> {
    fake_http::json(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error",
                          "param": param, "code": code}}),
    )
}

fn handle(req: Received, state: &Mutex<State>) -> hyper::Response<Body> {
    if req.method == "GET" && req.path == "/v1/models" {
        let data: Vec<Value> = MODELS
            .iter()
            .map(|id| json!({"id": id, "object": "model", "owned_by": "fake"}))
            .collect();
        return fake_http::json(200, &json!({"object": "list", "data": data}));
    }
    if req.method != "POST" || req.path != "/v1/responses" {
        return error(
            404,
            "fake Responses serves POST /v1/responses",
            "not_found",
            None,
        );
    }
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return error(
            400,
            "We could not parse the JSON body of your request.",
            "invalid_json",
            None,
        );
    };
    let mut state = state.lock().unwrap();
    state.requests.push(req.clone());
    let number = state.requests.len();
    let model = body["model"].as_str().unwrap_or_default().to_string();
    if !MODELS.contains(&model.as_str()) {
        let message =
            format!("The model `{model}` does not exist or you do not have access to it.");
        return error(404, &message, "model_not_found", None);
    }
    if let Some(refusal) = check_input(&body, &state.issued) {
        return refusal;
    }
    let scripted = match state.queue.pop_front() {
        Some(s) => s,
        None => match &state.auto {
            Some(auto) => auto_reply(auto, &body),
            None => {
                return error(
                    500,
                    "fake Responses: no scripted reply left",
                    "server_error",
                    None,
                )
            }
        },
    };
    if let Scripted::Error {
        status,
        body,
        retry_after,
    } = &scripted
    {
        let mut response = fake_http::json(*status, body);
        if let Some(wait) = retry_after {
            response
                .headers_mut()
                .insert("retry-after", wait.parse().unwrap());
        }
        return response;
    }
    let encrypted = body["include"]
        .as_array()
        .is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content"));
    let items = output_items(&scripted, number, encrypted);
    if let Some(reasoning) = items.first() {
        state
            .issued
            .insert(format!("rs_{number}"), reasoning.clone());
    }
    let key = body["prompt_cache_key"].as_str().unwrap_or("").to_string();
    let previous = state.last_body.insert(key, req.body.to_vec());
    let usage = usage(&req.body, previous.as_deref(), &items);
    state.usage.push(usage.clone());
    let response = json!({"id": format!("resp_{number}"), "object": "response",
        "created_at": 0, "model": model, "status": "completed", "output": items, "usage": usage});
    if body["stream"] != json!(true) {
        return fake_http::json(200, &response);
    }
    fake_http::sse(fake_http::sse_bytes(&stream_events(&scripted, &response)))
}

/// What the real API checks about the tools and the input items; the refusal, if any.
fn check_input(body: &Value, issued: &HashMap<String, Value>) -> Option<hyper::Response<Body>> {
    for tool in body["tools"].as_array().into_iter().flatten() {
        // `strict` defaults to true, which takes only schemas closed to other properties.
        let strict = tool.get("strict") != Some(&json!(false));
        if strict && tool["parameters"]["additionalProperties"] != json!(false) {
            let message = format!("Invalid schema for function '{}': In context=(), 'additionalProperties' is required to be supplied and to be false.", tool["name"].as_str().unwrap_or_default());
            return Some(error(
                400,
                &message,
                "invalid_function_parameters",
                Some("tools[0].parameters"),
            ));
        }
    }
    let store = body["store"] != json!(false);
    let mut calls = Vec::new();
    for item in body["input"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("function_call") => calls.push(item["call_id"].clone()),
            Some("function_call_output") if !calls.contains(&item["call_id"]) => {
                let message = format!(
                    "No tool call found for function call output with call_id {}.",
                    item["call_id"]
                );
                return Some(error(400, &message, "invalid_value", Some("input")));
            }
            Some("reasoning") => {
                let id = item["id"].as_str().unwrap_or_default();
                if !store && item.get("encrypted_content").is_none() {
                    let message = format!("Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.");
                    return Some(error(404, &message, "item_not_found", Some("input")));
                }
                if issued.get(id) != Some(item) {
                    let message =
                        format!("The encrypted content for item {id} could not be verified.");
                    return Some(error(
                        400,
                        &message,
                        "invalid_encrypted_content",
                        Some("input"),
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

fn auto_reply(auto: &Auto, body: &Value) -> Scripted {
    if body["text"]["format"]["type"] == "json_object" {
        return Scripted::Text(r#"{"memory_updates": []}"#.into());
    }
    let last = body["input"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    if last["type"] == "function_call_output" {
        let result = last["output"].as_str().unwrap_or_default();
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

/// The reply's output items: reasoning first, then the message or the calls.
fn output_items(scripted: &Scripted, number: usize, encrypted: bool) -> Vec<Value> {
    let mut reasoning = json!({"type": "reasoning", "id": format!("rs_{number}"),
        "summary": [{"type": "summary_text", "text": format!("Request {number}: deciding what to do.")}]});
    if encrypted {
        reasoning["encrypted_content"] =
            json!(format!("gAAAAB-{}", digest(&format!("reasoning {number}"))));
    }
    let mut items = vec![reasoning];
    match scripted {
        Scripted::Text(text) | Scripted::ErrorEvent(text) => items.push(json!({
            "type": "message", "id": format!("msg_{number}"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})),
        Scripted::ToolCalls(calls) | Scripted::CutToolCall(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                items.push(
                    json!({"type": "function_call", "id": format!("fc_{number}_{i}"),
                    "call_id": format!("call_{number}_{i}"), "name": name,
                    "arguments": args.to_string(), "status": "completed"}),
                );
            }
        }
        Scripted::Error { .. } => {}
    }
    items
}

fn usage(body: &[u8], previous: Option<&[u8]>, items: &[Value]) -> Value {
    let input = (body.len() / 4) as u64;
    let shared = previous.map_or(0, |p| common_prefix(p, body)) as u64 / 4;
    let cached = shared / 16 * 16;
    let written: usize = items.iter().map(|i| i.to_string().len()).sum();
    let output = (written / 4) as u64 + REASONING_TOKENS;
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
           "output_tokens": output, "output_tokens_details": {"reasoning_tokens": REASONING_TOKENS},
           "total_tokens": input + output})
}

/// The SSE events of a streamed reply.
fn stream_events(scripted: &Scripted, response: &Value) -> Vec<(String, String)> {
    let mut events: Vec<(String, Value)> = Vec::new();
    let mut shell = response.clone();
    shell["status"] = json!("in_progress");
    shell["output"] = json!([]);
    shell["usage"] = Value::Null;
    events.push(("response.created".into(), json!({"response": shell})));
    events.push(("response.in_progress".into(), json!({"response": shell})));
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (index, item) in items.iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("reasoning") => {
                added["summary"] = json!([]);
                if let Some(obj) = added.as_object_mut() {
                    obj.remove("encrypted_content");
                }
                events.push((
                    "response.output_item.added".into(),
                    json!({"output_index": index, "item": added}),
                ));
                let text = item["summary"][0]["text"].as_str().unwrap_or_default();
                for piece in pieces(text, 5) {
                    events.push(("response.reasoning_summary_text.delta".into(),
                        json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": piece})));
                }
                events.push((
                    "response.reasoning_summary_text.done".into(),
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "text": text}),
                ));
            }
            Some("message") => {
                added["content"] = json!([]);
                added["status"] = json!("in_progress");
                events.push((
                    "response.output_item.added".into(),
                    json!({"output_index": index, "item": added}),
                ));
                events.push(("response.content_part.added".into(), json!({"item_id": id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})));
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                for (n, piece) in pieces(text, 3).into_iter().enumerate() {
                    events.push((
                        "response.output_text.delta".into(),
                        json!({"item_id": id,
                        "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
                    ));
                    if n == 0 {
                        if let Scripted::ErrorEvent(message) = scripted {
                            events.push((
                                "error".into(),
                                json!({"code": "server_error",
                                "message": message, "param": null}),
                            ));
                            return numbered(events);
                        }
                    }
                }
                events.push((
                    "response.output_text.done".into(),
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ));
                events.push((
                    "response.content_part.done".into(),
                    json!({"item_id": id, "output_index": index,
                    "content_index": 0, "part": item["content"][0]}),
                ));
            }
            Some("function_call") => {
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                events.push((
                    "response.output_item.added".into(),
                    json!({"output_index": index, "item": added}),
                ));
                let args = item["arguments"].as_str().unwrap_or_default();
                let parts = pieces(args, 4);
                let half = parts.len() / 2;
                for (n, piece) in parts.into_iter().enumerate() {
                    if n == half && matches!(scripted, Scripted::CutToolCall(_)) {
                        return numbered(events);
                    }
                    events.push((
                        "response.function_call_arguments.delta".into(),
                        json!({"item_id": id, "output_index": index, "delta": piece}),
                    ));
                }
                events.push((
                    "response.function_call_arguments.done".into(),
                    json!({"item_id": id, "output_index": index, "arguments": args}),
                ));
            }
            _ => {}
        }
        events.push((
            "response.output_item.done".into(),
            json!({"output_index": index, "item": item}),
        ));
    }
    events.push(("response.completed".into(), json!({"response": response})));
    numbered(events)
}

/// Each event's data with its `type` and `sequence_number`.
fn numbered(events: Vec<(String, Value)>) -> Vec<(String, String)> {
    events
        .into_iter()
        .enumerate()
        .map(|(n, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(n);
            (name, data.to_string())
        })
        .collect()
}
