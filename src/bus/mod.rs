//! The message bus: one trait with NATS semantics and two backends.
//!
//! Everything above this module talks to other actors only through [`Bus`]: subjects with
//! `*`/`>` wildcards, queue groups, request/reply with a timeout, and a durable work queue with
//! ack and redelivery. `embedded` keeps everything in-process (its durable queue lives in sled);
//! `nats` uses async-nats and JetStream. Nothing above the bus knows which one it has.

pub mod accept_backoff;
pub mod auth;
pub mod cluster;
pub mod embedded;
pub mod events;
pub mod kv;
pub mod local;

pub mod nats;
pub mod paging;
pub mod pattern;
pub mod retry;
pub mod rpc;
pub mod service;
pub mod snapshot;
pub mod socket;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Stream, StreamExt};

/// Largest payload either backend accepts by default (NATS' own default).
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// A message delivered to a subscriber.
#[derive(Debug, Clone)]
pub struct Message {
    pub subject: String,
    /// Where to send the answer, when the publisher used request/reply.
    pub reply: Option<String>,
    pub payload: Bytes,
    /// The W3C trace context of the publisher's span, when this process exports traces and
    /// the publisher sent one (a NATS header; in-process, the publisher's current span).
    pub traceparent: Option<String>,
    /// The body as an in-process value, when the publisher handed one over
    /// ([`Bus::publish_local`]) and this subscriber asked for values ([`Bus::subscribe_local`]).
    /// `payload` may then be empty: read this first.
    pub local: Option<Arc<dyn local::LocalValue>>,
}

impl Message {
    /// A message without a trace context.
    pub fn new(subject: String, reply: Option<String>, payload: Bytes) -> Self {
        Self {
            subject,
            reply,
            payload,
            traceparent: None,
            local: None,
        }
    }
}

/// A live subscription; dropping it unsubscribes.
pub struct Subscription {
    inner: Pin<Box<dyn Stream<Item = Message> + Send>>,
}

impl Subscription {
    pub fn new(inner: impl Stream<Item = Message> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }

    /// The next message, or `None` once the bus is closed.
    pub async fn next(&mut self) -> Option<Message> {
        self.inner.next().await
    }

    /// The messages as a stream.
    pub fn into_stream(self) -> Pin<Box<dyn Stream<Item = Message> + Send>> {
        self.inner
    }
}

/// A service on the bus: answers messages where they arrive. The embedded bus calls it in the
/// sender's task (a request to an in-process service is a function call, not a hop between
/// threads); the NATS bus calls it on the connection's runtime for each message.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Handle `message`. `Some(reply)` is sent to the message's reply subject; `None` sends
    /// nothing now (the service may answer later by publishing to `message.reply`).
    async fn handle(&self, message: Message) -> Option<Bytes>;

    /// Answer a typed request handed over in-process, without encoding it either way: the
    /// embedded bus offers this when a request's only listener is this handler. `Err` gives
    /// the request back, to go the encoded way (the default, for handlers without a typed
    /// path). [`service::typed`] handlers take an `Envelope<R>` and answer a
    /// `Result<Envelope<R::Reply>, ServiceError>`.
    async fn handle_local(&self, request: LocalMessage) -> Result<LocalMessage, LocalMessage> {
        Err(request)
    }
}

/// A typed message handed from caller to handler in-process (see [`Handler::handle_local`]).
pub type LocalMessage = Box<dyn std::any::Any + Send>;

/// A registered [`Handler`]; dropping it stops the service.
pub struct Serving {
    _guard: Box<dyn Send + Sync>,
}

impl Serving {
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Self {
            _guard: Box::new(guard),
        }
    }
}

