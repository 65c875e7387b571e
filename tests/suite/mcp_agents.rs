//! Hermes agents as MCP tools (`[mcp.server] expose_agents`) and Hermes as a gateway for its
//! mounted servers' tools (`expose_tools = ["catalog__*"]`), over Streamable HTTP with bearer
//! tokens (the gateway's tests are in [`super::mcp_gateway`]): the official MCP Python SDK calls an agent and gets its answer, and — with the
//! tasks extension written on the SDK's extension interface — follows an agent's task to its
//! answer and cancels one; rmcp clients that negotiated the tasks extension (Hermes' own, and
//! rmcp's for `tasks/update`) hear `notifications/tasks`, see a confirmation the turn waits for
//! as `input_required`, answer it, and cancel; a mounted tool is served to an
//! allowed role only, audited per user.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes::config::{Config, McpRoleConfig, McpTokenConfig, ToolDefineConfig};
use hermes::mcp::server::auth::sha256_hex;
use hermes::mcp::tasks::follow;
use hermes::mcp::{McpCallOutcome, McpClient, McpTaskState, McpTaskStatus};
use hermes::tools::definition::{ToolEffect, ToolRisk};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, DetailedTask,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
    TaskStatusNotificationParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::mcp_bridge::audit;
use super::mcp_server::{client_as, start_http};
use crate::common::engine::{test_config, with_engine};
use crate::common::hermes_proc::{free_port, hermes, output_text, Serve};
use crate::common::scenario::*;

const WAIT: Duration = Duration::from_secs(15);

