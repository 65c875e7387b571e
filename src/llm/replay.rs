//! [`ReplayModel`]: a deterministic scripted model read from a scenario file (format and
//! validation in [`scenario`]), used by `hermes demo` and by tests.
//!
//! Matching: rules are tried in file order; the first rule for this model's role whose
//! conditions hold answers.
//! - `when_last = "user"`: for the planner the last message must be a user message; for the
//!   extractor and summariser any last message that is not a tool result (they are usually
//!   given a transcript, whoever "wrote" it).
//! - `when_last = "tool"`: the last message is a tool result; with `after_tool`, of that tool
//!   (its `name`, or the name of the call its `tool_call_id` answers).
//! - `contains`: every substring occurs in the last *user* message (planner) or in the last
//!   message (extractor, summariser).
//!
//! Tool-call ids are `call_<rule number>_<call index>_<hash>`: the rule counted from 1, the call
//! from 0, and 8 hex digits of an FNV-1a hash of the request's messages. Being derived from the
//! conversation rather than from a counter, they are the same after a restart — a resumed turn
//! re-plans to the same ids, so recorded results still match — and differ between conversations.
//! Usage is `None` (the engine counts tokens itself).

mod scenario;

use std::sync::Arc;

use async_trait::async_trait;
use unicode_segmentation::UnicodeSegmentation;

use self::scenario::{Rule, WhenLast, ROLES};
use super::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, DeltaSender, LlmError, Role, ToolCall,
};

/// The scenario name that selects the text passed as `builtin_demo` to [`ReplayModel::load`].
pub const BUILTIN_DEMO: &str = "builtin:demo";
/// The team demo's script (`hermes demo team`).
pub const BUILTIN_TEAM: &str = "builtin:team";
/// The defaults' placeholder: how to connect a real model (`config/connect-scenario.toml`).
pub const BUILTIN_CONNECT: &str = "builtin:connect";

/// How many deltas a reply is streamed in when its rule sets no `stream_chunks`.
const DEFAULT_CHUNKS: usize = 8;

/// A scripted model serving one role of one scenario.
#[derive(Debug, Clone)]
pub struct ReplayModel {
    scenario: String,
    role: String,
    rules: Vec<Rule>,
}

impl ReplayModel {
    /// The model for `role` (planner | extractor | summariser) from scenario text; `origin`
    /// names the text in errors. The whole file is validated, not only this role's rules.
    pub fn from_toml(text: &str, role: &str, origin: &str) -> Result<Self, LlmError> {
        if !ROLES.contains(&role) {
            return Err(LlmError::Config(format!(
                "replay model role `{role}` is unknown; use one of {}",
                ROLES.join(", ")
            )));
        }
        let scenario = scenario::parse(text, origin)?;
        let rules: Vec<Rule> = scenario
            .rules
            .into_iter()
            .filter(|r| r.role == role)
            .collect();
        if rules.is_empty() {
            tracing::warn!(scenario = %scenario.name, role, "replay scenario has no rules for this role");
        }
        Ok(Self {
            scenario: scenario.name,
            role: role.to_string(),
            rules,
        })
    }

    /// The model for `role` from `scenario`: a file path, or `builtin:demo` for `builtin_demo`
    /// (the engine passes `crate::config::DEMO_SCENARIO`).
    pub fn load(scenario: &str, role: &str, builtin_demo: &str) -> Result<Self, LlmError> {
        if scenario == BUILTIN_DEMO {
            return Self::from_toml(builtin_demo, role, BUILTIN_DEMO);
        }
        if scenario == BUILTIN_TEAM {
            return Self::from_toml(crate::config::TEAM_SCENARIO, role, BUILTIN_TEAM);
        }
        if scenario == BUILTIN_CONNECT {
            return Self::from_toml(crate::config::CONNECT_SCENARIO, role, BUILTIN_CONNECT);
        }
        if scenario.starts_with("builtin:") {
            return Err(LlmError::Config(format!(
                "replay scenario `{scenario}` does not exist; the built-in ones are \
                 `{BUILTIN_CONNECT}`, `{BUILTIN_DEMO}` and `{BUILTIN_TEAM}`, anything else is a \
                 file path"
            )));
        }
        let text = std::fs::read_to_string(scenario).map_err(|e| {
            LlmError::Config(format!(
                "cannot read replay scenario file {scenario}: {e}; set `scenario` to an existing \
                 file or to `{BUILTIN_DEMO}`"
            ))
        })?;
        Self::from_toml(&text, role, scenario)
    }

