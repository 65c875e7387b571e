//! Hermes as a gateway for its mounted MCP servers (`[mcp.server] expose_tools =
//! ["catalog__*"]`): a mounted server's tool is listed and served to a role that may call it,
//! refused (and audited) for one that may not, and a retried `write` call with one
//! idempotency key runs once, keys kept per user.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, MetaObject, RequestMetaObject};
use serde_json::json;

use super::mcp_agents::{config, tasks_client};
use super::mcp_bridge::audit;
use super::mcp_server::{client_as, start_http};
use crate::common::engine::with_engine;
use hermes::mcp::McpClient;

const WAIT: Duration = Duration::from_secs(15);

#[test]
fn a_mounted_servers_tool_is_served_through_the_gateway_to_an_allowed_role_only() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let alice = client_as(&server, Some("alice")).await.unwrap();
        let tools: Vec<String> = alice
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(
            tools.contains(&"catalog__search_products".to_owned())
                && tools.contains(&"catalog__get_product".to_owned()),
            "{tools:?}"
        );
        let found = alice
            .call_tool("catalog__search_products", json!({"brand": "Sony"}), WAIT)
            .await
            .unwrap();
        assert!(!found.is_error, "{found:?}");
        assert!(found.text.contains("SONY"), "{found:?}");

        let carol = client_as(&server, Some("carol")).await.unwrap();
        let listed: Vec<String> = carol
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(
            !listed.iter().any(|t| t.starts_with("catalog__")),
            "{listed:?}"
        );
        let refused = carol
            .call_tool("catalog__search_products", json!({"brand": "Sony"}), WAIT)
            .await;
        let refused = match refused {
            Ok(result) => {
                assert!(result.is_error, "{result:?}");
                result.text
            }
            Err(error) => error.to_string(),
        };
        assert!(refused.contains("forbidden"), "{refused}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let records = audit(engine.bus.as_ref(), 30).await.records;
        assert!(
            records.iter().any(|r| r.side == "server"
                && r.who == "alice"
                && r.target == "catalog__search_products"
                && r.status == "ok"),
            "{records:?}"
        );
        assert!(
            records.iter().any(|r| r.who == "carol"
                && r.target == "catalog__search_products"
                && r.status == "denied"),
            "{records:?}"
        );
        alice.shutdown().await;
        carol.shutdown().await;
    });
}

#[test]
fn a_retried_gateway_write_with_one_idempotency_key_runs_once_per_user() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let job_of = |client: rmcp::Peer<rmcp::RoleClient>, key: Option<&'static str>| async move {
            let arguments = json!({"topic": "refunds", "seconds": 1});
            let mut call = CallToolRequestParams::new("generate_report")
                .with_arguments(arguments.as_object().unwrap().clone());
            if let Some(key) = key {
                let meta = json!({"io.hermes/idempotencyKey": key});
                call.meta = Some(RequestMetaObject(MetaObject(
                    meta.as_object().unwrap().clone(),
                )));
            }
            let CallToolResponse::Complete(result) = client.call_tool_once(call).await.unwrap()
            else {
                panic!("an exposed tool answers at once");
            };
            assert_ne!(result.is_error, Some(true), "{result:?}");
            result.structured_content.unwrap()["job_id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let alice = tasks_client(&server.url(), "alice").await;
        let dave = tasks_client(&server.url(), "dave").await;
        let first = job_of(alice.peer().clone(), Some("report-1")).await;
        let retried = job_of(alice.peer().clone(), Some("report-1")).await;
        assert_eq!(
            first, retried,
            "a retry with the same key replays the first job"
        );
        let other_key = job_of(alice.peer().clone(), Some("report-2")).await;
        assert_ne!(first, other_key);
        let no_key = job_of(alice.peer().clone(), None).await;
        assert_ne!(first, no_key);
        let other_user = job_of(dave.peer().clone(), Some("report-1")).await;
        assert_ne!(first, other_user, "keys are kept per user");
        alice.cancel().await.unwrap();
        dave.cancel().await.unwrap();
    });
}
