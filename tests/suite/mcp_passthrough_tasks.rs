//! Tasks (extension `io.modelcontextprotocol/tasks`) of a server Hermes serves through
//! `[mcp.server] passthrough`: a call the mounted server answers with a task is followed
//! through Hermes to its result; a task's questions (`input_required`) reach the caller and
//! the answers (`tasks/update`) reach the server; `tasks/cancel` cancels it there; a task that
//! fails keeps its JSON-RPC error; a caller without the extension gets the server's `-32021`;
//! task changes are audited for the caller.

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, DetailedTask, ErrorCode,
    GetTaskParams, InputResponses, TaskPayload, TaskStatus, UpdateTaskParams, TASKS_EXTENSION_ID,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};

use super::mcp_agents::{config, tasks_client, Listener};
use super::mcp_bridge::audit;
use super::mcp_server::start_http;
use crate::common::engine::with_engine;
use crate::common::task_mcp::TaskServer;
use crate::common::tasks_fixture;

/// The fixture's tools the `caller` role (alice) may call.
const FIXTURE_TOOLS: [&str; 4] = [
    "confirm_delete",
    "slow_compute",
    "protocol_error_job",
    "failing_job",
];

fn arguments(value: serde_json::Value) -> rmcp::model::JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

/// Start a task with `call` and return its id.
async fn start(
    client: &RunningService<RoleClient, Listener>,
    call: CallToolRequestParams,
) -> String {
    match client.peer().call_tool_once(call).await.unwrap() {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a client that takes tasks gets the server's task: {other:?}"),
    }
}

/// Poll `tasks/get` through Hermes until the task reaches `status` (or ends).
async fn until(
    client: &RunningService<RoleClient, Listener>,
    id: &str,
    status: TaskStatus,
) -> DetailedTask {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let task = client
            .peer()
            .get_task(GetTaskParams::new(id))
            .await
            .unwrap()
            .task;
        if task.status() == status || task.status().is_terminal() {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} never reached {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_task_the_mounted_server_answers_a_call_with_is_followed_through_hermes() {
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
        let call = CallToolRequestParams::new("build_report")
            .with_arguments(arguments(serde_json::json!({"topic": "tides"})));
        let id = start(&alice, call).await;
        let done = until(&alice, &id, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = done.payload else {
            panic!("the task completes: {done:?}");
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

#[test]
fn a_mounted_tasks_questions_answers_cancel_and_failure_pass_through_hermes_and_are_audited() {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = server_runtime.block_on(tasks_fixture::serve());
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.mcp.servers.push(hermes::config::McpServerConfig {
        name: "jobs".into(),
        url: Some(url),
        timeout_secs: 15,
        ..Default::default()
    });
    config.mcp.server.passthrough = Some("jobs".into());
    if let Some(caller) = config.mcp.server.roles.get_mut("caller") {
        caller
            .tools
            .extend(FIXTURE_TOOLS.iter().map(|t| (*t).to_owned()));
    }
    with_engine(config, |engine| async move {
        let server = start_http(&engine).await;
        let alice = tasks_client(&server.url(), "alice").await;

        // A question the task asks reaches alice; her answer reaches the server.
        let call = CallToolRequestParams::new("confirm_delete")
            .with_arguments(arguments(serde_json::json!({"filename": "notes.txt"})));
        let asking = start(&alice, call).await;
        let parked = until(&alice, &asking, TaskStatus::InputRequired).await;
        let TaskPayload::InputRequired { input_requests } = &parked.payload else {
            panic!("the task waits for an answer: {parked:?}");
        };
        let question = serde_json::to_value(&input_requests["confirm"]).unwrap();
        assert_eq!(question["method"], "elicitation/create", "{question}");
        let mut answers = InputResponses::new();
        answers.insert(
            "confirm".into(),
            serde_json::json!({"action": "accept", "content": {"confirm": true}}),
        );
        alice
            .peer()
            .update_task(UpdateTaskParams::new(&asking, answers))
            .await
            .unwrap();
        let answered = until(&alice, &asking, TaskStatus::Completed).await;
        let TaskPayload::Completed { result } = answered.payload else {
            panic!("the answered task completes: {answered:?}");
        };
        assert_eq!(
            result["content"][0]["text"], "deleted notes.txt",
            "{result:?}"
        );

        // Cancelling through Hermes cancels the task on the server.
        let call = CallToolRequestParams::new("slow_compute")
            .with_arguments(arguments(serde_json::json!({"seconds": 60})));
        let long = start(&alice, call).await;
        alice
            .peer()
            .cancel_task(CancelTaskParams::new(&long))
            .await
            .unwrap();
        let cancelled = until(&alice, &long, TaskStatus::Cancelled).await;
        assert_eq!(cancelled.status(), TaskStatus::Cancelled, "{cancelled:?}");

        // A task that fails keeps the server's JSON-RPC error and carries no result.
        let broken = start(&alice, CallToolRequestParams::new("protocol_error_job")).await;
        let failed = until(&alice, &broken, TaskStatus::Failed).await;
        let TaskPayload::Failed { error } = failed.payload else {
            panic!("the task fails: {failed:?}");
        };
        assert_eq!(error["code"], -32603, "{error:?}");

        // A caller without the extension gets the server's refusal, naming the extension.
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header("dave-secret"),
        );
        let dave = ().serve(transport).await.unwrap();
        let refused = dave
            .peer()
            .call_tool_once(CallToolRequestParams::new("failing_job"))
            .await;
        let Err(ServiceError::McpError(refusal)) = refused else {
            panic!("a task-only tool is refused to a client without tasks: {refused:?}");
        };
        assert_eq!(refusal.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        let data = refusal.data.unwrap_or_default();
        assert!(
            data["requiredCapabilities"]["extensions"]
                .get(TASKS_EXTENSION_ID)
                .is_some(),
            "{data}"
        );

        tokio::time::sleep(Duration::from_millis(300)).await;
        let records = audit(engine.bus.as_ref(), 50).await.records;
        let has = |method: &str, target: &str| {
            records.iter().any(|r| {
                r.side == "server"
                    && r.who == "alice"
                    && r.method == method
                    && r.target == target
                    && r.status == "ok"
            })
        };
        assert!(has("tasks/update", &asking), "{records:?}");
        assert!(has("tasks/cancel", &long), "{records:?}");
        assert!(has("tools/call", "confirm_delete"), "{records:?}");

        alice.cancel().await.unwrap();
        dave.cancel().await.unwrap();
    });
    drop(server_runtime);
}
