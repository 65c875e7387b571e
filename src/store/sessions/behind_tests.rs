//! The cache of a replicated log written behind the turn: a save returns once the log holds
//! it, and a reader of the cache waits for the writes handed over before it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::tests::msg;
use super::*;
use crate::store::test_log::MemoryLog;

#[tokio::test]
async fn a_replicated_save_is_cached_behind_the_turn_and_a_reader_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn SessionLog> = Arc::new(MemoryLog::default());
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap().with_log(log.clone());
    // A write ahead of the save's holds the queue until the gate opens.
    let gate = Arc::new(AtomicBool::new(false));
    {
        let gate = gate.clone();
        db.write_behind(move || {
            while !gate.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    let mut meta = SessionMeta::new("a", "s", "u");
    store
        .save(&mut meta, &[msg(0, "one")], &TaskState::default())
        .await
        .unwrap();
    assert_eq!(meta.next_seq, 1);
    assert_eq!(
        log.last("a", "s").await.unwrap(),
        meta.log_seq,
        "in the log"
    );
    let key = message_key("a", "s", 0);
    assert!(
        store.messages.get(&key).unwrap().is_none(),
        "not in the cache yet: the queue is held"
    );

    let reader = {
        let store = store.clone();
        std::thread::spawn(move || store.load("a", "s").unwrap())
    };
    std::thread::sleep(Duration::from_millis(30));
    assert!(!reader.is_finished(), "the reader waits for the queue");
    gate.store(true, Ordering::SeqCst);
    let (cached, messages, _) = reader.join().unwrap();
    let cached = cached.expect("the save's metadata");
    assert_eq!(cached.log_seq, meta.log_seq);
    assert_eq!(cached.updated_at, meta.updated_at);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].message.content, "one");
}

#[tokio::test]
async fn the_final_flush_applies_the_queued_cache_writes_first() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn SessionLog> = Arc::new(MemoryLog::default());
    {
        let db = Durable::from(crate::store::open(dir.path()).unwrap());
        let store = SessionStore::open(&db).unwrap().with_log(log);
        let mut meta = SessionMeta::new("a", "s", "u");
        for seq in 0..50 {
            store
                .save(&mut meta, &[msg(seq, "m")], &TaskState::default())
                .await
                .unwrap();
        }
        db.flush_all().await.unwrap();
        assert_eq!(store.messages.len(), 50, "applied before the flush");
    }
    // What the flush wrote is what a restart finds, without the log.
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap();
    assert_eq!(store.messages("a", "s").unwrap().len(), 50);
    assert_eq!(store.meta("a", "s").unwrap().unwrap().next_seq, 50);
}
