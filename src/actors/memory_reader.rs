//! The memory reader: answers `hermes.memory.list` (queue `memory`) — a user's memories, one
//! namespace of them, or one by id — from the memory-extractor's store, read-only. It runs next
//! to the memory-extractor (same process, same sled handle); only the extractor writes.

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::{self, Incoming};
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{kinds, MemoryListReply, MemoryListRequest};
use crate::bus::subjects;
use crate::envelope::Envelope;
use crate::memory::{MemoryError, MemoryRecord, MemoryStore};

pub struct MemoryReader {
    deps: ActorDeps,
    store: MemoryStore,
}

impl Actor for MemoryReader {
    type Context = Context<Self>;
}

impl MemoryReader {
    pub async fn start(
        deps: ActorDeps,
        store: MemoryStore,
        arbiter: &ArbiterHandle,
    ) -> Result<Addr<MemoryReader>, String> {
        let reader = MemoryReader {
            deps: deps.clone(),
            store,
        };
        let addr = MemoryReader::start_in_arbiter(arbiter, |_| reader);
        adapter::serve(
            &deps.io,
            deps.bus.clone(),
            subjects::MEMORY_LIST,
            Some(subjects::groups::MEMORY),
            addr.clone().recipient(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(addr)
    }
}

/// The records a list request asks for.
pub fn list(
    store: &MemoryStore,
    request: &MemoryListRequest,
) -> Result<Vec<MemoryRecord>, MemoryError> {
    let records = match &request.id {
        Some(id) => store.get(&request.user, id)?.into_iter().collect(),
        None => store.list(&request.user)?,
    };
    Ok(records
        .into_iter()
        .filter(|record| {
            request
                .namespace
                .as_ref()
                .is_none_or(|n| &record.namespace == n)
        })
        .collect())
}

impl Handler<Incoming> for MemoryReader {
    type Result = Option<Bytes>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let max = self.deps.config.engine.max_envelope_bytes;
        let request =
            match Envelope::decode_as::<MemoryListRequest>(&msg.payload, max, kinds::MEMORY_LIST) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
        match list(&self.store, &request.body) {
            Ok(records) => reply_bytes(
                &Envelope::new(kinds::MEMORY_LISTED, MemoryListReply { records })
                    .in_trace(&request.trace_id),
            ),
            Err(e) => error_bytes("list_failed", e.to_string()),
        }
    }
}
