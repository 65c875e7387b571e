//! Merge rules for memory writes, as pure functions over records (the store does the I/O).
//!
//! * A new memory starts at confidence [`NEW_CONFIDENCE`], importance clamped to `0..=1`, and
//!   expires `expiry_days` after it was written when the update sets it.
//! * An update to an existing memory replaces its content, pushes the previous content onto
//!   `history` (only when it changed), bumps `version`, raises confidence by
//!   [`CONFIDENCE_STEP`] (capped at 1), takes the incoming kind, importance, source and expiry
//!   (no `expiry_days` means long-term), keeps the old topics when the update brings none, and
//!   keeps `id`, `key` and `created_at`.
//! * A write whose *source time* is older than the stored record's is stale
//!   ([`is_stale`]): the store ignores it, so a late-arriving old write never overwrites a newer
//!   fact. Equal source times are not stale.
//! * Two contents are near-duplicates when their token sets have a Jaccard similarity of at
//!   least [`NEAR_DUPLICATE_JACCARD`].

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};

use super::record::{MemoryKind, MemoryRecord, MemoryUpdate, Source};
use super::tokenize::tokenize;

/// Confidence of a memory seen once.
pub const NEW_CONFIDENCE: f32 = 0.6;
/// Confidence gained each time a memory is confirmed or updated.
pub const CONFIDENCE_STEP: f32 = 0.1;
/// Token-set Jaccard similarity at or above which two contents are the same memory.
pub const NEAR_DUPLICATE_JACCARD: f64 = 0.8;

/// The canonical form of a slot key: trimmed, lowercase, spaces and dashes as `_`.
pub fn normalize_key(key: &str) -> String {
    key.trim()
        .chars()
        .map(|c| match c {
            ' ' | '-' => '_',
            c => c.to_lowercase().next().unwrap_or(c),
        })
        .collect()
}

/// Clamp a model-given score into `0..=1`; a non-number becomes the neutral `0.5`.
pub fn clamp_unit(x: f32) -> f32 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// Whether a write from `incoming` is older than what `existing` already holds.
pub fn is_stale(existing: &MemoryRecord, incoming: &Source) -> bool {
    incoming.source_time < existing.source.source_time
}

fn expires_at(update: &MemoryUpdate, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    update
        .expiry_days
        .map(|days| now + Duration::days(i64::from(days)))
}

/// A fresh record for an update that matched nothing.
pub fn new_record(
    user: &str,
    namespace: &str,
    update: &MemoryUpdate,
    source: &Source,
    now: DateTime<Utc>,
) -> MemoryRecord {
    MemoryRecord {
        id: uuid::Uuid::now_v7().to_string(),
        user: user.to_string(),
        namespace: namespace.to_string(),
        kind: update.kind,
        key: normalize_key(&update.key),
        content: update.content.trim().to_string(),
        importance: clamp_unit(update.importance),
        confidence: NEW_CONFIDENCE,
        topics: update.topics.clone(),
        created_at: now,
        updated_at: now,
        expires_at: expires_at(update, now),
        source: source.clone(),
        version: 1,
        history: Vec::new(),
        event_time: super::temporal::event_time(&update.content, source.source_time),
        demoted_at: None,
    }
}

/// `existing` after applying `update` (the caller has checked it is not stale).
pub fn merged(
    existing: &MemoryRecord,
    update: &MemoryUpdate,
    source: &Source,
    now: DateTime<Utc>,
) -> MemoryRecord {
    let content = update.content.trim().to_string();
    let mut history = existing.history.clone();
    if content != existing.content {
        history.push(existing.content.clone());
    }
    let topics = if update.topics.is_empty() {
        existing.topics.clone()
    } else {
        update.topics.clone()
    };
    MemoryRecord {
        kind: update.kind,
        content,
        importance: clamp_unit(update.importance),
        confidence: (existing.confidence + CONFIDENCE_STEP).min(1.0),
        topics,
        updated_at: now,
        expires_at: expires_at(update, now),
        source: source.clone(),
        version: existing.version.saturating_add(1),
        history,
        event_time: super::temporal::event_time(&update.content, source.source_time),
        demoted_at: None,
        ..existing.clone()
    }
}

/// Jaccard similarity of the token sets of two texts (`0.0` when either has no tokens).
pub fn content_similarity(a: &str, b: &str) -> f64 {
    let a: HashSet<String> = tokenize(a).into_iter().collect();
    let b: HashSet<String> = tokenize(b).into_iter().collect();
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(&b).count();
    shared as f64 / (a.len() + b.len() - shared) as f64
}

