//! Serves `hermes.sessions.search` (queue `session`) next to the Session actors, which own the
//! conversation trees: BM25 over a user's past messages, scanned in `spawn_blocking`.

use async_trait::async_trait;

use crate::bus::service::{Service, ServiceError};
use crate::context::search;
use crate::protocol::envelope::Envelope;
use crate::protocol::{SessionSearchReply, SessionSearchRequest};
use crate::store::sessions::SessionStore;

/// Most hits one search returns.
const MAX_HITS: usize = 20;

/// The session-search service.
pub struct SessionSearch {
    pub store: SessionStore,
}

#[async_trait]
impl Service<SessionSearchRequest> for SessionSearch {
    async fn call(
        &self,
        request: Envelope<SessionSearchRequest>,
    ) -> Result<SessionSearchReply, ServiceError> {
        let store = self.store.clone();
        let body = request.body;
        let hits = tokio::task::spawn_blocking(move || {
            search::search(
                &store,
                &body.user,
                &body.query,
                body.limit.clamp(1, MAX_HITS),
            )
        })
        .await
        .map_err(|e| ServiceError::new("search_crashed", e.to_string()))?
        .map_err(|e| ServiceError::new("search_failed", e.to_string()))?;
        Ok(SessionSearchReply { hits })
    }
}