/// "sum" adds; "report" runs a 30-second async job; "for real" calls a high-risk tool.
fn script() -> Scenario {
    Scenario::new("mcp-agents")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&["report"]).calls("generate_report", json!({"topic": "mcp", "seconds": 30})))
        .rule(after_tool("generate_report").says("The report is ready."))
        .rule(on_user(&["for real"]).calls("current_time", json!({})))
        .rule(after_tool("current_time").says("Done for real."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

fn role(tools: &[&str]) -> McpRoleConfig {
    McpRoleConfig {
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        namespaces: vec![],
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

/// `assistant` exposed as a tool and the catalog's tools through the gateway; alice's and
/// dave's role may call both (by pattern), carol's only `memory_search`.
pub fn config(dir: &Path) -> Config {
    let mut config = test_config(dir, &script());
    config.tools.define.push(ToolDefineConfig {
        name: "current_time".into(),
        risk: Some(ToolRisk::High),
        ..Default::default()
    });
    // A write: a retried call with one idempotency key must not start a second job.
    config.tools.define.push(ToolDefineConfig {
        name: "generate_report".into(),
        effect: Some(ToolEffect::Write),
        ..Default::default()
    });
    let host = &mut config.mcp.server;
    host.expose_agents = vec!["assistant".into()];
    host.expose_tools = vec!["catalog__*".into(), "generate_report".into()];
    host.roles = [
        (
            "caller".to_owned(),
            role(&["assistant", "catalog__*", "generate_report"]),
        ),
        ("reader".to_owned(), role(&["memory_search"])),
    ]
    .into_iter()
    .collect();
    host.tokens = vec![
        token("alice", "caller"),
        token("dave", "caller"),
        token("carol", "reader"),
    ];
    config
}

async fn task_of(client: &dyn McpClient, arguments: Value) -> McpTaskState {
    match client
        .call_tool_or_task("assistant", arguments, None, WAIT)
        .await
        .unwrap()
    {
        McpCallOutcome::Task(task) => task,
        other => panic!("a tasks client got no task: {other:?}"),
    }
}

/// Ask `tasks/get` until the task shows `status` (or panic after 20 s).
async fn until_status(
    client: &dyn McpClient,
    task_id: &str,
    status: McpTaskStatus,
) -> McpTaskState {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = client.get_task(task_id, WAIT).await.unwrap();
        if state.status == status {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "task {task_id} never became {status:?}: {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_tasks_client_follows_an_agent_task_to_its_answer_and_cancels_a_waiting_one() {
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
        assert!(tools.contains(&"assistant".to_owned()), "{tools:?}");

        // The call answers at once with a task; tasks/get follows it.
        let task = task_of(&alice, json!({"task": "what is the sum?"})).await;
        assert!(task.task_id.starts_with("assistant."), "{task:?}");
        assert_eq!(task.status, McpTaskStatus::Working);
        let done = follow(
            &alice,
            task.clone(),
            Instant::now() + Duration::from_secs(60),
            WAIT,
        )
        .await
        .unwrap();
        assert_eq!(done.status, McpTaskStatus::Completed, "{done:?}");
        let result = done
            .result
            .expect("a completed task carries the call's result");
        assert!(!result.is_error, "{result:?}");
        assert_eq!(result.text, "The sum is 42.");

        // Another user cannot see it.
        let carol = client_as(&server, Some("carol")).await.unwrap();
        assert!(carol.get_task(&task.task_id, WAIT).await.is_err());

        // A turn waiting for a confirmation is `input_required`, with the question.
        let risky = task_of(&alice, json!({"task": "do it for real"})).await;
        let waiting = until_status(&alice, &risky.task_id, McpTaskStatus::InputRequired).await;
        assert!(
            waiting
                .message
                .clone()
                .unwrap_or_default()
                .contains("current_time"),
            "{waiting:?}"
        );
        // Cancelling it cancels the turn.
        alice.cancel_task(&risky.task_id, WAIT).await.unwrap();
        until_status(&alice, &risky.task_id, McpTaskStatus::Cancelled).await;

        // A turn working on a 30-second job is cancelled the same way, long before it ends.
        let report = task_of(&alice, json!({"task": "write the report"})).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        alice.cancel_task(&report.task_id, WAIT).await.unwrap();
        let ended = until_status(&alice, &report.task_id, McpTaskStatus::Cancelled).await;
        assert!(ended.result.is_none(), "{ended:?}");
        alice.shutdown().await;
        carol.shutdown().await;
    });
}

/// Run the MCP Python SDK's client against `url` as `token`, calling `tool`.
fn python_sdk_call(url: &str, token: &str, tool: &str, arguments: Value) -> Value {
    python_sdk(
        "mcp_sdk_client.py",
        &[url, token, tool, &arguments.to_string()],
    )
}

/// Run `tests/common/<script>` (an MCP Python SDK client) with `args`; its JSON output.
fn python_sdk(script: &str, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common")
        .join(script);
    let python = crate::common::a2a_sdk::python();
    let out = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "the MCP Python SDK client failed (is `mcp` in .tools/venv? run \
         scripts/setup-test-deps.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_python_sdk_calls_an_agent_tool_and_gets_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let url = server.url();
        let answer = tokio::task::spawn_blocking(move || {
            python_sdk_call(
                &url,
                "alice-secret",
                "assistant",
                json!({"task": "what is the sum?"}),
            )
        })
        .await
        .unwrap();
        // The SDK speaks the 2026-07-28 revision (no handshake); the rmcp clients of the
        // other tests the 2025-11-25 one: both are served.
        assert_eq!(answer["protocol"], "2026-07-28", "{answer}");
        assert_eq!(answer["is_error"], false, "{answer}");
        assert_eq!(answer["text"], "The sum is 42.", "{answer}");
        let session = answer["structured"]["session"].as_str().unwrap().to_owned();
        assert!(
            answer["tools"]
                .as_array()
                .unwrap()
                .contains(&json!("assistant")),
            "{answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let records = audit(engine.bus.as_ref(), 20).await.records;
        assert!(
            records.iter().any(|r| r.who == "alice"
                && r.method == "tools/call"
                && r.target.starts_with(&format!("assistant.{session}."))
                && r.status == "ok"),
            "{records:?}"
        );
    });
}

#[test]
fn the_python_sdk_with_the_tasks_extension_follows_an_agent_task_and_cancels_one() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let url = server.url();
        let run = move |task: &str, cancel: bool| {
            let url = url.clone();
            let arguments = json!({ "task": task }).to_string();
            tokio::task::spawn_blocking(move || {
                let mut args = vec![url.as_str(), "alice-secret", "assistant", &arguments];
                if cancel {
                    args.push("cancel");
                }
                python_sdk("mcp_sdk_tasks.py", &args)
            })
        };
        let done = run("what is the sum?", false).await.unwrap();
        assert!(
            done["task_id"].as_str().unwrap().starts_with("assistant."),
            "the call was answered with a task: {done}"
        );
        assert_eq!(
            done["statuses"].as_array().unwrap().last().unwrap(),
            "completed",
            "{done}"
        );
        assert_eq!(done["is_error"], false, "{done}");
        assert_eq!(done["text"], "The sum is 42.", "{done}");

        let cancelled = run("write the report", true).await.unwrap();
        assert_eq!(
            cancelled["statuses"].as_array().unwrap().last().unwrap(),
            "cancelled",
            "{cancelled}"
        );
        assert_eq!(cancelled["is_error"], true, "{cancelled}");
    });
}

#[test]
fn an_agent_call_continues_the_callers_own_session_and_refuses_another_users() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let alice = client_as(&server, Some("alice")).await.unwrap();
        let first = alice
            .call_tool("assistant", json!({"task": "what is the sum?"}), WAIT)
            .await
            .unwrap();
        let session = first.structured.clone().unwrap()["session"]
            .as_str()
            .unwrap()
            .to_owned();
        let again = alice
            .call_tool(
                "assistant",
                json!({"task": "and the sum again?", "session": session}),
                WAIT,
            )
            .await
            .unwrap();
        assert!(!again.is_error, "{again:?}");
        assert_eq!(again.structured.unwrap()["session"], json!(session));

        let dave = client_as(&server, Some("dave")).await.unwrap();
        let refused = dave
            .call_tool(
                "assistant",
                json!({"task": "what is the sum?", "session": session}),
                WAIT,
            )
            .await
            .unwrap();
        assert!(refused.is_error, "{refused:?}");
        assert!(refused.text.contains("another user"), "{refused:?}");
        alice.shutdown().await;
        dave.shutdown().await;
    });
}

