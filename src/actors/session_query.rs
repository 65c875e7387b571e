//! Serves the read-only session requests (queue `session`) beside the Session actors:
//! `hermes.sessions.list` (a page of sessions, newest first), `hermes.sessions.show` (one
//! session and a page of its messages) and `hermes.sessions.search` ([`SessionSearch`]).
//!
//! They read through a [`SessionReader`]: the local trees on the embedded bus, the replicated
//! session log on a cluster (so whichever session process a request reaches answers for every
//! session). `hermes sessions` runs these same services in-process over a stopped data
//! directory, so both ways print the same. Pages fit under the bus' payload limit
//! ([`paging`]).

use std::sync::Arc;

use async_trait::async_trait;

use super::session_search::SessionSearch;
use crate::bus::paging;
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving, SharedBus};
use crate::protocol::envelope::Envelope;
use crate::protocol::session_view::{
    SessionListReply, SessionListRequest, SessionShowReply, SessionShowRequest, DEFAULT_LIST_PAGE,
};
use crate::protocol::subjects::{self, check_id};
use crate::protocol::SessionSearchRequest;
use crate::store::session_reader::SessionReader;
use crate::store::session_wire;
use crate::store::StoreError;

/// Answers `hermes.sessions.list` and `.show`.
pub struct SessionQueries {
    reader: SessionReader,
    /// Bytes the items of one reply may take.
    page_bytes: usize,
}

impl SessionQueries {
    /// Queries over `reader`, with pages that fit envelopes of `max_envelope_bytes`.
    pub fn new(reader: SessionReader, max_envelope_bytes: usize) -> Self {
        Self {
            reader,
            page_bytes: paging::page_budget(max_envelope_bytes),
        }
    }

    /// Serve list, show and search over `reader` on `bus` until the guards drop.
    pub async fn serve(
        reader: SessionReader,
        bus: &SharedBus,
        max_envelope_bytes: usize,
    ) -> Result<Vec<Serving>, BusError> {
        let group = subjects::groups::SESSION;
        let queries = Arc::new(Self::new(reader.clone(), max_envelope_bytes));
        let search = Arc::new(SessionSearch { reader });
        Ok(vec![
            bus.serve(
                subjects::SESSIONS_LIST,
                group,
                typed::<SessionListRequest, _>(queries.clone(), max_envelope_bytes),
            )
            .await?,
            bus.serve(
                subjects::SESSIONS_SHOW,
                group,
                typed::<SessionShowRequest, _>(queries, max_envelope_bytes),
            )
            .await?,
            bus.serve(
                subjects::SESSIONS_SEARCH,
                group,
                typed::<SessionSearchRequest, _>(search, max_envelope_bytes),
            )
            .await?,
        ])
    }
}

fn store_failed(e: StoreError) -> ServiceError {
    ServiceError::new("store_failed", format!("reading the sessions failed: {e}"))
}

#[async_trait]
impl Service<SessionListRequest> for SessionQueries {
    async fn call(
        &self,
        request: Envelope<SessionListRequest>,
    ) -> Result<SessionListReply, ServiceError> {
        let b = request.body;
        let all = self
            .reader
            .list(b.user.as_deref(), b.agent.as_deref())
            .await
            .map_err(store_failed)?;
        let total = all.len();
        let limit = if b.limit == 0 {
            DEFAULT_LIST_PAGE
        } else {
            b.limit
        };
        let summaries = all
            .iter()
            .skip(b.offset)
            .map(|(meta, task)| session_wire::summary(meta, task));
        let (sessions, more) = paging::fit(summaries, limit, self.page_bytes);
        Ok(SessionListReply {
            next_offset: more.then_some(b.offset + sessions.len()),
            sessions,
            total,
        })
    }
}

#[async_trait]
impl Service<SessionShowRequest> for SessionQueries {
    async fn call(
        &self,
        request: Envelope<SessionShowRequest>,
    ) -> Result<SessionShowReply, ServiceError> {
        let b = request.body;
        for (what, id) in [("agent", &b.agent), ("session", &b.session)] {
            check_id(what, id).map_err(|e| ServiceError::new("bad_request", e.to_string()))?;
        }
        let Some((meta, messages, task)) = self
            .reader
            .load(&b.agent, &b.session)
            .await
            .map_err(store_failed)?
        else {
            return Err(ServiceError::new(
                "not_found",
                format!(
                    "no session `{}` of agent `{}`; see `hermes sessions ls` (another agent's \
                     session needs --agent)",
                    b.session, b.agent
                ),
            ));
        };
        let session = session_wire::detail(&meta, &task);
        let budget = self
            .page_bytes
            .saturating_sub(paging::json_len(&session))
            .max(1);
        let page = messages
            .iter()
            .filter(|m| m.seq >= b.from_seq)
            .map(session_wire::message);
        let (messages, more) = paging::fit(page, b.limit, budget);
        Ok(SessionShowReply {
            next_seq: more.then(|| messages.last().map(|m| m.seq + 1)).flatten(),
            session,
            messages,
        })
    }
}

#[cfg(test)]
#[path = "session_query_tests.rs"]
mod tests;
