//! The report as text: one row per case (failure reasons indented under a failed case), the
//! overall line, and the comparison with a baseline.

use std::fmt::Write;

use super::baseline::Comparison;
use super::report::{SuiteReport, TokenSource};

/// The whole report as the terminal shows it.
pub fn render(report: &SuiteReport) -> String {
    let mut out = String::new();
    rows(&mut out, report);
    overall(&mut out, report);
    if let Some(c) = &report.comparison {
        comparison(&mut out, c);
    }
    out
}

fn rows(out: &mut String, report: &SuiteReport) {
    let width = report
        .cases
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "suite {} · model {} · {} cases",
        report.suite,
        report.model,
        report.cases.len()
    );
    let _ = writeln!(
        out,
        "{:<width$}  {:<6} {:>6} {:>18} {:>7} {:>9} {:>10} {:>10}",
        "CASE", "RESULT", "ROUNDS", "TOKENS (P+C)", "CACHED", "REASONING", "COST", "LATENCY"
    );
    for case in &report.cases {
        let tokens = format!("{}+{}", case.tokens.prompt, case.tokens.completion);
        let _ = writeln!(
            out,
            "{:<width$}  {:<6} {:>6} {:>18} {:>5.1} % {:>9} {:>10} {:>7} ms",
            case.name,
            if case.passed { "pass" } else { "FAIL" },
            case.tool_rounds,
            tokens,
            case.tokens.cached_share() * 100.0,
            case.tokens.reasoning,
            cost(case.cost),
            case.latency_ms
        );
        for reason in &case.failures {
            let _ = writeln!(out, "    ✗ {reason}");
        }
    }
}

/// A cost with four decimals, or `-` without a price.
fn cost(cost: Option<f64>) -> String {
    cost.map_or_else(|| "-".to_string(), |c| format!("{c:.4}"))
}

fn overall(out: &mut String, report: &SuiteReport) {
    let o = &report.overall;
    let _ = writeln!(
        out,
        "overall: {}/{} passed · completion rate {:.1} % · mean tool rounds {:.2} · \
         mean tokens per task {:.0} · cached {:.1} % · mean cost per task {} · \
         latency p50 {} ms, p95 {} ms",
        o.passed,
        o.cases,
        o.completion_rate * 100.0,
        o.mean_tool_rounds,
        o.mean_tokens,
        o.cached_share * 100.0,
        cost(o.mean_cost),
        o.latency_ms_p50,
        o.latency_ms_p95
    );
    if report
        .cases
        .iter()
        .any(|c| c.tokens.source != TokenSource::Reported)
    {
        let _ = writeln!(
            out,
            "tokens: counted with the planner model's tokenizer where the provider reported no usage"
        );
    }
}

fn comparison(out: &mut String, c: &Comparison) {
    let _ = writeln!(
        out,
        "\nagainst the baseline (model {}, {} cases compared, tolerance {:.0} %):",
        c.baseline_model,
        c.compared_cases,
        c.tolerance * 100.0
    );
    for r in &c.regressions {
        let _ = writeln!(out, "  REGRESSION {r}");
    }
    for n in &c.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if c.regressions.is_empty() {
        let _ = writeln!(out, "  no regression");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::{CaseReport, Overall, Tokens};

    #[test]
    fn a_failed_case_shows_its_reasons_under_its_row() {
        let cases = vec![
            CaseReport {
                name: "order-status".into(),
                passed: true,
                failures: vec![],
                turns: 1,
                tool_rounds: 1,
                tokens: Tokens {
                    prompt: 1200,
                    completion: 40,
                    source: TokenSource::Counted,
                    cached: 600,
                    ..Tokens::default()
                },
                cost: Some(0.0123),
                latency_ms: 35,
            },
            CaseReport {
                name: "budget".into(),
                passed: false,
                failures: vec!["answer_contains: \"5000\" is not in the answer \"hi\"".into()],
                turns: 2,
                tool_rounds: 0,
                tokens: Tokens::default(),
                cost: None,
                latency_ms: 20,
            },
        ];
        let report = SuiteReport {
            suite: "s".into(),
            model: "replay:s".into(),
            overall: Overall::of(&cases),
            cases,
            comparison: None,
        };
        let text = render(&report);
        assert!(text.contains("order-status  pass"), "{text}");
        assert!(text.contains("1200+40"), "{text}");
        assert!(
            text.contains(" 50.0 %") && text.contains("0.0123"),
            "{text}"
        );
        assert!(
            text.contains("budget        FAIL") && text.contains("    ✗ answer_contains: \"5000\""),
            "{text}"
        );
        assert!(
            text.contains("overall: 1/2 passed · completion rate 50.0 %"),
            "{text}"
        );
    }
}
