//! NATS only: a message to a session that a process running the session router sends is
//! routed by that router in-process, and the session's answer reaches the sender from
//! whichever process owns the session.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use hermes::bus::auth::NatsAuth;
use hermes::bus::nats::{MessageTap, NatsBus};
use hermes::bus::{Handler, Message, Serving, SharedBus};
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

/// Serve a [`Router`] for `hermes.in.>` (queue `session`) on `bus`; the reply subjects of the
/// messages it routes.
async fn serve_router(bus: &SharedBus) -> (Serving, mpsc::UnboundedReceiver<String>) {
    let (passed, reply_subjects) = mpsc::unbounded_channel();
    let serving = bus
        .serve("hermes.in.>", "session", Arc::new(Router(passed)))
        .await
        .unwrap();
    bus.flush().await.unwrap();
    (serving, reply_subjects)
}

/// Send a message to `session` from `sender`, answer it from `owner` (as the session's owner
/// would, to the reply subject the router passed on), and return what `sender` received.
async fn exchange(
    sender: &SharedBus,
    owner: &SharedBus,
    reply_subjects: &mut mpsc::UnboundedReceiver<String>,
    session: &str,
    answer: &'static str,
) -> Bytes {
    let (bus, subject) = (sender.clone(), format!("hermes.in.assistant.{session}"));
    let asking =
        tokio::spawn(async move { bus.request(&subject, "hello".into(), WAIT).await.unwrap() });
    let reply_to = tokio::time::timeout(WAIT, reply_subjects.recv())
        .await
        .unwrap()
        .unwrap();
    owner.publish(&reply_to, answer.into()).await.unwrap();
    asking.await.unwrap()
}

/// Messages of `kind` the server routed between two tap readings.
fn routed(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, kind: &str) -> u64 {
    after.get(kind).copied().unwrap_or(0) - before.get(kind).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_message_to_a_session_is_routed_in_process_and_answered_from_where_the_session_lives(
) {
    let fx = Fixture::nats().await;
    let url = fx.nats_url().unwrap();
    let elsewhere: SharedBus = Arc::new(NatsBus::connect(&url).await.unwrap());
    let tap = MessageTap::start(&url, &NatsAuth::default()).await.unwrap();
    let (_serving, mut reply_subjects) = serve_router(&fx.bus).await;
    let before = tap.counts().await;

    // The session is owned by this process: its answer never leaves the process.
    let got = exchange(
        &fx.bus,
        &fx.bus,
        &mut reply_subjects,
        "here",
        "accepted here",
    )
    .await;
    assert_eq!(got, "accepted here");
    // Owned by another process: it answers over NATS, to this process's reply inbox.
    let got = exchange(
        &fx.bus,
        &elsewhere,
        &mut reply_subjects,
        "there",
        "accepted there",
    )
    .await;
    assert_eq!(got, "accepted there");

    let after = tap.counts().await;
    assert_eq!(
        routed(&before, &after, "hermes.in"),
        0,
        "routed in-process: {after:?}"
    );
    assert_eq!(
        routed(&before, &after, "inbox (replies, pulled messages)"),
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
    let (_serving, mut reply_subjects) = serve_router(&router).await;
    let before = tap.counts().await;

    let got = exchange(&fx.bus, &router, &mut reply_subjects, "s1", "accepted").await;
    assert_eq!(got, "accepted");
    let after = tap.counts().await;
    assert_eq!(routed(&before, &after, "hermes.in"), 1);
}
