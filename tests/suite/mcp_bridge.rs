//! The MCP-bridge through the engine: a killed server fails fast and comes back, calls are
//! audited, resources and prompts travel over `hermes.mcp.*`, `list_changed` re-mounts tools,
//! and real peers over Streamable HTTP and the filesystem server.

use crate::common::scenario::*;
use std::time::{Duration, Instant};

use hermes::bus::{rpc, Bus};
use hermes::config::{McpRevision, McpServerConfig};
use hermes::mcp::client::RmcpClient;
use hermes::mcp::McpClient;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{
    McpAuditReply, McpAuditRequest, McpCallRequest, McpCatalog, McpPromptRequest, ToolCallRequest,
    ToolCallResult, ToolStatus,
};
use serde_json::{json, Value};

use crate::common::dynamic_mcp;
use crate::common::engine::{test_config, with_engine};
use crate::common::mcp_servers::{
    everything_server_config, filesystem_server_path, EverythingHttp,
};

pub fn script() -> Scenario {
    Scenario::new("mcp").rule(on_user(&[]).says("ok")).rule(
        on_user(&[])
            .role("extractor")
            .says("{\"memory_updates\": []}"),
    )
}
const WAIT: Duration = Duration::from_secs(10);

pub async fn call_tool(bus: &dyn Bus, name: &str, arguments: Value, user: &str) -> ToolCallResult {
    let request = Envelope::request(ToolCallRequest {
        call_id: uuid::Uuid::now_v7().to_string(),
        name: name.into(),
        arguments,
        user: Some(user.into()),
        turn_id: None,
        session: None,
        confirmed: false,
        input: None,
    });
    rpc::request(bus, request.clone(), Duration::from_secs(40))
        .await
        .unwrap()
        .body
}

pub async fn catalog(bus: &dyn Bus) -> McpCatalog {
    let request = Envelope::request(hermes::protocol::request::McpCatalogRequest);
    rpc::request(bus, request.clone(), WAIT).await.unwrap().body
}

pub async fn audit(bus: &dyn Bus, limit: usize) -> McpAuditReply {
    let request = Envelope::request(McpAuditRequest { limit });
    rpc::request(bus, request.clone(), WAIT).await.unwrap().body
}

pub async fn tool_names(bus: &dyn Bus) -> Vec<String> {
    let request = Envelope::request(hermes::protocol::request::ToolsListRequest);
    let catalog = rpc::request(bus, request.clone(), WAIT).await.unwrap().body;
    catalog.tools.into_iter().map(|t| t.name).collect()
}

