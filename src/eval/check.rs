//! Checking a case: what the case's turns did ([`Observed`]) against its `[case.expect]`
//! ([`Expect`]), giving one reason per failed check. Pure: no engine, no bus.
//!
//! Matching rules, chosen so a competent real model can pass what the scripted one does:
//! - text checks (`answer_contains`, memories) ignore case;
//! - `tools_called` arguments match as a subset ([`subset`]): every expected key must be in
//!   the model's arguments with a matching value; strings compare trimmed and ignoring case,
//!   numbers by value (also a number written as a string), objects recursively, arrays
//!   element by element. The arguments are the model's, before the engine's repairs.

use std::time::Duration;

use serde_json::Value;

use super::suite::{Expect, ExpectedCall};
use crate::protocol::{Memory, TurnEvent};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Answered(String),
    /// An `error` event ended the turn.
    Failed {
        code: String,
        message: String,
    },
    /// The turn waits for the user to confirm a high-risk call; the eval does not decide.
    Paused {
        name: String,
    },
    /// No answer before the case's timeout.
    TimedOut(Duration),
    /// The message was not accepted.
    NotSent(String),
    /// Not sent: an earlier turn of the case did not answer.
    Skipped,
}

/// One user message of a case and what its turn did.
#[derive(Debug, Clone)]
pub struct ObservedTurn {
    /// The session, counted from 0.
    pub session: usize,
    pub message: String,
    /// Known once the turn started.
    pub turn_id: Option<String>,
    pub events: Vec<TurnEvent>,
    pub end: TurnEnd,
}

/// Everything the checks look at.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub turns: Vec<ObservedTurn>,
    /// Model steps that asked for tools, over all turns.
    pub tool_rounds: u32,
    /// The user's memories after the case; `None` when the checks do not need them, or
    /// `Err` when they could not be had (the reason).
    pub memories: Option<Result<Vec<Memory>, String>>,
}

impl Observed {
    /// The answer of the case's last turn, if it answered.
    pub fn last_answer(&self) -> Option<&str> {
        match self.turns.last().map(|t| &t.end) {
            Some(TurnEnd::Answered(text)) => Some(text),
            _ => None,
        }
    }

    fn calls(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.turns
            .iter()
            .flat_map(|t| &t.events)
            .filter_map(|e| match e {
                TurnEvent::ToolCall {
                    name, arguments, ..
                } => Some((name.as_str(), arguments)),
                _ => None,
            })
    }

    fn recalled(&self) -> impl Iterator<Item = (&str, &str)> {
        self.turns
            .iter()
            .flat_map(|t| &t.events)
            .filter_map(|e| match e {
                TurnEvent::MemoryRecalled { memories, .. } => Some(memories),
                _ => None,
            })
            .flatten()
            .map(|m| (m.key.as_str(), m.content.as_str()))
    }
}

/// Why the case failed: one line per failed check; empty when it passed.
pub fn failures(expect: &Expect, observed: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    turn_failures(observed, &mut out);
    tool_failures(expect, observed, &mut out);
    answer_failures(expect, observed, &mut out);
    memory_failures(expect, observed, &mut out);
    if let Some(max) = expect.max_tool_rounds {
        if observed.tool_rounds > max {
            out.push(format!(
                "max_tool_rounds: {} tool rounds, at most {max} expected",
                observed.tool_rounds
            ));
        }
    }
    out
}

fn turn_failures(observed: &Observed, out: &mut Vec<String>) {
    let skipped = observed
        .turns
        .iter()
        .filter(|t| t.end == TurnEnd::Skipped)
        .count();
    for (i, turn) in observed.turns.iter().enumerate() {
        let what = match &turn.end {
            TurnEnd::Answered(_) | TurnEnd::Skipped => continue,
            TurnEnd::Failed { code, message } => format!("failed with {code}: {message}"),
            TurnEnd::Paused { name } => format!(
                "paused for the user to confirm `{name}` (high risk); the eval does not confirm"
            ),
            TurnEnd::TimedOut(after) => {
                format!("no answer within the case's {}s timeout", after.as_secs())
            }
            TurnEnd::NotSent(reason) => format!("message not accepted: {reason}"),
        };
        let mut line = format!(
            "turn {} (session {}, {}) {what}",
            i + 1,
            turn.session + 1,
            excerpt(&turn.message, 40)
        );
        if skipped > 0 {
            line.push_str(&format!(
                "; the {skipped} message(s) after it were not sent"
            ));
        }
        out.push(line);
    }
}

