//! The Memory-extractor: the only writer of memories. Its store also answers the memory
//! service of the bus ([`super::memory_service`]).
//!
//! Off the turn's path it consumes the durable `hermes.memory.extract` queue on its own arbiter
//! — on NATS also the jobs that answered turns' appends to the session log carry
//! ([`crate::bus::cluster::Cluster::extraction_outbox`]) — one job at a time: each finished turn goes to the extractor model, noise (moods, chit-chat)
//! is dropped, the updates are merged (committed), a `memory.written` event goes to the
//! session, and only then is the job acknowledged — a crash in between means the job is
//! delivered again, never lost; a turn already mined (tree `memory_extracted`) is acknowledged
//! without a second mining. A model that cannot be reached leaves the job for redelivery; a
//! reply that is invalid twice in a row is dropped with an `error` event on the session and the
//! job acknowledged (retrying the same transcript would not help). A job that still fails on
//! its last delivery is dropped the same way, with an `error` event saying so, rather than left
//! for the queue to discard in silence. Every
//! `memory.sweep_interval_secs` it runs the forgetting sweep, and forgets the turns it mined
//! more than 30 days before ([`mined`]).

use std::sync::Arc;
use std::time::Duration;

mod mined;

use actix::prelude::*;

use super::start_error::StartError;
use super::ActorDeps;
use crate::bus::events::{self, EventScope};
use crate::bus::{DurableConsumer, DurableOptions};
use crate::llm::ChatModel;
use crate::memory::extract;
use crate::memory::{AppliedUpdate, MemoryError, MemoryService, MemoryUpdate, Source};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{ExtractJob, MemoryChange, TurnEvent};
use crate::store::tree::{Database, Tree};

/// Namespace of memories extracted from a user's own conversations.
pub use crate::memory::DEFAULT_NAMESPACE;

pub struct MemoryExtractor {
    deps: ActorDeps,
    service: MemoryService,
    model: Arc<dyn ChatModel>,
    /// Turns already mined (turn id → when), so a job delivered again is not mined twice.
    extracted: Tree,
    consumer: Option<DurableConsumer>,
}

/// The sled tree of mined turn ids.
pub const EXTRACTED_TREE: &str = "memory_extracted";

/// Deliveries of one extraction job; after the last, the queue would drop it.
const MAX_DELIVER: u64 = 5;

/// Jobs pulled per request on NATS: about one pull request per two jobs instead of one per
/// job (a turn's job arrives alone, so the saving is per turn). Small, because the jobs pulled
/// wait here while another extractor copy may be idle: three extractions at most.
const PULL_BATCH: usize = 4;

impl Actor for MemoryExtractor {
    type Context = Context<Self>;

    /// Consume the extraction queue on this actor's arbiter, one job at a time.
    fn started(&mut self, ctx: &mut Self::Context) {
        let Some(consumer) = self.consumer.take() else {
            return;
        };
        let worker = Worker {
            deps: self.deps.clone(),
            service: self.service.clone(),
            model: self.model.clone(),
            extracted: self.extracted.clone(),
        };
        let ack_wait = Duration::from_secs(self.deps.config.memory.extract_ack_wait_secs);
        ctx.spawn(consume(consumer, worker, ack_wait).into_actor(self));
    }
}

/// What became of one extraction job.
#[derive(Debug)]
enum Outcome {
    /// Written (or nothing to write, or mined before): acknowledge.
    Done,
    /// A transient failure (model unreachable, storage): deliver again later.
    Retry(String),
    /// It can never succeed: acknowledge; the reason was reported.
    Dropped(String),
}

