//! Scenes: which tools the model sees. Pure functions; the turn calls [`select_tools`].
//!
//! 1. Keep the definitions in the active scene (a definition with no `scenes` is in every
//!    scene; no active scene keeps everything).
//! 2. If at most `limit` (≤ [`MAX_TOOLS`]) remain, return them in catalog order.
//! 3. Otherwise rank them by BM25 of the current message against each tool's name (split on
//!    `_`/`-`, counted twice) and description, with the engine's tokenizer
//!    ([`crate::memory::tokenize`]); ties keep catalog order. Tools listed in `always` (e.g.
//!    `job_status`) are kept first whatever their score. Return the best `limit`.

use crate::memory::{bm25, tokenize::tokenize};

use super::definition::ToolDefinition;

/// The most tools ever shown to the model at once.
pub const MAX_TOOLS: usize = 15;

/// The tools to show for `message` in `scene` (see the module doc). `limit` is capped at
/// [`MAX_TOOLS`].
pub fn select_tools<'a>(
    catalog: &'a [ToolDefinition],
    scene: Option<&str>,
    message: &str,
    always: &[&str],
    limit: usize,
) -> Vec<&'a ToolDefinition> {
    let limit = limit.min(MAX_TOOLS);
    let in_scene: Vec<&ToolDefinition> = catalog
        .iter()
        .filter(|d| scene.is_none_or(|s| d.in_scene(s)))
        .collect();
    if in_scene.len() <= limit {
        return in_scene;
    }
    let docs: Vec<Vec<String>> = in_scene.iter().map(|d| document(d)).collect();
    let scores = bm25::score(&tokenize(message), &docs);
    let mut ranked: Vec<(usize, f64)> = scores.into_iter().enumerate().collect();
    ranked.sort_by(|(ia, a), (ib, b)| {
        let pinned = |i: &usize| always.contains(&in_scene[*i].name.as_str());
        pinned(ib)
            .cmp(&pinned(ia))
            .then(b.total_cmp(a))
            .then(ia.cmp(ib))
    });
    ranked
        .into_iter()
        .take(limit)
        .map(|(i, _)| in_scene[i])
        .collect()
}

/// The terms of a tool: its name's parts twice (names are short and precise), then its
/// description.
fn document(def: &ToolDefinition) -> Vec<String> {
    let name = def.name.replace(['_', '-'], " ");
    let mut terms = tokenize(&name);
    terms.extend(tokenize(&name));
    terms.extend(tokenize(&def.description));
    terms
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn def(name: &str, description: &str, scenes: &[&str]) -> ToolDefinition {
        let mut d = ToolDefinition::from_spec(
            crate::llm::ToolSpec {
                name: name.into(),
                description: description.into(),
                input_schema: json!({"type": "object"}),
            },
            Duration::from_secs(5),
        );
        d.scenes = scenes.iter().map(|s| s.to_string()).collect();
        d
    }

    fn names(tools: &[&ToolDefinition]) -> Vec<String> {
        tools.iter().map(|d| d.name.clone()).collect()
    }

    #[test]
    fn only_the_active_scenes_tools_are_shown() {
        let catalog = vec![
            def("order_lookup", "orders", &["shop"]),
            def("add", "adds numbers", &["math"]),
            def("current_time", "time", &[]),
        ];
        let shown = select_tools(&catalog, Some("shop"), "where is my order", &[], 15);
        assert_eq!(names(&shown), vec!["order_lookup", "current_time"]);
        assert_eq!(select_tools(&catalog, None, "", &[], 15).len(), 3);
    }

    #[test]
    fn a_large_catalog_is_cut_to_the_most_relevant() {
        let mut catalog: Vec<ToolDefinition> = (0..30)
            .map(|i| {
                def(
                    &format!("filler_{i}"),
                    "manage calendar events and meetings",
                    &[],
                )
            })
            .collect();
        catalog.push(def(
            "order_lookup",
            "Look up the user's orders, delivery and tracking",
            &[],
        ));
        catalog.push(def(
            "refund_order",
            "Refund an order that was delivered",
            &[],
        ));
        catalog.push(def("job_status", "state of a background job", &[]));
        let shown = select_tools(
            &catalog,
            None,
            "where is the delivery of my order?",
            &["job_status"],
            15,
        );
        assert_eq!(shown.len(), 15);
        assert_eq!(
            names(&shown[..3]),
            vec!["job_status", "order_lookup", "refund_order"]
        );
        let capped = select_tools(&catalog, None, "order", &[], 40);
        assert_eq!(capped.len(), MAX_TOOLS);
    }
}
