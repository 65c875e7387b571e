//! What the wire-format fakes ([`super::fake_responses`], [`super::fake_anthropic`]) share: a
//! hyper server on a free loopback port that hands each request (method, path, headers, raw
//! body) to a handler, SSE bodies cut into small frames that split lines and UTF-8
//! characters, and plain JSON answers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Bytes per streamed frame: small, so frames split SSE lines and multi-byte characters.
const FRAME_BYTES: usize = 13;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

pub type Handler =
    Arc<dyn Fn(Received) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync>;

/// A running server; stops accepting when dropped.
pub struct Server {
    pub addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Server {
    /// Bind a free port on 127.0.0.1 and answer every request with `handler`.
    pub async fn start(handler: Handler) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let handler = handler.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let handler = handler.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            let received = Received {
                                method: parts.method.to_string(),
                                path: parts.uri.path().to_string(),
                                headers: parts.headers,
                                body,
                            };
                            Ok::<_, Infallible>(handler(received).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, accept }
    }
}

/// A runtime of its own for a fake used by tests that are not async themselves; keep it
/// alive as long as the fake.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// `event: <name>\ndata: <json>\n\n` for each event.
pub fn sse_bytes(events: &[(String, String)]) -> Vec<u8> {
    events
        .iter()
        .flat_map(|(name, data)| format!("event: {name}\ndata: {data}\n\n").into_bytes())
        .collect()
}

/// A streamed SSE answer of `bytes`, in small frames with a pause between them.
pub fn sse(bytes: Vec<u8>) -> Response<Body> {
    let frames: VecDeque<Bytes> = bytes
        .chunks(FRAME_BYTES)
        .map(Bytes::copy_from_slice)
        .collect();
    let stream = futures::stream::unfold(frames, |mut frames| async move {
        let frame = frames.pop_front()?;
        tokio::time::sleep(Duration::from_micros(300)).await;
        Some((Ok::<_, Infallible>(Frame::data(frame)), frames))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap()
}

pub fn json(status: u16, body: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed_unsync())
        .unwrap()
}

/// A stable short hash of `text` (hex), for ids, encrypted contents and signatures.
pub fn digest(text: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(text.as_bytes());
    hash.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// Pieces of about `size` characters.
pub fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// How many leading bytes two bodies share.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
