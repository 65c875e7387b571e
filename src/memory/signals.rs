//! Context signals that recall adds on top of a memory's own relevance ([`super::recall`]):
//! what a memory sits next to, who said it, and when.
//!
//! * **Neighbours**: an episodic memory's relevance gains `neighbours ×` the relevance of the
//!   episodic memories just before and after it in its source session (same `source.session`,
//!   ordered by source time, then message id). An answer is often in the turn after the
//!   question that names the topic, and a fact is often split over two turns.
//! * **Session**: every episodic memory gains `session ×` the best relevance among the episodic
//!   memories of its source session, so the session that is about the query lifts its other
//!   turns a little.
//!
//!   Both lend only between events (kind `event`: turns of a conversation, in order).
//!   Preferences, facts and constraints are self-contained statements; two of them written in
//!   one session are not context for each other, and lending between them would recall a
//!   memory that has nothing to do with the query.
//! * **Speaker**: an episodic memory written as `Name: text` has a speaker. When the query
//!   names exactly one of the speakers among the candidates, that speaker's memories are
//!   multiplied by `1 + speaker` — a question about Caroline wants Caroline's own words first.
//!   While this signal is on, the speakers' names are not BM25 terms of the query
//!   ([`speaker_terms`], [`super::recall`]): in a conversation a speaker's name is in every
//!   turn they speak and in many they are addressed in, so as a term it only favours short
//!   turns that say little besides the name.
//! * **Time**: when the query names a period ("in June", "on 13 October, 2023",
//!   [`super::temporal::query_range`]), memories whose source time or resolved event time falls
//!   in it are multiplied by `1 + time`.

use std::collections::{HashMap, HashSet};

use super::record::{MemoryKind, MemoryRecord};
use super::temporal::{query_range, TimeRange};
use super::tokenize::tokenize;

/// Strength of each signal; 0 turns it off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    pub neighbours: f64,
    pub session: f64,
    pub speaker: f64,
    pub time: f64,
}

impl Signals {
    /// Relevance alone.
    pub const NONE: Signals = Signals {
        neighbours: 0.0,
        session: 0.0,
        speaker: 0.0,
        time: 0.0,
    };
    /// What recall uses by default (chosen on one LoCoMo conversation, checked on another).
    pub const DEFAULT: Signals = Signals {
        neighbours: 0.5,
        session: 0.2,
        speaker: 1.0,
        time: 1.0,
    };
}

impl Default for Signals {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Apply `signals` to `relevance` (one per record, in order) for `query`.
pub fn apply(records: &[&MemoryRecord], relevance: &mut [f64], query: &str, signals: &Signals) {
    if signals.neighbours > 0.0 || signals.session > 0.0 {
        let sessions = sessions(records);
        if signals.neighbours > 0.0 {
            add_neighbours(&sessions, relevance, signals.neighbours);
        }
        if signals.session > 0.0 {
            add_session_best(&sessions, relevance, signals.session);
        }
    }
    if signals.speaker > 0.0 {
        boost_speaker(records, relevance, query, signals.speaker);
    }
    if signals.time > 0.0 {
        if let Some(range) = query_range(query) {
            boost_period(records, relevance, &range, signals.time);
        }
    }
}

/// Indices of the episodic records grouped by source session, each group in conversation
/// order.
fn sessions(records: &[&MemoryRecord]) -> Vec<Vec<usize>> {
    let mut by_session: HashMap<&str, Vec<usize>> = HashMap::new();
    let events = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == MemoryKind::Event);
    for (i, r) in events {
        by_session
            .entry(r.source.session.as_str())
            .or_default()
            .push(i);
    }
    let mut groups: Vec<Vec<usize>> = by_session.into_values().collect();
    for group in &mut groups {
        group.sort_by(|a, b| {
            let (a, b) = (&records[*a], &records[*b]);
            a.source
                .source_time
                .cmp(&b.source.source_time)
                .then_with(|| natural_cmp(&a.source.message_id, &b.source.message_id))
                .then_with(|| a.id.cmp(&b.id))
        });
    }
    groups
}

/// Compare with digit runs as numbers (`D1:9` < `D1:10`), without allocating: sorting a
/// session's turns calls this O(n log n) times per recall.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    Runs(a).cmp(Runs(b))
}

/// The runs of a string: `(number, "")` for a run of ASCII digits, `(0, text)` for a run of
/// anything else.
struct Runs<'a>(&'a str);

impl<'a> Iterator for Runs<'a> {
    type Item = (u64, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.0;
        let first = rest.chars().next()?;
        let digit = first.is_ascii_digit();
        let len = rest
            .find(|c: char| c.is_ascii_digit() != digit)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(len);
        self.0 = tail;
        Some(if digit {
            (run.parse().unwrap_or(u64::MAX), "")
        } else {
            (0, run)
        })
    }
}

