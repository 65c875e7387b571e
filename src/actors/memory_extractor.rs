//! The Memory-extractor: the only writer of memories.
//!
//! It answers recalls on `hermes.memory.recall` (queue `memory`) and, off the turn's path,
//! consumes the durable `hermes.memory.extract` queue: each finished turn goes to the extractor
//! model, the proposed updates are merged into the store (durably), a `memory.written` event is
//! published to the session, and only then is the job acknowledged — a crash in between means
//! the job is delivered again, never lost.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{
    kinds, ExtractJob, MemoryChange, RecallReply, RecallRequest, TurnEvent,
};
use crate::bus::{rpc, subjects, DurableOptions};
use crate::envelope::Envelope;
use crate::llm::ChatModel;
use crate::memory::extract;
use crate::memory::{MemoryStore, MemoryUpdate, Source};

/// Namespace of memories extracted from a user's own conversations.
pub const DEFAULT_NAMESPACE: &str = "default";

pub struct MemoryExtractor {
    deps: ActorDeps,
    store: MemoryStore,
    model: Arc<dyn ChatModel>,
}

impl Actor for MemoryExtractor {
    type Context = Context<Self>;
}

/// One durable extraction job to process; `Ok` means it may be acknowledged.
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
struct Extract(Bytes);

impl MemoryExtractor {
    pub async fn start(
        deps: ActorDeps,
        store: MemoryStore,
        model: Arc<dyn ChatModel>,
        arbiter: &ArbiterHandle,
    ) -> Result<Addr<MemoryExtractor>, String> {
        let actor = MemoryExtractor {
            deps: deps.clone(),
            store,
            model,
        };
        let addr = MemoryExtractor::start_in_arbiter(arbiter, |_| actor);
        adapter::serve(
            &deps.io,
            deps.bus.clone(),
            subjects::MEMORY_RECALL,
            Some(subjects::groups::MEMORY),
            addr.clone().recipient(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let options = DurableOptions {
            ack_wait: Duration::from_secs(deps.config.memory.extract_ack_wait_secs),
            max_deliver: 5,
        };
        let mut consumer = deps
            .bus
            .durable_consume(subjects::MEMORY_EXTRACT, options)
            .await
            .map_err(|e| e.to_string())?;
        let worker = addr.clone();
        deps.io.spawn(async move {
            while let Some(next) = consumer.next().await {
                let delivery = match next {
                    Ok(d) => d,
                    Err(e) => {
                        tracing::warn!(error = %e, "extraction queue error");
                        continue;
                    }
                };
                match worker.send(Extract(delivery.payload.clone())).await {
                    Ok(Ok(())) => {
                        if let Err(e) = delivery.ack().await {
                            tracing::warn!(error = %e, "extraction ack failed; it will be redelivered");
                        }
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, delivery = delivery.delivery, "extraction failed; will retry");
                        let _ = delivery.nak(Some(Duration::from_secs(2))).await;
                    }
                    Err(_) => break,
                }
            }
        });
        Ok(addr)
    }
}

impl Handler<Incoming> for MemoryExtractor {
    type Result = Option<Bytes>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let max = self.deps.config.engine.max_envelope_bytes;
        let request =
            match Envelope::decode_as::<RecallRequest>(&msg.payload, max, kinds::RECALL_REQUEST) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
        let limit = request.body.limit.min(self.deps.config.memory.recall_limit);
        match self.store.recall(
            &request.body.user,
            None,
            &request.body.query,
            limit,
            self.deps.config.memory.min_score,
        ) {
            Ok(hits) => reply_bytes(
                &Envelope::new(kinds::RECALL_REPLY, RecallReply { hits })
                    .in_trace(&request.trace_id),
            ),
            Err(e) => error_bytes("recall_failed", e.to_string()),
        }
    }
}

impl Handler<Extract> for MemoryExtractor {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, msg: Extract, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        let store = self.store.clone();
        let model = self.model.clone();
        Box::pin(async move {
            let job = Envelope::decode_as::<ExtractJob>(&msg.0, usize::MAX, kinds::EXTRACT_JOB)
                .map_err(|e| e.to_string());
            let job = match job {
                Ok(j) => j,
                Err(e) => {
                    // A malformed job can never succeed: drop it (acknowledge) with an error log.
                    tracing::error!(error = %e, "malformed extraction job dropped");
                    return Ok(());
                }
            };
            let io = deps.io.clone();
            io.spawn(extract_job(deps, store, model, job))
                .await
                .map_err(|e| e.to_string())?
        })
    }
}

async fn extract_job(
    deps: ActorDeps,
    store: MemoryStore,
    model: Arc<dyn ChatModel>,
    job: Envelope<ExtractJob>,
) -> Result<(), String> {
    let body = &job.body;
    let existing = store.list(&body.user).map_err(|e| e.to_string())?;
    let request = extract::build_request(&body.transcript, &existing);
    let updates = propose_updates(model.as_ref(), &request).await?;
    let source = Source {
        session: body.session.clone(),
        message_id: body.message_id.clone(),
        source_time: body.source_time,
    };
    let applied = store
        .apply(&body.user, DEFAULT_NAMESPACE, &updates, &source)
        .await
        .map_err(|e| e.to_string())?;
    let changes: Vec<MemoryChange> = applied
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
        .collect();
    tracing::debug!(user = %body.user, session = %body.session, changes = changes.len(), "memories written");
    if let Ok(out) = subjects::outbound(&body.agent, &body.session) {
        let event = TurnEvent::MemoryWritten {
            turn_id: body.turn_id.clone(),
            changes,
        };
        let env = Envelope::new(kinds::TURN_EVENT, event)
            .for_session(&body.agent, &body.session, Some(&body.user))
            .in_trace(&job.trace_id);
        if let Err(e) = rpc::publish(deps.bus.as_ref(), &out, &env).await {
            tracing::debug!(error = %e, "memory.written event not published");
        }
    }
    Ok(())
}

/// Ask the extractor model; an invalid reply is retried once, then the job fails.
async fn propose_updates(
    model: &dyn ChatModel,
    request: &crate::llm::ChatRequest,
) -> Result<Vec<MemoryUpdate>, String> {
    let mut last_error = String::new();
    for attempt in 1..=2 {
        let response = model
            .complete(request, None)
            .await
            .map_err(|e| e.to_string())?;
        match extract::parse_updates(&response.text) {
            Ok(updates) => return Ok(updates),
            Err(e) => {
                tracing::warn!(attempt, error = %e, "extractor reply was not valid");
                last_error = e.to_string();
            }
        }
    }
    Err(format!(
        "extractor model gave no valid updates: {last_error}"
    ))
}
