//! Hermes' own MCP server: over HTTP with bearer tokens (refusals, roles, per-user data,
//! shared namespaces, DNS-rebinding protection, audit) and over stdio through the rmcp client.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use hermes::bus::{rpc, Bus};
use hermes::config::{Config, McpRoleConfig, McpServerConfig, McpTokenConfig};
use hermes::engine::Engine;
use hermes::mcp::client::RmcpClient;
use hermes::mcp::server::auth::sha256_hex;
use hermes::mcp::server::http::{self, HttpServer};
use hermes::mcp::server::ServerDeps;
use hermes::mcp::{McpClient, McpError};
use hermes::memory::{MemoryKind, MemoryUpdate, UpdateOp};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::Memory;
use hermes::protocol::{MemoryListRequest, MemoryWriteRequest};
use serde_json::{json, Value};

use super::mcp_bridge::{audit, script};
use crate::common::engine::{test_config, with_engine};

const WAIT: Duration = Duration::from_secs(15);

fn role(tools: &[&str], namespaces: &[&str]) -> McpRoleConfig {
    McpRoleConfig {
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
    }
}

fn token(user: &str, role: &str) -> McpTokenConfig {
    McpTokenConfig {
        user: user.into(),
        roles: vec![role.into()],
        token_sha256: Some(sha256_hex(&format!("{user}-secret"))),
        ..Default::default()
    }
}

/// alice: every tool; carol: only memory_search; bot: every tool and the shared namespace `team`.
pub fn secured_config(dir: &std::path::Path) -> Config {
    let mut config = test_config(dir, &script());
    config.mcp.servers.clear();
    let host = &mut config.mcp.server;
    host.roles = BTreeMap::from([
        ("writer".to_owned(), role(&["*"], &[])),
        ("reader".to_owned(), role(&["memory_search"], &[])),
        ("team".to_owned(), role(&["*"], &["team"])),
    ]);
    host.tokens = vec![
        token("alice", "writer"),
        token("carol", "reader"),
        token("bot", "team"),
    ];
    config
}

/// Hermes' HTTP endpoint on the engine's bus (its memory-extractor is the memory service).
pub async fn start_http(engine: &Engine) -> HttpServer {
    let deps = ServerDeps::from_config(engine.bus.clone(), &engine.config);
    http::start("127.0.0.1:0", deps, &engine.config.mcp.server)
        .await
        .unwrap()
}

pub async fn client_as(server: &HttpServer, user: Option<&str>) -> Result<RmcpClient, McpError> {
    let mut config = McpServerConfig {
        name: "hermes".into(),
        url: Some(server.url()),
        timeout_secs: 15,
        ..Default::default()
    };
    if let Some(user) = user {
        config
            .headers
            .insert("Authorization".into(), format!("Bearer {user}-secret"));
    }
    RmcpClient::connect_http(&config, &server.url()).await
}

async fn call(client: &RmcpClient, tool: &str, arguments: Value) -> Result<Value, String> {
    match client.call_tool(tool, arguments, WAIT).await {
        Ok(result) if result.is_error => Err(result.text),
        Ok(result) => Ok(result.structured.unwrap_or(Value::Null)),
        Err(error) => Err(error.to_string()),
    }
}

async fn write_directly(bus: &dyn Bus, user: &str, content: &str) {
    let request = Envelope::request(MemoryWriteRequest {
        user: user.into(),
        namespace: "default".into(),
        update: MemoryUpdate {
            op: UpdateOp::Add,
            kind: MemoryKind::Fact,
            key: "secret_plan".into(),
            content: content.into(),
            importance: 0.9,
            expiry_days: None,
            topics: vec![],
        },
        source: "test".into(),
    });
    rpc::request(bus, request.clone(), WAIT).await.unwrap();
}

/// `user`'s live memories, asked of the memory service on `hermes.memory.list`.
async fn list_directly(bus: &dyn Bus, user: &str) -> Vec<Memory> {
    let request = Envelope::request(MemoryListRequest {
        user: user.into(),
        namespace: None,
        id: None,
        ..MemoryListRequest::default()
    });
    rpc::request(bus, request, WAIT).await.unwrap().body.records
}

