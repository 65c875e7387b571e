//! How a turn ends: answered ([`finish`]: stored, published — also on the subject its message
//! asked for — reported to a parent turn, and queued for memory extraction), failed
//! ([`fail`]: stored, announced, its delegated agents stopped and its parent told), or
//! cancelled by the user ([`cancel`], with every turn of the session that still waits).

use chrono::{DateTime, Utc};

use super::{delegation, turn_start, Emitter, TurnEnv, TurnError, TurnState};
use crate::protocol::{CancelAccepted, TurnEvent};
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::{CancelRecord, TaskState, TurnPhase, TurnRecord};

/// Store the turn as failed, say so, stop the agents it delegated to, and tell its parent.
pub(super) async fn fail(state: &mut TurnState<'_>, record: &TurnRecord, e: &TurnError) {
    tracing::warn!(session = %state.meta.session, turn = %record.turn_id, error = %e, "turn failed");
    state.set_phase(TurnPhase::Failed);
    state.record().error = Some(e.to_string());
    state.record().cancelled = matches!(e, TurnError::Cancelled(_));
    if let Err(se) = state.save_task().await {
        if se.hands_back() && state.message_unwritten() {
            // Its message never reached the log: the turn goes back to the inbox, untold.
            return;
        }
        tracing::error!(error = %se, "failed turn state not stored");
    }
    if let Err(se) = state.env.commit().await {
        tracing::error!(error = %se, "failed turn state not committed");
    }
    state
        .emitter
        .emit(TurnEvent::Error {
            turn_id: Some(record.turn_id.clone()),
            code: e.code().into(),
            message: e.to_string(),
        })
        .await;
    state.emitter.flush().await;
    let current = state.record().clone();
    delegation::cancel_children(state.env, state.meta, &current, &e.to_string()).await;
    if let Some(parent) = &current.parent {
        delegation::report(state.env, state.meta, parent, &current, None).await;
    }
}

/// Tell the user that the session's unfinished turn cannot go on here: an `error` event
/// (`session_unavailable`) naming `cause` — its replicated log refuses this process' writes or
/// cannot be reached. Nothing is stored, as storing is what fails; an owner that reaches the
/// log later finds the turn unfinished in it.
pub async fn tell_unservable(env: &TurnEnv, meta: &SessionMeta, task: &TaskState, cause: &str) {
    let Some(record) = task.unfinished_turn() else {
        return;
    };
    tracing::error!(session = %meta.session, turn = %record.turn_id, cause, "turn cannot go on: its session log keeps failing; the user is told");
    let emitter = Emitter::new(env, meta, &record.trace_id);
    emitter
        .emit(TurnEvent::Error {
            turn_id: Some(record.turn_id.clone()),
            code: UNSERVABLE.into(),
            message: format!("this turn stopped: its session cannot be stored ({cause}); fix the cause and send the message again"),
        })
        .await;
    emitter.flush().await;
}

/// The error code of a message or turn whose session cannot be served (see
/// [`tell_unservable`]).
pub const UNSERVABLE: &str = "session_unavailable";

/// Stop the session's unfinished turn at the user's request (`user.cancel` envelope
/// `envelope_id`, sent at `sent_at`), with the agents it delegated to; the turn that was
/// stopped and the child sessions told. The same envelope sent again (its answer was lost)
/// gets the same answer and stops nothing more.
pub async fn cancel(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    reason: &str,
    envelope_id: &str,
    sent_at: DateTime<Utc>,
) -> CancelAccepted {
    if let Some(done) = task
        .last_cancel
        .as_ref()
        .filter(|c| c.envelope_id == envelope_id)
    {
        return CancelAccepted {
            turn_id: done.turn_id.clone(),
            children: done.children.clone(),
        };
    }
    let stopped = stop_all(env, meta, task, reason, sent_at).await;
    task.last_cancel = Some(CancelRecord {
        envelope_id: envelope_id.to_string(),
        turn_id: stopped.turn_id.clone(),
        children: stopped.children.clone(),
    });
    // Should this write fail, a resend merely finds nothing more to stop.
    if let Err(e) = env.store.save_committed(meta, &[], task).await {
        tracing::warn!(session = %meta.session, error = %e, "the cancel's answer not recorded; a resend will say nothing was stopped");
    }
    stopped
}

