//! The Memory-extractor: the only writer of memories, and the memory service of the bus.
//!
//! Serves (queue group `memory`): `hermes.memory.recall` ([`RecallRequest`] →
//! `memory.recalled` [`RecallReply`]), `hermes.memory.write` ([`MemoryWriteRequest`] →
//! `memory.written` [`MemoryWriteReply`]), `hermes.memory.forget` ([`MemoryForgetRequest`] →
//! `memory.written` [`MemoryWriteReply`]) and `hermes.memory.list` ([`MemoryListRequest`] →
//! `memory.listed` [`MemoryListReply`], a user's live records, e.g. for Hermes' MCP server's
//! resources); a write or forget is on disk before it is answered.
//! The requests run on the I/O runtime, and their record scans in `spawn_blocking`
//! ([`MemoryService`]), never on the actor's arbiter.
//!
//! Off the turn's path it consumes the durable `hermes.memory.extract` queue: each finished turn
//! goes to the extractor model, noise (moods, chit-chat) is dropped, the updates are merged
//! (durably), a `memory.written` event goes to the session, and only then is the job
//! acknowledged — a crash in between means the job is delivered again, never lost. A model that
//! cannot be reached leaves the job for redelivery; a reply that is invalid twice in a row is
//! dropped with an `error` event on the session and the job acknowledged (retrying the same
//! transcript would not help). Every `memory.sweep_interval_secs` it runs the forgetting sweep.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{
    kinds, ExtractJob, MemoryChange, MemoryForgetRequest, MemoryListReply, MemoryListRequest,
    MemoryWriteReply, MemoryWriteRequest, RecallReply, RecallRequest, TurnEvent,
};
use crate::bus::{rpc, subjects, DurableOptions};
use crate::envelope::Envelope;
use crate::llm::ChatModel;
use crate::memory::extract;
use crate::memory::{
    AppliedOp, AppliedUpdate, MemoryError, MemoryService, MemoryUpdate, RecallFilter, RecallQuery,
    Source,
};

/// Namespace of memories extracted from a user's own conversations.
pub use crate::memory::DEFAULT_NAMESPACE;

pub struct MemoryExtractor {
    deps: ActorDeps,
    service: MemoryService,
    model: Arc<dyn ChatModel>,
}

impl Actor for MemoryExtractor {
    type Context = Context<Self>;
}

/// What became of one extraction job.
#[derive(Debug)]
enum Outcome {
    /// Written (or nothing to write): acknowledge.
    Done,
    /// A transient failure (model unreachable, storage): deliver again later.
    Retry(String),
    /// It can never succeed: acknowledge; the reason was reported.
    Dropped(String),
}

/// One durable extraction job to process.
#[derive(Message)]
#[rtype(result = "Outcome")]
struct Extract(Bytes);

impl MemoryExtractor {
    pub async fn start(
        deps: ActorDeps,
        service: MemoryService,
        model: Arc<dyn ChatModel>,
        arbiter: &ArbiterHandle,
    ) -> Result<Addr<MemoryExtractor>, String> {
        let actor = MemoryExtractor {
            deps: deps.clone(),
            service: service.clone(),
            model,
        };
        let addr = MemoryExtractor::start_in_arbiter(arbiter, |_| actor);
        for subject in [
            subjects::MEMORY_RECALL,
            subjects::MEMORY_WRITE,
            subjects::MEMORY_FORGET,
            subjects::MEMORY_LIST,
        ] {
            adapter::serve(
                &deps.io,
                deps.bus.clone(),
                subject,
                Some(subjects::groups::MEMORY),
                addr.clone().recipient(),
            )
            .await
            .map_err(|e| e.to_string())?;
        }
        let options = DurableOptions {
            ack_wait: Duration::from_secs(deps.config.memory.extract_ack_wait_secs),
            max_deliver: 5,
        };
        let consumer = deps
            .bus
            .durable_consume(subjects::MEMORY_EXTRACT, options)
            .await
            .map_err(|e| e.to_string())?;
        deps.io.spawn(consume(consumer, addr.clone()));
        let interval = deps.config.memory.sweep_interval_secs;
        if interval > 0 {
            deps.io
                .spawn(sweep_loop(service, Duration::from_secs(interval)));
        }
        Ok(addr)
    }
}