/// Send raw HTTP to the server and return the status line.
fn raw_status(addr: std::net::SocketAddr, host: &str, extra_headers: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn unauthenticated_or_unknown_token_is_refused_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let error = client_as(&server, None)
            .await
            .expect_err("refused without a token");
        assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
        let addr = server.addr;
        let statuses = tokio::task::spawn_blocking(move || {
            let none = raw_status(addr, "127.0.0.1", "");
            let bad = raw_status(addr, "127.0.0.1", "Authorization: Bearer guessed\r\n");
            (none, bad)
        })
        .await
        .unwrap();
        assert!(statuses.0.contains("401"), "{statuses:?}");
        assert!(statuses.1.contains("401"), "{statuses:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let records = audit(engine.bus.as_ref(), 20).await.records;
        let refusals: Vec<_> = records
            .iter()
            .filter(|r| r.method == "auth" && r.status == "denied")
            .collect();
        assert!(refusals.len() >= 3, "{records:?}");
        assert!(
            records
                .iter()
                .all(|r| !r.error.clone().unwrap_or_default().contains("guessed")),
            "a token reached the audit"
        );
    });
}

#[test]
fn foreign_host_header_is_refused_as_dns_rebinding() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let addr = server.addr;
        let (evil, good, origin) = tokio::task::spawn_blocking(move || {
            let auth = "Authorization: Bearer alice-secret\r\n";
            let evil = raw_status(addr, "evil.example", auth);
            let good = raw_status(addr, &format!("127.0.0.1:{}", addr.port()), auth);
            let origin = raw_status(
                addr,
                "127.0.0.1",
                &format!("{auth}Origin: http://evil.example\r\n"),
            );
            (evil, good, origin)
        })
        .await
        .unwrap();
        assert!(evil.contains("403"), "{evil}");
        assert!(origin.contains("403"), "{origin}");
        assert!(good.contains("200"), "{good}");
    });
}

#[test]
fn own_memories_are_written_searched_read_as_resources_prompted_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let alice = client_as(&server, Some("alice")).await.unwrap();
        let names: Vec<_> = alice
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(
            names,
            vec!["memory_write", "memory_search", "memory_forget"]
        );
        let written = call(
            &alice,
            "memory_write",
            json!({"content": "Alice prefers green tea", "key": "drink", "kind": "preference"}),
        )
        .await
        .unwrap();
        assert_eq!(written["changes"][0]["op"], json!("added"), "{written}");
        let found = call(&alice, "memory_search", json!({"query": "green tea"}))
            .await
            .unwrap();
        let hit = &found["memories"][0];
        assert_eq!(hit["content"], json!("Alice prefers green tea"), "{found}");
        let uri = hit["uri"].as_str().unwrap().to_owned();
        assert!(uri.starts_with("memory://alice/"));

        let resources = alice.list_resources().await.unwrap();
        assert_eq!(
            resources.iter().map(|r| r.uri.clone()).collect::<Vec<_>>(),
            vec![uri.clone()]
        );
        let contents = alice.read_resource(&uri, WAIT).await.unwrap();
        assert!(contents[0].text.contains("green tea"));
        let prompt = alice
            .get_prompt(
                "memory_qa",
                json!({"question": "what does she drink? green tea?"}),
                WAIT,
            )
            .await
            .unwrap();
        assert!(
            prompt.messages[0].text.contains("Alice prefers green tea"),
            "{prompt:?}"
        );

        let forgotten = call(&alice, "memory_forget", json!({"key": "drink"}))
            .await
            .unwrap();
        assert_eq!(
            forgotten["changes"][0]["op"],
            json!("deleted"),
            "{forgotten}"
        );
        let after = call(&alice, "memory_search", json!({"query": "green tea"}))
            .await
            .unwrap();
        assert_eq!(after["memories"], json!([]));
        let records = audit(engine.bus.as_ref(), 20).await.records;
        assert!(
            records.iter().any(|r| r.side == "server"
                && r.who == "alice"
                && r.method == "tools/call"
                && r.target == "memory_write"
                && r.status == "ok"),
            "{records:?}"
        );
        assert!(records
            .iter()
            .any(|r| r.method == "resources/read" && r.who == "alice"));
        alice.shutdown().await;
    });
}

#[test]
fn another_users_memories_are_refused_and_the_refusal_audited() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        write_directly(
            engine.bus.as_ref(),
            "bob",
            "Bob's surprise party is on Friday",
        )
        .await;
        let alice = client_as(&server, Some("alice")).await.unwrap();
        let search = call(
            &alice,
            "memory_search",
            json!({"query": "party", "user": "bob"}),
        )
        .await
        .unwrap_err();
        assert!(
            search.contains("forbidden") && search.contains("bob"),
            "{search}"
        );
        let write = call(
            &alice,
            "memory_write",
            json!({"content": "x", "user": "bob"}),
        )
        .await
        .unwrap_err();
        assert!(write.contains("forbidden"), "{write}");
        let bob_id = list_directly(engine.bus.as_ref(), "bob").await[0]
            .id
            .clone();
        let read = alice
            .read_resource(&format!("memory://bob/{bob_id}"), WAIT)
            .await
            .unwrap_err()
            .to_string();
        assert!(read.contains("forbidden"), "{read}");
        assert!(!read.contains("surprise"), "{read}");
        let own = call(&alice, "memory_search", json!({"query": "party"}))
            .await
            .unwrap();
        assert_eq!(
            own["memories"],
            json!([]),
            "bob's memory leaked into alice's search"
        );

        tokio::time::sleep(Duration::from_millis(200)).await;
        let records = audit(engine.bus.as_ref(), 20).await.records;
        let denied: Vec<_> = records
            .iter()
            .filter(|r| r.status == "denied" && r.who == "alice")
            .collect();
        assert_eq!(denied.len(), 3, "{records:?}");
        assert!(denied.iter().any(|r| r.method == "resources/read"));
    });
}