/// The record among `candidates` (already one user's, one namespace's) of the same `kind`
/// whose content is most similar to `content`, if it reaches [`NEAR_DUPLICATE_JACCARD`].
/// Ties go to the most recently updated record, then the smaller id.
pub fn near_duplicate<'a>(
    candidates: &'a [MemoryRecord],
    kind: MemoryKind,
    content: &str,
) -> Option<(&'a MemoryRecord, f64)> {
    candidates
        .iter()
        .filter(|r| r.kind == kind)
        .map(|r| (r, content_similarity(&r.content, content)))
        .filter(|(_, sim)| *sim >= NEAR_DUPLICATE_JACCARD)
        .max_by(|(ra, sa), (rb, sb)| {
            sa.total_cmp(sb)
                .then(ra.updated_at.cmp(&rb.updated_at))
                .then(rb.id.cmp(&ra.id))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::UpdateOp;

    fn source(minutes: i64) -> Source {
        Source {
            session: "s1".into(),
            message_id: format!("m{minutes}"),
            source_time: DateTime::<Utc>::UNIX_EPOCH + Duration::minutes(minutes),
        }
    }

    fn update(key: &str, content: &str) -> MemoryUpdate {
        MemoryUpdate {
            op: UpdateOp::Add,
            kind: MemoryKind::Fact,
            key: key.into(),
            content: content.into(),
            importance: 0.7,
            expiry_days: None,
            topics: vec!["shopping".into()],
        }
    }

    #[test]
    fn new_record_starts_at_base_confidence_with_clamped_importance_and_expiry() {
        let now = Utc::now();
        let mut u = update("Budget Limit", " 预算5000元 ");
        u.importance = 3.0;
        u.expiry_days = Some(7);
        let r = new_record("alice", "default", &u, &source(1), now);
        assert_eq!(r.key, "budget_limit");
        assert_eq!(r.content, "预算5000元");
        assert_eq!(r.importance, 1.0);
        assert_eq!(r.confidence, NEW_CONFIDENCE);
        assert_eq!(r.version, 1);
        assert_eq!(r.expires_at, Some(now + Duration::days(7)));
        u.importance = f32::NAN;
        assert_eq!(new_record("a", "d", &u, &source(1), now).importance, 0.5);
    }

    #[test]
    fn merge_pushes_history_bumps_version_and_confidence_keeps_identity() {
        let t0 = Utc::now();
        let first = new_record("alice", "d", &update("budget", "5000"), &source(1), t0);
        let t1 = t0 + Duration::hours(1);
        let second = merged(&first, &update("budget", "8000"), &source(2), t1);
        assert_eq!(second.id, first.id);
        assert_eq!(second.created_at, t0);
        assert_eq!(second.updated_at, t1);
        assert_eq!(second.content, "8000");
        assert_eq!(second.history, ["5000"]);
        assert_eq!(second.version, 2);
        assert!((second.confidence - 0.7).abs() < 1e-6);
        let mut high = second.clone();
        high.confidence = 0.95;
        let same = merged(&high, &update("budget", "8000"), &source(3), t1);
        assert_eq!(same.confidence, 1.0);
        assert_eq!(same.history, ["5000"], "unchanged content adds no history");
    }

    #[test]
    fn older_source_time_is_stale_equal_is_not() {
        let r = new_record("a", "d", &update("k", "v"), &source(10), Utc::now());
        assert!(is_stale(&r, &source(9)));
        assert!(!is_stale(&r, &source(10)));
        assert!(!is_stale(&r, &source(11)));
    }

    #[test]
    fn near_duplicate_needs_same_kind_and_high_overlap() {
        let now = Utc::now();
        let a = new_record(
            "a",
            "d",
            &update("diet", "user is vegetarian and avoids meat and fish"),
            &source(1),
            now,
        );
        let candidates = vec![a];
        let hit = near_duplicate(
            &candidates,
            MemoryKind::Fact,
            "User is vegetarian, avoids meat and fish!",
        );
        assert!(hit.is_some());
        assert!(near_duplicate(
            &candidates,
            MemoryKind::Preference,
            "user is vegetarian and avoids meat and fish"
        )
        .is_none());
        assert!(near_duplicate(&candidates, MemoryKind::Fact, "user is vegetarian").is_none());
        assert_eq!(content_similarity("", "x y"), 0.0);
    }
}