async fn consume(mut consumer: crate::bus::DurableConsumer, worker: Addr<MemoryExtractor>) {
    while let Some(next) = consumer.next().await {
        let delivery = match next {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "extraction queue error");
                continue;
            }
        };
        match worker.send(Extract(delivery.payload.clone())).await {
            Ok(outcome @ (Outcome::Done | Outcome::Dropped(_))) => {
                if let Outcome::Dropped(reason) = outcome {
                    tracing::debug!(reason, "extraction job acknowledged without a write");
                }
                if let Err(e) = delivery.ack().await {
                    tracing::warn!(error = %e, "extraction ack failed; it will be redelivered");
                }
            }
            Ok(Outcome::Retry(e)) => {
                tracing::warn!(error = %e, delivery = delivery.delivery, "extraction failed; will retry");
                let _ = delivery.nak(Some(Duration::from_secs(2))).await;
            }
            Err(_) => break,
        }
    }
}

async fn sweep_loop(service: MemoryService, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await; // the first tick is immediate: let the engine start first
    loop {
        ticker.tick().await;
        if let Err(e) = service.sweep(chrono::Utc::now()).await {
            tracing::warn!(error = %e, "memory sweep failed; trying again next interval");
        }
    }
}

impl Handler<Incoming> for MemoryExtractor {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        let service = self.service.clone();
        Box::pin(async move {
            let io = deps.io.clone();
            io.spawn(serve_request(deps, service, msg))
                .await
                .unwrap_or_else(|e| error_bytes("internal", e.to_string()))
        })
    }
}

async fn serve_request(deps: ActorDeps, service: MemoryService, msg: Incoming) -> Option<Bytes> {
    let max = deps.config.engine.max_envelope_bytes;
    match msg.subject.as_str() {
        subjects::MEMORY_RECALL => {
            let request = match Envelope::decode_as::<RecallRequest>(
                &msg.payload,
                max,
                kinds::RECALL_REQUEST,
            ) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
            let body = request.body;
            let query = RecallQuery {
                user: body.user,
                text: body.query,
                filter: RecallFilter {
                    namespace: body.namespace,
                    kinds: body.kinds,
                    topics: body.topics,
                },
                limit: body.limit.min(deps.config.memory.recall_limit),
                min_score: deps.config.memory.min_score,
                weights: None,
                now: chrono::Utc::now(),
            };
            match service.recall(query).await {
                Ok(hits) => reply_bytes(
                    &Envelope::new(kinds::RECALL_REPLY, RecallReply { hits })
                        .in_trace(&request.trace_id),
                ),
                Err(e) => error_bytes("recall_failed", e.to_string()),
            }
        }
        subjects::MEMORY_WRITE => {
            let request = match Envelope::decode_as::<MemoryWriteRequest>(
                &msg.payload,
                max,
                kinds::MEMORY_WRITE,
            ) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
            let body = &request.body;
            let source = Source {
                session: body.source.clone(),
                message_id: uuid::Uuid::now_v7().to_string(),
                source_time: chrono::Utc::now(),
            };
            let updates = std::slice::from_ref(&body.update);
            let written = service
                .apply(&body.user, &body.namespace, updates, &source)
                .await;
            written_reply(written.map(|a| changes(&a)), &request.trace_id)
        }
        subjects::MEMORY_FORGET => {
            let request = match Envelope::decode_as::<MemoryForgetRequest>(
                &msg.payload,
                max,
                kinds::MEMORY_FORGET,
            ) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
            let b = &request.body;
            let forgotten = service
                .forget(&b.user, &b.namespace, b.id.as_deref(), b.key.as_deref())
                .await
                .map(|removed| {
                    removed
                        .into_iter()
                        .map(|r| MemoryChange {
                            op: AppliedOp::Deleted.as_str().into(),
                            key: r.key,
                            content: r.content,
                        })
                        .collect()
                });
            written_reply(forgotten, &request.trace_id)
        }
        subjects::MEMORY_LIST => list_reply(&service, &msg.payload, max).await,
        other => error_bytes(
            "bad_request",
            format!("the memory service does not serve `{other}`"),
        ),
    }
}

