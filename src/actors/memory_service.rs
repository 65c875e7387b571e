//! The memory service of the bus (queue group `memory`), answered from the store the
//! memory-extractor owns: `hermes.memory.recall` ([`RecallRequest`] → [`RecallReply`]),
//! `hermes.memory.write` and `.forget` (→ [`MemoryWriteReply`], committed before the answer)
//! and `hermes.memory.list` (→ [`MemoryListReply`], a user's live records — or all of them,
//! a page at a time). Each request runs where it arrives; record scans run in
//! `spawn_blocking` inside [`MemoryService`]. Every request names its user, and only that
//! user's records are read or changed.

use std::sync::Arc;

use async_trait::async_trait;

use super::memory_extractor::changes;
use crate::bus::paging;
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving, SharedBus};
use crate::config::Config;
use crate::memory::wire::{hits_to_wire, to_wire};
use crate::memory::{AppliedOp, MemoryError, MemoryService, RecallFilter, RecallQuery, Source};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{
    Memory, MemoryChange, MemoryForgetRequest, MemoryListReply, MemoryListRequest,
    MemoryWriteReply, MemoryWriteRequest, RecallReply, RecallRequest,
};

/// Most memories one recall returns, whatever it asks for (a turn asks for
/// `memory.recall_limit`; `hermes memory search --limit` for what its user wants to see).
pub const MAX_RECALL_HITS: usize = 50;

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
            limit: body.limit.min(MAX_RECALL_HITS),
            min_score: body.min_score.unwrap_or(memory.min_score),
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
            embedder: self.service.embedder_id().map(str::to_owned),
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
                op: AppliedOp::Deleted,
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
        let (namespace, id) = (b.namespace.as_deref(), b.id.as_deref());
        let records = if b.include_inactive {
            self.service
                .list_including_inactive(&b.user, namespace, id)
                .await
        } else {
            self.service
                .list(&b.user, namespace, id, chrono::Utc::now())
                .await
        }
        .map_err(|e| refused(e, "list_failed"))?;
        let total = records.len();
        let Some(limit) = b.limit else {
            return Ok(MemoryListReply {
                records: to_wire(&records[b.offset.min(total)..]),
                total,
                next_offset: None,
            });
        };
        let budget = paging::page_budget(self.config.engine.max_envelope_bytes);
        let wire = records.iter().skip(b.offset).map(Memory::from);
        let (page, more) = paging::fit(wire, limit.max(1), budget);
        Ok(MemoryListReply {
            next_offset: more.then_some(b.offset + page.len()),
            records: page,
            total,
        })
    }
}

#[cfg(test)]
#[path = "memory_service_tests.rs"]
mod tests;
