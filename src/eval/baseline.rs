//! `--baseline FILE`: this run against an earlier run's `--json` output.
//!
//! Only the cases both runs have are compared (by name), so adding or removing cases is never a
//! regression. A regression is any of:
//! 1. a case that passed in the baseline fails now;
//! 2. the completion rate is lower than the baseline's;
//! 3. the mean tool rounds per task are above the baseline's by more than the tolerance;
//! 4. the mean tokens per task are above the baseline's by more than the tolerance.
//!
//! The tolerance is relative (0.10 allows 10 % more). Latency is shown, never judged: it
//! depends on the machine and the model's load. Cases that now pass, cases in only one run, a
//! different model, and single cases whose rounds or tokens rose are noted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::report::{CaseReport, Overall, SuiteReport};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    #[error("cannot read the baseline {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the baseline {path} is not the output of `hermes eval tasks --json`: {message}; \
         write one with `hermes eval tasks --suite FILE --json > {path}`"
    )]
    Format { path: PathBuf, message: String },
}

/// The outcome of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline_model: String,
    /// Relative rise allowed in mean tool rounds and mean tokens (0.10 = 10 %).
    pub tolerance: f64,
    /// Cases both runs have.
    pub compared_cases: u32,
    pub regressions: Vec<String>,
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }
}

