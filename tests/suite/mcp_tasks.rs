//! MCP tasks as durable waits, on NATS with each role in its own process: a mounted server
//! answers `tools/call` with a task, the turn waits in `waiting_job` while the session goes on
//! answering, the MCP-bridge is killed mid-task and restarted, and the task's result still
//! wakes the turn — with the server's work started exactly once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes::bus;
use hermes::client::SessionClient;
use hermes::protocol::{ToolStatus, TurnEvent, DEFERRED_VIA};
use rmcp::model::TaskStatus;
use serde_json::json;

use crate::common::hermes_proc::Serve;
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;
use crate::common::task_mcp::TaskServer;

const T: Duration = Duration::from_secs(60);

/// How long the server's task runs: long enough to kill and restart the bridge inside it
/// (`HERMES_TEST_MCP_TASK_SECS` sets it, e.g. 30 as in the issue).
fn task_runs_for() -> Duration {
    let secs = std::env::var("HERMES_TEST_MCP_TASK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    Duration::from_secs(secs)
}

fn script() -> Scenario {
    Scenario::new("mcp-tasks")
        .rule(on_user(&["report"]).calls("slow__build_report", json!({"topic": "tides"})))
        .rule(after_tool("slow__build_report").says("Your tide report is ready."))
        .rule(on_user(&[]).says("Hello."))
}

/// A serve config: the scripted model, builtin tools, the task server mounted as `slow`.
fn write_config(dir: &Path, name: &str, url: &str) -> PathBuf {
    let scenario = dir.join(format!("{name}-scenario.toml"));
    std::fs::write(&scenario, script().to_toml()).unwrap();
    let models: String = ["planner", "extractor", "summariser"]
        .iter()
        .map(|role| {
            format!(
                "[models.{role}]\nprovider = \"replay\"\nscenario = {:?}\n",
                scenario.display().to_string()
            )
        })
        .collect();
    let config = format!(
        "{}\n[[mcp.servers]]\nname = \"slow\"\nurl = {url:?}\ntimeout_secs = 10\n\n{models}\n\
         [engine]\ndata_dir = {:?}\n",
        demo_builtin_toml(),
        dir.join(format!("{name}-data")).display().to_string()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn an_mcp_task_waits_durably_and_survives_a_killed_bridge_without_running_twice() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = TaskServer::new(task_runs_for());
    let url = rt.block_on(server.serve());
    let config = |name: &str| write_config(dir.path(), name, &url);
    let _core = Serve::start(
        &config("core"),
        &nats.url(),
        "session,planner,memory-extractor",
    );
    let _tools = Serve::start(&config("tools"), &nats.url(), "tool-executor");
    let bridge = Serve::start(&config("bridge"), &nats.url(), "mcp-bridge");

    let bus = rt.block_on(bus::connect(&nats.url(), None)).unwrap();
    rt.block_on(tool_mounted(bus.as_ref(), "slow__build_report"));
    let mut client = rt
        .block_on(SessionClient::open(bus, "assistant", "tides", "u-1"))
        .unwrap();
    let report_turn = rt.block_on(async {
        client
            .send("a report on the tides please", T)
            .await
            .unwrap();
        loop {
            match client.next_event(T).await.unwrap() {
                Some(TurnEvent::ToolResult { result, .. }) => {
                    assert_eq!(
                        result.via, DEFERRED_VIA,
                        "the call became a job: {result:?}"
                    );
                }
                Some(TurnEvent::JobWaiting { turn_id, .. }) => break turn_id,
                Some(_) => continue,
                None => panic!("the report turn never waited for the task"),
            }
        }
    });
    // The session is free while the task runs: another message is answered.
    let side = rt.block_on(client.turn("hello again", T, |_| {})).unwrap();
    assert_eq!(side.answer.as_deref(), Some("Hello."), "{:?}", side.error);
    assert_eq!(server.started(), 1);

    bridge.kill9();
    let _bridge = Serve::start(&config("bridge"), &nats.url(), "mcp-bridge");

    let (result, answer) = rt.block_on(async {
        let mut result = None;
        loop {
            match client.next_event(T).await.unwrap() {
                Some(TurnEvent::ToolResult { result: r, .. }) => result = Some(r),
                Some(TurnEvent::Answer { turn_id, text }) if turn_id == report_turn => {
                    break (result.expect("the task's result came first"), text)
                }
                Some(_) => continue,
                None => panic!("the report turn never answered"),
            }
        }
    });
    assert_eq!(answer, "Your tide report is ready.");
    assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
    assert!(result.via.starts_with("job:"), "{}", result.via);
    assert_eq!(result.output["text"], "report on tides: 3 findings");
    assert_eq!(server.started(), 1, "the server's work ran once");
}

#[test]
fn cancelling_a_turn_that_waits_for_an_mcp_task_cancels_the_task() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = TaskServer::new(Duration::from_secs(120));
    let url = rt.block_on(server.serve());
    let config = write_config(dir.path(), "all", &url);
    let _all = Serve::start(&config, &nats.url(), "all");
    let bus = rt.block_on(bus::connect(&nats.url(), None)).unwrap();
    rt.block_on(async {
        tool_mounted(bus.as_ref(), "slow__build_report").await;
        let mut client = SessionClient::open(bus, "assistant", "stop", "u-1")
            .await
            .unwrap();
        client
            .send("a report on the tides please", T)
            .await
            .unwrap();
        loop {
            match client.next_event(T).await.unwrap() {
                Some(TurnEvent::JobWaiting { .. }) => break,
                Some(_) => continue,
                None => panic!("the report turn never waited for the task"),
            }
        }
        let stopped = client.cancel(T).await.unwrap();
        assert!(stopped.turn_id.is_some(), "{stopped:?}");
        let deadline = tokio::time::Instant::now() + T;
        while server.statuses() != vec![TaskStatus::Cancelled] {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server's task was not cancelled: {:?}",
                server.statuses()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    assert_eq!(server.started(), 1);
}

/// Until the tool-executor offers `tool` (the bridge mounts the server after it starts, and
/// the executor hears of it on `hermes.mcp.changed`).
async fn tool_mounted(bus: &dyn hermes::bus::Bus, tool: &str) {
    let deadline = std::time::Instant::now() + T;
    loop {
        let names = super::mcp_bridge::tool_names(bus).await;
        if names.iter().any(|n| n == tool) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "`{tool}` was never offered; the tools are {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
