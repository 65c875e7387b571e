//! Tests of the memory service: recall with filters, the embedder-id separation of vectors,
//! lazy re-embedding, and the BM25 fallback when the embedder fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;

use super::*;
use crate::config::Config;
use crate::memory::embed::{normalize, EmbedError, Embedder};
use crate::memory::record::{MemoryKind, UpdateOp};

/// A bag-of-words embedder over a fixed vocabulary, with an id and a call counter; `synonyms`
/// maps words onto one dimension so paraphrases meet.
struct WordEmbedder {
    id: String,
    texts_seen: AtomicUsize,
    fail: bool,
}

const VOCAB: &[&[&str]] = &[
    &["cat", "kitten", "pet"],
    &["chicken", "poultry"],
    &["allergic", "allergy", "cannot"],
    &["berlin", "train"],
];

impl WordEmbedder {
    fn new(id: &str) -> Arc<Self> {
        Arc::new(Self {
            id: id.into(),
            texts_seen: AtomicUsize::new(0),
            fail: false,
        })
    }
}

#[async_trait]
impl Embedder for WordEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.fail {
            return Err(EmbedError::Inference("down".into()));
        }
        self.texts_seen.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let lower = t.to_lowercase();
                let mut v: Vec<f32> = VOCAB
                    .iter()
                    .map(|words| words.iter().filter(|w| lower.contains(*w)).count() as f32)
                    .collect();
                v.push(0.01);
                normalize(&mut v);
                v
            })
            .collect())
    }
}

fn update(key: &str, content: &str, kind: MemoryKind) -> MemoryUpdate {
    MemoryUpdate {
        op: UpdateOp::Add,
        kind,
        key: key.into(),
        content: content.into(),
        importance: 0.5,
        expiry_days: None,
        topics: vec!["pets".into()],
    }
}

fn source() -> Source {
    Source {
        session: "s".into(),
        message_id: "m".into(),
        source_time: Utc::now(),
    }
}

fn query(user: &str, text: &str) -> RecallQuery {
    RecallQuery {
        user: user.into(),
        text: text.into(),
        filter: RecallFilter::default(),
        limit: 5,
        min_score: 0.0,
        weights: None,
        now: Utc::now(),
    }
}

fn open(db: &crate::store::durability::Durable, embedder: Option<SharedEmbedder>) -> MemoryService {
    let config = Config::embedded().unwrap();
    MemoryService::open(db, &config.memory, embedder).unwrap()
}

#[tokio::test]
async fn hybrid_recall_finds_a_paraphrase_bm25_misses() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let service = open(&db, Some(WordEmbedder::new("test:words")));
    service
        .apply(
            "alice",
            "default",
            &[
                update(
                    "pet_allergy",
                    "Pixel is allergic to chicken",
                    MemoryKind::Fact,
                ),
                update("trip", "takes the train to Berlin", MemoryKind::Event),
            ],
            &source(),
        )
        .await
        .unwrap();
    let hits = service
        .recall(query("alice", "what poultry can my kitten not eat"))
        .await
        .unwrap();
    assert_eq!(hits[0].record.key, "pet_allergy", "{hits:?}");
    let bm25_only = open(&db, None)
        .recall(query("alice", "what poultry can my kitten not eat"))
        .await
        .unwrap();
    assert!(bm25_only.is_empty(), "no shared term: {bm25_only:?}");
}

#[tokio::test]
async fn vectors_of_another_embedder_are_never_used_and_missing_ones_are_embedded_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let first = WordEmbedder::new("test:first");
    let a = open(&db, Some(first.clone()));
    a.apply(
        "alice",
        "default",
        &[update(
            "pet_allergy",
            "Pixel is allergic to chicken",
            MemoryKind::Fact,
        )],
        &source(),
    )
    .await
    .unwrap();
    assert_eq!(
        first.texts_seen.load(Ordering::SeqCst),
        1,
        "embedded at write"
    );

    let second = WordEmbedder::new("test:second");
    let b = open(&db, Some(second.clone()));
    b.recall(query("alice", "kitten poultry")).await.unwrap();
    assert_eq!(
        second.texts_seen.load(Ordering::SeqCst),
        2,
        "query + the record, which had only a test:first vector"
    );
    b.recall(query("alice", "kitten poultry")).await.unwrap();
    assert_eq!(
        second.texts_seen.load(Ordering::SeqCst),
        3,
        "now only the query"
    );
    let vectors = VectorStore::open(&db).unwrap();
    assert_eq!(vectors.for_user("alice", "test:first").unwrap().len(), 1);
    assert_eq!(vectors.for_user("alice", "test:second").unwrap().len(), 1);
}

#[tokio::test]
async fn failing_embedder_degrades_recall_to_bm25() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let broken = Arc::new(WordEmbedder {
        id: "test:broken".into(),
        texts_seen: AtomicUsize::new(0),
        fail: true,
    });
    let service = open(&db, Some(broken));
    service
        .apply(
            "alice",
            "default",
            &[update(
                "pet_allergy",
                "Pixel is allergic to chicken",
                MemoryKind::Fact,
            )],
            &source(),
        )
        .await
        .expect("the write succeeds even when embedding fails");
    let hits = service.recall(query("alice", "chicken")).await.unwrap();
    assert_eq!(hits.len(), 1);
}

