//! Tokeniser for memory recall: one function, [`tokenize`], that turns Chinese, Japanese,
//! Korean and Latin-script text into the terms BM25 matches on.
//!
//! Rules, applied after lowercasing and folding full-width ASCII (`Ｓｏｎｙ５０００`) to ASCII:
//!
//! * **Latin words** are runs of alphanumeric characters; everything else separates them.
//!   A `,` between two digits is dropped (`5,000` → `5000`) and a `.` between two digits is
//!   kept (`3.5`); a word is cut where letters meet digits (`wh1000xm5` → `wh`, `1000`, `xm`,
//!   `5`). English stopwords ([`ENGLISH_STOPWORDS`]) and single letters are removed.
//!   Purely alphabetic words get a light stemmer ([`stem`]): plural `-s`/`-es`/`-ies`, `-ing`,
//!   `-ed`, then a final `-e`, so `headphones`/`headphone` and `ordered`/`ordering`/`order`
//!   meet on one term. Irregular past forms and plurals ([`IRREGULAR_FORMS`]: `went`, `bought`,
//!   `children`) are first mapped to their base form, so a question in the present ("when did
//!   she go") meets a memory told in the past ("I went"). Numbers are kept as they are (`5000`).
//! * **English contractions**: a clitic after an apostrophe (`'` or `’`) is dropped with it —
//!   `'s`, `'re`, `'ve`, `'ll`, `'d`, `'m` (`Caroline's` → `caroline`, `I've` → nothing) — and a
//!   word negated with `n't` (`don't`, `didn't`, `won't`) is dropped whole: these are function
//!   words, and left split they would leave fragments (`ve`, `didn`) that match every chat turn.
//!   Any other apostrophe separates words (`o'clock` → `clock`).
//! * **CJK runs** (Han, Hiragana, Katakana, Hangul) are first cut at particles and pronouns
//!   ([`CJK_SPLIT_CHARS`]: 的 了 吗 吧 我 你 …), then each piece becomes overlapping character
//!   bigrams (`双十一` → `双十`, `十一`); a one-character piece is emitted as itself unless it
//!   is in [`CJK_STOP_SINGLES`]. Bigrams in [`CJK_STOP_BIGRAMS`] (一下, 帮我, 这个 …) are
//!   dropped.
//!
//! Mixed text works without spaces: `索尼Sony耳机5000元` → `索尼`, `sony`, `耳机`, `5000`, `元`.

mod english;
pub use english::{ENGLISH_STOPWORDS, IRREGULAR_FORMS};

/// Clitics dropped after an apostrophe, keeping the word before it (`she's` → `she`).
const CLITICS: &[&str] = &["s", "re", "ve", "ll", "d", "m"];

/// Chinese particles and pronouns: a CJK run is cut at these and they are never emitted.
pub const CJK_SPLIT_CHARS: &[char] = &[
    '的', '了', '吗', '吧', '呢', '啊', '呀', '嘛', '哦', '哈', '么', '我', '你', '您', '他', '她',
    '它',
];

/// One-character pieces that are too common to mean anything on their own.
pub const CJK_STOP_SINGLES: &[&str] = &[
    "是", "在", "和", "与", "也", "都", "就", "还", "很", "太", "又", "把", "被", "给", "让", "对",
    "从", "有", "不", "没", "这", "那", "个", "们", "一", "帮", "请", "要", "会", "能", "想", "说",
    "看", "去", "来", "到", "哪", "谁",
];

/// Bigrams that are function words or request boilerplate (“帮我查一下”).
pub const CJK_STOP_BIGRAMS: &[&str] = &[
    "一下", "帮我", "我们", "你们", "他们", "这个", "那个", "这些", "那些", "什么", "怎么", "可以",
    "没有", "有没", "一个", "一些", "就是", "但是", "因为", "所以", "还是", "如果", "已经", "然后",
    "顺便", "看看", "不是", "是不", "是否", "还有", "现在", "这样", "那样", "其实", "或者", "而且",
    "以及", "请问", "麻烦", "谢谢",
];