fn add_neighbours(sessions: &[Vec<usize>], relevance: &mut [f64], weight: f64) {
    let own = relevance.to_vec();
    for group in sessions {
        for (pos, &i) in group.iter().enumerate() {
            let before = pos.checked_sub(1).map_or(0.0, |p| own[group[p]]);
            let after = group.get(pos + 1).map_or(0.0, |&n| own[n]);
            relevance[i] += weight * (before + after);
        }
    }
}

fn add_session_best(sessions: &[Vec<usize>], relevance: &mut [f64], weight: f64) {
    for group in sessions {
        let best = group.iter().map(|&i| relevance[i]).fold(0.0, f64::max);
        for &i in group {
            relevance[i] += weight * best;
        }
    }
}

/// The speaker of an episodic record (kind `event`) written as `Name: text` (a short name of
/// at most three words before the first colon). A fact written `budget: 5000` has no speaker.
pub fn speaker(record: &MemoryRecord) -> Option<&str> {
    if record.kind != MemoryKind::Event {
        return None;
    }
    let (name, _) = record
        .content
        .split_once(':')
        .or_else(|| record.content.split_once('：'))?;
    let name = name.trim();
    let words = name.split_whitespace().count();
    (!name.is_empty() && name.chars().count() <= 40 && (1..=3).contains(&words)).then_some(name)
}

/// The terms of every speaker's name among `records` ([`speaker`]), as the tokeniser makes
/// them.
pub fn speaker_terms(records: &[&MemoryRecord]) -> HashSet<String> {
    let mut names: HashSet<&str> = HashSet::new();
    let mut terms = HashSet::new();
    for name in records.iter().filter_map(|r| speaker(r)) {
        if names.insert(name) {
            terms.extend(tokenize(name));
        }
    }
    terms
}

fn boost_speaker(records: &[&MemoryRecord], relevance: &mut [f64], query: &str, weight: f64) {
    let query_tokens = tokenize(query);
    let mut named: Vec<&str> = Vec::new();
    let mut seen: HashMap<&str, bool> = HashMap::new();
    for r in records {
        let Some(name) = speaker(r) else { continue };
        let mentioned = *seen.entry(name).or_insert_with(|| {
            let tokens = tokenize(name);
            !tokens.is_empty() && tokens.iter().all(|t| query_tokens.contains(t))
        });
        if mentioned && !named.contains(&name) {
            named.push(name);
        }
    }
    let [only] = named.as_slice() else { return };
    for (r, rel) in records.iter().zip(relevance.iter_mut()) {
        if speaker(r) == Some(*only) {
            *rel *= 1.0 + weight;
        }
    }
}