impl MemoryExtractor {
    /// Start the extractor on `arbiter`: it consumes `hermes.memory.extract` and sweeps expired
    /// memories every `memory.sweep_interval_secs`. `db` holds the mined-turns tree.
    pub async fn start(
        deps: ActorDeps,
        service: MemoryService,
        model: Arc<dyn ChatModel>,
        db: &impl Database,
        arbiter: &ArbiterHandle,
    ) -> Result<Addr<MemoryExtractor>, StartError> {
        let extracted = Tree::open(db, EXTRACTED_TREE)?;
        let options = DurableOptions {
            ack_wait: Duration::from_secs(deps.config.memory.extract_ack_wait_secs),
            max_deliver: MAX_DELIVER,
            batch: PULL_BATCH,
        };
        let consumer = deps
            .bus
            .durable_consume(subjects::MEMORY_EXTRACT, options)
            .await?;
        // On NATS most jobs ride on the answers' appends to the session log.
        let consumer = match deps.bus.cluster() {
            Some(cluster) => consumer.merge(cluster.extraction_outbox(options).await?),
            None => consumer,
        };
        let interval = deps.config.memory.sweep_interval_secs;
        if interval > 0 {
            let every = Duration::from_secs(interval);
            deps.io
                .spawn(sweep_loop(service.clone(), extracted.clone(), every));
        }
        let actor = MemoryExtractor {
            deps,
            service,
            model,
            extracted,
            consumer: Some(consumer),
        };
        Ok(MemoryExtractor::start_in_arbiter(arbiter, |_| actor))
    }
}

/// What one extraction needs.
#[derive(Clone)]
struct Worker {
    deps: ActorDeps,
    service: MemoryService,
    model: Arc<dyn ChatModel>,
    extracted: Tree,
}

async fn consume(mut consumer: DurableConsumer, worker: Worker, ack_wait: Duration) {
    while let Some(next) = consumer.next().await {
        let delivery = match next {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "extraction queue error");
                continue;
            }
        };
        // Pulled with others (PULL_BATCH), it may have waited behind slow extractions: its
        // ack_wait starts again before it is mined, so it is not delivered twice meanwhile.
        if delivery.age.is_some_and(|age| age > ack_wait / 2) {
            if let Err(e) = delivery.in_progress().await {
                tracing::warn!(error = %e, "extraction job's progress ack failed; it may be delivered again (a mined turn is skipped)");
            }
        }
        match worker.extract(&delivery).await {
            outcome @ (Outcome::Done | Outcome::Dropped(_)) => {
                if let Outcome::Dropped(reason) = outcome {
                    tracing::debug!(reason, "extraction job acknowledged without a write");
                }
                // A redelivered job finds its turn marked as mined (`extracted`).
                if let Err(e) = delivery.ack_unconfirmed().await {
                    tracing::warn!(error = %e, "extraction ack failed; it will be redelivered");
                }
            }
            Outcome::Retry(e) if is_last(delivery.delivery) => {
                // The queue would discard the job after this: tell the session instead.
                worker.give_up(&delivery.payload, &e).await;
                // A redelivered job finds its turn marked as mined (`extracted`).
                if let Err(e) = delivery.ack_unconfirmed().await {
                    tracing::warn!(error = %e, "extraction ack failed; it will be redelivered");
                }
            }
            Outcome::Retry(e) => {
                tracing::warn!(error = %e, delivery = delivery.delivery, "extraction failed; will retry");
                let _ = delivery.nak(Some(Duration::from_secs(2))).await;
            }
        }
    }
}

/// Is this the job's last delivery?
fn is_last(delivery: u64) -> bool {
    delivery >= MAX_DELIVER
}

/// The job a delivery carries: the value a session in this process queued, or else its bytes
/// decoded.
fn job_of(
    delivery: &crate::bus::DurableMessage,
) -> Result<Envelope<ExtractJob>, crate::protocol::envelope::EnvelopeError> {
    let local = delivery.local.as_ref().map(|v| v.as_any());
    match local.and_then(|v| v.downcast_ref::<Envelope<ExtractJob>>()) {
        Some(job) => Ok(job.clone()),
        None => Envelope::<ExtractJob>::decode_event(&delivery.payload, usize::MAX),
    }
}

