//! External tool workers: the Python example serves `word_count` over NATS, the executor
//! lists it from `[[tools.define]]`, and a turn calls it through the worker.

use crate::common::scenario::*;
use std::time::Duration;

use hermes::bus::rpc;
use hermes::client::SessionClient;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{ToolCallRequest, ToolCallResult, ToolStatus, ToolsCatalog, TurnEvent};
use hermes::tools::definition::{ToolDefineConfig, ToolSource};
use hermes::tools::worker::prepare_remote;
use serde_json::json;

use crate::common::engine::{test_config, with_engine};
use crate::common::nats_server::NatsServer;
use crate::common::python_worker::PythonWorker;

const T: Duration = Duration::from_secs(60);

fn script() -> Scenario {
    Scenario::new("worker")
        .rule(on_user(&["count"]).calls("word_count", json!({"text": "one two three"})))
        .rule(after_tool("word_count").says("Three words."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

const WORD_COUNT: &str = r#"
name = "word_count"
description = "Count the words in a text. Use it when the user asks how many words a text has; do not use it for characters. Parameters: `text` string, required. Returns {words, longest}. Errors: invalid_arguments when text is missing."
timeout_secs = 5
[input_schema]
type = "object"
required = ["text"]
properties = { text = { type = "string", description = "the text" }, min_len = { type = "integer" } }
"#;

#[test]
fn a_python_worker_serves_a_tool_call_of_a_turn_over_nats() {
    let nats = NatsServer::start();
    let _worker = PythonWorker::start(&nats.url());
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.bus.url = nats.url();
    config.mcp.servers = Vec::new();
    let define: ToolDefineConfig = toml::from_str(WORD_COUNT).unwrap();
    config.tools.define = vec![define];
    with_engine(config, |engine| async move {
        let list = Envelope::request(hermes::protocol::request::ToolsListRequest);
        let catalog: Envelope<ToolsCatalog> = rpc::request(engine.bus.as_ref(), list.clone(), T)
            .await
            .unwrap();
        let def = catalog
            .body
            .definitions
            .iter()
            .find(|d| d.name == "word_count")
            .expect("the worker tool is in the catalog")
            .clone();
        assert_eq!(def.source, ToolSource::Worker);
        assert!(catalog.body.tools.iter().any(|t| t.name == "word_count"));

        // What the session does before dispatch: validate and repair against the definition.
        let prepared = prepare_remote(&def, json!({"text": "a bb ccc", "min_len": "2"})).unwrap();
        let call = Envelope::request(ToolCallRequest {
            call_id: "direct-1".into(),
            name: "word_count".into(),
            arguments: prepared.arguments,
            ..Default::default()
        });
        let reply: Envelope<ToolCallResult> = rpc::request(engine.bus.as_ref(), call.clone(), T)
            .await
            .unwrap();
        assert_eq!(reply.trace_id, call.trace_id);
        assert_eq!(reply.body.output, json!({"words": 2, "longest": "ccc"}));

        let mut client = SessionClient::open(engine.bus.clone(), "assistant", "w1", "u-1001")
            .await
            .unwrap();
        let trace = client.turn("count these words", T, |_| {}).await.unwrap();
        let result = trace
            .events
            .iter()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
            .expect("a tool result");
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        assert_eq!(result.via, "worker");
        assert_eq!(result.output["words"], 3);
        assert_eq!(trace.answer.as_deref(), Some("Three words."));
    });
}