    /// The first rule that answers `messages`.
    fn find_rule(&self, messages: &[Arc<ChatMessage>]) -> Result<&Rule, LlmError> {
        let planner = self.role == "planner";
        self.rules
            .iter()
            .find(|rule| matches(rule, messages, planner))
            .ok_or_else(|| {
                let mut what = format!(
                    "scenario `{}`, role {}, last message {}",
                    self.scenario,
                    self.role,
                    describe_last(messages)
                );
                if self.rules.is_empty() {
                    what.push_str(&format!(
                        "; the scenario has no rules for role {}",
                        self.role
                    ));
                }
                LlmError::NoReplayRule(what)
            })
    }
}

fn matches(rule: &Rule, messages: &[Arc<ChatMessage>], planner: bool) -> bool {
    let Some(last) = messages.last() else {
        return false;
    };
    let last_ok = match rule.when_last {
        WhenLast::User if planner => last.role == Role::User,
        WhenLast::User => last.role != Role::Tool,
        WhenLast::Tool => last.role == Role::Tool,
    };
    if !last_ok {
        return false;
    }
    if let Some(tool) = &rule.after_tool {
        if tool_name_of(messages, last) != Some(tool.as_str()) {
            return false;
        }
    }
    let haystack = if planner {
        messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str())
    } else {
        last.content.as_str()
    };
    rule.contains
        .iter()
        .all(|needle| haystack.contains(needle.as_str()))
}

/// The tool a tool message answers: its `name`, else the call its `tool_call_id` refers to.
fn tool_name_of<'a>(
    messages: &'a [Arc<ChatMessage>],
    tool_message: &'a ChatMessage,
) -> Option<&'a str> {
    if let Some(name) = tool_message.name.as_deref() {
        return Some(name);
    }
    let id = tool_message.tool_call_id.as_deref()?;
    messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .find(|call| call.id == id)
        .map(|call| call.name.as_str())
}

/// `user: "first words…"` or `tool result of f: "…"`, for the no-rule error.
fn describe_last(messages: &[Arc<ChatMessage>]) -> String {
    let Some(last) = messages.last() else {
        return "(none: the request has no messages)".into();
    };
    let mut excerpt: String = last.content.chars().take(60).collect();
    if excerpt.len() < last.content.len() {
        excerpt.push('…');
    }
    match last.role {
        Role::Tool => format!(
            "tool result of {}: {excerpt:?}",
            tool_name_of(messages, last).unwrap_or("an unnamed tool")
        ),
        Role::User => format!("user: {excerpt:?}"),
        Role::System => format!("system: {excerpt:?}"),
        Role::Assistant => format!("assistant: {excerpt:?}"),
    }
}

/// FNV-1a over the messages' JSON: stable across runs, platforms and Rust versions.
fn conversation_hash(messages: &[Arc<ChatMessage>]) -> u32 {
    let bytes = serde_json::to_vec(messages).unwrap_or_default();
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash ^ (hash >> 32)) as u32
}

/// `text` cut into stream deltas that concatenate back to it exactly: `chunks` pieces split
/// between characters when the rule says so; by default about eight pieces split at word
/// starts, or between characters for text with fewer words (e.g. Chinese).
fn split_for_stream(text: &str, chunks: Option<usize>) -> Vec<&str> {
    let graphemes = || {
        text.grapheme_indices(true)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let (starts, pieces) = match chunks {
        Some(n) => (graphemes(), n),
        None => {
            let words = word_starts(text);
            if words.len() >= DEFAULT_CHUNKS {
                (words, DEFAULT_CHUNKS)
            } else {
                (graphemes(), DEFAULT_CHUNKS)
            }
        }
    };
    let pieces = pieces.min(starts.len());
    (0..pieces)
        .map(|k| {
            let from = starts[k * starts.len() / pieces];
            let to = if k + 1 == pieces {
                text.len()
            } else {
                starts[(k + 1) * starts.len() / pieces]
            };
            &text[from..to]
        })
        .collect()
}

/// Byte offsets where a word begins (0, and every non-space after a space).
fn word_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut after_space = true;
    for (i, c) in text.char_indices() {
        if after_space && !c.is_whitespace() {
            starts.push(i);
        }
        after_space = c.is_whitespace();
    }
    // Leading whitespace travels with the first word.
    if let Some(first) = starts.first_mut() {
        *first = 0;
    }
    starts
}

#[async_trait]
impl ChatModel for ReplayModel {
    fn id(&self) -> String {
        format!("replay:{}", self.scenario)
    }

