//! The one serving loop every listener runs (the HTTP endpoint with its status page, metrics
//! and A2A; the MCP server over HTTP; the control socket):
//!
//! - a failed `accept` (out of file descriptors, most often) waits as mini-redis does — 1 s
//!   doubling to 64 s, [`crate::bus::accept_backoff`] — instead of spinning or giving up;
//! - at most `max_connections` connections are served at once (`[http] max_connections`);
//!   past that new connections wait in the kernel's backlog until one closes, and the
//!   listener says so once in the log;
//! - stopping (Ctrl-C, [`Serving::shutdown`]) stops accepting at once, lets the connections
//!   in flight finish their requests (HTTP connections close once their response is sent) for
//!   up to [`GRACE`], then drops what is left.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::bus::accept_backoff::AcceptBackoff;

/// Connections each listener serves at once when `[http] max_connections` is not set.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long connections in flight may take to finish once the listener stops.
pub const GRACE: Duration = Duration::from_secs(10);

/// A socket that hands out connections: a TCP or a Unix listener.
pub trait Listener: Send + 'static {
    type Stream: Send + 'static;
    fn accept_one(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_one(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Listener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_one(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// A running serving loop: [`Serving::shutdown`] stops it and waits for its connections.
#[derive(Debug, Clone)]
pub struct Serving {
    cancel: CancellationToken,
    drained: watch::Receiver<bool>,
}

impl Serving {
    /// Stop accepting; connections in flight go on finishing (see [`Serving::shutdown`]).
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Stop accepting and wait until the connections in flight have finished (at most
    /// [`GRACE`], then they are dropped).
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let mut drained = self.drained.clone();
        let _ = drained.wait_for(|done| *done).await;
    }
}

/// Serve `listener` on the current tokio runtime until `cancel` fires: each connection goes to
/// `handle` with a token that fires when the listener stops (finish the request in flight,
/// then close). `name` names the listener in the log.
pub fn spawn<L, H, F>(
    name: &'static str,
    listener: L,
    max_connections: usize,
    cancel: CancellationToken,
    handle: H,
) -> Serving
where
    L: Listener,
    H: Fn(L::Stream, CancellationToken) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let (done, drained) = watch::channel(false);
    let serving = Serving {
        cancel: cancel.clone(),
        drained,
    };
    tokio::spawn(async move {
        run(name, listener, max_connections, cancel, handle).await;
        let _ = done.send(true);
    });
    serving
}

async fn run<L, H, F>(
    name: &'static str,
    listener: L,
    max_connections: usize,
    cancel: CancellationToken,
    handle: H,
) where
    L: Listener,
    H: Fn(L::Stream, CancellationToken) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    // The semaphore caps the connections, and once the listener stops, holding all its
    // permits means every connection has finished.
    let cap = u32::try_from(max_connections.max(1)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(cap as usize));
    let force = CancellationToken::new();
    let mut backoff = AcceptBackoff::default();
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                tracing::warn!(
                    listener = name,
                    max_connections = cap,
                    "{name} serves {cap} connections, its cap ([http] max_connections); new \
                     connections wait until one closes"
                );
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept_one() => match accepted {
                Ok(stream) => {
                    backoff.accepted();
                    stream
                }
                Err(error) => {
                    let pause = backoff.failed();
                    tracing::warn!(
                        listener = name,
                        %error,
                        ?pause,
                        "{name} could not accept a connection (out of file descriptors?); \
                         trying again after a pause"
                    );
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(pause) => continue,
                    }
                }
            },
        };
        let connection = handle(stream, cancel.clone());
        let force = force.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = force.cancelled() => {}
                _ = connection => {}
            }
            drop(permit);
        });
    }
    drop(listener);
    let in_flight = cap as usize - permits.available_permits();
    if in_flight > 0 {
        tracing::info!(
            listener = name,
            in_flight,
            "{name} stopped accepting; letting connections in flight finish"
        );
    }
    if tokio::time::timeout(GRACE, permits.acquire_many(cap))
        .await
        .is_err()
    {
        tracing::warn!(
            listener = name,
            grace = ?GRACE,
            "{name}: connections still open after the grace period are dropped"
        );
        force.cancel();
    }
}

/// Serve one HTTP/1 connection with `service` until it closes; once `shutdown` fires, the
/// request in flight finishes and the connection closes.
pub async fn http1<I, S, B>(name: &'static str, io: I, service: S, shutdown: CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(listener = name, %error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A listener whose connections each echo one byte, after `hold`; a connection that
    /// sends 0 waits for `release` first.
    async fn echo(
        max: usize,
        hold: Duration,
        release: Arc<tokio::sync::Notify>,
    ) -> (std::net::SocketAddr, Serving) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = spawn(
            "test listener",
            listener,
            max,
            CancellationToken::new(),
            move |mut stream: TcpStream, _| {
                let release = release.clone();
                async move {
                    let mut byte = [0u8; 1];
                    if stream.read_exact(&mut byte).await.is_ok() {
                        if byte[0] == 0 {
                            release.notified().await;
                        }
                        tokio::time::sleep(hold).await;
                        let _ = stream.write_all(&byte).await;
                    }
                }
            },
        );
        (addr, serving)
    }

    async fn ask(addr: std::net::SocketAddr, byte: u8) -> std::io::Result<u8> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(&[byte]).await?;
        let mut answer = [0u8; 1];
        stream.read_exact(&mut answer).await?;
        Ok(answer[0])
    }

    #[tokio::test]
    async fn connections_past_the_cap_wait_until_one_closes() {
        let release = Arc::new(tokio::sync::Notify::new());
        let (addr, _serving) = echo(1, Duration::ZERO, release.clone()).await;
        // The first holds the only slot until released; the second waits for it.
        let first = tokio::spawn(ask(addr, 0));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = tokio::spawn(ask(addr, 2));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished(), "past the cap a connection waits");
        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap(), 0);
        let answer = tokio::time::timeout(Duration::from_secs(5), second).await;
        assert_eq!(answer.unwrap().unwrap().unwrap(), 2);
    }

    #[tokio::test]
    async fn shutdown_lets_the_request_in_flight_finish_and_stops_accepting() {
        let release = Arc::new(tokio::sync::Notify::new());
        let (addr, serving) = echo(8, Duration::from_millis(300), release).await;
        let in_flight = tokio::spawn(ask(addr, 7));
        tokio::time::sleep(Duration::from_millis(50)).await;
        serving.shutdown().await;
        assert_eq!(in_flight.await.unwrap().unwrap(), 7);
        assert!(
            ask(addr, 8).await.is_err(),
            "a stopped listener accepts nothing"
        );
    }

    #[tokio::test]
    async fn an_http_request_in_flight_gets_its_answer_when_the_listener_stops() {
        use http_body_util::Full;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = spawn(
            "test http",
            listener,
            8,
            CancellationToken::new(),
            |stream: TcpStream, shutdown| {
                let service = hyper::service::service_fn(|_request| async {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        bytes::Bytes::from_static(b"finished"),
                    )))
                });
                http1("test http", stream, service, shutdown)
            },
        );
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        serving.shutdown().await;
        let mut answer = String::new();
        // The keep-alive connection closes once the answer is sent: read_to_string ends.
        tokio::time::timeout(Duration::from_secs(5), client.read_to_string(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("finished"), "{answer}");
    }
}
