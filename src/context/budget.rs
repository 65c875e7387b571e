//! Context assembly under the token budget (DESIGN §4).
//!
//! Priority: system prompt → tool definitions → **pinned task goal** → current user message
//! (these are never cut) → the rest of the current turn → memory context → key facts →
//! history summary →
//! earlier turns, newest first, whole turns only (a tool result never loses the call that asked
//! for it). Over budget, tool results shrink to their summaries before a turn is dropped. The
//! result never exceeds the budget: when even the parts that are never cut do not fit, the
//! assembly fails with an error that says so.

use std::sync::Arc;

use crate::llm::{ChatMessage, Role};
use crate::store::sessions::StoredMessage;

/// The most tokens the assembled context may use: 90% of the window minus the reply reserve.
pub fn budget(context_window: usize, reply_reserve: usize) -> usize {
    (context_window * 9 / 10).saturating_sub(reply_reserve)
}

/// A message with its token count.
#[derive(Debug, Clone, Copy)]
pub struct Counted<'a> {
    pub message: &'a Arc<ChatMessage>,
    pub tokens: u32,
}

/// What goes into one planning request.
pub struct ContextParts<'a> {
    pub system: Counted<'a>,
    /// Tokens the tool definitions cost (sent beside the messages).
    pub tools_tokens: u32,
    pub goal: Option<Counted<'a>>,
    pub memory: Option<Counted<'a>>,
    /// Identifiers pulled from tool results.
    pub key_facts: Option<Counted<'a>>,
    pub summary: Option<Counted<'a>>,
    /// Earlier turns not covered by the summary, oldest first.
    pub history: &'a [StoredMessage],
    /// The current turn so far (user message first), oldest first.
    pub current: &'a [StoredMessage],
}

/// Shrinks a message for a tight budget (tool results → their summary); returns the shrunk
/// message and its token count, or `None` when it cannot shrink.
pub trait Shrink {
    fn shrink(&self, message: &StoredMessage) -> Option<(ChatMessage, u32)>;
}

