//! o200k's split of plain ASCII text, without running the pattern.
//!
//! Most of what a turn stores is ASCII (English, JSON, numbers), and on it o200k's pattern
//! reduces to a few runs of character classes. [`piece_end`] walks those runs by hand, about a
//! tenth of what a search of the pattern's automaton costs per piece; the first non-ASCII
//! byte it would have to look at, it gives up on the piece and the caller runs the pattern
//! ([`super::bpe`]), so the pieces are the pattern's own (tested against it position by
//! position).
//!
//! The alternatives, in the pattern's order (the first that matches at a position wins):
//! 1. a prefix (not a letter, digit, `\r` or `\n`)?, upper-case letters*, lower-case letters+,
//!    a contraction (`'s 't 're 've 'm 'll 'd`, any case)?
//! 2. the same with upper-case letters+ and lower-case letters*;
//! 3. one to three digits;
//! 4. a space?, punctuation+, then `\r`, `\n` or `/`*;
//! 5. whitespace* ending in `\r` or `\n`: up to the last line break of the run;
//! 6. whitespace to the end of the text; or a run of it but its last character (which then
//!    prefixes what follows); or a single whitespace character.

/// What an ASCII byte is to the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Upper,
    Lower,
    Digit,
    /// `\r` or `\n`.
    LineBreak,
    /// Other whitespace: space, tab, vertical tab, form feed.
    Space,
    /// Punctuation, symbols and control characters.
    Other,
}

/// The class of the byte at `i`: `Some(None)` past the end, `None` (give up) on a byte that
/// is not ASCII, whose class this module does not decide.
fn class_at(text: &[u8], i: usize) -> Option<Option<Class>> {
    let Some(&b) = text.get(i) else {
        return Some(None);
    };
    let class = match b {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::LineBreak,
        b'\t' | 0x0b | 0x0c | b' ' => Class::Space,
        0x80.. => return None,
        _ => Class::Other,
    };
    Some(Some(class))
}

/// Where the piece starting at `start` ends, or `None` when deciding it needs a non-ASCII
/// character's class (the caller then runs the pattern).
pub(super) fn piece_end(text: &[u8], start: usize) -> Option<usize> {
    let first = class_at(text, start)??;
    if let Some(end) = word(text, start, first)? {
        return Some(end);
    }
    match first {
        Class::Digit => {
            let mut i = start + 1;
            while i < start + 3 && class_at(text, i)? == Some(Class::Digit) {
                i += 1;
            }
            Some(i)
        }
        Class::LineBreak | Class::Space => {
            if let Some(end) = punctuation(text, start)? {
                return Some(end);
            }
            whitespace(text, start)
        }
        // A letter always starts a word, and punctuation matches alternative 4.
        Class::Other | Class::Upper | Class::Lower => punctuation(text, start)?,
    }
}

/// Alternatives 1 and 2: a word, with its prefix and contraction. `Some(None)`: neither
/// matches at `start`.
fn word(text: &[u8], start: usize, first: Class) -> Option<Option<usize>> {
    let body = match first {
        Class::Upper | Class::Lower => start,
        Class::Space | Class::Other => start + 1,
        Class::Digit | Class::LineBreak => return Some(None),
    };
    let mut upper_end = body;
    while class_at(text, upper_end)? == Some(Class::Upper) {
        upper_end += 1;
    }
    let mut lower_end = upper_end;
    while class_at(text, lower_end)? == Some(Class::Lower) {
        lower_end += 1;
    }
    let end = if lower_end > upper_end || upper_end > body {
        lower_end
    } else {
        return Some(None);
    };
    Some(Some(contraction(text, end)?))
}

/// `end` moved past a contraction that follows it. Matched ignoring case, so a non-ASCII
/// character after the apostrophe (`ſ` folds to `s`) is left to the pattern.
fn contraction(text: &[u8], end: usize) -> Option<usize> {
    if text.get(end) != Some(&b'\'') {
        return Some(end);
    }
    let lower = |i: usize| -> Option<Option<u8>> {
        match text.get(i) {
            None => Some(None),
            Some(b) if b.is_ascii() => Some(Some(b.to_ascii_lowercase())),
            Some(_) => None,
        }
    };
    Some(match lower(end + 1)? {
        Some(b's' | b't' | b'm' | b'd') => end + 2,
        Some(first @ (b'r' | b'v' | b'l')) => {
            let second = if first == b'l' { b'l' } else { b'e' };
            if lower(end + 2)? == Some(second) {
                end + 3
            } else {
                end
            }
        }
        _ => end,
    })
}

