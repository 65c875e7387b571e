//! Hermes' own HTTP endpoint (`hermes serve --http ADDR`, `[http] listen`):
//! - `GET /metrics`: this process's Prometheus text ([`crate::telemetry::metrics`]);
//! - `GET /`: the live status page of the whole deployment ([`live`]), once
//!   [`HttpServer::show_live`] gave it the bus; `GET /events` streams its updates and
//!   `GET /api/live` answers one snapshot;
//! - `/.well-known/agent-card.json` and `/a2a/<agent>…`: the agents served over A2A
//!   ([`crate::a2a::server`]), once [`HttpServer::serve_a2a`] gave it the engine.
//!
//! A small hyper server on the I/O runtime, never on an actix arbiter; the metrics exporter's
//! own listener stays off.

pub mod live;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::serving::{self, Serving};

use crate::a2a::server::{A2aServer, A2aServerError};
use crate::bus::SharedBus;
use crate::config::Config;
use crate::store::durability::Durable;
use crate::telemetry::metrics::{self, Metrics};

/// The listener's name in the log.
const LISTENER: &str = "the HTTP endpoint";

/// The metrics path.
pub const METRICS_PATH: &str = "/metrics";
/// The status page's event stream.
pub const EVENTS_PATH: &str = "/events";
/// One snapshot of the status page's data, as JSON.
pub const SNAPSHOT_PATH: &str = "/api/live";

