//! The suite file (TOML): which Hermes config to run against, and `[[case]]` tables, each a
//! task given as user messages with the checks its outcome must pass (`[case.expect]`).
//!
//! ```toml
//! name = "seed-tasks"                  # shown in the report (default: the file's stem)
//! profile = "demo"                     # a built-in profile the tasks need (the demo's shop),
//!                                      # under the config and `--config` alike (optional)
//! config = "seed-tasks.config.toml"    # Hermes config, relative to this file (optional;
//!                                      # `--config` beats it)
//! timeout_secs = 120                   # default per-case timeout for the case's turns
//! memory_wait_secs = 30                # longest wait for background memory extraction
//!
//! [[case]]
//! name = "order-status"                # A–Z a–z 0–9 _ - (it names the case's sessions)
//! agent = "assistant"                  # default
//! user = "u-1001"                      # default: eval-<name>
//! messages = ["Where is my order JD-20251111-0042?"]   # one session, in order
//! # sessions = [["I'm on a 5000 yuan budget"], ["What's my budget?"]]  # several sessions
//! [case.expect]
//! tools_called = [{ name = "order_lookup", arguments = { order_id = "JD-20251111-0042" } }]
//! answer_contains = ["SF1428837610295"]
//! max_tool_rounds = 2
//! ```
//!
//! A case's input is exactly one of `messages` (one session) or `sessions` (several sessions of
//! the same user, one after the other, each a fresh conversation that only memory connects).
//! [`Input`] is the place for other kinds of input later (an external event).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::load::Profile;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::protocol::subjects;

/// Per-case timeout when neither the case nor the suite sets one.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest wait for background memory extraction when the suite sets none.
pub const DEFAULT_MEMORY_WAIT_SECS: u64 = 30;
/// The agent a case talks to when it names none.
pub const DEFAULT_AGENT: &str = "assistant";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    #[error("cannot read the suite file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a valid suite: {message}\n(`hermes eval tasks --help` shows the format)"
    )]
    Parse { path: PathBuf, message: String },
    #[error("{path}: case `{case}`: {message}")]
    Case {
        path: PathBuf,
        case: String,
        message: String,
    },
    #[error("{path}: no case named {names}; the suite has: {known}")]
    UnknownCase {
        path: PathBuf,
        names: String,
        known: String,
    },
}

/// A parsed, checked suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    /// The suite file.
    pub path: PathBuf,
    /// The built-in profile the tasks need (their tools, servers, prompt), below any config.
    pub profile: Option<Profile>,
    /// The Hermes config the suite asks for, resolved against the suite file's directory.
    pub config: Option<PathBuf>,
    pub cases: Vec<Case>,
}

/// One task.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub agent: String,
    pub user: String,
    pub input: Input,
    /// Bounds the case's turns (all of them together).
    pub timeout: Duration,
    /// Bounds each wait for background memory extraction.
    pub memory_wait: Duration,
    pub expect: Expect,
}

/// What a case sends.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Input {
    /// Sessions of the case's user, one after the other; each a list of user messages sent in
    /// order, each message waiting for its turn's answer (through any async job) first.
    Sessions(Vec<Vec<String>>),
}

impl Case {
    /// The session id of the case's `k`-th session (from 0): `<name>-s<k+1>`.
    pub fn session_id(&self, k: usize) -> String {
        format!("{}-s{}", self.name, k + 1)
    }
}

/// The checks of one case (`[case.expect]`). Every check is optional; a case also fails when
/// any of its turns fails, times out or pauses for a confirmation.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// Each must match some `tool.call` of the case: same name, and the expected arguments a
    /// subset of the model's (see [`super::check::subset`]).
    pub tools_called: Vec<ExpectedCall>,
    /// None of these tools may be called.
    pub tools_not_called: Vec<String>,
    /// Substrings of the last answer (case-insensitive).
    pub answer_contains: Vec<String>,
    /// Substrings the last answer must not hold (case-insensitive).
    pub answer_not_contains: Vec<String>,
    /// A regex the last answer must match (`(?i)` for case-insensitive).
    pub answer_matches: Option<Regex>,
    /// Substrings each found in some memory (key or content) of the user after the case.
    pub memory_written: Vec<String>,
    /// Substrings found in no memory of the user after the case.
    pub memory_not_written: Vec<String>,
    /// Substrings each found in some memory a turn of the case recalled.
    pub memory_recalled: Vec<String>,
    /// Most model steps that asked for tools, over all the case's turns.
    pub max_tool_rounds: Option<u32>,
}

impl Expect {
    /// Whether the user's memories are needed after the case (and so extraction waited for).
    pub fn needs_memories(&self) -> bool {
        !self.memory_written.is_empty() || !self.memory_not_written.is_empty()
    }
}

