//! Token counting with the model's real tokenizer (tiktoken-rs' vocabulary, counted by
//! [`super::bpe`]), never chars/4.
//!
//! The vocabulary is loaded once per process; loading takes about a second in debug builds, so
//! build the counter at start-up, off the actor threads.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use super::bpe::{BpeError, Encoding};

use crate::llm::ChatMessage;

/// Per-message overhead of the chat format (role and separators), as OpenAI documents it.
pub const MESSAGE_OVERHEAD: u32 = 4;

/// Most texts [`TokenCounter::count_fixed`] remembers before it starts over, and most bytes
/// of them (a catalog of many tools is tens of kilobytes of JSON).
const MEMO_CAPACITY: usize = 1024;
const MEMO_BYTES: usize = 4 << 20;

/// The context window of `model` where its family is known, tokens: OpenAI's models from
/// tiktoken-rs' table, Anthropic's Claude models (200,000).
pub fn known_window(model: &str) -> Option<usize> {
    tiktoken_rs::model::get_context_size(model)
        .or_else(|| model.starts_with("claude-").then_some(200_000))
}

/// Counts tokens for one model.
#[derive(Clone)]
pub struct TokenCounter {
    bpe: Arc<Encoding>,
    encoding: String,
    /// The model's own tokenizer (false: a stand-in for a model tiktoken does not know).
    exact: bool,
    /// Counts of texts that recur turn after turn (system prompts, tool catalogs), by text:
    /// a quick hash to find one and a comparison to be sure, for the price of keeping them.
    memo: Arc<Mutex<Memo>>,
}

/// Counts of recurring texts, and the bytes of text kept for them.
#[derive(Default)]
struct Memo {
    counts: FxHashMap<Box<str>, u32>,
    bytes: usize,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("encoding", &self.encoding)
            .field("exact", &self.exact)
            .finish()
    }
}

/// Why no tokenizer could be loaded.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct TokenizerError(#[from] BpeError);

impl TokenCounter {
    /// The tokenizer of `model`; an unknown model uses `o200k_base` and says so once (here).
    pub fn for_model(model: &str) -> Result<Self, TokenizerError> {
        let found = tiktoken_rs::tokenizer::get_tokenizer(model);
        let exact = found.is_some();
        let tokenizer = match found {
            Some(t) => t,
            None => {
                tracing::warn!(
                    model,
                    "no known tokenizer for this model; counting with o200k_base (counts may differ slightly)"
                );
                tiktoken_rs::tokenizer::Tokenizer::O200kBase
            }
        };
        let encoding = format!("{tokenizer:?}");
        let bpe = Encoding::get(tokenizer)?;
        Ok(Self {
            bpe,
            encoding,
            exact,
            memo: Arc::default(),
        })
    }

    pub fn encoding(&self) -> &str {
        &self.encoding
    }

    /// True when this is the model's own tokenizer; false for a stand-in (a model tiktoken
    /// does not know), whose counts the session calibrates from the provider's usage.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    pub fn count_text(&self, text: &str) -> u32 {
        u32::try_from(self.bpe.count(text)).unwrap_or(u32::MAX)
    }

    /// [`count_text`](Self::count_text) for a text that recurs on every turn (a system prompt,
    /// the tool catalog's JSON): counted once, then remembered.
    pub fn count_fixed(&self, text: &str) -> u32 {
        let memo = || self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&n) = memo().counts.get(text) {
            return n;
        }
        let n = self.count_text(text);
        let mut memo = memo();
        if memo.counts.len() >= MEMO_CAPACITY || memo.bytes + text.len() > MEMO_BYTES {
            *memo = Memo::default();
        }
        if memo.counts.insert(text.into(), n).is_none() {
            memo.bytes += text.len();
        }
        n
    }

    /// Tokens one message costs in a chat request, tool calls included.
    pub fn count_message(&self, message: &ChatMessage) -> u32 {
        let mut n = MESSAGE_OVERHEAD + self.count_text(&message.content);
        for call in &message.tool_calls {
            n = n
                .saturating_add(self.count_text(&call.name))
                .saturating_add(self.count_text(&call.arguments.to_string()))
                .saturating_add(MESSAGE_OVERHEAD);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_real_tokens_not_character_estimates() {
        let c = TokenCounter::for_model("gpt-4o").unwrap();
        assert_eq!(c.count_text("hello world"), 2);
        // Chinese text: far from chars/4.
        let zh = "帮我查一下我去年双十一买的耳机订单到哪了";
        let n = c.count_text(zh);
        assert!(n > 5 && n < 30, "{n}");
    }

    #[test]
    fn unknown_model_falls_back() {
        let c = TokenCounter::for_model("my-local-llama").unwrap();
        assert!(c.encoding().contains("O200k"));
        assert!(!c.is_exact());
        assert!(TokenCounter::for_model("gpt-4o").unwrap().is_exact());
    }

    #[test]
    fn a_recurring_text_is_counted_by_its_content_and_the_memo_stays_bounded() {
        let c = TokenCounter::for_model("gpt-4o").unwrap();
        let catalog = r#"[{"name":"add","description":"Add two numbers"}]"#;
        let other = r#"[{"name":"add","description":"Add three numbers"}]"#;
        assert_eq!(c.count_fixed(catalog), c.count_text(catalog));
        assert_eq!(c.count_fixed(other), c.count_text(other));
        assert_eq!(c.count_fixed(catalog), c.count_text(catalog));
        let big = "word ".repeat(MEMO_BYTES / 5 / 3);
        for i in 0..8 {
            let text = format!("{i} {big}");
            assert_eq!(c.count_fixed(&text), c.count_text(&text));
            let memo = c.memo.lock().unwrap();
            assert!(memo.bytes <= MEMO_BYTES, "{} bytes kept", memo.bytes);
            assert_eq!(
                memo.bytes,
                memo.counts.keys().map(|k| k.len()).sum::<usize>()
            );
        }
    }
}
