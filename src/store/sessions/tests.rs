//! The session store's own tests, and the helpers its submodules' tests share.

use super::*;

/// A user message `text` at `seq` (for the tests of this module and its submodules).
pub(in crate::store::sessions) fn msg(seq: u64, text: &str) -> StoredMessage {
    StoredMessage {
        seq,
        id: format!("m{seq}"),
        turn_id: "t".into(),
        ts: Utc::now(),
        tokens: 3,
        usage: None,
        tool_status: None,
        message: ChatMessage::user(text).into(),
    }
}

#[tokio::test]
async fn appended_messages_survive_reopen_in_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
        let store = SessionStore::open(&db).unwrap();
        let mut meta = SessionMeta {
            agent: "a".into(),
            session: "s".into(),
            user: "u".into(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
            log_seq: 0,
            handoffs: Vec::new(),
            set_aside: Vec::new(),
        };
        store
            .append(&mut meta, &[msg(0, "one"), msg(1, "two")])
            .await
            .unwrap();
        assert_eq!(meta.next_seq, 2);
    }
    let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap();
    let got = store.messages("a", "s").unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].message.content, "two");
    assert_eq!(store.meta("a", "s").unwrap().unwrap().next_seq, 2);
    assert!(store.messages("a", "s2").unwrap().is_empty());
}

#[tokio::test]
async fn a_commit_with_a_replicated_log_flushes_the_cache_in_the_background_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn SessionLog> = Arc::new(crate::store::test_log::MemoryLog::default());
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap().with_log(log.clone());
    let mut meta = SessionMeta::new("a", "s", "u");
    let messages = [msg(0, "one"), msg(1, "two")];
    store
        .save(&mut meta, &messages, &TaskState::default())
        .await
        .unwrap();
    store.commit().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while db.flushes() == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(db.flushes() >= 1, "the cache is flushed in the background");

    // A process whose cache lost everything since its last flush gets it back from the log.
    let fresh = tempfile::tempdir().unwrap();
    let empty = Durable::from(crate::store::open(fresh.path()).unwrap());
    let restarted = SessionStore::open(&empty).unwrap().with_log(log);
    let (loaded, got, _) = restarted.load_synced("a", "s").await.unwrap();
    assert_eq!(loaded.unwrap().next_seq, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].message.content, "two");
}

/// A task state with a turn that a restart resumes.
fn unfinished_task(goal: &str) -> TaskState {
    TaskState {
        goal: Some(goal.into()),
        turn: Some(crate::store::tasks::TurnRecord::received(
            "t1".into(),
            "m0".into(),
            "trace".into(),
        )),
        ..TaskState::default()
    }
}

#[tokio::test]
async fn a_save_writes_the_task_state_into_the_sessions_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap();
    let mut meta = SessionMeta::new("a", "s", "u");
    let task = unfinished_task("plan the trip");
    store
        .save(&mut meta, &[msg(0, "one")], &task)
        .await
        .unwrap();
    assert!(db.open_tree("tasks").unwrap().is_empty());
    assert_eq!(db.open_tree("sessions").unwrap().len(), 1);
    let (loaded, messages, got) = store.load("a", "s").unwrap();
    assert_eq!(loaded.unwrap().next_seq, 1);
    assert_eq!(messages.len(), 1);
    assert_eq!(got, task);
    assert_eq!(store.task("a", "s").unwrap(), task);
    assert_eq!(store.meta("a", "s").unwrap().unwrap().user, "u");
    assert_eq!(store.list(Some("u")).unwrap().len(), 1);
    assert_eq!(store.unfinished().unwrap(), vec![("a".into(), "s".into())]);
}

