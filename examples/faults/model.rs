//! The model endpoint of the deployment: the test suite's fake OpenAI-compatible server
//! (`tests/common/fake_openai.rs`, real wire format, streamed) with a responder that plays
//! the matrix's turns, can hold one turn's request at a gate, and misbehaves on demand.
//!
//! A driven turn's message is `turn <tag>: call <tool> <JSON arguments>` (tag
//! `<session>-t<n>`). A planning request whose last message is that user message gets the
//! call; one whose last message is a tool result gets `The answer to <tag> is <result>.`; an
//! extraction request (`response_format: json_object`) gets one memory for the turn, key
//! `m_<session>_t<n>`, so the harness can count memories lost or written twice.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::fake_openai::{FakeOpenAi, Responder, Scripted};

/// How the endpoint misbehaves while a fault window is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFault {
    /// HTTP 500 to every request.
    ServerError,
    /// HTTP 429 with `Retry-After: 1` to every request.
    RateLimited,
    /// Accept every request and never answer.
    Hang,
    /// Close the stream in the middle of every tool call's arguments.
    CutToolCall,
    /// A 200 whose body is not JSON.
    InvalidJson,
}

/// Which request of a turn to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its first planning request.
    Plan,
    /// Its memory extraction request.
    Extraction,
}

struct Hold {
    tag: String,
    what: Held,
    open: watch::Receiver<bool>,
    reached: bool,
}

#[derive(Default)]
struct Faults {
    fault: Option<(ModelFault, Instant)>,
    hold: Option<Hold>,
    gate: Option<watch::Sender<bool>>,
}

/// The fake model server and its fault switches.
pub struct Model {
    server: FakeOpenAi,
    state: Arc<Mutex<Faults>>,
}

