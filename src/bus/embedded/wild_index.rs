//! The wildcard patterns of the embedded bus's listeners (`*` one token, `>` the rest), as a
//! tree of tokens: finding the patterns a subject matches walks the subject's tokens, so its
//! cost does not grow with the number of patterns — a client following many sessions holds a
//! wildcard pattern per session, and each publish would otherwise test every one of them.

use std::collections::HashMap;

/// Listener ids by wildcard pattern.
#[derive(Default)]
pub(super) struct WildIndex {
    root: Node,
}

#[derive(Default)]
struct Node {
    literal: HashMap<Box<str>, Node>,
    star: Option<Box<Node>>,
    /// Patterns that end at this node.
    here: Vec<u64>,
    /// Patterns that end with `>` after this node's tokens.
    tail: Vec<u64>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.literal.is_empty()
            && self.star.is_none()
            && self.here.is_empty()
            && self.tail.is_empty()
    }
}

impl WildIndex {
    pub(super) fn insert(&mut self, pattern: &str, id: u64) {
        let mut node = &mut self.root;
        for token in pattern.split('.') {
            node = match token {
                ">" => {
                    node.tail.push(id);
                    return;
                }
                "*" => node.star.get_or_insert_with(Box::default),
                literal => node.literal.entry(literal.into()).or_default(),
            };
        }
        node.here.push(id);
    }

    /// Forget `id` under `pattern`, and the branches nothing listens on any more.
    pub(super) fn remove(&mut self, pattern: &str, id: u64) {
        let tokens: Vec<&str> = pattern.split('.').collect();
        remove_from(&mut self.root, &tokens, id);
    }

    /// The ids of the patterns `subject` matches, in ascending order (the order they were
    /// added in).
    pub(super) fn matching(&self, subject: &str, out: &mut Vec<u64>) {
        let start = out.len();
        collect(&self.root, subject.split('.'), out);
        out[start..].sort_unstable();
    }
}

fn collect(node: &Node, mut rest: std::str::Split<'_, char>, out: &mut Vec<u64>) {
    let Some(token) = rest.next() else {
        out.extend_from_slice(&node.here);
        return;
    };
    out.extend_from_slice(&node.tail);
    if let Some(child) = node.literal.get(token) {
        collect(child, rest.clone(), out);
    }
    if let Some(star) = &node.star {
        collect(star, rest, out);
    }
}

/// Remove `id` along `rest`; true when `node` is left empty (its parent drops it).
fn remove_from(node: &mut Node, rest: &[&str], id: u64) -> bool {
    match rest.split_first() {
        None => node.here.retain(|e| *e != id),
        Some((&">", _)) => node.tail.retain(|e| *e != id),
        Some((&"*", after)) => {
            if let Some(star) = node.star.as_mut() {
                if remove_from(star, after, id) {
                    node.star = None;
                }
            }
        }
        Some((literal, after)) => {
            if let Some(child) = node.literal.get_mut(*literal) {
                if remove_from(child, after, id) {
                    node.literal.remove(*literal);
                }
            }
        }
    }
    node.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::pattern;

    fn matching(index: &WildIndex, subject: &str) -> Vec<u64> {
        let mut out = Vec::new();
        index.matching(subject, &mut out);
        out
    }

    #[test]
    fn finds_what_pattern_matching_finds_in_the_order_added() {
        let patterns = [
            "hermes.out.>",
            "hermes.*.assistant.s1.>",
            "hermes.out.assistant.*.*",
            "hermes.in.*",
            ">",
            "*.out.assistant.s1.t1",
            "hermes.out.assistant.s2.>",
        ];
        let mut index = WildIndex::default();
        for (id, p) in patterns.iter().enumerate() {
            index.insert(p, id as u64);
        }
        for subject in [
            "hermes.out.assistant.s1.t1",
            "hermes.out.assistant.s2.t9",
            "hermes.in.assistant",
            "hermes.in.assistant.s1",
            "hermes",
            "other.out.assistant.s1.t1",
            "hermes.out",
        ] {
            let expected: Vec<u64> = patterns
                .iter()
                .enumerate()
                .filter(|(_, p)| pattern::matches(p, subject))
                .map(|(id, _)| id as u64)
                .collect();
            assert_eq!(matching(&index, subject), expected, "{subject}");
        }
    }

    #[test]
    fn removing_the_last_listener_of_a_branch_drops_the_branch() {
        let mut index = WildIndex::default();
        index.insert("hermes.out.assistant.s1.>", 1);
        index.insert("hermes.out.assistant.s2.>", 2);
        index.insert("hermes.out.assistant.s2.>", 3);
        index.remove("hermes.out.assistant.s1.>", 1);
        index.remove("hermes.out.assistant.s2.>", 2);
        assert_eq!(matching(&index, "hermes.out.assistant.s2.t"), vec![3]);
        assert!(matching(&index, "hermes.out.assistant.s1.t").is_empty());
        index.remove("hermes.out.assistant.s2.>", 3);
        assert!(index.root.is_empty(), "every branch is gone");
    }
}