fn tool_failures(expect: &Expect, observed: &Observed, out: &mut Vec<String>) {
    let made = || {
        let calls: Vec<String> = observed
            .calls()
            .map(|(name, args)| format!("{name} {args}"))
            .collect();
        match calls.is_empty() {
            true => "no tool was called".to_string(),
            false => format!("calls: {}", calls.join("; ")),
        }
    };
    for expected in &expect.tools_called {
        if !observed.calls().any(|call| call_matches(expected, call)) {
            out.push(format!(
                "tools_called: no call of {} with arguments ⊇ {} ({})",
                expected.name,
                Value::Object(expected.arguments.clone()),
                made()
            ));
        }
    }
    for name in &expect.tools_not_called {
        if observed.calls().any(|(called, _)| called == name) {
            out.push(format!("tools_not_called: {name} was called ({})", made()));
        }
    }
}

fn call_matches(expected: &ExpectedCall, (name, arguments): (&str, &Value)) -> bool {
    name == expected.name && subset(&Value::Object(expected.arguments.clone()), arguments)
}

fn answer_failures(expect: &Expect, observed: &Observed, out: &mut Vec<String>) {
    let wants_answer = !expect.answer_contains.is_empty()
        || !expect.answer_not_contains.is_empty()
        || expect.answer_matches.is_some();
    if !wants_answer {
        return;
    }
    let Some(answer) = observed.last_answer() else {
        out.push("answer: the last turn gave no answer to check".into());
        return;
    };
    let lower = answer.to_lowercase();
    for needle in &expect.answer_contains {
        if !lower.contains(&needle.to_lowercase()) {
            out.push(format!(
                "answer_contains: {needle:?} is not in the answer {}",
                excerpt(answer, 160)
            ));
        }
    }
    for needle in &expect.answer_not_contains {
        if lower.contains(&needle.to_lowercase()) {
            out.push(format!(
                "answer_not_contains: {needle:?} is in the answer {}",
                excerpt(answer, 160)
            ));
        }
    }
    if let Some(re) = &expect.answer_matches {
        if !re.is_match(answer) {
            out.push(format!(
                "answer_matches: /{re}/ does not match the answer {}",
                excerpt(answer, 160)
            ));
        }
    }
}

fn memory_failures(expect: &Expect, observed: &Observed, out: &mut Vec<String>) {
    let holds = |key: &str, content: &str, needle: &str| {
        let needle = needle.to_lowercase();
        key.to_lowercase().contains(&needle) || content.to_lowercase().contains(&needle)
    };
    let recalled: Vec<(&str, &str)> = observed.recalled().collect();
    for needle in &expect.memory_recalled {
        if !recalled.iter().any(|(k, c)| holds(k, c, needle)) {
            out.push(format!(
                "memory_recalled: no recalled memory holds {needle:?} ({})",
                list_memories(recalled.iter().copied(), "nothing was recalled")
            ));
        }
    }
    if !expect.needs_memories() {
        return;
    }
    let memories = match &observed.memories {
        Some(Ok(m)) => m,
        Some(Err(reason)) => {
            out.push(format!("memory_written: {reason}"));
            return;
        }
        None => {
            out.push("memory_written: the user's memories were not read".into());
            return;
        }
    };
    let pairs = || {
        memories
            .iter()
            .map(|m| (m.key.as_str(), m.content.as_str()))
    };
    for needle in &expect.memory_written {
        if !pairs().any(|(k, c)| holds(k, c, needle)) {
            out.push(format!(
                "memory_written: no memory of the user holds {needle:?} ({})",
                list_memories(pairs(), "the user has no memories")
            ));
        }
    }
    for needle in &expect.memory_not_written {
        if let Some((k, c)) = pairs().find(|(k, c)| holds(k, c, needle)) {
            out.push(format!(
                "memory_not_written: {needle:?} was written ({k}: {c})"
            ));
        }
    }
}

