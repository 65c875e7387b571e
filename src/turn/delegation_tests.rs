//! Delegation, handoff and cancellation without a bus: scripted ports, a real sled store.

use chrono::{Duration as ChronoDuration, Utc};
use serde_json::json;

use super::fake::FakePorts;
use super::inbound::{self, Inbound};
use super::tests::{calls, last_is_user, says, Session};
use super::TurnError;
use crate::config::Config;
use crate::llm::ToolCall;
use crate::protocol::envelope::Envelope;
use crate::protocol::{
    Delegation, JobEvent, JobStatus, PlanReply, ToolStatus, TurnEvent, Usage, UserMessage,
};
use crate::store::tasks::TurnPhase;

const TEAM: &str = r#"
[agents.triage]
description = "Sorts out what an event needs"
system_prompt = "You triage."
max_steps = 6
context_window = 16000
reply_reserve = 500
delegates_to = ["care", "logistics"]
handoffs_to = ["care"]
token_budget = 10000
delegation_timeout_secs = 60

[agents.care]
description = "Knows the customer"
system_prompt = "You care."
max_steps = 4
context_window = 16000
reply_reserve = 500
memory = { read = ["default", "care"], write = "care" }

[agents.logistics]
description = "Tracks parcels"
system_prompt = "You track."
max_steps = 4
context_window = 16000
reply_reserve = 500
delegates_to = ["triage", "care"]
"#;

pub(crate) fn team() -> Config {
    let text = format!("{}\n{TEAM}", crate::config::DEFAULT_CONFIG);
    Config::parse(&text, "team").unwrap()
}

pub(crate) fn session_of(agent: &str, ports: FakePorts) -> Session {
    let mut s = Session::with_config(ports, team());
    s.meta.agent = agent.into();
    s
}

fn usage(prompt: u32, completion: u32) -> Option<Usage> {
    Some(Usage::new(prompt, completion))
}

/// A triage planner that delegates to care and logistics at once, then answers with what
/// came back.
pub(crate) fn fan_out() -> FakePorts {
    FakePorts::new(|r| {
        if last_is_user(r) {
            PlanReply {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "c-care".into(),
                        name: "agent__care".into(),
                        arguments: json!({"task": "What does the user prefer?"}),
                    },
                    ToolCall {
                        id: "c-log".into(),
                        name: "agent__logistics".into(),
                        arguments: json!({"task": "Where is parcel SF1?", "context": "order A1"}),
                    },
                ],
                usage: usage(100, 20),
                model: "fake".into(),
                parts: Vec::new(),
                reasoning: String::new(),
            }
        } else {
            let results: Vec<String> = r
                .messages
                .iter()
                .filter(|m| m.role == crate::llm::Role::Tool)
                .map(|m| m.content.clone())
                .collect();
            PlanReply {
                usage: usage(50, 10),
                ..says(&format!("both answered: {}", results.join(" | ")))
            }
        }
    })
}

/// The final event a child's session publishes for the parent's job `job_id`.
pub(crate) fn child_answer(s: &Session, job_id: &str, answer: &str, tokens: u64) -> JobEvent {
    let job = s
        .task
        .turn
        .as_ref()
        .unwrap()
        .jobs
        .iter()
        .find(|j| j.job_id == job_id)
        .unwrap()
        .clone();
    let child = job.child.clone().unwrap();
    JobEvent {
        job_id: job_id.into(),
        tool: job.tool.clone(),
        call_id: job.call_id.clone(),
        agent: Some(s.meta.agent.clone()),
        session: Some(s.meta.session.clone()),
        user: Some(s.meta.user.clone()),
        turn_id: Some(s.task.turn.as_ref().unwrap().turn_id.clone()),
        status: JobStatus::Done,
        progress: None,
        result: Some(
            json!({"agent": child.agent, "session": child.session, "answer": answer, "tokens": tokens}),
        ),
        error: None,
    }
}

/// What the session actor does with a job's final event: record it in the waiting turn.
pub(crate) fn deliver(s: &mut Session, event: &JobEvent) {
    let turn = s.task.unfinished_turn_mut().unwrap();
    let job = turn
        .jobs
        .iter_mut()
        .find(|j| j.job_id == event.job_id)
        .unwrap();
    let result = super::finished_by(job, event).unwrap();
    job.result = Some((&result).into());
}

