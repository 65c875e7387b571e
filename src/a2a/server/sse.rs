//! Server-Sent Events: each update of a stream is one `data: <json>` event; a comment keeps
//! an idle connection open; the response ends when the stream does.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::Response;
use tokio::sync::mpsc;

use super::Body;
use crate::a2a::wire::StreamResponse;

/// How long an idle stream waits before a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One SSE event: `data:` lines of `json`, then a blank line.
pub fn event(json: &str, name: Option<&str>) -> Bytes {
    let mut out = String::with_capacity(json.len() + 16);
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    for line in json.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// A `text/event-stream` response of `updates`, each framed by `frame`.
pub fn response(
    updates: mpsc::Receiver<StreamResponse>,
    frame: impl Fn(&StreamResponse) -> Bytes + Send + Sync + 'static,
) -> Response<Body> {
    let frame = std::sync::Arc::new(frame);
    let stream = futures::stream::unfold(updates, move |mut rx| {
        let frame = frame.clone();
        let next = async move {
            match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
                Ok(Some(update)) => Some((Some(update), rx)),
                Ok(None) => None,
                Err(_) => Some((None, rx)),
            }
        };
        async move {
            let (update, rx) = next.await?;
            let chunk = match update {
                Some(update) => frame(&update),
                None => Bytes::from_static(b": keep-alive\n\n"),
            };
            Some((chunk, rx))
        }
    })
    .map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(chunk)));
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}
