//! A turn resumed after a crash: from each stored state without repeating a stored call, with
//! an answer a crash cut off sent everywhere it goes, and a step interrupted mid-way planned
//! again.

use std::sync::Arc;

use chrono::Utc;
use serde_json::json;

use super::fake::FakePorts;
use super::inbound::{self, Inbound};
use super::tests::{call_then_answer, says, tool, Session};
use super::{run_turn, Awaited};
use crate::llm::{ChatMessage, Role};
use crate::protocol::envelope::Envelope;
use crate::protocol::UserMessage;
use crate::store::tasks::TurnPhase;

#[tokio::test]
async fn a_turn_resumes_from_each_persisted_state_without_repeating_a_stored_call() {
    // Received: accepted, nothing else happened.
    let ports = call_then_answer("add").tool(tool("add"), |_| Ok(json!({"result": 3})));
    let mut s = Session::new(ports);
    let message = Inbound {
        envelope: Envelope::request(UserMessage::text("add")),
        user: "u1".into(),
        reply: None,
    };
    let stored = inbound::accept(&s.env, &mut s.meta, &mut s.task, &message)
        .await
        .stored()
        .unwrap();
    s.log.push(stored);
    s.reload();
    assert_eq!(s.phase(), TurnPhase::Received);
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert_eq!(s.ports.seen().calls.len(), 1);

    // Awaiting tools with the result stored: the call is not made again.
    let turn_id = s.task.turn.as_ref().unwrap().turn_id.clone();
    let mut record = s.task.turn.clone().unwrap();
    record.phase = TurnPhase::AwaitingTools;
    s.task.turn = Some(record);
    // Drop the answer so the log ends at the stored tool result.
    s.log.pop();
    let log_len = s.log.len();
    s.env.store.save(&mut s.meta, &[], &s.task).await.unwrap();
    assert_eq!(s.log.last().unwrap().message.role, Role::Tool);
    let outcome = run_turn(
        &s.env,
        &mut s.meta,
        &mut s.task,
        Arc::new(s.log.clone()),
        Awaited::AskAll,
    )
    .await;
    assert!(outcome.error.is_none());
    assert_eq!(
        s.ports.seen().calls.len(),
        1,
        "a stored result is not run again"
    );
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(log_len > 0 && !turn_id.is_empty());

    // Answered, but the extraction was cut off: queued again.
    s.task.turn.as_mut().unwrap().extraction_queued = false;
    let before = s.ports.seen().extractions.len();
    super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
        .await
        .unwrap();
    assert_eq!(s.ports.seen().extractions.len(), before + 1);
    assert!(s.task.pending_extraction().is_none());
}

// A crash between storing an answer and sending it: at start-up the answer goes everywhere
// `finish` would have sent it, not only to the session's own events.
#[tokio::test]
async fn an_answer_a_crash_cut_off_reaches_the_reply_subject_and_the_parent_turn() {
    let mut s = Session::new(FakePorts::new(|_| says("42")));
    s.say("what is six times seven").await;
    let turn = s.task.turn.as_mut().unwrap();
    turn.answer_to = Some("ops.replies".into());
    turn.parent = Some(crate::store::tasks::ParentLink {
        agent: "lead".into(),
        session: "p1".into(),
        turn_id: "turn-p".into(),
        call_id: "call-p".into(),
        job_id: "job-p".into(),
        chain: vec!["lead".into()],
        token_budget: None,
        deadline: Utc::now(),
    });
    turn.extraction_queued = false;
    let (replies, reports) = {
        let seen = s.ports.seen();
        (seen.replies.len(), seen.job_events.len())
    };
    super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
        .await
        .unwrap();
    let seen = s.ports.seen();
    let to_subject: Vec<&str> = seen.replies[replies..]
        .iter()
        .map(|(to, _)| to.as_str())
        .collect();
    assert_eq!(to_subject, ["ops.replies"]);
    let report = &seen.job_events[reports..];
    assert_eq!(report.len(), 1, "the parent turn is told");
    assert_eq!(report[0].job_id, "job-p");
    assert_eq!(report[0].status, crate::protocol::JobStatus::Done);
}

#[tokio::test]
async fn planning_interrupted_mid_step_plans_again() {
    let ports = FakePorts::new(|_| says("hello back"));
    let mut s = Session::new(ports);
    let message = Inbound {
        envelope: Envelope::request(UserMessage::text("hi")),
        user: "u1".into(),
        reply: None,
    };
    let stored = inbound::accept(&s.env, &mut s.meta, &mut s.task, &message)
        .await
        .stored()
        .unwrap();
    s.log.push(stored);
    s.task.turn.as_mut().unwrap().phase = TurnPhase::Planning;
    s.resume().await;
    assert_eq!(s.answer().as_deref(), Some("hello back"));
    assert_eq!(s.ports.seen().plans.len(), 1);
    let assistant: Vec<&ChatMessage> = s
        .log
        .iter()
        .map(|m| &*m.message)
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert_eq!(assistant.len(), 1);
}
