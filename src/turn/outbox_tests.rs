//! On NATS an answered turn's extraction job rides on the answer's own append to the session
//! log when its inbox item is in hand ([`super::outbox`]): one write for the message, the
//! answer and the job, nothing queued apart, no note. A restart that finds the item still in
//! the inbox sends the answer again but never queues the job a second time.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fake::FakePorts;
use super::inbox_note_tests::restarted;
use super::replicated_tests::records;
use super::tests::{says, Session};
use crate::protocol::envelope::Envelope;
use crate::protocol::ExtractJob;
use crate::store::replica::LogRecord;
use crate::store::tasks::TurnPhase;
use crate::store::test_log::MemoryLog;

const ITEM: u64 = 11;

/// A session on the replicated log whose extractors read jobs from it; its inbox answers
/// `holding` when asked about an item.
fn session(log: &Arc<MemoryLog>, holding: Option<bool>) -> Session {
    let mut ports = FakePorts::new(|_| says("noted"));
    ports.extraction_on_log = true;
    ports.inbox_holding = holding;
    Session::on_log(ports, log.clone())
}

async fn say_from_the_inbox(s: &mut Session, text: &str) {
    s.env.inbox_item.store(ITEM, Ordering::Release);
    let outcome = s.say(text).await;
    s.env.inbox_item.store(0, Ordering::Release);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
}

/// The job a record carries, decoded.
fn carried(record: &LogRecord) -> Option<ExtractJob> {
    let raw = record.extract.as_ref()?;
    let envelope: Envelope<ExtractJob> = serde_json::from_str(raw.get()).unwrap();
    Some(envelope.body)
}

#[tokio::test]
async fn an_answer_with_its_inbox_item_in_hand_carries_its_extraction_job_in_its_one_append() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, None);
    say_from_the_inbox(&mut s, "my budget is 5000").await;
    assert!(
        s.ports.seen().extractions.is_empty(),
        "nothing queued apart"
    );
    let written = records(&log);
    assert_eq!(
        written.len(),
        1,
        "the message, the answer and the job: one append"
    );
    let turn = written[0].task.turn.clone().expect("a turn");
    assert_eq!(turn.phase, TurnPhase::Answered);
    assert!(turn.extraction_queued, "queued by that very append");
    assert_eq!(turn.inbox_item, Some(ITEM));
    let job = carried(&written[0]).expect("the answer's record carries the job");
    assert_eq!(job.turn_id, turn.turn_id);
    assert_eq!(job.user, "u1");
    let texts: Vec<&str> = job.transcript.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["my budget is 5000", "noted"]);
    assert!(s.task.extraction_unnoted().is_none(), "this copy knows");
}

#[tokio::test]
async fn a_restart_while_the_inbox_holds_the_item_sends_the_answer_again_but_never_requeues_the_job(
) {
    for holding in [Some(true), None] {
        let log = Arc::new(MemoryLog::default());
        let mut s = session(&log, holding);
        say_from_the_inbox(&mut s, "my budget is 5000").await;
        restarted(&mut s, &log);
        assert!(
            s.task.pending_extraction().is_none(),
            "nothing for the start-up scan"
        );
        assert!(s.task.extraction_unnoted().is_some(), "the inbox decides");
        let events = s.ports.seen().events.len();
        super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
            .await
            .unwrap();
        let seen = s.ports.seen();
        assert_eq!(seen.inbox_asked, [ITEM]);
        assert!(
            seen.events[events..]
                .iter()
                .any(|e| e.type_name() == "answer"),
            "the owner may have died before the answer left ({holding:?})"
        );
        assert!(
            seen.extractions.is_empty(),
            "the log queued it ({holding:?})"
        );
        let written = records(&log);
        assert_eq!(written.len(), 2, "the note ({holding:?})");
        let turn = written[1].task.turn.clone().expect("a turn");
        assert!(turn.extraction_queued);
        assert_eq!(turn.inbox_item, None);
        assert!(
            carried(&written[1]).is_none(),
            "a note carries no second job"
        );
    }
}

#[tokio::test]
async fn a_restart_after_the_item_was_acked_sends_and_writes_nothing() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, Some(false));
    say_from_the_inbox(&mut s, "my budget is 5000").await;
    restarted(&mut s, &log);
    let (events, replies) = {
        let seen = s.ports.seen();
        (seen.events.len(), seen.replies.len())
    };
    super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
        .await
        .unwrap();
    let seen = s.ports.seen();
    assert_eq!((seen.events.len(), seen.replies.len()), (events, replies));
    assert!(seen.extractions.is_empty());
    assert_eq!(records(&log).len(), 1);
    assert!(s.task.extraction_unnoted().is_none());
}

#[tokio::test]
async fn a_turn_with_no_inbox_item_in_hand_queues_its_job_apart_and_notes_it() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, None);
    s.say("my budget is 5000").await;
    assert_eq!(s.ports.seen().extractions.len(), 1);
    let written = records(&log);
    assert_eq!(written.len(), 2, "the answer, then the note");
    assert!(written.iter().all(|r| carried(r).is_none()));
    assert!(written[1].task.turn.clone().unwrap().extraction_queued);
}

#[tokio::test]
async fn without_a_replicated_log_the_job_is_queued_as_ever() {
    let mut ports = FakePorts::new(|_| says("noted"));
    ports.extraction_on_log = true;
    let mut s = Session::new(ports);
    s.env.inbox_item.store(ITEM, Ordering::Release);
    s.say("my budget is 5000").await;
    assert_eq!(s.ports.seen().extractions.len(), 1);
}
