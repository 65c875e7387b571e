//! What a run reports, per case and overall. [`SuiteReport`] is also the `--json` output, and
//! so the `--baseline` file a later run compares against ([`super::baseline`]).

use serde::{Deserialize, Serialize};

use super::baseline::Comparison;

/// One run of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    pub suite: String,
    /// The planner model that ran (`replay:<scenario>`, `openai:<model>@<url>`, …).
    pub model: String,
    pub cases: Vec<CaseReport>,
    pub overall: Overall,
    /// Against `--baseline`, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}

/// One case's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    pub name: String,
    pub passed: bool,
    /// One line per failed check (empty when passed).
    pub failures: Vec<String>,
    /// User messages sent.
    pub turns: u32,
    /// Model steps that asked for tools, over all turns.
    pub tool_rounds: u32,
    pub tokens: Tokens,
    /// From each message sent to its turn's answer, summed over the case's turns (waits for
    /// background memory extraction excluded).
    pub latency_ms: u64,
}

/// The planner's tokens for a case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub source: TokenSource,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.prompt + self.completion
    }
}

/// Where token numbers came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The provider's `usage` for every model call.
    Reported,
    /// Counted with the model's tokenizer (the provider reported none, e.g. the replay model):
    /// the planning requests as sent, the replies as stored.
    #[default]
    Counted,
    /// Some calls reported, others counted.
    Mixed,
}

impl TokenSource {
    /// Combine the sources of two parts.
    pub fn and(self, other: TokenSource) -> TokenSource {
        if self == other {
            self
        } else {
            TokenSource::Mixed
        }
    }
}

/// The suite as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overall {
    pub cases: u32,
    pub passed: u32,
    /// passed / cases, 0..1.
    pub completion_rate: f64,
    pub mean_tool_rounds: f64,
    /// Prompt + completion tokens per case.
    pub mean_tokens: f64,
    pub latency_ms_p50: u64,
    pub latency_ms_p95: u64,
}

impl Overall {
    pub fn of(cases: &[CaseReport]) -> Self {
        let n = cases.len();
        let mean = |f: &dyn Fn(&CaseReport) -> f64| match n {
            0 => 0.0,
            _ => cases.iter().map(f).sum::<f64>() / n as f64,
        };
        let passed = cases.iter().filter(|c| c.passed).count();
        let mut latencies: Vec<u64> = cases.iter().map(|c| c.latency_ms).collect();
        latencies.sort_unstable();
        Overall {
            cases: u32::try_from(n).unwrap_or(u32::MAX),
            passed: u32::try_from(passed).unwrap_or(u32::MAX),
            completion_rate: mean(&|c| f64::from(u8::from(c.passed))),
            mean_tool_rounds: mean(&|c| f64::from(c.tool_rounds)),
            mean_tokens: mean(&|c| c.tokens.total() as f64),
            latency_ms_p50: percentile(&latencies, 50),
            latency_ms_p95: percentile(&latencies, 95),
        }
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn case(name: &str, passed: bool, rounds: u32, tokens: u64, ms: u64) -> CaseReport {
        CaseReport {
            name: name.into(),
            passed,
            failures: if passed { vec![] } else { vec!["x".into()] },
            turns: 1,
            tool_rounds: rounds,
            tokens: Tokens {
                prompt: tokens,
                completion: 0,
                source: TokenSource::Counted,
            },
            latency_ms: ms,
        }
    }

    #[test]
    fn overall_is_rates_means_and_nearest_rank_percentiles() {
        let cases: Vec<CaseReport> = (1..=20)
            .map(|i| {
                case(
                    &format!("c{i}"),
                    i != 3,
                    i % 3,
                    100 * u64::from(i),
                    10 * u64::from(i),
                )
            })
            .collect();
        let o = Overall::of(&cases);
        assert_eq!((o.cases, o.passed), (20, 19));
        assert!((o.completion_rate - 0.95).abs() < 1e-9);
        assert!(
            (o.mean_tool_rounds - 21.0 / 20.0).abs() < 1e-9,
            "{}",
            o.mean_tool_rounds
        );
        assert!((o.mean_tokens - 1050.0).abs() < 1e-9);
        assert_eq!((o.latency_ms_p50, o.latency_ms_p95), (100, 190));
        assert_eq!(Overall::of(&[]).latency_ms_p95, 0);
        assert_eq!(percentile(&[7], 95), 7);
    }

    #[test]
    fn token_sources_combine_to_mixed_only_when_they_differ() {
        use TokenSource::*;
        assert_eq!(Reported.and(Reported), Reported);
        assert_eq!(Counted.and(Reported), Mixed);
        assert_eq!(serde_json::to_string(&Mixed).unwrap(), "\"mixed\"");
    }
}
