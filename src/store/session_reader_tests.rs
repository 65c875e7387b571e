use super::*;

use chrono::Utc;

use crate::protocol::chat::ChatMessage;
use crate::store::durability::Durable;
use crate::store::tasks::{TurnPhase, TurnRecord};
use crate::store::test_log::MemoryLog;

pub(crate) fn message(seq: u64, text: &str) -> StoredMessage {
    StoredMessage {
        seq,
        id: format!("m{seq}"),
        turn_id: "t1".into(),
        ts: Utc::now(),
        tokens: 3,
        usage: None,
        tool_status: None,
        message: ChatMessage::user(text).into(),
    }
}

/// A store over a fresh sled directory, its saves going to `log` when given; and the same
/// trees without the log (what a stopped data directory reads).
pub(crate) fn stores(
    dir: &std::path::Path,
    log: Option<Arc<MemoryLog>>,
) -> (SessionStore, SessionStore) {
    let db = Durable::from(crate::store::open(dir).unwrap());
    let plain = SessionStore::open(&db).unwrap();
    match log {
        Some(log) => (plain.clone().with_log(log), plain),
        None => (plain.clone(), plain),
    }
}

pub(crate) fn store(dir: &std::path::Path, log: Option<Arc<MemoryLog>>) -> SessionStore {
    stores(dir, log).0
}

/// Save a session of `user` in two steps, as a turn does: the message, then the answer and
/// the turn's end.
pub(crate) async fn converse(store: &SessionStore, agent: &str, session: &str, user: &str) {
    let mut meta = SessionMeta::new(agent, session, user);
    let mut task = TaskState {
        goal: Some(format!("help {user}")),
        turn: Some(TurnRecord::received("t1".into(), "m0".into(), "tr".into())),
        ..TaskState::default()
    };
    store
        .save(&mut meta, &[message(0, "hello there")], &task)
        .await
        .unwrap();
    if let Some(turn) = task.turn.as_mut() {
        turn.phase = TurnPhase::Answered;
    }
    let answer = StoredMessage {
        message: ChatMessage::assistant("hello, how can I help?").into(),
        ..message(1, "")
    };
    store.save(&mut meta, &[answer], &task).await.unwrap();
}

#[tokio::test]
async fn the_log_read_alone_gives_what_the_owners_trees_hold() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(MemoryLog::default());
    let (owner, trees) = stores(dir.path(), Some(log.clone()));
    converse(&owner, "shop", "s1", "alice").await;
    converse(&owner, "shop", "s2", "bob").await;

    let local = SessionReader::Local(trees);
    let replicated = SessionReader::of(&owner);
    assert!(matches!(replicated, SessionReader::Replicated(_)));
    let from_log = replicated.list(None, None).await.unwrap();
    assert_eq!(from_log, local.list(None, None).await.unwrap());
    assert_eq!(from_log.len(), 2);
    assert_eq!(from_log[0].0.session, "s2", "newest first");
    assert_eq!(from_log[0].0.next_seq, 2);

    let whole = replicated.load("shop", "s1").await.unwrap().unwrap();
    assert_eq!(whole, local.load("shop", "s1").await.unwrap().unwrap());
    assert_eq!(whole.1.len(), 2);
    assert_eq!(whole.2.turn.unwrap().phase, TurnPhase::Answered);
    assert!(replicated.load("shop", "nope").await.unwrap().is_none());
}

#[tokio::test]
async fn any_copy_reads_every_session_from_the_log_even_with_an_empty_cache() {
    let log = Arc::new(MemoryLog::default());
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    converse(
        &store(dirs[0].path(), Some(log.clone())),
        "shop",
        "s1",
        "alice",
    )
    .await;
    converse(
        &store(dirs[1].path(), Some(log.clone())),
        "care",
        "s2",
        "alice",
    )
    .await;
    let other = SessionReader::of(&store(dirs[2].path(), Some(log)));
    assert_eq!(other.list(Some("alice"), None).await.unwrap().len(), 2);
    let care = other.list(None, Some("care")).await.unwrap();
    assert_eq!(care.len(), 1);
    assert_eq!(care[0].0.agent, "care");
    assert!(other.list(Some("bob"), None).await.unwrap().is_empty());
    let histories = other.histories("alice").await.unwrap();
    assert_eq!(histories.len(), 2);
    assert!(histories.iter().all(|(_, messages)| messages.len() == 2));
}