#[tokio::test]
async fn delegations_of_one_step_start_together_and_the_turn_waits_for_both() {
    let mut s = session_of("triage", fan_out());
    let outcome = s.say("order A1 is delayed").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(s.phase(), TurnPhase::WaitingAgents);
    let sent = s.ports.seen().sent.clone();
    assert_eq!(
        sent.len(),
        2,
        "both children get their task before either answers"
    );
    let care = sent
        .iter()
        .find(|e| e.agent.as_deref() == Some("care"))
        .unwrap();
    let link = care.body.delegation.as_ref().unwrap();
    assert_eq!(link.parent_agent, "triage");
    assert_eq!(link.chain, vec!["triage".to_string()]);
    assert_eq!(
        care.user.as_deref(),
        Some("u1"),
        "the child works for the same user"
    );
    assert_eq!(
        care.id, link.job_id,
        "the task's id is the job the parent waits on"
    );
    assert_eq!(
        link.token_budget,
        Some(10000 - 120),
        "a child may spend what is left of the task's budget"
    );
    let logistics = sent
        .iter()
        .find(|e| e.agent.as_deref() == Some("logistics"))
        .unwrap();
    assert!(logistics.body.text.contains("Context: order A1"));
    let delegated = s
        .ports
        .seen()
        .events
        .iter()
        .filter(|e| matches!(e, TurnEvent::AgentDelegated { .. }))
        .count();
    assert_eq!(delegated, 2);

    let (care_job, log_job) = (care.id.clone(), logistics.id.clone());
    let first = child_answer(&s, &care_job, "likes SMS updates", 300);
    deliver(&mut s, &first);
    s.resume_heard().await;
    assert_eq!(
        s.phase(),
        TurnPhase::WaitingAgents,
        "one answer of two does not end the wait"
    );
    assert_eq!(
        s.ports.seen().sent.len(),
        2,
        "a parent woken by one child's answer does not take the other, still working, for one \
         that never got its task"
    );
    let second = child_answer(&s, &log_job, "parcel is in Shanghai", 200);
    deliver(&mut s, &second);
    s.resume_heard().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    let answer = s.answer().unwrap();
    assert!(
        answer.contains("likes SMS updates") && answer.contains("Shanghai"),
        "{answer}"
    );
    let turn = s.task.turn.as_ref().unwrap();
    assert_eq!(
        turn.tokens_used,
        120 + 300 + 200 + 60,
        "the children's tokens count in the parent task"
    );
    assert!(s
        .ports
        .seen()
        .events
        .iter()
        .any(|e| matches!(e, TurnEvent::TurnResumed { reason, .. } if reason.contains("care"))));
}

#[tokio::test]
async fn a_resumed_parent_reads_a_finished_childs_session_when_the_event_was_lost() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    let sent = s.ports.seen().sent.clone();
    // Both children run in this store (the same sled) and answer; their events are lost.
    for envelope in &sent {
        let agent = envelope.agent.clone().unwrap();
        let session = envelope.session.clone().unwrap();
        let mut child = session_of(&agent, FakePorts::new(|_| says("child answer")));
        child.env.store = s.env.store.clone();
        child.meta = crate::store::sessions::SessionMeta::new(&agent, &session, "u1");
        let message = Inbound {
            envelope: envelope.clone(),
            user: "u1".into(),
            reply: None,
        };
        let stored = inbound::accept(&child.env, &mut child.meta, &mut child.task, &message)
            .await
            .stored()
            .unwrap();
        child.log.push(stored);
        child.resume().await;
        assert_eq!(child.phase(), TurnPhase::Answered);
        let reported = child.ports.seen().job_events.clone();
        assert_eq!(reported.len(), 1, "the child reports to its parent");
        assert_eq!(reported[0].job_id, envelope.id);
        assert_eq!(reported[0].status, JobStatus::Done);
        assert_eq!(reported[0].session.as_deref(), Some("s1"));
    }
    s.reload();
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(s.answer().unwrap().contains("child answer"));
    assert_eq!(
        s.ports.seen().sent.len(),
        2,
        "no task is sent twice to a child that stored it"
    );
}

#[tokio::test]
async fn a_task_its_child_never_stored_is_sent_again_on_resume() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    s.reload();
    s.resume().await;
    let sent = s.ports.seen().sent.clone();
    assert_eq!(sent.len(), 4, "each unstored task is sent again");
    let first_ids: Vec<&String> = sent[..2].iter().map(|e| &e.id).collect();
    assert!(
        sent[2..].iter().all(|e| first_ids.contains(&&e.id)),
        "same ids: a repeat is recognised"
    );
}

#[tokio::test]
async fn a_child_past_its_deadline_is_cancelled_and_the_parent_goes_on() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    for job in &mut s.task.turn.as_mut().unwrap().jobs {
        if let Some(child) = job.child.as_mut() {
            child.deadline = Utc::now() - ChronoDuration::seconds(1);
        }
    }
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert_eq!(
        s.ports.seen().cancels.len(),
        2,
        "both late children are told to stop"
    );
    let answer = s.answer().unwrap();
    assert!(answer.contains("did not answer within"), "{answer}");
}