/// The assembled messages and their token total (tool definitions included).
#[derive(Debug)]
pub struct Assembled {
    /// Shared with the parts and the session's history they came from: nothing is copied.
    pub messages: Vec<Arc<ChatMessage>>,
    pub tokens: usize,
    /// Earlier messages left out for lack of room.
    pub dropped: usize,
    /// Messages sent in shrunk form.
    pub shrunk: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the parts that are never cut (system prompt, tools, goal, current message: {needed} tokens) exceed the context budget of {budget} tokens; shorten the message or the system prompt, or use a model with a larger window")]
pub struct OverBudget {
    pub needed: usize,
    pub budget: usize,
}

/// One message as sent: full or shrunk.
fn fit(
    m: &StoredMessage,
    room: usize,
    shrink: &dyn Shrink,
) -> Option<(Arc<ChatMessage>, usize, bool)> {
    if m.tokens as usize <= room {
        return Some((m.message.clone(), m.tokens as usize, false));
    }
    if m.message.role == Role::Tool {
        if let Some((small, t)) = shrink.shrink(m) {
            if t as usize <= room {
                return Some((Arc::new(small), t as usize, true));
            }
        }
    }
    None
}

/// Fit a run of messages into `room`, all or nothing; shrinking tool results if needed.
fn fit_all(
    msgs: &[StoredMessage],
    room: usize,
    shrink: &dyn Shrink,
) -> Option<(Vec<Arc<ChatMessage>>, usize, usize)> {
    let full: usize = msgs.iter().map(|m| m.tokens as usize).sum();
    if full <= room {
        return Some((msgs.iter().map(|m| m.message.clone()).collect(), full, 0));
    }
    let mut out = Vec::with_capacity(msgs.len());
    let (mut used, mut shrunk) = (0usize, 0usize);
    // Non-tool messages first at full size, then tool results shrunk into what is left.
    let fixed: usize = msgs
        .iter()
        .filter(|m| m.message.role != Role::Tool)
        .map(|m| m.tokens as usize)
        .sum();
    if fixed > room {
        return None;
    }
    let mut left = room - fixed;
    for m in msgs {
        if m.message.role != Role::Tool {
            out.push(m.message.clone());
            used += m.tokens as usize;
            continue;
        }
        let (msg, t, was_shrunk) = fit(m, left, shrink)?;
        left -= t;
        used += t;
        shrunk += usize::from(was_shrunk);
        out.push(msg);
    }
    Some((out, used, shrunk))
}

pub fn assemble(
    parts: &ContextParts<'_>,
    budget: usize,
    shrink: &dyn Shrink,
) -> Result<Assembled, OverBudget> {
    let (first, rest) = parts
        .current
        .split_first()
        .map_or((None, &[][..]), |(f, r)| (Some(f), r));
    let mut used = parts.system.tokens as usize
        + parts.tools_tokens as usize
        + parts.goal.map_or(0, |g| g.tokens as usize)
        + first.map_or(0, |m| m.tokens as usize);
    if used > budget {
        return Err(OverBudget {
            needed: used,
            budget,
        });
    }
    let (current_rest, t, mut shrunk) = fit_all(rest, budget - used, shrink).ok_or(OverBudget {
        needed: used + rest.iter().map(|m| m.tokens as usize).sum::<usize>(),
        budget,
    })?;
    used += t;
    let take = |c: Option<Counted<'_>>, used: &mut usize| -> Option<Arc<ChatMessage>> {
        let c = c?;
        if *used + c.tokens as usize <= budget {
            *used += c.tokens as usize;
            Some(c.message.clone())
        } else {
            None
        }
    };
    let memory = take(parts.memory, &mut used);
    let key_facts = take(parts.key_facts, &mut used);
    let summary = take(parts.summary, &mut used);
    // Earlier turns, newest first, whole turns only.
    let mut kept: Vec<Vec<Arc<ChatMessage>>> = Vec::new();
    let mut end = parts.history.len();
    while end > 0 {
        let turn_id = &parts.history[end - 1].turn_id;
        let mut start = end;
        while start > 0 && &parts.history[start - 1].turn_id == turn_id {
            start -= 1;
        }
        match fit_all(&parts.history[start..end], budget - used, shrink) {
            Some((msgs, t, s)) => {
                used += t;
                shrunk += s;
                kept.push(msgs);
                end = start;
            }
            None => break,
        }
    }
    let mut messages = Vec::with_capacity(4 + parts.history.len() - end + parts.current.len());
    messages.push(parts.system.message.clone());
    if let Some(g) = parts.goal {
        messages.push(g.message.clone());
    }
    messages.extend(memory);
    messages.extend(key_facts);
    messages.extend(summary);
    for turn in kept.into_iter().rev() {
        messages.extend(turn);
    }
    if let Some(f) = first {
        messages.push(f.message.clone());
    }
    messages.extend(current_rest);
    Ok(Assembled {
        messages,
        tokens: used,
        dropped: end,
        shrunk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoShrink;
    impl Shrink for NoShrink {
        fn shrink(&self, _: &StoredMessage) -> Option<(ChatMessage, u32)> {
            None
        }
    }

    fn stored(seq: u64, turn: &str, tokens: u32) -> StoredMessage {
        StoredMessage {
            seq,
            id: format!("m{seq}"),
            turn_id: turn.into(),
            ts: chrono::Utc::now(),
            tokens,
            usage: None,
            tool_status: None,
            message: ChatMessage::user(format!("m{seq}")).into(),
        }
    }

    #[test]
    fn oldest_whole_turns_are_dropped_first_and_budget_holds() {
        let system = Arc::new(ChatMessage::system("s"));
        let history = vec![
            stored(0, "t1", 50),
            stored(1, "t1", 50),
            stored(2, "t2", 30),
            stored(3, "t2", 30),
        ];
        let current = vec![stored(4, "t3", 20)];
        let parts = ContextParts {
            system: Counted {
                message: &system,
                tokens: 10,
            },
            tools_tokens: 10,
            goal: None,
            memory: None,
            key_facts: None,
            summary: None,
            history: &history,
            current: &current,
        };
        let a = assemble(&parts, 120, &NoShrink).unwrap();
        assert!(a.tokens <= 120);
        assert_eq!(a.dropped, 2);
        let texts: Vec<_> = a.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, vec!["s", "m2", "m3", "m4"]);
    }

    #[test]
    fn parts_that_are_never_cut_over_budget_is_an_error() {
        let system = Arc::new(ChatMessage::system("s"));
        let current = vec![stored(0, "t", 500)];
        let parts = ContextParts {
            system: Counted {
                message: &system,
                tokens: 10,
            },
            tools_tokens: 0,
            goal: None,
            memory: None,
            key_facts: None,
            summary: None,
            history: &[],
            current: &current,
        };
        assert_eq!(
            assemble(&parts, 100, &NoShrink).unwrap_err(),
            OverBudget {
                needed: 510,
                budget: 100
            }
        );
    }

    #[test]
    fn budget_keeps_ten_percent_margin_and_reply_reserve() {
        assert_eq!(budget(128_000, 4096), 115_200 - 4096);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::context::compaction::ToolResultShrinker;
    use crate::context::tokens::TokenCounter;
    use proptest::prelude::*;

    fn counter() -> &'static TokenCounter {
        static COUNTER: std::sync::OnceLock<TokenCounter> = std::sync::OnceLock::new();
        COUNTER.get_or_init(|| TokenCounter::for_model("gpt-4o").expect("tokenizer"))
    }

    /// A random session: turns of user text, tool calls with (sometimes huge) results, answers.
    fn session() -> impl Strategy<Value = Vec<(String, Vec<usize>, String)>> {
        prop::collection::vec(
            (
                "[a-z ]{1,200}",
                prop::collection::vec(0usize..20_000, 0..3),
                "[a-z ]{0,200}",
            ),
            1..30,
        )
    }

    fn stored(seq: &mut u64, turn: usize, message: ChatMessage) -> StoredMessage {
        let tokens = counter().count_message(&message);
        *seq += 1;
        StoredMessage {
            seq: *seq,
            id: format!("m{seq}"),
            turn_id: format!("t{turn}"),
            ts: chrono::Utc::now(),
            tokens,
            usage: None,
            tool_status: None,
            message: message.into(),
        }
    }

    fn build(turns: &[(String, Vec<usize>, String)]) -> Vec<StoredMessage> {
        let mut seq = 0;
        let mut out = Vec::new();
        for (i, (user, results, answer)) in turns.iter().enumerate() {
            out.push(stored(&mut seq, i, ChatMessage::user(user.clone())));
            if !results.is_empty() {
                let calls = (0..results.len())
                    .map(|k| crate::llm::ToolCall {
                        id: format!("c{i}_{k}"),
                        name: "search".into(),
                        arguments: serde_json::json!({"q": user}),
                    })
                    .collect();
                out.push(stored(&mut seq, i, ChatMessage::assistant_calls("", calls)));
                for (k, size) in results.iter().enumerate() {
                    let body = format!(
                        "{{\"status\":\"ok\",\"detail\":\"{}\"}}",
                        "word ".repeat(*size / 5)
                    );
                    out.push(stored(
                        &mut seq,
                        i,
                        ChatMessage::tool(format!("c{i}_{k}"), "search", body),
                    ));
                }
            }
            out.push(stored(&mut seq, i, ChatMessage::assistant(answer.clone())));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn assembled_context_never_exceeds_the_budget(
            turns in session(),
            window in 2_000usize..40_000,
            tools_tokens in 0u32..500,
        ) {
            let messages = build(&turns);
            // The last turn is the current one.
            let last_turn = messages.last().map(|m| m.turn_id.clone()).unwrap_or_default();
            let split = messages.iter().position(|m| m.turn_id == last_turn).unwrap_or(0);
            let (history, current) = messages.split_at(split);
            let current = &current[..1]; // the current turn has only its user message so far
            let system = Arc::new(ChatMessage::system("You are helpful."));
            let goal = Arc::new(ChatMessage::system("Task goal: find the thing"));
            let parts = ContextParts {
                system: Counted { message: &system, tokens: counter().count_message(&system) },
                tools_tokens,
                goal: Some(Counted { message: &goal, tokens: counter().count_message(&goal) }),
                memory: None,
                key_facts: None,
                summary: None,
                history,
                current,
            };
            let budget = budget(window, 1000);
            let shrinker = ToolResultShrinker { tokens: counter() };
            match assemble(&parts, budget, &shrinker) {
                Ok(a) => {
                    // Recount what is actually sent.
                    let real: usize = a.messages.iter().map(|m| counter().count_message(m) as usize).sum::<usize>()
                        + tools_tokens as usize;
                    prop_assert!(real <= budget, "sent {real} tokens, budget {budget}");
                    prop_assert_eq!(real, a.tokens);
                    // Never cut: system first, goal second, current message last.
                    prop_assert_eq!(&a.messages[0], &system);
                    prop_assert_eq!(&a.messages[1], &goal);
                    prop_assert_eq!(a.messages.last(), Some(&current[0].message));
                    // Every tool result still follows the call that asked for it.
                    for (i, m) in a.messages.iter().enumerate() {
                        if m.role == Role::Tool {
                            let id = m.tool_call_id.clone().unwrap_or_default();
                            prop_assert!(a.messages[..i].iter().any(|p| p.tool_calls.iter().any(|c| c.id == id)));
                        }
                    }
                }
                Err(e) => {
                    // Only when the parts that are never cut alone do not fit.
                    prop_assert!(e.needed > budget);
                }
            }
        }
    }
}
