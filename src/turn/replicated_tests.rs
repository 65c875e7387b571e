//! A turn on the replicated session log (`--bus nats://`): mid-turn steps travel with the
//! turn's next full save, and never past a call that acts on the world; the results a step
//! takes are appended together.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

use super::delegation_tests::{child_answer, deliver, fan_out, team};
use super::fake::FakePorts;
use super::tests::{calls, last_is_user, says, tool, Session};
use crate::llm::Role;
use crate::store::replica::{LogRecord, SessionLog};
use crate::store::tasks::TurnPhase;
use crate::store::test_log::MemoryLog;
use crate::tools::definition::ToolEffect;

/// How long a new turn's message waits for the turn's first write (the default
/// `cluster.first_write_within_ms`).
fn first_write_within() -> std::time::Duration {
    crate::config::ClusterConfig::default()
        .first_write_within()
        .expect("on by default")
}

/// The session's records in the log, decoded.
pub(super) fn records(log: &MemoryLog) -> Vec<LogRecord> {
    records_of(log, "assistant")
}

/// The records of `agent`'s session `s1` in the log, decoded.
fn records_of(log: &MemoryLog, agent: &str) -> Vec<LogRecord> {
    futures::executor::block_on(log.read_after(agent, "s1", 0))
        .unwrap()
        .into_iter()
        .map(|(_, bytes)| serde_json::from_slice(&bytes).unwrap())
        .collect()
}

/// Another process took the session over and appended meanwhile.
async fn another_process_appends(log: &MemoryLog) {
    let last = log.last("assistant", "s1").await.unwrap();
    log.append("assistant", "s1", Bytes::from_static(b"{}"), last)
        .await
        .unwrap();
}

/// The turn went back to the session's inbox.
fn assert_handed_back(outcome: &super::TurnOutcome) {
    assert!(
        outcome.error.as_ref().is_some_and(|e| e.hands_back()),
        "{:?}",
        outcome.error
    );
}

/// Calls `name` once, then answers.
fn call_then_answer(name: &'static str) -> FakePorts {
    FakePorts::new(move |r| {
        if last_is_user(r) {
            calls(name, json!({"order_id": "A-1"}))
        } else {
            says("done")
        }
    })
}

#[tokio::test]
async fn a_quick_tool_loop_turn_appends_its_message_and_steps_with_the_answer_not_one_by_one() {
    let log = Arc::new(MemoryLog::default());
    let ports = call_then_answer("add").tool(tool("add"), |_| Ok(json!({"result": 3})));
    let mut s = Session::on_log(ports, log.clone());
    let outcome = s.say("add one and two").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let records = records(&log);
    // Answered with its message, the call and its result; extraction queued.
    assert_eq!(
        records.len(),
        2,
        "one append per commit point and the extraction note"
    );
    // The acknowledgement left once the message was in the log, before the turn's events
    // (the read it called ran before that).
    let out = s.ports.seen().out.clone();
    let told = out.iter().find(|o| *o != "call");
    assert_eq!(told.map(String::as_str), Some("reply"), "{out:?}");
    assert_eq!(out.iter().filter(|o| *o == "reply").count(), 1, "{out:?}");
    let roles: Vec<Role> = records
        .iter()
        .flat_map(|r| r.messages.iter().map(|m| m.message.role))
        .collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    let seqs: Vec<u64> = records
        .iter()
        .flat_map(|r| r.messages.iter().map(|m| m.seq))
        .collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    assert_eq!(
        records[0].task.turn.as_ref().map(|t| t.phase),
        Some(TurnPhase::Answered)
    );
    // The local copy holds what the log holds.
    s.reload();
    assert_eq!(s.log.len(), 4);
}

#[tokio::test]
async fn a_write_call_runs_only_once_its_step_is_in_the_replicated_log() {
    let log = Arc::new(MemoryLog::default());
    let mut refund = tool("refund");
    refund.effect = ToolEffect::Write;
    let seen_by_tool = log.clone();
    let ports = call_then_answer("refund").tool(refund, move |_| {
        let stored: Vec<Role> = records(&seen_by_tool)
            .iter()
            .flat_map(|r| r.messages.iter().map(|m| m.message.role))
            .collect();
        assert_eq!(
            stored,
            [Role::User, Role::Assistant],
            "the call is stored first"
        );
        Ok(json!({"refunded": true}))
    });
    let mut s = Session::on_log(ports, log.clone());
    let outcome = s.say("refund A-1").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(s.ports.seen().calls.len(), 1);
    assert_eq!(s.phase(), TurnPhase::Answered);
}

