//! Exact token counts for OpenAI's byte-pair encodings, without tiktoken's slow part.
//!
//! tiktoken splits text with a pattern that needs a look-ahead (`\s+(?!\S)`), so it runs on
//! fancy-regex's backtracking engine: a fifth of the CPU of a Hermes turn went there. The
//! split here uses the same pattern with the look-ahead rewritten as a real look-ahead
//! character that is given back (`\s+\s` minus its last character, and `\s+$` at the end of the
//! text), so regex-automata's DFA can run it; each piece is then merged over the encoding's
//! ranks exactly as tiktoken merges it. The counts equal `CoreBPE::encode_ordinary(..).len()`
//! (tested against tiktoken on random and real text).
//!
//! The ranks come from tiktoken-rs' own vocabulary, read once; tiktoken's encoder is dropped
//! afterwards, so a process holds one table instead of tiktoken's three.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};
use rustc_hash::FxHashMap;
use tiktoken_rs::tokenizer::Tokenizer;

type Rank = u32;

/// Why an encoding could not be built.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot build the {encoding} tokenizer: {reason}")]
pub struct BpeError {
    encoding: &'static str,
    reason: String,
}

/// One encoding: its split pattern and its ranks.
pub struct Encoding {
    split: Splitter,
    ranks: FxHashMap<Box<[u8]>, Rank>,
}

impl std::fmt::Debug for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoding")
            .field("ranks", &self.ranks.len())
            .finish()
    }
}

/// The o200k alternatives before the look-ahead one (tiktoken-rs' `O200K_BASE_PAT_STR`).
const O200K_HEAD: &[&str] = &[
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+$",
];
/// cl100k's (tiktoken-rs' pattern without its possessive quantifiers, which change nothing
/// here: no alternative can succeed by backtracking into them).
const CL100K_HEAD: &[&str] = &[
    r"'(?i:[sdmt]|ll|ve|re)",
    r"[^\r\n\p{L}\p{N}]?\p{L}+",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s+$",
    r"\s*[\r\n]",
];
/// r50k's, p50k's and gpt2's.
const R50K_HEAD: &[&str] = &[
    r"'(?:[sdmt]|ll|ve|re)",
    r" ?\p{L}+",
    r" ?\p{N}+",
    r" ?[^\s\p{L}\p{N}]+",
    r"\s+$",
];

impl Encoding {
    /// The encoding `tokenizer` uses, built on first use and shared by the process.
    pub fn get(tokenizer: Tokenizer) -> Result<Arc<Encoding>, BpeError> {
        static O200K: OnceLock<Result<Arc<Encoding>, BpeError>> = OnceLock::new();
        static CL100K: OnceLock<Result<Arc<Encoding>, BpeError>> = OnceLock::new();
        static P50K: OnceLock<Result<Arc<Encoding>, BpeError>> = OnceLock::new();
        static R50K: OnceLock<Result<Arc<Encoding>, BpeError>> = OnceLock::new();
        type Vocabulary = fn() -> anyhow::Result<tiktoken_rs::CoreBPE>;
        let (cell, name, vocabulary, head, last): (_, _, Vocabulary, _, &str) = match tokenizer {
            // Harmony adds special tokens only; ordinary text encodes as o200k_base.
            Tokenizer::O200kBase | Tokenizer::O200kHarmony => (
                &O200K,
                "o200k_base",
                tiktoken_rs::o200k_base,
                O200K_HEAD,
                r"\s+",
            ),
            Tokenizer::Cl100kBase => (
                &CL100K,
                "cl100k_base",
                tiktoken_rs::cl100k_base,
                CL100K_HEAD,
                r"\s",
            ),
            Tokenizer::P50kBase | Tokenizer::P50kEdit => {
                (&P50K, "p50k_base", tiktoken_rs::p50k_base, R50K_HEAD, r"\s")
            }
            Tokenizer::R50kBase | Tokenizer::Gpt2 => {
                (&R50K, "r50k_base", tiktoken_rs::r50k_base, R50K_HEAD, r"\s")
            }
        };
        cell.get_or_init(|| {
            let fail = |reason: String| BpeError {
                encoding: name,
                reason,
            };
            let core = vocabulary().map_err(|e| fail(e.to_string()))?;
            let mut split = Splitter::new(head, last).map_err(fail)?;
            split.ascii_by_hand = name == "o200k_base";
            Ok(Arc::new(Encoding {
                split,
                ranks: ordinary_ranks(&core),
            }))
        })
        .clone()
    }

    /// Tokens `text` encodes to, special-token text counted as ordinary text (as
    /// `encode_ordinary` does).
    pub fn count(&self, text: &str) -> usize {
        let mut at = 0;
        let mut n = 0;
        while at < text.len() {
            let end = self.split.piece_end(text, at);
            n += self.count_piece(&text.as_bytes()[at..end]);
            at = end;
        }
        n
    }

    fn count_piece(&self, piece: &[u8]) -> usize {
        if piece.len() == 1 || self.ranks.contains_key(piece) {
            return 1;
        }
        if piece.len() < LARGE_PIECE {
            small_merge(&self.ranks, piece)
        } else {
            large_merge(&self.ranks, piece)
        }
    }
}

