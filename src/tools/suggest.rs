//! Names close to one that does not exist: what an unknown-tool error suggests, so a model
//! that misspelt a tool (or invented one) is shown the few it most likely meant.

/// Up to `max` of `names` closest to `wanted` by edit distance (case-insensitive), ties by name.
pub fn closest_names(wanted: &str, names: &[String], max: usize) -> Vec<String> {
    let wanted = wanted.to_lowercase();
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .map(|n| (levenshtein(&wanted, &n.to_lowercase()), n))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(max)
        .map(|(_, n)| n.clone())
        .collect()
}

/// Levenshtein edit distance over `char`s (insert, delete, substitute each cost 1).
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("order_lookpu", "order_lookup"), 2);
        assert_eq!(levenshtein("订单", "订单查询"), 2);
    }

    #[test]
    fn the_closest_names_come_first_ties_by_name() {
        let names: Vec<String> = ["order_lookup", "order_cancel", "add", "weather"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            closest_names("Order_Lookpu", &names, 2),
            ["order_lookup", "order_cancel"]
        );
    }
}
