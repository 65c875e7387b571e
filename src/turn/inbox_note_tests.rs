//! An answer given while its message's inbox item is held: the item's ack, which follows the
//! queueing of the extraction, stands for the extraction note, so the answer's write is the
//! turn's last. A restart asks the inbox whether the item is still there.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fake::FakePorts;
use super::replicated_tests::records;
use super::tests::{says, Session};
use crate::store::tasks::TurnPhase;
use crate::store::test_log::MemoryLog;

/// The inbox item the router handed over with the message.
const ITEM: u64 = 7;

/// A session on the replicated log whose inbox answers `holding` when asked about an item.
fn session(log: &Arc<MemoryLog>, holding: Option<bool>) -> Session {
    let mut ports = FakePorts::new(|_| says("noted"));
    ports.inbox_holding = holding;
    Session::on_log(ports, log.clone())
}

/// Say `text` with its inbox item held for the turn, as the session actor does.
async fn say_from_the_inbox(s: &mut Session, text: &str) -> super::TurnOutcome {
    s.env.inbox_item.store(ITEM, Ordering::Release);
    let outcome = s.say(text).await;
    s.env.inbox_item.store(0, Ordering::Release);
    outcome
}

/// The session as a restarted process finds it in the log.
pub(super) fn restarted(s: &mut Session, log: &MemoryLog) {
    let last = records(log).pop().expect("a record");
    s.task = last.task;
}

#[tokio::test]
async fn an_answer_given_while_its_inbox_item_is_held_writes_no_extraction_note() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, None);
    let outcome = say_from_the_inbox(&mut s, "my budget is 5000").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(s.ports.seen().extractions.len(), 1);
    let written = records(&log);
    assert_eq!(written.len(), 1, "the message and its answer, and no note");
    let turn = written[0].task.turn.clone().expect("a turn");
    assert_eq!(turn.phase, TurnPhase::Answered);
    assert!(!turn.extraction_queued);
    assert_eq!(turn.inbox_item, Some(ITEM));
    // This process knows it queued it.
    assert!(s.task.extraction_unnoted().is_none());
}

#[tokio::test]
async fn a_restart_after_the_item_was_acked_neither_queues_nor_answers_again() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, Some(false));
    say_from_the_inbox(&mut s, "my budget is 5000").await;
    restarted(&mut s, &log);
    assert!(
        s.task.pending_extraction().is_none(),
        "the start-up scan leaves it to the inbox"
    );
    let (events, replies) = {
        let seen = s.ports.seen();
        (seen.events.len(), seen.replies.len())
    };
    super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
        .await
        .unwrap();
    let seen = s.ports.seen();
    assert_eq!(seen.inbox_asked, [ITEM]);
    assert_eq!(seen.extractions.len(), 1, "queued once, before the ack");
    assert_eq!(seen.events.len(), events, "the answer is not sent again");
    assert_eq!(seen.replies.len(), replies);
    assert_eq!(records(&log).len(), 1, "nothing written");
    assert!(s.task.extraction_unnoted().is_none());
}

#[tokio::test]
async fn a_restart_while_the_inbox_holds_the_item_queues_and_answers_again_then_notes_it() {
    for holding in [Some(true), None] {
        let log = Arc::new(MemoryLog::default());
        let mut s = session(&log, holding);
        say_from_the_inbox(&mut s, "my budget is 5000").await;
        restarted(&mut s, &log);
        let events = s.ports.seen().events.len();
        super::queue_extraction(&s.env, &mut s.meta, &mut s.task, &s.log)
            .await
            .unwrap();
        let seen = s.ports.seen();
        assert_eq!(
            seen.extractions.len(),
            2,
            "the crash may have come before the queueing ({holding:?})"
        );
        assert!(
            seen.events[events..]
                .iter()
                .any(|e| e.type_name() == "answer"),
            "the crash may have come before the answer left ({holding:?})"
        );
        let written = records(&log);
        assert_eq!(written.len(), 2, "the note ({holding:?})");
        let turn = written[1].task.turn.clone().expect("a turn");
        assert!(turn.extraction_queued);
        assert_eq!(turn.inbox_item, None);
    }
}

#[tokio::test]
async fn an_extraction_the_queue_refused_is_noted_as_pending_whatever_the_inbox_item() {
    let log = Arc::new(MemoryLog::default());
    let mut ports = FakePorts::new(|_| says("noted"));
    ports.refuse_extractions = true;
    let mut s = Session::on_log(ports, log.clone());
    say_from_the_inbox(&mut s, "my budget is 5000").await;
    let written = records(&log);
    assert_eq!(written.len(), 2, "the answer, then the note");
    let turn = written[1].task.turn.clone().expect("a turn");
    assert!(!turn.extraction_queued);
    assert_eq!(turn.inbox_item, None, "an acked item says nothing of it");
    restarted(&mut s, &log);
    assert!(
        s.task.pending_extraction().is_some(),
        "the start-up scan finds it"
    );
}

#[tokio::test]
async fn a_turn_with_no_inbox_item_in_hand_notes_its_extraction_as_before() {
    let log = Arc::new(MemoryLog::default());
    let mut s = session(&log, None);
    s.say("my budget is 5000").await;
    let written = records(&log);
    assert_eq!(written.len(), 2, "the answer, then the note");
    let turn = written[1].task.turn.clone().expect("a turn");
    assert!(turn.extraction_queued);
    assert_eq!(turn.inbox_item, None);
}
