//! Ranking for recall, as a pure function over already-filtered records.
//!
//! The store filters first (one user, optional namespace, kinds and topics, not expired, not
//! demoted); [`rank_candidates`] then scores each candidate:
//!
//! ```text
//! relevance = w_bm25 · bm25 / max(bm25)  +  w_vec · scaled(cosine)
//! relevance → context signals (neighbours, session, speaker, time: super::signals)
//! score     = relevance · rerank_factor
//! factor    = (0.5 + 0.5·confidence) · (0.5 + 0.5·importance) · freshness
//! freshness = 0.5^(age_days / 180)                  preferences, facts, constraints
//!           = 0.75 + 0.25 · 0.5^(age_days / 180)    events
//! ```
//!
//! * BM25 ([`super::bm25`]) of the query's tokens against the record's `key` (underscores as
//!   spaces) + `content` + `topics`, with IDF over exactly the candidates, divided by the best
//!   candidate's BM25 so it lies in `0..=1` (the best term match of a query is 1). With the
//!   speaker signal on, tokens naming a speaker of the candidates are left to that signal
//!   ([`super::signals::speaker_terms`]) unless the query has no other token.
//! * cosine of the query vector and the record's vector by the same embedder, scaled over the
//!   candidates from `lo = max(min_cosine, lowest cosine)` to the highest (the closest is 1,
//!   anything at or below `lo` 0); a record without a vector contributes 0 here. Raw cosines of
//!   a small embedder sit in a narrow band, so the scaling is what lets the vector half reorder
//!   anything; the absolute floor `min_cosine` is what keeps a memory unrelated to the query
//!   at 0 when the candidates are few (min-max alone would lift the better of two unrelated
//!   memories to 1).
//! * Without vectors (no embedder, or [`rank`]) relevance is the normalised BM25 alone.
//!
//! The fusion is a *weighted* sum of normalised scores, not rank fusion: with a small embedder,
//! equal-weight rank fusion lets the embedder's confident-but-wrong neighbours displace exact
//! term matches (DESIGN §7; on LoCoMo, reciprocal-rank fusion scored below BM25 alone).
//! Confidence and importance each scale a score by 0.5–1, so relevance stays the main signal
//! while they settle near-ties. State-like memories (preferences, facts, constraints) go stale:
//! their score halves every 180 days, so a newer fact outranks an older, similar one. An event
//! stays what happened: its freshness only scales by 0.75–1, so a months-old event that
//! answers the query is not pushed below fresh chatter (a full 180-day half-life cost LoCoMo's
//! episodic recall a tenth of its hits). Records with score 0 are never returned; the rest are cut at `min_score`, sorted by
//! score (ties: newer `updated_at`, then smaller id) and cut to `limit`.

use chrono::{DateTime, Utc};

use std::collections::HashMap;

use super::bm25;
use super::embed::cosine;
use super::record::{MemoryKind, MemoryRecord, RecallHit};
pub use super::signals::Signals;
use super::tokenize::tokenize;

/// Half-life of the time decay, in days.
pub const HALF_LIFE_DAYS: f64 = 180.0;
/// Default `[memory.fusion] min_cosine`: the distilled static embedder puts unrelated short
/// memories at cosine −0.1–0.2 of a query and related ones at 0.4–0.8.
pub const DEFAULT_MIN_COSINE: f64 = 0.3;
/// Share of an event's rerank factor that freshness cannot take away.
pub const EVENT_FRESHNESS_FLOOR: f64 = 0.75;

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
    let floor = match record.kind {
        MemoryKind::Event => EVENT_FRESHNESS_FLOOR,
        MemoryKind::Preference | MemoryKind::Fact | MemoryKind::Constraint => 0.0,
    };
    (0.5 + 0.5 * unit(record.confidence))
        * (0.5 + 0.5 * unit(record.importance))
        * (floor + (1.0 - floor) * time_decay(record.updated_at, now))
}

