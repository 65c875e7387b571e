//! A session actor that stayed alive while its session was served elsewhere (on a cluster the
//! partition moved away and back): its state is older than the session's log. When the inbox
//! hands it a message another owner accepted and then died with, the copy must resume that
//! turn — not refuse the message as busy, nor refuse it as unservable on its item's last
//! chance — because refusing settles the item and nobody would finish the turn.
//!
//! The other owner is the turn harness writing to the same in-memory log; the copy is a real
//! [`SessionActor`] under a real router.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use async_trait::async_trait;
use serde_json::json;

use super::test_actor::start_actor;
use super::{Deliver, SessionActor};
use crate::actors::settle::Settle;
use crate::bus::{Acker, BusError};
use crate::config::Config;
use crate::protocol::{PlanRequest, ToolRisk, TurnEvent, UserMessage};
use crate::store::tasks::TurnPhase;
use crate::store::test_log::MemoryLog;
use crate::turn::fake::FakePorts;
use crate::turn::inbound::Inbound;
use crate::turn::tests::{calls, last_is_user, says, tool, Session};

/// What the session did with its inbox item.
#[derive(Clone, Default)]
struct Item(Arc<Mutex<Vec<&'static str>>>);

impl Item {
    fn settled(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().clone()
    }
}

#[async_trait]
impl Acker for Item {
    async fn ack(&self) -> Result<(), BusError> {
        self.0.lock().unwrap().push("ack");
        Ok(())
    }

    async fn nak(&self, _: Option<Duration>) -> Result<(), BusError> {
        self.0.lock().unwrap().push("nak");
        Ok(())
    }

    async fn in_progress(&self) -> Result<(), BusError> {
        Ok(())
    }
}

/// A shop whose `cancel_order` needs the user's approval; anything else is answered "noted".
fn shop() -> FakePorts {
    let mut risky = tool("cancel_order");
    risky.risk = ToolRisk::High;
    FakePorts::new(|r: &PlanRequest| {
        let asks_to_cancel = r
            .messages
            .last()
            .is_some_and(|m| m.content.contains("cancel"));
        if last_is_user(r) && asks_to_cancel {
            calls("cancel_order", json!({"order": "A1"}))
        } else {
            says("noted")
        }
    })
    .tool(risky, |_| Ok(json!({"cancelled": true})))
}

/// A copy of the session that appends new messages on arrival, or (`first_write`) with its
/// turn's first write.
fn config(first_write: bool) -> Config {
    let mut config = Config::embedded().unwrap();
    config.cluster.first_write_within_ms = if first_write { 50 } else { 0 };
    config
}

/// Hand `message` to `actor` as its inbox's `delivery`th delivery of the item, stored `age`
/// ago; wait until the item is settled one way or the other.
async fn redeliver(
    actor: &Addr<SessionActor>,
    message: &Inbound<UserMessage>,
    age: Duration,
) -> Vec<&'static str> {
    let item = Item::default();
    let settle = Settle::new(Arc::new(item.clone()), Duration::from_secs(30), 2)
        .stored_ago(age)
        .at(Some(9));
    actor.do_send(Deliver {
        inbound: message.clone(),
        settle: Some(settle),
        redelivered: true,
        traceparent: None,
    });
    for _ in 0..200 {
        if !item.settled().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    item.settled()
}

/// The kinds of the replies `copy` sent to `message`'s publisher.
fn replies(copy: &Session, message: &Inbound<UserMessage>) -> Vec<String> {
    let to = message.reply.clone().unwrap();
    copy.ports
        .seen()
        .replies
        .iter()
        .filter(|(inbox, _)| *inbox == to)
        .map(|(_, payload)| {
            let reply: serde_json::Value = serde_json::from_slice(payload).unwrap();
            format!("{}: {}", reply["kind"], reply["body"])
        })
        .collect()
}

fn answered(copy: &Session) -> bool {
    copy.ports
        .seen()
        .events
        .iter()
        .any(|e| matches!(e, TurnEvent::Answer { .. }))
}

/// The copy acknowledged `message` again (only `accepted` replies, at least one) and ran the
/// turn it had started to its answer, instead of refusing it; `case` names the run.
fn resumed_not_refused(copy: &Session, message: &Inbound<UserMessage>, case: &str) {
    let replies = replies(copy, message);
    assert!(
        replies.iter().all(|r| r.starts_with("\"accepted\"")) && !replies.is_empty(),
        "{case}: acknowledged again, not refused: {replies:?}"
    );
    assert!(answered(copy), "{case}: the copy ran the accepted turn");
}

#[actix_rt::test]
async fn a_stale_copy_that_would_refuse_a_message_as_busy_resumes_the_turn_another_owner_accepted()
{
    let log = Arc::new(MemoryLog::default());
    let mut owner = Session::on_log_with(shop(), log.clone(), config(false));
    owner.say("cancel my order").await;
    assert_eq!(owner.phase(), TurnPhase::WaitingUser);

    // The copy reads the session while its turn waits for the user's decision…
    let copy = Session::on_log_with(shop(), log.clone(), config(true));
    let (actor, _bus) = start_actor(&copy).await;
    // …then the session is served elsewhere: the decision, the answer, and a new message
    // whose owner died before running its turn.
    assert!(owner.decide(true).await);
    owner.resume().await;
    assert_eq!(owner.phase(), TurnPhase::Answered);
    let message = owner.message("and my address is Elm Street 5");
    owner.accept_message(&message).await;

    let settled = redeliver(&actor, &message, Duration::from_secs(1)).await;
    assert_eq!(settled, ["ack"], "settled once the turn is done");
    resumed_not_refused(&copy, &message, "busy");
}

/// A copy whose append of the message is fenced (it is behind the log) on the item's last
/// chance: with the message appended on arrival (fenced when accepted), and with it waiting
/// for the turn's first write (fenced in the turn).
#[actix_rt::test]
async fn a_stale_copy_fenced_on_a_messages_last_chance_reads_the_session_again_and_resumes_its_turn(
) {
    for first_write in [false, true] {
        let log = Arc::new(MemoryLog::default());
        let mut owner = Session::on_log_with(shop(), log.clone(), config(false));
        owner.say("hello").await;
        let copy = Session::on_log_with(shop(), log.clone(), config(first_write));
        let (actor, _bus) = start_actor(&copy).await;
        // Another owner accepted the message long ago, ran its turn for a while, and died.
        let message = owner.message("remember that I like tea");
        owner.accept_message(&message).await;

        let settled = redeliver(&actor, &message, Duration::from_secs(20)).await;
        let case = format!("first_write {first_write}");
        assert_eq!(settled, ["ack"], "{case}");
        resumed_not_refused(&copy, &message, &case);
    }
}
