//! NATS only: a message to a session that a process running the session router sends is
//! routed by that router in-process, and the session's answer reaches the sender from
//! whichever process owns the session.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use hermes::bus::auth::NatsAuth;
use hermes::bus::nats::{MessageTap, NatsBus};
use hermes::bus::{Handler, Message, SharedBus};
use tokio::sync::mpsc;

use super::fixture::{Fixture, WAIT};

/// A router that only passes each message's reply subject on to whoever answers for the
/// session (as the session router stores it in the partition inbox for the session's owner).
struct Router(mpsc::UnboundedSender<String>);

#[async_trait]
impl Handler for Router {
    async fn handle(&self, message: Message) -> Option<Bytes> {
        let _ = self
            .0
            .send(message.reply.expect("a request names its reply subject"));
        None
    }
}

async fn ask(bus: &SharedBus, session: &str) -> tokio::task::JoinHandle<Bytes> {
    let (bus, subject) = (bus.clone(), format!("hermes.in.assistant.{session}"));
    tokio::spawn(async move { bus.request(&subject, "hello".into(), WAIT).await.unwrap() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_message_to_a_session_is_routed_in_process_and_answered_from_where_the_session_lives(
) {
    let fx = Fixture::nats().await;
    let url = fx.nats_url().unwrap();
    let elsewhere: SharedBus = Arc::new(NatsBus::connect(&url).await.unwrap());
    let tap = MessageTap::start(&url, &NatsAuth::default()).await.unwrap();
    let (passed, mut reply_subjects) = mpsc::unbounded_channel();
    let _serving = fx
        .bus
        .serve("hermes.in.>", "session", Arc::new(Router(passed)))
        .await
        .unwrap();
    fx.bus.flush().await.unwrap();
    let before = tap.counts().await;

    // The session is owned by this process: its answer never leaves the process.
    let asking = ask(&fx.bus, "here").await;
    let reply_to = tokio::time::timeout(WAIT, reply_subjects.recv())
        .await
        .unwrap()
        .unwrap();
    fx.bus
        .publish(&reply_to, "accepted here".into())
        .await
        .unwrap();
    assert_eq!(asking.await.unwrap(), "accepted here");

    // Owned by another process: it answers over NATS, to this process's reply inbox.
    let asking = ask(&fx.bus, "there").await;
    let reply_to = tokio::time::timeout(WAIT, reply_subjects.recv())
        .await
        .unwrap()
        .unwrap();
    elsewhere
        .publish(&reply_to, "accepted there".into())
        .await
        .unwrap();
    assert_eq!(asking.await.unwrap(), "accepted there");

    let after = tap.counts().await;
    let routed =
        |kind: &str| after.get(kind).copied().unwrap_or(0) - before.get(kind).copied().unwrap_or(0);
    assert_eq!(routed("hermes.in"), 0, "routed in-process: {after:?}");
    assert_eq!(
        routed("inbox (replies, pulled messages)"),
        1,
        "only the other process's answer crossed the server: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_process_without_the_session_router_sends_its_messages_over_nats() {
    let fx = Fixture::nats().await;
    let url = fx.nats_url().unwrap();
    let router: SharedBus = Arc::new(NatsBus::connect(&url).await.unwrap());
    let tap = MessageTap::start(&url, &NatsAuth::default()).await.unwrap();
    let (passed, mut reply_subjects) = mpsc::unbounded_channel();
    let _serving = router
        .serve("hermes.in.>", "session", Arc::new(Router(passed)))
        .await
        .unwrap();
    router.flush().await.unwrap();
    let before = tap.counts().await;

    let asking = ask(&fx.bus, "s1").await;
    let reply_to = tokio::time::timeout(WAIT, reply_subjects.recv())
        .await
        .unwrap()
        .unwrap();
    router.publish(&reply_to, "accepted".into()).await.unwrap();
    assert_eq!(asking.await.unwrap(), "accepted");
    let after = tap.counts().await;
    assert_eq!(
        after.get("hermes.in").copied().unwrap_or(0)
            - before.get("hermes.in").copied().unwrap_or(0),
        1
    );
}
