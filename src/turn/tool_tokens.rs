//! What the tool definitions a turn shows the model cost in tokens, remembered per tool list:
//! serialising a turn's definitions to count them cost more than the rest of the context's
//! fixed part, and the same few lists are shown turn after turn.

use std::sync::{Arc, Mutex, PoisonError};

use crate::config::Config;
use crate::context::tokens::TokenCounter;
use crate::llm::ToolSpec;
use crate::protocol::ToolsCatalog;

/// Lists remembered at most; the oldest goes first.
const REMEMBERED: usize = 32;

/// Token counts of the tool lists turns have shown; shared by every session of an engine.
#[derive(Clone, Default)]
pub struct ToolTokens(Arc<Mutex<Vec<Counted>>>);

/// One list: which catalog and configuration its definitions came from (held, so neither is
/// freed and its address reused while the entry lives), for which agent, and the tools' names.
struct Counted {
    catalog: Arc<ToolsCatalog>,
    config: Arc<Config>,
    agent: String,
    names: Vec<String>,
    tokens: u32,
}

impl Counted {
    fn is_for(
        &self,
        catalog: &Arc<ToolsCatalog>,
        config: &Arc<Config>,
        agent: &str,
        tools: &[ToolSpec],
    ) -> bool {
        Arc::ptr_eq(&self.catalog, catalog)
            && Arc::ptr_eq(&self.config, config)
            && self.agent == agent
            && self.names.len() == tools.len()
            && self.names.iter().zip(tools).all(|(n, t)| *n == t.name)
    }
}

impl ToolTokens {
    /// The tokens of `tools`, the list `agent` is shown from `catalog` under `config`.
    ///
    /// A catalog is replaced, never changed, when a tool changes, and a tool list is
    /// determined by the catalog, the configuration, the agent and which tools were picked:
    /// the same four give the same definitions.
    pub fn count(
        &self,
        counter: &TokenCounter,
        catalog: &Arc<ToolsCatalog>,
        config: &Arc<Config>,
        agent: &str,
        tools: &[ToolSpec],
    ) -> u32 {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = memo
            .iter()
            .find(|c| c.is_for(catalog, config, agent, tools))
        {
            return hit.tokens;
        }
        let tokens = count_now(counter, tools);
        // Lists of a catalog or configuration nobody else holds any more were replaced.
        memo.retain(|c| Arc::strong_count(&c.catalog) > 1 && Arc::strong_count(&c.config) > 1);
        if memo.len() >= REMEMBERED {
            memo.remove(0);
        }
        memo.push(Counted {
            catalog: catalog.clone(),
            config: config.clone(),
            agent: agent.to_string(),
            names: tools.iter().map(|t| t.name.clone()).collect(),
            tokens,
        });
        tokens
    }
}

/// The tokens of `tools` as they are sent: their JSON.
fn count_now(counter: &TokenCounter, tools: &[ToolSpec]) -> u32 {
    let json = serde_json::to_string(tools).unwrap_or_default();
    counter.count_fixed(&json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }
    }

    fn counter() -> TokenCounter {
        static TOKENS: std::sync::OnceLock<TokenCounter> = std::sync::OnceLock::new();
        TOKENS
            .get_or_init(|| TokenCounter::for_model("gpt-4o-mini").unwrap())
            .clone()
    }

    #[test]
    fn a_list_shown_again_costs_what_it_cost_the_first_time_and_another_is_counted_anew() {
        let (memo, counter) = (ToolTokens::default(), counter());
        let catalog = Arc::new(ToolsCatalog::default());
        let config = Arc::new(Config::embedded().unwrap());
        let short = [spec("add", "Add two numbers.")];
        let long = [
            spec("add", "Add two numbers."),
            spec(
                "search",
                "Search the documents for a phrase and return the best passages.",
            ),
        ];
        let first = memo.count(&counter, &catalog, &config, "assistant", &short);
        assert_eq!(first, count_now(&counter, &short));
        assert_eq!(
            memo.count(&counter, &catalog, &config, "assistant", &short),
            first
        );
        let both = memo.count(&counter, &catalog, &config, "assistant", &long);
        assert_eq!(both, count_now(&counter, &long));
        assert!(both > first);
    }

    #[test]
    fn a_new_catalog_or_another_agent_is_counted_anew() {
        let (memo, counter) = (ToolTokens::default(), counter());
        let config = Arc::new(Config::embedded().unwrap());
        let old = Arc::new(ToolsCatalog::default());
        let new = Arc::new(ToolsCatalog::default());
        let before = [spec("add", "Add.")];
        let after = [spec(
            "add",
            "Add two numbers, each an integer, and return their sum.",
        )];
        let counted = memo.count(&counter, &old, &config, "assistant", &before);
        // The same name, its definition changed in a new catalog.
        let recounted = memo.count(&counter, &new, &config, "assistant", &after);
        assert_eq!(recounted, count_now(&counter, &after));
        assert_ne!(counted, recounted);
        assert_eq!(
            memo.count(&counter, &new, &config, "helper", &before),
            counted
        );
    }

    #[test]
    fn lists_of_a_replaced_catalog_are_forgotten() {
        let (memo, counter) = (ToolTokens::default(), counter());
        let config = Arc::new(Config::embedded().unwrap());
        let old = Arc::new(ToolsCatalog::default());
        memo.count(&counter, &old, &config, "assistant", &[spec("add", "Add.")]);
        drop(old);
        let new = Arc::new(ToolsCatalog::default());
        memo.count(&counter, &new, &config, "assistant", &[spec("add", "Add.")]);
        let kept = memo.0.lock().unwrap();
        assert_eq!(kept.len(), 1);
        assert!(Arc::ptr_eq(&kept[0].catalog, &new));
    }

    #[test]
    fn at_most_the_last_lists_are_remembered() {
        let (memo, counter) = (ToolTokens::default(), counter());
        let config = Arc::new(Config::embedded().unwrap());
        let catalog = Arc::new(ToolsCatalog::default());
        for i in 0..REMEMBERED + 5 {
            memo.count(
                &counter,
                &catalog,
                &config,
                &format!("agent{i}"),
                &[spec("add", "Add.")],
            );
        }
        assert_eq!(memo.0.lock().unwrap().len(), REMEMBERED);
    }
}
