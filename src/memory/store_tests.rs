//! Tests of [`super::MemoryStore`] against a real sled database in a temporary directory.

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;
use crate::memory::record::MemoryKind;

fn open_temp() -> (tempfile::TempDir, MemoryStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    (dir, MemoryStore::open(&db).unwrap())
}

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn source(minutes: i64) -> Source {
    Source {
        session: "sess-1".into(),
        message_id: format!("msg-{minutes}"),
        source_time: at(minutes),
    }
}

fn upd(op: UpdateOp, kind: MemoryKind, key: &str, content: &str) -> MemoryUpdate {
    MemoryUpdate {
        op,
        kind,
        key: key.into(),
        content: content.into(),
        importance: 0.5,
        expiry_days: None,
        topics: Vec::new(),
    }
}

fn add(key: &str, content: &str) -> MemoryUpdate {
    upd(UpdateOp::Add, MemoryKind::Fact, key, content)
}

async fn apply_one(
    store: &MemoryStore,
    user: &str,
    u: MemoryUpdate,
    minutes: i64,
) -> AppliedUpdate {
    let mut out = store
        .apply(user, "default", &[u], &source(minutes))
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

const SHOPPING_QUERY: &str =
    "帮我查一下我去年双十一买的耳机订单到哪了，顺便看看这个牌子的最新款有没有适合我预算的";

#[tokio::test]
async fn recall_finds_chinese_records_sharing_bigrams_with_a_chinese_query() {
    let (_dir, store) = open_temp();
    let updates = [
        upd(
            UpdateOp::Add,
            MemoryKind::Constraint,
            "budget",
            "用户的预算是5000元",
        ),
        upd(
            UpdateOp::Add,
            MemoryKind::Event,
            "last_headphone_purchase",
            "用户去年双十一买了索尼(Sony)耳机",
        ),
        upd(
            UpdateOp::Add,
            MemoryKind::Preference,
            "home_city",
            "用户住在杭州西湖区",
        ),
    ];
    store
        .apply("alice", "default", &updates, &source(0))
        .await
        .unwrap();
    let hits = store.recall("alice", None, SHOPPING_QUERY, 5, 0.0).unwrap();
    let keys: Vec<&str> = hits.iter().map(|h| h.record.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{hits:#?}");
    assert_eq!(
        keys[0], "last_headphone_purchase",
        "more shared bigrams rank first"
    );
    assert_eq!(keys[1], "budget");
}

#[tokio::test]
async fn recall_prefers_newer_fact_on_conflict() {
    let (_dir, store) = open_temp();
    apply_one(&store, "alice", add("budget", "用户的预算是5000元"), 0).await;
    let second = apply_one(&store, "alice", add("budget", "用户的预算是8000元"), 10).await;
    assert_eq!(second.op, AppliedOp::Updated);
    let hits = store
        .recall("alice", None, "我的预算是多少", 5, 0.0)
        .unwrap();
    assert_eq!(hits.len(), 1, "one slot, one record: {hits:#?}");
    assert_eq!(hits[0].record.content, "用户的预算是8000元");
    assert_eq!(hits[0].record.history, ["用户的预算是5000元"]);
}

#[test]
fn recall_ranks_newer_of_two_conflicting_records_first() {
    let (_dir, store) = open_temp();
    let now = at(0) + Duration::days(60);
    let old = add("budget", "用户的预算是5000元");
    let new = add("budget_update", "用户的预算是8000元");
    store
        .apply_at("alice", "d", &[old], &source(0), at(0))
        .unwrap();
    store
        .apply_at("alice", "d", &[new], &source(1), now)
        .unwrap();
    let hits = store.recall_at("alice", None, "预算", 5, 0.0, now).unwrap();
    assert_eq!(
        hits.len(),
        2,
        "different slots, not near-duplicates: {hits:#?}"
    );
    assert_eq!(hits[0].record.content, "用户的预算是8000元");
    assert!(hits[0].score > hits[1].score);
}

#[tokio::test]
async fn late_old_write_does_not_overwrite_newer_fact() {
    let (_dir, store) = open_temp();
    apply_one(&store, "alice", add("budget", "budget is 8000"), 10).await;
    let late = apply_one(&store, "alice", add("budget", "budget is 5000"), 0).await;
    assert_eq!(late.op, AppliedOp::IgnoredStale, "{}", late.reason);
    let records = store.list("alice").unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].content, "budget is 8000");
    assert_eq!(records[0].version, 1);
    assert!(records[0].history.is_empty());
    assert_eq!(late.record.as_ref(), Some(&records[0]));
}

#[tokio::test]
async fn update_keeps_history_and_bumps_version_and_confidence() {
    let (_dir, store) = open_temp();
    let first = apply_one(&store, "alice", add("phone", "uses an iPhone 13"), 0).await;
    let mut u = add("phone", "uses an iPhone 16");
    u.op = UpdateOp::Update;
    let second = apply_one(&store, "alice", u, 5).await;
    let third = apply_one(&store, "alice", add("phone", "uses a Pixel 9"), 6).await;
    let (first, second, third) = (
        first.record.unwrap(),
        second.record.unwrap(),
        third.record.unwrap(),
    );
    assert_eq!(first.version, 1);
    assert_eq!(third.id, first.id);
    assert_eq!(second.version, 2);
    assert_eq!(third.version, 3);
    assert!((second.confidence - 0.7).abs() < 1e-6 && (third.confidence - 0.8).abs() < 1e-6);
    assert_eq!(third.history, ["uses an iPhone 13", "uses an iPhone 16"]);
    assert_eq!(third.source.message_id, "msg-6");
    assert_eq!(store.get("alice", &first.id).unwrap(), Some(third));
}

#[tokio::test]
async fn near_duplicate_content_under_another_key_merges() {
    let (_dir, store) = open_temp();
    let a = apply_one(
        &store,
        "alice",
        add("diet", "user is vegetarian and avoids meat and fish"),
        0,
    )
    .await;
    let b = apply_one(
        &store,
        "alice",
        add(
            "food_preference",
            "User is vegetarian; avoids meat and fish.",
        ),
        1,
    )
    .await;
    assert_eq!(b.op, AppliedOp::Updated, "{}", b.reason);
    let b = b.record.unwrap();
    assert_eq!(b.id, a.record.unwrap().id);
    assert_eq!(b.key, "diet", "the merged record keeps its slot");
    let mut other_kind = add("likes_fish", "user is vegetarian and avoids meat and fish");
    other_kind.kind = MemoryKind::Preference;
    assert_eq!(
        apply_one(&store, "alice", other_kind, 2).await.op,
        AppliedOp::Added
    );
    assert_eq!(store.list("alice").unwrap().len(), 2);
}

#[tokio::test]
async fn delete_removes_record_and_slot_unless_stale() {
    let (_dir, store) = open_temp();
    apply_one(&store, "alice", add("trip", "trip to Tokyo in May"), 10).await;
    let del = |m| (upd(UpdateOp::Delete, MemoryKind::Event, "trip", ""), m);
    let (u, m) = del(5);
    assert_eq!(
        apply_one(&store, "alice", u, m).await.op,
        AppliedOp::IgnoredStale
    );
    assert_eq!(store.list("alice").unwrap().len(), 1);
    let (u, m) = del(20);
    let gone = apply_one(&store, "alice", u, m).await;
    assert_eq!(gone.op, AppliedOp::Deleted);
    assert!(store.list("alice").unwrap().is_empty());
    let (u, m) = del(30);
    assert_eq!(apply_one(&store, "alice", u, m).await.op, AppliedOp::Noop);
    let again = apply_one(&store, "alice", add("trip", "trip to Osaka"), 40).await;
    assert_eq!(
        again.op,
        AppliedOp::Added,
        "the freed slot takes a new record"
    );
    assert_ne!(again.record.unwrap().id, gone.record.unwrap().id);
}

#[tokio::test]
async fn noop_changes_nothing() {
    let (_dir, store) = open_temp();
    let out = apply_one(
        &store,
        "alice",
        upd(UpdateOp::Noop, MemoryKind::Fact, "", ""),
        0,
    )
    .await;
    assert_eq!(out.op, AppliedOp::Noop);
    assert!(out.record.is_none());
    assert!(store.list("alice").unwrap().is_empty());
}

#[tokio::test]
async fn user_b_never_sees_user_a_records_even_for_identical_query() {
    let (_dir, store) = open_temp();
    let a = apply_one(&store, "alice", add("budget", "用户的预算是5000元"), 0).await;
    let a_id = a.record.unwrap().id;
    apply_one(&store, "bob", add("city", "lives in Paris"), 0).await;
    assert_eq!(
        store.recall("alice", None, "预算", 5, 0.0).unwrap().len(),
        1
    );
    assert!(store
        .recall("bob", None, "预算", 5, 0.0)
        .unwrap()
        .is_empty());
    assert!(store
        .recall("bob", None, "用户的预算是5000元", 5, 0.0)
        .unwrap()
        .is_empty());
    // A user whose name is a prefix of another's is still a different user.
    assert!(store
        .recall("alic", None, "预算", 5, 0.0)
        .unwrap()
        .is_empty());
    assert_eq!(store.get("bob", &a_id).unwrap(), None);
    assert!(!store.forget("bob", &a_id).await.unwrap());
    // Bob writing the same slot creates his own record.
    let b = apply_one(&store, "bob", add("budget", "用户的预算是9000元"), 1).await;
    assert_eq!(b.op, AppliedOp::Added);
    assert_eq!(
        store.list("alice").unwrap()[0].content,
        "用户的预算是5000元"
    );
}

#[tokio::test]
async fn expired_records_are_not_recalled() {
    let (_dir, store) = open_temp();
    let mut short = add("parcel", "parcel arrives at the office locker");
    short.expiry_days = Some(3);
    let written = at(0);
    store
        .apply_at(
            "alice",
            "default",
            &[short, add("parcel_size", "parcel is large")],
            &source(0),
            written,
        )
        .unwrap();
    let hits = |now| {
        store
            .recall_at("alice", None, "parcel", 5, 0.0, now)
            .unwrap()
    };
    assert_eq!(hits(written + Duration::days(2)).len(), 2);
    let later = hits(written + Duration::days(4));
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].record.key, "parcel_size");
    assert_eq!(
        store.list("alice").unwrap().len(),
        2,
        "list still shows expired records"
    );
}

