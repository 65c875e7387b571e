//! Hermes' own HTTP endpoint (`hermes serve --http ADDR`, `[http] listen`): `GET /metrics`
//! serves this process's Prometheus text ([`crate::telemetry::metrics`]); any other path is a
//! 404. A small hyper server on the I/O runtime, never on an actix arbiter; the metrics
//! exporter's own listener stays off.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::telemetry::metrics::{self, Metrics};

/// The metrics path.
pub const METRICS_PATH: &str = "/metrics";

/// How often histogram samples are folded into their buckets between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("the HTTP server cannot listen on {listen}: {source}; choose a free address with --http or [http] listen")]
    Bind {
        listen: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Metrics(#[from] metrics::MetricsError),
}

/// A running HTTP endpoint; stops when [`HttpServer::stop`] is called or it is dropped.
#[derive(Debug)]
pub struct HttpServer {
    pub addr: SocketAddr,
    cancel: CancellationToken,
}

impl HttpServer {
    /// `http://<addr>/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.addr)
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Install the metrics recorder, bind `listen` and serve until stopped. Must run on the I/O
/// runtime (its tasks are spawned on the current tokio runtime).
pub async fn start(listen: &str) -> Result<HttpServer, HttpError> {
    let metrics = metrics::install()?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| HttpError::Bind {
            listen: listen.to_owned(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| HttpError::Bind {
        listen: listen.to_owned(),
        source,
    })?;
    let cancel = CancellationToken::new();
    tokio::spawn(upkeep(metrics.clone(), cancel.clone()));
    tokio::spawn(accept(listener, metrics, cancel.clone()));
    tracing::info!(url = %format!("http://{addr}{METRICS_PATH}"), "HTTP server listening");
    Ok(HttpServer { addr, cancel })
}

async fn upkeep(metrics: Metrics, cancel: CancellationToken) {
    let mut every = tokio::time::interval(UPKEEP_EVERY);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = every.tick() => metrics.upkeep(),
        }
    }
}

async fn accept(listener: TcpListener, metrics: Metrics, cancel: CancellationToken) {
    loop {
        let (stream, _) = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "HTTP accept failed");
                    continue;
                }
            },
        };
        let metrics = metrics.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&metrics, request.method(), request.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = cancel.cancelled() => {}
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "HTTP connection ended with an error");
                    }
                }
            }
        });
    }
}

/// The answer to `method path`.
fn respond(metrics: &Metrics, method: &Method, path: &str) -> Response<Full<Bytes>> {
    match route(method, path) {
        Route::Metrics => text(StatusCode::OK, metrics::CONTENT_TYPE, metrics.render()),
        Route::NotAllowed => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            format!("{METRICS_PATH} answers GET only\n"),
        ),
        Route::NotFound => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("Hermes serves its metrics at {METRICS_PATH}\n"),
        ),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    NotAllowed,
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    match (path, method) {
        (METRICS_PATH, &Method::GET | &Method::HEAD) => Route::Metrics,
        (METRICS_PATH, _) => Route::NotAllowed,
        _ => Route::NotFound,
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        assert_eq!(route(&Method::GET, "/metrics"), Route::Metrics);
        assert_eq!(route(&Method::HEAD, "/metrics"), Route::Metrics);
        assert_eq!(route(&Method::POST, "/metrics"), Route::NotAllowed);
        assert_eq!(route(&Method::GET, "/"), Route::NotFound);
        assert_eq!(route(&Method::GET, "/metrics/x"), Route::NotFound);
    }
}
