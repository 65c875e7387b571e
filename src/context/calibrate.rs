//! Token counts for a model tiktoken does not know (Claude, Llama, Qwen…): Hermes counts with
//! a stand-in vocabulary, and each session learns from the provider's reported usage how far
//! off that count is. The scale is the provider's prompt tokens per token Hermes counted for
//! the same request; the context budget (90% of the window minus the reply reserve, so the
//! 10% margin stays) is divided by it.

/// Bounds on one sample: a ratio outside them is a miscount (a server reporting nothing
/// useful), not a tokenizer difference.
const MIN_SCALE: f64 = 0.25;
const MAX_SCALE: f64 = 4.0;

/// The session's scale after a request Hermes counted at `counted` tokens and the provider
/// reported at `reported` prompt tokens: the mean of the old scale and this sample, so one odd
/// request does not swing the budget.
pub fn update(previous: Option<f64>, counted: usize, reported: u32) -> Option<f64> {
    if counted == 0 || reported == 0 {
        return previous;
    }
    let sample = (f64::from(reported) / counted as f64).clamp(MIN_SCALE, MAX_SCALE);
    Some(match previous {
        Some(old) => (old + sample) / 2.0,
        None => sample,
    })
}

/// `budget` (in the provider's tokens) in Hermes' counted tokens.
pub fn scaled_budget(budget: usize, scale: Option<f64>) -> usize {
    match scale {
        Some(scale) if scale.is_finite() && scale > 0.0 => (budget as f64 / scale) as usize,
        _ => budget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_counting_more_tokens_shrinks_the_budget_in_our_units() {
        let scale = update(None, 1000, 1300);
        assert_eq!(scale, Some(1.3));
        assert_eq!(scaled_budget(13_000, scale), 10_000);
        let scale = update(scale, 1000, 1100);
        assert!((scale.unwrap() - 1.2).abs() < 1e-9);
    }

    #[test]
    fn empty_or_absurd_reports_do_not_move_the_scale_far() {
        assert_eq!(update(Some(1.1), 0, 500), Some(1.1));
        assert_eq!(update(None, 1000, 0), None);
        assert_eq!(update(None, 10, 100_000), Some(MAX_SCALE));
        assert_eq!(scaled_budget(1000, None), 1000);
    }
}
