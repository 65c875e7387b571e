//! A user message for the session ([`Deliver`]): accepted with a new turn, which runs; or
//! recognised as one already accepted (a redelivery, a resend), whose turn goes on; or refused.
//! A copy that would refuse it as busy reads the session again first; so does one about to
//! refuse it on its item's last chance ([`super::unservable`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;

use super::{Deliver, SessionActor};
use crate::actors::settle::Settle;
use crate::protocol::UserMessage;
use crate::store::sessions::SessionMeta;
use crate::store::tasks::TurnPhase;
use crate::turn::inbound::{self, Inbound};

impl Handler<Deliver> for SessionActor {
    type Result = ();

    fn handle(&mut self, mut msg: Deliver, ctx: &mut Self::Context) {
        let item = msg.settle.as_ref().and_then(Settle::seq);
        self.settling.extend(msg.settle.take());
        if let Some(cause) = self.unservable.clone() {
            return self.hand_back_or_refuse(msg.inbound.reply, cause, ctx);
        }
        self.deliver(msg, item, false, ctx);
    }
}

impl SessionActor {
    /// [`Deliver`]'s work, its item already in hand (`item`: where it sits in the inbox). A
    /// copy that would turn the message away as busy reads the session again first: on a
    /// cluster it may be behind the log (the partition moved away and back while this actor
    /// stayed alive), and its "unfinished turn" long finished — or it is this very message's
    /// turn, which another process accepted and this copy must resume, not refuse and settle.
    pub(super) fn deliver(
        &mut self,
        msg: Deliver,
        item: Option<u64>,
        refreshed: bool,
        ctx: &mut Context<Self>,
    ) {
        if !refreshed && item.is_some() && self.would_be_busy() {
            return self.refresh_then(ctx, move |act, ctx, _| act.deliver(msg, item, true, ctx));
        }
        if !refreshed && item.is_some() && self.last_chance() {
            self.last_try = Some((msg.again(), item));
        }
        // A delegated task may be sent again by a parent that cannot tell whether it arrived.
        // So may a trigger whose event was published twice, and an A2A client retrying.
        let body = &msg.inbound.envelope.body;
        let repeatable = msg.redelivered
            || body.delegation.is_some()
            || body.trigger.is_some()
            || body.resendable;
        if repeatable && self.already_accepted(&msg.inbound, ctx) {
            return;
        }
        self.env.cancel.store(false, Ordering::Release);
        self.arrived_trace = msg.traceparent;
        let env = self.env.clone();
        let mut meta = self
            .meta
            .take()
            .unwrap_or_else(|| SessionMeta::new(&self.agent, &self.session, &msg.inbound.user));
        let mut task = std::mem::take(&mut self.task);
        let inbound = msg.inbound;
        let inbound_reply = inbound.reply.clone();
        let fut = async move {
            let accepted = inbound::accept(&env, &mut meta, &mut task, &inbound).await;
            (meta, task, accepted)
        };
        // `wait`: the next message of this session starts only after this one is handled.
        ctx.wait(
            fut.into_actor(self)
                .map(move |(meta, task, accepted), act, ctx| {
                    act.meta = Some(meta);
                    act.task = task;
                    match accepted {
                        inbound::Acceptance::Accepted(stored) => {
                            Arc::make_mut(&mut act.history).push(*stored);
                            act.arrived_reply = inbound_reply;
                            // Held until the turn is done (`finished`), so its answer's
                            // extraction is queued before the item is acked.
                            act.env
                                .inbox_item
                                .store(item.unwrap_or(0), Ordering::Release);
                            act.run(ctx);
                        }
                        inbound::Acceptance::Refused => act.finished(),
                        inbound::Acceptance::HandedBack(cause) => {
                            act.hand_back_or_refuse(inbound_reply, cause, ctx)
                        }
                    }
                }),
        );
    }
}

impl SessionActor {
    /// Whether a new message would be refused as busy: a turn is in progress that does not
    /// step aside (it runs, or waits for the user's decision).
    fn would_be_busy(&self) -> bool {
        self.task
            .unfinished_turn()
            .is_some_and(|t| !matches!(t.phase, TurnPhase::WaitingJob | TurnPhase::WaitingAgents))
    }

    /// A redelivered message its first owner had already accepted: acknowledge it again and
    /// let the turn it started go on (a resumable turn was resumed when the actor started).
    fn already_accepted(
        &mut self,
        inbound: &Inbound<UserMessage>,
        ctx: &mut Context<Self>,
    ) -> bool {
        let id = &inbound.envelope.id;
        let Some(stored) = self.history.iter().rev().find(|m| &m.id == id) else {
            return false;
        };
        tracing::info!(session = %self.session, message = %id, "redelivered message was already accepted; not accepting it twice");
        let accepted = inbound::accepted(inbound, &self.session, stored);
        let (env, to) = (self.env.clone(), inbound.reply.clone());
        // Nothing to resume here, yet the message came again: the process that ran its turn
        // may have died mid-turn after this copy last read the session.
        let check_the_log = self.task.resumable_turn().is_none();
        let go_on = |act: &mut Self, ctx: &mut Context<Self>, _behind: bool| {
            if act.task.resumable_turn().is_some() {
                act.run(ctx);
            } else if act.task.extraction_unnoted().is_some() {
                // Its turn answered, but whether its extraction was queued is not noted.
                act.queue_extraction(ctx, Self::after_turn);
            } else {
                act.finished();
            }
        };
        ctx.wait(
            async move { inbound::reply(&env, to.as_deref(), &accepted).await }
                .into_actor(self)
                .map(move |_, act, ctx| {
                    if check_the_log {
                        act.refresh_then(ctx, go_on);
                    } else {
                        go_on(act, ctx, false);
                    }
                }),
        );
        true
    }
}