fn boost_period(records: &[&MemoryRecord], relevance: &mut [f64], range: &TimeRange, weight: f64) {
    for (r, rel) in records.iter().zip(relevance.iter_mut()) {
        let in_range =
            range.contains(r.source.source_time) || r.event_time.is_some_and(|t| range.contains(t));
        if in_range {
            *rel *= 1.0 + weight;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::Source;
    use chrono::{Duration, TimeZone, Utc};

    fn turn(id: &str, session: &str, secs: i64, content: &str) -> MemoryRecord {
        let at = Utc.with_ymd_and_hms(2023, 5, 8, 12, 0, 0).unwrap() + Duration::seconds(secs);
        MemoryRecord {
            id: id.into(),
            user: "u".into(),
            namespace: "default".into(),
            kind: MemoryKind::Event,
            key: id.into(),
            content: content.into(),
            importance: 0.5,
            confidence: 0.5,
            topics: Vec::new(),
            created_at: at,
            updated_at: at,
            expires_at: None,
            source: Source {
                session: session.into(),
                message_id: id.into(),
                source_time: at,
            },
            version: 1,
            history: Vec::new(),
            event_time: None,
            demoted_at: None,
        }
    }

    fn run(records: &[MemoryRecord], relevance: &[f64], query: &str, s: Signals) -> Vec<f64> {
        let refs: Vec<&MemoryRecord> = records.iter().collect();
        let mut rel = relevance.to_vec();
        apply(&refs, &mut rel, query, &s);
        rel
    }

    #[test]
    fn neighbours_in_the_same_session_lend_relevance_in_conversation_order() {
        let records = [
            turn("D1:10", "s1", 0, "A: b"),
            turn("D1:9", "s1", 0, "A: a"),
            turn("D2:1", "s2", 0, "A: c"),
        ];
        let s = Signals {
            neighbours: 0.5,
            ..Signals::NONE
        };
        // D1:9 comes before D1:10 (natural order at equal times); s2 is another session.
        assert_eq!(run(&records, &[0.0, 1.0, 1.0], "q", s), vec![0.5, 1.0, 1.0]);
    }

    #[test]
    fn natural_order_compares_digit_runs_as_numbers() {
        use std::cmp::Ordering::*;
        assert_eq!(natural_cmp("D1:9", "D1:10"), Less);
        assert_eq!(natural_cmp("D2:1", "D10:1"), Less);
        assert_eq!(natural_cmp("D1:10", "D1:10"), Equal);
        assert_eq!(natural_cmp("m7", "m7b"), Less);
        assert_eq!(natural_cmp("", "a"), Less);
    }

    #[test]
    fn facts_of_one_session_lend_each_other_nothing() {
        let mut records = [
            turn("a", "s1", 0, "lives in Hangzhou"),
            turn("b", "s1", 1, "parcel arrives in two days"),
        ];
        for r in &mut records {
            r.kind = MemoryKind::Fact;
        }
        let s = Signals {
            neighbours: 0.5,
            session: 0.2,
            ..Signals::NONE
        };
        assert_eq!(run(&records, &[1.0, 0.0], "q", s), vec![1.0, 0.0]);
    }

    #[test]
    fn session_best_lifts_every_memory_of_that_session() {
        let records = [
            turn("a", "s1", 0, "x"),
            turn("b", "s1", 1, "y"),
            turn("c", "s2", 2, "z"),
        ];
        let s = Signals {
            session: 0.2,
            ..Signals::NONE
        };
        let got = run(&records, &[1.0, 0.0, 0.5], "q", s);
        assert!(
            (got[0] - 1.2).abs() < 1e-9
                && (got[1] - 0.2).abs() < 1e-9
                && (got[2] - 0.6).abs() < 1e-9
        );
    }

    #[test]
    fn a_query_naming_one_speaker_boosts_that_speakers_memories() {
        let records = [
            turn("a", "s", 0, "Caroline: I went hiking"),
            turn("b", "s", 1, "Melanie: I went hiking too"),
            turn("c", "s", 2, "no speaker here, just a fact"),
        ];
        let s = Signals {
            speaker: 1.0,
            ..Signals::NONE
        };
        assert_eq!(
            run(
                &records,
                &[1.0, 1.0, 1.0],
                "Where did Caroline's hike go?",
                s
            ),
            vec![2.0, 1.0, 1.0]
        );
        assert_eq!(
            run(
                &records,
                &[1.0, 1.0, 1.0],
                "Did Caroline and Melanie hike?",
                s
            ),
            vec![1.0, 1.0, 1.0],
            "two speakers named: no preference"
        );
        assert_eq!(speaker(&records[2]), None, "a long prefix is not a name");
        let mut fact = turn("d", "s", 3, "budget: 5000 yuan");
        assert_eq!(speaker(&fact), Some("budget"));
        fact.kind = MemoryKind::Fact;
        assert_eq!(
            speaker(&fact),
            None,
            "only conversation turns have speakers"
        );
    }

    #[test]
    fn speaker_terms_are_the_tokens_of_every_speakers_name() {
        let mut fact = turn("c", "s", 2, "budget: 5000");
        fact.kind = MemoryKind::Fact;
        let records = [
            turn("a", "s", 0, "Caroline: hi"),
            turn("b", "s", 1, "Mel Smith: hello Caroline"),
            fact,
        ];
        let refs: Vec<&MemoryRecord> = records.iter().collect();
        let mut terms: Vec<String> = speaker_terms(&refs).into_iter().collect();
        terms.sort();
        assert_eq!(terms, tokenize("caroline mel smith"));
    }

    #[test]
    fn a_query_naming_a_period_boosts_memories_of_that_period() {
        let mut resolved = turn("b", "s", 0, "B: painted it last year");
        resolved.event_time = Some(Utc.with_ymd_and_hms(2022, 5, 8, 0, 0, 0).unwrap());
        let records = [turn("a", "s", 0, "A: today"), resolved];
        let s = Signals {
            time: 1.0,
            ..Signals::NONE
        };
        assert_eq!(
            run(&records, &[1.0, 1.0], "What happened in 2022?", s),
            vec![1.0, 2.0]
        );
        assert_eq!(
            run(&records, &[1.0, 1.0], "What happened in May 2023?", s),
            vec![2.0, 2.0],
            "both were said in May 2023"
        );
        assert_eq!(
            run(&records, &[1.0, 1.0], "What happened in June?", s),
            vec![1.0, 1.0]
        );
        assert_eq!(
            run(&records, &[1.0, 1.0], "What happened?", s),
            vec![1.0, 1.0]
        );
    }
}
