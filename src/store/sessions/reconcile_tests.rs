use std::sync::Arc;

use chrono::Utc;

use super::ASIDE_TREE;
use crate::protocol::chat::ChatMessage;
use crate::store::durability::Durable;
use crate::store::replica::{LogRecord, SessionLog};
use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::tasks::TaskState;
use crate::store::test_log::MemoryLog;

fn msg(seq: u64, id: &str) -> StoredMessage {
    StoredMessage {
        seq,
        id: id.into(),
        turn_id: "t".into(),
        ts: Utc::now(),
        tokens: 3,
        usage: None,
        message: ChatMessage::user(id).into(),
        tool_status: None,
    }
}

/// A session process: its own data directory, the shared log.
fn process(log: &Arc<MemoryLog>) -> (tempfile::TempDir, SessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let log: Arc<dyn SessionLog> = log.clone();
    (dir, SessionStore::open(&db).unwrap().with_log(log))
}

/// Save each message as its own record, the way turns do.
async fn say(store: &SessionStore, meta: &mut SessionMeta, ids: &[&str]) {
    for id in ids {
        let m = msg(meta.next_seq, id);
        store
            .save(meta, std::slice::from_ref(&m), &TaskState::default())
            .await
            .unwrap();
    }
}

async fn logged_ids(log: &MemoryLog) -> Vec<String> {
    let records = log.read_after("a", "s", 0).await.unwrap();
    let (_, messages, _) = crate::store::session_reader::fold(records)
        .unwrap()
        .unwrap();
    messages.into_iter().map(|m| m.id).collect()
}

