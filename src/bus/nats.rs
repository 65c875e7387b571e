//! The NATS bus: async-nats for subjects, queue groups and request/reply, JetStream work-queue
//! streams for durable queues (see [`jetstream`]).
//!
//! Runtimes: async-nats spawns the connection's I/O task (and the JetStream publish-ack task)
//! on the runtime where [`NatsBus::connect`] runs, so call `connect` on a long-lived
//! **multi-threaded** tokio runtime — never inside an actix arbiter, whose single thread may
//! block or stop. Every other method may then be called from any tokio runtime, actix arbiters
//! included: `publish`, `subscribe`, `request` and `flush` only send commands over the client's
//! channels and wait on oneshots/timers of the caller's runtime; `durable_consume` starts its
//! pull task on the connect-time runtime itself. Subscription and consumer streams can be
//! polled from anywhere.
//!
//! The client reconnects by itself after the server goes away (not on the *initial* connect,
//! which fails within [`CONNECT_TIMEOUT`] with [`BusError::Connect`]).

mod audit;
mod auth;
mod balance;
mod cluster;
mod jetstream;
mod kv;
mod local;
mod local_reply;
mod log;
mod log_feed;
mod outbox;
mod partitions;
mod permissions;
mod resend;
mod snapshot;
mod tap;
mod trace;

pub use tap::{MessageTap, TAP_CAUSED};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{ConnectErrorKind, RequestErrorKind};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::runtime::{Handle, RuntimeFlavor};
use tracing::Instrument;

use super::auth::NatsAuth;
use super::cluster::{Cluster, ClusterOptions};
use super::pattern::{check_group, check_payload, check_subject};
use super::{
    Bus, BusError, CaptureOptions, DurableConsumer, DurableOptions, Handler, Message, Serving,
    Subscription,
};
use crate::telemetry::spans;

/// How long the first connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a refused connection is retried at start, for a nats-server that is starting.
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);

/// Stops a background task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A bus on a NATS server (with JetStream enabled for durable queues).
pub struct NatsBus {
    url: String,
    client: async_nats::Client,
    jetstream: async_nats::jetstream::Context,
    /// The runtime `connect` ran on; background tasks started later go there too.
    runtime: Handle,
    /// Queues whose stream is known to exist.
    streams: Mutex<HashSet<String>>,
    /// Session partitions and the session log (see [`cluster`]).
    cluster: Arc<cluster::NatsCluster>,
    /// This process's services, answered in-process when it asks for them ([`local`]).
    local: Arc<local::LocalServices>,
    /// Where the later answers to requests handed to [`local`] routers come back
    /// ([`local_reply`]); subscribed on the first such request.
    local_replies: tokio::sync::OnceCell<local_reply::LocalReplies>,
    /// This process's name on the bus ([`crate::bus::auth::NatsAuth::identity`]).
    identity: Option<String>,
    /// What the server refused this connection ([`permissions`]).
    violations: Arc<permissions::Violations>,
    /// Answers sent again after a break of the connection ([`resend`]).
    resends: Arc<resend::Resends>,
}

impl NatsBus {
    /// Store `payload` in `queue`'s stream, creating the stream when it is missing.
    async fn publish_durably(&self, queue: &str, payload: Bytes) -> Result<(), BusError> {
        if !self.stream_known(queue) {
            jetstream::ensure_stream(&self.jetstream, queue, self.replicas()).await?;
            self.set_stream_known(queue, true);
        }
        let headers = trace::headers();
        match jetstream::publish(&self.jetstream, queue, payload.clone(), headers.clone()).await {
            Err(jetstream::PublishFailure::StreamMissing) => {
                // Deleted behind our back (or the server lost its store): recreate, retry once.
                self.set_stream_known(queue, false);
                jetstream::ensure_stream(&self.jetstream, queue, self.replicas()).await?;
                self.set_stream_known(queue, true);
                jetstream::publish(&self.jetstream, queue, payload, headers)
                    .await
                    .map_err(|e| e.into_bus_error(queue))
            }
            other => other.map_err(|e| e.into_bus_error(queue)),
        }
    }

    /// Publish `payload` on `subject`; `kept` for sending again after a break ([`resend`]).
    async fn send(&self, subject: &str, payload: Bytes, kept: bool) -> Result<(), BusError> {
        check_subject(subject, false)?;
        self.check_size(&payload)?;
        if let Some(replies) = self.local_replies.get() {
            if replies.deliver(subject, &payload) {
                return Ok(());
            }
        }
        let headers = trace::headers();
        if kept {
            self.resends.keep(subject, headers.clone(), payload.clone());
        }
        let sent = match headers {
            Some(headers) => {
                self.client
                    .publish_with_headers(subject.to_string(), headers, payload)
                    .await
            }
            None => self.client.publish(subject.to_string(), payload).await,
        };
        sent.map_err(|e| self.io_error("publish failed", e))
    }

