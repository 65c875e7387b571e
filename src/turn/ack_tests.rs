//! A user message's acknowledgement in `sync` mode ([`super::ack`]): it shares the turn's
//! flush, leaves before anything else of the turn, and before any call that acts on the world.

use std::time::Duration;

use serde_json::json;

use super::fake::FakePorts;
use super::tests::{call_then_answer, says, tool, Session};
use crate::protocol::ToolEffect;

#[tokio::test]
async fn a_quick_sync_turn_shares_one_flush_with_its_acknowledgement_which_leaves_first() {
    let ports = call_then_answer("add").tool(tool("add"), |_| Ok(json!({"result": 3})));
    let mut s = Session::new(ports);
    // The turn takes well under ACK_FLUSH_WITHIN on its own, but not always on a loaded
    // machine; what is tested is that the answer's flush covers the acknowledgement.
    s.env.ack_flush_within = Duration::from_secs(10);
    let before = s.db.flushes();
    let outcome = s.say("add one and two").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    // The extraction note after the answer is flushed lazily, by a later commit.
    assert_eq!(
        s.db.flushes() - before,
        1,
        "the acknowledgement waited for the answer's flush"
    );
    // A read-only call may run before the acknowledgement; nothing the publisher sees does.
    let out: Vec<String> = s
        .ports
        .seen()
        .out
        .iter()
        .filter(|kind| *kind != "call")
        .cloned()
        .collect();
    assert_eq!(out.first().map(String::as_str), Some("reply"), "{out:?}");
    assert_eq!(out.last().map(String::as_str), Some("answer"), "{out:?}");
    assert!(out.iter().any(|kind| kind == "tool.call"), "{out:?}");
}

#[tokio::test]
async fn a_message_whose_turn_stays_busy_is_acknowledged_within_moments() {
    let ports = FakePorts::new(|_| says("never asked"));
    let mut s = Session::new(ports);
    s.accept("hello").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.ports.seen().replies.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no acknowledgement without a turn step"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(s.db.flushes(), 1, "its own flush, after the wait ran out");
}

#[tokio::test]
async fn a_write_call_waits_until_its_message_is_acknowledged() {
    let mut write = tool("book");
    write.effect = ToolEffect::Write;
    let ports = call_then_answer("book").tool(write, |_| Ok(json!({"booked": true})));
    let mut s = Session::new(ports);
    s.say("book it").await;
    let seen = s.ports.seen();
    let reply = seen.out.iter().position(|kind| kind == "reply").unwrap();
    let call = seen.out.iter().position(|kind| kind == "call").unwrap();
    assert!(reply < call, "{:?}", seen.out);
    assert_eq!(seen.calls.len(), 1);
}
