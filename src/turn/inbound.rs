//! What arrives for a session before a turn runs: a user message, accepted by persisting it
//! with a new turn (on disk before the acknowledgement leaves, which in `sync` mode shares
//! the turn's next flush: [`super::ack`]; on the replicated log it goes with the turn's first
//! write: [`super::first_write`]), and the user's decision on a paused turn's
//! high-risk calls and answers to its MCP servers' questions. Replies to the publisher go through the ports.

use chrono::Utc;
use serde_json::Value;

use super::{goal_tokens, new_stored, TurnEnv};
use crate::llm::ChatMessage;
use crate::protocol::envelope::Envelope;
use crate::protocol::refusal::Refusal;
use crate::protocol::{Accepted, Confirmation, ConfirmationAccepted, UserMessage};
use crate::store::durability::Ticket;
use crate::store::sessions::{next_seq_after, SessionMeta, StoredMessage};
use crate::store::tasks::{Decision, TaskState, TurnPhase, TurnRecord};

/// An inbound message for a session that passed the router's checks.
#[derive(Debug, Clone)]
pub struct Inbound<B> {
    pub envelope: Envelope<B>,
    /// The user the envelope names.
    pub user: String,
    /// Where the publisher waits for the acknowledgement, if it asked for one.
    pub reply: Option<String>,
}

/// Record the user's decision on the turn's undecided high-risk calls, flushed before it is
/// acknowledged. Returns whether the turn can go on.
pub async fn decide(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    msg: &Inbound<Confirmation>,
) -> bool {
    let to = msg.reply.as_deref();
    if meta.user != msg.user {
        let text = format!(
            "session `{}` belongs to another user; only its user can confirm its calls",
            meta.session
        );
        reply(env, to, &Refusal::WrongUser.answer(text)).await;
        return false;
    }
    let wanted = msg.envelope.body.call_id.as_deref();
    let approve = msg.envelope.body.approve;
    if let Some(again) = decided_already(task, &msg.envelope.id, approve) {
        // Sent again (its first acknowledgement was lost): the same answer, nothing redone.
        reply(env, to, &msg.envelope.reply(again)).await;
        return false;
    }
    let Some(turn) = task.unfinished_turn_mut() else {
        let text = format!(
            "session `{}` has no turn waiting for a confirmation",
            meta.session
        );
        reply(env, to, &Refusal::NothingToConfirm.answer(text)).await;
        return false;
    };
    let undecided: Vec<String> = turn.undecided().map(|c| c.call_id.clone()).collect();
    let chosen: Vec<String> = undecided
        .iter()
        .filter(|id| wanted.is_none_or(|w| w == id.as_str()))
        .cloned()
        .collect();
    if chosen.is_empty() {
        let text = match wanted {
            Some(w) if !undecided.is_empty() => format!(
                "no call `{w}` waits for a confirmation; waiting: {}",
                undecided.join(", ")
            ),
            _ => format!(
                "session `{}` has no call waiting for a confirmation",
                meta.session
            ),
        };
        reply(env, to, &Refusal::NothingToConfirm.answer(text)).await;
        return false;
    }
    let content = msg.envelope.body.content.as_ref().filter(|_| approve);
    if let Some(content) = content {
        if let Err(text) = fits(turn, &chosen, content) {
            reply(env, to, &Refusal::InvalidAnswer.answer(text)).await;
            return false;
        }
    }
    let decision = if approve {
        Decision::Approved
    } else {
        Decision::Denied
    };
    for c in turn.confirmations.iter_mut() {
        if chosen.contains(&c.call_id) {
            c.decision = Some(decision);
            c.decided_by = Some(msg.envelope.id.clone());
            c.content = content.cloned();
        }
    }
    turn.updated_at = Utc::now();
    let turn_id = turn.turn_id.clone();
    if let Err(e) = env.store.save_committed(meta, &[], task).await {
        tracing::error!(session = %meta.session, error = %e, "decision not persisted; refused");
        if let Some(turn) = task.unfinished_turn_mut() {
            for c in turn.confirmations.iter_mut() {
                if chosen.contains(&c.call_id) {
                    c.decision = None;
                    c.decided_by = None;
                    c.content = None;
                }
            }
        }
        let err = Refusal::StoreFailed.answer(format!("decision not stored: {e}; send it again"));
        reply(env, to, &err).await;
        return false;
    }
    let accepted = msg.envelope.reply(ConfirmationAccepted {
        turn_id,
        call_ids: chosen,
        approve,
    });
    reply(env, to, &accepted).await;
    true
}

/// Whether `content` answers the chosen calls: each must be a server's question (a
/// confirmation has nothing to fill in) and the content must fit its forms.
fn fits(turn: &TurnRecord, chosen: &[String], content: &Value) -> Result<(), String> {
    for c in turn
        .confirmations
        .iter()
        .filter(|c| chosen.contains(&c.call_id))
    {
        let Some(input) = &c.input else {
            return Err(format!(
                "call `{}` ({}) asks for a confirmation, not an answer: approve or deny it \
                 without content",
                c.call_id, c.tool
            ));
        };
        super::questions::check_answer(input, content)
            .map_err(|problem| format!("{problem}; send a corrected answer"))?;
    }
    Ok(())
}