/// Read a baseline written by `--json`.
pub fn load(path: &Path) -> Result<SuiteReport, BaselineError> {
    let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| BaselineError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Compare `current` with `baseline` (see the module doc).
pub fn compare(baseline: &SuiteReport, current: &SuiteReport, tolerance: f64) -> Comparison {
    let mut regressions = Vec::new();
    let mut notes = Vec::new();
    if baseline.model != current.model {
        notes.push(format!(
            "the baseline ran model {}, this run {}",
            baseline.model, current.model
        ));
    }
    let mut before = Vec::new();
    let mut now = Vec::new();
    for case in &current.cases {
        match baseline.cases.iter().find(|b| b.name == case.name) {
            Some(old) => {
                compare_case(old, case, tolerance, &mut regressions, &mut notes);
                before.push(old.clone());
                now.push(case.clone());
            }
            None => notes.push(format!("case {} is new (not in the baseline)", case.name)),
        }
    }
    for old in &baseline.cases {
        if !current.cases.iter().any(|c| c.name == old.name) {
            notes.push(format!(
                "case {} is in the baseline but was not run",
                old.name
            ));
        }
    }
    let (b, n) = (Overall::of(&before), Overall::of(&now));
    if n.completion_rate < b.completion_rate - 1e-9 {
        regressions.push(format!(
            "completion rate fell from {:.1} % to {:.1} %",
            b.completion_rate * 100.0,
            n.completion_rate * 100.0
        ));
    }
    let mut rise = |what: &str, old: f64, new: f64| {
        if new > old * (1.0 + tolerance) + 1e-9 {
            regressions.push(format!(
                "mean {what} per task rose from {old:.2} to {new:.2} ({}), beyond the {:.0} % tolerance",
                percent_change(old, new),
                tolerance * 100.0
            ));
        }
    };
    rise("tool rounds", b.mean_tool_rounds, n.mean_tool_rounds);
    rise("tokens", b.mean_tokens, n.mean_tokens);
    Comparison {
        baseline_model: baseline.model.clone(),
        tolerance,
        compared_cases: n.cases,
        regressions,
        notes,
    }
}

fn compare_case(
    old: &CaseReport,
    new: &CaseReport,
    tolerance: f64,
    regressions: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    match (old.passed, new.passed) {
        (true, false) => regressions.push(format!(
            "case {} passed in the baseline and fails now: {}",
            new.name,
            new.failures.join("; ")
        )),
        (false, true) => notes.push(format!(
            "case {} failed in the baseline and passes now",
            new.name
        )),
        _ => {}
    }
    let above = |old: f64, new: f64| new > old * (1.0 + tolerance) + 1e-9;
    if above(f64::from(old.tool_rounds), f64::from(new.tool_rounds)) {
        notes.push(format!(
            "case {}: tool rounds {} → {}",
            new.name, old.tool_rounds, new.tool_rounds
        ));
    }
    let (t_old, t_new) = (old.tokens.total(), new.tokens.total());
    if above(t_old as f64, t_new as f64) {
        notes.push(format!(
            "case {}: tokens {t_old} → {t_new} ({})",
            new.name,
            percent_change(t_old as f64, t_new as f64)
        ));
    }
}

fn percent_change(old: f64, new: f64) -> String {
    if old <= 0.0 {
        return "from zero".into();
    }
    format!("{:+.1} %", (new - old) / old * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::{TokenSource, Tokens};
    use pretty_assertions::assert_eq;

    fn case(name: &str, passed: bool, rounds: u32, tokens: u64) -> CaseReport {
        CaseReport {
            name: name.into(),
            passed,
            failures: if passed {
                vec![]
            } else {
                vec!["answer_contains: …".into()]
            },
            turns: 1,
            tool_rounds: rounds,
            tokens: Tokens {
                prompt: tokens,
                completion: 0,
                source: TokenSource::Counted,
                ..Tokens::default()
            },
            cost: None,
            latency_ms: 5,
        }
    }

    fn report(cases: Vec<CaseReport>) -> SuiteReport {
        SuiteReport {
            suite: "s".into(),
            model: "replay:s".into(),
            overall: Overall::of(&cases),
            cases,
            comparison: None,
        }
    }

    #[test]
    fn an_equal_run_has_no_regression_and_no_notes() {
        let r = report(vec![case("a", true, 1, 100), case("b", false, 2, 200)]);
        let c = compare(&r, &r, 0.1);
        assert_eq!(
            (c.regressions.len(), c.notes.len(), c.compared_cases),
            (0, 0, 2)
        );
        assert!(!c.regressed());
    }

    #[test]
    fn a_case_that_stopped_passing_regresses_with_its_reason() {
        let old = report(vec![case("a", true, 1, 100), case("b", true, 1, 100)]);
        let new = report(vec![case("a", false, 1, 100), case("b", true, 1, 100)]);
        let c = compare(&old, &new, 0.1);
        assert_eq!(
            c.regressions,
            vec![
                "case a passed in the baseline and fails now: answer_contains: …".to_string(),
                "completion rate fell from 100.0 % to 50.0 %".to_string(),
            ]
        );
    }

    #[test]
    fn rounds_and_tokens_may_rise_within_the_tolerance_only() {
        let old = report(vec![case("a", true, 2, 1000), case("b", true, 2, 1000)]);
        let within = report(vec![case("a", true, 2, 1100), case("b", true, 2, 1000)]);
        assert!(!compare(&old, &within, 0.1).regressed());
        let beyond = report(vec![case("a", true, 3, 1300), case("b", true, 2, 1000)]);
        let c = compare(&old, &beyond, 0.1);
        assert_eq!(c.regressions.len(), 2, "{:#?}", c.regressions);
        assert!(
            c.regressions[0]
                .starts_with("mean tool rounds per task rose from 2.00 to 2.50 (+25.0 %)"),
            "{}",
            c.regressions[0]
        );
        assert!(
            c.regressions[1].starts_with("mean tokens per task rose"),
            "{}",
            c.regressions[1]
        );
        assert!(
            c.notes.iter().any(|n| n == "case a: tool rounds 2 → 3"),
            "{:#?}",
            c.notes
        );
    }

    #[test]
    fn added_removed_and_fixed_cases_are_notes_not_regressions() {
        let old = report(vec![case("a", false, 1, 100), case("gone", true, 1, 100)]);
        let new = report(vec![case("a", true, 1, 100), case("new", false, 9, 9000)]);
        let c = compare(&old, &new, 0.1);
        assert!(!c.regressed(), "{:#?}", c.regressions);
        assert_eq!(
            c.notes,
            vec![
                "case a failed in the baseline and passes now".to_string(),
                "case new is new (not in the baseline)".to_string(),
                "case gone is in the baseline but was not run".to_string(),
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_a_report_is_refused_with_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        std::fs::write(&path, "{\"hello\": 1}").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("--json >"), "{err}");
        let r = report(vec![case("a", true, 1, 100)]);
        std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(load(&path).unwrap(), r);
    }
}
