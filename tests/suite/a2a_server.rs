//! Hermes agents as A2A 1.0 servers, driven from outside by the official A2A Python SDK's
//! client (`a2a-sdk` 1.3.0) over both bindings, JSON-RPC and HTTP+JSON: the Agent Card, a
//! blocking send with a retried `messageId`, streaming, a non-blocking send followed by
//! `SubscribeToTask`, `ListTasks`, `CancelTask`, a high-risk call asking for input and
//! resumed by the client's "yes", push notifications to a local webhook, protocol errors,
//! and a task that outlives a restart of `hermes serve`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::a2a_sdk::{run, Binding, Running};
use crate::common::hermes_proc::{free_port, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

/// The token the tests' A2A client presents.
const TOKEN: &str = "a2a-test-token";

/// The scripted model: "sum" adds, "report" runs a 2-second async job, "for real" calls a
/// high-risk tool; anything else is answered "ok".
fn script() -> Scenario {
    Scenario::new("a2a")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&["report"]).calls("generate_report", json!({"topic": "a2a", "seconds": 2})))
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

/// A `hermes serve` config exposing `assistant` over A2A, callers authenticated by [`TOKEN`].
fn write_config(dir: &Path, name: &str) -> PathBuf {
    let path = write_serve_config(dir, name, &script());
    let digest = hermes::mcp::server::auth::sha256_hex(TOKEN);
    let extra = format!(
        r#"
[agents.assistant]
description = "Adds numbers and writes reports"
system_prompt = "You help."
max_steps = 6
context_window = 16000
reply_reserve = 1000
tools = ["add", "generate_report", "current_time"]
a2a = {{ expose = true }}

[[tools.define]]
name = "current_time"
risk = "high"

[a2a]
push_backoff_ms = 100

[[mcp.server.tokens]]
user = "a2a-client"
token_sha256 = "{digest}"
"#
    );
    let text = std::fs::read_to_string(&path).unwrap() + &extra;
    std::fs::write(&path, text).unwrap();
    path
}

/// `hermes serve` on the embedded bus with its HTTP listener at a free port: (process, the
/// agent's A2A base URL).
fn serve(dir: &Path, name: &str) -> (Serve, String) {
    let config = write_config(dir, name);
    let addr = format!("127.0.0.1:{}", free_port());
    let serve = Serve::start_with(&config, "embedded", "all", &["--http", &addr]);
    (serve, format!("http://{addr}/a2a/assistant"))
}

fn states(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}", e[0].as_str().unwrap(), e[1].as_str().unwrap()))
        .collect()
}

