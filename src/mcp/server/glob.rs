//! Tool-name patterns of `[mcp.server] expose_tools` and of roles' `tools`: a name, or a
//! pattern where `*` matches any run of characters (`catalog__*`, `*_search`, `*`).

/// Whether `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut left) = name.strip_prefix(head) else {
        return false;
    };
    let mut pieces: Vec<&str> = rest.split('*').collect();
    let tail = pieces.pop().unwrap_or_default();
    for piece in pieces {
        match left.find(piece) {
            Some(at) => left = &left[at + piece.len()..],
            None => return false,
        }
    }
    left.len() >= tail.len() && left.ends_with(tail)
}

/// Whether `name` matches any of `patterns`.
pub fn any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|pattern| matches(pattern, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_matches_any_run_and_a_plain_name_only_itself() {
        assert!(matches("catalog__*", "catalog__search"));
        assert!(matches("catalog__*", "catalog__"));
        assert!(!matches("catalog__*", "other__search"));
        assert!(matches("*", "anything"));
        assert!(matches("*_search", "memory_search"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(!matches("ab*ba", "aba"));
        assert!(matches("current_time", "current_time"));
        assert!(!matches("current_time", "current_time2"));
    }
}