/// Settles one delivery of a durable queue message.
#[async_trait]
pub trait Acker: Send + Sync {
    /// The message is handled; it will not be delivered again (confirmed by the queue when
    /// this returns).
    async fn ack(&self) -> Result<(), BusError>;
    /// [`Acker::ack`] without waiting for the queue's confirmation, for a consumer that
    /// recognises a message it already handled: a lost acknowledgement costs one more
    /// delivery, not a repeated effect.
    async fn ack_unconfirmed(&self) -> Result<(), BusError> {
        self.ack().await
    }
    /// The message could not be handled now; deliver it again after `delay`.
    async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError>;
    /// Still working on it: push the redelivery deadline back by one `ack_wait`.
    async fn in_progress(&self) -> Result<(), BusError>;
}

/// One delivery from a durable work queue. Unacked deliveries come back after `ack_wait`,
/// and after a restart of the process that held them.
pub struct DurableMessage {
    pub payload: Bytes,
    /// 1 on first delivery, 2 on the first redelivery, and so on.
    pub delivery: u64,
    /// The subject it was published on (captured subjects, [`Bus::capture`]).
    pub subject: Option<String>,
    /// The publisher's `Nats-Msg-Id` header, if it set one.
    pub msg_id: Option<String>,
    /// The publisher's W3C trace context, when this process exports traces and the
    /// publisher sent one.
    pub traceparent: Option<String>,
    /// How long ago the queue stored it, when the backend says (NATS): at least as long as
    /// its delivery's `ack_wait` has been running.
    pub age: Option<Duration>,
    /// The body as its publisher in this process handed it over
    /// ([`Bus::durable_publish_local`]), on its first delivery by the embedded bus; `payload`
    /// holds its bytes all the same. Read this first.
    pub local: Option<Arc<dyn local::LocalValue>>,
    acker: Box<dyn Acker>,
}

impl DurableMessage {
    pub fn new(payload: Bytes, delivery: u64, acker: Box<dyn Acker>) -> Self {
        Self {
            payload,
            delivery,
            subject: None,
            msg_id: None,
            traceparent: None,
            age: None,
            local: None,
            acker,
        }
    }

    /// The body its publisher handed over as a value, if the queue kept it.
    pub fn with_local(mut self, local: Option<Arc<dyn local::LocalValue>>) -> Self {
        self.local = local;
        self
    }

    /// The trace context its publisher sent along.
    pub fn with_traceparent(mut self, traceparent: Option<String>) -> Self {
        self.traceparent = traceparent;
        self
    }

    /// Where the message was published and the id its publisher gave it.
    pub fn with_origin(mut self, subject: String, msg_id: Option<String>) -> Self {
        self.subject = Some(subject);
        self.msg_id = msg_id;
        self
    }

    pub async fn ack(&self) -> Result<(), BusError> {
        self.acker.ack().await
    }

    /// See [`Acker::ack_unconfirmed`].
    pub async fn ack_unconfirmed(&self) -> Result<(), BusError> {
        self.acker.ack_unconfirmed().await
    }

    pub async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError> {
        self.acker.nak(delay).await
    }

    pub async fn in_progress(&self) -> Result<(), BusError> {
        self.acker.in_progress().await
    }
}

impl std::fmt::Debug for DurableMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableMessage")
            .field("payload_len", &self.payload.len())
            .field("delivery", &self.delivery)
            .finish()
    }
}

/// A consumer of one durable queue. Several consumers of the same queue (in one process or
/// many) share the work: each message goes to one of them.
pub struct DurableConsumer {
    inner: Pin<Box<dyn Stream<Item = Result<DurableMessage, BusError>> + Send>>,
}

impl DurableConsumer {
    pub fn new(
        inner: impl Stream<Item = Result<DurableMessage, BusError>> + Send + 'static,
    ) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }

    pub async fn next(&mut self) -> Option<Result<DurableMessage, BusError>> {
        self.inner.next().await
    }

    /// One consumer of two queues: deliveries of either, as they come.
    pub fn merge(self, other: DurableConsumer) -> Self {
        Self::new(futures::stream::select(self.inner, other.inner))
    }
}