impl Worker {
    /// Drop a job that failed on every delivery, with an `error` event on its session.
    async fn give_up(&self, payload: &[u8], reason: &str) {
        let Ok(job) = Envelope::<ExtractJob>::decode_event(payload, usize::MAX) else {
            return;
        };
        let message = format!(
            "memory extraction dropped for this turn after {MAX_DELIVER} attempts: {reason}"
        );
        report_error(&self.deps, &job, "memory_extraction_failed", &message).await;
        if let Err(e) = self.service.release_task(&job.body.turn_id).await {
            tracing::warn!(turn = %job.body.turn_id, error = %e, "the turn's memory holds not released; they lapse on their own");
        }
    }

    /// Mine one job: on this task when the model answers in-process, on the I/O runtime when
    /// it is behind a network endpoint.
    async fn extract(&self, delivery: &crate::bus::DurableMessage) -> Outcome {
        let job = match job_of(delivery) {
            Ok(j) => j,
            Err(e) => {
                tracing::error!(error = %e, "malformed extraction job dropped");
                return Outcome::Dropped(e.to_string());
            }
        };
        match self.extracted.contains_key(job.body.turn_id.as_bytes()) {
            Ok(true) => return Outcome::Done,
            Ok(false) => {}
            Err(e) => return Outcome::Retry(e.to_string()),
        }
        let turn_id = job.body.turn_id.clone();
        let run = extract_job(
            self.deps.clone(),
            self.service.clone(),
            self.model.clone(),
            job,
        );
        let outcome = if self.model.is_local() {
            run.await
        } else {
            self.deps
                .io
                .spawn(run)
                .await
                .unwrap_or_else(|e| Outcome::Retry(e.to_string()))
        };
        if matches!(outcome, Outcome::Done | Outcome::Dropped(_)) {
            // The turn is finished: the memories its recall held may expire again.
            if let Err(e) = self.service.release_task(&turn_id).await {
                tracing::warn!(turn = %turn_id, error = %e, "the turn's memory holds not released; they lapse on their own");
            }
        }
        if matches!(outcome, Outcome::Done) {
            let now = chrono::Utc::now().timestamp();
            if let Err(e) = mined::mark(&self.extracted, &turn_id, now) {
                tracing::warn!(error = %e, "mined turn not recorded; a redelivery would mine it again");
            }
        }
        outcome
    }
}

/// Every `every`: expired memories, then turns mined long ago ([`mined::forget_old`]).
async fn sweep_loop(service: MemoryService, extracted: Tree, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await; // the first tick is immediate: let the engine start first
    loop {
        ticker.tick().await;
        if let Err(e) = service.sweep(chrono::Utc::now()).await {
            tracing::warn!(error = %e, "memory sweep failed; trying again next interval");
        }
        let mined = extracted.clone();
        let now = chrono::Utc::now().timestamp();
        match tokio::task::spawn_blocking(move || mined::forget_old(&mined, now)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::debug!(forgotten = n, "turns mined long ago forgotten"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "turns mined long ago not forgotten; trying again next interval")
            }
            Err(e) => tracing::warn!(error = %e, "forgetting turns mined long ago stopped"),
        }
    }
}

/// What each applied update did, as reported on the bus.
pub(crate) fn changes(applied: &[AppliedUpdate]) -> Vec<MemoryChange> {
    applied
        .iter()
        .map(|a| MemoryChange {
            op: a.op,
            key: a.record.as_ref().map(|r| r.key.clone()).unwrap_or_default(),
            content: a
                .record
                .as_ref()
                .map(|r| r.content.clone())
                .unwrap_or_default(),
        })
        .collect()
}

