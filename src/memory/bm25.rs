//! Okapi BM25 over a small candidate set: pure functions, no storage.
//!
//! The candidate set is whatever the caller already filtered (for recall: one user's live
//! records), so document frequencies and the average length are computed over exactly those
//! documents. Parameters are the usual `k1 = 1.2`, `b = 0.75`. IDF is the always-positive
//! Lucene form `ln(1 + (N - n + 0.5) / (n + 0.5))`, so a term present in every candidate still
//! counts a little instead of going negative. Each distinct query term counts once: repeating a
//! word in the query does not weigh it more.

use std::collections::{HashMap, HashSet};

/// Term-frequency saturation.
pub const K1: f64 = 1.2;
/// Length normalisation strength.
pub const B: f64 = 0.75;

/// BM25 score of every document in `docs` for `query_tokens`, in the order of `docs`.
/// A document sharing no term with the query scores exactly `0.0`.
pub fn score<D: AsRef<[String]>>(query_tokens: &[String], docs: &[D]) -> Vec<f64> {
    let n_docs = docs.len();
    if n_docs == 0 {
        return Vec::new();
    }
    let terms: HashSet<&str> = query_tokens.iter().map(String::as_str).collect();
    let doc_freqs: Vec<HashMap<&str, usize>> = docs
        .iter()
        .map(|doc| term_counts(doc.as_ref(), &terms))
        .collect();
    let idf: HashMap<&str, f64> = terms
        .iter()
        .map(|term| {
            let n = doc_freqs.iter().filter(|f| f.contains_key(term)).count();
            (*term, idf(n_docs, n))
        })
        .collect();
    let total_len: usize = docs.iter().map(|d| d.as_ref().len()).sum();
    let avg_len = total_len as f64 / n_docs as f64;
    docs.iter()
        .zip(&doc_freqs)
        .map(|(doc, freqs)| {
            let len_norm = if avg_len > 0.0 {
                1.0 - B + B * doc.as_ref().len() as f64 / avg_len
            } else {
                1.0
            };
            freqs
                .iter()
                .map(|(term, tf)| {
                    let tf = *tf as f64;
                    idf.get(term).copied().unwrap_or(0.0) * tf * (K1 + 1.0) / (tf + K1 * len_norm)
                })
                .sum()
        })
        .collect()
}

/// Inverse document frequency of a term found in `n` of `n_docs` documents.
pub fn idf(n_docs: usize, n: usize) -> f64 {
    let (n_docs, n) = (n_docs as f64, n as f64);
    (1.0 + (n_docs - n + 0.5) / (n + 0.5)).ln()
}

/// How often each query term occurs in `doc` (terms absent from the query are not counted).
fn term_counts<'a>(doc: &[String], terms: &HashSet<&'a str>) -> HashMap<&'a str, usize> {
    let mut counts = HashMap::new();
    for token in doc {
        if let Some(term) = terms.get(token.as_str()) {
            *counts.entry(*term).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::tokenize::tokenize;

    fn docs(texts: &[&str]) -> Vec<Vec<String>> {
        texts.iter().map(|t| tokenize(t)).collect()
    }

    #[test]
    fn relevant_document_ranks_first() {
        let d = docs(&[
            "the user lives in Berlin and works as a nurse",
            "the user prefers noise cancelling headphones from Sony",
            "the user is allergic to peanuts",
        ]);
        let s = score(&tokenize("which headphones are good"), &d);
        assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
        assert_eq!(s[0], 0.0);
        assert_eq!(s[2], 0.0);
    }

    #[test]
    fn rare_terms_outweigh_common_ones() {
        let d = docs(&["用户 预算", "用户 耳机", "用户 城市"]);
        let s = score(&tokenize("用户 耳机"), &d);
        assert!(s[1] > s[0], "{s:?}");
        assert!(
            s[0] > 0.0,
            "a term in every doc still counts a little: {s:?}"
        );
        assert!((s[0] - s[2]).abs() < 1e-12);
    }

    #[test]
    fn shorter_document_wins_at_equal_term_frequency() {
        let d = docs(&[
            "budget 5000",
            "budget 5000 plus many other words about shipping weather cities",
        ]);
        let s = score(&tokenize("budget"), &d);
        assert!(s[0] > s[1], "{s:?}");
    }

    #[test]
    fn repeated_query_terms_count_once_and_empty_inputs_are_safe() {
        let d = docs(&["sony headphones", "apple phone"]);
        assert_eq!(
            score(&tokenize("sony"), &d),
            score(&tokenize("sony sony sony"), &d)
        );
        assert_eq!(score(&[], &d), vec![0.0, 0.0]);
        assert!(score::<Vec<String>>(&tokenize("sony"), &[]).is_empty());
        assert_eq!(score(&tokenize("sony"), &[Vec::new()]), vec![0.0]);
    }

    #[test]
    fn idf_is_positive_and_falls_with_document_frequency() {
        assert!(idf(10, 1) > idf(10, 5));
        assert!(idf(10, 10) > 0.0);
    }
}