#[tokio::test]
async fn an_earlier_versions_task_states_move_into_their_sessions_records_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    // As an earlier version left them: metadata alone, task states in their own tree, and one
    // task whose session's record was never written (stopped between the two writes).
    let (sessions, tasks) = (
        db.open_tree("sessions").unwrap(),
        db.open_tree("tasks").unwrap(),
    );
    let old = SessionMeta::new("a", "old", "u");
    sessions
        .insert(session_key("a", "old"), encode(&old).unwrap())
        .unwrap();
    tasks
        .insert(
            session_key("a", "old"),
            encode(&unfinished_task("old goal")).unwrap(),
        )
        .unwrap();
    tasks
        .insert(
            session_key("a", "orphan"),
            encode(&unfinished_task("orphan goal")).unwrap(),
        )
        .unwrap();
    let store = SessionStore::open(&db).unwrap();
    assert_eq!(tasks.len(), 1, "the orphan's task stays where it is");
    assert_eq!(
        store.task("a", "old").unwrap().goal.as_deref(),
        Some("old goal")
    );
    assert_eq!(store.meta("a", "old").unwrap(), Some(old));
    let (meta, _, task) = store.load("a", "orphan").unwrap();
    assert!(meta.is_none());
    assert_eq!(task.goal.as_deref(), Some("orphan goal"));
    let mut unfinished = store.unfinished().unwrap();
    unfinished.sort();
    assert_eq!(
        unfinished,
        vec![("a".into(), "old".into()), ("a".into(), "orphan".into())]
    );
    // The orphan's first save gives it a record, which wins over the task left apart.
    let mut meta = SessionMeta::new("a", "orphan", "u");
    store
        .save(&mut meta, &[], &TaskState::default())
        .await
        .unwrap();
    assert_eq!(store.task("a", "orphan").unwrap(), TaskState::default());
    assert_eq!(
        store.unfinished().unwrap(),
        vec![("a".into(), "old".into())]
    );
    // Opened again, the task left apart goes: its session has a record now.
    drop(store);
    SessionStore::open(&db).unwrap();
    assert!(tasks.is_empty());
}

#[tokio::test]
async fn the_messages_a_save_stores_together_are_one_record_and_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let store = SessionStore::open(&db).unwrap();
    let mut meta = SessionMeta::new("a", "s", "u");
    let task = TaskState::default();
    store.save(&mut meta, &[msg(0, "hi")], &task).await.unwrap();
    let turn = [msg(1, "call"), msg(2, "result"), msg(3, "answer")];
    store.save(&mut meta, &turn, &task).await.unwrap();
    assert_eq!(db.open_tree("messages").unwrap().len(), 2);
    let many: Vec<StoredMessage> = (4..4 + BATCH_MAX as u64 + 3)
        .map(|seq| msg(seq, "m"))
        .collect();
    store.save(&mut meta, &many, &task).await.unwrap();
    assert_eq!(
        db.open_tree("messages").unwrap().len(),
        4,
        "at most BATCH_MAX a record"
    );
    drop(store);
    let store = SessionStore::open(&db).unwrap();
    let (loaded, got, _) = store.load("a", "s").unwrap();
    let seqs: Vec<u64> = got.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..4 + BATCH_MAX as u64 + 3).collect::<Vec<_>>());
    assert_eq!(got[2].message.content, "result");
    assert_eq!(loaded.unwrap().next_seq, 4 + BATCH_MAX as u64 + 3);
}

#[tokio::test]
async fn a_message_stored_alone_by_an_earlier_version_and_again_in_a_batch_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::from(crate::store::open(dir.path()).unwrap());
    let tree = db.open_tree("messages").unwrap();
    for seq in 0..3 {
        tree.insert(
            message_key("a", "s", seq),
            encode(&msg(seq, "alone")).unwrap(),
        )
        .unwrap();
    }
    let store = SessionStore::open(&db).unwrap();
    let listed: Vec<Vec<u8>> = (1..5)
        .map(|seq| encode(&msg(seq, "again")).unwrap())
        .collect();
    store
        .insert_messages("a", "s", &[1, 2, 3, 4], &listed)
        .unwrap();
    let seqs: Vec<u64> = store
        .messages("a", "s")
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
}
