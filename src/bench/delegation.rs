//! `hermes bench delegation`: what delegating costs. A `boss` agent fans out to 1, 4 and 16
//! `worker` agents in one step (each child a session of its own, answering at once) and
//! answers when all are back; the same boss calling the `add` tool as many times in one step
//! is the baseline. Reported per fan-out: p50 and p99 of both, and the latency delegation adds
//! over a direct tool call — on whichever bus the bench runs.
//!
//! The A2A row: the same fan-out to `remote_worker`, declared as an agent that lives elsewhere
//! (`a2a.card_url`), which is this process's own `worker` served over A2A on a loopback HTTP
//! listener — every child an A2A task sent, followed and answered over HTTP.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::measure::{progress, Stats};
use super::BenchError;
use crate::client::SessionClient;
use crate::config::{
    AgentA2aConfig, AgentConfig, AgentMemoryConfig, Config, McpPrincipalConfig, ModelConfig,
};
use crate::engine::Engine;

/// Fan-outs measured.
const FAN_OUTS: [(usize, &str); 3] = [(1, "one"), (4, "four"), (16, "sixteen")];
/// Turns per fan-out and kind (after warm-up); the A2A row runs a quarter as many.
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
        a2a: None,
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
        agent(vec!["worker".into(), REMOTE.into()], vec!["add".into()]),
    );
    let mut worker = agent(Vec::new(), Vec::new());
    worker.a2a = Some(AgentA2aConfig {
        expose: true,
        ..AgentA2aConfig::default()
    });
    config.agents.insert("worker".into(), worker);
    // The worker again, reached over A2A on a loopback port reserved now ([`serve_worker`]).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| BenchError::Setup(format!("no free loopback port for A2A: {e}")))?
        .port();
    let mut remote = agent(Vec::new(), Vec::new());
    remote.a2a = Some(AgentA2aConfig {
        card_url: Some(format!("http://127.0.0.1:{port}/a2a/worker")),
        ..AgentA2aConfig::default()
    });
    config.agents.insert(REMOTE.into(), remote);
    config.mcp.server.anonymous = Some(McpPrincipalConfig {
        user: USER.into(),
        roles: Vec::new(),
    });
    config.engine.max_delegation_depth = 2;
    Ok(config)
}

/// The worker as a remote agent.
const REMOTE: &str = "remote_worker";

/// Serve the worker over A2A where [`REMOTE`]'s card says; the listener lives as long as the
/// returned server.
async fn serve_worker(engine: &Engine) -> Result<crate::http::HttpServer, BenchError> {
    let setup = |e: String| BenchError::Setup(format!("the A2A worker does not start: {e}"));
    let url = engine
        .config
        .agents
        .get(REMOTE)
        .and_then(|a| a.a2a.as_ref())
        .and_then(|a| a.card_url.clone())
        .unwrap_or_default();
    let listen = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let server = crate::http::start(&listen, engine.config.http.max_connections)
        .await
        .map_err(|e| setup(e.to_string()))?;
    server
        .serve_a2a(engine.bus.clone(), engine.config.clone(), engine.db.clone())
        .await
        .map_err(|e| setup(e.to_string()))?;
    Ok(server)
}

/// The scripted boss and worker: `fanout-<n>` delegates n tasks, `direct-<n>` calls `add` n
/// times, a worker's task is answered at once.
fn scenario_text() -> String {
    let mut text = String::from("name = \"delegation-bench\"\n");
    for (n, word) in FAN_OUTS {
        for (kind, tool, args) in [
            ("fanout", "agent__worker", "{ task = \"subtask: say ok\" }"),
            (
                "a2a",
                "agent__remote_worker",
                "{ task = \"subtask: say ok\" }",
            ),
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
    for tool in ["agent__worker", "agent__remote_worker", "add"] {
        text.push_str(&format!(
            "[[rule]]\nrole = \"planner\"\nwhen_last = \"tool\"\nafter_tool = \"{tool}\"\ntext = \"all done\"\n"
        ));
    }
    text.push_str("[[rule]]\nrole = \"planner\"\nwhen_last = \"user\"\ntext = \"ok\"\n");
    text
}

/// One row per fan-out.
pub async fn run(engine: &Engine, show: bool) -> Result<Vec<Value>, BenchError> {
    let _a2a = serve_worker(engine).await?;
    let mut rows = Vec::new();
    let run = uuid::Uuid::new_v4().simple().to_string();
    for ((n, word), turns) in FAN_OUTS.into_iter().zip(TURNS) {
        let a2a_turns = (turns / 4).max(10);
        let bar = progress(
            (2 * turns + a2a_turns) as u64,
            &format!("delegation x{n}"),
            show,
        );
        let mut measured = Vec::new();
        for (kind, count) in [("direct", turns), ("fanout", turns), ("a2a", a2a_turns)] {
            let mut stats = Stats::default();
            // The first turns warm caches and connections: not counted.
            for i in 0..count + 3 {
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
        let (direct, fanout, a2a) = (&measured[0], &measured[1], &measured[2]);
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
            "a2a_turns": a2a_turns,
            "a2a_p50_ms": p(a2a, 50.0),
            "a2a_p99_ms": p(a2a, 99.0),
            "a2a_added_p50_ms": p(a2a, 50.0) - p(direct, 50.0),
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