#[tokio::test]
async fn recall_respects_limit_namespace_and_min_score() {
    let (_dir, store) = open_temp();
    let many: Vec<MemoryUpdate> = (0..8)
        .map(|i| add(&format!("order_{i}"), &format!("order {i} of headphones")))
        .collect();
    store
        .apply("alice", "shop", &many, &source(0))
        .await
        .unwrap();
    store
        .apply(
            "alice",
            "work",
            &[add("desk", "headphones at the desk")],
            &source(0),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .recall("alice", None, "headphones", 3, 0.0)
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store
            .recall("alice", None, "headphones", 50, 0.0)
            .unwrap()
            .len(),
        9
    );
    let work = store
        .recall("alice", Some("work"), "headphones", 50, 0.0)
        .unwrap();
    assert_eq!(work.len(), 1);
    assert_eq!(work[0].record.namespace, "work");
    assert!(store
        .recall("alice", None, "headphones", 5, 1e6)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn records_survive_closing_and_reopening_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
        let store = MemoryStore::open(&db).unwrap();
        let out = apply_one(&store, "alice", add("budget", "用户的预算是5000元"), 0).await;
        out.record.unwrap().id
    };
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let store = MemoryStore::open(&db).unwrap();
    let record = store.get("alice", &id).unwrap().unwrap();
    assert_eq!(record.content, "用户的预算是5000元");
    let again = apply_one(&store, "alice", add("budget", "用户的预算是6000元"), 1).await;
    assert_eq!(again.op, AppliedOp::Updated, "the key index survived too");
}

