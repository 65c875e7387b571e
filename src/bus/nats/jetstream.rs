//! Durable queues on JetStream.
//!
//! Queue `hermes.memory.extract` is the stream `HERMES_MEMORY_EXTRACT` (dots and other
//! characters streams may not contain become `_`, letters are uppercased) capturing exactly
//! that subject, with work-queue retention (a message is deleted when acked) and file storage.
//! Every consumer of a queue — in this process or any other — binds the same durable pull
//! consumer [`DURABLE_NAME`], so they share the work. Consumers pull one message at a time, so
//! a busy consumer never hoards messages whose ack deadline is already running.
//!
//! `max_deliver`: JetStream stops delivering a message after its last allowed delivery, but
//! (unlike the embedded bus) it stays in the stream until an operator removes it; the last
//! delivery is logged as a warning. `max_deliver = 0` means unlimited on both backends.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType};
use async_nats::jetstream::{AckKind, Context};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

use crate::bus::{Acker, BusError, DurableConsumer, DurableMessage, DurableOptions};

/// The durable consumer every Hermes process binds to, per queue.
pub const DURABLE_NAME: &str = "workers";

/// How long an outstanding pull request lives before it is renewed.
const PULL_EXPIRES: Duration = Duration::from_secs(30);

/// How often the server confirms an idle pull request is alive.
const PULL_HEARTBEAT: Duration = Duration::from_secs(15);

/// The stream that holds queue `queue`.
pub fn stream_name(queue: &str) -> String {
    queue
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn jetstream_error(what: &str, queue: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "{what} for durable queue `{queue}` (stream {}): {err}; is JetStream enabled \
         (nats-server -js) and no other stream capturing this subject?",
        stream_name(queue)
    ))
}

/// How long JetStream API calls that time out are retried while a cluster forms.
const FORMING_WAIT: Duration = Duration::from_secs(60);
/// How long a read or write waits for a running cluster to elect new stream leaders.
const FAILOVER_WAIT: Duration = Duration::from_secs(15);

/// How [`retrying`] tries a JetStream call again.
struct Patience {
    /// Past this, the last answer stands.
    wait: Duration,
    first_pause: Duration,
    longest_pause: Duration,
    /// Whether an error's text says the call may succeed when tried again.
    retryable: fn(&str) -> bool,
    /// What the log says while retrying.
    why: &'static str,
}

/// Run `attempt` until it succeeds, fails for good, or `patience.wait` is over.
async fn retrying<T, E, F, Fut>(what: &str, patience: Patience, mut attempt: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + patience.wait;
    let mut pause = patience.first_pause;
    loop {
        match attempt().await {
            Err(e)
                if (patience.retryable)(&e.to_string())
                    && tokio::time::Instant::now() < deadline =>
            {
                tracing::info!(error = %e, "{what}: {}; retrying", patience.why);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(patience.longest_pause);
            }
            other => return other,
        }
    }
}

/// Run a JetStream API call, retrying it while the answer is a timeout or no responders: a
/// cluster that is still forming (nodes starting, no stream leader yet) answers so for a few
/// seconds, and processes started with it (a script, docker-compose) should wait, not fail.
pub async fn while_forming<T, E, F, Fut>(what: &str, attempt: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let patience = Patience {
        wait: FORMING_WAIT,
        first_pause: Duration::from_millis(500),
        longest_pause: Duration::from_millis(500),
        retryable: is_transient,
        why: "JetStream not ready yet",
    };
    retrying(what, patience, attempt).await
}

fn is_transient(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    error.contains("timed out")
        || error.contains("no responders")
        // Placing a replicated stream while one of its nodes is down (or not yet up).
        || error.contains("peer offline")
        || error.contains("insufficient resources")
}

/// Run a JetStream read or write, retrying it while the cluster moves a stream's leader (a
/// node restarting): for a few seconds the answer is a timeout, no responders, or "no stream
/// found" from a node that lost sight of the stream. The callers make their writes safe to
/// repeat (a create-only write checks what it finds; queue consumers skip duplicates).
pub async fn through_failover<T, E, F, Fut>(what: &str, attempt: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    retrying(what, failing_over_for(FAILOVER_WAIT), attempt).await
}