#[tokio::test]
async fn a_child_past_its_deadline_is_cancelled_when_another_childs_answer_wakes_the_parent() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    let sent = s.ports.seen().sent.clone();
    let care = sent.iter().find(|e| e.agent.as_deref() == Some("care"));
    let care_job = care.unwrap().id.clone();
    for job in &mut s.task.turn.as_mut().unwrap().jobs {
        if let Some(child) = job.child.as_mut().filter(|c| c.agent == "logistics") {
            child.deadline = Utc::now() - ChronoDuration::seconds(1);
        }
    }
    let answer = child_answer(&s, &care_job, "likes SMS updates", 300);
    deliver(&mut s, &answer);
    s.resume_heard().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    let cancels = s.ports.seen().cancels.clone();
    assert_eq!(cancels.len(), 1, "only the late child is told to stop");
    let answer = s.answer().unwrap();
    assert!(
        answer.contains("likes SMS updates") && answer.contains("did not answer within"),
        "{answer}"
    );
}

/// Accept `text` as a task that triage delegated to this session.
async fn accept_from_triage(s: &mut Session, text: &str) {
    let delegation = Delegation {
        parent_agent: "triage".into(),
        parent_session: "p".into(),
        parent_turn: "t".into(),
        call_id: "c".into(),
        job_id: "j".into(),
        chain: vec!["triage".into()],
        token_budget: None,
        deadline: Utc::now() + ChronoDuration::seconds(60),
    };
    let message = Inbound {
        envelope: Envelope::request(UserMessage {
            delegation: Some(Box::new(delegation)),
            ..UserMessage::text(text)
        }),
        user: "u1".into(),
        reply: None,
    };
    let stored = inbound::accept(&s.env, &mut s.meta, &mut s.task, &message)
        .await
        .stored()
        .unwrap();
    s.log.push(stored);
}

#[tokio::test]
async fn a_delegation_cycle_is_refused_with_a_clear_error() {
    let ports = FakePorts::new(|r| {
        if last_is_user(r) {
            calls("agent__triage", json!({"task": "decide for me"}))
        } else {
            says(&r.messages.last().unwrap().content.clone())
        }
    });
    let mut s = session_of("logistics", ports);
    accept_from_triage(&mut s, "where is it").await;
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(
        s.ports.seen().sent.is_empty(),
        "nothing is sent around a cycle"
    );
    let answer = s.answer().unwrap();
    assert!(
        answer.contains("cycle (triage → logistics → triage)"),
        "{answer}"
    );
    assert_eq!(
        s.ports.seen().job_events.len(),
        1,
        "the parent still hears back"
    );
}

#[tokio::test]
async fn delegation_deeper_than_the_limit_is_refused() {
    let mut config = team();
    config.engine.max_delegation_depth = 1;
    let ports = FakePorts::new(|r| {
        if last_is_user(r) {
            calls("agent__care", json!({"task": "x"}))
        } else {
            says(&r.messages.last().unwrap().content.clone())
        }
    });
    let mut s = Session::with_config(ports, config);
    s.meta.agent = "logistics".into();
    accept_from_triage(&mut s, "where is it").await;
    s.resume().await;
    assert!(s.answer().unwrap().contains("depth limit"));
}

#[tokio::test]
async fn an_agent_cannot_call_an_agent_it_does_not_delegate_to() {
    let ports = FakePorts::new(|r| {
        if last_is_user(r) {
            calls("agent__logistics", json!({"task": "x"}))
        } else {
            says(&r.messages.last().unwrap().content.clone())
        }
    });
    let mut s = session_of("care", ports);
    s.say("hello").await;
    assert!(s.ports.seen().sent.is_empty());
    assert!(s.answer().unwrap().contains("may not delegate"));
    let shown = s.ports.seen().plans[0].tools.clone();
    assert!(
        shown.iter().all(|t| !t.name.starts_with("agent__")),
        "care is shown no agent tools"
    );
    assert_eq!(
        s.ports.seen().recall_namespaces,
        vec!["default".to_string(), "care".to_string()],
        "recall reads the agent's namespaces"
    );
}

