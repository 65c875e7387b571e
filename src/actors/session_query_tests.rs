use std::sync::Arc;

use chrono::Utc;

use super::*;
use crate::protocol::chat::ChatMessage;
use crate::store::durability::Durable;
use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::tasks::TaskState;
use crate::store::test_log::MemoryLog;

fn store(dir: &std::path::Path) -> SessionStore {
    SessionStore::open(&Durable::from(crate::store::open(dir).unwrap())).unwrap()
}

fn message(seq: u64, text: String) -> StoredMessage {
    StoredMessage {
        seq,
        id: format!("m{seq}"),
        turn_id: "t1".into(),
        ts: Utc::now(),
        tokens: 1,
        usage: None,
        tool_status: None,
        message: ChatMessage::user(text).into(),
    }
}

/// `count` sessions of `user` (`<user>-0` oldest), each with `messages` messages of `size` bytes.
async fn sessions(store: &SessionStore, user: &str, count: usize, messages: u64, size: usize) {
    for i in 0..count {
        let mut meta = SessionMeta::new("assistant", &format!("{user}-{i}"), user);
        let stored: Vec<_> = (0..messages)
            .map(|seq| message(seq, format!("{seq}:{}", "x".repeat(size))))
            .collect();
        store
            .save(&mut meta, &stored, &TaskState::default())
            .await
            .unwrap();
    }
}

fn list(user: Option<&str>, offset: usize, limit: usize) -> Envelope<SessionListRequest> {
    Envelope::request(SessionListRequest {
        user: user.map(str::to_owned),
        agent: None,
        offset,
        limit,
    })
}

fn show(session: &str, from_seq: u64, limit: usize) -> Envelope<SessionShowRequest> {
    Envelope::request(SessionShowRequest {
        agent: "assistant".into(),
        session: session.into(),
        from_seq,
        limit,
    })
}

#[tokio::test]
async fn lists_page_newest_first_and_say_where_the_next_page_starts() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    sessions(&store, "alice", 5, 1, 10).await;
    sessions(&store, "bob", 1, 1, 10).await;
    let queries = SessionQueries::new(SessionReader::Local(store), 256 * 1024);

    let first = queries.call(list(Some("alice"), 0, 2)).await.unwrap();
    assert_eq!(first.total, 5);
    let names: Vec<_> = first.sessions.iter().map(|s| s.session.as_str()).collect();
    assert_eq!(names, ["alice-4", "alice-3"]);
    assert_eq!(first.next_offset, Some(2));
    let last = queries.call(list(Some("alice"), 4, 2)).await.unwrap();
    assert_eq!(last.sessions.len(), 1);
    assert_eq!(last.sessions[0].session, "alice-0");
    assert_eq!(last.next_offset, None);

    let everyone = queries.call(list(None, 0, 0)).await.unwrap();
    assert_eq!((everyone.total, everyone.sessions.len()), (6, 6));
    assert_eq!(everyone.sessions[0].user, "bob");
    assert_eq!(everyone.sessions[0].messages, 1);
}

#[tokio::test]
async fn a_long_session_comes_in_pages_that_fit_the_payload_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // 40 messages of 2 KB: more than one 16 KB page.
    sessions(&store, "alice", 1, 40, 2048).await;
    let queries = SessionQueries::new(SessionReader::Local(store), 1);

    let mut seen = Vec::new();
    let mut from = 0;
    let mut pages = 0;
    loop {
        let page = queries.call(show("alice-0", from, 0)).await.unwrap();
        let bytes = serde_json::to_vec(&page).unwrap().len();
        assert!(bytes < 20 * 1024, "a page of {bytes} bytes");
        assert_eq!(page.session.summary.messages, 40);
        seen.extend(page.messages.iter().map(|m| m.seq));
        pages += 1;
        match page.next_seq {
            Some(next) => from = next,
            None => break,
        }
    }
    assert!(pages > 2, "{pages} pages");
    assert_eq!(seen, (0..40).collect::<Vec<_>>());

    let two = queries.call(show("alice-0", 10, 2)).await.unwrap();
    let seqs: Vec<_> = two.messages.iter().map(|m| m.seq).collect();
    assert_eq!((seqs, two.next_seq), (vec![10, 11], Some(12)));
}

#[tokio::test]
async fn an_unknown_session_or_a_bad_id_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let queries = SessionQueries::new(SessionReader::Local(store(dir.path())), 256 * 1024);
    let missing = queries.call(show("nope", 0, 0)).await.unwrap_err();
    assert_eq!(missing.code, "not_found");
    assert!(
        missing.message.contains("hermes sessions ls"),
        "{}",
        missing.message
    );
    let bad = queries.call(show("a.b", 0, 0)).await.unwrap_err();
    assert_eq!(bad.code, "bad_request");
}

#[tokio::test]
async fn on_a_cluster_a_copy_that_never_owned_a_session_still_shows_and_searches_it() {
    let log = Arc::new(MemoryLog::default());
    let (owner_dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let owner = store(owner_dir.path()).with_log(log.clone());
    let mut meta = SessionMeta::new("assistant", "s1", "alice");
    owner
        .save(
            &mut meta,
            &[message(0, "the tangerine submarine sails at noon".into())],
            &TaskState::default(),
        )
        .await
        .unwrap();
    let other = SessionReader::of(&store(other_dir.path()).with_log(log));
    let queries = SessionQueries::new(other.clone(), 256 * 1024);
    let shown = queries.call(show("s1", 0, 0)).await.unwrap();
    assert_eq!(shown.messages.len(), 1);
    assert_eq!(shown.session.summary.user, "alice");
    let listed = queries.call(list(None, 0, 0)).await.unwrap();
    assert_eq!(listed.total, 1);

    let search = SessionSearch { reader: other };
    let found = search
        .call(Envelope::request(SessionSearchRequest {
            user: "alice".into(),
            query: "tangerine submarine".into(),
            limit: 5,
        }))
        .await
        .unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].session, "s1");
}