    /// Connect to `url` (`nats://host:port`). Call on a multi-threaded tokio runtime (see the
    /// module docs); fails with [`BusError::Connect`] within [`CONNECT_TIMEOUT`] when no
    /// server answers.
    pub async fn connect(url: &str) -> Result<Self, BusError> {
        Self::connect_with(url, ClusterOptions::default(), &NatsAuth::default()).await
    }

    /// [`Self::connect`], with session partitions laid out as `cluster` says.
    pub async fn connect_with(
        url: &str,
        cluster: ClusterOptions,
        credentials: &NatsAuth,
    ) -> Result<Self, BusError> {
        let connect_error = |reason: String| BusError::Connect {
            url: url.to_string(),
            reason,
        };
        let runtime = Handle::try_current()
            .map_err(|_| connect_error("not called inside a tokio runtime".into()))?;
        if runtime.runtime_flavor() == RuntimeFlavor::CurrentThread {
            tracing::warn!(
                url,
                "NATS connection opened on a current-thread runtime: its I/O stops whenever \
                 that thread blocks; connect from a multi-threaded tokio runtime"
            );
        }
        // `nats://a:4222,nats://b:4222` names the seeds of one cluster: the client fails
        // over between them (and learns the rest of the cluster from the servers).
        let servers: Vec<&str> = url
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let who = match &credentials.identity {
            Some(identity) => format!("{} (identity `{identity}`)", credentials.credential.who()),
            None => credentials.credential.who(),
        };
        let violations = Arc::new(permissions::Violations::new(who));
        let breaks = Arc::new(log_feed::BreakCount::default());
        let resends = Arc::new(resend::Resends::default());
        // A server that is still starting (same script, docker-compose) is waited for.
        let deadline = tokio::time::Instant::now() + STARTUP_WAIT;
        let client = loop {
            let (watched, broken, resent) = (violations.clone(), breaks.clone(), resends.clone());
            let options = async_nats::ConnectOptions::new()
                .name("hermes")
                .connection_timeout(CONNECT_TIMEOUT)
                .event_callback(move |event| {
                    watched.observe(&event);
                    broken.observe(&event);
                    let resent = resent.clone();
                    async move { resent.observe(&event).await }
                });
            let options =
                auth::apply(options, credentials)
                    .await
                    .map_err(|error| BusError::Credentials {
                        url: url.to_string(),
                        error,
                    })?;
            let attempt = options.connect(servers.as_slice()).await;
            match attempt {
                Ok(client) => break client,
                Err(err)
                    if err.kind() == ConnectErrorKind::Io
                        && !auth::is_tls_failure(&err, credentials)
                        && tokio::time::Instant::now() < deadline =>
                {
                    tracing::info!(url, error = %err, "nats-server not reachable yet; retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(err) => {
                    return Err(connect_error(match err.kind() {
                        ConnectErrorKind::TimedOut => {
                            format!("no answer within {CONNECT_TIMEOUT:?}")
                        }
                        _ => auth::explain(&err, credentials),
                    }))
                }
            }
        };
        resends.attach(client.clone());
        let jetstream = async_nats::jetstream::new(client.clone());
        let cluster = Arc::new(cluster::NatsCluster::new(
            jetstream.clone(),
            runtime.clone(),
            cluster,
            breaks.subscribe(),
        ));
        Ok(Self {
            local: Arc::default(),
            local_replies: tokio::sync::OnceCell::new(),
            url: url.to_string(),
            client,
            jetstream,
            runtime,
            streams: Mutex::new(HashSet::new()),
            cluster,
            identity: credentials.identity.clone(),
            violations,
            resends,
        })
    }

    /// Copies JetStream keeps of each stream this bus creates.
    fn replicas(&self) -> usize {
        self.cluster.options().replicas
    }

    fn io_error(&self, what: &str, err: impl std::fmt::Display) -> BusError {
        BusError::Io(format!(
            "{what} on {}: {err}; check that nats-server is running and reachable",
            self.url
        ))
    }

    fn check_size(&self, payload: &Bytes) -> Result<(), BusError> {
        check_payload(payload.len(), self.client.max_payload())
    }

    fn wrap(subscriber: async_nats::Subscriber) -> Subscription {
        Subscription::new(subscriber.map(|m| Message {
            subject: m.subject.to_string(),
            reply: m.reply.map(|r| r.to_string()),
            traceparent: trace::received(m.headers.as_ref()),
            payload: m.payload,
            local: None,
        }))
    }

    fn stream_known(&self, queue: &str) -> bool {
        self.streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(queue)
    }

    fn set_stream_known(&self, queue: &str, known: bool) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if known {
            streams.insert(queue.to_string());
        } else {
            streams.remove(queue);
        }
    }
}