/// The acknowledgement the decision `envelope_id` got when it was taken: a publisher that
/// lost `confirmation.accepted` and sends the same envelope again hears it again.
fn decided_already(
    task: &TaskState,
    envelope_id: &str,
    approve: bool,
) -> Option<ConfirmationAccepted> {
    let turn = task.turn.as_ref()?;
    // A call whose server asked again keeps the envelopes that answered its earlier rounds.
    let call_ids: Vec<String> = turn
        .confirmations
        .iter()
        .filter(|c| {
            c.decided_by.as_deref() == Some(envelope_id)
                || c.input
                    .as_ref()
                    .is_some_and(|i| i.answered_by.iter().any(|by| by == envelope_id))
        })
        .map(|c| c.call_id.clone())
        .collect();
    (!call_ids.is_empty()).then(|| ConfirmationAccepted {
        turn_id: turn.turn_id.clone(),
        call_ids,
        approve,
    })
}

/// What became of a user message.
#[derive(Debug)]
pub enum Acceptance {
    /// Stored with a new turn, and acknowledged (in `sync` mode: the acknowledgement leaves
    /// with the first flush that covers it, see [`super::ack`]).
    Accepted(Box<StoredMessage>),
    /// Refused with an error reply (wrong user, a paused turn, storage failed).
    Refused,
    /// Another process owns the session now (its replicated log moved on), or the log is
    /// briefly unreachable: nothing was stored or answered here; the message comes back from
    /// the session's inbox to whichever process owns it. Carries the cause.
    HandedBack(String),
}

impl Acceptance {
    /// The stored message, when the message was accepted.
    pub fn stored(self) -> Option<StoredMessage> {
        match self {
            Acceptance::Accepted(stored) => Some(*stored),
            _ => None,
        }
    }
}

/// Persist the user message with a new turn in state `received`, then acknowledge it.
pub async fn accept(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    msg: &Inbound<UserMessage>,
) -> Acceptance {
    if meta.user != msg.user {
        let text = format!(
            "session `{}` belongs to another user; start a new session id",
            meta.session
        );
        reply(env, msg.reply.as_deref(), &Refusal::WrongUser.answer(text)).await;
        return Acceptance::Refused;
    }
    // A turn that only waits for a job or other agents steps aside: the user may talk
    // meanwhile ("how far along is it?"), and it goes on by itself when its work ends. Any
    // other unfinished turn (running, or waiting for the user's decision) comes first.
    let parked = task.park_waiting();
    if let Some(t) = task.unfinished_turn() {
        let (refusal, text) = busy(t);
        reply(env, msg.reply.as_deref(), &refusal.answer(text)).await;
        return Acceptance::Refused;
    }
    let text = msg.envelope.body.text.clone();
    let turn_id = uuid::Uuid::now_v7().to_string();
    let mut stored = new_stored(
        &env.tokens,
        meta.next_seq,
        &turn_id,
        ChatMessage::user(text.clone()),
        msg.envelope.ts,
    );
    stored.id = msg.envelope.id.clone();
    let explicit_goal = text.strip_prefix("/goal ").map(str::trim);
    if explicit_goal.is_some() || task.goal.is_none() {
        let goal = explicit_goal.unwrap_or(&text).to_string();
        task.goal_tokens = goal_tokens(&env.tokens, &goal);
        task.goal = Some(goal);
    }
    let mut record = TurnRecord::received(
        turn_id.clone(),
        stored.id.clone(),
        msg.envelope.trace_id.clone(),
    );
    record.parent = msg
        .envelope
        .body
        .delegation
        .as_ref()
        .map(|d| super::delegation::parent_link(d));
    record.answer_to = msg.envelope.body.answer_to.clone();
    task.turn = Some(record);
    let recalling = recall_ahead(env, meta, msg, &turn_id, &text);
    let first_write_within = env.config.cluster.first_write_within();
    if let Some(within) =
        first_write_within.filter(|_| env.store.is_replicated() && env.ports.plans_in_process())
    {
        // Appended with the turn's first write, or alone once that is late.
        if let Some(recall) = recalling {
            env.prefetched.put(&turn_id, recall);
        }
        let before = meta.clone();
        meta.next_seq = next_seq_after(meta.next_seq, std::slice::from_ref(&stored));
        let ack = (msg.reply.clone(), accepted(msg, &meta.session, &stored));
        env.first_write
            .defer(env, within, before, stored.clone(), task.clone(), ack)
            .await;
        return Acceptance::Accepted(Box::new(stored));
    }
    let saving = env
        .store
        .save(meta, std::slice::from_ref(&stored), task)
        .await;
    if let Some(recall) = recalling {
        match &saving {
            Ok(()) => env.prefetched.put(&turn_id, recall),
            Err(_) => recall.abort(),
        }
    }
    let saved = match saving {
        Ok(()) => match env.store.commit_within(env.ack_flush_within) {
            Some(ticket) => {
                acknowledge_once_flushed(env, msg, meta, &stored, ticket).await;
                return Acceptance::Accepted(Box::new(stored));
            }
            None => env.store.commit().await,
        },
        Err(e) => Err(e),
    };
    if let Err(e) = saved {
        task.turn = None;
        if parked {
            // Put the waiting turn back where it was.
            task.turn = task.parked.pop();
        }
        if e.hands_back() {
            return Acceptance::HandedBack(e.to_string());
        }
        tracing::error!(session = %meta.session, error = %e, "message not persisted; refused");
        let err = Refusal::StoreFailed.answer(format!("message not stored: {e}"));
        reply(env, msg.reply.as_deref(), &err).await;
        return Acceptance::Refused;
    }
    reply(
        env,
        msg.reply.as_deref(),
        &accepted(msg, &meta.session, &stored),
    )
    .await;
    Acceptance::Accepted(Box::new(stored))
}