/// Every ordinary token's bytes and rank, read from tiktoken's decoder. Ranks are dense up to
/// the special tokens, which are left out (ordinary encoding never produces them).
fn ordinary_ranks(core: &tiktoken_rs::CoreBPE) -> FxHashMap<Box<[u8]>, Rank> {
    let specials = core.special_tokens();
    let mut ranks = FxHashMap::default();
    let mut missing = 0;
    let mut rank: Rank = 0;
    // Past the last rank every lookup fails; a long run of failures ends the scan.
    while missing < 4096 {
        match core.decode_bytes(&[rank]) {
            Ok(bytes) if !std::str::from_utf8(&bytes).is_ok_and(|s| specials.contains(s)) => {
                ranks.insert(bytes.into_boxed_slice(), rank);
                missing = 0;
            }
            _ => missing += 1,
        }
        rank += 1;
    }
    ranks.shrink_to_fit();
    ranks
}

/// The split pattern as three prioritised patterns: the alternatives before the look-ahead,
/// the look-ahead one (`\s+\s`, whose last character is given back) and the last one.
struct Splitter {
    regex: Regex,
    /// o200k's: pieces of ASCII text are found without the pattern
    /// ([`super::o200k_ascii`]).
    ascii_by_hand: bool,
}

/// Pattern index of the look-ahead pattern in [`Splitter::regex`].
const LOOKAHEAD: usize = 1;

impl Splitter {
    fn new(head: &[&str], last: &str) -> Result<Self, String> {
        let head = head.join("|");
        let regex = Regex::new_many(&[head.as_str(), r"\s+\s", last]).map_err(|e| e.to_string())?;
        Ok(Self {
            regex,
            ascii_by_hand: false,
        })
    }

    /// Where the piece starting at `at` ends.
    fn piece_end(&self, text: &str, at: usize) -> usize {
        if self.ascii_by_hand {
            if let Some(end) = super::o200k_ascii::piece_end(text.as_bytes(), at) {
                return end;
            }
        }
        self.pattern_piece_end(text, at)
    }

    /// [`Self::piece_end`] by the pattern alone.
    fn pattern_piece_end(&self, text: &str, at: usize) -> usize {
        let input = Input::new(&text[at..]).anchored(Anchored::Yes);
        let Some(m) = self.regex.search(&input) else {
            // Every character matches one of the patterns; step over one to be safe.
            return at + text[at..].chars().next().map_or(1, char::len_utf8);
        };
        let mut end = at + m.end();
        if m.pattern().as_usize() == LOOKAHEAD {
            end -= text[at..end].chars().next_back().map_or(0, char::len_utf8);
        }
        end
    }
}

/// Where o200k's pattern ends the piece of `text` starting at `at` (to test
/// [`super::o200k_ascii`] against).
#[cfg(test)]
pub(super) fn pattern_piece_end_o200k(text: &str, at: usize) -> usize {
    match Encoding::get(Tokenizer::O200kBase) {
        Ok(encoding) => encoding.split.pattern_piece_end(text, at),
        Err(e) => panic!("{e}"),
    }
}

/// From this length on a piece is merged with a heap (tiktoken switches at the same length).
const LARGE_PIECE: usize = 100;

/// Tokens of `piece` by repeatedly merging the adjacent pair of lowest rank (leftmost first).
fn small_merge(ranks: &FxHashMap<Box<[u8]>, Rank>, piece: &[u8]) -> usize {
    let rank_of = |bytes: &[u8]| ranks.get(bytes).copied().unwrap_or(Rank::MAX);
    // parts[i] = (start of part i, rank of merging part i with part i + 1)
    let mut parts: Vec<(usize, Rank)> = (0..piece.len() - 1)
        .map(|i| (i, rank_of(&piece[i..i + 2])))
        .collect();
    parts.push((piece.len() - 1, Rank::MAX));
    parts.push((piece.len(), Rank::MAX));
    let pair_rank = |parts: &[(usize, Rank)], i: usize| {
        if i + 3 < parts.len() {
            rank_of(&piece[parts[i].0..parts[i + 3].0])
        } else {
            Rank::MAX
        }
    };
    while let Some((i, _)) = parts[..parts.len() - 1]
        .iter()
        .enumerate()
        .filter(|(_, &(_, r))| r != Rank::MAX)
        .min_by_key(|(i, &(_, r))| (r, *i))
    {
        if i > 0 {
            parts[i - 1].1 = pair_rank(&parts, i - 1);
        }
        parts[i].1 = pair_rank(&parts, i);
        parts.remove(i + 1);
    }
    parts.len() - 1
}