#[async_trait]
impl Bus for NatsBus {
    fn backend(&self) -> crate::bus::BusBackend {
        crate::bus::BusBackend::Nats
    }

    fn traffic(&self) -> Option<super::Traffic> {
        use std::sync::atomic::Ordering;
        let stats = self.client.statistics();
        Some(super::Traffic {
            sent: stats.out_messages.load(Ordering::Relaxed),
            received: stats.in_messages.load(Ordering::Relaxed),
        })
    }

    /// The server's `max_payload` (1 MiB unless the server is configured otherwise).
    fn max_payload(&self) -> usize {
        self.client.max_payload()
    }

    async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), BusError> {
        self.send(subject, payload, false).await
    }

    async fn publish_final(
        &self,
        subject: &str,
        body: Arc<dyn super::local::LocalValue>,
    ) -> Result<(), BusError> {
        let payload = super::local::encode_for(subject, body.as_ref())?;
        self.send(subject, payload, true).await
    }

    async fn subscribe(&self, pattern: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        let subscriber = self
            .client
            .subscribe(pattern.to_string())
            .await
            .map_err(|e| self.io_error("subscribe failed", e))?;
        Ok(Self::wrap(subscriber))
    }

    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<Subscription, BusError> {
        check_subject(pattern, true)?;
        check_group(group)?;
        let subscriber = self
            .client
            .queue_subscribe(pattern.to_string(), group.to_string())
            .await
            .map_err(|e| self.io_error("queue subscribe failed", e))?;
        Ok(Self::wrap(subscriber))
    }

    /// Each message is handled in a task of its own on the connection's runtime, so a slow
    /// request never holds up the next. A message with a trace context is handled in a
    /// `process <pattern>` span whose parent is the sender's span.
    async fn serve(
        &self,
        pattern: &str,
        group: &str,
        handler: Arc<dyn Handler>,
    ) -> Result<Serving, BusError> {
        check_subject(pattern, true)?;
        check_group(group)?;
        let mut subscriber = self
            .client
            .queue_subscribe(pattern.to_string(), group.to_string())
            .await
            .map_err(|e| self.io_error("queue subscribe failed", e))?;
        let client = self.client.clone();
        let local = self.local.register(pattern, group, handler.clone());
        let pattern = pattern.to_string();
        let task = self.runtime.spawn(async move {
            while let Some(m) = subscriber.next().await {
                let (handler, client) = (handler.clone(), client.clone());
                let traceparent = trace::received(m.headers.as_ref());
                let span = spans::process_message(&pattern, traceparent.as_deref());
                tokio::spawn(
                    async move {
                        let reply = m.reply.clone();
                        let message = Message {
                            subject: m.subject.to_string(),
                            reply: m.reply.map(|r| r.to_string()),
                            payload: m.payload,
                            traceparent,
                            local: None,
                        };
                        if let (Some(answer), Some(to)) = (handler.handle(message).await, reply) {
                            if let Err(e) = client.publish(to, answer).await {
                                tracing::warn!(error = %e, "reply not sent");
                            }
                        }
                    }
                    .instrument(span),
                );
            }
            tracing::debug!(pattern, "service subscription closed");
        });
        Ok(Serving::new((AbortOnDrop(task), local)))
    }

    fn local_handler(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        self.local.get(subject)
    }

    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError> {
        check_subject(subject, false)?;
        self.check_size(&payload)?;
        if let Some(router) = self.local.router(subject) {
            let replies = self
                .local_replies
                .get_or_try_init(|| local_reply::LocalReplies::start(&self.client, &self.runtime))
                .await?;
            return replies
                .request(&self.runtime, router, subject, payload, timeout)
                .await
                .map_err(|e| match e {
                    local_reply::Failed::TimedOut => BusError::Timeout {
                        subject: subject.to_string(),
                        after: timeout,
                    },
                    local_reply::Failed::Broken(why) => self.io_error("request failed", why),
                });
        }
        let size = payload.len();
        let mut request = async_nats::Request::new()
            .payload(payload)
            .timeout(Some(timeout));
        if let Some(headers) = trace::headers() {
            request = request.headers(headers);
        }
        match self.client.send_request(subject.to_string(), request).await {
            Ok(reply) => Ok(reply.payload),
            // A request the server's permissions stopped looks like silence: say why.
            Err(err) => Err(
                match (self.violations.refused_request(subject), err.kind()) {
                    (Some(denial), _) => BusError::PermissionDenied(permissions::explain(
                        self.violations.who(),
                        &denial,
                    )),
                    (None, RequestErrorKind::NoResponders) => BusError::NoResponders {
                        subject: subject.to_string(),
                    },
                    (None, RequestErrorKind::TimedOut) => BusError::Timeout {
                        subject: subject.to_string(),
                        after: timeout,
                    },
                    (None, RequestErrorKind::MaxPayloadExceeded) => BusError::PayloadTooLarge {
                        size,
                        max: self.client.max_payload(),
                    },
                    (None, _) => self.io_error("request failed", err),
                },
            ),
        }
    }

    async fn durable_publish(&self, queue: &str, payload: Bytes) -> Result<(), BusError> {
        check_subject(queue, false)?;
        self.check_size(&payload)?;
        jetstream::through_failover("publishing to a durable queue", || {
            self.publish_durably(queue, payload.clone())
        })
        .await
    }

    async fn durable_consume(
        &self,
        queue: &str,
        options: DurableOptions,
    ) -> Result<DurableConsumer, BusError> {
        check_subject(queue, false)?;
        let context = self.jetstream.clone();
        let name = queue.to_string();
        let replicas = self.replicas();
        // The pull consumer spawns its request task where it is created: keep it on the
        // connect-time runtime, whatever runtime calls us.
        let setup = self
            .runtime
            .spawn(async move { jetstream::consume(&context, &name, replicas, options).await });
        let consumer = setup
            .await
            .map_err(|e| self.io_error("starting the durable consumer failed", e))??;
        self.set_stream_known(queue, true);
        Ok(consumer)
    }

    async fn capture(
        &self,
        name: &str,
        subjects: &[String],
        options: CaptureOptions,
    ) -> Result<DurableConsumer, BusError> {
        for subject in subjects {
            check_subject(subject, true)?;
        }
        let context = self.jetstream.clone();
        let (name, subjects) = (name.to_string(), subjects.to_vec());
        let replicas = self.replicas();
        let setup = self.runtime.spawn(async move {
            jetstream::capture(&context, &name, &subjects, replicas, options).await
        });
        setup
            .await
            .map_err(|e| self.io_error("starting the capture consumer failed", e))?
    }

    async fn flush(&self) -> Result<(), BusError> {
        self.client
            .flush()
            .await
            .map_err(|e| self.io_error("flush failed", e))
    }

    fn cluster(&self) -> Option<Arc<dyn Cluster>> {
        Some(self.cluster.clone())
    }

    fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
    }

    fn refusals(&self) -> Vec<String> {
        self.violations
            .all()
            .iter()
            .map(|denial| permissions::explain(self.violations.who(), denial))
            .collect()
    }

    fn nats_client(&self) -> Option<async_nats::Client> {
        Some(self.client.clone())
    }

    fn snapshots(&self) -> Option<Arc<dyn crate::bus::snapshot::Snapshots>> {
        Some(Arc::new(snapshot::NatsSnapshots::new(
            self.jetstream.clone(),
        )))
    }

    /// The server answers a subscription it refuses with an error of its own, read before the
    /// flush's PONG; the callback that notes it runs a moment later, hence the short wait.
    async fn check_permissions(&self) -> Result<(), BusError> {
        self.flush().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        match self.violations.denied().into_iter().next() {
            None => Ok(()),
            Some(denial) => Err(BusError::PermissionDenied(permissions::explain(
                self.violations.who(),
                &denial,
            ))),
        }
    }
}

