//! Hermes serving a mounted server under its own names (`[mcp.server] passthrough`), against
//! the real `mcp-server-everything`: a tool's content blocks (an image among them) and a
//! resource's contents arrive exactly as the server sent them, a role that may not call the
//! tool is refused, and the call and the read are audited for the caller; the server's
//! progress during a call reaches the caller under the caller's own progress token; and a
//! call a mounted tasks server answers with a task is followed through Hermes to its result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientRequest, ProgressNotificationParam, ReadResourceRequestParams,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};

use super::mcp_agents::{config, tasks_client};
use super::mcp_bridge::audit;
use super::mcp_server::start_http;
use crate::common::engine::with_engine;
use crate::common::mcp_servers::{everything_server_config, everything_server_path};
use crate::common::task_mcp::TaskServer;

const TOOL: &str = "get-tiny-image";

async fn through_hermes<H: ClientHandler>(
    url: &str,
    user: &str,
    handler: H,
) -> RunningService<RoleClient, H> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .auth_header(format!("{user}-secret")),
    );
    handler.serve(transport).await.unwrap()
}

/// A client that keeps the progress notifications it hears.
#[derive(Clone, Default)]
struct Progress {
    heard: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.heard.lock().unwrap().push(params);
    }
}

/// The config of these tests: `mcp-server-everything` mounted and passed through, the
/// `caller` role (alice) allowed `tools`, the `reader` role (carol) not.
fn passthrough_config(dir: &std::path::Path, tools: &[&str]) -> hermes::config::Config {
    let mut config = config(dir);
    config
        .mcp
        .servers
        .push(everything_server_config("everything"));
    config.mcp.server.passthrough = Some("everything".into());
    if let Some(caller) = config.mcp.server.roles.get_mut("caller") {
        caller.tools.extend(tools.iter().map(|t| (*t).to_owned()));
    }
    config
}

async fn directly() -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(everything_server_path());
    command.arg("stdio");
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

#[test]
fn a_passthrough_server_is_served_unchanged_to_an_allowed_role_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        passthrough_config(dir.path(), &[TOOL]),
        |engine| async move {
            let server = start_http(&engine).await;
            let alice = through_hermes(&server.url(), "alice", ()).await;
            let reference = directly().await;

            let tools = alice.list_all_tools().await.unwrap();
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            assert!(
                names.contains(&TOOL) && names.contains(&"assistant"),
                "the server's tools are listed under their own names beside Hermes' own: {names:?}"
            );
            assert!(
                !names.contains(&"echo"),
                "a tool the caller's roles do not list is not offered: {names:?}"
            );

            let passed = alice
                .call_tool(CallToolRequestParams::new(TOOL))
                .await
                .unwrap();
            let original = reference
                .call_tool(CallToolRequestParams::new(TOOL))
                .await
                .unwrap();
            assert!(
                passed
                    .content
                    .iter()
                    .any(|block| block.as_image().is_some()),
                "{passed:?}"
            );
            assert_eq!(
                passed.content, original.content,
                "content blocks pass unchanged"
            );
            assert_eq!(passed.is_error, original.is_error);

            let resources = reference.list_all_resources().await.unwrap();
            let resource = resources
                .iter()
                .find(|r| r.uri.contains("static"))
                .or(resources.first())
                .expect("mcp-server-everything offers resources");
            let uri = resource.uri.clone();
            let listed = alice.list_all_resources().await.unwrap();
            assert!(listed.iter().any(|r| r.uri == uri), "{listed:?}");
            let read = alice
                .read_resource(ReadResourceRequestParams::new(uri.clone()))
                .await
                .unwrap();
            let read_directly = reference
                .read_resource(ReadResourceRequestParams::new(uri.clone()))
                .await
                .unwrap();
            assert_eq!(read.contents, read_directly.contents);

            let carol = through_hermes(&server.url(), "carol", ()).await;
            let refused = carol.call_tool(CallToolRequestParams::new(TOOL)).await;
            let refusal = refused.expect_err("carol's role does not list the tool");
            assert!(refusal.to_string().contains("forbidden"), "{refusal}");

            tokio::time::sleep(Duration::from_millis(300)).await;
            let records = audit(engine.bus.as_ref(), 50).await.records;
            let has = |who: &str, method: &str, target: &str, status: &str| {
                records.iter().any(|r| {
                    r.side == "server"
                        && r.who == who
                        && r.method == method
                        && r.target == target
                        && r.status == status
                })
            };
            assert!(has("alice", "tools/call", TOOL, "ok"), "{records:?}");
            assert!(has("alice", "resources/read", &uri, "ok"), "{records:?}");
            assert!(has("carol", "tools/call", TOOL, "denied"), "{records:?}");

            alice.cancel().await.unwrap();
            carol.cancel().await.unwrap();
            reference.cancel().await.unwrap();
        },
    );
}

