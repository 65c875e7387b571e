//! The control socket: a running `hermes serve` answers the CLI's read requests through a Unix
//! socket in its data directory (`<data_dir>/hermes.sock`, owner-only), so `hermes sessions`,
//! `hermes memory` and `hermes mcp status|audit` work while it holds the directory — which on
//! the embedded bus is the only way in, since sled allows one process per directory and there
//! is no network bus to ask.
//!
//! [`listen`] forwards each request to the serve's own bus, for the subjects in [`SUBJECTS`]
//! only; [`SocketBus`] is the client side, a [`Bus`] that can only send requests. One request
//! per connection: `u32` subject length, subject, `u32` timeout in ms, `u32` payload length,
//! payload; the answer is a status byte ([`Status`]), a `u32` length and the reply (or the
//! error's text). Lengths are big-endian.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use super::{
    Bus, BusError, CaptureOptions, DurableConsumer, DurableOptions, Handler, Serving, SharedBus,
    Subscription,
};
use crate::protocol::subjects;

/// The socket's file name in the data directory.
pub const SOCKET_FILE: &str = "hermes.sock";

/// What the socket forwards: the requests of `hermes sessions`, `hermes memory` and
/// `hermes mcp status|audit`.
pub const SUBJECTS: &[&str] = &[
    subjects::SESSIONS_LIST,
    subjects::SESSIONS_SHOW,
    subjects::SESSIONS_SEARCH,
    subjects::MEMORY_LIST,
    subjects::MEMORY_RECALL,
    subjects::MEMORY_FORGET,
    subjects::MCP_CATALOG,
    subjects::MCP_AUDIT,
    subjects::BACKUP,
];

/// Largest reply the client reads.
const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;
/// Longest subject accepted.
const MAX_SUBJECT_BYTES: usize = 256;
/// How long the server waits for a client to send its request.
const READ_WAIT: Duration = Duration::from_secs(10);

/// How a request fared, the first byte of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    Answered = 0,
    NoResponders = 1,
    Timeout = 2,
    /// Not one of [`SUBJECTS`], or a request the server could not read.
    Refused = 3,
    Failed = 4,
}

impl Status {
    fn from_byte(byte: u8) -> Self {
        match byte {
            0 => Status::Answered,
            1 => Status::NoResponders,
            2 => Status::Timeout,
            3 => Status::Refused,
            _ => Status::Failed,
        }
    }
}

/// Why the control socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("cannot open the control socket {path}: {source}; `hermes sessions|memory|mcp` cannot reach this process while it runs (a shorter --data-dir path helps when it is over ~100 characters)")]
    Bind {
        path: String,
        source: std::io::Error,
    },
}

/// `<data_dir>/hermes.sock`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE)
}

/// A listening control socket; stops and removes its file when dropped.
pub struct ControlSocket {
    path: PathBuf,
    serving: crate::serving::Serving,
}

impl ControlSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.serving.stop();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Answer requests on `<data_dir>/hermes.sock` through `bus` until the guard drops, at most
/// `max_connections` at once (`[http] max_connections`; requests in flight finish). The
/// caller holds the data directory (its sled lock), so a socket file already there is a dead
/// process' and is replaced. Call on the I/O runtime.
pub async fn listen(
    bus: SharedBus,
    data_dir: &Path,
    max_request_bytes: usize,
    max_connections: usize,
) -> Result<ControlSocket, SocketError> {
    let path = socket_path(data_dir);
    let bind_error = |source| SocketError::Bind {
        path: path.display().to_string(),
        source,
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_error(e)),
    }
    let listener = UnixListener::bind(&path).map_err(bind_error)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    // One bad connection ends only itself; a failed accept waits and tries again.
    let serving = crate::serving::spawn(
        "the control socket",
        listener,
        max_connections,
        CancellationToken::new(),
        move |stream, _| {
            let bus = bus.clone();
            async move {
                if let Err(e) = answer(bus, stream, max_request_bytes).await {
                    tracing::debug!(error = %e, "control socket client went away");
                }
            }
        },
    );
    Ok(ControlSocket { path, serving })
}

/// Read one request from `stream`, forward it, write the answer.
async fn answer(
    bus: SharedBus,
    mut stream: UnixStream,
    max_request_bytes: usize,
) -> std::io::Result<()> {
    let request = tokio::time::timeout(READ_WAIT, read_request(&mut stream, max_request_bytes))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request sent"))?;
    let (status, body) = match request {
        Err(e) => (Status::Refused, Bytes::from(e.to_string())),
        Ok((subject, _, _)) if !SUBJECTS.contains(&subject.as_str()) => (
            Status::Refused,
            Bytes::from(format!(
                "the control socket does not forward `{subject}`; it answers {}",
                SUBJECTS.join(", ")
            )),
        ),
        Ok((subject, timeout, payload)) => match bus.request(&subject, payload, timeout).await {
            Ok(reply) => (Status::Answered, reply),
            Err(e) => {
                let status = match e {
                    BusError::NoResponders { .. } => Status::NoResponders,
                    BusError::Timeout { .. } => Status::Timeout,
                    _ => Status::Failed,
                };
                (status, Bytes::from(e.to_string()))
            }
        },
    };
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    stream.write_u8(status as u8).await?;
    stream.write_u32(len).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}

