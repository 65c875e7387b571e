//! Job ends that reach a live session actor together are taken by one run of the turn that
//! waits for them; a turn woken by one end asks nobody about the others.

use std::time::Duration;

use super::test_actor::start_actor;
use super::JobFinished;
use crate::protocol::{JobEvent, TurnEvent};
use crate::store::tasks::TurnPhase;
use crate::turn::delegation_tests::{child_answer, fan_out, session_of};
use crate::turn::tests::Session;

fn resumed(s: &Session) -> usize {
    let events = s.ports.seen().events.clone();
    events
        .iter()
        .filter(|e| matches!(e, TurnEvent::TurnResumed { .. }))
        .count()
}

/// The parent's answer, once it came (within a few seconds).
async fn answer(s: &Session) -> String {
    for _ in 0..200 {
        if let Some(text) = s.answer() {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the parent never answered");
}

#[actix_rt::test]
async fn child_answers_that_arrive_together_are_taken_by_one_run_of_the_parent() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    assert_eq!(s.phase(), TurnPhase::WaitingAgents);
    let sent = s.ports.seen().sent.clone();
    let ends: Vec<JobEvent> = sent
        .iter()
        .map(|task| {
            let answer = format!("{} is done", task.agent.as_deref().unwrap());
            child_answer(&s, &task.id, &answer, 10)
        })
        .collect();
    // Started, the actor asks each child about its task once (it may have ended unheard).
    let (parent, _bus) = start_actor(&s).await;
    let before = resumed(&s);
    let asked = s.ports.seen().sent.len();

    // Both ends are in the mailbox before the actor looks at either.
    for event in ends {
        parent.do_send(JobFinished {
            event,
            settle: None,
        });
    }

    let answer = answer(&s).await;
    assert!(
        answer.contains("care is done") && answer.contains("logistics is done"),
        "{answer}"
    );
    assert_eq!(
        resumed(&s) - before,
        1,
        "one run of the waiting turn took both answers"
    );
    assert_eq!(
        s.ports.seen().sent.len(),
        asked,
        "no child was sent its task again"
    );
}

#[actix_rt::test]
async fn a_parent_woken_by_one_childs_answer_keeps_waiting_for_the_other() {
    let mut s = session_of("triage", fan_out());
    s.say("order A1 is delayed").await;
    let sent = s.ports.seen().sent.clone();
    let first = child_answer(&s, &sent[0].id, "first is done", 10);
    // Started, the actor asks each child about its task once (it may have ended unheard).
    let (parent, _bus) = start_actor(&s).await;
    let before = resumed(&s);
    let asked = s.ports.seen().sent.len();

    parent.do_send(JobFinished {
        event: first,
        settle: None,
    });
    for _ in 0..200 {
        if resumed(&s) > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    s.reload();
    assert_eq!(s.phase(), TurnPhase::WaitingAgents, "one answer of two");
    assert_eq!(s.answer(), None);
    let stored: Vec<String> = s
        .log
        .iter()
        .filter(|m| m.message.tool_call_id.is_some())
        .map(|m| m.message.content.clone())
        .collect();
    assert_eq!(
        stored.len(),
        1,
        "the answer that came is stored: {stored:?}"
    );
    assert_eq!(
        s.ports.seen().sent.len(),
        asked,
        "the other child, still working, is not sent its task again"
    );
}