async fn list_reply(service: &MemoryService, payload: &[u8], max: usize) -> Option<Bytes> {
    let request = match Envelope::decode_as::<MemoryListRequest>(payload, max, kinds::MEMORY_LIST) {
        Ok(r) => r,
        Err(e) => return error_bytes("bad_request", e.to_string()),
    };
    let b = &request.body;
    let listed = service
        .list(
            &b.user,
            b.namespace.as_deref(),
            b.id.as_deref(),
            chrono::Utc::now(),
        )
        .await;
    match listed {
        Ok(records) => reply_bytes(
            &Envelope::new(kinds::MEMORY_LISTED, MemoryListReply { records })
                .in_trace(&request.trace_id),
        ),
        Err(e @ MemoryError::InvalidName { .. }) => error_bytes("bad_request", e.to_string()),
        Err(e) => error_bytes("list_failed", e.to_string()),
    }
}

fn written_reply(changes: Result<Vec<MemoryChange>, MemoryError>, trace: &str) -> Option<Bytes> {
    match changes {
        Ok(changes) => reply_bytes(
            &Envelope::new(kinds::MEMORY_WRITTEN, MemoryWriteReply { changes }).in_trace(trace),
        ),
        Err(e @ (MemoryError::InvalidName { .. } | MemoryError::InvalidUpdate { .. })) => {
            error_bytes("bad_request", e.to_string())
        }
        Err(e) => error_bytes("write_failed", e.to_string()),
    }
}

/// What each applied update did, as reported on the bus.
fn changes(applied: &[AppliedUpdate]) -> Vec<MemoryChange> {
    applied
        .iter()
        .map(|a| MemoryChange {
            op: a.op.as_str().to_string(),
            key: a.record.as_ref().map(|r| r.key.clone()).unwrap_or_default(),
            content: a
                .record
                .as_ref()
                .map(|r| r.content.clone())
                .unwrap_or_default(),
        })
        .collect()
}

impl Handler<Extract> for MemoryExtractor {
    type Result = ResponseFuture<Outcome>;

    fn handle(&mut self, msg: Extract, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        let service = self.service.clone();
        let model = self.model.clone();
        Box::pin(async move {
            let job =
                match Envelope::decode_as::<ExtractJob>(&msg.0, usize::MAX, kinds::EXTRACT_JOB) {
                    Ok(j) => j,
                    Err(e) => {
                        tracing::error!(error = %e, "malformed extraction job dropped");
                        return Outcome::Dropped(e.to_string());
                    }
                };
            let io = deps.io.clone();
            io.spawn(extract_job(deps, service, model, job))
                .await
                .unwrap_or_else(|e| Outcome::Retry(e.to_string()))
        })
    }
}

async fn extract_job(
    deps: ActorDeps,
    service: MemoryService,
    model: Arc<dyn ChatModel>,
    job: Envelope<ExtractJob>,
) -> Outcome {
    let body = &job.body;
    let store = service.store().clone();
    let user = body.user.clone();
    let existing = match tokio::task::spawn_blocking(move || store.list(&user)).await {
        Ok(Ok(list)) => list,
        Ok(Err(e)) => return Outcome::Retry(e.to_string()),
        Err(e) => return Outcome::Retry(e.to_string()),
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
    let applied = match service
        .apply(&body.user, DEFAULT_NAMESPACE, &updates, &source)
        .await
    {
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
    if let Ok(out) = subjects::outbound(&body.agent, &body.session) {
        let env = Envelope::new(kinds::TURN_EVENT, event)
            .for_session(&body.agent, &body.session, Some(&body.user))
            .in_trace(&job.trace_id);
        if let Err(e) = rpc::publish(deps.bus.as_ref(), &out, &env).await {
            tracing::debug!(error = %e, "memory event not published");
        }
    }
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