/// How a durable queue redelivers.
#[derive(Debug, Clone, Copy)]
pub struct DurableOptions {
    /// An unacked delivery is redelivered after this long.
    pub ack_wait: Duration,
    /// Give up on a message after this many deliveries (it is then dropped with an error log).
    pub max_deliver: u64,
    /// Messages pulled per request on NATS (one request per message at 1, about two per
    /// `batch` above). The ones pulled wait at this consumer, their `ack_wait` running, while
    /// another consumer of the queue may be idle: more than 1 only for a consumer that sends
    /// a progress ack for one that waited long ([`DurableMessage::age`]).
    pub batch: usize,
}

impl Default for DurableOptions {
    fn default() -> Self {
        Self {
            ack_wait: Duration::from_secs(30),
            max_deliver: 10,
            batch: 1,
        }
    }
}

/// How captured subjects are kept ([`Bus::capture`]).
#[derive(Debug, Clone, Copy)]
pub struct CaptureOptions {
    pub durable: DurableOptions,
    /// A message whose `Nats-Msg-Id` was seen within this window is dropped as a repeat.
    pub dedupe_window: Duration,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        Self {
            durable: DurableOptions::default(),
            dedupe_window: Duration::from_secs(24 * 3600),
        }
    }
}

/// What can go wrong on the bus. Every message says what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    #[error("no service is listening on `{subject}`: start the actor that serves it (hermes serve --actors …)")]
    NoResponders { subject: String },
    #[error("no reply on `{subject}` within {after:?}: the service is slow or down; retry, or raise the timeout")]
    Timeout { subject: String, after: Duration },
    #[error("invalid subject `{subject}`: {reason}")]
    InvalidSubject { subject: String, reason: String },
    #[error("payload of {size} bytes is over the bus limit of {max} bytes: send a reference instead of the data")]
    PayloadTooLarge { size: usize, max: usize },
    #[error("cannot connect to the bus at {url}: {reason}; is nats-server running (with -js)?")]
    Connect { url: String, reason: String },
    #[error("cannot connect to the bus at {url}: {error}")]
    Credentials {
        url: String,
        #[source]
        error: auth::AuthError,
    },
    #[error("the bus is closed")]
    Closed,
    #[error("cannot encode the message for `{subject}`: {reason}; this is a bug in the publisher, please report it")]
    Encode { subject: String, reason: String },
    #[error("durable queue storage failed: {0}")]
    Storage(String),
    #[error("bus I/O failed: {0}")]
    Io(String),
    /// The server refused a subscription or publish of this process (the text says which,
    /// for whom, and where the permissions are).
    #[error("{0}")]
    PermissionDenied(String),
}

/// The kinds of bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusBackend {
    /// In-process, one engine.
    Embedded,
    /// A client of a serving process's embedded bus over its control socket.
    Socket,
    /// A NATS server, shared by many processes.
    Nats,
}

impl BusBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            BusBackend::Embedded => "embedded",
            BusBackend::Socket => "socket",
            BusBackend::Nats => "nats",
        }
    }

    /// Every service answers from one process's embedded bus: a request is answered or it is
    /// not, and sending it again (while services start elsewhere) cannot help.
    pub fn single_process(self) -> bool {
        matches!(self, BusBackend::Embedded | BusBackend::Socket)
    }
}