/// Alternative 4: a space?, punctuation+, then line breaks and slashes. `Some(None)`: it does
/// not match at `start`.
fn punctuation(text: &[u8], start: usize) -> Option<Option<usize>> {
    let mut i = start;
    if text[start] == b' ' && class_at(text, start + 1)? == Some(Class::Other) {
        i += 1;
    }
    if class_at(text, i)? != Some(Class::Other) {
        return Some(None);
    }
    while class_at(text, i)? == Some(Class::Other) {
        i += 1;
    }
    while matches!(text.get(i), Some(b'\r' | b'\n' | b'/')) {
        i += 1;
    }
    Some(Some(i))
}

/// Alternatives 5 and 6, for a run of whitespace starting at `start`.
fn whitespace(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    let mut last_break = None;
    loop {
        match class_at(text, i)? {
            Some(Class::LineBreak) => last_break = Some(i),
            Some(Class::Space) => {}
            _ => break,
        }
        i += 1;
    }
    Some(match last_break {
        Some(b) => b + 1,
        None if i == text.len() || i - start == 1 => i,
        None => i - 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::bpe::pattern_piece_end_o200k;
    use proptest::prelude::*;

    /// Every position of `text` where the hand walk decides, against the pattern; and how
    /// many it decided.
    fn agrees_with_the_pattern(text: &str) -> Result<usize, String> {
        let mut decided = 0;
        for (at, _) in text.char_indices() {
            if let Some(end) = piece_end(text.as_bytes(), at) {
                let pattern = pattern_piece_end_o200k(text, at);
                if end != pattern {
                    return Err(format!(
                        "at {at} of {text:?}: {end} by hand, {pattern} by the pattern"
                    ));
                }
                decided += 1;
            }
        }
        Ok(decided)
    }

    #[test]
    fn pieces_of_ascii_text_are_the_patterns() {
        for text in [
            "turn 12: add 17 and 1012",
            "{\"a\":17,\"b\":1012}",
            "The answer is 2034.",
            "I'm sure they'll say it's THEIR'S, DON'T they've",
            "HELLOworld helloWorld ABC def",
            "  leading and trailing  ",
            "line\r\n\r\n  next\n\tx",
            "a  \n  b \t\x0b\x0c c",
            "path/to/file.rs:12 //comment\n\n",
            " ((x)) !!\n\n?/ ' 's 'S 'Ll 're 'VE",
            "\x00\x01\x7f control",
            "123456789 1,234.5",
        ] {
            let decided = agrees_with_the_pattern(text).unwrap();
            assert!(decided > 0, "nothing decided by hand in {text:?}");
        }
    }

    #[test]
    fn a_non_ascii_character_it_would_need_is_left_to_the_pattern() {
        // A lower-case run going on in `é`, a contraction with `ſ` (folds to `s`), a
        // whitespace run going on in a no-break space, punctuation going on in `…`.
        for (text, at) in [("café", 0), ("it'ſ", 0), (" \u{a0}x", 0), ("!…", 0)] {
            assert_eq!(piece_end(text.as_bytes(), at), None, "{text:?}");
        }
        agrees_with_the_pattern("café it'ſ \u{a0} !… naïve Ünï 中文 x").unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn pieces_of_random_text_are_the_patterns(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(' '), Just(' '), Just('\n'), Just('\r'), Just('\t'), Just('\x0b'),
                    Just('\''), Just('s'), Just('S'), Just('l'), Just('L'), Just('e'), Just('r'),
                    Just('v'), Just('T'), Just('m'), Just('d'), Just('7'), Just('0'), Just('.'),
                    Just('/'), Just('"'), Just('{'), Just('_'), Just('-'), Just('\x01'),
                    Just('é'), Just('\u{a0}'), Just('ſ'), Just('中'), Just('…'),
                    proptest::char::range('\0', '\x7f'),
                ],
                0..40,
            ).prop_map(|cs| cs.into_iter().collect::<String>())
        ) {
            if let Err(e) = agrees_with_the_pattern(&text) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}