/// Turn `text` into recall terms (see the module doc for the rules). Order follows the text;
/// duplicates are kept so callers can count term frequency.
pub fn tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().map(fold_char).collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_cjk(c) {
            let start = i;
            while i < chars.len() && is_cjk(chars[i]) {
                i += 1;
            }
            push_cjk_run(&chars[start..i], &mut tokens);
        } else if c.is_alphanumeric() {
            let start = i;
            while i < chars.len() && continues_word(&chars, i) {
                i += 1;
            }
            let (negated, after) = contraction(&chars, i);
            if !negated {
                push_word(&chars[start..i], &mut tokens);
            }
            i = after;
        } else {
            i += 1;
        }
    }
    tokens
}

/// What follows a word ending at `end`: `(true, after)` when it is negated with `n't` (the
/// word is dropped), `(false, after)` past a dropped clitic ([`CLITICS`]), else
/// `(false, end)`.
fn contraction(chars: &[char], end: usize) -> (bool, usize) {
    if !matches!(chars.get(end), Some('\'' | '’')) {
        return (false, end);
    }
    let mut after = end + 1;
    while after < chars.len() && chars[after].is_alphabetic() && !is_cjk(chars[after]) {
        after += 1;
    }
    let clitic: String = chars[end + 1..after].iter().collect();
    let negated = clitic == "t" && end > 0 && chars[end - 1] == 'n';
    if negated {
        (true, after)
    } else if CLITICS.contains(&clitic.as_str()) {
        (false, after)
    } else {
        (false, end)
    }
}

/// Lowercase one char and fold full-width ASCII forms (U+FF01..U+FF5E) to ASCII.
fn fold_char(c: char) -> char {
    let folded = match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    };
    // Multi-char lowercase forms (e.g. 'İ') keep their first char: good enough for matching.
    folded.to_lowercase().next().unwrap_or(folded)
}

/// Han (incl. extensions and compatibility ideographs), Hiragana, Katakana, Hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF          // CJK extension A
        | 0x4E00..=0x9FFF        // CJK unified ideographs
        | 0xF900..=0xFAFF        // CJK compatibility ideographs
        | 0x20000..=0x3134F      // CJK extensions B..G
        | 0x3040..=0x309F        // Hiragana
        | 0x30A0..=0x30FF        // Katakana
        | 0x31F0..=0x31FF        // Katakana phonetic extensions
        | 0xFF66..=0xFF9F        // half-width Katakana
        | 0x1100..=0x11FF        // Hangul Jamo
        | 0x3130..=0x318F        // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF // Hangul syllables
    )
}

/// Whether `chars[i]` belongs to the Latin word that started before it.
fn continues_word(chars: &[char], i: usize) -> bool {
    let c = chars[i];
    if is_cjk(c) {
        return false;
    }
    if c.is_alphanumeric() {
        return true;
    }
    let digit_before = i > 0 && chars[i - 1].is_ascii_digit();
    let digit_after = chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
    (c == ',' || c == '.') && digit_before && digit_after
}

fn push_word(word: &[char], tokens: &mut Vec<String>) {
    // Cut at letter/digit boundaries so `WH-1000XM5` and `wh1000xm5` share their terms.
    let mut start = 0;
    for i in 1..=word.len() {
        if i == word.len() || is_numeric_part(word[i]) != is_numeric_part(word[start]) {
            push_segment(&word[start..i], tokens);
            start = i;
        }
    }
}

/// Digits and the separators kept between them (`,` `.`) form the numeric parts of a word.
fn is_numeric_part(c: char) -> bool {
    c.is_ascii_digit() || c == ',' || c == '.'
}

fn push_segment(segment: &[char], tokens: &mut Vec<String>) {
    if is_numeric_part(segment[0]) {
        // `,` inside numbers is a thousands separator: drop it.
        tokens.push(segment.iter().filter(|c| **c != ',').collect());
        return;
    }
    let word: String = segment.iter().collect();
    if segment.len() < 2 || ENGLISH_STOPWORDS.contains(&word.as_str()) {
        return;
    }
    if segment.iter().all(|c| c.is_alphabetic()) {
        let base = IRREGULAR_FORMS
            .binary_search_by(|(form, _)| (*form).cmp(word.as_str()))
            .map_or(word.as_str(), |i| IRREGULAR_FORMS[i].1);
        tokens.push(stem(base));
    } else {
        tokens.push(word);
    }
}

