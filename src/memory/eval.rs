//! Memory recall evaluation on the LoCoMo JSON format (`hermes eval memory`).
//!
//! Input: a list of samples, each `{sample_id, conversation, qa}`; `conversation` holds
//! `session_N` lists of `{speaker, dia_id, text}` and `session_N_date_time` strings
//! (`"9:10 am on 3 March, 2025"`, `"21:30 on 18 June, 2025"`); `qa` holds
//! `{question, evidence: [dia_id], category}`.
//!
//! Every turn is stored as an episodic record (kind `event`, key = its dia_id, content
//! `"<speaker>: <text>"`, plus `" [shares <caption>]"` when the turn shared an image with a
//! caption, as LoCoMo's own prompts render it) for the sample's own user `eval-<sample_id>`,
//! bypassing the merge rules so no turn is folded into another. A turn's source is its session
//! (`<sample_id>/session_<n>`) and its source time the session's time plus one second per turn
//! (so turns keep their order); relative dates in its text are resolved against that time
//! ([`super::temporal`]). Vectors are computed once, at ingestion. Every question with evidence
//! is then recalled for that user at the time of the sample's last session, with no score
//! threshold and a limit of the largest k, by the chosen retriever: `bm25` (weights 1/0),
//! `vector` (0/1) or `hybrid` (the configured `[memory.fusion]` weights), each with the
//! service's context signals ([`super::signals`]). Reported per k, overall and per category:
//! any@k (some evidence turn in the top k), all@k (every evidence turn in the top k),
//! fraction@k (mean share of evidence in the top k), plus p50/p99 latency of the recall calls
//! and the tokens of the memory context a turn would get (the top `recall_limit` hits rendered
//! as the turn's memory block) per question. Questions without evidence are counted and
//! skipped.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Instant;

use chrono::{DateTime, Duration, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::recall::Weights;
use super::record::{MemoryKind, MemoryRecord, RecallFilter, Source};
use super::service::{MemoryService, RecallQuery};
use super::store::MemoryError;

/// Namespace of evaluation records.
pub const EVAL_NAMESPACE: &str = "locomo";

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error("cannot read dataset {path}: {reason}; pass a LoCoMo JSON file with --dataset")]
    Read { path: String, reason: String },
    #[error("dataset {path} is not in the LoCoMo format: {reason}")]
    Format { path: String, reason: String },
    #[error("the `{0}` retriever needs an embedder; run scripts/fetch-embedder.sh to install the default static one, or set [memory.embedder] kind = \"local\" or \"openai\"")]
    NoEmbedder(&'static str),
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Which signals recall uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    Bm25,
    Vector,
    Hybrid,
}

impl Retriever {
    pub fn name(self) -> &'static str {
        match self {
            Self::Bm25 => "bm25",
            Self::Vector => "vector",
            Self::Hybrid => "hybrid",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    pub sample_id: String,
    pub conversation: serde_json::Map<String, Value>,
    pub qa: Vec<Qa>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Qa {
    pub question: String,
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub category: Value,
}

#[derive(Debug, Clone, Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

/// One stored turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    /// The caption of an image the turn shared.
    pub caption: Option<String>,
    /// The session's number and time, and the turn's position in it.
    pub session: u32,
    pub at: DateTime<Utc>,
    pub position: u32,
}

impl Turn {
    /// `"<speaker>: <text>"`, with `" [shares <caption>]"` for a shared image.
    pub fn content(&self) -> String {
        match self
            .caption
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
        {
            Some(caption) => format!("{}: {} [shares {caption}]", self.speaker, self.text),
            None => format!("{}: {}", self.speaker, self.text),
        }
    }