/// Poll until `check` holds (or panic after `within`).
async fn eventually<F: Fn(&McpCatalog) -> bool>(
    bus: &dyn Bus,
    within: Duration,
    check: F,
) -> McpCatalog {
    let deadline = Instant::now() + within;
    loop {
        let current = catalog(bus).await;
        if check(&current) {
            return current;
        }
        assert!(
            Instant::now() < deadline,
            "catalog never reached the state: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn killed_mcp_server_fails_fast_then_reconnects_and_calls_succeed_and_all_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers = vec![everything_server_config("every")];
    with_engine(config, |engine| async move {
        let bus = engine.bus.as_ref();
        let first = call_tool(bus, "every__echo", json!({"message": "one"}), "alice").await;
        assert_eq!(first.status, ToolStatus::Ok, "{first:?}");
        assert_eq!(first.via, "mcp:every");

        let before = catalog(bus).await;
        let pid = before.servers[0]
            .pid
            .expect("the bridge reports the child's pid");
        kill_9(pid);
        let started = Instant::now();
        let down = call_tool(bus, "every__echo", json!({"message": "two"}), "alice").await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(down.status, ToolStatus::Error);
        let message = down.error.as_ref().unwrap().message.clone();
        // Down before the call was sent, or (the kill racing the send) gone with the call on
        // its way, which may have taken effect.
        assert!(
            message.contains("is down")
                || message.contains("not running")
                || message.contains("went away during the call"),
            "unclear error: {message}"
        );

        let back = eventually(bus, Duration::from_secs(30), |c| {
            c.servers[0].status == "ready" && c.servers[0].reconnects == 1
        })
        .await;
        assert_ne!(back.servers[0].pid, Some(pid), "a new child runs");
        let again = call_tool(bus, "every__echo", json!({"message": "three"}), "alice").await;
        assert_eq!(again.status, ToolStatus::Ok, "{again:?}");
        assert!(again.output.to_string().contains("three"));

        let records = audit(bus, 10).await.records;
        let calls: Vec<_> = records
            .iter()
            .filter(|r| r.server == "every" && r.method == "tools/call")
            .collect();
        assert_eq!(calls.len(), 3, "{records:?}");
        assert!(calls
            .iter()
            .all(|r| r.who == "alice" && r.target == "echo" && r.side == "client"));
        let statuses: Vec<_> = calls.iter().map(|r| r.status.as_str()).collect();
        assert_eq!(statuses, vec!["ok", "error", "ok"], "newest first");
    });
}

#[test]
fn a_call_to_a_server_that_is_down_is_audited_whether_or_not_it_accepts_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers = vec![crate::common::mcp_servers::command_config(
        "ghost",
        "/nonexistent/no-such-mcp-server",
        &[],
    )];
    with_engine(config, |engine| async move {
        let bus = engine.bus.as_ref();
        for accept_task in [false, true] {
            let request = Envelope::request(McpCallRequest {
                server: "ghost".into(),
                tool: "echo".into(),
                arguments: json!({"message": "hello"}),
                user: Some("alice".into()),
                accept_task,
                input: None,
            });
            let reply = rpc::request(bus, request, WAIT).await.unwrap().body;
            let error = reply
                .error
                .expect("a server that is down answers with an error");
            assert!(error.contains("not running"), "{error}");
        }
        let records = audit(bus, 10).await.records;
        let refused: Vec<_> = records
            .iter()
            .filter(|r| r.server == "ghost" && r.method == "tools/call" && r.status == "error")
            .collect();
        assert_eq!(refused.len(), 2, "{records:?}");
        assert!(refused
            .iter()
            .all(|r| r.who == "alice" && r.target == "echo"));
    });
}

#[test]
fn resources_are_read_through_a_tool_and_prompts_over_the_bus() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers = vec![everything_server_config("every")];
    with_engine(config, |engine| async move {
        let bus = engine.bus.as_ref();
        let server = catalog(bus).await.servers.remove(0);
        let resource = server
            .resources
            .first()
            .expect("everything lists resources")
            .clone();
        let read = call_tool(
            bus,
            "mcp_read_resource",
            json!({"server": "every", "uri": resource.uri}),
            "bob",
        )
        .await;
        assert_eq!(read.status, ToolStatus::Ok, "{read:?}");
        assert_eq!(read.output["contents"][0]["uri"], json!(resource.uri));
        assert!(!read.output["contents"][0]["text"]
            .as_str()
            .unwrap()
            .is_empty());

        let missing = call_tool(
            bus,
            "mcp_read_resource",
            json!({"server": "nope", "uri": "x://y"}),
            "bob",
        )
        .await;
        assert_eq!(missing.status, ToolStatus::Error);
        assert!(missing
            .error
            .unwrap()
            .message
            .contains("no MCP server named `nope`"));

        let prompt = server
            .prompts
            .iter()
            .find(|p| p.arguments.iter().all(|a| !a.required))
            .expect("a prompt without required arguments");
        let request = Envelope::request(McpPromptRequest {
            server: "every".into(),
            name: prompt.name.clone(),
            arguments: Value::Null,
            user: Some("bob".into()),
        });
        let reply = rpc::request(bus, request.clone(), WAIT).await.unwrap().body;
        let got = reply.prompt.unwrap_or_else(|| panic!("{:?}", reply.error));
        assert!(!got.messages.is_empty());

        let records = audit(bus, 10).await.records;
        assert!(records.iter().any(|r| r.method == "resources/read"
            && r.who == "bob"
            && r.target == resource.uri
            && r.status == "ok"));
        assert!(records
            .iter()
            .any(|r| r.method == "prompts/get" && r.status == "ok"));
    });
}

#[test]
fn tool_list_changed_is_refreshed_and_the_new_tool_mounted() {
    // The default probes with server/discover: an rmcp server speaks 2026-07-28, where list
    // changes arrive on a subscriptions/listen stream; pinned to the handshake, as
    // notifications of the session.
    for (revision, spoken) in [
        (McpRevision::Auto, "2026-07-28"),
        (McpRevision::Handshake2025, "2025-11-25"),
    ] {
        list_change_mounts_the_new_tool(revision, spoken);
    }
}

