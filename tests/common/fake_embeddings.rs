//! A fake OpenAI-compatible embeddings server on 127.0.0.1 (tokio + hyper 1): `POST
//! /v1/embeddings` answers a deterministic bag-of-words vector per input (each lowercased word
//! hashed into one of [`DIMS`] dimensions), items in reverse order with their `index` so clients
//! must reorder; records every `Authorization` header. `fail_next(n)` makes the next n requests
//! answer HTTP 500.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

pub const DIMS: usize = 32;

#[derive(Default)]
struct State {
    authorizations: Vec<Option<String>>,
    inputs: usize,
    fail: usize,
}

pub struct FakeEmbeddings {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEmbeddings {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The vector the fake gives `text` (not normalised).
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0; DIMS];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = word
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        v[h as usize % DIMS] += 1.0;
    }
    v
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    let parsed: Value = body
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let fail = {
        let mut s = state.lock().unwrap();
        s.authorizations.push(auth);
        let fail = s.fail > 0;
        s.fail = s.fail.saturating_sub(1);
        fail
    };
    let inputs: Vec<String> = parsed["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let (status, answer) = if path != "/v1/embeddings" {
        (404, json!({"error": {"message": "not found"}}))
    } else if fail || inputs.is_empty() {
        (500, json!({"error": {"message": "embedding backend down"}}))
    } else {
        state.lock().unwrap().inputs += inputs.len();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": bag_of_words(t)}))
            .collect();
        (
            200,
            json!({"object": "list", "data": data, "model": parsed["model"]}),
        )
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(answer.to_string())))
        .unwrap())
}

impl FakeEmbeddings {
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

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Texts embedded so far.
    pub fn inputs(&self) -> usize {
        self.state.lock().unwrap().inputs
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().authorizations.clone()
    }

    /// Answer the next `n` requests with HTTP 500.
    pub fn fail_next(&self, n: usize) {
        self.state.lock().unwrap().fail = n;
    }
}