    /// When it was said: the session's time plus one second per earlier turn.
    pub fn said_at(&self) -> DateTime<Utc> {
        self.at + Duration::seconds(i64::from(self.position))
    }
}

/// Recall figures at one k.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AtK {
    pub k: usize,
    pub questions: usize,
    pub any: f64,
    pub all: f64,
    pub fraction: f64,
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub retriever: String,
    pub embedder: Option<String>,
    pub samples: usize,
    pub records: usize,
    pub questions: usize,
    pub skipped_no_evidence: usize,
    pub overall: Vec<AtK>,
    pub per_category: BTreeMap<String, Vec<AtK>>,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
    /// Tokens of the memory context per question (the top `context_hits` hits rendered as a
    /// turn's memory block), when a token counter was given.
    #[serde(default)]
    pub context_hits: usize,
    #[serde(default)]
    pub context_tokens_mean: f64,
    #[serde(default)]
    pub context_tokens_p99: f64,
}

/// Read a LoCoMo JSON file.
pub fn load(path: &Path) -> Result<Vec<Sample>, EvalError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Read {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| EvalError::Format {
        path: shown,
        reason: e.to_string(),
    })
}

/// Parse `"9:10 am on 3 March, 2025"` or `"21:30 on 18 June, 2025"` (as UTC).
pub fn parse_session_time(text: &str) -> Option<DateTime<Utc>> {
    let cleaned = text.trim().replace("  ", " ");
    [
        "%I:%M %p on %d %B, %Y",
        "%H:%M on %d %B, %Y",
        "%I:%M%p on %d %B, %Y",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(&cleaned, f).ok())
    .map(|naive| Utc.from_utc_datetime(&naive))
}

/// The sample's turns in session order. A session without a readable date is placed one day
/// after the previous one (the first at 2000-01-01).
pub fn turns(sample: &Sample) -> Result<Vec<Turn>, EvalError> {
    let format = |reason: String| EvalError::Format {
        path: sample.sample_id.clone(),
        reason,
    };
    let mut sessions: Vec<(u32, &Value)> = sample
        .conversation
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("session_")?.parse::<u32>().ok()?;
            Some((n, v))
        })
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    let mut out = Vec::new();
    let mut previous = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single();
    for (n, value) in sessions {
        let date = sample
            .conversation
            .get(&format!("session_{n}_date_time"))
            .and_then(Value::as_str)
            .and_then(parse_session_time);
        let at = date
            .or_else(|| previous.map(|p| p + Duration::days(1)))
            .ok_or_else(|| format(format!("session_{n} has no usable date")))?;
        previous = Some(at);
        let raw: Vec<RawTurn> = serde_json::from_value(value.clone())
            .map_err(|e| format(format!("session_{n}: {e}")))?;
        out.extend(raw.into_iter().enumerate().map(|(i, t)| Turn {
            dia_id: t.dia_id,
            speaker: t.speaker,
            text: t.text,
            caption: t.blip_caption,
            session: n,
            at,
            position: u32::try_from(i).unwrap_or(u32::MAX),
        }));
    }
    Ok(out)
}

/// The evaluation user of a sample.
pub fn user_of(sample: &Sample) -> String {
    format!("eval-{}", sample.sample_id.replace('\0', "_"))
}

fn record_of(user: &str, sample_id: &str, turn: &Turn) -> MemoryRecord {
    MemoryRecord {
        id: format!("{sample_id}:{}", turn.dia_id),
        user: user.to_string(),
        namespace: EVAL_NAMESPACE.to_string(),
        kind: MemoryKind::Event,
        key: turn.dia_id.to_lowercase(),
        content: turn.content(),
        importance: 0.5,
        confidence: 0.6,
        topics: Vec::new(),
        created_at: turn.said_at(),
        updated_at: turn.said_at(),
        expires_at: None,
        source: Source {
            session: format!("{sample_id}/session_{}", turn.session),
            message_id: turn.dia_id.clone(),
            source_time: turn.said_at(),
        },
        version: 1,
        history: Vec::new(),
        event_time: super::temporal::event_time(&turn.text, turn.said_at()),
        demoted_at: None,
    }
}

/// Evidence ids of a question, lowercased (`"D8:6; D9:17"` counts as two).
fn evidence(qa: &Qa) -> HashSet<String> {
    qa.evidence
        .iter()
        .flat_map(|e| e.split([';', ',', ' ']))
        .map(|e| e.trim().to_lowercase())
        .filter(|e| !e.is_empty())
        .collect()
}

