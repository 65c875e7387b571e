//! The session log as the memory-extraction queue (a transactional outbox): an answered
//! turn's append to `HERMES_SESSION_LOG` carries its extraction job
//! ([`crate::store::replica::LogRecord::extract`]), and every memory-extractor of the
//! deployment reads the log through one shared durable pull consumer, [`CONSUMER`]. Queueing
//! the job then costs no publish, no stored message of its own, and no note after the answer.
//!
//! A record without a job is acked as it passes, without waiting for the server; one with a
//! job is handed over as a delivery of the job itself — acked once extracted, delivered again
//! after `ack_wait` otherwise, as on the queue. The consumer delivers what is appended after
//! it was made: a session process makes it before its first append ([`ensure`]), an
//! extractor when it starts ([`consume`]), so no answer falls between the two, and an
//! upgraded deployment does not mine its old history again.
//!
//! A job is handed over no sooner than [`SETTLE`] after its append. The session publishes the
//! answer once the append is acknowledged, while the queue used to get the job only after the
//! answer left; without the pause a quick extraction (a scripted model) could put its
//! `memory.written` on the session's subject before the answer. A session process stalled
//! for longer than that between the append and the answer may still see it come first.

use std::future::Future;
use std::sync::Arc;

use async_nats::jetstream::consumer::{pull, DeliverPolicy, PullConsumer};
use async_nats::jetstream::stream::Stream;
use bytes::Bytes;
use futures::StreamExt;
use tokio::runtime::Handle;

use super::jetstream::{durable_message, pull, pulling_failed, shared_config, while_forming};
use super::log::NatsSessionLog;
use crate::bus::{BusError, DurableConsumer, DurableOptions};
use crate::store::replica::carried_job;

/// The durable consumer of the session log that every memory-extractor binds to.
pub const CONSUMER: &str = "memory-extractors";

/// How long after its append a job is handed to an extractor: the answer it follows leaves
/// first. Short beside any extraction a model makes.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(250);

fn outbox_error(what: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "{what} (consumer `{CONSUMER}` of the session log, which carries the memory \
         extraction jobs): {err}; is JetStream enabled (nats-server -js) and reachable?"
    ))
}

fn config(options: DurableOptions) -> pull::Config {
    pull::Config {
        description: Some("memory extraction jobs carried by answered turns".into()),
        deliver_policy: DeliverPolicy::New,
        ..shared_config(CONSUMER, options)
    }
}

/// Make the consumer, or update it to `options`.
async fn create(log: &Stream, options: DurableOptions) -> Result<PullConsumer, BusError> {
    while_forming(
        "creating the extraction consumer of the session log",
        || log.create_consumer(config(options)),
    )
    .await
    .map_err(|e| outbox_error("cannot create the consumer", e))
}

/// Run `work` on the session log's stream, on `runtime` (the connection's I/O runtime: a pull
/// consumer spawns its request task where it is created), whatever runtime calls this.
pub(super) async fn on_the_log<T, F, Fut>(
    runtime: &Handle,
    log: Arc<NatsSessionLog>,
    work: F,
) -> Result<T, BusError>
where
    T: Send + 'static,
    F: FnOnce(Stream) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, BusError>> + Send,
{
    let task = runtime.spawn(async move {
        let stream = log
            .stream()
            .await
            .map_err(|e| outbox_error("cannot open the session log", e))?
            .clone();
        work(stream).await
    });
    task.await
        .map_err(|e| outbox_error("the session log's task stopped", e))?
}

/// Make the consumer if it does not exist yet (a session process, before its first append);
/// one that exists keeps the settings its extractors gave it.
pub(super) async fn ensure(log: &Stream, options: DurableOptions) -> Result<(), BusError> {
    if log.get_consumer::<pull::Config>(CONSUMER).await.is_ok() {
        return Ok(());
    }
    create(log, options).await.map(drop)
}

/// Consume the jobs the session log carries (creating or updating the consumer, so a changed
/// `ack_wait` / `max_deliver` takes effect).
pub(super) async fn consume(
    log: &Stream,
    options: DurableOptions,
) -> Result<DurableConsumer, BusError> {
    let consumer = create(log, options).await?;
    let messages = pull(&consumer, options)
        .await
        .map_err(|e| outbox_error("cannot start pulling", e))?;
    let jobs = messages.filter_map(move |item| async move {
        let message = match item {
            Ok(message) => message,
            Err(e) => return Some(Err(pulling_failed("session log", CONSUMER, e))),
        };
        let job = match carried_job(&message.payload) {
            Ok(Some(job)) => Bytes::copy_from_slice(job.get().as_bytes()),
            Ok(None) => return pass(message).await,
            Err(e) => {
                tracing::error!(error = %e, subject = %message.subject, "a session log record the extraction consumer cannot read; skipped");
                return pass(message).await;
            }
        };
        let mut delivery = durable_message(message, CONSUMER, options.max_deliver);
        delivery.payload = job;
        let waited = delivery.age.unwrap_or_default();
        if waited < SETTLE {
            tokio::time::sleep(SETTLE - waited).await;
        }
        Some(Ok(delivery))
    });
    Ok(DurableConsumer::new(jobs))
}

/// A record with no job for the extractor: acked as it passes (a lost ack costs one more
/// delivery of a record that is passed again).
async fn pass(
    message: async_nats::jetstream::Message,
) -> Option<Result<crate::bus::DurableMessage, BusError>> {
    if let Err(e) = message.ack().await {
        tracing::debug!(error = %e, "ack of a session log record without an extraction job failed; it comes again");
    }
    None
}