/// With a replicated log, the new turn's recall started as a task, to run while its message
/// is appended (see [`super::prefetch`]); `None` when the turn recalls for itself.
fn recall_ahead(
    env: &TurnEnv,
    meta: &SessionMeta,
    msg: &Inbound<UserMessage>,
    turn_id: &str,
    text: &str,
) -> Option<tokio::task::JoinHandle<Vec<crate::protocol::RecallHit>>> {
    if !env.store.is_replicated() {
        return None;
    }
    let namespaces = env
        .config
        .agent(meta.active_agent())
        .ok()?
        .memory
        .read
        .clone();
    let scope = super::emit::scope_of(env, meta, &msg.envelope.trace_id);
    let (env, user, text, turn_id) = (
        env.clone(),
        meta.user.clone(),
        text.to_owned(),
        turn_id.to_owned(),
    );
    Some(tokio::spawn(async move {
        super::recall_for(&env, &scope, &user, &namespaces, &text, &turn_id).await
    }))
}

/// The acknowledgement of `msg`, stored in `session` as `stored`.
pub fn accepted(
    msg: &Inbound<UserMessage>,
    session: &str,
    stored: &StoredMessage,
) -> Envelope<Accepted> {
    msg.envelope.reply(Accepted {
        message_id: stored.id.clone(),
        session: session.to_owned(),
        seq: stored.seq,
        turn_id: Some(stored.turn_id.clone()),
    })
}

/// Send the acknowledgement of `stored` once the flush `ticket` waits for has put it on
/// disk, without holding up the turn (see [`super::ack`]); a failed flush is the publisher's
/// `store_failed`.
async fn acknowledge_once_flushed(
    env: &TurnEnv,
    msg: &Inbound<UserMessage>,
    meta: &SessionMeta,
    stored: &StoredMessage,
    ticket: Ticket,
) {
    let opener = env.ack.hold().await;
    let accepted = accepted(msg, &meta.session, stored);
    let (env, to, session) = (env.clone(), msg.reply.clone(), meta.session.clone());
    tokio::spawn(async move {
        match env.store.reached(ticket).await {
            Ok(()) => reply(&env, to.as_deref(), &accepted).await,
            Err(e) => {
                tracing::error!(%session, error = %e, "message not flushed; its acknowledgement says so");
                let err = Refusal::StoreFailed.answer(format!("message not stored: {e}"));
                reply(&env, to.as_deref(), &err).await;
            }
        }
        opener.open(&env.ports).await;
    });
}

/// Why a new message cannot start a turn now, and what to do.
fn busy(t: &TurnRecord) -> (Refusal, String) {
    match t.phase {
        TurnPhase::WaitingUser => {
            let calls: Vec<String> = t
                .undecided()
                .map(|c| format!("`{}` (call {})", c.tool, c.call_id))
                .collect();
            (
                Refusal::AwaitingConfirmation,
                format!(
                    "turn {} waits for your decision on {}; answer with `hermes send --confirm` \
                     or `--deny` (a `user.confirmation` message) before sending a new one",
                    t.turn_id,
                    calls.join(", ")
                ),
            )
        }
        TurnPhase::WaitingJob => {
            let jobs: Vec<String> = t
                .unfinished_jobs()
                .map(|j| format!("`{}` (job {})", j.tool, j.job_id))
                .collect();
            (
                Refusal::AwaitingJob,
                format!(
                    "turn {} waits for {}; it goes on by itself when the job finishes — send \
                     the new message after its answer",
                    t.turn_id,
                    jobs.join(", ")
                ),
            )
        }
        phase => (
            Refusal::Busy,
            format!("turn {} is still in progress ({phase:?})", t.turn_id),
        ),
    }
}

/// Answer the publisher of an inbound message, when it asked for an answer.
pub async fn reply<B: serde::Serialize>(env: &TurnEnv, to: Option<&str>, envelope: &Envelope<B>) {
    let Some(to) = to else { return };
    match envelope.encode() {
        Ok(payload) => env.ports.reply(to, payload).await,
        Err(e) => tracing::warn!(error = %e, "reply to publisher not encoded"),
    }
}