fn push_cjk_run(run: &[char], tokens: &mut Vec<String>) {
    for piece in run.split(|c| CJK_SPLIT_CHARS.contains(c)) {
        match piece.len() {
            0 => {}
            1 => {
                let single = piece[0].to_string();
                if !CJK_STOP_SINGLES.contains(&single.as_str()) {
                    tokens.push(single);
                }
            }
            _ => {
                for pair in piece.windows(2) {
                    let bigram: String = pair.iter().collect();
                    if !CJK_STOP_BIGRAMS.contains(&bigram.as_str()) {
                        tokens.push(bigram);
                    }
                }
            }
        }
    }
}

/// A deliberately small suffix stemmer for lowercase alphabetic words. In order:
///
/// 1. plurals: `-sses` → `-ss`, `-ies` → `-y`, `-es` after s/x/z/ch/sh → drop `-es`,
///    `-s` (not after `s` or `u`) → drop `-s`;
/// 2. `-ing` / `-ed` (not `-eed`; `-ied` → `-y`) are dropped when at least three letters with
///    a vowel remain, and a doubled final consonant other than l/s/z is undoubled
///    (`shipped` → `ship`);
/// 3. a final `-e` is dropped when two or more letters remain (`like`/`liked` → `lik`).
///
/// Words of three letters or fewer are left alone. It is not Porter: it only has to map the
/// common inflections of one word onto one term, and it does so the same way for queries and
/// documents.
pub fn stem(word: &str) -> String {
    if word.chars().count() <= 3 {
        return word.to_string();
    }
    let mut w = strip_plural(word);
    w = strip_verb_suffix(&w);
    if w.len() > 2 && w.ends_with('e') {
        w.pop();
    }
    w
}

fn strip_plural(word: &str) -> String {
    if let Some(base) = word.strip_suffix("sses") {
        return format!("{base}ss");
    }
    if let Some(base) = word.strip_suffix("ies") {
        if base.len() >= 2 {
            return format!("{base}y");
        }
    }
    if let Some(base) = word.strip_suffix("es") {
        if ["s", "x", "z", "ch", "sh"]
            .iter()
            .any(|s| base.ends_with(s))
            && base.len() >= 2
        {
            return base.to_string();
        }
    }
    if let Some(base) = word.strip_suffix('s') {
        if !base.ends_with('s') && !base.ends_with('u') && base.len() >= 3 {
            return base.to_string();
        }
    }
    word.to_string()
}

fn strip_verb_suffix(word: &str) -> String {
    if word.ends_with("eed") {
        return word.to_string();
    }
    if let Some(base) = word.strip_suffix("ied") {
        if base.len() >= 2 {
            return format!("{base}y");
        }
    }
    let base = word.strip_suffix("ing").or_else(|| word.strip_suffix("ed"));
    match base {
        Some(base) if base.len() >= 3 && base.chars().any(is_vowel) => undouble(base),
        _ => word.to_string(),
    }
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u' | 'y')
}