fn list_memories<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>, none: &str) -> String {
    let all: Vec<String> = pairs.map(|(k, c)| format!("{k}: {c}")).collect();
    match all.is_empty() {
        true => none.to_string(),
        false => format!("memories: {}", excerpt(&all.join("; "), 240)),
    }
}

/// `expected` ⊆ `actual` (see the module doc).
pub fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| subset(v, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(ev, av)| subset(ev, av))
        }
        (Value::String(e), Value::String(a)) => e.trim().to_lowercase() == a.trim().to_lowercase(),
        (Value::Number(_), _) | (_, Value::Number(_)) => match (number(expected), number(actual)) {
            (Some(e), Some(a)) => (e - a).abs() < 1e-9,
            _ => false,
        },
        _ => expected == actual,
    }
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `"text"` cut to `max` characters, quoted.
fn excerpt(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    let mut cut: String = one_line.chars().take(max).collect();
    if cut.len() < one_line.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RecalledMemory;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn expect(toml_text: &str) -> Expect {
        let text =
            format!("[[case]]\nname = \"c\"\nmessages = [\"hi\"]\n[case.expect]\n{toml_text}");
        let suite =
            super::super::suite::Suite::parse(&text, std::path::Path::new("s.toml")).unwrap();
        suite.cases[0].expect.clone()
    }

    fn answered(events: Vec<TurnEvent>, answer: &str) -> Observed {
        Observed {
            turns: vec![ObservedTurn {
                session: 0,
                message: "hi".into(),
                turn_id: Some("t".into()),
                events,
                end: TurnEnd::Answered(answer.into()),
            }],
            tool_rounds: 1,
            memories: None,
        }
    }

    fn call(name: &str, arguments: Value) -> TurnEvent {
        TurnEvent::ToolCall {
            turn_id: "t".into(),
            call_id: "c".into(),
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn subset_is_lenient_where_real_models_differ_and_strict_elsewhere() {
        let actual = json!({"order_id": " jd-1 ", "limit": "3", "filters": {"brand": "Sony", "x": 1}, "tags": ["a", "b"]});
        assert!(subset(&json!({}), &actual));
        assert!(subset(&json!({"order_id": "JD-1"}), &actual));
        assert!(subset(&json!({"limit": 3}), &actual));
        assert!(subset(&json!({"filters": {"brand": "sony"}}), &actual));
        assert!(subset(&json!({"tags": ["A", "b"]}), &actual));
        assert!(!subset(&json!({"tags": ["a"]}), &actual));
        assert!(!subset(&json!({"order_id": "JD-2"}), &actual));
        assert!(!subset(&json!({"missing": true}), &actual));
        assert!(subset(&json!(5000), &json!(5000.0)));
        assert!(!subset(&json!(true), &json!("true")));
    }

    #[test]
    fn a_passing_case_has_no_failures() {
        let e = expect(
            "tools_called = [{ name = \"order_lookup\", arguments = { order_id = \"JD-1\" } }]\n\
             answer_contains = [\"shipped\"]\nanswer_matches = \"SF\\\\d+\"\nmax_tool_rounds = 1\n",
        );
        let observed = answered(
            vec![call(
                "order_lookup",
                json!({"order_id": "JD-1", "limit": 2}),
            )],
            "It SHIPPED: SF123",
        );
        assert_eq!(failures(&e, &observed), Vec::<String>::new());
    }

    #[test]
    fn each_failed_check_says_what_was_expected_and_what_happened() {
        let e = expect(
            "tools_called = [{ name = \"order_lookup\", arguments = { order_id = \"JD-1\" } }]\n\
             tools_not_called = [\"add\"]\nanswer_contains = [\"shipped\"]\n\
             answer_not_contains = [\"sorry\"]\nanswer_matches = \"SF\\\\d+\"\nmax_tool_rounds = 0\n\
             memory_recalled = [\"budget\"]\n",
        );
        let observed = answered(
            vec![
                call("order_lookup", json!({"order_id": "JD-2"})),
                call("add", json!({})),
            ],
            "Sorry, no order.",
        );
        let got = failures(&e, &observed);
        assert_eq!(got.len(), 7, "{got:#?}");
        assert!(
            got[0].starts_with("tools_called: no call of order_lookup"),
            "{}",
            got[0]
        );
        assert!(
            got[0].contains(r#"order_lookup {"order_id":"JD-2"}"#),
            "{}",
            got[0]
        );
        assert!(
            got[1].starts_with("tools_not_called: add was called"),
            "{}",
            got[1]
        );
        assert!(
            got[2].contains("\"shipped\" is not in the answer \"Sorry, no order.\""),
            "{}",
            got[2]
        );
        assert!(
            got[3].starts_with("answer_not_contains: \"sorry\""),
            "{}",
            got[3]
        );
        assert!(got[4].starts_with("answer_matches: /SF\\d+/"), "{}", got[4]);
        assert!(got[5].contains("nothing was recalled"), "{}", got[5]);
        assert_eq!(got[6], "max_tool_rounds: 1 tool rounds, at most 0 expected");
    }

    #[test]
    fn a_turn_that_did_not_answer_fails_the_case_and_names_the_skipped_rest() {
        let mut observed = answered(vec![], "");
        observed.turns[0].end = TurnEnd::Failed {
            code: "plan_failed".into(),
            message: "no rule".into(),
        };
        observed.turns.push(ObservedTurn {
            session: 0,
            message: "second".into(),
            turn_id: None,
            events: vec![],
            end: TurnEnd::Skipped,
        });
        let got = failures(&expect("answer_contains = [\"x\"]\n"), &observed);
        assert_eq!(
            got,
            vec![
                "turn 1 (session 1, \"hi\") failed with plan_failed: no rule; the 1 message(s) after it were not sent".to_string(),
                "answer: the last turn gave no answer to check".to_string(),
            ]
        );
    }

    #[test]
    fn memories_are_matched_by_key_or_content_ignoring_case() {
        let e = expect("memory_recalled = [\"BUDGET\"]\nmemory_written = [\"5000\", \"sony\"]\nmemory_not_written = [\"weather\"]\n");
        let mut observed = answered(
            vec![TurnEvent::MemoryRecalled {
                turn_id: "t".into(),
                memories: vec![RecalledMemory {
                    key: "headphone_budget".into(),
                    content: "5000 yuan".into(),
                    score: 0.9,
                }],
            }],
            "ok",
        );
        let memory = |key: &str, content: &str| {
            serde_json::from_value::<Memory>(json!({
                "id": "m", "user": "u", "namespace": "default", "kind": "fact", "key": key,
                "content": content, "importance": 0.5, "confidence": 1.0,
                "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",
                "source": {"session": "s", "message_id": "m", "source_time": "2025-01-01T00:00:00Z"},
                "version": 1
            }))
            .unwrap()
        };
        observed.memories = Some(Ok(vec![
            memory("budget", "under 5000 yuan"),
            memory("weather", "sunny"),
        ]));
        let got = failures(&e, &observed);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(
            got[0].contains("no memory of the user holds \"sony\""),
            "{}",
            got[0]
        );
        assert!(got[0].contains("budget: under 5000 yuan"), "{}", got[0]);
        assert!(
            got[1].starts_with("memory_not_written: \"weather\" was written"),
            "{}",
            got[1]
        );

        observed.memories = Some(Err("extraction did not finish within 30s".into()));
        let got = failures(&e, &observed);
        assert_eq!(
            got,
            vec!["memory_written: extraction did not finish within 30s".to_string()]
        );
    }
}
