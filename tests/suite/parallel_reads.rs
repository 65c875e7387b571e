//! Independent `read` calls of one planning step run concurrently; calls with effects run one
//! after another. The tools are worker tools served by this test on the engine's bus, so it
//! can see how many calls are in flight at once.

use crate::common::scenario::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hermes::bus::{rpc, SharedBus};
use hermes::client::SessionClient;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::subjects;
use hermes::protocol::{kinds, ToolCallRequest, ToolCallResult, ToolStatus};
use hermes::tools::definition::ToolDefineConfig;
use serde_json::json;

use crate::common::engine::{test_config, with_engine};

const T: Duration = Duration::from_secs(60);

fn script() -> Scenario {
    Scenario::new("parallel")
        .rule(
            on_user(&["look up both"])
                .calls("slow_lookup", json!({"id": "A"}))
                .calls("slow_lookup", json!({"id": "B"}))
                .calls("slow_lookup", json!({"id": "C"})),
        )
        .rule(
            on_user(&["update both"])
                .calls("slow_update", json!({"id": "A"}))
                .calls("slow_update", json!({"id": "B"})),
        )
        .rule(after_any_tool().says("Done."))
        .rule(on_user(&[]).says("ok"))
}

fn define(name: &str, effect: &str) -> ToolDefineConfig {
    toml::from_str(&format!(
        r#"
name = "{name}"
description = "Look up or update one record by id. Use it when the user names a record; not for searches. Parameters: `id` string, required. Returns {{id}}. Errors: invalid_arguments without id."
effect = "{effect}"
timeout_secs = 10
[input_schema]
type = "object"
required = ["id"]
properties = {{ id = {{ type = "string" }} }}
"#
    ))
    .unwrap()
}

/// Serve `name` as a worker: each call takes 300 ms; returns the most calls seen in flight.
async fn serve_slowly(bus: SharedBus, name: &str) -> Arc<AtomicUsize> {
    let peak = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let subject = subjects::tool(name).unwrap();
    let mut sub = bus
        .queue_subscribe(&subject, subjects::groups::TOOL)
        .await
        .unwrap();
    let seen = peak.clone();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            let (bus, in_flight, peak) = (bus.clone(), in_flight.clone(), seen.clone());
            tokio::spawn(async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let request: Envelope<ToolCallRequest> =
                    Envelope::decode_request(&msg.payload, 1 << 20).unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let body = request.body;
                let result = ToolCallResult {
                    call_id: body.call_id,
                    name: body.name,
                    status: ToolStatus::Ok,
                    output: json!({"id": body.arguments["id"]}),
                    error: None,
                    auto_corrected: false,
                    corrections: Vec::new(),
                    via: "worker".into(),
                    duration_ms: 300,
                    raw_reference: None,
                };
                let reply = Envelope::new(kinds::TOOL_RESULT, result);
                rpc::publish(bus.as_ref(), msg.reply.as_deref().unwrap(), &reply)
                    .await
                    .unwrap();
            });
        }
    });
    peak
}

#[test]
fn independent_reads_of_one_step_run_concurrently_and_writes_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers.clear();
    config.tools.define = vec![
        define("slow_lookup", "read"),
        define("slow_update", "write"),
    ];
    with_engine(config, |engine| async move {
        let reads = serve_slowly(engine.bus.clone(), "slow_lookup").await;
        let writes = serve_slowly(engine.bus.clone(), "slow_update").await;
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "par", "u-1")
            .await
            .unwrap();
        let t = c.turn("look up both", T, |_| {}).await.unwrap();
        assert_eq!(t.answer.as_deref(), Some("Done."), "{:?}", t.events);
        assert_eq!(
            reads.load(Ordering::SeqCst),
            3,
            "all three reads were in flight at once"
        );

        let t = c.turn("update both", T, |_| {}).await.unwrap();
        assert_eq!(t.answer.as_deref(), Some("Done."), "{:?}", t.events);
        assert_eq!(writes.load(Ordering::SeqCst), 1, "writes never overlap");
    });
}