/// [`small_merge`] for long pieces: the same merges in the same order, found with a heap of
/// (rank, start) over a linked list of parts, so a long run costs n log n, not n².
fn large_merge(ranks: &FxHashMap<Box<[u8]>, Rank>, piece: &[u8]) -> usize {
    let n = piece.len();
    // Parts are identified by their start; `next[s]`/`prev[s]` link live parts.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    let rank_at = |next: &[usize], s: usize| -> Option<Rank> {
        let mid = next[s];
        if mid >= n {
            return None;
        }
        ranks.get(&piece[s..next[mid]]).copied()
    };
    let mut heap: BinaryHeap<Reverse<(Rank, usize, usize)>> = BinaryHeap::new();
    for s in 0..n {
        if let Some(r) = rank_at(&next, s) {
            heap.push(Reverse((r, s, next[next[s]])));
        }
    }
    let mut parts = n;
    while let Some(Reverse((r, s, end))) = heap.pop() {
        // Stale: the part or its neighbour changed since this pair was pushed.
        if !alive[s] || next[s] >= n || next[next[s]] != end || rank_at(&next, s) != Some(r) {
            continue;
        }
        let mid = next[s];
        alive[mid] = false;
        next[s] = end;
        if end < n {
            prev[end] = s;
        }
        parts -= 1;
        if let Some(r) = rank_at(&next, s) {
            heap.push(Reverse((r, s, next[next[s]])));
        }
        let before = prev[s];
        if before != usize::MAX {
            if let Some(r) = rank_at(&next, before) {
                heap.push(Reverse((r, before, next[next[before]])));
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tiktoken(tokenizer: Tokenizer) -> &'static tiktoken_rs::CoreBPE {
        tiktoken_rs::bpe_for_tokenizer(tokenizer).unwrap()
    }

    fn same_as_tiktoken(tokenizer: Tokenizer, text: &str) {
        let ours = Encoding::get(tokenizer).unwrap().count(text);
        let theirs = tiktoken(tokenizer).encode_ordinary(text).len();
        assert_eq!(ours, theirs, "{tokenizer:?} on {text:?}");
    }

    const TRICKY: &[&str] = &[
        "",
        " ",
        "   ",
        "hello world",
        "hello   world",
        "trailing   ",
        "\n\n\n",
        "a\n\n  b",
        "  \n  x",
        "\t\t\tx",
        "\r\n\r\nline",
        "x \u{a0}\u{3000} y",
        "I'm sure they'll say it's THEIR'S",
        "DON'T STOP",
        "12345678901",
        "3.14159 + 2,718 = x",
        "{\"a\":5,\"b\":1005}",
        "The answer is 2010.",
        "帮我查一下我去年双十一买的耳机订单到哪了",
        "emoji 🎧🎧 and ñandú Ünïcödé",
        "path/to/file.rs:12 //comment\n",
        "<|endoftext|> is ordinary text here",
        "e\u{301}te\u{301}",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ];

    #[test]
    fn counts_equal_tiktoken_on_tricky_text_for_every_encoding() {
        for tokenizer in [
            Tokenizer::O200kBase,
            Tokenizer::Cl100kBase,
            Tokenizer::R50kBase,
            Tokenizer::P50kBase,
        ] {
            for text in TRICKY {
                same_as_tiktoken(tokenizer, text);
            }
        }
    }

    #[test]
    fn long_pieces_merge_like_tiktoken() {
        let long_word: String = "abcdefghijklmnopqrstuvwxyz".repeat(40);
        let punctuation: String = "=-+*/#".repeat(100);
        let base64 = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5".repeat(10);
        for text in [long_word.as_str(), &punctuation, &base64] {
            same_as_tiktoken(Tokenizer::O200kBase, text);
            same_as_tiktoken(Tokenizer::Cl100kBase, text);
        }
    }

    #[test]
    fn counts_equal_tiktoken_on_conversation_text() {
        // LoCoMo dialogue from the shared test data, when this checkout has it beside it.
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo-dev.json");
        let Ok(raw) = std::fs::read_to_string(&path) else {
            eprintln!("skipped: {} is absent", path.display());
            return;
        };
        let texts: Vec<&str> = raw.split('"').filter(|s| s.len() > 20).take(3000).collect();
        for text in texts {
            same_as_tiktoken(Tokenizer::O200kBase, text);
            same_as_tiktoken(Tokenizer::Cl100kBase, text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn counts_equal_tiktoken_on_random_text(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(' '), Just(' '), Just('\n'), Just('\r'), Just('\t'), Just('\u{a0}'),
                    Just('\u{3000}'), Just('\''), Just('s'), Just('L'), Just('l'), Just('T'),
                    Just('7'), Just('0'), Just('.'), Just('/'), Just('"'), Just('{'), Just('中'),
                    Just('é'), Just('\u{301}'), Just('🎧'), Just('_'), Just('-'),
                    any::<char>(),
                ],
                0..60,
            ).prop_map(|cs| cs.into_iter().collect::<String>())
        ) {
            for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase, Tokenizer::R50kBase] {
                let ours = Encoding::get(tokenizer).unwrap().count(&text);
                let theirs = tiktoken(tokenizer).encode_ordinary(&text).len();
                prop_assert_eq!(ours, theirs, "{:?} on {:?}", tokenizer, text);
            }
        }
    }
}
