//! Keeping long sessions cheap: which older turns to fold into the history summary, and how a
//! tool result shrinks to its summary when the budget is tight.
//!
//! Only the `recent_turns` newest turns travel verbatim; once `FOLD_EVERY` more have piled up
//! behind them they are folded into the summary by one summariser call, so the cost of a turn
//! does not grow with the length of the session. The full history stays in sled and is
//! searchable.

use std::sync::Arc;

use serde_json::Value;

use super::budget::Shrink;
use super::tokens::TokenCounter;
use crate::llm::{ChatMessage, Role};
use crate::store::sessions::StoredMessage;

/// Fold only when this many turns beyond `recent_turns` have accumulated (amortises the
/// summariser call).
pub const FOLD_EVERY: usize = 5;

/// Characters of a tool result kept when it is shrunk.
pub const SHRUNK_TOOL_CHARS: usize = 160;

/// Where the verbatim part of `history` should start when it is time to fold: everything
/// before the returned index goes into the summary. `None` when nothing needs folding.
pub fn fold_split(history: &[StoredMessage], recent_turns: usize) -> Option<usize> {
    let mut boundaries = Vec::new(); // index where each turn starts
    for (i, m) in history.iter().enumerate() {
        if i == 0 || history[i - 1].turn_id != m.turn_id {
            boundaries.push(i);
        }
    }
    if boundaries.len() <= recent_turns + FOLD_EVERY {
        return None;
    }
    Some(boundaries[boundaries.len() - recent_turns])
}

/// The messages to send to the summariser: tool results cut short (the summary needs their
/// gist, not their bulk).
pub fn for_summary(messages: &[StoredMessage]) -> Vec<Arc<ChatMessage>> {
    messages
        .iter()
        .map(|m| {
            if m.message.role != Role::Tool {
                return m.message.clone();
            }
            let mut msg = (*m.message).clone();
            msg.content = cut(&msg.content, 400);
            Arc::new(msg)
        })
        .collect()
}

fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max_chars).collect::<String>())
    }
}

/// Shrinks tool results to their status and a short summary, pointing at the stored original.
pub struct ToolResultShrinker<'a> {
    pub tokens: &'a TokenCounter,
}

impl Shrink for ToolResultShrinker<'_> {
    fn shrink(&self, m: &StoredMessage) -> Option<(ChatMessage, u32)> {
        if m.message.role != Role::Tool {
            return None;
        }
        let parsed: Option<Value> = serde_json::from_str(&m.message.content).ok();
        let status = parsed
            .as_ref()
            .and_then(|v| v.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("ok");
        let summary = parsed
            .as_ref()
            .and_then(|v| v.get("summary"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| cut(&m.message.content, SHRUNK_TOOL_CHARS));
        let content = serde_json::json!({
            "status": status,
            "summary": summary,
            "detail": "trimmed for the context window; the full result is stored",
            "raw_reference": format!("message:{}", m.seq),
        })
        .to_string();
        let mut small = (*m.message).clone();
        small.content = content;
        let tokens = self.tokens.count_message(&small);
        (tokens < m.tokens).then_some((small, tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: u64, turn: &str) -> StoredMessage {
        StoredMessage {
            seq,
            id: format!("m{seq}"),
            turn_id: turn.into(),
            ts: chrono::Utc::now(),
            tokens: 5,
            usage: None,
            tool_status: None,
            message: ChatMessage::user("x").into(),
        }
    }

    #[test]
    fn folds_all_but_the_recent_turns_once_enough_pile_up() {
        let history: Vec<_> = (0..30).map(|i| stored(i, &format!("t{}", i / 2))).collect();
        // 15 turns, keep 10 verbatim: not yet (10 + 5 = 15).
        assert_eq!(fold_split(&history, 10), None);
        let history: Vec<_> = (0..32).map(|i| stored(i, &format!("t{}", i / 2))).collect();
        // 16 turns: fold the 6 oldest (12 messages).
        assert_eq!(fold_split(&history, 10), Some(12));
    }

    #[test]
    fn a_large_tool_result_shrinks_to_a_short_summary() {
        let tokens = TokenCounter::for_model("gpt-4o").unwrap();
        let big = format!(
            "{{\"status\":\"ok\",\"detail\":\"{}\"}}",
            "lorem ipsum ".repeat(500)
        );
        let mut m = stored(3, "t");
        m.message = ChatMessage::tool("c1", "search", big).into();
        m.tokens = tokens.count_message(&m.message);
        let (small, t) = ToolResultShrinker { tokens: &tokens }.shrink(&m).unwrap();
        assert!(t < 100, "{t}");
        assert!(small.content.contains("message:3"));
        assert_eq!(small.tool_call_id.as_deref(), Some("c1"));
    }
}
