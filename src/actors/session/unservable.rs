//! A session this process cannot serve: its replicated log refuses this process' appends
//! (fenced: another owner wrote since) or cannot be reached (nats-server down, a stream
//! electing its leader, permissions that deny the log's subjects), or the session could not be
//! loaded at all.
//!
//! The rule: the item in hand is handed back to the session's inbox — the session's owner
//! (this process again, or a new one) reloads the session from the log and carries on — until
//! its [`HAND_BACK_LIMIT`]th delivery. Then the session tells instead of handing back: a
//! message not yet accepted is refused with a `session_unavailable` error reply naming the
//! cause, a turn in progress ends with an `error` event naming it, and the item is settled. No
//! item goes round the inbox forever, and no message is accepted and left unanswered.
//!
//! Before a message is refused, the session is read again and the message handled once more
//! against the log: a copy that stayed alive while the session's partition moved away and back
//! is fenced because it is behind, and the message it would refuse may be one a dead owner
//! accepted (and left unfinished) after this copy last read the session — refusing it would
//! settle its item and leave that turn unfinished for ever.

use actix::prelude::*;

use super::SessionActor;
use crate::protocol::envelope::error_envelope;
use crate::store::sessions::SessionMeta;
use crate::store::tasks::TaskState;
use crate::turn::{self, inbound};

/// Deliveries of one item after which a session that cannot be served tells the client why.
/// An item handed back comes again after a delay that doubles from 100 ms, so this is about
/// 3 s of waiting for the log (a stream electing a new leader takes less), plus the tries.
pub const HAND_BACK_LIMIT: u64 = 6;

/// How long an item may wait for its session before the session tells instead of handing
/// it back, however few its deliveries: a try that fails slowly (a refused publish waits out
/// JetStream's 5 s acknowledgement) must not keep the client past its request timeout (30 s
/// for `hermes send`). A stream electing a leader takes a few seconds; this outlasts it.
pub const HAND_BACK_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

impl SessionActor {
    /// Whether the items in hand have been delivered often enough that handing them back
    /// again would only go round.
    pub(super) fn last_chance(&self) -> bool {
        self.settling.iter().any(|settle| {
            settle.delivery() >= HAND_BACK_LIMIT || settle.waited() >= HAND_BACK_WINDOW
        })
    }

    /// An item this session cannot take: handed back, or on its last chance refused with an
    /// error reply to `reply` (when its publisher waits for one) naming `cause`.
    pub(super) fn hand_back_or_refuse(
        &mut self,
        reply: Option<String>,
        cause: String,
        ctx: &mut Context<Self>,
    ) {
        if !self.last_chance() {
            return self.hand_back(ctx);
        }
        if let Some((again, item)) = self.last_try.take() {
            tracing::info!(agent = %self.agent, session = %self.session, %cause, "a message on its last chance was not accepted; reading the session again before refusing it");
            return self.refresh_then(ctx, move |act, ctx, _| act.deliver(again, item, true, ctx));
        }
        tracing::error!(agent = %self.agent, session = %self.session, %cause, "session cannot be served (its item was handed back {HAND_BACK_LIMIT} times or waited {} s); refusing it with the cause", HAND_BACK_WINDOW.as_secs());
        let env = self.env.clone();
        let text = format!(
            "session `{}` cannot be served now: {cause}. This message was not handled; send it again once that is fixed",
            self.session
        );
        ctx.wait(
            async move {
                let err = error_envelope(turn::UNSERVABLE, text);
                inbound::reply(&env, reply.as_deref(), &err).await;
            }
            .into_actor(self)
            .map(|_, act, ctx| {
                act.finished();
                ctx.stop();
            }),
        );
    }

    /// A turn handed back on its item's last chance: it ends with an `error` event naming
    /// `cause`, the item is settled, and the actor stops (a later item reloads the session
    /// from the log).
    pub(super) fn end_turn_unservable(
        &mut self,
        meta: SessionMeta,
        task: TaskState,
        cause: String,
        ctx: &mut Context<Self>,
    ) {
        let env = self.env.clone();
        ctx.wait(
            async move { turn::tell_unservable(&env, &meta, &task, &cause).await }
                .into_actor(self)
                .map(|_, act, ctx| {
                    act.finished();
                    ctx.stop();
                }),
        );
    }
}
