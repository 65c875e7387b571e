//! Hermes serving a mounted server under its own names (`[mcp.server] passthrough`), against
//! the real `mcp-server-everything`: a tool's content blocks (an image among them) and a
//! resource's contents arrive exactly as the server sent them, a role that may not call the
//! tool is refused, and the call and the read are audited for the caller.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

use super::mcp_agents::config;
use super::mcp_bridge::audit;
use super::mcp_server::start_http;
use crate::common::engine::with_engine;
use crate::common::mcp_servers::{everything_server_config, everything_server_path};

const TOOL: &str = "get-tiny-image";

async fn through_hermes(url: &str, user: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .auth_header(format!("{user}-secret")),
    );
    ().serve(transport).await.unwrap()
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
    let mut config = config(dir.path());
    config
        .mcp
        .servers
        .push(everything_server_config("everything"));
    config.mcp.server.passthrough = Some("everything".into());
    if let Some(caller) = config.mcp.server.roles.get_mut("caller") {
        caller.tools.push(TOOL.into());
    }
    with_engine(config, |engine| async move {
        let server = start_http(&engine).await;
        let alice = through_hermes(&server.url(), "alice").await;
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

        let carol = through_hermes(&server.url(), "carol").await;
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
    });
}