/// [`cancel`]'s work: the unfinished turn and every parked one.
async fn stop_all(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    reason: &str,
    sent_at: DateTime<Utc>,
) -> CancelAccepted {
    // Turns parked while a newer one talked are stopped as well.
    let parked: Vec<String> = task.parked.iter().map(|t| t.turn_id.clone()).collect();
    let mut stopped = cancel_current(env, meta, task, reason).await;
    if stopped.turn_id.is_none() {
        stopped = stopped_by_the_flag(env, task, sent_at);
    }
    for turn_id in parked {
        if task.unpark(&turn_id) {
            let more = cancel_current(env, meta, task, reason).await;
            stopped.children.extend(more.children);
            stopped.turn_id = stopped.turn_id.or(more.turn_id);
        }
    }
    stopped
}

async fn cancel_current(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    reason: &str,
) -> CancelAccepted {
    let Some(record) = task.unfinished_turn().cloned() else {
        return CancelAccepted {
            turn_id: None,
            children: Vec::new(),
        };
    };
    let children = child_sessions(&record);
    let emitter = Emitter::new(env, meta, &record.trace_id);
    let mut state = TurnState::new(env, meta, task, &[], emitter);
    fail(
        &mut state,
        &record,
        &TurnError::Cancelled(reason.to_string()),
    )
    .await;
    // A waiting turn stopped: counted, not timed (its messages are not loaded here).
    crate::telemetry::metrics::turn_counted(
        state.meta.active_agent(),
        crate::telemetry::metrics::TurnOutcome::Failed,
    );
    CancelAccepted {
        turn_id: Some(record.turn_id),
        children,
    }
}

/// The turn this cancel stopped before it was handled: the router raised the session's cancel
/// flag when the cancel arrived, and the turn (woken meanwhile, e.g. by a child's answer) saw
/// it and failed as cancelled, telling its children. Nothing unfinished is left, but the
/// request did stop that turn and says so. A turn that failed before the cancel was sent is
/// not this request's (a sender's clock far ahead only makes this report nothing).
fn stopped_by_the_flag(env: &TurnEnv, task: &TaskState, sent_at: DateTime<Utc>) -> CancelAccepted {
    let stopped = task.turn.as_ref().filter(|t| {
        env.cancelled() && t.updated_at >= sent_at && t.phase == TurnPhase::Failed && t.cancelled
    });
    CancelAccepted {
        turn_id: stopped.map(|t| t.turn_id.clone()),
        children: stopped.map(child_sessions).unwrap_or_default(),
    }
}

/// `agent.session` of each child a turn still waited for.
fn child_sessions(record: &TurnRecord) -> Vec<String> {
    record
        .unfinished_children()
        .map(|(_, c)| format!("{}.{}", c.agent, c.session))
        .collect()
}

/// Store the turn as answered and commit, publish the answer, then queue the transcript for
/// extraction and note that it is queued — so an answer that left is on disk, and an answered
/// turn whose extraction a crash cut off is queued at start-up ([`queue_extraction`]; the
/// extractor skips a turn it already mined). A turn that answered while its inbox item was
/// held writes no note: the item's ack, after this, is the note (`TurnRecord::inbox_item`).
/// On NATS such a turn's job already went with the answer's append ([`super::outbox`]).
pub(super) async fn finish(
    state: &mut TurnState<'_>,
    record: &TurnRecord,
    text: &str,
) -> Result<(), TurnError> {
    // The model's answer was stored as answered already; an answer found on resuming (stored
    // while planning by an older version) or the loop guard's question is marked here.
    if state.record().phase != TurnPhase::Answered {
        state.set_answered();
        state.carry_extraction(text);
        state.save_task().await?;
    }
    state.env.commit().await?;
    let current = state.record().clone();
    deliver(state.env, state.meta, &state.emitter, &current, text).await;
    // Carried by the answer's append, or queued now.
    let queued = current.extraction_queued
        || match state.current().first() {
            Some(user_message) => {
                enqueue_extraction(state.env, state.meta, record, user_message, text).await
            }
            None => true,
        };
    if queued && current.inbox_item.is_some() {
        // The item's ack, after the turn, notes it: this copy knows it noted.
        let record = state.record();
        record.extraction_queued = true;
        record.inbox_item = None;
        return Ok(());
    }
    // Not queued, or no inbox item: the note says which, for the start-up scan.
    let record = state.record();
    record.extraction_queued = queued;
    record.inbox_item = None;
    state.save_task().await
}