/// Every flow of the SDK's client over one binding, against one server.
fn every_flow(binding: Binding) {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url) = serve(dir.path(), "a2a");
    let token = ["--token", TOKEN];

    let card = run(&url, binding, "card", &token);
    assert_eq!(card["name"], "assistant", "{card}");
    assert_eq!(card["capabilities"]["streaming"], true, "{card}");
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");
    let bindings: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["url"], url.as_str(), "{card}");
            assert_eq!(i["protocolVersion"], "1.0", "{card}");
            i["protocolBinding"].as_str().unwrap()
        })
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON"], "{card}");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer",
        "{card}"
    );
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        skills.contains(&"assistant") && skills.contains(&"add"),
        "{card}"
    );

    // Blocking send, GetTask, a retry of the same messageId, ListTasks.
    let sent = run(&url, binding, "send", &token);
    assert_eq!(sent["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(sent["answer"], "The sum is 42.", "{sent}");
    assert_eq!(sent["got_state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(
        sent["got_history"],
        json!([
            {"role": "ROLE_USER", "text": "what is the sum?"},
            {"role": "ROLE_AGENT", "text": "The sum is 42."}
        ]),
        "{sent}"
    );
    assert_eq!(
        sent["retry_task_id"], sent["task_id"],
        "a retried messageId runs once: {sent}"
    );
    assert_eq!(sent["listed"], json!([sent["task_id"]]), "{sent}");
    assert_eq!(sent["second_context_id"], sent["context_id"], "{sent}");
    assert_ne!(sent["second_task_id"], sent["task_id"], "{sent}");
    assert_eq!(
        sent["listed_all"],
        json!([
            [sent["second_task_id"], "TASK_STATE_COMPLETED", "ok"],
            [sent["task_id"], "TASK_STATE_COMPLETED", "The sum is 42."]
        ]),
        "newest first, with artifacts when asked: {sent}"
    );
    assert_eq!(sent["missing_error"], "TaskNotFoundError", "{sent}");

    // Streaming: the task first, then its updates, the answer, and COMPLETED last.
    let streamed = run(&url, binding, "stream", &token);
    let seen = states(&streamed["events"]);
    assert!(seen[0].starts_with("task:"), "{seen:?}");
    assert!(
        seen.contains(&"status:TASK_STATE_WORKING".to_string()),
        "{seen:?}"
    );
    assert_eq!(
        seen[seen.len() - 2..],
        ["artifact:The sum is 42.", "status:TASK_STATE_COMPLETED"],
        "{seen:?}"
    );

    // Non-blocking send of a slow task, then SubscribeToTask until it completes.
    let long = run(&url, binding, "long", &token);
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
            .contains(&long["first_state"].as_str().unwrap()),
        "{long}"
    );
    let seen = states(&long["events"]);
    assert!(seen[0].starts_with("task:TASK_STATE_"), "{seen:?}");
    assert_eq!(
        seen.last().unwrap(),
        "status:TASK_STATE_COMPLETED",
        "{seen:?}"
    );
    assert_eq!(long["final_state"], "TASK_STATE_COMPLETED", "{long}");
    assert_eq!(long["answer"], "The report is ready.", "{long}");

    // CancelTask stops the turn; a second cancel is refused as the spec says.
    let cancelled = run(&url, binding, "cancel", &token);
    assert_eq!(
        cancelled["cancelled_state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    assert_eq!(cancelled["got_state"], "TASK_STATE_CANCELED", "{cancelled}");
    assert_eq!(
        cancelled["second_cancel_error"], "TaskNotCancelableError",
        "{cancelled}"
    );

    // A high-risk call asks for input; the client's "yes" in the same task resumes it.
    let input = run(&url, binding, "input", &token);
    assert_eq!(input["asked_state"], "TASK_STATE_INPUT_REQUIRED", "{input}");
    assert!(
        input["question"]
            .as_str()
            .unwrap()
            .contains("`current_time`"),
        "{input}"
    );
    // Meanwhile a new message in the context is refused with what to do, and a reply that is
    // neither yes nor no is asked again.
    assert_eq!(
        input["busy_error"][0], "UnsupportedOperationError",
        "{input}"
    );
    assert!(
        input["busy_error"][1]
            .as_str()
            .unwrap()
            .contains("reply \"yes\" or \"no\""),
        "{input}"
    );
    assert_eq!(input["unclear_error"], "InvalidParamsError", "{input}");
    assert_eq!(input["resumed_task_id"], input["task_id"], "{input}");
    assert_eq!(input["final_state"], "TASK_STATE_COMPLETED", "{input}");
    assert_eq!(input["answer"], "Done for real.", "{input}");
}

#[test]
fn the_python_sdk_completes_every_flow_over_json_rpc() {
    every_flow(Binding::JsonRpc);
}

#[test]
fn the_python_sdk_completes_every_flow_over_http_json() {
    every_flow(Binding::HttpJson);
}

#[test]
fn protocol_errors_follow_the_spec_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url) = serve(dir.path(), "a2a-errors");
    let raw = run(&url, Binding::JsonRpc, "raw", &["--token", TOKEN]);
    assert_eq!(raw["no_version"]["error"]["code"], -32009, "{raw}");
    assert!(
        raw["no_version"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("A2A-Version: 1.0"),
        "{raw}"
    );
    assert_eq!(raw["bad_token_status"], 401, "{raw}");
    assert_eq!(
        raw["bad_token"]["error"]["status"], "UNAUTHENTICATED",
        "{raw}"
    );
    assert_eq!(raw["unknown_method"]["error"]["code"], -32601, "{raw}");
}

#[test]
fn push_notifications_reach_the_webhook_with_its_credentials_after_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url) = serve(dir.path(), "a2a-push");
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let pushed = run(&url, binding, "push", &["--token", TOKEN]);
        let task = pushed["task_id"].as_str().unwrap();
        assert!(
            pushed["configs"][0]["url"]
                .as_str()
                .unwrap()
                .ends_with("/hook"),
            "{pushed}"
        );
        assert_eq!(pushed["configs"][0]["token"], "tok-123", "{pushed}");
        let received = pushed["received"].as_array().unwrap();
        assert!(
            received.len() >= 2,
            "the refused first delivery is retried: {pushed}"
        );
        for r in received {
            assert_eq!(r["token"], "tok-123", "{pushed}");
            assert_eq!(r["authorization"], "Bearer hook-secret", "{pushed}");
            assert_eq!(r["content_type"], "application/a2a+json", "{pushed}");
        }
        let completed: Vec<&Value> = received
            .iter()
            .filter(|r| r["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
            .collect();
        assert!(!completed.is_empty(), "{pushed}");
        assert_eq!(
            completed[0]["body"]["statusUpdate"]["taskId"], task,
            "{pushed}"
        );
    }
}

#[test]
fn a_task_outlives_a_restart_of_hermes_serve() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "a2a-restart");
    let addr = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{addr}/a2a/assistant");
    let token = ["--token", TOKEN];
    let serve = Serve::start_with(&config, "embedded", "all", &["--http", &addr]);
    let started = run(&url, Binding::HttpJson, "start", &token);
    let task = started["task_id"].as_str().unwrap().to_owned();
    // Killed while the task's job runs: the turn waits durably in `waiting_job`.
    std::thread::sleep(std::time::Duration::from_millis(500));
    serve.kill9();
    let _serve = Serve::start_with(&config, "embedded", "all", &["--http", &addr]);
    let waited = run(
        &url,
        Binding::JsonRpc,
        "wait",
        &["--token", TOKEN, "--task", &task],
    );
    assert_eq!(waited["final_state"], "TASK_STATE_COMPLETED", "{waited}");
    assert_eq!(waited["answer"], "The report is ready.", "{waited}");
}