async fn read_request(
    stream: &mut UnixStream,
    max_request_bytes: usize,
) -> std::io::Result<(String, Duration, Bytes)> {
    let subject = read_chunk(stream, MAX_SUBJECT_BYTES).await?;
    let subject = String::from_utf8(subject.to_vec()).map_err(std::io::Error::other)?;
    let timeout = Duration::from_millis(u64::from(stream.read_u32().await?));
    let payload = read_chunk(stream, max_request_bytes).await?;
    Ok((subject, timeout, payload))
}

/// A `u32` length and that many bytes, refused above `max`.
async fn read_chunk(stream: &mut (impl AsyncRead + Unpin), max: usize) -> std::io::Result<Bytes> {
    let len = stream.read_u32().await? as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a message of {len} bytes is over the limit of {max}"),
        ));
    }
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).await?;
    Ok(Bytes::from(buf))
}

/// A bus that sends requests to a running `hermes serve` through its control socket, and
/// does nothing else (publishing, subscribing and queues are refused).
pub struct SocketBus {
    path: PathBuf,
}

impl SocketBus {
    /// The control socket of the process serving `data_dir`, when one is listening there; none
    /// when no process serves it (no socket, or one left behind by a process that died).
    pub async fn find(data_dir: &Path) -> Option<Arc<SocketBus>> {
        let path = socket_path(data_dir);
        if !path.exists() {
            return None;
        }
        match UnixStream::connect(&path).await {
            Ok(_) => Some(Arc::new(SocketBus { path })),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "control socket not answering");
                None
            }
        }
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn exchange(
        &self,
        subject: &str,
        payload: &[u8],
        timeout: Duration,
    ) -> std::io::Result<(Status, Bytes)> {
        let mut stream = UnixStream::connect(&self.path).await?;
        let too_long = |_| std::io::Error::other("request too long for the control socket");
        stream
            .write_u32(u32::try_from(subject.len()).map_err(too_long)?)
            .await?;
        stream.write_all(subject.as_bytes()).await?;
        stream
            .write_u32(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX))
            .await?;
        stream
            .write_u32(u32::try_from(payload.len()).map_err(too_long)?)
            .await?;
        stream.write_all(payload).await?;
        let status = Status::from_byte(stream.read_u8().await?);
        let body = read_chunk(&mut stream, MAX_REPLY_BYTES).await?;
        Ok((status, body))
    }

    fn only_requests(&self, what: &str) -> BusError {
        BusError::Io(format!(
            "the control socket {} only carries requests; {what} needs a bus (--bus nats://…)",
            self.path.display()
        ))
    }
}

#[async_trait]
impl Bus for SocketBus {
    fn backend(&self) -> crate::bus::BusBackend {
        crate::bus::BusBackend::Socket
    }

    fn max_payload(&self) -> usize {
        super::DEFAULT_MAX_PAYLOAD
    }

    async fn publish(&self, _subject: &str, _payload: Bytes) -> Result<(), BusError> {
        Err(self.only_requests("publishing"))
    }

    async fn subscribe(&self, _pattern: &str) -> Result<Subscription, BusError> {
        Err(self.only_requests("subscribing"))
    }

    async fn queue_subscribe(
        &self,
        _pattern: &str,
        _group: &str,
    ) -> Result<Subscription, BusError> {
        Err(self.only_requests("subscribing"))
    }

    async fn serve(
        &self,
        _pattern: &str,
        _group: &str,
        _handler: Arc<dyn Handler>,
    ) -> Result<Serving, BusError> {
        Err(self.only_requests("serving"))
    }

    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError> {
        let timed_out = || BusError::Timeout {
            subject: subject.to_string(),
            after: timeout,
        };
        // The server waits `timeout` for its service; allow for the trip on top.
        let (status, body) = tokio::time::timeout(
            timeout + Duration::from_secs(1),
            self.exchange(subject, &payload, timeout),
        )
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| {
            BusError::Io(format!(
                "the control socket {} failed: {e}; is the `hermes serve` using this data \
                 directory still running?",
                self.path.display()
            ))
        })?;
        let text = || String::from_utf8_lossy(&body).into_owned();
        match status {
            Status::Answered => Ok(body),
            Status::NoResponders => Err(BusError::NoResponders {
                subject: subject.to_string(),
            }),
            Status::Timeout => Err(timed_out()),
            Status::Refused | Status::Failed => Err(BusError::Io(text())),
        }
    }

    async fn durable_publish(&self, _queue: &str, _payload: Bytes) -> Result<(), BusError> {
        Err(self.only_requests("a durable queue"))
    }

    async fn durable_consume(
        &self,
        _queue: &str,
        _options: DurableOptions,
    ) -> Result<DurableConsumer, BusError> {
        Err(self.only_requests("a durable queue"))
    }

    async fn capture(
        &self,
        _name: &str,
        _subjects: &[String],
        _options: CaptureOptions,
    ) -> Result<DurableConsumer, BusError> {
        Err(self.only_requests("capturing subjects"))
    }

    async fn flush(&self) -> Result<(), BusError> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod tests;