fn list_change_mounts_the_new_tool(revision: McpRevision, spoken: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    let io = tokio::runtime::Runtime::new().unwrap();
    let url = io.block_on(dynamic_mcp::start());
    config.mcp.servers = vec![McpServerConfig {
        name: "dyn".into(),
        url: Some(url),
        protocol: revision,
        ..Default::default()
    }];
    with_engine(config, move |engine| async move {
        assert_eq!(
            catalog(engine.bus.as_ref()).await.servers[0]
                .protocol
                .as_deref(),
            Some(spoken)
        );
        let bus = engine.bus.as_ref();
        assert!(!tool_names(bus).await.contains(&"dyn__extra_1".to_owned()));
        let grown = call_tool(bus, "dyn__grow", json!({}), "u").await;
        assert_eq!(grown.status, ToolStatus::Ok, "{grown:?}");
        let deadline = Instant::now() + WAIT;
        while !tool_names(bus).await.contains(&"dyn__extra_1".to_owned()) {
            assert!(Instant::now() < deadline, "dyn__extra_1 was never mounted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let extra = call_tool(bus, "dyn__extra_1", json!({}), "u").await;
        assert_eq!(extra.status, ToolStatus::Ok, "{extra:?}");
        assert_eq!(catalog(bus).await.servers[0].transport, "http");
    });
    drop(io);
}

#[tokio::test]
async fn everything_server_over_streamable_http_lists_and_echoes() {
    let server = EverythingHttp::start();
    let config = McpServerConfig {
        name: "every-http".into(),
        url: Some(server.url.clone()),
        ..Default::default()
    };
    let client = RmcpClient::connect(&config, std::path::Path::new("/nonexistent"))
        .await
        .unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    // A server of the handshake era answers server/discover as an unknown method: the
    // client falls back to `initialize`.
    assert_eq!(client.protocol().as_deref(), Some("2025-11-25"));
    let result = client
        .call_tool("echo", json!({"message": "over http"}), WAIT)
        .await
        .unwrap();
    assert!(result.text.contains("over http"), "{}", result.text);
    assert!(!client.list_resources().await.unwrap().is_empty());
    assert!(!client.list_prompts().await.unwrap().is_empty());
    client.shutdown().await;
    let error = client
        .call_tool("echo", json!({"message": "x"}), WAIT)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("shut down"), "{error}");
}

#[tokio::test]
async fn filesystem_server_reads_inside_its_directory_and_refuses_outside() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let inside_file = allowed.path().join("note.txt");
    std::fs::write(&inside_file, "inside the sandbox").unwrap();
    let outside_file = outside.path().join("secret.txt");
    std::fs::write(&outside_file, "secret").unwrap();
    let config = McpServerConfig {
        name: "fs".into(),
        command: filesystem_server_path().to_string_lossy().into_owned(),
        args: vec![allowed.path().to_string_lossy().into_owned()],
        ..Default::default()
    };
    let client = RmcpClient::connect(&config, std::path::Path::new("/nonexistent"))
        .await
        .unwrap();
    let tools = client.list_tools().await.unwrap();
    let read_tool = if tools.iter().any(|t| t.name == "read_text_file") {
        "read_text_file"
    } else {
        "read_file"
    };
    let ok = client
        .call_tool(
            read_tool,
            json!({"path": inside_file.to_string_lossy()}),
            WAIT,
        )
        .await
        .unwrap();
    assert!(
        !ok.is_error && ok.text.contains("inside the sandbox"),
        "{ok:?}"
    );
    let refused = client
        .call_tool(
            read_tool,
            json!({"path": outside_file.to_string_lossy()}),
            WAIT,
        )
        .await;
    match refused {
        Ok(result) => assert!(
            result.is_error && !result.text.contains("secret\n") && result.text != "secret",
            "{result:?}"
        ),
        Err(error) => assert!(
            error.to_string().contains("denied") || error.to_string().contains("outside"),
            "{error}"
        ),
    }
    client.shutdown().await;
}

/// A 2025-11-25 server may send its own requests (an elicitation during our first call) only
/// on the standalone stream and drop them while that stream is not open yet (the TypeScript
/// SDK does): the connection is ready only once the server has answered that stream's GET.
#[tokio::test]
async fn a_2025_connection_is_ready_only_after_the_server_answered_its_standalone_stream() {
    let (url, seen) = dynamic_mcp::start_with_slow_stream(Duration::from_millis(700)).await;
    let config = McpServerConfig {
        name: "slow-stream".into(),
        url: Some(url.clone()),
        protocol: McpRevision::Handshake2025,
        ..Default::default()
    };
    let client = RmcpClient::connect_http(&config, &url).await.unwrap();
    assert_eq!(client.protocol().as_deref(), Some("2025-11-25"));
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "grow"), "{tools:?}");
    let seen = seen.lock().unwrap().clone();
    let answered = seen.iter().position(|e| *e == "GET answered");
    // initialize and notifications/initialized are the first two POSTs; tools/list the third.
    let first_request = seen
        .iter()
        .enumerate()
        .filter(|(_, e)| **e == "POST")
        .nth(2)
        .map(|(i, _)| i);
    assert!(
        matches!((answered, first_request), (Some(a), Some(r)) if a < r),
        "the standalone stream was not answered before the first request: {seen:?}"
    );
}
