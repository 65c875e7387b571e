//! Serves `hermes.sessions.search` (queue `session`) next to the Session actors, which own the
//! conversation trees: BM25 over a user's past messages, off the arbiter.

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::Incoming;
use super::{error_bytes, reply_bytes};
use crate::bus::messages::{kinds, SessionSearchReply, SessionSearchRequest};
use crate::envelope::Envelope;
use crate::store::search;
use crate::store::sessions::SessionStore;

/// Most hits one search returns.
const MAX_HITS: usize = 20;

pub struct SessionSearch {
    pub store: SessionStore,
    pub max_envelope_bytes: usize,
}

impl Actor for SessionSearch {
    type Context = Context<Self>;
}

impl Handler<Incoming> for SessionSearch {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _: &mut Self::Context) -> Self::Result {
        let store = self.store.clone();
        let max = self.max_envelope_bytes;
        Box::pin(async move {
            let request = match Envelope::decode_as::<SessionSearchRequest>(
                &msg.payload,
                max,
                kinds::SESSIONS_SEARCH,
            ) {
                Ok(r) => r,
                Err(e) => return error_bytes("bad_request", e.to_string()),
            };
            let body = request.body;
            let found = tokio::task::spawn_blocking(move || {
                search::search(
                    &store,
                    &body.user,
                    &body.query,
                    body.limit.clamp(1, MAX_HITS),
                )
            })
            .await;
            match found {
                Ok(Ok(hits)) => reply_bytes(
                    &Envelope::new(kinds::SESSIONS_FOUND, SessionSearchReply { hits })
                        .in_trace(&request.trace_id),
                ),
                Ok(Err(e)) => error_bytes("search_failed", e.to_string()),
                Err(e) => error_bytes("search_crashed", e.to_string()),
            }
        })
    }
}
