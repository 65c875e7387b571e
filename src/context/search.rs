//! Session search: BM25 over all of a user's past messages (user and assistant text), with the
//! same Chinese/English tokenisation as memory recall. The full history stays searchable even
//! after older turns were folded into a summary.

use crate::llm::Role;
use crate::memory::{bm25, tokenize};
use crate::protocol::SessionHit;

use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::StoreError;

/// Characters of a hit's text returned.
const HIT_CHARS: usize = 400;

/// The `limit` best matches for `query` among `user`'s messages, best first.
pub fn search(
    store: &SessionStore,
    user: &str,
    query: &str,
    limit: usize,
) -> Result<Vec<SessionHit>, StoreError> {
    let mut sessions = Vec::new();
    for meta in store.list(Some(user))? {
        let messages = store.messages(&meta.agent, &meta.session)?;
        sessions.push((meta, messages));
    }
    Ok(rank(sessions, query, limit))
}

/// The `limit` best matches for `query` among the messages of `sessions` (one user's), best
/// first.
pub fn rank(
    sessions: Vec<(SessionMeta, Vec<StoredMessage>)>,
    query: &str,
    limit: usize,
) -> Vec<SessionHit> {
    let query_tokens = tokenize::tokenize(query);
    if query_tokens.is_empty() {
        return Vec::new();
    }
    let mut candidates = Vec::new();
    let mut docs = Vec::new();
    for (meta, messages) in sessions {
        for m in messages {
            if !matches!(m.message.role, Role::User | Role::Assistant)
                || m.message.content.is_empty()
            {
                continue;
            }
            docs.push(tokenize::tokenize(&m.message.content));
            candidates.push((meta.agent.clone(), meta.session.clone(), m));
        }
    }
    let scores = bm25::score(&query_tokens, &docs);
    let mut hits: Vec<SessionHit> = candidates
        .into_iter()
        .zip(scores)
        .filter(|(_, s)| *s > 0.0)
        .map(|((agent, session, m), score)| SessionHit {
            agent,
            session,
            seq: m.seq,
            role: m.message.role,
            ts: m.ts,
            text: m.message.content.chars().take(HIT_CHARS).collect(),
            score,
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.ts.cmp(&a.ts)));
    hits.truncate(limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use crate::store::sessions::{SessionMeta, StoredMessage};
    use chrono::Utc;

    async fn put(store: &SessionStore, user: &str, session: &str, texts: &[&str]) {
        let mut meta = SessionMeta {
            agent: "a".into(),
            session: session.into(),
            user: user.into(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
            log_seq: 0,
            handoffs: Vec::new(),
            set_aside: Vec::new(),
        };
        let msgs: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| StoredMessage {
                seq: i as u64,
                id: format!("{session}-{i}"),
                turn_id: "t".into(),
                ts: Utc::now(),
                tokens: 1,
                usage: None,
                tool_status: None,
                message: ChatMessage::user(*t).into(),
            })
            .collect();
        store.append(&mut meta, &msgs).await.unwrap();
    }

    #[tokio::test]
    async fn finds_chinese_and_english_messages_of_that_user_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
        let store = SessionStore::open(&db).unwrap();
        put(
            &store,
            "alice",
            "s1",
            &["我去年双十一买了索尼耳机", "the weather is nice"],
        )
        .await;
        put(&store, "alice", "s2", &["please book a flight to Berlin"]).await;
        put(&store, "bob", "s3", &["索尼耳机 flight Berlin"]).await;
        let hits = search(&store, "alice", "耳机订单", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].session, "s1");
        let hits = search(&store, "alice", "flights to berlin", 5).unwrap();
        assert_eq!(hits[0].session, "s2");
        assert!(search(&store, "alice", "flight", 5)
            .unwrap()
            .iter()
            .all(|h| h.session != "s3"));
        assert!(search(&store, "carol", "flight", 5).unwrap().is_empty());
    }
}
