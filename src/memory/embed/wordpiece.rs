//! A BERT-uncased WordPiece tokeniser: what `tokenizer.json` of all-MiniLM-L6-v2 describes
//! (`BertNormalizer` lowercase + strip accents + CJK spacing, `BertPreTokenizer`, `WordPiece`
//! with `##` continuations), without the `tokenizers` crate.
//!
//! Only the vocabulary is read from `tokenizer.json` (`model.vocab`, token → id); the rules are
//! the fixed BERT ones:
//!
//! 1. drop control characters and U+FFFD, map every whitespace to a space;
//! 2. put spaces around CJK ideographs, so each becomes a word of its own;
//! 3. lowercase, decompose (NFD) and drop combining marks (`café` → `cafe`);
//! 4. split on whitespace, then cut every punctuation character out as its own word;
//! 5. each word becomes the longest vocabulary pieces from the left (`playing` → `play`,
//!    `##ing`), or `[UNK]` when some part of it has no piece (or it is past 100 characters).

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// Words longer than this become `[UNK]`, as in BERT.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary with BERT's uncased pre-processing.
#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: Option<u32>,
}

/// Why a vocabulary could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    #[error("tokenizer.json is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("tokenizer.json has no WordPiece vocabulary at model.vocab")]
    NoVocab,
}

impl WordPiece {
    /// The vocabulary of a Hugging Face `tokenizer.json` (`model.vocab`).
    pub fn from_tokenizer_json(bytes: &[u8]) -> Result<Self, VocabError> {
        let json: serde_json::Value = serde_json::from_slice(bytes)?;
        let vocab = json
            .pointer("/model/vocab")
            .and_then(serde_json::Value::as_object)
            .ok_or(VocabError::NoVocab)?;
        let vocab: HashMap<String, u32> = vocab
            .iter()
            .filter_map(|(token, id)| Some((token.clone(), u32::try_from(id.as_u64()?).ok()?)))
            .collect();
        if vocab.is_empty() {
            return Err(VocabError::NoVocab);
        }
        Ok(Self::from_vocab(vocab))
    }

    /// A tokeniser over `vocab` (token → id).
    pub fn from_vocab(vocab: HashMap<String, u32>) -> Self {
        let unk = vocab.get("[UNK]").copied();
        Self { vocab, unk }
    }

    /// Largest id in the vocabulary plus one.
    pub fn id_bound(&self) -> usize {
        self.vocab
            .values()
            .map(|id| *id as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// The token ids of `text`, without `[CLS]`/`[SEP]`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in pre_tokenize(text) {
            self.push_word(&word, &mut ids);
        }
        ids
    }

    fn push_word(&self, word: &str, ids: &mut Vec<u32>) {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            ids.extend(self.unk);
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |(i, _)| *i);
                let piece = &word[from..to];
                let id = if start == 0 {
                    self.vocab.get(piece)
                } else {
                    self.vocab.get(&format!("##{piece}"))
                };
                if let Some(id) = id {
                    found = Some(*id);
                    break;
                }
                end -= 1;
            }
            let Some(id) = found else {
                ids.extend(self.unk);
                return;
            };
            pieces.push(id);
            start = end;
        }
        ids.extend(pieces);
    }
}

/// BERT's normalisation and pre-tokenisation: the words WordPiece then cuts.
pub fn pre_tokenize(text: &str) -> Vec<String> {
    let mut spaced = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\u{0}' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            spaced.push(' ');
        } else if is_cjk_ideograph(c) {
            spaced.push(' ');
            spaced.push(c);
            spaced.push(' ');
        } else {
            spaced.push(c);
        }
    }
    let folded: String = spaced
        .to_lowercase()
        .nfd()
        .filter(|c| !is_combining_mark(*c))
        .collect();
    let mut words = Vec::new();
    for chunk in folded.split(' ').filter(|w| !w.is_empty()) {
        let mut current = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                words.push(c.to_string());
            } else {
                current.push(c);
            }
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
}

/// ASCII symbols count as punctuation (as in BERT), as does any other character that is
/// neither a letter, a digit, a mark nor whitespace.
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    !(c.is_alphanumeric() || c.is_whitespace() || is_combining_mark(c))
}

/// Combining marks left by NFD decomposition (the blocks accents live in).
fn is_combining_mark(c: char) -> bool {
    matches!(c as u32,
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
    )
}

/// The CJK ideograph blocks BERT spaces out.
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B820..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &[&str]) -> WordPiece {
        WordPiece::from_vocab(
            tokens
                .iter()
                .enumerate()
                .map(|(i, t)| (t.to_string(), i as u32))
                .collect(),
        )
    }

    #[test]
    fn pre_tokenizer_lowercases_strips_accents_and_cuts_punctuation() {
        assert_eq!(
            pre_tokenize("Café, NAÏVE-ish!  Hi\tthere"),
            ["cafe", ",", "naive", "-", "ish", "!", "hi", "there"]
        );
        assert_eq!(pre_tokenize("我的耳机ok"), ["我", "的", "耳", "机", "ok"]);
        assert!(pre_tokenize(" \u{0}\u{fffd} ").is_empty());
    }

    #[test]
    fn words_become_the_longest_pieces_from_the_left() {
        let wp = vocab(&["[UNK]", "play", "##ing", "##s", "un", "##play", "a"]);
        assert_eq!(wp.encode("Playing plays"), [1, 2, 1, 3]);
        assert_eq!(wp.encode("unplay"), [4, 5]);
        assert_eq!(wp.encode("xyz a"), [0, 6], "an unknown word is one [UNK]");
        assert_eq!(wp.encode(&"a".repeat(101)), [0]);
        assert_eq!(wp.id_bound(), 7);
    }

    #[test]
    fn the_vocabulary_is_read_from_tokenizer_json() {
        let json = br#"{"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "hi": 1}}}"#;
        let wp = WordPiece::from_tokenizer_json(json).unwrap();
        assert_eq!(wp.encode("HI there"), [1, 0]);
        assert!(WordPiece::from_tokenizer_json(br#"{"model": {}}"#).is_err());
    }
}