    /// Replay has no tokenizer of its own: it counts as `gpt-4o` (o200k) so context budgets
    /// behave as they would with a real model.
    fn model_name(&self) -> String {
        "gpt-4o".into()
    }

    fn is_local(&self) -> bool {
        true
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        deltas: Option<DeltaSender>,
    ) -> Result<ChatResponse, LlmError> {
        let rule = self.find_rule(&request.messages)?;
        // The hash only names tool calls; hashing costs a serialisation of the conversation.
        let hash = if rule.tool_calls.is_empty() {
            0
        } else {
            conversation_hash(&request.messages)
        };
        let tool_calls: Vec<ToolCall> = rule
            .tool_calls
            .iter()
            .enumerate()
            .map(|(k, call)| ToolCall {
                id: format!("call_{}_{k}_{hash:08x}", rule.number),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .collect();
        if let Some(tx) = deltas {
            for piece in split_for_stream(&rule.text, rule.stream_chunks) {
                let _ = tx.send(piece.to_string());
            }
        }
        tracing::debug!(scenario = %self.scenario, role = %self.role, rule = rule.number, "replay rule answered");
        let finish = if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        Ok(ChatResponse {
            text: rule.text.clone(),
            tool_calls,
            usage: None,
            finish_reason: Some(finish.into()),
            ..ChatResponse::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tokio::sync::mpsc;

    const SCENARIO: &str = r#"
name = "shop"
[[rule]]
role = "planner"
when_last = "user"
contains = ["预算", "Sony"]
text = ""
[[rule.tool_calls]]
name = "order_lookup"
arguments = { order_date = "2025/11/11", category = "Headphones" }
[[rule.tool_calls]]
name = "stock"
[[rule]]
role = "planner"
when_last = "tool"
after_tool = "order_lookup"
contains = ["Sony"]
text = "Your order shipped."
stream_chunks = 3
[[rule]]
role = "planner"
when_last = "tool"
text = "Some tool answered."
[[rule]]
role = "planner"
text = "Hello there, how can I help you with your shopping today, friend?"
[[rule]]
role = "extractor"
contains = ["Sony"]
text = '{"memory_updates": []}'
"#;

    fn model(role: &str) -> ReplayModel {
        ReplayModel::from_toml(SCENARIO, role, "test").unwrap()
    }

    async fn answer(
        model: &ReplayModel,
        messages: Vec<ChatMessage>,
    ) -> Result<ChatResponse, LlmError> {
        let request = ChatRequest {
            messages: crate::llm::shared(messages),
            ..ChatRequest::default()
        };
        model.complete(&request, None).await
    }

    fn shopping() -> Vec<ChatMessage> {
        vec![
            ChatMessage::system("sys"),
            ChatMessage::user("预算 3000，想买 Sony 耳机"),
        ]
    }

    #[tokio::test]
    async fn user_rule_with_all_substrings_answers_with_tool_calls() {
        let reply = answer(&model("planner"), shopping()).await.unwrap();
        assert_eq!(reply.text, "");
        assert_eq!(reply.usage, None);
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        let calls: Vec<_> = reply
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                (
                    "order_lookup",
                    json!({"order_date": "2025/11/11", "category": "Headphones"})
                ),
                ("stock", json!({})),
            ]
        );
        assert!(
            reply.tool_calls[0].id.starts_with("call_1_0_"),
            "{}",
            reply.tool_calls[0].id
        );
        assert!(
            reply.tool_calls[1].id.starts_with("call_1_1_"),
            "{}",
            reply.tool_calls[1].id
        );
    }

    #[tokio::test]
    async fn missing_substring_falls_through_to_a_later_rule() {
        let reply = answer(&model("planner"), vec![ChatMessage::user("预算 3000")])
            .await
            .unwrap();
        assert!(reply.text.starts_with("Hello there"), "{}", reply.text);
        assert!(reply.tool_calls.is_empty());
        assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    }

    #[tokio::test]
    async fn tool_rule_checks_the_tool_name_and_the_last_user_message() {
        let m = model("planner");
        let first = answer(&m, shopping()).await.unwrap();
        let mut messages = shopping();
        messages.push(ChatMessage::assistant_calls("", first.tool_calls.clone()));
        messages.push(ChatMessage::tool(
            first.tool_calls[0].id.clone(),
            "order_lookup",
            "{\"status\":\"shipped\"}",
        ));
        assert_eq!(
            answer(&m, messages.clone()).await.unwrap().text,
            "Your order shipped."
        );

        // Name missing on the tool message: found through tool_call_id.
        messages.last_mut().unwrap().name = None;
        assert_eq!(
            answer(&m, messages.clone()).await.unwrap().text,
            "Your order shipped."
        );

        // Another tool: the after_tool rule is skipped, the generic tool rule answers.
        messages.push(ChatMessage::tool(
            first.tool_calls[1].id.clone(),
            "stock",
            "3",
        ));
        assert_eq!(
            answer(&m, messages).await.unwrap().text,
            "Some tool answered."
        );
    }

    #[tokio::test]
    async fn extractor_matches_its_own_rules_on_the_last_message_whatever_its_role() {
        let m = model("extractor");
        let reply = answer(&m, vec![ChatMessage::system("transcript: I like Sony")])
            .await
            .unwrap();
        assert_eq!(reply.text, "{\"memory_updates\": []}");
        let err = answer(
            &m,
            vec![ChatMessage::user("Sony"), ChatMessage::user("nothing")],
        )
        .await
        .unwrap_err();
        assert!(matches!(err, LlmError::NoReplayRule(_)), "{err}");
    }

    #[tokio::test]
    async fn no_matching_rule_describes_the_last_message() {
        let m = model("summariser");
        let err = answer(&m, vec![ChatMessage::user("please summarise this")])
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("summariser") && text.contains("please summarise"),
            "{text}"
        );
        assert!(text.contains("no rules for role summariser"), "{text}");
        let err = answer(&model("planner"), vec![])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no messages"), "{err}");
    }

    #[tokio::test]
    async fn tool_call_ids_are_deterministic_and_differ_between_conversations() {
        let a = answer(&model("planner"), shopping()).await.unwrap();
        let b = answer(&model("planner"), shopping()).await.unwrap();
        assert_eq!(a.tool_calls, b.tool_calls);
        let mut other = shopping();
        other.insert(1, ChatMessage::user("earlier"));
        let c = answer(&model("planner"), other).await.unwrap();
        assert_ne!(a.tool_calls[0].id, c.tool_calls[0].id);
    }

    async fn streamed(m: &ReplayModel, messages: Vec<ChatMessage>) -> (ChatResponse, Vec<String>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let request = ChatRequest {
            messages: crate::llm::shared(messages),
            ..ChatRequest::default()
        };
        let reply = m.complete(&request, Some(tx)).await.unwrap();
        let mut deltas = Vec::new();
        while let Ok(d) = rx.try_recv() {
            deltas.push(d);
        }
        (reply, deltas)
    }

    #[tokio::test]
    async fn deltas_concatenate_to_the_text_in_the_configured_number_of_chunks() {
        let m = model("planner");
        let (reply, deltas) = streamed(&m, vec![ChatMessage::user("hi")]).await;
        assert_eq!(deltas.len(), 8);
        assert_eq!(deltas.concat(), reply.text);
        assert!(deltas.iter().all(|d| !d.is_empty()));

        let mut messages = vec![ChatMessage::user("Sony")];
        messages.push(ChatMessage::tool("c", "order_lookup", "ok"));
        let (reply, deltas) = streamed(&m, messages).await;
        assert_eq!(deltas.len(), 3);
        assert_eq!(deltas.concat(), reply.text);
    }

    #[test]
    fn default_split_handles_text_without_spaces_and_short_text() {
        let text = "您的订单已于昨天发货，预计明天送达。";
        let pieces = split_for_stream(text, None);
        assert_eq!(pieces.len(), 8);
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_for_stream("ok", None), vec!["o", "k"]);
        assert_eq!(split_for_stream("ok", Some(5)), vec!["o", "k"]);
        assert!(split_for_stream("", None).is_empty());
        let spaced = "  one two three four five six seven eight nine ten";
        assert_eq!(split_for_stream(spaced, None).concat(), spaced);
        assert_eq!(split_for_stream(spaced, None)[0], "  one ");
    }

    #[test]
    fn load_reads_builtin_text_or_a_file_and_explains_failures() {
        let builtin = ReplayModel::load(BUILTIN_DEMO, "planner", SCENARIO).unwrap();
        assert_eq!(builtin.id(), "replay:shop");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, SCENARIO).unwrap();
        let from_file = ReplayModel::load(path.to_str().unwrap(), "extractor", "").unwrap();
        assert_eq!(from_file.rules.len(), 1);

        let err = ReplayModel::load("builtin:other", "planner", SCENARIO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("builtin:demo"), "{err}");
        let missing = dir.path().join("missing.toml");
        let err = ReplayModel::load(missing.to_str().unwrap(), "planner", "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.toml"), "{err}");
        let err = ReplayModel::from_toml(SCENARIO, "critic", "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("role `critic`"), "{err}");
    }
}