#[test]
fn role_without_the_tool_neither_sees_nor_calls_it() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let carol = client_as(&server, Some("carol")).await.unwrap();
        let names: Vec<_> = carol
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, vec!["memory_search"]);
        let refused = call(&carol, "memory_write", json!({"content": "x"}))
            .await
            .unwrap_err();
        assert!(
            refused.contains("forbidden") && refused.contains("memory_write"),
            "{refused}"
        );
        assert!(call(&carol, "memory_search", json!({"query": "x"}))
            .await
            .is_ok());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let records = audit(engine.bus.as_ref(), 20).await.records;
        assert!(
            records
                .iter()
                .any(|r| r.who == "carol" && r.target == "memory_write" && r.status == "denied"),
            "{records:?}"
        );
    });
}

#[test]
fn shared_namespace_grant_opens_that_namespace_for_any_user_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(secured_config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let bot = client_as(&server, Some("bot")).await.unwrap();
        call(
            &bot,
            "memory_write",
            json!({"content": "Team standup moved to 10:00", "user": "bob", "namespace": "team"}),
        )
        .await
        .unwrap();
        let found = call(
            &bot,
            "memory_search",
            json!({"query": "standup", "user": "bob", "namespace": "team"}),
        )
        .await
        .unwrap();
        assert_eq!(found["memories"][0]["namespace"], json!("team"), "{found}");
        let refused = call(
            &bot,
            "memory_search",
            json!({"query": "standup", "user": "bob"}),
        )
        .await
        .unwrap_err();
        assert!(refused.contains("forbidden"), "{refused}");
    });
}

#[tokio::test]
async fn hermes_own_server_over_stdio_answers_the_rmcp_client() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("hermes.toml");
    std::fs::write(&config_path, "[mcp]\nservers = []\n").unwrap();
    let config = McpServerConfig {
        name: "hermes-stdio".into(),
        command: env!("CARGO_BIN_EXE_hermes").into(),
        args: [
            "--config",
            config_path.to_str().unwrap(),
            "mcp",
            "serve",
            "--stdio",
            "--user",
            "dana",
            "--data-dir",
            dir.path().join("db").to_str().unwrap(),
        ]
        .map(str::to_owned)
        .to_vec(),
        timeout_secs: 30,
        ..Default::default()
    };
    let client = Arc::new(
        RmcpClient::connect(&config, std::path::Path::new("/nonexistent"))
            .await
            .unwrap(),
    );
    let names: Vec<_> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        vec!["memory_write", "memory_search", "memory_forget"]
    );
    let found = client
        .call_tool("memory_search", json!({"query": "anything"}), WAIT)
        .await
        .unwrap();
    assert!(!found.is_error, "{found:?}");
    assert_eq!(found.structured, Some(json!({"memories": []})));
    let prompts = client.list_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "memory_qa");
    assert!(client.list_resources().await.unwrap().is_empty());
    client.shutdown().await;
}

#[test]
fn exposed_hermes_tools_are_offered_and_run_for_the_principal() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = secured_config(dir.path());
    config.mcp.server.expose_tools = vec!["add".into()];
    with_engine(config, |engine| async move {
        let server = start_http(&engine).await;
        let alice = client_as(&server, Some("alice")).await.unwrap();
        let tools = alice.list_tools().await.unwrap();
        let add = tools
            .iter()
            .find(|t| t.name == "add")
            .expect("add is exposed");
        assert!(add.input_schema["properties"].get("a").is_some());
        let sum = call(&alice, "add", json!({"a": 2, "b": 40})).await.unwrap();
        assert!(sum.to_string().contains("42"), "{sum}");
        let carol = client_as(&server, Some("carol")).await.unwrap();
        assert!(call(&carol, "add", json!({"a": 1, "b": 1}))
            .await
            .unwrap_err()
            .contains("forbidden"));
    });
}