#[tokio::test]
async fn cancelling_a_waiting_turn_fails_it_and_cancels_its_children() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    let accepted = super::cancel(
        &s.env,
        &mut s.meta,
        &mut s.task,
        "changed my mind",
        "cancel-1",
        Utc::now(),
    )
    .await;
    assert!(accepted.turn_id.is_some());
    assert_eq!(accepted.children.len(), 2);
    assert_eq!(s.phase(), TurnPhase::Failed);
    assert_eq!(s.ports.seen().cancels.len(), 2);
    assert!(s.ports.seen().events.iter().any(
        |e| matches!(e, TurnEvent::Error { code, message, .. } if code == "cancelled" && message.contains("changed my mind"))
    ));
    s.reload();
    assert_eq!(s.phase(), TurnPhase::Failed, "the cancellation is stored");

    // Its answer lost, the same cancel comes again (after a restart, even): the same answer,
    // and nobody is told twice.
    let again = super::cancel(
        &s.env,
        &mut s.meta,
        &mut s.task,
        "changed my mind",
        "cancel-1",
        Utc::now(),
    )
    .await;
    assert_eq!(again, accepted);
    assert_eq!(s.ports.seen().cancels.len(), 2);
    let other = super::cancel(&s.env, &mut s.meta, &mut s.task, "", "cancel-2", Utc::now()).await;
    assert_eq!(other.turn_id, None, "a new cancel finds nothing to stop");
}

// The router raises the cancel flag when the cancel arrives; a child's answer can wake the
// turn first, which then sees the flag and fails. The cancel, handled next, still reports the
// turn it stopped and its children.
#[tokio::test]
async fn a_cancel_whose_flag_stopped_the_woken_turn_first_reports_that_turn() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    let turn_id = s.task.turn.as_ref().unwrap().turn_id.clone();
    let job_id = s.task.turn.as_ref().unwrap().jobs[0].job_id.clone();
    let event = child_answer(&s, &job_id, "the parcel is in Lyon", 10);
    deliver(&mut s, &event);
    let sent_at = Utc::now();
    s.env
        .cancel
        .store(true, std::sync::atomic::Ordering::Release);
    let outcome = s.resume().await;
    assert!(
        matches!(outcome.error, Some(TurnError::Cancelled(_))),
        "{:?}",
        outcome.error.map(|e| e.to_string())
    );
    assert_eq!(s.phase(), TurnPhase::Failed);
    let accepted = super::cancel(&s.env, &mut s.meta, &mut s.task, "stop", "c-1", sent_at).await;
    assert_eq!(accepted.turn_id.as_deref(), Some(turn_id.as_str()));
    assert_eq!(
        accepted.children.len(),
        1,
        "the child still working: {accepted:?}"
    );
    // Without the flag, a session with nothing unfinished stopped nothing.
    s.env
        .cancel
        .store(false, std::sync::atomic::Ordering::Release);
    let again = super::cancel(&s.env, &mut s.meta, &mut s.task, "again", "c-2", Utc::now()).await;
    assert_eq!(again.turn_id, None);
    // A later cancel, flag and all, does not claim the turn an earlier one stopped.
    s.env
        .cancel
        .store(true, std::sync::atomic::Ordering::Release);
    let later = super::cancel(&s.env, &mut s.meta, &mut s.task, "later", "c-3", Utc::now()).await;
    assert_eq!(later.turn_id, None);
}

#[tokio::test]
async fn a_turn_stops_when_its_budget_is_spent() {
    let mut config = team();
    config.agents.get_mut("care").unwrap().token_budget = 100;
    let ports = FakePorts::new(|r| {
        if last_is_user(r) {
            PlanReply {
                usage: usage(90, 20),
                ..calls("session_search", json!({"query": "x"}))
            }
        } else {
            says("never reached")
        }
    });
    let mut s = Session::with_config(ports, config);
    s.meta.agent = "care".into();
    let outcome = s.say("hi").await;
    assert_eq!(outcome.error.unwrap().code(), "token_budget");
}

#[tokio::test]
async fn a_handoff_gives_the_next_messages_to_the_other_agent() {
    let ports = FakePorts::new(|r| {
        let system = r.messages[0].content.clone();
        if system.contains("You care.") {
            return says("care here");
        }
        if last_is_user(r) {
            calls(
                "handoff",
                json!({"agent": "care", "reason": "a question about preferences"}),
            )
        } else {
            says("I am handing you to our care agent.")
        }
    });
    let mut s = session_of("triage", ports);
    s.say("what do I usually like?").await;
    assert_eq!(s.meta.active_agent(), "care");
    assert!(s.ports.seen().events.iter().any(
        |e| matches!(e, TurnEvent::Handoff { from, to, .. } if from == "triage" && to == "care")
    ));
    s.reload();
    assert_eq!(
        s.meta.handoffs.len(),
        1,
        "the handoff is stored with the session"
    );
    s.say("and now?").await;
    assert_eq!(s.answer().unwrap(), "care here");
    let result_ok = s.ports.seen().events.iter().any(|e| {
        matches!(e, TurnEvent::ToolResult { result, .. } if result.name == "handoff" && result.status == ToolStatus::Ok)
    });
    assert!(result_ok);
}
