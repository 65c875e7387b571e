//! The memory service of the bus (queue group `memory`), answered from the store the
//! memory-extractor owns: `hermes.memory.recall` ([`RecallRequest`] → [`RecallReply`]),
//! `hermes.memory.write` and `.forget` (→ [`MemoryWriteReply`], committed before the answer)
//! and `hermes.memory.list` (→ [`MemoryListReply`], a user's live records). Each request runs
//! where it arrives; record scans run in `spawn_blocking` inside [`MemoryService`].

use std::sync::Arc;

use async_trait::async_trait;

use super::memory_extractor::changes;
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving, SharedBus};
use crate::config::Config;
use crate::memory::wire::{hits_to_wire, to_wire};
use crate::memory::{AppliedOp, MemoryError, MemoryService, RecallFilter, RecallQuery, Source};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{
    MemoryChange, MemoryForgetRequest, MemoryListReply, MemoryListRequest, MemoryWriteReply,
    MemoryWriteRequest, RecallReply, RecallRequest,
};

/// Answers memory requests.
pub struct MemoryRequests {
    service: MemoryService,
    config: Arc<Config>,
}

impl MemoryRequests {
    /// Serve the four memory subjects until the guards drop.
    pub async fn serve(
        service: MemoryService,
        config: Arc<Config>,
        bus: &SharedBus,
    ) -> Result<Vec<Serving>, BusError> {
        let max = config.engine.max_envelope_bytes;
        let me = Arc::new(Self { service, config });
        let group = subjects::groups::MEMORY;
        Ok(vec![
            bus.serve(
                subjects::MEMORY_RECALL,
                group,
                typed::<RecallRequest, _>(me.clone(), max),
            )
            .await?,
            bus.serve(
                subjects::MEMORY_WRITE,
                group,
                typed::<MemoryWriteRequest, _>(me.clone(), max),
            )
            .await?,
            bus.serve(
                subjects::MEMORY_FORGET,
                group,
                typed::<MemoryForgetRequest, _>(me.clone(), max),
            )
            .await?,
            bus.serve(
                subjects::MEMORY_LIST,
                group,
                typed::<MemoryListRequest, _>(me, max),
            )
            .await?,
        ])
    }
}

/// The bus error for a failed memory operation: bad input, or the store failing.
fn refused(e: MemoryError, failed: &'static str) -> ServiceError {
    match e {
        MemoryError::InvalidName { .. } | MemoryError::InvalidUpdate { .. } => {
            ServiceError::new("bad_request", e.to_string())
        }
        e => ServiceError::new(failed, e.to_string()),
    }
}

#[async_trait]
impl Service<RecallRequest> for MemoryRequests {
    async fn call(&self, request: Envelope<RecallRequest>) -> Result<RecallReply, ServiceError> {
        let body = request.body;
        let memory = &self.config.memory;
        let (user, task) = (body.user.clone(), body.task);
        let query = RecallQuery {
            user: body.user,
            text: body.query,
            filter: RecallFilter {
                namespace: body.namespace,
                namespaces: body.namespaces,
                kinds: body.kinds,
                topics: body.topics,
            },
            limit: body.limit.min(memory.recall_limit),
            min_score: memory.min_score,
            weights: None,
            now: chrono::Utc::now(),
        };
        let hits = self
            .service
            .recall(query)
            .await
            .map_err(|e| refused(e, "recall_failed"))?;
        if let Some(task) = task.filter(|_| !hits.is_empty()) {
            let ids: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
            if let Err(e) = self.service.hold(&user, &task, &ids).await {
                tracing::warn!(%user, %task, error = %e, "recalled memories not held for their turn; the sweep may expire them meanwhile");
            }
        }
        Ok(RecallReply {
            hits: hits_to_wire(&hits),
        })
    }
}

#[async_trait]
impl Service<MemoryWriteRequest> for MemoryRequests {
    async fn call(
        &self,
        request: Envelope<MemoryWriteRequest>,
    ) -> Result<MemoryWriteReply, ServiceError> {
        let body = &request.body;
        let source = Source {
            session: body.source.clone(),
            message_id: uuid::Uuid::now_v7().to_string(),
            source_time: chrono::Utc::now(),
        };
        let updates = std::slice::from_ref(&body.update);
        let applied = self
            .service
            .apply(&body.user, &body.namespace, updates, &source)
            .await
            .map_err(|e| refused(e, "write_failed"))?;
        Ok(MemoryWriteReply {
            changes: changes(&applied),
        })
    }
}

#[async_trait]
impl Service<MemoryForgetRequest> for MemoryRequests {
    async fn call(
        &self,
        request: Envelope<MemoryForgetRequest>,
    ) -> Result<MemoryWriteReply, ServiceError> {
        let b = &request.body;
        let removed = self
            .service
            .forget(&b.user, &b.namespace, b.id.as_deref(), b.key.as_deref())
            .await
            .map_err(|e| refused(e, "write_failed"))?;
        let changes = removed
            .into_iter()
            .map(|r| MemoryChange {
                op: AppliedOp::Deleted.as_str().into(),
                key: r.key,
                content: r.content,
            })
            .collect();
        Ok(MemoryWriteReply { changes })
    }
}

#[async_trait]
impl Service<MemoryListRequest> for MemoryRequests {
    async fn call(
        &self,
        request: Envelope<MemoryListRequest>,
    ) -> Result<MemoryListReply, ServiceError> {
        let b = &request.body;
        let records = self
            .service
            .list(
                &b.user,
                b.namespace.as_deref(),
                b.id.as_deref(),
                chrono::Utc::now(),
            )
            .await
            .map_err(|e| refused(e, "list_failed"))?;
        Ok(MemoryListReply {
            records: to_wire(&records),
        })
    }
}
