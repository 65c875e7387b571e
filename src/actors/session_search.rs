//! Serves `hermes.sessions.search` (queue `session`) next to the Session actors, which own the
//! conversation trees: BM25 over a user's past messages. On a cluster it reads the replicated
//! session log, so any session process finds every session of the user, not only the ones it
//! owned ([`SessionReader`]); the scoring runs in `spawn_blocking`.

use async_trait::async_trait;

use crate::bus::service::{Service, ServiceError};
use crate::context::search;
use crate::protocol::envelope::Envelope;
use crate::protocol::{SessionSearchReply, SessionSearchRequest};
use crate::store::session_reader::SessionReader;

/// Most hits one search returns.
pub const MAX_HITS: usize = 20;

/// The session-search service.
pub struct SessionSearch {
    pub reader: SessionReader,
}

#[async_trait]
impl Service<SessionSearchRequest> for SessionSearch {
    async fn call(
        &self,
        request: Envelope<SessionSearchRequest>,
    ) -> Result<SessionSearchReply, ServiceError> {
        let body = request.body;
        let sessions = self
            .reader
            .histories(&body.user)
            .await
            .map_err(|e| ServiceError::new("search_failed", e.to_string()))?;
        let limit = body.limit.clamp(1, MAX_HITS);
        let hits = tokio::task::spawn_blocking(move || search::rank(sessions, &body.query, limit))
            .await
            .map_err(|e| ServiceError::new("search_crashed", e.to_string()))?;
        Ok(SessionSearchReply { hits })
    }
}
