//! Stored sessions and their wire form: [`SessionMeta`], [`TaskState`] and [`StoredMessage`]
//! (sled, the replicated log) → the read-only views of [`crate::protocol::session_view`] that
//! `hermes.sessions.list` / `.show` answer with.

use super::sessions::{SessionMeta, StoredMessage};
use super::tasks::{Decision, TaskState, TurnRecord};
use crate::protocol::session_view::{
    ChildView, ConfirmationView, HandoffView, JobView, ParentView, SessionDetail, SessionMessage,
    SessionSummary, SetAsideView, TurnView,
};

/// A session as a list shows it.
pub fn summary(meta: &SessionMeta, task: &TaskState) -> SessionSummary {
    SessionSummary {
        agent: meta.agent.clone(),
        session: meta.session.clone(),
        user: meta.user.clone(),
        created_at: meta.created_at,
        updated_at: meta.updated_at,
        messages: meta.next_seq,
        active_agent: meta.active_agent().to_owned(),
        phase: task.turn.as_ref().map(|t| t.phase),
    }
}

/// Everything about a session but its messages.
pub fn detail(meta: &SessionMeta, task: &TaskState) -> SessionDetail {
    SessionDetail {
        summary: summary(meta, task),
        handoffs: meta
            .handoffs
            .iter()
            .map(|h| HandoffView {
                from: h.from.clone(),
                to: h.to.clone(),
                reason: h.reason.clone(),
                turn_id: h.turn_id.clone(),
                at: h.at,
            })
            .collect(),
        goal: task.goal.clone(),
        history_summary: task.summary.clone(),
        summary_upto: task.summary_upto,
        key_facts: task.key_facts.clone(),
        turn: task.turn.as_ref().map(turn),
        parked: task.parked.iter().map(turn).collect(),
        set_aside: meta
            .set_aside
            .iter()
            .map(|a| SetAsideView {
                at: a.at,
                messages: a.messages,
                first_seq: a.first_seq,
                last_seq: a.last_seq,
                kept_in: a.kept_in.clone(),
            })
            .collect(),
    }
}

fn turn(t: &TurnRecord) -> TurnView {
    TurnView {
        turn_id: t.turn_id.clone(),
        message_id: t.message_id.clone(),
        phase: t.phase,
        step: t.step,
        updated_at: t.updated_at,
        error: t.error.clone(),
        cancelled: t.cancelled,
        tokens_used: t.tokens_used,
        parent: t.parent.as_ref().map(|p| ParentView {
            agent: p.agent.clone(),
            session: p.session.clone(),
            turn_id: p.turn_id.clone(),
            chain: p.chain.clone(),
        }),
        jobs: t
            .jobs
            .iter()
            .map(|j| JobView {
                call_id: j.call_id.clone(),
                tool: j.tool.clone(),
                job_id: j.job_id.clone(),
                done: j.result.is_some(),
                child: j.child.as_ref().map(|c| ChildView {
                    agent: c.agent.clone(),
                    session: c.session.clone(),
                    deadline: c.deadline,
                }),
            })
            .collect(),
        confirmations: t
            .confirmations
            .iter()
            .map(|c| ConfirmationView {
                call_id: c.call_id.clone(),
                tool: c.tool.clone(),
                decision: c.decision.map(|d| {
                    match d {
                        Decision::Approved => "approved",
                        Decision::Denied => "denied",
                    }
                    .to_owned()
                }),
                questions: c
                    .input
                    .as_ref()
                    .map(|i| i.asked.questions.clone())
                    .unwrap_or_default(),
            })
            .collect(),
    }
}

/// One stored message.
pub fn message(m: &StoredMessage) -> SessionMessage {
    SessionMessage {
        seq: m.seq,
        id: m.id.clone(),
        turn_id: m.turn_id.clone(),
        ts: m.ts,
        tokens: m.tokens,
        usage: m.usage,
        message: (*m.message).clone(),
    }
}