fn undouble(base: &str) -> String {
    let mut chars = base.chars().rev();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a == b && !is_vowel(a) && !matches!(a, 'l' | 's' | 'z') => {
            base[..base.len() - a.len_utf8()].to_string()
        }
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(tokens: &[String], t: &str) -> bool {
        tokens.iter().any(|x| x == t)
    }

    #[test]
    fn mixed_chinese_english_and_digits_split_into_terms() {
        let t = tokenize("索尼Sony耳机5000元");
        for want in ["sony", "索尼", "耳机", "5000", "元"] {
            assert!(has(&t, want), "missing {want} in {t:?}");
        }
    }

    #[test]
    fn chinese_runs_become_bigrams_cut_at_particles() {
        let t = tokenize("用户去年双十一买了索尼耳机");
        assert_eq!(
            t,
            [
                "用户", "户去", "去年", "年双", "双十", "十一", "一买", "索尼", "尼耳", "耳机"
            ]
        );
        let t = tokenize("用户的预算是5000元");
        assert_eq!(t, ["用户", "预算", "算是", "5000", "元"]);
    }

    #[test]
    fn chinese_stopwords_and_request_boilerplate_are_dropped() {
        let t = tokenize("帮我查一下我的订单吧");
        assert!(!has(&t, "一下"), "{t:?}");
        assert!(!has(&t, "帮我"), "{t:?}");
        assert!(!has(&t, "帮"), "{t:?}");
        assert!(!has(&t, "的"), "{t:?}");
        assert!(!has(&t, "吧"), "{t:?}");
        assert!(has(&t, "订单"), "{t:?}");
        assert_eq!(tokenize("是"), Vec::<String>::new());
        assert_eq!(tokenize("书"), ["书"]);
    }

    #[test]
    fn english_stopwords_removed_and_inflections_stemmed() {
        let t = tokenize("The user ordered two Headphones, and is shipping the boxes!");
        assert_eq!(t, ["user", "order", "two", "headphon", "ship", "box"]);
        assert_eq!(tokenize("headphone"), tokenize("headphones"));
        assert_eq!(tokenize("ordering"), tokenize("orders"));
        assert_eq!(tokenize("batteries"), tokenize("battery"));
        assert_eq!(tokenize("liked"), tokenize("like"));
        assert_eq!(tokenize("need"), ["need"]);
        assert_eq!(tokenize("status"), ["status"]);
    }

    #[test]
    fn numbers_keep_separators_and_full_width_folds() {
        assert_eq!(tokenize("budget 5,000 or 3.5k"), ["budget", "5000", "3.5"]);
        assert_eq!(tokenize("Ｓｏｎｙ　５０００"), ["sony", "5000"]);
        assert_eq!(tokenize("WH-1000XM5"), tokenize("wh1000xm5"));
        assert_eq!(tokenize("wh1000xm5"), ["wh", "1000", "xm", "5"]);
    }

    #[test]
    fn irregular_past_forms_and_plurals_meet_their_base_form() {
        assert_eq!(tokenize("I went camping"), tokenize("go camping"));
        assert_eq!(tokenize("she bought shoes"), tokenize("she buys shoes"));
        assert_eq!(tokenize("we made pottery"), tokenize("making pottery"));
        assert_eq!(tokenize("I felt great"), tokenize("feeling great"));
        assert_eq!(tokenize("children"), tokenize("child"));
        assert_eq!(tokenize("ran"), tokenize("running"));
        assert_eq!(
            tokenize("left"),
            ["left"],
            "ambiguous forms stay as they are"
        );
    }

    #[test]
    fn irregular_forms_are_sorted_for_binary_search() {
        for pair in IRREGULAR_FORMS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{:?} before {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn contractions_leave_no_fragments() {
        assert_eq!(
            tokenize("Caroline's painting"),
            tokenize("Caroline painting")
        );
        assert_eq!(
            tokenize("I've been, you're here, we'll see, I'd go, I'm in"),
            ["see", "go"]
        );
        assert_eq!(
            tokenize("I don't know, it didn't work, she won't come"),
            ["know", "work", "com"]
        );
        assert_eq!(
            tokenize("Melanie’s kids"),
            tokenize("Melanie kids"),
            "typographic apostrophe"
        );
        assert_eq!(
            tokenize("o'clock"),
            ["clock"],
            "other apostrophes separate words"
        );
        assert_eq!(
            tokenize("won the race"),
            ["win", "rac"],
            "won without n't is a verb"
        );
    }

    #[test]
    fn japanese_and_korean_runs_are_bigrammed() {
        assert_eq!(tokenize("カメラ"), ["カメ", "メラ"]);
        assert_eq!(tokenize("서울 여행"), ["서울", "여행"]);
    }
}
