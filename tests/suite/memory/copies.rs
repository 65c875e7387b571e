//! NATS only: memory-extractor copies share each user's memory through the replicated memory
//! log, and learn of each other's writes from a feed of it — so a recall of a user nobody
//! wrote since asks the log's leader nothing, and still sees another copy's write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use hermes::bus::auth::NatsAuth;
use hermes::bus::nats::{MessageTap, NatsBus};
use hermes::bus::Bus;
use hermes::config::Config;
use hermes::memory::{MemoryService, RecallFilter, RecallQuery, Source};
use hermes::store::durability::Durable;

use super::update;

use crate::common::nats_server::NatsServer;

/// A memory-extractor copy: its own sled directory, the deployment's memory log and its feed.
async fn copy(url: &str) -> (MemoryService, NatsBus, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(hermes::store::open(dir.path()).unwrap());
    let bus = NatsBus::connect(url).await.unwrap();
    let cluster = bus.cluster().unwrap();
    let config = Config::load(None).unwrap();
    let service = MemoryService::open(&db, &config.memory, None)
        .unwrap()
        .replicated(&db, cluster.memory_log(), cluster.memory_log_feed())
        .unwrap();
    (service, bus, dir)
}

fn source() -> Source {
    Source {
        session: "s".into(),
        message_id: "m".into(),
        source_time: Utc::now(),
    }
}

/// What `service` recalls of `user` for `text`.
async fn recall(service: &MemoryService, user: &str, text: &str) -> Vec<String> {
    let hits = service
        .recall(RecallQuery {
            user: user.into(),
            text: text.into(),
            filter: RecallFilter::default(),
            limit: 5,
            min_score: 0.0,
            weights: None,
            now: Utc::now(),
        })
        .await
        .unwrap();
    hits.into_iter().map(|h| h.record.content).collect()
}

/// Recall until `check` holds (the other copy's write reaches this one through the feed).
async fn recall_until(
    service: &MemoryService,
    user: &str,
    text: &str,
    check: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = recall(service, user, text).await;
        if check(&got) || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn routed(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, kind: &str) -> u64 {
    after.get(kind).copied().unwrap_or(0) - before.get(kind).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_recall_reads_the_memory_log_only_after_another_copy_wrote_the_user() {
    let server = tokio::task::block_in_place(NatsServer::start);
    let url = server.url();
    let (a, _a_bus, _a_dir) = copy(&url).await;
    let (b, _b_bus, _b_dir) = copy(&url).await;

    b.apply(
        "alice",
        "default",
        &[update("city", "alice lives in Lyon", None)],
        &source(),
    )
    .await
    .unwrap();
    let got = recall_until(&a, "alice", "where does alice live", |got| !got.is_empty()).await;
    assert_eq!(got, ["alice lives in Lyon"], "b's write reached a");

    let tap = MessageTap::start(&url, &NatsAuth::default()).await.unwrap();
    let before = tap.counts().await;
    for _ in 0..20 {
        assert_eq!(
            recall(&a, "alice", "where does alice live").await,
            ["alice lives in Lyon"]
        );
        assert!(recall(&a, "bob", "where does bob live").await.is_empty());
    }
    let after = tap.counts().await;
    assert_eq!(
        routed(&before, &after, "js.api.stream.msg"),
        0,
        "40 recalls of users nobody wrote since read nothing from the log: {after:?}"
    );

    b.forget("alice", "default", None, Some("city"))
        .await
        .unwrap()
        .expect("b forgets the fact it wrote");
    let got = recall_until(&a, "alice", "where does alice live", |got| got.is_empty()).await;
    assert!(got.is_empty(), "b's forget reached a: {got:?}");
}

/// Recall `user` until one recall reads nothing from the log (the feed vouches again).
async fn until_recalls_read_nothing(tap: &MessageTap, service: &MemoryService, user: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let before = tap.counts().await;
        recall(service, user, "anything").await;
        let read = routed(&before, &tap.counts().await, "js.api.stream.msg");
        if read == 0 || Instant::now() > deadline {
            return read;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_feed_broken_by_a_server_restart_stops_vouching_at_once_and_catches_up_again() {
    let mut server = tokio::task::block_in_place(NatsServer::start);
    let url = server.url();
    let (a, _a_bus, _a_dir) = copy(&url).await;
    let (b, _b_bus, _b_dir) = copy(&url).await;
    assert!(recall(&a, "alice", "where does alice live")
        .await
        .is_empty());

    tokio::task::block_in_place(|| server.restart());
    // The first write after the restart, as soon as b is connected again.
    let deadline = Instant::now() + Duration::from_secs(15);
    while let Err(e) = b
        .apply(
            "alice",
            "default",
            &[update("city", "alice lives in Lyon", None)],
            &source(),
        )
        .await
    {
        assert!(
            Instant::now() < deadline,
            "b never wrote after the restart: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written = Instant::now();
    let got = recall_until(&a, "alice", "where does alice live", |got| !got.is_empty()).await;
    assert_eq!(
        got,
        ["alice lives in Lyon"],
        "the write made meanwhile reached a"
    );
    // The disconnection stopped the feed vouching at once, not after missed heartbeats (4 s).
    assert!(
        written.elapsed() < Duration::from_secs(1),
        "a trusted a feed broken by the restart for {:?}",
        written.elapsed()
    );

    let tap = MessageTap::start(&url, &NatsAuth::default()).await.unwrap();
    assert_eq!(
        until_recalls_read_nothing(&tap, &a, "alice").await,
        0,
        "a's feed caught up again after the restart"
    );
}
