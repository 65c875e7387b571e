//! Two Hermes engines on one NATS bus share one memory service: an agent writes a fact
//! through one engine's MCP server, another agent recalls it through the other's.

use std::sync::Arc;

use hermes::actors::ActorSet;
use hermes::engine::Engine;
use hermes::mcp::server::http;
use hermes::mcp::server::ServerDeps;
use hermes::mcp::McpClient;
use hermes::memory::MemoryStore;
use serde_json::json;

use super::mcp_server::{client_as, secured_config};
use crate::common::nats_server::NatsServer;

const NONE: ActorSet = ActorSet {
    session: false,
    planner: false,
    tool_executor: false,
    mcp_bridge: false,
    memory_extractor: false,
};

#[test]
fn a_fact_written_through_one_engine_is_recalled_through_another() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = io.handle().clone();
    let system = actix::System::new();
    system.block_on(async move {
        for side in ["memory", "agent"] {
            std::fs::create_dir_all(dir.path().join(side)).unwrap();
        }
        let mut memory_config = secured_config(&dir.path().join("memory"));
        memory_config.bus.url = nats.url();
        let memory_actors = ActorSet {
            memory_extractor: true,
            mcp_bridge: true,
            ..NONE
        };
        let memory = Engine::start(Arc::new(memory_config), memory_actors, handle.clone())
            .await
            .unwrap();

        let mut agent_config = secured_config(&dir.path().join("agent"));
        agent_config.bus.url = nats.url();
        let agent = Engine::start(
            Arc::new(agent_config),
            ActorSet {
                tool_executor: true,
                ..NONE
            },
            handle.clone(),
        )
        .await
        .unwrap();

        let deps = |engine: &Engine| ServerDeps::from_config(engine.bus.clone(), &engine.config);
        let writer_side = http::start("127.0.0.1:0", deps(&agent), &agent.config.mcp.server)
            .await
            .unwrap();
        let reader_side = http::start("127.0.0.1:0", deps(&memory), &memory.config.mcp.server)
            .await
            .unwrap();

        let writer = client_as(&writer_side, Some("alice")).await.unwrap();
        let written = writer
            .call_tool(
                "memory_write",
                json!({"content": "Alice's favourite colour is teal", "key": "colour"}),
                std::time::Duration::from_secs(15),
            )
            .await
            .unwrap();
        assert!(!written.is_error, "{written:?}");
        // The agent's engine has a database (its tool-executor's jobs), but no memories.
        let agent_memories = MemoryStore::open(agent.db.as_ref().unwrap()).unwrap();
        assert!(
            agent_memories.list("alice").unwrap().is_empty(),
            "the second engine keeps no memory of its own"
        );

        let reader = client_as(&reader_side, Some("alice")).await.unwrap();
        let found = reader
            .call_tool(
                "memory_search",
                json!({"query": "favourite colour"}),
                std::time::Duration::from_secs(15),
            )
            .await
            .unwrap();
        let memories = &found.structured.unwrap()["memories"];
        assert_eq!(
            memories[0]["content"],
            json!("Alice's favourite colour is teal"),
            "{memories}"
        );
        assert_eq!(memories[0]["user"], json!("alice"));
        writer.shutdown().await;
        reader.shutdown().await;
        agent.shutdown().await;
        memory.shutdown().await;
    });
    io.shutdown_timeout(std::time::Duration::from_secs(2));
}