/// How a read or write is tried again through a failover, for `wait`.
fn failing_over_for(wait: Duration) -> Patience {
    Patience {
        wait,
        first_pause: Duration::from_millis(100),
        longest_pause: Duration::from_secs(1),
        retryable: is_failing_over,
        why: "JetStream is failing over",
    }
}

/// [`through_failover`], retrying until `deadline` instead of for [`FAILOVER_WAIT`]; an
/// attempt still running at `deadline` is given up, and `late` is its error.
pub async fn through_failover_until<T, E, F, Fut>(
    what: &str,
    deadline: tokio::time::Instant,
    late: impl Fn() -> E,
    mut attempt: F,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let patience =
        failing_over_for(deadline.saturating_duration_since(tokio::time::Instant::now()));
    retrying(what, patience, || {
        let attempt = attempt();
        let late = &late;
        async move {
            tokio::time::timeout_at(deadline, attempt)
                .await
                .unwrap_or_else(|_| Err(late()))
        }
    })
    .await
}

fn is_failing_over(error: &str) -> bool {
    let lower = error.to_ascii_lowercase();
    is_transient(error)
        || [
            "503",
            "no stream found",
            "stream not found",
            "no leader",
            "leadership",
            // Another publish of the same message id is being stored right now.
            "duplicate message id is in process",
        ]
        .iter()
        .any(|sign| lower.contains(sign))
}

/// The configuration of the queue's stream, with `replicas` copies.
pub(super) fn queue_config(queue: &str, replicas: usize) -> Config {
    Config {
        name: stream_name(queue),
        subjects: vec![queue.to_string()],
        retention: RetentionPolicy::WorkQueue,
        storage: StorageType::File,
        num_replicas: replicas.max(1),
        ..Default::default()
    }
}

/// Create the queue's stream (with `replicas` copies), or get it when it exists.
pub async fn ensure_stream(
    context: &Context,
    queue: &str,
    replicas: usize,
) -> Result<async_nats::jetstream::stream::Stream, BusError> {
    let config = queue_config(queue, replicas);
    while_forming("creating a durable queue stream", || {
        context.get_or_create_stream(config.clone())
    })
    .await
    .map_err(|e| jetstream_error("cannot create or open the stream", queue, e))
}

/// Why a durable publish failed.
pub enum PublishFailure {
    /// No stream captures the subject (it was deleted): recreate it and retry.
    StreamMissing,
    Other(String),
}

impl PublishFailure {
    pub fn into_bus_error(self, queue: &str) -> BusError {
        match self {
            Self::StreamMissing => jetstream_error("no stream", queue, "stream not found"),
            Self::Other(reason) => jetstream_error("publish not acknowledged", queue, reason),
        }
    }
}

/// Publish (with `headers`, if any) and wait for the server's PubAck (the message is stored
/// when this returns).
pub async fn publish(
    context: &Context,
    queue: &str,
    payload: Bytes,
    headers: Option<async_nats::HeaderMap>,
) -> Result<(), PublishFailure> {
    let classify = |err: async_nats::jetstream::context::PublishError| match err.kind() {
        PublishErrorKind::StreamNotFound => PublishFailure::StreamMissing,
        _ => PublishFailure::Other(err.to_string()),
    };
    let ack = match headers {
        Some(headers) => {
            context
                .publish_with_headers(queue.to_string(), headers, payload)
                .await
        }
        None => context.publish(queue.to_string(), payload).await,
    }
    .map_err(classify)?;
    ack.await.map_err(classify)?;
    Ok(())
}