#[tokio::test]
async fn recall_filters_by_kind_topic_and_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let service = open(&db, None);
    service
        .apply(
            "alice",
            "default",
            &[
                update(
                    "budget",
                    "budget for headphones is 5000",
                    MemoryKind::Constraint,
                ),
                update(
                    "old_headphones",
                    "bought headphones last year",
                    MemoryKind::Event,
                ),
            ],
            &source(),
        )
        .await
        .unwrap();
    service
        .apply(
            "alice",
            "work",
            &[update(
                "work_headphones",
                "office headphones are Bose",
                MemoryKind::Fact,
            )],
            &source(),
        )
        .await
        .unwrap();
    let keys = |hits: Vec<RecallHit>| -> Vec<String> {
        let mut k: Vec<String> = hits.into_iter().map(|h| h.record.key).collect();
        k.sort();
        k
    };
    let all = service.recall(query("alice", "headphones")).await.unwrap();
    assert_eq!(all.len(), 3);
    let mut q = query("alice", "headphones");
    q.filter.kinds = vec![MemoryKind::Constraint, MemoryKind::Fact];
    q.filter.namespace = Some("default".into());
    assert_eq!(keys(service.recall(q).await.unwrap()), ["budget"]);
    let mut q = query("alice", "headphones");
    q.filter.topics = vec!["PETS".into()];
    assert_eq!(
        service.recall(q).await.unwrap().len(),
        3,
        "topics compare case-insensitively"
    );
    let mut q = query("alice", "headphones");
    q.filter.topics = vec!["travel".into()];
    assert!(service.recall(q).await.unwrap().is_empty());
}

#[tokio::test]
async fn forget_by_key_and_by_id_remove_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let service = open(&db, None);
    let applied = service
        .apply(
            "alice",
            "default",
            &[
                update("budget", "budget is 5000", MemoryKind::Constraint),
                update("home_city", "lives in hangzhou", MemoryKind::Fact),
            ],
            &source(),
        )
        .await
        .unwrap();
    let by_key = service
        .forget("alice", "default", None, Some("budget"))
        .await
        .unwrap();
    assert_eq!(by_key.map(|r| r.key).as_deref(), Some("budget"));
    let id = applied[1].record.as_ref().unwrap().id.clone();
    assert!(service
        .forget("bob", "default", Some(&id), None)
        .await
        .unwrap()
        .is_none());
    assert!(service
        .forget("alice", "default", Some(&id), None)
        .await
        .unwrap()
        .is_some());
    assert!(service.store().list("alice").unwrap().is_empty());
    assert!(service
        .forget("alice", "default", None, None)
        .await
        .is_err());
}

#[tokio::test]
async fn list_returns_live_records_by_namespace_or_id_and_never_another_users() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let service = open(&db, None);
    let mut short = update("trip", "train to berlin on friday", MemoryKind::Event);
    short.expiry_days = Some(1);
    let applied = service
        .apply(
            "alice",
            "default",
            &[update("pet", "has a cat", MemoryKind::Fact), short],
            &source(),
        )
        .await
        .unwrap();
    service
        .apply(
            "alice",
            "team",
            &[update("office", "team sits in berlin", MemoryKind::Fact)],
            &source(),
        )
        .await
        .unwrap();
    let keys = |records: Vec<MemoryRecord>| -> Vec<String> {
        let mut keys: Vec<String> = records.into_iter().map(|r| r.key).collect();
        keys.sort();
        keys
    };
    let now = Utc::now();
    let all = service.list("alice", None, None, now).await.unwrap();
    assert_eq!(keys(all), ["office", "pet", "trip"]);
    let team = service
        .list("alice", Some("team"), None, now)
        .await
        .unwrap();
    assert_eq!(keys(team), ["office"]);
    let later = now + chrono::Duration::days(2);
    let live_later = service.list("alice", None, None, later).await.unwrap();
    assert_eq!(
        keys(live_later),
        ["office", "pet"],
        "expired records are not listed"
    );
    let id = applied[0].record.as_ref().unwrap().id.clone();
    let one = service.list("alice", None, Some(&id), now).await.unwrap();
    assert_eq!(keys(one), ["pet"]);
    assert!(service
        .list("bob", None, Some(&id), now)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn recall_from_the_cached_index_sees_a_write_made_through_another_service() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let reader = open(&db, None);
    let writer = open(&db, None);
    assert!(reader
        .recall(query("alice", "kitten"))
        .await
        .unwrap()
        .is_empty());
    assert!(
        reader.store().cached_index("alice").is_some(),
        "the empty index is cached and current"
    );
    writer
        .apply(
            "alice",
            "default",
            &[update("pet", "has a kitten called Pixel", MemoryKind::Fact)],
            &source(),
        )
        .await
        .unwrap();
    assert!(
        reader.store().cached_index("alice").is_none(),
        "a write on the same database makes the cached index stale for every store"
    );
    let hits = reader.recall(query("alice", "kitten")).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        reader.store().cached_list("alice").map(|l| l.len()),
        Some(1),
        "the extractor's listing comes from the rebuilt index"
    );
}

#[tokio::test]
async fn releasing_a_turn_frees_exactly_the_memories_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::store::durability::Durable::from(sled::open(dir.path()).unwrap());
    let service = open(&db, None);
    assert_eq!(service.release_task("turn-without-holds").await.unwrap(), 0);
    service
        .hold("alice", "turn-1", &["r1", "r2"])
        .await
        .unwrap();
    assert!(!service.refs().holds_nothing("turn-1"));
    assert!(service.refs().holds_nothing("turn-2"));
    assert!(service.refs().is_referenced("alice", "r1").unwrap());
    assert_eq!(service.release_task("turn-2").await.unwrap(), 0);
    assert_eq!(service.release_task("turn-1").await.unwrap(), 2);
    assert!(!service.refs().is_referenced("alice", "r1").unwrap());
    assert!(service.refs().holds_nothing("turn-1"));
    // A fresh service on the same database (a restart) finds holds left in sled.
    service.hold("alice", "turn-3", &["r3"]).await.unwrap();
    drop(service);
    let again = open(&db, None);
    assert_eq!(again.release_task("turn-3").await.unwrap(), 1);
}
