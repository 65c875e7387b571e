use chrono::Utc;

use super::*;
use crate::protocol::session_view::{ConfirmationView, SessionDetail, SessionSummary};
use crate::protocol::ChatMessage;

fn message(seq: u64, id: &str, turn: &str, message: ChatMessage) -> SessionMessage {
    SessionMessage {
        seq,
        id: id.into(),
        turn_id: turn.into(),
        ts: Utc::now(),
        tokens: 1,
        usage: None,
        message,
    }
}

fn record(turn: &str, message_id: &str, phase: TurnPhase) -> TurnView {
    TurnView {
        turn_id: turn.into(),
        message_id: message_id.into(),
        phase,
        step: 1,
        updated_at: Utc::now(),
        error: None,
        cancelled: false,
        tokens_used: 0,
        parent: None,
        jobs: Vec::new(),
        confirmations: Vec::new(),
    }
}

fn snapshot(messages: Vec<SessionMessage>, turn: Option<TurnView>) -> Snapshot {
    let now = Utc::now();
    Snapshot {
        detail: SessionDetail {
            summary: SessionSummary {
                agent: "assistant".into(),
                session: "ctx".into(),
                user: "u".into(),
                created_at: now,
                updated_at: now,
                messages: messages.len() as u64,
                active_agent: "assistant".into(),
                phase: turn.as_ref().map(|t| t.phase),
            },
            handoffs: Vec::new(),
            set_aside: Vec::new(),
            goal: None,
            history_summary: String::new(),
            summary_upto: 0,
            key_facts: Vec::new(),
            turn,
            parked: Vec::new(),
        },
        messages,
    }
}

#[test]
fn an_answered_turn_is_a_completed_task_with_its_answer_as_artifact_and_history() {
    let s = snapshot(
        vec![
            message(0, "m1", "t1", ChatMessage::user("first?")),
            message(1, "a1", "t1", ChatMessage::assistant("one")),
            message(2, "m2", "t2", ChatMessage::user("second?")),
            message(3, "a2", "t2", ChatMessage::assistant("two")),
        ],
        Some(record("t2", "m2", TurnPhase::Answered)),
    );
    let all = turns(&s);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].state, TaskState::Completed, "an older answered turn");
    let task = all[1].to_task(View::default());
    assert_eq!(task.id, "ctx.t2");
    assert_eq!(task.context_id, "ctx");
    assert_eq!(task.status.state, TaskState::Completed);
    let artifacts = task.artifacts.unwrap();
    assert_eq!(artifacts[0].parts[0].as_text(), Some("two"));
    let history = task.history.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].message_id, "m2");
    assert_eq!(history[1].role, Role::Agent);
    let short = all[1].to_task(View {
        history_length: Some(1),
        without_artifacts: true,
    });
    assert_eq!(short.history.unwrap()[0].message_id, "a2");
    assert!(short.artifacts.is_none());
}

#[test]
fn a_turn_read_answered_before_its_answer_is_readable_is_still_working() {
    let user = message(0, "m1", "t1", ChatMessage::user("first?"));
    let answered = Some(record("t1", "m1", TurnPhase::Answered));
    let between = snapshot(vec![user.clone()], answered.clone());
    assert_eq!(turns(&between)[0].state, TaskState::Working);
    let after = snapshot(
        vec![user, message(1, "a1", "t1", ChatMessage::assistant("one"))],
        answered,
    );
    let task = &turns(&after)[0];
    assert_eq!(task.state, TaskState::Completed);
    assert_eq!(task.answer, Some(("a1".to_string(), "one".to_string())));
}

#[test]
fn a_turn_waiting_for_a_confirmation_asks_for_input_and_a_decided_one_works() {
    let mut waiting = record("t1", "m1", TurnPhase::WaitingUser);
    waiting.confirmations.push(ConfirmationView {
        call_id: "c1".into(),
        tool: "add".into(),
        decision: None,
        questions: Vec::new(),
    });
    let s = snapshot(
        vec![message(0, "m1", "t1", ChatMessage::user("add it"))],
        Some(waiting.clone()),
    );
    let task = turn(&s, "t1").unwrap();
    assert_eq!(task.state, TaskState::InputRequired);
    assert!(task.status_text.unwrap().contains("`add` (call c1)"));

    waiting.confirmations[0].decision = Some("approved".into());
    let s = snapshot(Vec::new(), Some(waiting));
    assert_eq!(turn(&s, "t1").unwrap().state, TaskState::Working);
}

#[test]
fn a_cancelled_turn_is_canceled_and_another_failure_failed() {
    let mut cancelled = record("t1", "m1", TurnPhase::Failed);
    cancelled.error = Some("stopped by the client".into());
    cancelled.cancelled = true;
    let s = snapshot(Vec::new(), Some(cancelled));
    assert_eq!(turn(&s, "t1").unwrap().state, TaskState::Canceled);

    // Whatever its text says: only the flag makes a failure a cancellation.
    let mut failed = record("t1", "m1", TurnPhase::Failed);
    failed.error = Some("cancelled: the tool said so".into());
    let s = snapshot(Vec::new(), Some(failed));
    assert_eq!(turn(&s, "t1").unwrap().state, TaskState::Failed);

    let mut failed = record("t1", "m1", TurnPhase::Failed);
    failed.error = Some("planning failed: boom".into());
    let s = snapshot(Vec::new(), Some(failed));
    let task = turn(&s, "t1").unwrap();
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.status_text.as_deref(), Some("planning failed: boom"));
}

#[test]
fn a_reply_says_yes_or_no_in_words_or_data() {
    let reply = |part: Part| Message {
        message_id: "r".into(),
        context_id: None,
        task_id: None,
        role: Role::User,
        parts: vec![part],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    };
    assert_eq!(decision_of(&reply(Part::text("Yes."))), Some(true));
    assert_eq!(decision_of(&reply(Part::text("no"))), Some(false));
    assert_eq!(
        decision_of(&reply(Part::data(serde_json::json!({"approve": false})))),
        Some(false)
    );
    assert_eq!(decision_of(&reply(Part::text("maybe later"))), None);
    // An answer to an MCP server's question approves, and is the content sent back.
    let answered = reply(Part::data(serde_json::json!({"answer": {"name": "Ada"}})));
    assert_eq!(decision_of(&answered), Some(true));
    assert_eq!(
        answer_of(&answered),
        Some(serde_json::json!({"name": "Ada"}))
    );
    assert_eq!(answer_of(&reply(Part::text("yes"))), None);
}