type Body = BoxBody<Bytes, Infallible>;
/// The live view's snapshots, once the bus is known.
type LiveSlot = Arc<OnceLock<live::Snapshots>>;
/// The A2A server, once the engine runs and some agent is served.
type A2aSlot = Arc<OnceLock<Arc<A2aServer>>>;

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
    #[error(
        "the status page cannot follow the deployment's events: {0}; check the bus connection"
    )]
    Live(#[from] crate::bus::BusError),
    #[error(transparent)]
    A2a(#[from] A2aServerError),
}

/// A running HTTP endpoint; stops when [`HttpServer::stop`] is called or it is dropped.
#[derive(Debug)]
pub struct HttpServer {
    pub addr: SocketAddr,
    cancel: CancellationToken,
    serving: Serving,
    live: LiveSlot,
    a2a: A2aSlot,
}

impl HttpServer {
    /// `http://<addr>/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}{METRICS_PATH}", self.addr)
    }

    /// `http://<addr>/`, the status page.
    pub fn page_url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Start the status page's feed from `bus` (the deployment's events, status and MCP
    /// catalog). The future must run on the I/O runtime; a second start is a no-op.
    pub fn show_live(
        &self,
        bus: SharedBus,
    ) -> impl std::future::Future<Output = Result<(), HttpError>> + Send + 'static {
        let live = self.live.clone();
        let cancel = self.cancel.clone();
        async move {
            if live.get().is_some() {
                return Ok(());
            }
            let snapshots = live::feed::start(bus, cancel).await?;
            let _ = live.set(snapshots);
            Ok(())
        }
    }

    /// Serve the agents `config` exposes over A2A, their sessions reached over `bus`; the
    /// agents served (none: nothing is). The future must run on the I/O runtime; a second
    /// start is a no-op.
    pub fn serve_a2a(
        &self,
        bus: SharedBus,
        config: Arc<Config>,
        db: Option<Durable>,
    ) -> impl std::future::Future<Output = Result<Vec<String>, HttpError>> + Send + 'static {
        let (slot, addr) = (self.a2a.clone(), self.addr);
        async move {
            if let Some(server) = slot.get() {
                return Ok(server.agents.iter().cloned().collect());
            }
            let Some(server) = A2aServer::start(bus, config, db.as_ref(), addr).await? else {
                return Ok(Vec::new());
            };
            let agents = server.agents.iter().cloned().collect();
            let _ = slot.set(server);
            Ok(agents)
        }
    }

    /// `http://<addr>/a2a/<agent>`, where `agent` is served over A2A.
    pub fn a2a_url(&self, agent: &str) -> String {
        format!("http://{}/a2a/{agent}", self.addr)
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Stop accepting and wait for the requests in flight to finish (Ctrl-C).
    pub fn shutdown(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let serving = self.serving.clone();
        async move { serving.shutdown().await }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Install the metrics recorder, bind `listen` and serve until stopped, at most
/// `max_connections` connections at once (`[http] max_connections`). Must run on the I/O
/// runtime (its tasks are spawned on the current tokio runtime).
pub async fn start(listen: &str, max_connections: usize) -> Result<HttpServer, HttpError> {
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
    let live = LiveSlot::default();
    let a2a = A2aSlot::default();
    tokio::spawn(upkeep(metrics.clone(), cancel.clone()));
    let slots = Slots {
        metrics,
        live: live.clone(),
        a2a: a2a.clone(),
    };
    let serving = serving::spawn(
        LISTENER,
        listener,
        max_connections,
        cancel.clone(),
        move |stream, shutdown| connection(stream, slots.clone(), shutdown),
    );
    tracing::info!(url = %format!("http://{addr}{METRICS_PATH}"), "HTTP server listening");
    Ok(HttpServer {
        addr,
        cancel,
        serving,
        live,
        a2a,
    })
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

/// What the listener answers from.
#[derive(Clone)]
struct Slots {
    metrics: Metrics,
    live: LiveSlot,
    a2a: A2aSlot,
}

/// One connection: A2A paths to the A2A server once it runs, the rest to [`respond`].
async fn connection(stream: tokio::net::TcpStream, slots: Slots, shutdown: CancellationToken) {
    let service = service_fn(move |request: Request<Incoming>| {
        let slots = slots.clone();
        async move {
            let path = request.uri().path();
            if A2aServer::owns(path) {
                if let Some(a2a) = slots.a2a.get().cloned() {
                    return Ok::<_, Infallible>(a2a.handle(request).await);
                }
            }
            let response = respond(&slots.metrics, &slots.live, request.method(), path);
            Ok::<_, Infallible>(response)
        }
    });
    serving::http1(LISTENER, stream, service, shutdown).await;
}

/// The answer to `method path`.
fn respond(metrics: &Metrics, live: &LiveSlot, method: &Method, path: &str) -> Response<Body> {
    let not_started = || {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "the status page starts once the engine is connected to its bus; retry in a moment\n"
                .into(),
        )
    };
    match route(method, path) {
        Route::Metrics => text(StatusCode::OK, metrics::CONTENT_TYPE, metrics.render()),
        Route::Page => text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            live::page::HTML.into(),
        ),
        Route::Snapshot => match live.get().map(|s| s.borrow().clone()) {
            Some(Some(json)) => text(StatusCode::OK, "application/json", json.to_string()),
            _ => not_started(),
        },
        Route::Events => match live.get() {
            Some(snapshots) => {
                let stream = live::page::event_stream(snapshots.clone());
                let mut response = Response::new(StreamBody::new(stream).boxed());
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
            None => not_started(),
        },
        Route::NotAllowed => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "Hermes' HTTP endpoint answers GET only\n".into(),
        ),
        Route::NotFound => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("Hermes serves its status page at / and its metrics at {METRICS_PATH}\n"),
        ),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Page,
    Snapshot,
    Events,
    NotAllowed,
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    let known = match path {
        METRICS_PATH => Route::Metrics,
        "/" | "/index.html" => Route::Page,
        SNAPSHOT_PATH => Route::Snapshot,
        EVENTS_PATH => Route::Events,
        _ => return Route::NotFound,
    };
    match method {
        &Method::GET | &Method::HEAD => known,
        _ => Route::NotAllowed,
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
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
    fn only_get_of_known_paths_is_served() {
        assert_eq!(route(&Method::GET, "/metrics"), Route::Metrics);
        assert_eq!(route(&Method::HEAD, "/metrics"), Route::Metrics);
        assert_eq!(route(&Method::POST, "/metrics"), Route::NotAllowed);
        assert_eq!(route(&Method::GET, "/"), Route::Page);
        assert_eq!(route(&Method::GET, "/events"), Route::Events);
        assert_eq!(route(&Method::GET, "/api/live"), Route::Snapshot);
        assert_eq!(route(&Method::POST, "/"), Route::NotAllowed);
        assert_eq!(route(&Method::GET, "/metrics/x"), Route::NotFound);
    }
}