/// The reference the bench holds the NATS bus against: `n` sequential request/reply round trips
/// with bare async-nats on one connection (an echo task answering, no envelopes, no handlers),
/// as a hand-written async-nats program would do them. Returns each round trip's latency.
pub async fn bare_request_reply(
    url: &str,
    subject: &str,
    n: u64,
    payload: Bytes,
) -> Result<Vec<Duration>, BusError> {
    let error = |what: &str, e: &dyn std::fmt::Display| {
        BusError::Io(format!("bare async-nats {what} on {url}: {e}"))
    };
    let client = async_nats::connect(url)
        .await
        .map_err(|e| error("connect", &e))?;
    let mut requests = client
        .subscribe(subject.to_string())
        .await
        .map_err(|e| error("subscribe", &e))?;
    let responder = client.clone();
    let echo = tokio::spawn(async move {
        while let Some(msg) = requests.next().await {
            if let Some(reply) = msg.reply {
                let _ = responder.publish(reply, msg.payload).await;
            }
        }
    });
    client.flush().await.map_err(|e| error("flush", &e))?;
    let mut latencies = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        let start = std::time::Instant::now();
        client
            .request(subject.to_string(), payload.clone())
            .await
            .map_err(|e| error("request", &e))?;
        latencies.push(start.elapsed());
    }
    echo.abort();
    Ok(latencies)
}