/// The bus every actor talks through.
#[async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Which kind of bus this is.
    fn backend(&self) -> BusBackend;

    /// The largest payload this bus accepts.
    fn max_payload(&self) -> usize;

    /// Fire-and-forget publish to a concrete subject (no wildcards).
    async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), BusError>;

    /// Subscribe to a subject pattern (`*` matches one token, `>` the rest).
    async fn subscribe(&self, pattern: &str) -> Result<Subscription, BusError>;

    /// Publish a body that in-process subscribers may take as a value
    /// ([`Message::local`]); everywhere else it is its encoded bytes. No size limit applies
    /// to a body that stays a value.
    async fn publish_local(
        &self,
        subject: &str,
        body: Arc<dyn local::LocalValue>,
    ) -> Result<(), BusError> {
        let payload = local::encode_for(subject, body.as_ref())?;
        self.publish(subject, payload).await
    }

    /// [`Bus::publish_local`] for a turn's answer, which its publisher waits for: on NATS it
    /// is also sent again should the connection it left on break right after
    /// (`bus::nats::resend`; subscribers know the copy by its envelope id).
    async fn publish_final(
        &self,
        subject: &str,
        body: Arc<dyn local::LocalValue>,
    ) -> Result<(), BusError> {
        self.publish_local(subject, body).await
    }

    /// Subscribe like [`Bus::subscribe`], taking bodies published with
    /// [`Bus::publish_local`] in this process as values: such a message has
    /// [`Message::local`] set and perhaps no payload. A networked bus delivers bytes only.
    async fn subscribe_local(&self, pattern: &str) -> Result<Subscription, BusError> {
        self.subscribe(pattern).await
    }

    /// Subscribe as a member of a queue group: each message goes to one member of the group.
    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<Subscription, BusError>;

    /// Serve `pattern` in queue `group` with `handler` (see [`Handler`]) until the returned
    /// guard drops.
    async fn serve(
        &self,
        pattern: &str,
        group: &str,
        handler: Arc<dyn Handler>,
    ) -> Result<Serving, BusError>;

    /// The in-process handler that is the only listener on `subject`, if there is one: a
    /// request to it may be handed over typed ([`Handler::handle_local`]). Always `None` on a
    /// networked bus, and whenever anything else (a monitor, another group) listens there.
    fn local_handler(&self, _subject: &str) -> Option<Arc<dyn Handler>> {
        None
    }

    /// Send a request and wait for the first reply.
    async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, BusError>;

    /// Append to a durable work queue; returns once the message is stored.
    async fn durable_publish(&self, queue: &str, payload: Bytes) -> Result<(), BusError>;

    /// [`Bus::durable_publish`] of a body that an in-process consumer may take as a value on
    /// its first delivery ([`DurableMessage::local`]): no decoding of what was just encoded
    /// for the queue. The queue stores the bytes as ever; a networked bus delivers bytes only.
    async fn durable_publish_local(
        &self,
        queue: &str,
        body: Arc<dyn local::LocalValue>,
    ) -> Result<(), BusError> {
        let payload = local::encode_for(queue, body.as_ref())?;
        self.durable_publish(queue, payload).await
    }

    /// Consume a durable work queue.
    async fn durable_consume(
        &self,
        queue: &str,
        options: DurableOptions,
    ) -> Result<DurableConsumer, BusError>;

    /// Capture every message published on `subjects` (any subjects, not only Hermes' own)
    /// and consume them as the durable work queue `name`. On NATS a JetStream stream keeps
    /// what is published while no consumer runs, and drops a repeat of a `Nats-Msg-Id` within
    /// `options.dedupe_window`; the embedded bus subscribes (nothing outlives the process).
    async fn capture(
        &self,
        name: &str,
        subjects: &[String],
        options: CaptureOptions,
    ) -> Result<DurableConsumer, BusError>;

    /// Wait until everything published so far has left this process.
    async fn flush(&self) -> Result<(), BusError>;

    /// Session partitions with failover and the replicated session log, when this bus has a
    /// cluster behind it (NATS with JetStream). `None` on the embedded bus: one process owns
    /// every session and sled alone holds them.
    fn cluster(&self) -> Option<Arc<dyn cluster::Cluster>> {
        None
    }

    /// This process's name on the bus, when its credential comes with one
    /// ([`auth::NatsAuth::identity`]): the messages it sends to sessions go to
    /// `hermes.in.<agent>.<session>.<identity>`. `None` on the embedded bus.
    fn identity(&self) -> Option<&str> {
        None
    }

    /// What the server refused this connection so far, each explained (what, and the fix);
    /// empty off NATS and on a server without permissions. A client whose request went
    /// unanswered reads it: a refused publish looks like silence from the other side.
    fn refusals(&self) -> Vec<String> {
        Vec::new()
    }

    /// The NATS connection under this bus, for a client of Hermes in this process
    /// (`hermes-client`, as `hermes send` uses it) to share; `None` off NATS.
    fn nats_client(&self) -> Option<async_nats::Client> {
        None
    }

    /// The JetStream streams behind this bus, read and written whole (`hermes backup` /
    /// `hermes restore`); `None` on the embedded bus.
    fn snapshots(&self) -> Option<Arc<dyn snapshot::Snapshots>> {
        None
    }

    /// Messages this process has sent and received over the network so far; `None` on the
    /// embedded bus, which sends nothing over one. (`hermes bench` reports them per turn: a
    /// count a noisy host does not blur.)
    fn traffic(&self) -> Option<Traffic> {
        None
    }

    /// Fail when the server refused a subscription this process made so far (a NATS server
    /// with permissions reports that only asynchronously): call once every service is
    /// subscribed. Always fine on the embedded bus.
    async fn check_permissions(&self) -> Result<(), BusError> {
        Ok(())
    }
}