#[tokio::test]
async fn an_owner_that_lost_the_session_learns_it_before_a_write_runs() {
    let log = Arc::new(MemoryLog::default());
    let mut refund = tool("refund");
    refund.effect = ToolEffect::Write;
    let ports = call_then_answer("refund").tool(refund, |_| Ok(json!({"refunded": true})));
    let mut s = Session::on_log(ports, log.clone());
    s.accept("refund A-1").await;
    another_process_appends(&log).await;
    assert_handed_back(&s.resume().await);
    assert_eq!(
        s.ports.seen().calls.len(),
        0,
        "the write ran on a lost session"
    );
    // Its message never reached this copy's log: it acknowledged nothing and said nothing.
    let seen = s.ports.seen();
    assert!(seen.replies.is_empty(), "{:?}", seen.out);
    assert!(seen.events.is_empty(), "{:?}", seen.events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_turn_has_its_message_appended_and_acknowledged_within_the_wait() {
    let log = Arc::new(MemoryLog::default());
    let seen_by_planner = log.clone();
    let ports = FakePorts::new(move |_| {
        // A model that takes its time: meanwhile the message is appended alone.
        std::thread::sleep(first_write_within() * 5);
        let stored: Vec<Role> = records(&seen_by_planner)
            .iter()
            .flat_map(|r| r.messages.iter().map(|m| m.message.role))
            .collect();
        assert_eq!(stored, [Role::User], "appended while the model thinks");
        says("done")
    });
    let mut s = Session::on_log(ports, log.clone());
    let outcome = s.say("think hard").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(s.ports.seen().plans.len(), 1, "the planner's checks ran");
    // Appended alone, then the answer from the fence that append left, then the note.
    assert_eq!(records(&log).len(), 3);
    let out = s.ports.seen().out.clone();
    assert_eq!(out.first().map(String::as_str), Some("reply"), "{out:?}");
    s.reload();
    assert_eq!(s.log.len(), 2);
}

#[tokio::test]
async fn a_turn_whose_message_could_not_be_written_goes_back_to_the_inbox() {
    let log = Arc::new(MemoryLog::default());
    let mut s = Session::on_log(FakePorts::new(|_| says("hello")), log.clone());
    s.accept("hi").await;
    another_process_appends(&log).await;
    assert_handed_back(&s.resume().await);
    let seen = s.ports.seen();
    assert!(seen.replies.is_empty(), "acknowledged: {:?}", seen.out);
    assert!(seen.events.is_empty(), "said: {:?}", seen.events);
    assert!(seen.extractions.is_empty());
}

/// A recalled memory saying `content`.
fn hit(content: &str) -> crate::protocol::RecallHit {
    let record = serde_json::from_value(json!({
        "id": "m1", "user": "u1", "namespace": "default", "kind": "preference",
        "key": "drink", "content": content, "importance": 0.8, "confidence": 0.9,
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "source": {"session": "s0", "message_id": "m0", "source_time": "2026-01-01T00:00:00Z"},
        "version": 1
    }))
    .unwrap();
    crate::protocol::RecallHit { record, score: 1.0 }
}

/// Wait (a few scheduler rounds at most) until `n` recalls were asked for.
async fn recalled(s: &Session, n: usize) {
    for _ in 0..100 {
        if s.ports.seen().recalls >= n {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(s.ports.seen().recalls, n, "recalled without the turn");
}

#[tokio::test]
async fn a_new_turn_recalls_while_its_message_is_appended_and_not_again() {
    let log = Arc::new(MemoryLog::default());
    let mut ports = FakePorts::new(|_| says("tea it is"));
    ports.recalled = vec![hit("prefers green tea")];
    let mut s = Session::on_log(ports, log.clone());
    s.accept("what should I drink?").await;
    // The recall runs by itself, before the turn does.
    recalled(&s, 1).await;
    let outcome = s.resume().await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    {
        let seen = s.ports.seen();
        assert_eq!(seen.recalls, 1, "the turn used the memories recalled ahead");
        let context: Vec<&str> = seen.plans[0]
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            context.iter().any(|c| c.contains("prefers green tea")),
            "{context:?}"
        );
        assert!(seen.events.iter().any(|e| matches!(
            e,
            crate::protocol::TurnEvent::MemoryRecalled { memories, .. } if memories.len() == 1
        )));
    }

    // A turn resumed after a restart has nothing recalled ahead: it recalls for itself.
    s.accept("and to eat?").await;
    recalled(&s, 2).await;
    // The message is in the log (appended alone once its turn did not write it in time).
    let users = |log: &MemoryLog| {
        records(log)
            .iter()
            .flat_map(|r| r.messages.iter().filter(|m| m.message.role == Role::User))
            .count()
    };
    for _ in 0..500 {
        if users(&log) == 2 {
            break;
        }
        tokio::time::sleep(first_write_within()).await;
    }
    assert_eq!(users(&log), 2, "appended alone");
    s.reload();
    s.env.prefetched = Default::default();
    s.resume().await;
    assert_eq!(s.ports.seen().recalls, 3, "recalled for the resumed turn");
}

#[tokio::test]
async fn with_the_wait_off_a_message_is_appended_on_arrival() {
    let log = Arc::new(MemoryLog::default());
    let mut s = Session::on_log(FakePorts::new(|_| says("hello")), log.clone());
    let mut config = (*s.env.config).clone();
    config.cluster.first_write_within_ms = 0;
    s.env.config = Arc::new(config);
    s.accept("hi").await;
    assert_eq!(records(&log).len(), 1, "appended before the turn runs");
    assert_eq!(s.ports.seen().replies.len(), 1, "and acknowledged");
    let outcome = s.resume().await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(records(&log).len(), 3, "message, answer, extraction note");
}

#[tokio::test]
async fn a_new_summary_rides_the_turns_next_append_rather_than_one_of_its_own() {
    let log = Arc::new(MemoryLog::default());
    let mut s = Session::on_log(FakePorts::new(|_| says("noted")), log.clone());
    let mut appended_by_plain_turn = None;
    let mut turns = 0;
    loop {
        turns += 1;
        assert!(turns <= 40, "no summary was made");
        let before = records(&log).len();
        let outcome = s.say(&format!("turn {turns}")).await;
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        let records = records(&log);
        let appended = records.len() - before;
        if s.ports.seen().summaries == 0 {
            appended_by_plain_turn = Some(appended);
            continue;
        }
        assert_eq!(
            Some(appended),
            appended_by_plain_turn,
            "the turn that summarised appended as often as one that did not"
        );
        let summarised = records[before..]
            .iter()
            .find(|r| !r.task.summary.is_empty())
            .expect("the summary is in the turn's records");
        assert_eq!(summarised.task.summary, "earlier turns, summarised");
        assert!(summarised.task.summary_upto > 0);
        assert!(
            summarised
                .messages
                .iter()
                .any(|m| m.message.role == Role::Assistant),
            "it rode the answer's append"
        );
        break;
    }
    s.reload();
    assert_eq!(s.task.summary, "earlier turns, summarised");
}

// A parent woken by several children's answers stores them in one write (not one write of
// its whole task per answer), and its task keeps only stubs of results the conversation holds.
#[tokio::test]
async fn answers_taken_in_one_step_are_stored_in_one_write_and_not_kept_twice() {
    let log = Arc::new(MemoryLog::default());
    let mut s = Session::on_log_with(fan_out(), log.clone(), team());
    s.meta.agent = "triage".into();
    s.say("order A1 is delayed").await;
    let jobs: Vec<String> = s.ports.seen().sent.iter().map(|e| e.id.clone()).collect();
    let before = records_of(&log, "triage").len();
    for (job, answer) in jobs
        .iter()
        .zip(["likes SMS updates", "parcel is in Shanghai"])
    {
        let event = child_answer(&s, job, answer, 100);
        deliver(&mut s, &event);
    }
    s.resume_heard().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    let written = &records_of(&log, "triage")[before..];
    let tool_messages: Vec<usize> = written
        .iter()
        .map(|r| {
            r.messages
                .iter()
                .filter(|m| m.message.role == crate::llm::Role::Tool)
                .count()
        })
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(tool_messages, vec![2], "both answers in one append");
    let turn = s.task.turn.as_ref().unwrap();
    for job in &turn.jobs {
        let kept = job
            .result
            .as_ref()
            .expect("the job is still known as finished");
        assert!(kept.ok);
        assert_eq!(kept.output, serde_json::Value::Null, "{kept:?}");
    }
    assert!(s.answer().unwrap().contains("Shanghai"));
}
