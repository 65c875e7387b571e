//! Token counting with the model's real tokenizer (tiktoken-rs' vocabulary, counted by
//! [`super::bpe`]), never chars/4.
//!
//! The vocabulary is loaded once per process; loading takes about a second in debug builds, so
//! build the counter at start-up, off the actor threads.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use super::bpe::{BpeError, Encoding};

use crate::llm::ChatMessage;

/// Per-message overhead of the chat format (role and separators), as OpenAI documents it.
pub const MESSAGE_OVERHEAD: u32 = 4;

/// Most texts [`TokenCounter::count_fixed`] remembers before it starts over.
const MEMO_CAPACITY: usize = 1024;

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
    /// Counts of texts that recur turn after turn (system prompts, tool catalogs), by hash.
    memo: Arc<Mutex<HashMap<u64, u32>>>,
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
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let key = hasher.finish();
        let memo = |m: &Mutex<HashMap<u64, u32>>| {
            m.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .copied()
        };
        if let Some(n) = memo(&self.memo) {
            return n;
        }
        let n = self.count_text(text);
        let mut memo = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.len() >= MEMO_CAPACITY {
            memo.clear();
        }
        memo.insert(key, n);
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
}
