//! Talking while work runs: a message that arrives while the session's turn waits for a job
//! gets a turn of its own, and the waiting turn goes on when its job ends.

use serde_json::json;

use super::fake::FakePorts;
use super::tests::{calls, says, tool, Session};
use crate::llm::{ChatMessage, Role};
use crate::protocol::{JobEvent, PlanRequest, ToolMode, TurnEvent};
use crate::store::tasks::TurnPhase;
use crate::tools::jobs::JobStatus;

/// Every assistant message with tool calls is followed at once by a result for each call (what
/// chat-completions APIs require).
fn well_formed(messages: &[std::sync::Arc<ChatMessage>]) -> bool {
    messages.iter().enumerate().all(|(i, m)| {
        if m.role != Role::Assistant || m.tool_calls.is_empty() {
            return true;
        }
        let following: Vec<&str> = messages[i + 1..]
            .iter()
            .take_while(|n| n.role == Role::Tool)
            .filter_map(|n| n.tool_call_id.as_deref())
            .collect();
        m.tool_calls
            .iter()
            .all(|c| following.contains(&c.id.as_str()))
    })
}

fn last_user(r: &PlanRequest) -> String {
    r.messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

fn world() -> FakePorts {
    let mut report = tool("generate_report");
    report.mode = ToolMode::Async;
    FakePorts::new(|r| {
        let last = r.messages.last().unwrap();
        if last.role == Role::Tool {
            return says("the report is ready: 12 pages");
        }
        let text = last_user(r);
        if text.contains("report") {
            calls("generate_report", json!({"topic": "phones"}))
        } else if text.contains("how far") {
            let note = r.messages.iter().any(|m| {
                m.role == Role::System
                    && m.content
                        .contains("job job-7 of `generate_report` is running")
            });
            says(if note {
                "it is still being written"
            } else {
                "no idea"
            })
        } else {
            says("you are welcome")
        }
    })
    .tool(report, |_| {
        Ok(json!({"job_id": "job-7", "status": "submitted"}))
    })
}

fn job_done() -> JobEvent {
    JobEvent {
        job_id: "job-7".into(),
        tool: "generate_report".into(),
        call_id: "call-generate_report".into(),
        agent: None,
        session: None,
        user: None,
        turn_id: None,
        status: JobStatus::Done,
        progress: None,
        result: Some(json!({"pages": 12})),
        error: None,
    }
}

#[tokio::test]
async fn a_message_while_a_job_runs_is_answered_and_the_waiting_turn_goes_on_after() {
    let mut s = Session::new(world());
    s.say("write a report on phones").await;
    assert_eq!(s.phase(), TurnPhase::WaitingJob);
    let report_turn = s.task.turn.as_ref().unwrap().turn_id.clone();

    let outcome = s.say("how far along is it?").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(
        s.phase(),
        TurnPhase::Answered,
        "the side question got its own turn"
    );
    assert_eq!(s.answer().as_deref(), Some("it is still being written"));
    assert_eq!(s.task.parked.len(), 1, "the report turn waits aside");
    let side = s.ports.seen().plans.last().unwrap().messages.clone();
    assert!(
        well_formed(&side),
        "no dangling tool call in the side turn's context"
    );

    // The job ends: the session actor makes the report turn current again and runs it.
    assert!(s.task.unpark(&report_turn));
    let turn = s.task.unfinished_turn_mut().unwrap();
    let job = turn.jobs.iter_mut().find(|j| j.job_id == "job-7").unwrap();
    job.result = Some((&super::finished_by(job, &job_done()).unwrap()).into());
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(s.task.parked.is_empty());
    let answers: Vec<(String, String)> = s
        .ports
        .seen()
        .events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Answer { turn_id, text } => Some((turn_id.clone(), text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(
        answers[1],
        (report_turn, "the report is ready: 12 pages".to_string()),
        "the late answer names the turn it belongs to"
    );

    // The next turn sees both earlier turns, each in one piece.
    s.say("thanks").await;
    let next = s.ports.seen().plans.last().unwrap().messages.clone();
    assert!(well_formed(&next), "{next:#?}");
    let users: Vec<String> = next
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(users.len(), 3, "{users:?}");
}

#[tokio::test]
async fn a_turn_waiting_for_the_users_decision_still_comes_first() {
    let mut risky = tool("cancel_order");
    risky.risk = crate::protocol::ToolRisk::High;
    let ports = FakePorts::new(|r| {
        if r.messages.last().unwrap().role == Role::Tool {
            says("done")
        } else {
            calls("cancel_order", json!({"id": "A1"}))
        }
    })
    .tool(risky, |_| Ok(json!({})));
    let mut s = Session::new(ports);
    s.say("cancel my order").await;
    assert_eq!(s.phase(), TurnPhase::WaitingUser);
    let message = super::inbound::Inbound {
        envelope: crate::protocol::envelope::Envelope::request(crate::protocol::UserMessage::text(
            "hello?",
        )),
        user: "u1".into(),
        reply: Some("_INBOX.x".into()),
    };
    let accepted = super::inbound::accept(&s.env, &mut s.meta, &mut s.task, &message).await;
    assert!(
        accepted.stored().is_none(),
        "the decision is asked for first"
    );
    assert!(s.task.parked.is_empty());
}
