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
    /// What the tokens cost at the model table's `price`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
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
    /// Of the prompt tokens, those read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    /// Of the prompt tokens, those written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
    /// Of the completion tokens, those spent reasoning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.prompt + self.completion
    }

    /// The share of prompt tokens read from the cache, 0..1.
    pub fn cached_share(&self) -> f64 {
        match self.prompt {
            0 => 0.0,
            p => self.cached as f64 / p as f64,
        }
    }

    /// Both parts' tokens together.
    pub fn plus(self, other: Tokens) -> Tokens {
        Tokens {
            prompt: self.prompt + other.prompt,
            completion: self.completion + other.completion,
            source: self.source.and(other.source),
            cached: self.cached + other.cached,
            cache_write: self.cache_write + other.cache_write,
            reasoning: self.reasoning + other.reasoning,
        }
    }

    /// What these tokens cost at `price`.
    pub fn cost(&self, price: &crate::config::Price) -> f64 {
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        price.cost(&crate::protocol::chat::Usage {
            cached_tokens: clamp(self.cached),
            cache_write_tokens: clamp(self.cache_write),
            reasoning_tokens: clamp(self.reasoning),
            ..crate::protocol::chat::Usage::new(clamp(self.prompt), clamp(self.completion))
        })
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
    /// Of all prompt tokens, the share read from the provider's prompt cache, 0..1.
    #[serde(default)]
    pub cached_share: f64,
    /// Mean cost per case, when the model has a price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_cost: Option<f64>,
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
            cached_share: cases
                .iter()
                .map(|c| c.tokens)
                .reduce(Tokens::plus)
                .map_or(0.0, |t| t.cached_share()),
            mean_cost: cases
                .iter()
                .map(|c| c.cost)
                .sum::<Option<f64>>()
                .map(|total| total / n.max(1) as f64),
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
                ..Tokens::default()
            },
            cost: None,
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