/// The bus as actors hold it.
pub type SharedBus = Arc<dyn Bus>;

/// Messages a process sent and received over a networked bus ([`Bus::traffic`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

/// Answer a request message; a message without a reply subject is silently not answered.
pub async fn respond(bus: &dyn Bus, message: &Message, payload: Bytes) -> Result<(), BusError> {
    match &message.reply {
        Some(reply) => bus.publish(reply, payload).await,
        None => Ok(()),
    }
}

/// Open the bus named by `url`: `embedded` (needs the sled database for durable queues) or
/// `nats://host:port`, with the NATS credentials of the environment ([`auth::NatsAuth::from_env`]).
pub async fn connect(
    url: &str,
    db: Option<crate::store::durability::Durable>,
) -> Result<SharedBus, BusError> {
    let credentials = match url {
        "embedded" => auth::NatsAuth::default(),
        _ => auth::NatsAuth::from_env().map_err(|error| BusError::Credentials {
            url: url.to_string(),
            error,
        })?,
    };
    connect_with(url, db, cluster::ClusterOptions::default(), &credentials).await
}

/// [`connect`], with the session partitions of a NATS deployment laid out as `cluster` says.
pub async fn connect_with(
    url: &str,
    db: Option<crate::store::durability::Durable>,
    cluster: cluster::ClusterOptions,
    credentials: &auth::NatsAuth,
) -> Result<SharedBus, BusError> {
    if url == "embedded" {
        let db = db.ok_or_else(|| {
            BusError::Storage("the embedded bus needs the data directory's sled database".into())
        })?;
        Ok(Arc::new(embedded::EmbeddedBus::open(db)?))
    } else if url.starts_with("nats://") || url.starts_with("tls://") {
        Ok(Arc::new(
            nats::NatsBus::connect_with(url, cluster, credentials).await?,
        ))
    } else {
        Err(BusError::Connect {
            url: url.to_string(),
            reason: "unknown bus; use `embedded` or `nats://host:port`".into(),
        })
    }
}

#[cfg(test)]
mod backend_tests {
    use super::BusBackend;

    #[test]
    fn the_control_socket_is_served_by_one_process_like_the_embedded_bus() {
        // Requests over the control socket take the embedded path of `retry::request`
        // (answered or not, never sent again), not NATS's wait for responders.
        assert!(BusBackend::Socket.single_process());
        assert!(BusBackend::Embedded.single_process());
        assert!(!BusBackend::Nats.single_process());
    }
}
