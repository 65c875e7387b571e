//! Memory extraction: the prompt that asks a model for durable user facts in a finished
//! transcript, and the strict parser for its `{"memory_updates": [...]}` reply.
//!
//! The reply is validated against [`UPDATES_SCHEMA`] with `jsonschema` before it becomes
//! [`MemoryUpdate`]s, so a misspelt field or an unknown `op` is an error naming the problem,
//! never silently dropped data.

use std::fmt::Write as _;
use std::sync::{Arc, LazyLock};

use serde::Deserialize;
use serde_json::Value;

use super::record::{MemoryRecord, MemoryUpdate};
use crate::llm::{ChatMessage, ChatRequest, Role};

/// System prompt of the extraction call.
pub const EXTRACTION_SYSTEM_PROMPT: &str = r#"You maintain a long-term memory about ONE user of an assistant. Read the conversation transcript and decide which durable facts about the user should be remembered, changed or forgotten.

Store only:
- preference: lasting likes, dislikes and choices ("prefers aisle seats", "likes Sony headphones");
- fact: stable facts about the user and their life ("lives in Hangzhou", "has a cat named Mochi");
- constraint: limits the assistant must respect ("budget is 5000 yuan", "allergic to peanuts");
- event: things that happened or are planned and matter later ("bought Sony headphones on Double 11 last year", "flies to Tokyo on 3 May").
Never store chit-chat, greetings, thanks, moods or feelings of the moment, questions the user asked, the assistant's own statements, or anything the user did not state or clearly confirm.

Rules:
- key: a stable snake_case slot name in English that says WHAT the memory is about, e.g. "budget", "headphone_brand", "home_city". When an existing memory covers the same slot, reuse its key exactly (op "update"), so the new content replaces the old one.
- op: "add" for a new slot, "update" to change an existing slot, "delete" when the user says something is no longer true or asks to forget or cancel it (use the existing key; content may be empty), "noop" is never needed — return an empty list when there is nothing to remember.
- content: one short self-contained sentence about the user, written in the language the user writes in (Chinese stays Chinese), with concrete values (numbers, names, dates).
- importance: 0.0–1.0, how much this should shape future answers (constraints and strong preferences high, trivia low).
- expiry_days: only for short-lived things (a delivery this week, a trip next month): days until it stops mattering. Omit it for long-term memories. An update replaces the old expiry.
- topics: up to 5 short lowercase topic words, optional.

Reply ONLY with a JSON object, no prose and no code fence:
{"memory_updates": [{"op": "add", "kind": "constraint", "key": "budget", "content": "...", "importance": 0.8, "topics": ["shopping"]}]}
With nothing to remember, reply {"memory_updates": []}."#;

/// JSON Schema of the extractor's reply.
pub const UPDATES_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memory extraction reply",
  "type": "object",
  "required": ["memory_updates"],
  "properties": {
    "memory_updates": {
      "type": "array",
      "maxItems": 50,
      "items": {
        "type": "object",
        "required": ["op", "kind", "key"],
        "additionalProperties": false,
        "properties": {
          "op": {"enum": ["add", "update", "delete", "noop"]},
          "kind": {"enum": ["preference", "fact", "constraint", "event"]},
          "key": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 64},
          "content": {"type": "string", "maxLength": 1000},
          "importance": {"type": "number", "minimum": 0, "maximum": 1},
          "expiry_days": {"type": ["integer", "null"], "minimum": 1, "maximum": 3650},
          "topics": {
            "type": "array",
            "maxItems": 10,
            "items": {"type": "string", "minLength": 1, "maxLength": 64}
          }
        },
        "if": {"properties": {"op": {"enum": ["add", "update"]}}},
        "then": {"required": ["content"], "properties": {"content": {"minLength": 1}}}
      }
    }
  }
}"#;

/// Longest message text copied into the extraction prompt, in characters.
const MAX_MESSAGE_CHARS: usize = 2000;

/// Why a reply could not be turned into memory updates.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    #[error("extractor reply is not JSON ({reason}); reply was: {excerpt} — the extraction model must answer with a JSON object (json_mode), try a stronger model")]
    NotJson { reason: String, excerpt: String },
    #[error("extractor reply does not match the memory_updates schema: {errors}; reply was: {excerpt} — see memory::extract::UPDATES_SCHEMA")]
    Schema { errors: String, excerpt: String },
    #[error(
        "memory_updates schema failed to compile ({0}); this is a bug in Hermes, please report it"
    )]
    BadSchema(String),
}

