//! A local OTLP/HTTP trace receiver (tokio + hyper 1) for tests: it answers
//! `POST /v1/traces` as a collector does, decodes each export request (protobuf
//! `ExportTraceServiceRequest`, with the official generated types of `opentelemetry-proto`)
//! and keeps every span with the `service.name` and `process.pid` of the resource that sent it.
//!
//! ```ignore
//! let receiver = OtlpReceiver::start();
//! // [telemetry] otlp_endpoint = receiver.endpoint()
//! let spans = receiver.wait_for(Duration::from_secs(10), |spans| spans.len() >= 3);
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use prost::Message;
use tokio::net::TcpListener;

/// One received span, flattened for assertions.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// `service.name` of the resource that exported it.
    pub service: String,
    /// `process.pid` of that resource.
    pub pid: Option<i64>,
    pub name: String,
    /// 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    pub kind: i32,
    /// Lower-case hex.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// Attribute values as text (integers in decimal).
    pub attributes: BTreeMap<String, String>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

type Spans = Arc<Mutex<Vec<ReceivedSpan>>>;

/// The receiver, on a runtime of its own; it stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Spans,
    /// Export requests that could not be decoded (each one fails the test that checks).
    rejected: Arc<Mutex<Vec<String>>>,
    _runtime: tokio::runtime::Runtime,
}

impl OtlpReceiver {
    pub fn start() -> Self {
        let runtime = crate::common::runtime::multi_thread(1);
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind the OTLP receiver");
        let addr = listener.local_addr().unwrap();
        let spans = Spans::default();
        let rejected = Arc::new(Mutex::new(Vec::new()));
        let (shared, bad) = (spans.clone(), rejected.clone());
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (spans, bad) = (shared.clone(), bad.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, spans.clone(), bad.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            spans,
            rejected,
            _runtime: runtime,
        }
    }

    /// The base URL to configure (`[telemetry] otlp_endpoint`), `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let rejected = self.rejected.lock().unwrap().clone();
        assert!(rejected.is_empty(), "undecodable exports: {rejected:?}");
        self.spans.lock().unwrap().clone()
    }

    /// The spans once `done` says they are complete, or what arrived by `timeout`.
    pub fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() >= deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    spans: Spans,
    rejected: Arc<Mutex<Vec<String>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Vec<u8>| {
        Ok(Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::from(body)))
            .unwrap())
    };
    if req.method() != Method::POST || req.uri().path() != "/v1/traces" {
        return reply(StatusCode::NOT_FOUND, Vec::new());
    }
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = match req.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            rejected.lock().unwrap().push(format!("body: {e}"));
            return reply(StatusCode::BAD_REQUEST, Vec::new());
        }
    };
    if content_type != "application/x-protobuf" {
        rejected
            .lock()
            .unwrap()
            .push(format!("content-type {content_type}"));
        return reply(StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(export) => {
            spans.lock().unwrap().extend(flatten(export));
            let ok = ExportTraceServiceResponse::default().encode_to_vec();
            reply(StatusCode::OK, ok)
        }
        Err(e) => {
            rejected.lock().unwrap().push(format!("protobuf: {e}"));
            reply(StatusCode::BAD_REQUEST, Vec::new())
        }
    }
}

fn flatten(export: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in export.resource_spans {
        let resource = attributes(
            &resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default(),
        );
        let service = resource.get("service.name").cloned().unwrap_or_default();
        let pid = resource.get("process.pid").and_then(|p| p.parse().ok());
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan {
                    service: service.clone(),
                    pid,
                    name: span.name,
                    kind: span.kind,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: attributes(&span.attributes),
                });
            }
        }
    }
    out
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                Some(any_value::Value::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