/// An expected tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: Option<String>,
    profile: Option<String>,
    config: Option<PathBuf>,
    timeout_secs: Option<u64>,
    memory_wait_secs: Option<u64>,
    #[serde(default, rename = "case")]
    cases: Vec<CaseFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: String,
    agent: Option<String>,
    user: Option<String>,
    messages: Option<Vec<String>>,
    sessions: Option<Vec<Vec<String>>>,
    timeout_secs: Option<u64>,
    #[serde(default)]
    expect: ExpectFile,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    #[serde(default)]
    tools_called: Vec<ExpectedCall>,
    #[serde(default)]
    tools_not_called: Vec<String>,
    #[serde(default)]
    answer_contains: Vec<String>,
    #[serde(default)]
    answer_not_contains: Vec<String>,
    answer_matches: Option<String>,
    #[serde(default)]
    memory_written: Vec<String>,
    #[serde(default)]
    memory_not_written: Vec<String>,
    #[serde(default)]
    memory_recalled: Vec<String>,
    max_tool_rounds: Option<u32>,
}

impl Suite {
    /// Read and check the suite at `path`.
    pub fn load(path: &Path) -> Result<Self, SuiteError> {
        let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Check suite text; `path` names it in errors and anchors its relative `config`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SuiteError> {
        let file: SuiteFile = toml::from_str(text).map_err(|e| SuiteError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if file.cases.is_empty() {
            return Err(SuiteError::Parse {
                path: path.to_path_buf(),
                message: "it has no `[[case]]`".into(),
            });
        }
        if file.timeout_secs == Some(0) {
            return Err(SuiteError::Parse {
                path: path.to_path_buf(),
                message: "timeout_secs must be at least 1".into(),
            });
        }
        let profile = match file.profile.as_deref() {
            None => None,
            Some(name) => Some(Profile::named(name).ok_or_else(|| SuiteError::Parse {
                path: path.to_path_buf(),
                message: format!("no built-in profile `{name}`; the one there is: demo"),
            })?),
        };
        let dir = path.parent().unwrap_or(Path::new(""));
        let defaults = Defaults {
            timeout: file.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            memory_wait: file.memory_wait_secs.unwrap_or(DEFAULT_MEMORY_WAIT_SECS),
        };
        let mut seen = HashSet::new();
        let mut cases = Vec::with_capacity(file.cases.len());
        for raw in file.cases {
            let name = raw.name.clone();
            let case_error = |message: String| SuiteError::Case {
                path: path.to_path_buf(),
                case: name.clone(),
                message,
            };
            if !seen.insert(raw.name.clone()) {
                return Err(case_error(
                    "another case has this name; names must be unique".into(),
                ));
            }
            cases.push(case(raw, &defaults).map_err(case_error)?);
        }
        let name = file.name.unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "suite".into(), |s| s.to_string_lossy().into_owned())
        });
        Ok(Suite {
            name,
            path: path.to_path_buf(),
            profile,
            config: file.config.map(|c| dir.join(c)),
            cases,
        })
    }

    /// Keep only the cases named in `names` (all when empty); an unknown name is an error.
    pub fn select(&mut self, names: &[String]) -> Result<(), SuiteError> {
        if names.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&str> = names
            .iter()
            .filter(|n| !self.cases.iter().any(|c| &c.name == *n))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(SuiteError::UnknownCase {
                path: self.path.clone(),
                names: unknown.join(", "),
                known: self
                    .cases
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        self.cases.retain(|c| names.contains(&c.name));
        Ok(())
    }
}

struct Defaults {
    timeout: u64,
    memory_wait: u64,
}

fn case(raw: CaseFile, defaults: &Defaults) -> Result<Case, String> {
    subjects::check_id("case name", &raw.name).map_err(|e| e.to_string())?;
    let agent = raw.agent.unwrap_or_else(|| DEFAULT_AGENT.into());
    subjects::check_id("agent", &agent).map_err(|e| e.to_string())?;
    let user = raw.user.unwrap_or_else(|| format!("eval-{}", raw.name));
    subjects::check_id("user", &user).map_err(|e| e.to_string())?;
    let input = input(raw.messages, raw.sessions)?;
    if raw.timeout_secs == Some(0) {
        return Err("timeout_secs must be at least 1".into());
    }
    let case = Case {
        name: raw.name,
        agent,
        user,
        input,
        timeout: Duration::from_secs(raw.timeout_secs.unwrap_or(defaults.timeout)),
        memory_wait: Duration::from_secs(defaults.memory_wait),
        expect: raw.expect.checked()?,
    };
    let Input::Sessions(sessions) = &case.input;
    let last_session = case.session_id(sessions.len().saturating_sub(1));
    subjects::check_id("session", &last_session)
        .map_err(|e| format!("the name is too long to name its sessions: {e}"))?;
    Ok(case)
}

/// The case's input from `messages` or `sessions` (exactly one of them).
fn input(
    messages: Option<Vec<String>>,
    sessions: Option<Vec<Vec<String>>>,
) -> Result<Input, String> {
    let sessions = match (messages, sessions) {
        (Some(messages), None) => vec![messages],
        (None, Some(sessions)) => sessions,
        _ => return Err(
            "give exactly one of `messages = [...]` (one session) or `sessions = [[...], ...]` \
                 (several sessions of the same user)"
                .into(),
        ),
    };
    if sessions.is_empty() || sessions.iter().any(Vec::is_empty) {
        return Err("every session needs at least one message".into());
    }
    if sessions.iter().flatten().any(|m| m.trim().is_empty()) {
        return Err("a message is empty".into());
    }
    Ok(Input::Sessions(sessions))
}

impl ExpectFile {
    fn checked(self) -> Result<Expect, String> {
        let answer_matches = self
            .answer_matches
            .map(|re| {
                Regex::new(&re).map_err(|err| format!("answer_matches is not a regex: {err}"))
            })
            .transpose()?;
        if let Some(call) = self.tools_called.iter().find(|c| c.name.trim().is_empty()) {
            return Err(format!(
                "tools_called has an entry without a name: {call:?}"
            ));
        }
        Ok(Expect {
            tools_called: self.tools_called,
            tools_not_called: self.tools_not_called,
            answer_contains: self.answer_contains,
            answer_not_contains: self.answer_not_contains,
            answer_matches,
            memory_written: self.memory_written,
            memory_not_written: self.memory_not_written,
            memory_recalled: self.memory_recalled,
            max_tool_rounds: self.max_tool_rounds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(text: &str) -> Result<Suite, SuiteError> {
        Suite::parse(text, Path::new("suites/s.toml"))
    }

    #[test]
    fn a_case_gets_defaults_and_the_config_resolves_next_to_the_suite() {
        let suite = parse(
            r#"
            config = "model.toml"
            [[case]]
            name = "order"
            messages = ["where is my order?"]
            [case.expect]
            tools_called = [{ name = "order_lookup", arguments = { order_id = "JD-1", limit = 3 } }]
            answer_matches = "(?i)shipped"
            max_tool_rounds = 2
            "#,
        )
        .unwrap();
        assert_eq!(suite.name, "s");
        assert_eq!(suite.config, Some(PathBuf::from("suites/model.toml")));
        let case = &suite.cases[0];
        assert_eq!(
            (case.agent.as_str(), case.user.as_str()),
            ("assistant", "eval-order")
        );
        assert_eq!(
            case.input,
            Input::Sessions(vec![vec!["where is my order?".into()]])
        );
        assert_eq!(case.session_id(0), "order-s1");
        assert_eq!(case.timeout, Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        assert_eq!(
            case.expect.tools_called[0].arguments["limit"],
            serde_json::json!(3)
        );
        assert!(case
            .expect
            .answer_matches
            .as_ref()
            .unwrap()
            .is_match("SHIPPED"));
        assert_eq!(case.expect.max_tool_rounds, Some(2));
    }

    #[test]
    fn sessions_run_in_order_for_the_same_user() {
        let suite = parse(
            r#"
            timeout_secs = 7
            [[case]]
            name = "budget"
            user = "u-1001"
            sessions = [["my budget is 5000"], ["what is my budget?", "thanks"]]
            "#,
        )
        .unwrap();
        let case = &suite.cases[0];
        assert_eq!(case.user, "u-1001");
        assert_eq!(case.timeout, Duration::from_secs(7));
        let Input::Sessions(sessions) = &case.input;
        assert_eq!(sessions.len(), 2);
        assert_eq!(case.session_id(1), "budget-s2");
    }

    #[test]
    fn mistakes_are_named_with_the_case_and_what_to_do() {
        let cases = [
            ("[[case]]\nname = \"a\"\n", "exactly one of `messages"),
            (
                "[[case]]\nname = \"a\"\nmessages = [\"x\"]\nsessions = [[\"y\"]]\n",
                "exactly one of",
            ),
            ("[[case]]\nname = \"a b\"\nmessages = [\"x\"]\n", "not allowed"),
            ("[[case]]\nname = \"a\"\nmessages = []\n", "at least one message"),
            (
                "[[case]]\nname = \"a\"\nmessages = [\"x\"]\n[[case]]\nname = \"a\"\nmessages = [\"y\"]\n",
                "unique",
            ),
            (
                "[[case]]\nname = \"a\"\nmessages = [\"x\"]\n[case.expect]\nanswer_matches = \"(\"\n",
                "not a regex",
            ),
            (
                "[[case]]\nname = \"a\"\nmessages = [\"x\"]\nanswer_contains = [\"y\"]\n",
                "unknown field `answer_contains`",
            ),
            ("name = \"empty\"\n", "no `[[case]]`"),
            (
                "timeout_secs = 0\n[[case]]\nname = \"a\"\nmessages = [\"x\"]\n",
                "at least 1",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?} → {err}");
        }
    }

    #[test]
    fn select_keeps_named_cases_and_rejects_unknown_ones() {
        let mut suite = parse(
            "[[case]]\nname = \"a\"\nmessages = [\"x\"]\n[[case]]\nname = \"b\"\nmessages = [\"y\"]\n",
        )
        .unwrap();
        let err = suite.select(&["c".into()]).unwrap_err().to_string();
        assert!(
            err.contains("no case named c") && err.contains("a, b"),
            "{err}"
        );
        suite.select(&["b".into()]).unwrap();
        assert_eq!(suite.cases.len(), 1);
        assert_eq!(suite.cases[0].name, "b");
    }
}
