//! Context assembly under the token budget (DESIGN §4).
//!
//! Order: system prompt → memory context → earlier turns (newest kept first, whole turns only,
//! so a tool result is never separated from the call that asked for it) → the current turn.
//! The system prompt, the tool definitions and the current turn are never cut.

use crate::llm::ChatMessage;
use crate::store::sessions::StoredMessage;

/// The most tokens the assembled context may use: 90% of the window minus the reply reserve.
pub fn budget(context_window: usize, reply_reserve: usize) -> usize {
    (context_window * 9 / 10).saturating_sub(reply_reserve)
}

/// What goes into one planning request.
pub struct ContextParts<'a> {
    pub system: &'a ChatMessage,
    pub system_tokens: u32,
    /// Tokens the tool definitions cost (sent beside the messages).
    pub tools_tokens: u32,
    pub memory: Option<&'a ChatMessage>,
    pub memory_tokens: u32,
    /// Earlier turns, oldest first.
    pub history: &'a [StoredMessage],
    /// The current turn so far (user message, then calls and results), oldest first.
    pub current: &'a [StoredMessage],
}

/// The assembled messages and their token total.
pub struct Assembled {
    pub messages: Vec<ChatMessage>,
    pub tokens: usize,
    /// Earlier messages left out for lack of room.
    pub dropped: usize,
}

pub fn assemble(parts: &ContextParts<'_>, budget: usize) -> Assembled {
    let fixed: usize = parts.system_tokens as usize
        + parts.tools_tokens as usize
        + parts
            .current
            .iter()
            .map(|m| m.tokens as usize)
            .sum::<usize>();
    let mut used = fixed;
    let memory = parts
        .memory
        .filter(|_| used + parts.memory_tokens as usize <= budget);
    if memory.is_some() {
        used += parts.memory_tokens as usize;
    }
    // Walk earlier turns newest first, keeping whole turns while they fit.
    let mut keep_from = parts.history.len();
    let mut end = parts.history.len();
    while end > 0 {
        let turn_id = &parts.history[end - 1].turn_id;
        let mut start = end;
        while start > 0 && &parts.history[start - 1].turn_id == turn_id {
            start -= 1;
        }
        let cost: usize = parts.history[start..end]
            .iter()
            .map(|m| m.tokens as usize)
            .sum();
        if used + cost > budget {
            break;
        }
        used += cost;
        keep_from = start;
        end = start;
    }
    let mut messages =
        Vec::with_capacity(2 + parts.history.len() - keep_from + parts.current.len());
    messages.push(parts.system.clone());
    if let Some(m) = memory {
        messages.push(m.clone());
    }
    messages.extend(parts.history[keep_from..].iter().map(|m| m.message.clone()));
    messages.extend(parts.current.iter().map(|m| m.message.clone()));
    Assembled {
        messages,
        tokens: used,
        dropped: keep_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: u64, turn: &str, tokens: u32) -> StoredMessage {
        StoredMessage {
            seq,
            id: format!("m{seq}"),
            turn_id: turn.into(),
            ts: chrono::Utc::now(),
            tokens,
            message: ChatMessage::user(format!("m{seq}")),
        }
    }

    #[test]
    fn oldest_whole_turns_are_dropped_first_and_budget_holds() {
        let system = ChatMessage::system("s");
        let history = vec![
            stored(0, "t1", 50),
            stored(1, "t1", 50),
            stored(2, "t2", 30),
            stored(3, "t2", 30),
        ];
        let current = vec![stored(4, "t3", 20)];
        let parts = ContextParts {
            system: &system,
            system_tokens: 10,
            tools_tokens: 10,
            memory: None,
            memory_tokens: 0,
            history: &history,
            current: &current,
        };
        let a = assemble(&parts, 120);
        assert!(a.tokens <= 120);
        assert_eq!(a.dropped, 2);
        let texts: Vec<_> = a.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, vec!["s", "m2", "m3", "m4"]);
    }

    #[test]
    fn budget_keeps_ten_percent_margin_and_reply_reserve() {
        assert_eq!(budget(128_000, 4096), 115_200 - 4096);
    }
}
