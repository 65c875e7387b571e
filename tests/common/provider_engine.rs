//! An in-process engine whose planner is a model behind a fake wire-format server, for the
//! provider tests: an explicit configuration (the `add` tool only, no MCP server, no memory
//! recall or extraction, no folding of older turns into a summary, so what the model is sent
//! depends on the conversation alone), and how much of one request begins the next.

use std::path::Path;

use hermes::config::{Config, ModelConfig};

use super::engine::test_config;
use super::scenario::{on_user, Scenario};

/// The configuration: data under `dir`, `planner` planning for agent `assistant`.
pub fn engine_config(dir: &Path, planner: ModelConfig) -> Config {
    let quiet = Scenario::new("quiet").rule(
        on_user(&[])
            .role("extractor")
            .says(r#"{"memory_updates": []}"#),
    );
    let mut config = test_config(dir, &quiet);
    config.models.planner = planner;
    config.mcp.servers.clear();
    config.tools.builtin = vec!["add".into()];
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.system_prompt = "You are a careful assistant. Use the add tool for sums.".into();
    agent.tools = Some(vec!["add".into()]);
    agent.recent_turns = 1000;
    agent.memory.read.clear();
    agent.memory.extract = false;
    config
}

/// The share of `earlier`'s bytes that `later` begins with, 0..1.
pub fn prefix_share(earlier: &[u8], later: &[u8]) -> f64 {
    let shared = super::fake_http::common_prefix(earlier, later);
    shared as f64 / earlier.len().max(1) as f64
}

/// The value of the Prometheus sample line `series` (name and labels exactly), 0 when absent.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}