/// Bind the shared durable pull consumer and stream its messages.
pub async fn consume(
    context: &Context,
    queue: &str,
    replicas: usize,
    options: DurableOptions,
) -> Result<DurableConsumer, BusError> {
    let stream = ensure_stream(context, queue, replicas).await?;
    let messages = pull_shared(&stream, queue, options).await?;
    let queue = queue.to_string();
    Ok(DurableConsumer::new(messages.map(move |item| match item {
        Ok(message) => Ok(durable_message(message, &queue, options.max_deliver)),
        Err(err) => Err(pulling_failed("durable queue", &queue, err)),
    })))
}

/// Create (or update, so a changed ack_wait / max_deliver takes effect) the shared durable
/// pull consumer of `stream` and start pulling from it, one message at a time.
async fn pull_shared(
    stream: &async_nats::jetstream::stream::Stream,
    name: &str,
    options: DurableOptions,
) -> Result<async_nats::jetstream::consumer::pull::Stream, BusError> {
    let config = shared_config(DURABLE_NAME, options);
    let consumer = while_forming("creating a durable consumer", || {
        stream.create_consumer(config.clone())
    })
    .await
    .map_err(|e| jetstream_error("cannot create the durable consumer", name, e))?;
    pull(&consumer, options)
        .await
        .map_err(|e| jetstream_error("cannot start pulling", name, e))
}

/// A durable pull consumer `name` that the processes of a deployment share: explicit acks,
/// `options`' ack wait and delivery limit (0: unlimited).
pub(super) fn shared_config(name: &str, options: DurableOptions) -> pull::Config {
    let max_deliver = i64::try_from(options.max_deliver)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(-1);
    pull::Config {
        durable_name: Some(name.to_string()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: options.ack_wait,
        max_deliver,
        ..Default::default()
    }
}

/// Start pulling from `consumer`, `options.batch` messages per request.
pub(super) async fn pull(
    consumer: &async_nats::jetstream::consumer::PullConsumer,
    options: DurableOptions,
) -> Result<pull::Stream, async_nats::jetstream::consumer::StreamError> {
    consumer
        .stream()
        .max_messages_per_batch(options.batch.max(1))
        .expires(PULL_EXPIRES)
        .heartbeat(PULL_HEARTBEAT)
        .messages()
        .await
}

pub(super) fn pulling_failed(what: &str, name: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Io(format!(
        "{what} `{name}`: pulling failed: {err}; the consumer keeps retrying, check that \
         nats-server is reachable"
    ))
}

/// Capture `subjects` into the work-queue stream `name` (created, or updated when the
/// subjects changed) and consume it through one shared durable consumer. Repeats of a
/// `Nats-Msg-Id` within the dedupe window never reach the stream.
pub async fn capture(
    context: &Context,
    name: &str,
    subjects: &[String],
    replicas: usize,
    options: super::super::CaptureOptions,
) -> Result<DurableConsumer, BusError> {
    let config = Config {
        name: stream_name(name),
        subjects: subjects.to_vec(),
        retention: RetentionPolicy::WorkQueue,
        storage: StorageType::File,
        num_replicas: replicas.max(1),
        duplicate_window: options.dedupe_window,
        ..Default::default()
    };
    let mut stream = while_forming("creating a capture stream", || {
        context.get_or_create_stream(config.clone())
    })
    .await
    .map_err(|e| jetstream_error("cannot create or open the stream", name, e))?;
    let current = stream
        .info()
        .await
        .map_err(|e| jetstream_error("cannot read the stream", name, e))?
        .config
        .clone();
    if current.subjects != config.subjects || current.duplicate_window != config.duplicate_window {
        context
            .update_stream(config.clone())
            .await
            .map_err(|e| jetstream_error("cannot update the stream's subjects", name, e))?;
    }
    let messages = pull_shared(&stream, name, options.durable).await?;
    let (name, max) = (name.to_string(), options.durable.max_deliver);
    Ok(DurableConsumer::new(messages.map(move |item| match item {
        Ok(message) => {
            let subject = message.subject.to_string();
            let msg_id = message
                .headers
                .as_ref()
                .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                .map(|v| v.as_str().to_string());
            Ok(durable_message(message, &name, max).with_origin(subject, msg_id))
        }
        Err(err) => Err(pulling_failed("captured subjects", &name, err)),
    })))
}

pub(super) fn durable_message(
    message: async_nats::jetstream::Message,
    queue: &str,
    max_deliver: u64,
) -> DurableMessage {
    let delivery = message
        .info()
        .map(|info| u64::try_from(info.delivered).unwrap_or(1))
        .unwrap_or(1);
    if max_deliver > 0 && delivery >= max_deliver {
        tracing::warn!(
            queue,
            delivery,
            "last delivery of a durable message (max_deliver reached): if it is not acked now \
             JetStream will not deliver it again; it stays in the stream for inspection"
        );
    }
    let age = message
        .info()
        .ok()
        .and_then(|info| stored_ago(info.published.unix_timestamp_nanos()));
    let payload = message.payload.clone();
    let traceparent = super::trace::received(message.headers.as_ref());
    let mut durable = DurableMessage::new(payload, delivery, Box::new(JetStreamAcker { message }))
        .with_traceparent(traceparent);
    durable.age = age;
    durable
}

/// How long ago the server stored a message (by its clock and this one's; none when the clocks
/// disagree so much that it lies ahead).
fn stored_ago(published_unix_nanos: i128) -> Option<Duration> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let at = u128::try_from(published_unix_nanos).ok()?;
    let nanos = u64::try_from(now.checked_sub(at)?).ok()?;
    Some(Duration::from_nanos(nanos))
}

