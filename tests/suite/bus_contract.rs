//! The bus contract: one set of cases, written once against `SharedBus`, run on both backends —
//! the embedded bus (tempdir sled database) and NATS (a real nats-server with JetStream).
//! Test names read `bus_contract::<backend>::<behaviour>`.

mod durable;
mod extraction_outbox;
mod fixture;
mod local_routing;
mod messaging;

use std::time::{Duration, Instant};

use hermes::bus::nats::NatsBus;
use hermes::bus::{BusError, DurableOptions};

use fixture::{open_embedded, WAIT};

/// Instantiate every `module::case` once per backend, as `<backend>::<case>`.
macro_rules! contract {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod embedded {
            use super::fixture::Fixture;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$module::$case(Fixture::embedded().await).await;
                }
            )*
        }
        mod nats {
            use super::fixture::Fixture;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$module::$case(Fixture::nats().await).await;
                }
            )*
        }
    };
}

contract!(
    messaging::publish_reaches_exact_subscriber_only,
    messaging::a_body_published_as_a_value_reaches_value_and_byte_subscribers_alike,
    messaging::star_wildcard_matches_exactly_one_token,
    messaging::gt_wildcard_matches_one_or_more_trailing_tokens,
    messaging::queue_group_delivers_each_message_to_one_member,
    messaging::plain_subscriber_and_queue_group_both_receive,
    messaging::request_gets_the_responders_reply,
    messaging::request_without_responder_fails_with_no_responders,
    messaging::request_to_silent_responder_times_out,
    messaging::oversized_payload_is_rejected,
    messaging::invalid_subjects_are_rejected,
    durable::acked_durable_message_is_never_redelivered,
    durable::an_unconfirmed_ack_settles_the_message_as_well,
    durable::unacked_durable_message_is_redelivered_after_ack_wait,
    durable::in_progress_postpones_redelivery,
    durable::messages_pulled_in_a_batch_that_waited_are_kept_by_a_progress_ack,
    durable::nak_redelivers_now_or_after_the_delay,
    durable::message_is_not_delivered_more_than_max_deliver_times,
    durable::two_consumers_share_the_work,
    durable::messages_published_before_any_consumer_are_delivered_in_order,
    durable::unacked_messages_survive_a_restart_and_acked_ones_stay_gone,
    durable::every_method_works_from_a_current_thread_runtime,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_connect_to_a_closed_port_fails_fast_with_connect_error() {
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let result = NatsBus::connect(&format!("nats://127.0.0.1:{port}")).await;
    assert!(matches!(result, Err(BusError::Connect { .. })));
    assert!(started.elapsed() < Duration::from_secs(6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_counts_the_messages_this_process_exchanged_and_embedded_counts_none() {
    let fx = fixture::Fixture::nats().await;
    let mut sub = fx.bus.subscribe("count.me").await.unwrap();
    fx.bus.flush().await.unwrap();
    let before = fx
        .bus
        .traffic()
        .expect("a networked bus counts its messages");
    for _ in 0..3 {
        fx.bus.publish("count.me", "x".into()).await.unwrap();
    }
    for _ in 0..3 {
        tokio::time::timeout(WAIT, sub.next())
            .await
            .unwrap()
            .unwrap();
    }
    let after = fx.bus.traffic().unwrap();
    assert_eq!(after.sent - before.sent, 3);
    assert_eq!(after.received - before.received, 3);

    let dir = tempfile::tempdir().unwrap();
    assert!(open_embedded(&dir).await.traffic().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_embedded_bus_ends_its_subscriptions_and_consumers() {
    let dir = tempfile::tempdir().unwrap();
    let bus = open_embedded(&dir).await;
    let mut sub = bus.subscribe("end.>").await.unwrap();
    let mut consumer = bus
        .durable_consume("end.q", DurableOptions::default())
        .await
        .unwrap();
    drop(bus);
    assert!(tokio::time::timeout(WAIT, sub.next())
        .await
        .unwrap()
        .is_none());
    assert!(tokio::time::timeout(WAIT, consumer.next())
        .await
        .unwrap()
        .is_none());
}

/// On NATS a request that met silence is sent once more. A plain repeat waits for its copy as
/// long as for the first; a deduplicated write call's repeat waits as long as it is told, since
/// the executor holds the copy until the first execution's outcome is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_repeat_after_silence_waits_for_its_copy_as_long_as_the_caller_said() {
    use hermes::bus::retry::{self, Repeat};
    use hermes::bus::rpc::RpcError;
    use hermes::protocol::envelope::Envelope;
    use hermes::protocol::request::ToolsListRequest;
    use hermes::protocol::subjects::TOOLS_LIST;
    use hermes::protocol::tool::ToolsCatalog;

    let fx = fixture::Fixture::nats().await;
    // Drops the first request of each pair; answers the second after `slow`.
    let slow = Duration::from_millis(900);
    let mut sub = fx.bus.subscribe(TOOLS_LIST).await.unwrap();
    let bus = fx.bus.clone();
    tokio::spawn(async move {
        let mut seen = 0_u32;
        while let Some(message) = sub.next().await {
            seen += 1;
            if seen % 2 == 1 {
                continue;
            }
            let request =
                Envelope::<ToolsListRequest>::decode_request(&message.payload, 1 << 20).unwrap();
            let reply = request.reply(ToolsCatalog::default()).encode().unwrap();
            let bus = bus.clone();
            tokio::spawn(async move {
                tokio::time::sleep(slow).await;
                hermes::bus::respond(bus.as_ref(), &message, reply)
                    .await
                    .unwrap();
            });
        }
    });
    let first_wait = Duration::from_millis(400);
    let ask = |repeat| {
        retry::request(
            fx.bus.as_ref(),
            Envelope::request(ToolsListRequest),
            first_wait,
            repeat,
        )
    };
    let plain = ask(Repeat::OnSilence).await;
    assert!(
        matches!(plain, Err(RpcError::Bus(BusError::Timeout { .. }))),
        "{plain:?}"
    );
    tokio::time::sleep(slow).await; // the late answer to the plain repeat's copy goes by
    let started = Instant::now();
    let held = ask(Repeat::OnSilenceWaiting(Duration::from_secs(5))).await;
    assert!(held.is_ok(), "{held:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// A create whose answer was lost in a failover finds what its own write stored: a key that
/// holds exactly the value created counts as created, anything else as taken. (The client's
/// create reads the key when the write's answer does not come, and used to report the write's
/// own value as taken, so a write call's key reservation waited for an execution that was
/// itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_create_that_finds_its_own_value_counts_as_created() {
    let fx = fixture::Fixture::nats().await;
    let bucket = fx
        .bus
        .cluster()
        .expect("NATS has a cluster")
        .bucket("contract_kv_own", None);
    bucket.put("k", "mine".into()).await.unwrap();
    assert!(
        bucket.create("k", "mine".into()).await.unwrap(),
        "the key holds exactly what this create writes: its own lost attempt"
    );
    assert!(
        !bucket.create("k", "theirs".into()).await.unwrap(),
        "another value: taken"
    );
    assert_eq!(
        bucket.get("k").await.unwrap().as_deref(),
        Some(&b"mine"[..])
    );
}

/// A shared bucket reads what was last written, and a deleted key reads as empty (the
/// marker a delete leaves is not a value) until it is created again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_shared_bucket_reads_the_last_write_and_nothing_after_a_delete() {
    let fx = fixture::Fixture::nats().await;
    let bucket = fx
        .bus
        .cluster()
        .expect("NATS has a cluster")
        .bucket("contract_kv", None);
    assert_eq!(bucket.get("k").await.unwrap(), None);
    assert!(bucket.create("k", "one".into()).await.unwrap());
    assert!(
        !bucket.create("k", "two".into()).await.unwrap(),
        "create-only"
    );
    bucket.put("k", "three".into()).await.unwrap();
    assert_eq!(
        bucket.get("k").await.unwrap().as_deref(),
        Some(&b"three"[..])
    );
    bucket.delete("k").await.unwrap();
    assert_eq!(bucket.get("k").await.unwrap(), None);
    assert!(bucket.create("k", "four".into()).await.unwrap());
    assert_eq!(
        bucket.get("k").await.unwrap().as_deref(),
        Some(&b"four"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_the_session_inbox_holds_an_item_until_it_is_acked() {
    let fx = fixture::Fixture::nats().await;
    let cluster = fx.bus.cluster().expect("NATS has a cluster");
    cluster
        .enqueue("assistant", "s1", "hello".into(), None, "m-1")
        .await
        .unwrap();
    let mut items = cluster.own_partitions().await.unwrap();
    let item = tokio::time::timeout(WAIT, items.next())
        .await
        .expect("the item is delivered")
        .expect("a partition stream")
        .unwrap();
    let seq = item.seq.expect("NATS says where the item sits");
    assert!(cluster.inbox_holds(seq).await.unwrap(), "unacked: held");
    item.acker.ack().await.unwrap();
    assert!(!cluster.inbox_holds(seq).await.unwrap(), "acked: gone");
    assert!(
        !cluster.inbox_holds(seq + 1_000).await.unwrap(),
        "never stored"
    );
}
