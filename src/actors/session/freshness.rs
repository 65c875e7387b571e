//! A live session actor's state may be older than the session's log. On a cluster the
//! session's partition can move to another process and back while this actor stays alive:
//! the other process then ran turns this actor never saw. A user message finds out by itself
//! (its append is fenced and handed back), but an item that only makes sense against the
//! current state — the end of a job a turn waits for, a confirmation, a redelivered message
//! whose turn is unfinished — would be taken for stale and dropped, leaving the turn waiting
//! for ever. Such an item is checked against a fresh read of the session first.

use std::sync::Arc;

use actix::prelude::*;

use super::SessionActor;
use crate::store::sessions::SessionMeta;

impl SessionActor {
    /// Read the session again (one look at the log's last record when the cache follows it),
    /// then `then`, told whether this copy was behind. Should the read fail, `then` runs on
    /// the state in hand, as before.
    pub(super) fn refresh_then<F>(&mut self, ctx: &mut Context<Self>, then: F)
    where
        F: FnOnce(&mut Self, &mut Context<Self>, bool) + 'static,
    {
        let store = self.env.store.clone();
        let (agent, session) = (self.agent.clone(), self.session.clone());
        let load = async move { store.load_synced(&agent, &session).await };
        ctx.wait(load.into_actor(self).map(move |loaded, act, ctx| {
            let behind = match loaded {
                Ok((meta, messages, task)) => {
                    let seq = |meta: Option<&SessionMeta>| meta.map(|m| (m.log_seq, m.updated_at));
                    let behind = seq(meta.as_ref()) != seq(act.meta.as_ref());
                    if behind {
                        tracing::info!(session = %act.session, "this copy of the session was behind its log (another process served it meanwhile); reloaded");
                        act.meta = meta;
                        act.history = Arc::new(messages);
                        act.task = task;
                        // As after a start: parked turns look at their work once.
                        act.to_poll = act.task.parked.iter().map(|t| t.turn_id.clone()).collect();
                    }
                    behind
                }
                Err(e) => {
                    tracing::warn!(session = %act.session, error = %e, "could not read the session again; going on with the state in hand");
                    false
                }
            };
            then(act, ctx, behind);
        }));
    }
}