/// Settles one JetStream delivery.
pub(super) struct JetStreamAcker {
    message: async_nats::jetstream::Message,
}

impl JetStreamAcker {
    pub(super) fn new(message: async_nats::jetstream::Message) -> Self {
        Self { message }
    }
}

fn ack_error(what: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Io(format!(
        "{what} failed: {err}; the message will be redelivered after ack_wait"
    ))
}

#[async_trait]
impl Acker for JetStreamAcker {
    /// Waits for the server to confirm, so an acked message is gone when this returns.
    async fn ack(&self) -> Result<(), BusError> {
        self.message
            .double_ack()
            .await
            .map_err(|e| ack_error("ack", e))
    }

    /// A plain `+ACK`: no reply subscription, no round trip.
    async fn ack_unconfirmed(&self) -> Result<(), BusError> {
        self.message.ack().await.map_err(|e| ack_error("ack", e))
    }

    async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError> {
        self.message
            .ack_with(AckKind::Nak(delay))
            .await
            .map_err(|e| ack_error("nak", e))
    }

    async fn in_progress(&self) -> Result<(), BusError> {
        self.message
            .ack_with(AckKind::Progress)
            .await
            .map_err(|e| ack_error("progress ack", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_write_through_a_failover_is_retried_until_its_deadline_and_never_past_it() {
        let start = tokio::time::Instant::now();
        let deadline = start + Duration::from_secs(30);
        let late = || "late".to_string();
        // Leaderless for 25 s, longer than the usual 15 s of retries: written at the end.
        let written = through_failover_until("writing", deadline, late, || async {
            if tokio::time::Instant::now() < start + Duration::from_secs(25) {
                Err("no leader for the stream".to_string())
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!(written, Ok(()));
        // An acknowledgement that never comes: given up at the deadline.
        let hung: Result<(), String> =
            through_failover_until("writing", deadline, late, std::future::pending).await;
        assert_eq!(hung, Err("late".to_string()));
        assert_eq!(tokio::time::Instant::now(), deadline);
        // An error no failover explains is not retried.
        let mut tries = 0;
        let refused: Result<(), String> = through_failover_until("writing", deadline, late, || {
            tries += 1;
            async { Err("permissions violation".to_string()) }
        })
        .await;
        assert!(refused.is_err());
        assert_eq!(tries, 1);
    }

    #[test]
    fn stream_name_is_the_subject_uppercased_with_underscores() {
        assert_eq!(
            stream_name("hermes.memory.extract"),
            "HERMES_MEMORY_EXTRACT"
        );
        assert_eq!(stream_name("a-b.c/d"), "A-B_C_D");
    }
}
