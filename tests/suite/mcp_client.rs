//! The stdio MCP client against a real server (`mcp-server-everything`) and broken commands.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes::mcp::client::{connect_all, StdioMcpClient};
use hermes::mcp::{McpClient, McpError};
use serde_json::json;

use crate::common::mcp_servers::{command_config, everything_server_config};

const NO_SELF: &str = "/nonexistent/hermes-self";
const LONG: Duration = Duration::from_secs(30);

async fn everything(name: &str) -> StdioMcpClient {
    StdioMcpClient::spawn(&everything_server_config(name), Path::new(NO_SELF))
        .await
        .expect("mcp-server-everything starts and completes the handshake")
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -9 {pid} failed");
}

fn process_exists(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn everything_server_lists_echo_and_echoes_the_message() {
    let client = everything("everything").await;
    assert_eq!(client.server(), "everything");
    let tools = client.list_tools().await.unwrap();
    let echo = tools
        .iter()
        .find(|tool| tool.name == "echo")
        .unwrap_or_else(|| {
            panic!(
                "no echo tool in {:?}",
                tools.iter().map(|t| &t.name).collect::<Vec<_>>()
            )
        });
    assert!(!echo.description.is_empty());
    assert_eq!(echo.input_schema["type"], json!("object"));
    assert!(echo.input_schema["properties"].get("message").is_some());

    let result = client
        .call_tool("echo", json!({"message": "hi"}), LONG)
        .await
        .unwrap();
    assert!(!result.is_error);
    assert!(result.text.contains("hi"), "{}", result.text);
    client.shutdown().await;
}

#[tokio::test]
async fn image_blocks_are_summarised_in_the_text() {
    let client = everything("images").await;
    let result = client
        .call_tool("get-tiny-image", json!({}), LONG)
        .await
        .unwrap();
    assert!(
        result.text.contains("[image image/png ") && result.text.contains(" bytes]"),
        "{}",
        result.text
    );
    client.shutdown().await;
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_a_protocol_error() {
    let client = everything("args").await;
    let error = client
        .call_tool("echo", json!("hi"), LONG)
        .await
        .unwrap_err();
    match &error {
        McpError::Protocol {
            server,
            method,
            reason,
        } => {
            assert_eq!(server, "args");
            assert_eq!(method, "tools/call");
            assert!(reason.contains("must be a JSON object"), "{reason}");
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
    // The session is still usable.
    let result = client
        .call_tool("echo", json!({"message": "still here"}), LONG)
        .await
        .unwrap();
    assert!(result.text.contains("still here"));
    client.shutdown().await;
}

#[tokio::test]
async fn missing_command_is_a_spawn_error_naming_the_command() {
    let config = command_config("ghost", "/nonexistent/no-such-mcp-server", &["--flag"]);
    let error = StdioMcpClient::spawn(&config, Path::new(NO_SELF))
        .await
        .unwrap_err();
    match &error {
        McpError::Spawn { server, reason } => {
            assert_eq!(server, "ghost");
            assert!(
                reason.contains("/nonexistent/no-such-mcp-server --flag"),
                "{reason}"
            );
        }
        other => panic!("expected a spawn error, got {other:?}"),
    }
    assert!(error.to_string().contains("[[mcp.servers]]"));
}

#[tokio::test]
async fn self_command_runs_the_given_executable() {
    let config = command_config("myself", "self", &["--version"]);
    let error = StdioMcpClient::spawn(&config, Path::new("/nonexistent/hermes-self-exe"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::Spawn { reason, .. } if reason.contains("/nonexistent/hermes-self-exe --version")),
        "{error:?}"
    );
}

#[tokio::test]
async fn server_that_exits_at_once_is_a_handshake_error_without_hanging() {
    let config = command_config(
        "quitter",
        "sh",
        &["-c", "echo 'cannot start: no config' >&2; exit 3"],
    );
    let started = Instant::now();
    let error = StdioMcpClient::spawn(&config, Path::new(NO_SELF))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    match &error {
        McpError::Handshake { server, reason } => {
            assert_eq!(server, "quitter");
            assert!(reason.contains("exit status: 3"), "{reason}");
            assert!(reason.contains("cannot start: no config"), "{reason}");
            assert!(reason.contains("sh -c"), "{reason}");
        }
        other => panic!("expected a handshake error, got {other:?}"),
    }
}

#[tokio::test]
async fn server_that_never_answers_initialize_times_out_and_is_stopped() {
    let mut config = command_config("mute", "sleep", &["30"]);
    config.timeout_secs = 1;
    let started = Instant::now();
    let error = StdioMcpClient::spawn(&config, Path::new(NO_SELF))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
    match &error {
        McpError::Handshake { reason, .. } => {
            assert!(
                reason.contains("did not answer `initialize` within 1s"),
                "{reason}"
            );
            assert!(
                reason.contains("signal: 9"),
                "the child was not killed: {reason}"
            );
        }
        other => panic!("expected a handshake error, got {other:?}"),
    }
}

#[tokio::test]
async fn killed_server_fails_the_next_call_fast_with_dead() {
    let client = everything("victim").await;
    let pid = client.child_pid().unwrap();
    kill_9(pid);
    // Once the exit is seen, nothing is sent: the call fails `Dead` (a call already on its
    // way when the server dies is `Lost`, below).
    let seen = Instant::now();
    while client.dead_reason().is_none() && seen.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let error = client
        .call_tool(
            "echo",
            json!({"message": "anyone?"}),
            Duration::from_secs(20),
        )
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    match &error {
        McpError::Dead { server, reason } => {
            assert_eq!(server, "victim");
            assert!(reason.contains("signal: 9"), "{reason}");
        }
        other => panic!("expected Dead, got {other:?}"),
    }
    assert!(client.dead_reason().is_some());
    assert!(matches!(
        client.list_tools().await,
        Err(McpError::Dead { .. })
    ));
}

#[tokio::test]
async fn server_killed_during_a_call_fails_that_call_fast_as_lost_since_it_may_have_run() {
    let client = Arc::new(everything("midcall").await);
    let pid = client.child_pid().unwrap();
    let caller = Arc::clone(&client);
    let started = Instant::now();
    let call = tokio::spawn(async move {
        caller
            .call_tool(
                "trigger-long-running-operation",
                json!({"duration": 20, "steps": 2}),
                LONG,
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill_9(pid);
    let outcome = call.await.unwrap();
    match &outcome {
        Err(error @ McpError::Lost { server, .. }) => {
            assert_eq!(server, "midcall");
            assert_eq!(error.failure(), hermes::mcp::McpFailure::Lost);
            assert!(
                error.to_string().contains("may have taken effect"),
                "{error}"
            );
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn call_slower_than_its_timeout_fails_with_timeout_and_the_session_survives() {
    let client = everything("slow").await;
    let tools = client.list_tools().await.unwrap();
    assert!(tools
        .iter()
        .any(|tool| tool.name == "trigger-long-running-operation"));
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let error = client
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 10, "steps": 2}),
            timeout,
        )
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= timeout && elapsed < Duration::from_secs(4),
        "took {elapsed:?}"
    );
    match &error {
        McpError::Timeout {
            server,
            method,
            after,
        } => {
            assert_eq!(server, "slow");
            assert_eq!(method, "tools/call");
            assert_eq!(*after, timeout);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    let result = client
        .call_tool("echo", json!({"message": "after timeout"}), LONG)
        .await
        .unwrap();
    assert!(result.text.contains("after timeout"));
    client.shutdown().await;
}

#[tokio::test]
async fn shutdown_reaps_the_child_and_later_calls_fail_dead() {
    let client = everything("closing").await;
    let pid = client.child_pid().unwrap();
    assert!(process_exists(pid));
    let started = Instant::now();
    client.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        !process_exists(pid),
        "child {pid} still exists after shutdown"
    );
    let error = client
        .call_tool("echo", json!({"message": "x"}), LONG)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::Dead { reason, .. } if reason.contains("shut down")),
        "{error:?}"
    );
}

#[tokio::test]
async fn connect_all_reports_every_server_in_config_order() {
    let configs = vec![
        everything_server_config("first"),
        command_config("broken", "/nonexistent/no-such-mcp-server", &[]),
        everything_server_config("third"),
    ];
    let results = connect_all(&configs, Path::new(NO_SELF)).await;
    let names: Vec<_> = results.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, vec!["first", "broken", "third"]);
    assert!(matches!(results[1].1, Err(McpError::Spawn { .. })));
    for (name, result) in &results {
        if name == "broken" {
            continue;
        }
        let client = result.as_ref().unwrap();
        assert_eq!(client.server(), name);
        assert!(client
            .list_tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "echo"));
        client.shutdown().await;
    }
}
