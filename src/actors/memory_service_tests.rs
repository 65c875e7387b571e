use chrono::{Duration, Utc};

use super::*;
use crate::memory::{MemoryKind, MemoryUpdate, UpdateOp};
use crate::store::durability::Durable;

fn update(key: &str, content: &str) -> MemoryUpdate {
    MemoryUpdate {
        op: UpdateOp::Add,
        kind: MemoryKind::Fact,
        key: key.into(),
        content: content.into(),
        importance: 0.6,
        expiry_days: None,
        topics: Vec::new(),
    }
}

/// Memory requests over a fresh store where alice has `live` live memories and one expired,
/// and bob one memory.
async fn requests(dir: &std::path::Path, live: usize) -> MemoryRequests {
    let db = Durable::from(crate::store::open(dir).unwrap());
    let config = Arc::new(Config::load(None).unwrap());
    let service = MemoryService::open(&db, &config.memory, None).unwrap();
    let source = Source {
        session: "s".into(),
        message_id: "m".into(),
        source_time: Utc::now(),
    };
    for i in 0..live {
        let text = format!("alice fact number {i} about tangerines");
        service
            .apply(
                "alice",
                "default",
                &[update(&format!("fact_{i}"), &text)],
                &source,
            )
            .await
            .unwrap();
    }
    let mut expired = service
        .apply(
            "alice",
            "default",
            &[update("trip", "flies to Tokyo")],
            &source,
        )
        .await
        .unwrap()
        .remove(0)
        .record
        .unwrap();
    expired.expires_at = Some(Utc::now() - Duration::days(1));
    service.store().insert_record(&expired).unwrap();
    service
        .apply(
            "bob",
            "default",
            &[update("fact_0", "bob likes tangerines")],
            &source,
        )
        .await
        .unwrap();
    MemoryRequests { service, config }
}

fn list(
    offset: usize,
    limit: Option<usize>,
    include_inactive: bool,
) -> Envelope<MemoryListRequest> {
    Envelope::request(MemoryListRequest {
        user: "alice".into(),
        include_inactive,
        offset,
        limit,
        ..MemoryListRequest::default()
    })
}

#[tokio::test]
async fn a_paged_list_walks_a_users_records_and_all_adds_the_expired_ones() {
    let dir = tempfile::tempdir().unwrap();
    let memory = requests(dir.path(), 5).await;

    let whole = memory.call(list(0, None, false)).await.unwrap();
    assert_eq!(
        (whole.records.len(), whole.total, whole.next_offset),
        (5, 5, None)
    );
    assert!(whole.records.iter().all(|r| r.user == "alice"));
    let everything = memory.call(list(0, None, true)).await.unwrap();
    assert_eq!(everything.total, 6);
    assert!(everything.records.iter().any(|r| r.key == "trip"));

    let mut keys = Vec::new();
    let mut offset = 0;
    loop {
        let page = memory.call(list(offset, Some(2), true)).await.unwrap();
        assert!(page.records.len() <= 2);
        assert_eq!(page.total, 6);
        keys.extend(page.records.into_iter().map(|r| r.key));
        match page.next_offset {
            Some(next) => offset = next,
            None => break,
        }
    }
    let expected: Vec<_> = everything.records.into_iter().map(|r| r.key).collect();
    assert_eq!(keys, expected, "the pages, in order, are the whole list");
}

#[tokio::test]
async fn recall_takes_the_callers_limit_and_threshold_and_says_what_scored() {
    let dir = tempfile::tempdir().unwrap();
    let memory = requests(dir.path(), 8).await;
    let recall = |limit, min_score| {
        Envelope::request(RecallRequest {
            user: "alice".into(),
            query: "tangerines".into(),
            limit,
            min_score,
            ..RecallRequest::default()
        })
    };
    let turn = memory.call(recall(5, None)).await.unwrap();
    assert_eq!(turn.hits.len(), 5);
    assert_eq!(turn.embedder, None, "BM25 alone");
    let wide = memory.call(recall(20, Some(0.0))).await.unwrap();
    assert_eq!(
        wide.hits.len(),
        8,
        "every live match, the expired one left out"
    );
    assert!(wide.hits.iter().all(|h| h.record.user == "alice"));
    let capped = memory.call(recall(500, Some(0.0))).await.unwrap();
    assert!(capped.hits.len() <= MAX_RECALL_HITS);
}