/// Weights of the two relevance signals and the vector half's cosine floor (see the module
/// doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub bm25: f64,
    pub vector: f64,
    pub min_cosine: f64,
}

impl Weights {
    /// BM25 only.
    pub const BM25: Weights = Weights {
        bm25: 1.0,
        vector: 0.0,
        min_cosine: DEFAULT_MIN_COSINE,
    };
    /// Vector similarity only.
    pub const VECTOR: Weights = Weights {
        bm25: 0.0,
        vector: 1.0,
        min_cosine: DEFAULT_MIN_COSINE,
    };

    /// The weights of `[memory.fusion]`.
    pub fn from_config(config: &crate::config::FusionConfig) -> Self {
        Self {
            bm25: config.bm25_weight,
            vector: config.vector_weight,
            min_cosine: config.min_cosine,
        }
    }
}

/// The query's vector and the candidates' vectors (same embedder), by record id.
pub struct QueryVectors<'a> {
    pub query: &'a [f32],
    pub records: &'a HashMap<String, Vec<f32>>,
}

/// One candidate as ranking sees it: the record, its BM25 tokens and its vector (by the
/// query's embedder), all borrowed from the caller's index.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub record: &'a MemoryRecord,
    pub tokens: &'a [String],
    pub vector: Option<&'a [f32]>,
}

/// How to rank: fusion weights, context signals, cut-offs and the clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranking {
    pub weights: Weights,
    pub signals: Signals,
    pub limit: usize,
    pub min_score: f64,
    pub now: DateTime<Utc>,
}

/// Score `records` for `query` by BM25 alone and return the best `limit` at or above
/// `min_score`.
pub fn rank(
    records: Vec<MemoryRecord>,
    query: &str,
    limit: usize,
    min_score: f64,
    now: DateTime<Utc>,
) -> Vec<RecallHit> {
    rank_fused(records, query, None, Weights::BM25, limit, min_score, now)
}

/// Score `records` by the weighted fusion of normalised BM25 and (when `vectors` is given)
/// cosine similarity, without context signals; rerank, cut at `min_score` and `limit`.
pub fn rank_fused(
    records: Vec<MemoryRecord>,
    query: &str,
    vectors: Option<QueryVectors<'_>>,
    weights: Weights,
    limit: usize,
    min_score: f64,
    now: DateTime<Utc>,
) -> Vec<RecallHit> {
    let tokens: Vec<Vec<String>> = records.iter().map(document_tokens).collect();
    let candidates: Vec<Candidate<'_>> = records
        .iter()
        .zip(&tokens)
        .map(|(record, tokens)| Candidate {
            record,
            tokens,
            vector: vectors
                .as_ref()
                .and_then(|v| v.records.get(&record.id))
                .map(Vec::as_slice),
        })
        .collect();
    let ranking = Ranking {
        weights,
        signals: Signals::NONE,
        limit,
        min_score,
        now,
    };
    let query_vector = vectors.as_ref().map(|v| v.query);
    rank_candidates(&candidates, query, query_vector, &ranking)
        .into_iter()
        .map(|(i, score)| RecallHit {
            record: records[i].clone(),
            score,
        })
        .collect()
}