/// A raw rmcp client that negotiates the tasks extension, as `user`.
pub async fn tasks_client(url: &str, user: &str) -> RunningService<RoleClient, Listener> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .auth_header(format!("{user}-secret")),
    );
    Listener::default().serve(transport).await.unwrap()
}

/// The handler of [`tasks_client`]: a session (2025-11-25 handshake) that declares the tasks
/// extension and keeps every task state the server announces (`notifications/tasks` reach
/// session clients; the 2026-07-28 revision has no stream for them yet).
#[derive(Clone, Default)]
pub struct Listener {
    heard: Arc<Mutex<Vec<DetailedTask>>>,
}

impl Listener {
    fn statuses_of(&self, task_id: &str) -> Vec<TaskStatus> {
        let heard = self.heard.lock().unwrap();
        heard
            .iter()
            .filter(|t| t.task.task_id == task_id)
            .map(|t| t.status())
            .collect()
    }
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-test", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _context: NotificationContext<RoleClient>,
    ) {
        self.heard.lock().unwrap().push(params.task);
    }
}

/// `tasks/get` until the task has `status` (or panic after 20 s).
async fn until_wire_status(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    task_id: &str,
    status: TaskStatus,
) -> DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let task = peer
            .get_task(GetTaskParams::new(task_id))
            .await
            .unwrap()
            .task;
        if task.status() == status {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "task {task_id} never became {status:?}: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_confirmation_a_task_waits_for_is_answered_with_tasks_update_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path()), |engine| async move {
        let server = start_http(&engine).await;
        let client = tasks_client(&server.url(), "alice").await;
        let peer = client.peer().clone();
        let arguments = json!({"task": "do it for real"});
        let call = CallToolRequestParams::new("assistant")
            .with_arguments(arguments.as_object().unwrap().clone());
        let CallToolResponse::Task(created) = peer.call_tool_once(call).await.unwrap() else {
            panic!("a client with the tasks extension gets a task");
        };
        let id = created.task.task_id;
        let waiting = until_wire_status(&peer, &id, TaskStatus::InputRequired).await;
        let TaskPayload::InputRequired { input_requests } = waiting.payload else {
            panic!("an input_required task carries its input requests");
        };
        let key = input_requests
            .keys()
            .next()
            .expect("one confirmation")
            .clone();
        let wire = serde_json::to_value(&input_requests[&key]).unwrap();
        assert_eq!(wire["method"], "elicitation/create", "{wire}");
        assert!(
            wire["params"]["message"]
                .as_str()
                .unwrap()
                .contains("current_time"),
            "{wire}"
        );

        // The question is announced before it is answered (answered first, the announcement
        // would be stale and is rightly not sent).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !client
            .service()
            .statuses_of(&id)
            .contains(&TaskStatus::InputRequired)
        {
            assert!(
                Instant::now() < deadline,
                "the question was never announced"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let answer = json!({"action": "accept", "content": {"approve": true}});
        peer.update_task(UpdateTaskParams::new(
            &id,
            [(key, answer)].into_iter().collect(),
        ))
        .await
        .unwrap();
        let done = until_wire_status(&peer, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = done.payload else {
            panic!("a completed task carries its result");
        };
        assert_eq!(result["content"][0]["text"], "Done for real.", "{result:?}");
        // The session client heard each state announced, the question and the end included.
        let deadline = Instant::now() + Duration::from_secs(5);
        let announced = loop {
            let announced = client.service().statuses_of(&id);
            if announced.contains(&TaskStatus::Completed) || Instant::now() > deadline {
                break announced;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            announced.contains(&TaskStatus::InputRequired)
                && announced.contains(&TaskStatus::Completed),
            "notifications/tasks announced {announced:?}"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn hermes_serve_offers_a_configured_agent_that_hermes_mcp_probe_calls_as_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_serve_config(dir.path(), "agents", &script());
    let addr = format!("127.0.0.1:{}", free_port());
    let digest = sha256_hex("alice-secret");
    let extra = format!(
        r#"
[agents.assistant]
description = "Adds numbers"
tools = ["add"]

[mcp.server]
http_listen = "{addr}"
expose_agents = ["assistant"]

[mcp.server.roles.ide]
tools = ["assistant"]

[[mcp.server.tokens]]
user = "alice"
roles = ["ide"]
token_sha256 = "{digest}"
"#
    );
    let text = std::fs::read_to_string(&path).unwrap() + &extra;
    std::fs::write(&path, text).unwrap();
    let _serve = Serve::start(&path, "embedded", "all");
    let out = hermes()
        .args([
            "mcp",
            "probe",
            "--token",
            "alice-secret",
            "--call",
            "assistant",
        ])
        .args(["--args", r#"{"task": "what is the sum?"}"#])
        .arg(format!("http://{addr}/mcp"))
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("tools: assistant"), "{text}");
    assert!(text.contains("assistant: The sum is 42."), "{text}");
}