#[tokio::test]
async fn forget_removes_record_and_frees_its_slot() {
    let (_dir, store) = open_temp();
    let id = apply_one(&store, "alice", add("pet", "has a cat named Mochi"), 0)
        .await
        .record
        .unwrap()
        .id;
    assert!(store.forget("alice", &id).await.unwrap());
    assert!(!store.forget("alice", &id).await.unwrap());
    assert_eq!(store.get("alice", &id).unwrap(), None);
    let new = apply_one(&store, "alice", add("pet", "has a dog"), 1).await;
    assert_eq!(new.op, AppliedOp::Added);
}

#[tokio::test]
async fn malformed_batch_writes_nothing() {
    let (_dir, store) = open_temp();
    let batch = [add("ok", "fine content"), add("empty", "   ")];
    let err = store
        .apply("alice", "default", &batch, &source(0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, MemoryError::InvalidUpdate { index: 1, .. }),
        "{err}"
    );
    assert!(store.list("alice").unwrap().is_empty());
    let err = store
        .apply("a\0b", "default", &[], &source(0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, MemoryError::InvalidName { what: "user", .. }),
        "{err}"
    );
    assert!(store.recall("", None, "x", 5, 0.0).is_err());
}

#[tokio::test]
async fn list_is_newest_first() {
    let (_dir, store) = open_temp();
    store
        .apply_at("alice", "d", &[add("a", "first thing")], &source(0), at(0))
        .unwrap();
    store
        .apply_at("alice", "d", &[add("b", "second thing")], &source(1), at(1))
        .unwrap();
    let keys: Vec<String> = store
        .list("alice")
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["b", "a"]);
}

#[test]
fn applied_op_names_match_the_wire_strings() {
    assert_eq!(AppliedOp::IgnoredStale.as_str(), "ignored_stale");
    assert_eq!(
        serde_json::to_value(AppliedOp::IgnoredStale).unwrap(),
        "ignored_stale"
    );
    assert_eq!(serde_json::to_value(AppliedOp::Added).unwrap(), "added");
}

#[tokio::test]
async fn recall_sees_every_write_even_through_another_store_on_the_same_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let reader = MemoryStore::open(&db).unwrap();
    let writer = MemoryStore::open(&db).unwrap();
    let recall = |s: &MemoryStore| -> Vec<String> {
        s.recall("alice", None, "green tea", 5, 0.0)
            .unwrap()
            .into_iter()
            .map(|h| h.record.content)
            .collect()
    };
    assert!(recall(&reader).is_empty(), "builds an empty index");
    apply_one(&writer, "alice", add("drink", "likes green tea"), 0).await;
    assert_eq!(
        recall(&reader),
        ["likes green tea"],
        "a write elsewhere rebuilds it"
    );
    assert_eq!(
        recall(&reader),
        ["likes green tea"],
        "served from the cache"
    );
    apply_one(
        &writer,
        "alice",
        add("drink", "likes green tea with jasmine"),
        1,
    )
    .await;
    assert_eq!(recall(&reader), ["likes green tea with jasmine"]);
    let id = writer.list("alice").unwrap()[0].id.clone();
    writer.forget("alice", &id).await.unwrap();
    assert!(recall(&reader).is_empty(), "a forget is seen at once");
}
