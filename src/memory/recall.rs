//! Ranking for recall, as a pure function over already-filtered records.
//!
//! The store filters first (one user, optional namespace, not expired); [`rank`] then scores
//! each record with BM25 ([`super::bm25`]) of the query's tokens against the record's
//! `key` (underscores as spaces) + `content` + `topics`, with IDF over exactly those records,
//! and multiplies by [`rerank_factor`]:
//!
//! ```text
//! factor = (0.5 + 0.5·confidence) · (0.5 + 0.5·importance) · 0.5^(age_days / 180)
//! ```
//!
//! where `age_days` is the time since `updated_at`. Confidence and importance each scale a
//! score by 0.5–1 and the decay halves it every 180 days, so relevance stays the main signal
//! while confidence, importance and freshness settle near-ties: a newer fact outranks an older,
//! equally relevant one. Records that share no term with the query score `0` and are never returned; the rest
//! are cut at `min_score`, sorted by score (ties: newer `updated_at`, then smaller id) and cut
//! to `limit`.
//!
//! Scale: BM25 is not normalised and its IDF comes from the candidate set, so scores grow
//! with the number of matching terms and with the number of candidates. Measured: a user with
//! one record (fresh, confidence 0.6, importance 0.5 → factor 0.6) matched on one bigram scores
//! 0.17, on two 0.35; with two records, one shared bigram scores 0.49 and five score 2.2. A
//! `min_score` meant to drop only non-matches should therefore stay around 0.1.

use chrono::{DateTime, Utc};

use super::bm25;
use super::record::{MemoryRecord, RecallHit};
use super::tokenize::tokenize;

/// Half-life of the time decay, in days.
pub const HALF_LIFE_DAYS: f64 = 180.0;

/// The tokens a record is matched on: its key, content and topics.
pub fn document_tokens(record: &MemoryRecord) -> Vec<String> {
    let mut text = record.key.replace('_', " ");
    text.push('\n');
    text.push_str(&record.content);
    for topic in &record.topics {
        text.push('\n');
        text.push_str(topic);
    }
    tokenize(&text)
}

/// `0.5^(age/half-life)` of `updated_at` at `now`; a timestamp in the future counts as age 0.
pub fn time_decay(updated_at: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    let age_days = (now - updated_at).num_seconds().max(0) as f64 / 86_400.0;
    0.5_f64.powf(age_days / HALF_LIFE_DAYS)
}

/// Confidence × importance × freshness multiplier (see the module doc).
pub fn rerank_factor(record: &MemoryRecord, now: DateTime<Utc>) -> f64 {
    let unit = |x: f32| {
        f64::from(if x.is_finite() {
            x.clamp(0.0, 1.0)
        } else {
            0.5
        })
    };
    (0.5 + 0.5 * unit(record.confidence))
        * (0.5 + 0.5 * unit(record.importance))
        * time_decay(record.updated_at, now)
}

/// Score `records` for `query` and return the best `limit` at or above `min_score`.
pub fn rank(
    records: Vec<MemoryRecord>,
    query: &str,
    limit: usize,
    min_score: f64,
    now: DateTime<Utc>,
) -> Vec<RecallHit> {
    let query_tokens = tokenize(query);
    if query_tokens.is_empty() || records.is_empty() || limit == 0 {
        return Vec::new();
    }
    let docs: Vec<Vec<String>> = records.iter().map(document_tokens).collect();
    let scores = bm25::score(&query_tokens, &docs);
    let mut hits: Vec<RecallHit> = records
        .into_iter()
        .zip(scores)
        .filter(|(_, relevance)| *relevance > 0.0)
        .map(|(record, relevance)| {
            let score = relevance * rerank_factor(&record, now);
            RecallHit { record, score }
        })
        .filter(|hit| hit.score >= min_score)
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.record.updated_at.cmp(&a.record.updated_at))
            .then(a.record.id.cmp(&b.record.id))
    });
    hits.truncate(limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::{MemoryKind, Source};
    use chrono::Duration;

    fn record(id: &str, content: &str, updated_at: DateTime<Utc>) -> MemoryRecord {
        MemoryRecord {
            id: id.into(),
            user: "alice".into(),
            namespace: "default".into(),
            kind: MemoryKind::Fact,
            key: "misc".into(),
            content: content.into(),
            importance: 0.5,
            confidence: 0.6,
            topics: Vec::new(),
            created_at: updated_at,
            updated_at,
            expires_at: None,
            source: Source {
                session: "s".into(),
                message_id: "m".into(),
                source_time: updated_at,
            },
            version: 1,
            history: Vec::new(),
        }
    }

    #[test]
    fn time_decay_halves_every_half_life() {
        let now = Utc::now();
        assert!((time_decay(now, now) - 1.0).abs() < 1e-9);
        assert!((time_decay(now - Duration::days(180), now) - 0.5).abs() < 1e-9);
        assert!((time_decay(now - Duration::days(360), now) - 0.25).abs() < 1e-9);
        assert!((time_decay(now + Duration::days(5), now) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn rerank_factor_weighs_confidence_and_importance() {
        let now = Utc::now();
        let mut r = record("a", "x", now);
        r.confidence = 1.0;
        r.importance = 1.0;
        assert!((rerank_factor(&r, now) - 1.0).abs() < 1e-9);
        r.confidence = 0.0;
        r.importance = 0.0;
        assert!((rerank_factor(&r, now) - 0.25).abs() < 1e-9);
    }

    #[test]
    fn equally_relevant_newer_record_ranks_first_and_ties_break_by_id() {
        let now = Utc::now();
        let old = record("b", "user budget is 5000", now - Duration::days(30));
        let new = record("c", "user budget is 8000", now);
        let twin = record("a", "user budget is 8000", now);
        let hits = rank(vec![old, new, twin], "budget", 10, 0.0, now);
        let ids: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b"]);
    }

    #[test]
    fn unrelated_records_threshold_and_limit_cut_results() {
        let now = Utc::now();
        let records = vec![
            record("a", "user likes sony headphones", now),
            record("b", "user lives in berlin", now),
            record("c", "headphones budget 300", now),
        ];
        let hits = rank(records.clone(), "headphones", 10, 0.0, now);
        assert_eq!(hits.len(), 2, "berlin shares no term");
        assert_eq!(rank(records.clone(), "headphones", 1, 0.0, now).len(), 1);
        assert!(rank(records.clone(), "headphones", 10, 100.0, now).is_empty());
        assert!(rank(records, "the and of", 10, 0.0, now).is_empty());
    }

    #[test]
    fn key_and_topics_are_searchable() {
        let now = Utc::now();
        let mut r = record("a", "5000元", now);
        r.key = "headphone_budget".into();
        r.topics = vec!["购物".into()];
        assert_eq!(rank(vec![r.clone()], "budget", 5, 0.0, now).len(), 1);
        assert_eq!(rank(vec![r], "购物清单", 5, 0.0, now).len(), 1);
    }
}