#[test]
fn a_process_without_session_actors_serves_a2a_for_sessions_elsewhere_on_nats() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "a2a-nats");
    let _workers = Serve::start_with(
        &config,
        &nats.url(),
        "all",
        &["--data-dir", dir.path().join("workers").to_str().unwrap()],
    );
    let addr = format!("127.0.0.1:{}", free_port());
    let _front = Serve::start_with(
        &config,
        &nats.url(),
        "planner",
        &[
            "--http",
            &addr,
            "--data-dir",
            dir.path().join("front").to_str().unwrap(),
        ],
    );
    let url = format!("http://{addr}/a2a/assistant");
    let sent = run(&url, Binding::JsonRpc, "stream", &["--token", TOKEN]);
    let seen = states(&sent["events"]);
    assert_eq!(
        seen.last().unwrap(),
        "status:TASK_STATE_COMPLETED",
        "{seen:?}"
    );
    let long = run(&url, Binding::HttpJson, "long", &["--token", TOKEN]);
    assert_eq!(long["final_state"], "TASK_STATE_COMPLETED", "{long}");
}

#[test]
fn a_push_notification_missed_while_the_a2a_process_was_down_is_sent_when_it_is_back() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "a2a-push-sweep");
    let workers_dir = dir.path().join("workers");
    let _workers = Serve::start_with(
        &config,
        &nats.url(),
        "all",
        &["--data-dir", workers_dir.to_str().unwrap()],
    );
    let addr = format!("127.0.0.1:{}", free_port());
    let front_dir = dir.path().join("front");
    let front_args = ["--http", &addr, "--data-dir", front_dir.to_str().unwrap()];
    let front = Serve::start_with(&config, &nats.url(), "planner", &front_args);
    let url = format!("http://{addr}/a2a/assistant");
    let pushed = Running::start(&url, Binding::JsonRpc, "push_wait", &["--token", TOKEN]);
    assert!(pushed.first["started"].is_string(), "{}", pushed.first);
    // The only process serving A2A goes away; the task goes on in the workers and ends
    // (a 2-second report) with no one listening for its events.
    front.kill9();
    std::thread::sleep(std::time::Duration::from_secs(5));
    let _front = Serve::start_with(&config, &nats.url(), "planner", &front_args);
    let pushed = pushed.finish();
    let completed = pushed["received"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        .count();
    assert!(completed >= 1, "{pushed}");
}