#[derive(Deserialize)]
struct Reply {
    memory_updates: Vec<MemoryUpdate>,
}

static VALIDATOR: LazyLock<Result<jsonschema::Validator, String>> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(UPDATES_SCHEMA).map_err(|e| e.to_string())?;
    jsonschema::validator_for(&schema).map_err(|e| e.to_string())
});

/// The extraction call for `transcript`, listing the user's `existing` memories with their keys
/// so the model updates slots instead of duplicating them. System messages of the transcript
/// are left out; long messages are cut.
pub fn build_request(transcript: &[ChatMessage], existing: &[MemoryRecord]) -> ChatRequest {
    let mut prompt = String::from("Existing memories (reuse these keys to update or delete):\n");
    if existing.is_empty() {
        prompt.push_str("(none)\n");
    }
    for record in existing {
        let kind = serde_json::to_value(record.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = writeln!(prompt, "- {} [{kind}]: {}", record.key, record.content);
    }
    prompt.push_str("\nTranscript:\n");
    for message in transcript {
        let speaker = match message.role {
            Role::System => continue,
            Role::User => "user".to_string(),
            Role::Assistant => "assistant".to_string(),
            Role::Tool => format!("tool {}", message.name.as_deref().unwrap_or("result")),
        };
        if message.content.trim().is_empty() {
            continue;
        }
        let _ = writeln!(
            prompt,
            "{speaker}: {}",
            truncate(message.content.trim(), MAX_MESSAGE_CHARS)
        );
    }
    prompt.push_str("\nReply with the JSON object only.");
    ChatRequest {
        messages: vec![
            ChatMessage::system(EXTRACTION_SYSTEM_PROMPT).into(),
            ChatMessage::user(prompt).into(),
        ],
        tools: Arc::default(),
        temperature: Some(0.0),
        max_tokens: None,
        json_mode: true,
        ..ChatRequest::default()
    }
}

/// Parse and validate the extractor's reply. Accepts the bare object, the object inside a
/// ```` ```json ```` fence, or the object surrounded by stray prose.
pub fn parse_updates(text: &str) -> Result<Vec<MemoryUpdate>, ExtractError> {
    let value = parse_json_object(text)?;
    let validator = VALIDATOR
        .as_ref()
        .map_err(|e| ExtractError::BadSchema(e.clone()))?;
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    if !errors.is_empty() {
        return Err(ExtractError::Schema {
            errors: errors.join("; "),
            excerpt: excerpt(text),
        });
    }
    serde_json::from_value::<Reply>(value)
        .map(|reply| reply.memory_updates)
        .map_err(|e| ExtractError::Schema {
            errors: e.to_string(),
            excerpt: excerpt(text),
        })
}

fn parse_json_object(text: &str) -> Result<Value, ExtractError> {
    let body = unfence(text);
    let first_try = serde_json::from_str::<Value>(body);
    let reason = match first_try {
        Ok(value) => return Ok(value),
        Err(e) => e.to_string(),
    };
    // Prose around the object: take the outermost braces.
    if let (Some(start), Some(end)) = (body.find('{'), body.rfind('}')) {
        if start < end {
            if let Ok(value) = serde_json::from_str::<Value>(&body[start..=end]) {
                return Ok(value);
            }
        }
    }
    Err(ExtractError::NotJson {
        reason,
        excerpt: excerpt(text),
    })
}

/// The inside of the first ```` ``` ```` fence (any info string), or the trimmed text.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(open) = trimmed.find("```") else {
        return trimmed;
    };
    let after_open = &trimmed[open + 3..];
    // Skip the info string (`json`) up to the end of the fence line.
    let body_start = after_open.find('\n').map_or(after_open.len(), |i| i + 1);
    let body = &after_open[body_start..];
    match body.find("```") {
        Some(close) => body[..close].trim(),
        None => body.trim(),
    }
}

