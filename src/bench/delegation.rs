//! `hermes bench delegation`: what delegating costs. A `boss` agent fans out to 1, 4 and 16
//! `worker` agents in one step (each child a session of its own, answering at once) and
//! answers when all are back; the same boss calling the `add` tool as many times in one step
//! is the baseline. Reported per fan-out: p50 and p99 of both, and the latency delegation adds
//! over a direct tool call — on whichever bus the bench runs.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::measure::{progress, Stats};
use super::BenchError;
use crate::client::SessionClient;
use crate::config::{AgentConfig, AgentMemoryConfig, Config, ModelConfig};
use crate::engine::Engine;

/// Fan-outs measured.
const FAN_OUTS: [(usize, &str); 3] = [(1, "one"), (4, "four"), (16, "sixteen")];
/// Turns per fan-out and kind (after warm-up).
const TURNS: [usize; 3] = [200, 120, 60];
const TIMEOUT: Duration = Duration::from_secs(60);
const USER: &str = "bench-user";

/// The bench config plus the two agents and their scripted model.
pub fn config(mut config: Config, dir: &Path) -> Result<Config, BenchError> {
    let scenario = dir.join("delegation-scenario.toml");
    std::fs::write(&scenario, scenario_text()).map_err(|e| BenchError::Setup(e.to_string()))?;
    config.models.named.insert(
        "fanout".into(),
        ModelConfig::Replay {
            scenario: scenario.display().to_string(),
        },
    );
    let quiet = AgentMemoryConfig {
        read: Vec::new(),
        extract: false,
        ..AgentMemoryConfig::default()
    };
    let base = config
        .agents
        .values()
        .next()
        .cloned()
        .ok_or_else(|| BenchError::Setup("the config has no agent to start from".into()))?;
    let agent = |delegates_to: Vec<String>, tools: Vec<String>| AgentConfig {
        description: "bench".into(),
        system_prompt: "bench".into(),
        model: "fanout".into(),
        max_steps: 4,
        tools: Some(tools),
        memory: quiet.clone(),
        token_budget: 0,
        delegates_to,
        handoffs_to: Vec::new(),
        delegation_timeout_secs: 60,
        ..base.clone()
    };
    config.agents.insert(
        "boss".into(),
        agent(vec!["worker".into()], vec!["add".into()]),
    );
    config
        .agents
        .insert("worker".into(), agent(Vec::new(), Vec::new()));
    config.engine.max_delegation_depth = 2;
    Ok(config)
}

/// The scripted boss and worker: `fanout-<n>` delegates n tasks, `direct-<n>` calls `add` n
/// times, a worker's task is answered at once.
fn scenario_text() -> String {
    let mut text = String::from("name = \"delegation-bench\"\n");
    for (n, word) in FAN_OUTS {
        for (kind, tool, args) in [
            ("fanout", "agent__worker", "{ task = \"subtask: say ok\" }"),
            ("direct", "add", "{ a = 1, b = 2 }"),
        ] {
            text.push_str(&format!(
                "[[rule]]\nrole = \"planner\"\nwhen_last = \"user\"\ncontains = [\"{kind}-{word}\"]\ntext = \"\"\n"
            ));
            for _ in 0..n {
                text.push_str(&format!(
                    "[[rule.tool_calls]]\nname = \"{tool}\"\narguments = {args}\n"
                ));
            }
        }
    }
    for tool in ["agent__worker", "add"] {
        text.push_str(&format!(
            "[[rule]]\nrole = \"planner\"\nwhen_last = \"tool\"\nafter_tool = \"{tool}\"\ntext = \"all done\"\n"
        ));
    }
    text.push_str("[[rule]]\nrole = \"planner\"\nwhen_last = \"user\"\ntext = \"ok\"\n");
    text
}

/// One row per fan-out.
pub async fn run(engine: &Engine, show: bool) -> Result<Vec<Value>, BenchError> {
    let mut rows = Vec::new();
    let run = uuid::Uuid::new_v4().simple().to_string();
    for ((n, word), turns) in FAN_OUTS.into_iter().zip(TURNS) {
        let bar = progress(2 * turns as u64, &format!("delegation x{n}"), show);
        let mut measured = Vec::new();
        for kind in ["direct", "fanout"] {
            let mut stats = Stats::default();
            // The first turns warm caches and connections: not counted.
            for i in 0..turns + 3 {
                let session = format!("{kind}{n}-{run}-{i}");
                let took = one_turn(engine, &session, &format!("{kind}-{word}")).await?;
                if i >= 3 {
                    stats.push(took);
                    bar.inc(1);
                }
            }
            measured.push(stats);
        }
        bar.finish_and_clear();
        let (direct, fanout) = (&measured[0], &measured[1]);
        let p = |s: &Stats, q: f64| s.percentile(q) / 1000.0;
        rows.push(json!({
            "workload": "delegation",
            "children": n,
            "turns": turns,
            "direct_p50_ms": p(direct, 50.0),
            "direct_p99_ms": p(direct, 99.0),
            "delegated_p50_ms": p(fanout, 50.0),
            "delegated_p99_ms": p(fanout, 99.0),
            "added_p50_ms": p(fanout, 50.0) - p(direct, 50.0),
            "added_p99_ms": p(fanout, 99.0) - p(direct, 99.0),
        }));
    }
    Ok(rows)
}

async fn one_turn(engine: &Engine, session: &str, text: &str) -> Result<Duration, BenchError> {
    let fail = |reason: String| BenchError::Turn {
        session: session.to_string(),
        turn: 1,
        reason,
    };
    let mut client = SessionClient::open(engine.bus.clone(), "boss", session, USER)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let start = Instant::now();
    let trace = client
        .turn(text, TIMEOUT, |_| {})
        .await
        .map_err(|e| fail(e.to_string()))?;
    match trace.answer.as_deref() {
        Some("all done") => Ok(start.elapsed()),
        other => Err(fail(format!("unexpected answer {other:?}"))),
    }
}