/// Send a stored answer everywhere it goes: the session's events, the subject its message
/// asked for, and the parent turn that delegated it.
async fn deliver(
    env: &TurnEnv,
    meta: &SessionMeta,
    emitter: &Emitter,
    record: &TurnRecord,
    text: &str,
) {
    let answer = TurnEvent::Answer {
        turn_id: record.turn_id.clone(),
        text: text.to_string(),
    };
    emitter.emit(answer.clone()).await;
    emitter.flush().await;
    if let Some(to) = &record.answer_to {
        answer_elsewhere(env, emitter, to, answer).await;
    }
    if let Some(parent) = &record.parent {
        delegation::report(env, meta, parent, record, Some(text)).await;
    }
}

/// Finish an answered turn a crash cut off after its answer was stored: deliver the answer
/// again — the crash may have come before it left the process (the event keeps its id, see
/// [`crate::bus::events::answer_event_id`]; a parent ignores a second report of a child it
/// has heard from) — and queue the transcript for extraction unless the answer's append
/// carried it ([`super::outbox`]). A turn that answered with its inbox item in hand is
/// finished only if the inbox still holds the item: then the crash came before the ack,
/// perhaps before the answer left (the item comes back to this session too, and is
/// recognised as accepted).
pub async fn queue_extraction(
    env: &TurnEnv,
    meta: &mut SessionMeta,
    task: &mut TaskState,
    log: &[StoredMessage],
) -> Result<(), TurnError> {
    let Some(record) = task.extraction_unnoted().cloned() else {
        return Ok(());
    };
    if let Some(item) = record.inbox_item {
        // Queued before its inbox item was acked: gone from the inbox, it was queued.
        if env.ports.inbox_holds(item).await == Some(false) {
            tracing::debug!(turn = %record.turn_id, item, "answered turn's inbox item was acked, so its answer left and its extraction was queued");
            if let Some(turn) = task.turn.as_mut() {
                turn.extraction_queued = true;
                turn.inbox_item = None;
            }
            return Ok(());
        }
        tracing::info!(turn = %record.turn_id, item, "answered turn's inbox item was not acked (its owner stopped before): answer sent and extraction queued again");
    }
    let start = turn_start(log, &record);
    let own: Vec<&StoredMessage> = log[start.min(log.len())..]
        .iter()
        .filter(|m| m.turn_id == record.turn_id)
        .collect();
    // The turn's last message is its answer when there is more than the user's message.
    let queued = match (own.first(), own.last().filter(|_| own.len() > 1)) {
        (Some(user_message), Some(answer)) => {
            let text = &answer.message.content;
            let emitter = Emitter::new(env, meta, &record.trace_id);
            deliver(env, meta, &emitter, &record, text).await;
            record.extraction_queued
                || enqueue_extraction(env, meta, &record, user_message, text).await
        }
        _ => true,
    };
    if let Some(turn) = task.turn.as_mut() {
        turn.extraction_queued = queued;
        turn.inbox_item = None;
    }
    env.store.save(meta, &[], task).await?;
    Ok(())
}

/// Publish the answer on the subject its message asked for (a trigger's `reply_subject`).
async fn answer_elsewhere(env: &TurnEnv, emitter: &Emitter, to: &str, answer: TurnEvent) {
    let scope = emitter.scope();
    let envelope =
        crate::protocol::envelope::Envelope::new(crate::protocol::kinds::TURN_EVENT, answer)
            .for_session(&scope.agent, &scope.session, scope.user.as_deref())
            .in_trace(&scope.trace_id);
    match envelope.encode() {
        Ok(payload) => env.ports.reply(to, payload).await,
        Err(e) => tracing::error!(error = %e, "answer not encoded for {to}"),
    }
}

/// Put the turn's transcript on the extraction queue; false when it could not be queued.
async fn enqueue_extraction(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    user_message: &StoredMessage,
    answer: &str,
) -> bool {
    let job = super::outbox::extraction_job(env, meta, record, user_message, answer);
    let scope = super::emit::scope_of(env, meta, &record.trace_id);
    env.ports.enqueue_extraction(&scope, job).await
}