#[test]
fn the_servers_progress_during_a_call_reaches_the_caller_under_its_own_token() {
    const LONG: &str = "trigger-long-running-operation";
    let dir = tempfile::tempdir().unwrap();
    with_engine(
        passthrough_config(dir.path(), &[LONG]),
        |engine| async move {
            let server = start_http(&engine).await;
            let progress = Progress::default();
            let alice = through_hermes(&server.url(), "alice", progress.clone()).await;
            let arguments = serde_json::json!({"duration": 1, "steps": 3});
            let call = CallToolRequestParams::new(LONG)
                .with_arguments(arguments.as_object().cloned().unwrap_or_default());
            let handle = alice
                .peer()
                .send_request_with_option(
                    ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(call)),
                    PeerRequestOptions::no_options(),
                )
                .await
                .unwrap();
            let token = handle.progress_token.clone();
            let answer = handle.await_response().await.unwrap();
            assert!(
                matches!(&answer, ServerResult::CallToolResult(r) if r.is_error != Some(true)),
                "{answer:?}"
            );
            let heard = progress.heard.lock().unwrap().clone();
            assert!(
                heard.len() >= 3,
                "one progress notification per step: {heard:?}"
            );
            assert!(heard.iter().all(|p| p.progress_token == token), "{heard:?}");
            assert_eq!(heard.last().map(|p| p.progress), Some(3.0), "{heard:?}");
            alice.cancel().await.unwrap();
        },
    );
}

#[test]
fn a_task_the_mounted_server_answers_a_call_with_is_followed_through_hermes() {
    use rmcp::model::{CallToolResponse, GetTaskParams, TaskPayload};
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tasks = TaskServer::new(Duration::from_millis(500));
    let url = server_runtime.block_on(TaskServer::serve(&tasks));
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.mcp.servers.push(hermes::config::McpServerConfig {
        name: "slow".into(),
        url: Some(url),
        timeout_secs: 15,
        ..Default::default()
    });
    config.mcp.server.passthrough = Some("slow".into());
    if let Some(caller) = config.mcp.server.roles.get_mut("caller") {
        caller.tools.push("build_report".into());
    }
    with_engine(config, |engine| async move {
        let server = start_http(&engine).await;
        let alice = tasks_client(&server.url(), "alice").await;
        let arguments = serde_json::json!({"topic": "tides"});
        let call = CallToolRequestParams::new("build_report")
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let CallToolResponse::Task(created) = alice.peer().call_tool_once(call).await.unwrap()
        else {
            panic!("a client that takes tasks gets the server's task");
        };
        let id = created.task.task_id.clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let result = loop {
            let got = alice
                .peer()
                .get_task(GetTaskParams::new(&id))
                .await
                .unwrap();
            if let TaskPayload::Completed { result } = got.task.payload {
                break result;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the task never completed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            result["content"][0]["text"], "report on tides: 3 findings",
            "{result:?}"
        );
        assert_eq!(tasks.started(), 1, "the work ran once");
        alice.cancel().await.unwrap();
    });
    drop(server_runtime);
}