impl Model {
    /// Start on the current tokio runtime.
    pub async fn start() -> Self {
        let server = FakeOpenAi::start().await;
        let state = Arc::new(Mutex::new(Faults::default()));
        let shared = state.clone();
        let responder: Responder = Arc::new(move |body| respond(&shared, body));
        server.set_responder(responder);
        Self { server, state }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Misbehave for `window`.
    pub fn fail_for(&self, fault: ModelFault, window: Duration) {
        self.lock().fault = Some((fault, Instant::now() + window));
    }

    /// Hold `what` of the turn `tag` until [`Model::release`].
    pub fn hold(&self, tag: &str, what: Held) {
        let (tx, rx) = watch::channel(false);
        let mut state = self.lock();
        state.hold = Some(Hold {
            tag: tag.to_string(),
            what,
            open: rx,
            reached: false,
        });
        state.gate = Some(tx);
    }

    /// Has the held request arrived?
    pub fn held(&self) -> bool {
        self.lock().hold.as_ref().is_some_and(|h| h.reached)
    }

    pub fn release(&self) {
        let mut state = self.lock();
        if let Some(gate) = state.gate.take() {
            let _ = gate.send(true);
        }
        state.hold = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn respond(state: &Mutex<Faults>, body: &Value) -> Scripted {
    let extraction = body["response_format"]["type"] == "json_object";
    let reply = if extraction {
        extraction_reply(body)
    } else {
        plan_reply(body)
    };
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((fault, until)) = state.fault {
        if Instant::now() < until {
            if let Some(faulty) = misbehave(fault, &reply) {
                return faulty;
            }
        } else {
            state.fault = None;
        }
    }
    if let Some(hold) = state.hold.as_mut().filter(|h| !h.reached) {
        let is_first_plan = !extraction && last_role(body) == "user";
        let matches = match hold.what {
            Held::Plan => is_first_plan,
            Held::Extraction => extraction,
        };
        if matches && tag_of(body, extraction).as_deref() == Some(hold.tag.as_str()) {
            hold.reached = true;
            return Scripted::Gated {
                open: hold.open.clone(),
                then: Box::new(reply),
            };
        }
    }
    reply
}

fn misbehave(fault: ModelFault, reply: &Scripted) -> Option<Scripted> {
    Some(match fault {
        ModelFault::ServerError => Scripted::Error {
            status: 500,
            body: r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#.into(),
            retry_after: None,
        },
        ModelFault::RateLimited => Scripted::Error {
            status: 429,
            body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#.into(),
            retry_after: Some("1".into()),
        },
        ModelFault::Hang => Scripted::Hang,
        ModelFault::InvalidJson => Scripted::InvalidJson,
        ModelFault::CutToolCall => match reply {
            Scripted::ToolCalls(calls) => Scripted::CutToolCall(calls.clone()),
            _ => return None,
        },
    })
}

fn messages(body: &Value) -> &[Value] {
    body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn last_role(body: &Value) -> &str {
    messages(body)
        .last()
        .and_then(|m| m["role"].as_str())
        .unwrap_or_default()
}

/// `<tag>` of `turn <tag>: …` in `text`.
pub fn find_tag(text: &str) -> Option<String> {
    let (_, rest) = text.split_once("turn ")?;
    let (tag, _) = rest.split_once(':')?;
    let valid = tag.contains("-t")
        && tag
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid.then(|| tag.to_string())
}

/// The turn a request belongs to: the last user message's tag, or for an extraction the
/// transcript's (the existing memories listed before it carry no tags).
fn tag_of(body: &Value, extraction: bool) -> Option<String> {
    let texts = messages(body)
        .iter()
        .rev()
        .filter(|m| extraction || m["role"] == "user")
        .filter_map(|m| m["content"].as_str());
    for text in texts {
        let text = match text.split_once("Transcript:") {
            Some((_, transcript)) => transcript,
            None => text,
        };
        if let Some(tag) = find_tag(text) {
            return Some(tag);
        }
    }
    None
}

fn plan_reply(body: &Value) -> Scripted {
    let last = messages(body).last().cloned().unwrap_or(Value::Null);
    let content = last["content"].as_str().unwrap_or_default();
    match last["role"].as_str() {
        Some("user") => match parse_call(content) {
            Some(call) => Scripted::ToolCalls(vec![call]),
            None => Scripted::Text("ok".into()),
        },
        Some("tool") => {
            let tag = tag_of(body, false).unwrap_or_else(|| "?".into());
            Scripted::Text(format!("The answer to {tag} is {}.", result_of(content)))
        }
        _ => Scripted::Text("A summary of the earlier turns.".into()),
    }
}

/// A tool result in short: the engine's transformed result `{status, summary, …}` as
/// `ok: <summary>` or `error: <summary>`, anything else cut to 80 characters.
fn result_of(content: &str) -> String {
    let short = |text: &str| text.chars().take(80).collect::<String>();
    match serde_json::from_str::<Value>(content) {
        Ok(result) if result["status"].is_string() => {
            let status = result["status"].as_str().unwrap_or_default();
            let summary = result["summary"]
                .as_str()
                .or_else(|| result["error"]["message"].as_str())
                .unwrap_or_default();
            format!("{status}: {}", short(summary))
        }
        _ => short(content),
    }
}

/// The call of `turn <tag>: call <tool> <JSON object>`.
fn parse_call(text: &str) -> Option<(String, Value)> {
    let (_, rest) = text.split_once(": call ")?;
    let (tool, arguments) = rest.trim().split_once(' ')?;
    let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
    arguments.is_object().then(|| (tool.to_string(), arguments))
}

/// The memory key of the turn `tag` (`s3-t2` → `m_s3_t2`).
pub fn memory_key(tag: &str) -> String {
    format!("m_{}", tag.replace('-', "_"))
}

fn extraction_reply(body: &Value) -> Scripted {
    let Some(tag) = tag_of(body, true) else {
        return Scripted::Text(r#"{"memory_updates": []}"#.into());
    };
    let update = json!({
        "op": "add",
        "kind": "fact",
        "key": memory_key(&tag),
        "content": format!("The user's code word is {}.", letters(&tag)),
        "importance": 0.5,
    });
    Scripted::Text(json!({"memory_updates": [update]}).to_string())
}

/// A word of letters only, different for every tag: memories whose contents differ only in
/// digits would be near-duplicates to the merge rules (a tokeniser splits digits off).
fn letters(tag: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in tag.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut word = String::from("zq");
    for _ in 0..8 {
        word.push(char::from(b'a' + (hash % 26) as u8));
        hash /= 26;
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_calls_and_keys() {
        let text = r#"turn s3-t2: call ledger__record {"entry": "s3-t2"}"#;
        assert_eq!(find_tag(text).as_deref(), Some("s3-t2"));
        let (tool, args) = parse_call(text).unwrap();
        assert_eq!(
            (tool.as_str(), args["entry"].as_str()),
            ("ledger__record", Some("s3-t2"))
        );
        assert_eq!(memory_key("s3-t2"), "m_s3_t2");
        assert_ne!(letters("s1-t2"), letters("s2-t1"));
    }
}