/// The best candidates for `query`: `(index into candidates, score)`, best first, at most
/// `ranking.limit`, none below `ranking.min_score` or at 0 (see the module doc).
pub fn rank_candidates(
    candidates: &[Candidate<'_>],
    query: &str,
    query_vector: Option<&[f32]>,
    ranking: &Ranking,
) -> Vec<(usize, f64)> {
    if candidates.is_empty() || ranking.limit == 0 {
        return Vec::new();
    }
    let records: Vec<&MemoryRecord> = candidates.iter().map(|c| c.record).collect();
    let mut query_tokens = tokenize(query);
    if ranking.signals.speaker > 0.0 {
        let names = super::signals::speaker_terms(&records);
        let topical: Vec<String> = query_tokens
            .iter()
            .filter(|t| !names.contains(*t))
            .cloned()
            .collect();
        if !topical.is_empty() {
            query_tokens = topical;
        }
    }
    let mut relevance = relevance(candidates, &query_tokens, query_vector, ranking.weights);
    super::signals::apply(&records, &mut relevance, query, &ranking.signals);
    let mut hits: Vec<(usize, f64)> = relevance
        .into_iter()
        .enumerate()
        .filter(|(_, relevance)| *relevance > 0.0)
        .map(|(i, relevance)| (i, relevance * rerank_factor(records[i], ranking.now)))
        .filter(|(_, score)| *score >= ranking.min_score)
        .collect();
    hits.sort_by(|(a, sa), (b, sb)| {
        sb.total_cmp(sa)
            .then(records[*b].updated_at.cmp(&records[*a].updated_at))
            .then(records[*a].id.cmp(&records[*b].id))
    });
    hits.truncate(ranking.limit);
    hits
}

/// Fused relevance of each candidate, in order.
fn relevance(
    candidates: &[Candidate<'_>],
    query_tokens: &[String],
    query_vector: Option<&[f32]>,
    weights: Weights,
) -> Vec<f64> {
    let lexical = if query_tokens.is_empty() || weights.bm25 <= 0.0 {
        vec![0.0; candidates.len()]
    } else {
        let docs: Vec<&[String]> = candidates.iter().map(|c| c.tokens).collect();
        let scores = bm25::score(query_tokens, &docs);
        let best = scores.iter().copied().fold(0.0_f64, f64::max);
        scores
            .into_iter()
            .map(|s| if best > 0.0 { s / best } else { 0.0 })
            .collect()
    };
    let Some(query_vector) = query_vector.filter(|_| weights.vector > 0.0) else {
        return lexical;
    };
    let similarity = scale_cosines(
        candidates
            .iter()
            .map(|c| c.vector.map(|v| cosine(query_vector, v)))
            .collect(),
        weights.min_cosine,
    );
    lexical
        .iter()
        .zip(similarity)
        .map(|(lex, sim)| weights.bm25 * lex + weights.vector * sim)
        .collect()
}

/// Scale the present cosines to `0..=1` from `lo = max(floor, lowest)` (0) to the highest (1);
/// values at or below `floor`, and absent ones, are 0; all equal and above the floor → 1.
fn scale_cosines(values: Vec<Option<f64>>, floor: f64) -> Vec<f64> {
    let present = values.iter().flatten().copied();
    let (lo, hi) = present.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let lo = lo.max(floor);
    values
        .into_iter()
        .map(|v| match v {
            Some(x) if x <= floor => 0.0,
            Some(x) if hi > lo => ((x - lo) / (hi - lo)).max(0.0),
            Some(_) => 1.0,
            None => 0.0,
        })
        .collect()
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
            event_time: None,
            demoted_at: None,
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
    fn events_keep_most_of_their_score_with_age_while_facts_go_stale() {
        let now = Utc::now();
        let mut r = record("a", "x", now - Duration::days(360));
        r.confidence = 1.0;
        r.importance = 1.0;
        assert!(
            (rerank_factor(&r, now) - 0.25).abs() < 1e-9,
            "a fact halves every 180 days"
        );
        r.kind = MemoryKind::Event;
        assert!(
            (rerank_factor(&r, now) - 0.8125).abs() < 1e-9,
            "an event keeps 0.75 + 0.25·0.25"
        );
    }

    #[test]
    fn cosines_scale_between_lowest_and_highest_and_absent_ones_count_zero() {
        assert_eq!(
            scale_cosines(vec![Some(0.5), None, Some(1.0), Some(0.75)], 0.0),
            vec![0.0, 0.0, 1.0, 0.5]
        );
        assert_eq!(
            scale_cosines(vec![Some(0.4), Some(0.4)], 0.3),
            vec![1.0, 1.0]
        );
        assert_eq!(scale_cosines(vec![None], 0.3), vec![0.0]);
    }

    #[test]
    fn cosines_at_or_below_the_floor_count_zero_however_few_the_candidates() {
        assert_eq!(
            scale_cosines(vec![Some(0.2), Some(0.1)], 0.3),
            vec![0.0, 0.0],
            "the better of two unrelated memories is still unrelated"
        );
        assert_eq!(
            scale_cosines(vec![Some(0.75), Some(0.125), Some(0.5)], 0.25),
            vec![1.0, 0.0, 0.5],
            "the scale starts at the floor, not at the unrelated lowest"
        );
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
    fn fusion_adds_a_paraphrase_that_shares_no_term_and_keeps_exact_match_first() {
        let now = Utc::now();
        let records = vec![
            record("exact", "user budget is 5000 yuan", now),
            record("para", "can spend at most five thousand", now),
            record("other", "lives in berlin", now),
        ];
        let vectors: HashMap<String, Vec<f32>> = [
            ("exact".to_string(), vec![0.8, 0.6]),
            ("para".to_string(), vec![0.6, 0.8]),
            ("other".to_string(), vec![-1.0, 0.0]),
        ]
        .into_iter()
        .collect();
        let q = QueryVectors {
            query: &[0.6, 0.8],
            records: &vectors,
        };
        let weights = Weights {
            bm25: 0.6,
            vector: 0.4,
            min_cosine: 0.0,
        };
        let hits = rank_fused(records.clone(), "budget", Some(q), weights, 5, 0.0, now);
        let ids: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
        assert_eq!(ids, ["exact", "para"], "negative similarity never counts");
        assert!(
            rank(records, "budget", 5, 0.0, now).len() == 1,
            "BM25 alone misses it"
        );
    }

    #[test]
    fn with_the_speaker_signal_a_speakers_name_is_no_query_term() {
        let now = Utc::now();
        let mut records = vec![
            record("addressed", "Caroline: Thanks, Melanie!", now),
            record(
                "answer",
                "Melanie: We camped in the forest with the kids",
                now,
            ),
            record("other", "Caroline: I painted a lake", now),
        ];
        for r in &mut records {
            r.kind = MemoryKind::Event;
        }
        let tokens: Vec<Vec<String>> = records.iter().map(document_tokens).collect();
        let candidates: Vec<Candidate<'_>> = records
            .iter()
            .zip(&tokens)
            .map(|(record, tokens)| Candidate {
                record,
                tokens,
                vector: None,
            })
            .collect();
        let ranking = |signals| Ranking {
            weights: Weights::BM25,
            signals,
            limit: 10,
            min_score: 0.0,
            now,
        };
        let ids = |query: &str, signals| -> Vec<&str> {
            rank_candidates(&candidates, query, None, &ranking(signals))
                .into_iter()
                .map(|(i, _)| records[i].id.as_str())
                .collect()
        };
        let speaker = Signals {
            speaker: 1.0,
            ..Signals::NONE
        };
        assert_eq!(
            ids("Where has Melanie camped?", speaker),
            ["answer"],
            "a turn that only names Melanie is not about camping"
        );
        assert_eq!(
            ids("Where has Melanie camped?", Signals::NONE),
            ["answer", "addressed"],
            "without the speaker signal the name is an ordinary term"
        );
        assert_eq!(
            ids("Melanie", speaker),
            ["answer", "addressed"],
            "a query of nothing but a name still matches it"
        );
    }

    #[test]
    fn best_bm25_match_is_normalised_to_one() {
        let now = Utc::now();
        let mut r = record("a", "headphones", now);
        r.confidence = 1.0;
        r.importance = 1.0;
        let hits = rank(vec![r], "headphones", 5, 0.0, now);
        assert!((hits[0].score - 1.0).abs() < 1e-9, "{}", hits[0].score);
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