/// Key or topic words that mark a mood or chit-chat rather than a durable fact.
pub const NOISE_WORDS: &[&str] = &[
    "mood",
    "moods",
    "feeling",
    "feelings",
    "emotion",
    "emotions",
    "emotional",
    "greeting",
    "greetings",
    "smalltalk",
    "chitchat",
    "thanks",
    "gratitude",
];

/// Multi-word noise keys (matched as substrings of the normalised key).
const NOISE_PHRASES: &[&str] = &["chit_chat", "small_talk"];

/// Drop what should never be stored even when the model proposes it (the prompt already asks
/// the model not to): `noop`s; adds/updates whose content has no searchable term (`"!!!"`,
/// `"嗯嗯"`); adds/updates that are only a mood or chit-chat — their key has a word of
/// [`NOISE_WORDS`] (`current_mood`, `greeting`) or every topic is one — unless they are
/// constraints. Deletes always pass. Returns the kept updates and how many were dropped.
pub fn drop_noise(updates: Vec<MemoryUpdate>) -> (Vec<MemoryUpdate>, usize) {
    let before = updates.len();
    let kept: Vec<MemoryUpdate> = updates.into_iter().filter(|u| !is_noise(u)).collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

fn is_noise(update: &MemoryUpdate) -> bool {
    use super::record::{MemoryKind, UpdateOp};
    match update.op {
        UpdateOp::Noop => return true,
        UpdateOp::Delete => return false,
        UpdateOp::Add | UpdateOp::Update => {}
    }
    if super::tokenize::tokenize(&update.content).is_empty() {
        return true;
    }
    if update.kind == MemoryKind::Constraint {
        return false;
    }
    use super::merge::normalize_key;
    let key = normalize_key(&update.key);
    let noisy = |word: &str| NOISE_WORDS.contains(&word);
    key.split('_').any(noisy)
        || NOISE_PHRASES.iter().any(|p| key.contains(p))
        || (!update.topics.is_empty()
            && update.topics.iter().all(|t| {
                let t = normalize_key(t);
                noisy(&t) || NOISE_PHRASES.contains(&t.as_str())
            }))
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

fn excerpt(text: &str) -> String {
    truncate(text.trim(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::{MemoryKind, Source, UpdateOp};
    use chrono::Utc;

    #[test]
    fn moods_chit_chat_and_empty_contents_are_dropped_but_facts_and_deletes_kept() {
        use crate::memory::record::{MemoryKind, UpdateOp};
        let u = |op, kind, key: &str, content: &str, topics: &[&str]| MemoryUpdate {
            op,
            kind,
            key: key.into(),
            content: content.into(),
            importance: 0.5,
            expiry_days: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
        };
        let (kept, dropped) = drop_noise(vec![
            u(
                UpdateOp::Add,
                MemoryKind::Fact,
                "current_mood",
                "user feels tired today",
                &[],
            ),
            u(
                UpdateOp::Add,
                MemoryKind::Event,
                "said_hello",
                "用户打了招呼",
                &["greeting"],
            ),
            u(UpdateOp::Add, MemoryKind::Fact, "misc", "!!!", &[]),
            u(UpdateOp::Noop, MemoryKind::Fact, "x", "", &[]),
            u(
                UpdateOp::Add,
                MemoryKind::Constraint,
                "budget",
                "预算5000元",
                &["shopping"],
            ),
            u(
                UpdateOp::Add,
                MemoryKind::Constraint,
                "mood_triggers",
                "avoid loud music",
                &[],
            ),
            u(UpdateOp::Delete, MemoryKind::Fact, "current_mood", "", &[]),
        ]);
        let keys: Vec<&str> = kept.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(keys, ["budget", "mood_triggers", "current_mood"]);
        assert_eq!(dropped, 4);
    }

    #[test]
    fn schema_compiles() {
        assert!(VALIDATOR.is_ok(), "{:?}", VALIDATOR.as_ref().err());
    }

    #[test]
    fn parse_accepts_fenced_json() {
        let reply = "Here you go:\n```json\n{\"memory_updates\": [{\"op\": \"add\", \"kind\": \"constraint\", \"key\": \"budget\", \"content\": \"用户的预算是5000元\", \"importance\": 0.8, \"expiry_days\": null, \"topics\": [\"shopping\"]}]}\n```\n";
        let updates = parse_updates(reply).unwrap();
        assert_eq!(
            updates,
            [MemoryUpdate {
                op: UpdateOp::Add,
                kind: MemoryKind::Constraint,
                key: "budget".into(),
                content: "用户的预算是5000元".into(),
                importance: 0.8,
                expiry_days: None,
                topics: vec!["shopping".into()],
            }]
        );
    }

    #[test]
    fn parse_accepts_bare_object_prose_around_it_and_empty_list() {
        assert!(parse_updates(r#"{"memory_updates": []}"#)
            .unwrap()
            .is_empty());
        let updates = parse_updates(
            r#"Sure! {"memory_updates": [{"op": "delete", "kind": "event", "key": "trip"}]} Done."#,
        )
        .unwrap();
        assert_eq!(updates[0].op, UpdateOp::Delete);
        assert_eq!(updates[0].importance, 0.5, "default importance");
    }

    #[test]
    fn parse_rejects_wrong_shape_with_the_offending_field() {
        let err = parse_updates(r#"{"updates": []}"#).unwrap_err();
        assert!(matches!(err, ExtractError::Schema { .. }), "{err}");
        assert!(err.to_string().contains("memory_updates"), "{err}");

        let err = parse_updates(
            r#"{"memory_updates": [{"op": "upsert", "kind": "fact", "key": "city", "content": "x"}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/memory_updates/0/op"), "{err}");

        let misspelt = r#"{"memory_updates": [{"op": "add", "kind": "fact", "key": "trip", "content": "x", "expiry": 3}]}"#;
        assert!(matches!(
            parse_updates(misspelt),
            Err(ExtractError::Schema { .. })
        ));

        let no_content = r#"{"memory_updates": [{"op": "add", "kind": "fact", "key": "city"}]}"#;
        assert!(matches!(
            parse_updates(no_content),
            Err(ExtractError::Schema { .. })
        ));

        let bad_key = r#"{"memory_updates": [{"op": "add", "kind": "fact", "key": "Home City", "content": "x"}]}"#;
        assert!(matches!(
            parse_updates(bad_key),
            Err(ExtractError::Schema { .. })
        ));
    }

    #[test]
    fn parse_rejects_non_json_clearly() {
        let err = parse_updates("I could not find anything to remember.").unwrap_err();
        assert!(matches!(err, ExtractError::NotJson { .. }), "{err}");
        assert!(err.to_string().contains("I could not find"), "{err}");
    }

    #[test]
    fn request_is_json_mode_and_lists_existing_keys() {
        let now = Utc::now();
        let existing = MemoryRecord {
            id: "r1".into(),
            user: "alice".into(),
            namespace: "default".into(),
            kind: MemoryKind::Constraint,
            key: "budget".into(),
            content: "用户的预算是5000元".into(),
            importance: 0.8,
            confidence: 0.6,
            topics: Vec::new(),
            created_at: now,
            updated_at: now,
            expires_at: None,
            source: Source {
                session: "s".into(),
                message_id: "m".into(),
                source_time: now,
            },
            version: 1,
            history: Vec::new(),
            event_time: None,
            demoted_at: None,
        };
        let transcript = [
            ChatMessage::system("you are a shop assistant"),
            ChatMessage::user("我的预算提高到8000元了"),
            ChatMessage::assistant("好的"),
            ChatMessage::tool("c1", "order_status", "shipped"),
        ];
        let req = build_request(&transcript, &[existing]);
        assert!(req.json_mode);
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.messages[0].content, EXTRACTION_SYSTEM_PROMPT);
        let body = &req.messages[1].content;
        assert!(
            body.contains("- budget [constraint]: 用户的预算是5000元"),
            "{body}"
        );
        assert!(body.contains("user: 我的预算提高到8000元了"), "{body}");
        assert!(body.contains("tool order_status: shipped"), "{body}");
        assert!(
            !body.contains("shop assistant"),
            "system prompt of the session is left out"
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let long = "预".repeat(MAX_MESSAGE_CHARS + 10);
        let req = build_request(&[ChatMessage::user(long)], &[]);
        assert!(req.messages[1].content.contains("…"));
        assert!(req.messages[1].content.contains("(none)"));
    }
}