fn category(qa: &Qa) -> String {
    match &qa.category {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// Store every sample's turns, embedded once by the service's embedder; the number of
/// records written.
pub async fn ingest(service: &MemoryService, samples: &[Sample]) -> Result<usize, EvalError> {
    let mut count = 0;
    for sample in samples {
        let user = user_of(sample);
        let turns = turns(sample)?;
        let records: Vec<MemoryRecord> = turns
            .iter()
            .map(|turn| record_of(&user, &sample.sample_id, turn))
            .collect();
        service.import(&records).await?;
        count += records.len();
    }
    Ok(count)
}

/// How [`evaluate`] measures the memory context of a question: the first `hits` hits,
/// rendered as a turn's memory block, counted by `count`.
pub struct ContextTokens<'a> {
    pub hits: usize,
    pub count: &'a (dyn Fn(&str) -> usize + Sync),
}

/// The memory block a turn would get for `hits` (one line per memory, as the turn renders it).
pub fn context_text(hits: &[super::record::RecallHit]) -> String {
    hits.iter()
        .map(|h| {
            format!(
                "- [{}] {} (recorded {})\n",
                h.record.key,
                h.record.content,
                h.record.updated_at.format("%Y-%m-%d")
            )
        })
        .collect()
}

/// Accumulated hits of one group at one k.
#[derive(Default, Clone)]
struct Tally {
    n: usize,
    any: usize,
    all: usize,
    fraction: f64,
}

impl Tally {
    fn add(&mut self, wanted: &HashSet<String>, got: &[String], k: usize) {
        let found = got.iter().take(k).filter(|id| wanted.contains(*id)).count();
        self.n += 1;
        self.any += usize::from(found > 0);
        self.all += usize::from(found == wanted.len());
        self.fraction += found as f64 / wanted.len() as f64;
    }

    fn at(&self, k: usize) -> AtK {
        let n = self.n.max(1) as f64;
        AtK {
            k,
            questions: self.n,
            any: self.any as f64 / n,
            all: self.all as f64 / n,
            fraction: self.fraction / n,
        }
    }
}

/// Ask every question (see the module doc); `progress` is ticked once per question.
pub async fn evaluate(
    service: &MemoryService,
    samples: &[Sample],
    retriever: Retriever,
    fusion: Weights,
    ks: &[usize],
    context: Option<&ContextTokens<'_>>,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<EvalReport, EvalError> {
    let weights = match retriever {
        Retriever::Bm25 => Weights::BM25,
        Retriever::Vector => Weights {
            bm25: 0.0,
            vector: 1.0,
            ..fusion
        },
        Retriever::Hybrid => fusion,
    };
    if retriever != Retriever::Bm25 && service.embedder_id().is_none() {
        return Err(EvalError::NoEmbedder(retriever.name()));
    }
    let records = ingest(service, samples).await?;
    let max_k = ks
        .iter()
        .copied()
        .max()
        .unwrap_or(5)
        .max(context.map_or(0, |c| c.hits));
    let mut overall = vec![Tally::default(); ks.len()];
    let mut by_cat: BTreeMap<String, Vec<Tally>> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut context_tokens = Vec::new();
    let mut report = EvalReport {
        retriever: retriever.name().into(),
        embedder: service.embedder_id().map(str::to_owned),
        samples: samples.len(),
        records,
        ..EvalReport::default()
    };
    for sample in samples {
        let now = turns(sample)
            .ok()
            .and_then(|t| t.iter().map(|t| t.at).max())
            .unwrap_or_else(Utc::now);
        for qa in &sample.qa {
            if let Some(bar) = progress {
                bar.inc(1);
            }
            let wanted = evidence(qa);
            if wanted.is_empty() {
                report.skipped_no_evidence += 1;
                continue;
            }
            let query = RecallQuery {
                user: user_of(sample),
                text: qa.question.clone(),
                filter: RecallFilter::default(),
                limit: max_k,
                min_score: 0.0,
                weights: Some(weights),
                now,
            };
            let started = Instant::now();
            let hits = service.recall(query).await?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            if let Some(context) = context {
                let shown = &hits[..hits.len().min(context.hits)];
                context_tokens.push((context.count)(&context_text(shown)) as f64);
            }
            let got: Vec<String> = hits.into_iter().map(|h| h.record.key).collect();
            let cat = by_cat
                .entry(category(qa))
                .or_insert_with(|| vec![Tally::default(); ks.len()]);
            for (i, k) in ks.iter().enumerate() {
                overall[i].add(&wanted, &got, *k);
                cat[i].add(&wanted, &got, *k);
            }
            report.questions += 1;
        }
    }
    report.overall = ks.iter().zip(&overall).map(|(k, t)| t.at(*k)).collect();
    report.per_category = by_cat
        .into_iter()
        .map(|(c, tallies)| (c, ks.iter().zip(&tallies).map(|(k, t)| t.at(*k)).collect()))
        .collect();
    latencies.sort_by(f64::total_cmp);
    report.latency_ms_p50 = percentile(&latencies, 0.50);
    report.latency_ms_p99 = percentile(&latencies, 0.99);
    if let Some(context) = context {
        report.context_hits = context.hits;
        report.context_tokens_mean =
            context_tokens.iter().sum::<f64>() / context_tokens.len().max(1) as f64;
        context_tokens.sort_by(f64::total_cmp);
        report.context_tokens_p99 = percentile(&context_tokens, 0.99);
    }
    Ok(report)
}

/// The `q` quantile (nearest rank) of sorted `values`; 0 when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_times_in_both_sample_formats_parse() {
        let a = parse_session_time("9:10 am on 3 March, 2025").unwrap();
        assert_eq!(a.to_rfc3339(), "2025-03-03T09:10:00+00:00");
        let b = parse_session_time("21:30 on 18 June, 2025").unwrap();
        assert_eq!(b.to_rfc3339(), "2025-06-18T21:30:00+00:00");
        let c = parse_session_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(c.to_rfc3339(), "2023-05-08T13:56:00+00:00");
        assert!(parse_session_time("yesterday").is_none());
    }

    #[test]
    fn tally_counts_any_all_and_fraction() {
        let wanted: HashSet<String> = ["d1:1".to_string(), "d1:2".to_string()].into();
        let got = vec!["d1:1".to_string(), "x".to_string(), "d1:2".to_string()];
        let mut t = Tally::default();
        t.add(&wanted, &got, 2);
        let at = t.at(2);
        assert_eq!((at.any, at.all, at.fraction), (1.0, 0.0, 0.5));
        let mut t = Tally::default();
        t.add(&wanted, &got, 3);
        assert_eq!(t.at(3).all, 1.0);
    }

    #[test]
    fn evidence_lists_split_and_percentiles_use_nearest_rank() {
        let qa = Qa {
            question: "q".into(),
            evidence: vec!["D8:6; D9:17".into(), "D1:2".into()],
            category: Value::from(2),
        };
        assert_eq!(evidence(&qa).len(), 3);
        assert_eq!(category(&qa), "2");
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn sessions_are_read_in_numeric_order_with_their_dates() {
        let sample: Sample = serde_json::from_value(serde_json::json!({
            "sample_id": "s",
            "conversation": {
                "speaker_a": "A", "speaker_b": "B",
                "session_10_date_time": "10:00 on 2 June, 2025",
                "session_10": [{"speaker": "A", "dia_id": "D10:1", "text": "late"}],
                "session_2_date_time": "10:00 on 1 June, 2025",
                "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "early"}]
            },
            "qa": []
        }))
        .unwrap();
        let t = turns(&sample).unwrap();
        assert_eq!(t[0].dia_id, "D2:1");
        assert_eq!(t[1].text, "late");
        assert!(t[0].at < t[1].at);
    }
}
