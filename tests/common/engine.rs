//! Running an in-process engine in a test: a temp sled dir, a scripted model, the real actors.

use super::scenario::Scenario;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use hermes::actors::ActorSet;
use hermes::config::{Config, McpServerConfig, ModelConfig};
use hermes::engine::Engine;

/// The demo profile (the shop's tools) with data under `dir`, every model role replaying
/// `scenario`, and the catalog MCP server started from the built `hermes` binary.
pub fn test_config(dir: &Path, scenario: &Scenario) -> Config {
    let mut config = Config::demo().unwrap();
    let path = dir.join("scenario.toml");
    std::fs::write(&path, scenario.to_toml()).unwrap();
    let replay = ModelConfig::Replay {
        scenario: path.display().to_string(),
    };
    config.models.planner = replay.clone();
    config.models.extractor = replay.clone();
    config.models.summariser = replay;
    config.engine.data_dir = dir.join("db");
    config.mcp.servers = vec![catalog_server()];
    config
}

/// The demo's catalog MCP server, as a child process of the built binary.
pub fn catalog_server() -> McpServerConfig {
    McpServerConfig {
        name: "catalog".into(),
        command: env!("CARGO_BIN_EXE_hermes").into(),
        args: vec!["mcp".into(), "catalog-server".into()],
        env: Default::default(),
        timeout_secs: 30,
        ..Default::default()
    }
}

/// Start every actor on the embedded bus, run `body`, shut down.
pub fn with_engine<F, Fut>(config: Config, body: F)
where
    F: FnOnce(Arc<Engine>) -> Fut,
    Fut: Future<Output = ()>,
{
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = io.handle().clone();
    let system = actix::System::new();
    system.block_on(async move {
        let engine = Arc::new(
            Engine::start(Arc::new(config), ActorSet::ALL, handle)
                .await
                .expect("engine starts"),
        );
        body(engine.clone()).await;
        if let Ok(engine) = Arc::try_unwrap(engine) {
            engine.shutdown().await;
        }
    });
    io.shutdown_timeout(std::time::Duration::from_secs(2));
}