fn ids(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

#[tokio::test]
async fn a_cache_ahead_of_a_purged_log_reseeds_it_once_and_the_session_goes_on() {
    let log = Arc::new(MemoryLog::default());
    let (_dir, store) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    say(&store, &mut meta, &["m0", "m1"]).await;
    log.purge();

    let (loaded, messages, _) = store.load_synced("a", "s").await.unwrap();
    let mut loaded = loaded.unwrap();
    assert_eq!(ids(&messages), ["m0", "m1"]);
    assert_eq!(
        log.read_after("a", "s", 0).await.unwrap().len(),
        1,
        "one re-seeding record"
    );
    assert_eq!(logged_ids(&log).await, ["m0", "m1"]);

    // The next save is fenced on the re-seeded record: it is accepted, not handed back.
    say(&store, &mut loaded, &["m2"]).await;
    assert_eq!(logged_ids(&log).await, ["m0", "m1", "m2"]);
    // In step again: loading appends nothing more.
    store.load_synced("a", "s").await.unwrap();
    assert_eq!(log.read_after("a", "s", 0).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_cache_ahead_of_a_log_restored_from_an_older_backup_appends_what_the_log_lacks() {
    let log = Arc::new(MemoryLog::default());
    let (_dir, store) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    say(&store, &mut meta, &["m0", "m1", "m2"]).await;
    log.truncate(1);

    let (loaded, messages, _) = store.load_synced("a", "s").await.unwrap();
    assert_eq!(ids(&messages), ["m0", "m1", "m2"]);
    assert_eq!(logged_ids(&log).await, ["m0", "m1", "m2"]);
    let mut loaded = loaded.unwrap();
    say(&store, &mut loaded, &["m3"]).await;
    assert_eq!(logged_ids(&log).await, ["m0", "m1", "m2", "m3"]);
}

#[tokio::test]
async fn a_cache_behind_the_log_replays_what_another_owner_appended() {
    let log = Arc::new(MemoryLog::default());
    let (_a_dir, a) = process(&log);
    let (_b_dir, b) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    say(&a, &mut meta, &["m0"]).await;
    let (moved, _, _) = b.load_synced("a", "s").await.unwrap();
    let mut moved = moved.unwrap();
    say(&b, &mut moved, &["m1", "m2"]).await;

    let (back, messages, _) = a.load_synced("a", "s").await.unwrap();
    assert_eq!(ids(&messages), ["m0", "m1", "m2"]);
    assert_eq!(back.unwrap().log_seq, moved.log_seq);
}

#[tokio::test]
async fn a_lost_data_directory_is_rebuilt_from_the_log() {
    let log = Arc::new(MemoryLog::default());
    let (dir, store) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    say(&store, &mut meta, &["m0", "m1"]).await;
    drop(store);
    drop(dir);

    let (_fresh, store) = process(&log);
    let (loaded, messages, _) = store.load_synced("a", "s").await.unwrap();
    assert_eq!(ids(&messages), ["m0", "m1"]);
    let mut loaded = loaded.unwrap();
    say(&store, &mut loaded, &["m2"]).await;
    assert_eq!(logged_ids(&log).await, ["m0", "m1", "m2"]);
}

#[tokio::test]
async fn when_cache_and_log_diverge_the_log_wins_and_the_cache_is_kept_aside_and_named() {
    let log = Arc::new(MemoryLog::default());
    let (_old_dir, old) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    say(&old, &mut meta, &["old0", "old1"]).await;
    // The log is rebuilt and another process serves the session meanwhile.
    log.purge();
    let (_new_dir, new) = process(&log);
    let mut other = SessionMeta::new("a", "s", "u");
    say(&new, &mut other, &["new0", "new1", "new2"]).await;

    let (loaded, messages, _) = old.load_synced("a", "s").await.unwrap();
    assert_eq!(ids(&messages), ["new0", "new1", "new2"], "the log wins");
    let loaded = loaded.unwrap();
    assert_eq!(loaded.set_aside.len(), 1);
    let note = &loaded.set_aside[0];
    assert_eq!(
        (note.messages, note.first_seq, note.last_seq),
        (2, Some(0), Some(1))
    );
    assert!(note.kept_in.contains(ASIDE_TREE), "{}", note.kept_in);
    let kept = old.kept_aside("a", "s").unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["messages"][1]["id"], "old1");

    // The note is in the log, so whoever shows the session names it.
    let (_, last) = log.last_record("a", "s").await.unwrap().unwrap();
    let record: LogRecord = serde_json::from_slice(&last).unwrap();
    assert_eq!(record.meta.set_aside, loaded.set_aside);
    // And the session goes on from the log.
    let mut loaded = loaded;
    say(&old, &mut loaded, &["new3"]).await;
    assert_eq!(logged_ids(&log).await, ["new0", "new1", "new2", "new3"]);
}

#[tokio::test]
async fn a_log_reseeded_after_its_store_was_wiped_leaves_the_answered_turns_extraction_to_queue_again(
) {
    use crate::store::tasks::{TurnPhase, TurnRecord};
    let log = Arc::new(MemoryLog::default());
    let (_dir, store) = process(&log);
    let mut meta = SessionMeta::new("a", "s", "u");
    // The answer's append carried the turn's extraction job, its inbox item in hand.
    let mut turn = TurnRecord::received("t".into(), "m0".into(), "trace".into());
    turn.phase = TurnPhase::Answered;
    turn.extraction_queued = true;
    turn.inbox_item = Some(7);
    let task = TaskState {
        turn: Some(turn),
        ..TaskState::default()
    };
    store
        .save_carrying(&mut meta, &[msg(0, "m0"), msg(1, "m1")], &task, b"{}")
        .await
        .unwrap();
    assert!(task.pending_extraction().is_none());
    log.purge();

    let (_, _, loaded) = store.load_synced("a", "s").await.unwrap();
    let pending = loaded.pending_extraction().expect("queued again");
    assert_eq!(pending.turn_id, "t");
    // The re-seed record and the cache say so too, for whichever process owns it next.
    let records = log.read_after("a", "s", 0).await.unwrap();
    let (_, _, logged) = crate::store::session_reader::fold(records)
        .unwrap()
        .unwrap();
    assert!(logged.pending_extraction().is_some());
    assert!(store.task("a", "s").unwrap().pending_extraction().is_some());
}