async fn extract_job(
    deps: ActorDeps,
    service: MemoryService,
    model: Arc<dyn ChatModel>,
    job: Envelope<ExtractJob>,
) -> Outcome {
    let body = &job.body;
    if !body.write {
        // The agent keeps its turns out of memory; the job only releases the turn's holds.
        return Outcome::Done;
    }
    let store = service.store().clone();
    let user = body.user.clone();
    // The user's records from the recall index when it is current; sled otherwise.
    let existing = match store.cached_list(&user) {
        Some(list) => list,
        None => match tokio::task::spawn_blocking(move || store.list(&user)).await {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => return Outcome::Retry(e.to_string()),
            Err(e) => return Outcome::Retry(e.to_string()),
        },
    };
    let request = extract::build_request(&body.transcript, &existing);
    let updates = match propose_updates(model.as_ref(), &request).await {
        Ok(u) => u,
        Err(Proposal::Unreachable(e)) => return Outcome::Retry(e),
        Err(Proposal::Invalid(e)) => {
            let message = format!("memory extraction dropped for this turn: {e}");
            report_error(&deps, &job, "memory_extraction_invalid", &message).await;
            return Outcome::Dropped(message);
        }
    };
    let (updates, dropped) = extract::drop_noise(updates);
    if dropped > 0 {
        tracing::debug!(
            dropped,
            "extractor proposed moods/chit-chat/noops; not stored"
        );
    }
    let source = Source {
        session: body.session.clone(),
        message_id: body.message_id.clone(),
        source_time: body.source_time,
    };
    // Nothing to merge needs no catching up with the user's memory first (on NATS a round
    // trip to the memory log).
    let applying = async {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        service
            .apply(&body.user, &body.namespace, &updates, &source)
            .await
    };
    let applied = match applying.await {
        Ok(a) => a,
        Err(e @ (MemoryError::InvalidName { .. } | MemoryError::InvalidUpdate { .. })) => {
            let message = format!("memory extraction dropped for this turn: {e}");
            report_error(&deps, &job, "memory_extraction_invalid", &message).await;
            return Outcome::Dropped(message);
        }
        Err(e) => return Outcome::Retry(e.to_string()),
    };
    let changes = changes(&applied);
    tracing::info!(user = %body.user, session = %body.session, changes = changes.len(), "memories written");
    let event = TurnEvent::MemoryWritten {
        turn_id: body.turn_id.clone(),
        changes,
    };
    publish_event(&deps, &job, event).await;
    Outcome::Done
}

async fn report_error(deps: &ActorDeps, job: &Envelope<ExtractJob>, code: &str, message: &str) {
    tracing::warn!(session = %job.body.session, code, message, "extraction dropped");
    let event = TurnEvent::Error {
        turn_id: Some(job.body.turn_id.clone()),
        code: code.to_string(),
        message: message.to_string(),
    };
    publish_event(deps, job, event).await;
}

async fn publish_event(deps: &ActorDeps, job: &Envelope<ExtractJob>, event: TurnEvent) {
    let body = &job.body;
    let scope = EventScope {
        agent: body.agent.clone(),
        session: body.session.clone(),
        user: Some(body.user.clone()),
        trace_id: job.trace_id.clone(),
        reader: crate::config::publishers::reader_of(&deps.config.bus.publishers, Some(&body.user)),
    };
    events::publish(deps.bus.as_ref(), &scope, event).await;
}

/// Why the model gave no updates.
enum Proposal {
    /// The call itself failed: worth retrying later.
    Unreachable(String),
    /// Two replies in a row were not valid `memory_updates`.
    Invalid(String),
}

/// Ask the extractor model; an invalid reply is retried once.
async fn propose_updates(
    model: &dyn ChatModel,
    request: &crate::llm::ChatRequest,
) -> Result<Vec<MemoryUpdate>, Proposal> {
    let mut last_error = String::new();
    for attempt in 1..=2 {
        let response = model
            .complete(request, None)
            .await
            .map_err(|e| Proposal::Unreachable(e.to_string()))?;
        match extract::parse_updates(&response.text) {
            Ok(updates) => return Ok(updates),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "extractor reply was not valid");
                last_error = e.to_string();
            }
        }
    }
    Err(Proposal::Invalid(format!(
        "the extractor model gave invalid memory_updates twice: {last_error}"
    )))
}
