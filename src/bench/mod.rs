//! `hermes bench`: the engine workloads of `shared/bench/WORKLOAD.md` (W1 tool loop, W2
//! history growth, W3 message passing) and our idle-sessions memory row, run through the
//! whole engine on either bus.

pub mod delegation;
mod idle;
mod measure;
mod threads;
mod w1;
mod w2;
mod w3;

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::actors::ActorSet;
use crate::config::{Config, ModelConfig};
use crate::engine::Engine;

pub use idle::DEFAULT_SESSIONS as IDLE_DEFAULT_SESSIONS;
pub use measure::{count_cpu_of, host_info, Stats};

/// The bench scenario for the extractor and summariser roles.
pub const BENCH_SCENARIO: &str = include_str!("../../config/bench-scenario.toml");

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the engine did not start: {0}")]
    Engine(#[from] crate::engine::EngineError),
    #[error("turn {turn} of session {session} failed: {reason}")]
    Turn {
        session: String,
        turn: u64,
        reason: String,
    },
    #[error("isolation check failed: {0}")]
    Isolation(String),
    #[error("bench set-up failed: {0}")]
    Setup(String),
}

/// Which workloads to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    W1,
    W2,
    W3,
    /// This many sessions left idle in memory.
    Idle(usize),
    /// Delegation overhead: 1, 4 and 16 children against direct tool calls
    /// (needs [`delegation::config`]).
    Delegation,
}

/// Turn the user's config into the bench config: bench model, `add` tool, no MCP servers,
/// data under `data_dir`, the given bus.
pub fn bench_config(mut config: Config, bus: &str, data_dir: &Path) -> Result<Config, BenchError> {
    let scenario = data_dir.join("bench-scenario.toml");
    std::fs::create_dir_all(data_dir).map_err(|e| BenchError::Setup(e.to_string()))?;
    std::fs::write(&scenario, BENCH_SCENARIO).map_err(|e| BenchError::Setup(e.to_string()))?;
    let replay = ModelConfig::Replay {
        scenario: scenario.display().to_string(),
    };
    config.models.planner = ModelConfig::Bench {};
    config.models.extractor = replay.clone();
    config.models.summariser = replay;
    config.tools.builtin = vec!["add".into()];
    config.mcp.servers.clear();
    config.bus.url = bus.to_string();
    config.engine.data_dir = data_dir.join("db");
    Ok(config)
}

/// Run `workloads` and return one JSON object per reported row.
pub async fn run(
    config: Config,
    actors: ActorSet,
    workloads: &[Workload],
    io: tokio::runtime::Handle,
    progress: bool,
) -> Result<Vec<Value>, BenchError> {
    let config = Arc::new(config);
    let engine = Engine::start(config.clone(), actors, io).await?;
    tracing::info!(bus = %config.bus.url, "bench engine started");
    let mut rows = Vec::new();
    for w in workloads {
        match w {
            Workload::W1 => rows.extend(w1::run(&engine, actors.session, progress).await?),
            Workload::W2 => rows.push(w2::run(&engine, progress).await?),
            Workload::W3 => rows.extend(w3::run(&engine, progress).await?),
            Workload::Idle(n) => rows.push(idle::run(&engine, *n, progress).await?),
            Workload::Delegation => rows.extend(delegation::run(&engine, progress).await?),
        }
    }
    let bus = config.bus.url.clone();
    engine.shutdown().await;
    let common = json!({
        "bus": if bus == "embedded" { "embedded".to_string() } else { "nats".to_string() },
        "version": env!("CARGO_PKG_VERSION"),
        "git_sha": env!("HERMES_GIT_SHA"),
        "host": host_info(),
    });
    for row in &mut rows {
        if let (Some(obj), Some(extra)) = (row.as_object_mut(), common.as_object()) {
            for (k, v) in extra {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(rows)
}
