//! Remote A2A agents as delegates: a Hermes agent delegates to `examples/a2a/agent.py` (an
//! agent written with the official A2A Python SDK) exactly as to a local agent — its answer,
//! its failure and its input request reach the parent's model as the call's result,
//! cancelling the parent cancels the remote task, and a crash of the delegating process
//! neither loses nor repeats it. The parent itself is driven over A2A by the SDK's client, so
//! both directions run in each test.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::a2a_sdk::{run, Binding, ExampleAgent};
use crate::common::hermes_proc::{free_port, hermes, Serve};
use crate::common::scenario::*;

/// `boss` delegates to `stats` a task chosen by the user's words.
fn script() -> Scenario {
    let delegate = |task: &str| json!({"task": task});
    Scenario::new("a2a-delegate")
        .rule(on_user(&["slow"]).calls("agent__stats", delegate("slow: count these words")))
        .rule(on_user(&["fail"]).calls("agent__stats", delegate("please fail")))
        .rule(on_user(&["ask"]).calls("agent__stats", delegate("ask me which words")))
        .rule(on_user(&["count"]).calls("agent__stats", delegate("count these four words")))
        .rule(after_tool("agent__stats").says("The stats agent answered."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

fn write_config(dir: &Path, name: &str, stats_url: &str) -> PathBuf {
    let path = write_serve_config(dir, name, &script());
    let extra = format!(
        r#"
[agents.boss]
description = "Answers with the help of the stats agent"
system_prompt = "You delegate counting."
max_steps = 4
context_window = 16000
reply_reserve = 1000
delegates_to = ["stats"]
a2a = {{ expose = true }}

[agents.stats]
description = "Counts the words of a text (a Python A2A agent)"
a2a = {{ card_url = "{stats_url}" }}

[mcp.server]
anonymous = {{ user = "a2a-client" }}
"#
    );
    let text = std::fs::read_to_string(&path).unwrap() + &extra;
    std::fs::write(&path, text).unwrap();
    path
}

/// The boss served over A2A, delegating to `stats`: (process, boss's A2A URL, config).
fn serve(dir: &Path, name: &str, stats: &ExampleAgent) -> (Serve, String, PathBuf, String) {
    let config = write_config(dir, name, &stats.url);
    let addr = format!("127.0.0.1:{}", free_port());
    let serve = Serve::start_with(&config, "embedded", "all", &["--http", &addr]);
    (serve, format!("http://{addr}/a2a/boss"), config, addr)
}

/// The tasks the example agent holds whose text contains `text`.
fn remote_tasks(stats: &ExampleAgent, text: &str) -> Vec<Value> {
    let listed = run(&stats.url, Binding::JsonRpc, "remote_tasks", &[]);
    listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["text"].as_str().unwrap_or("").contains(text))
        .cloned()
        .collect()
}

/// Ask the boss over A2A and wait for its task to end: (its final task, its context).
fn ask_boss(url: &str, text: &str) -> (Value, String) {
    let started = run(url, Binding::JsonRpc, "start", &["--text", text]);
    let task = started["task_id"].as_str().unwrap().to_owned();
    let waited = run(url, Binding::HttpJson, "wait", &["--task", &task]);
    (waited, started["context_id"].as_str().unwrap().to_owned())
}

/// What the `agent__stats` call returned to the boss's model in session `context` (read with
/// `hermes sessions show` through the running process).
fn call_result(config: &Path, context: &str) -> String {
    tool_result(config, context, "agent__stats")
}

/// What the boss's call of `tool` returned in session `context`.
fn tool_result(config: &Path, context: &str, tool: &str) -> String {
    let out = hermes()
        .args(["--config", config.to_str().unwrap()])
        .args(["sessions", "show", "--agent", "boss", "--json", context])
        .output()
        .expect("hermes sessions show runs");
    let shown: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["message"]["name"] == tool)
        .map(|m| m["message"]["content"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no {tool} result in {shown}"))
}

#[test]
fn a_local_agent_gets_the_python_agents_answer_failure_and_question_as_its_call_result() {
    let stats = ExampleAgent::start(1);
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url, config, _) = serve(dir.path(), "a2a-delegate", &stats);

    let (counted, context) = ask_boss(&url, "count please");
    assert_eq!(counted["final_state"], "TASK_STATE_COMPLETED", "{counted}");
    assert_eq!(counted["answer"], "The stats agent answered.", "{counted}");
    let result = call_result(&config, &context);
    assert!(result.contains("The text has 4 words."), "{result}");
    let remote = remote_tasks(&stats, "count these four words");
    assert_eq!(remote.len(), 1, "{remote:?}");
    assert_eq!(remote[0]["state"], "TASK_STATE_COMPLETED", "{remote:?}");

    let (failed, context) = ask_boss(&url, "make it fail");
    assert_eq!(failed["final_state"], "TASK_STATE_COMPLETED", "{failed}");
    let result = call_result(&config, &context);
    assert!(result.contains("could not finish the task"), "{result}");
    assert!(
        result.contains("cannot count a text that asks me to fail"),
        "{result}"
    );

    let (_, context) = ask_boss(&url, "ask it");
    let result = call_result(&config, &context);
    assert!(result.contains("input_required"), "{result}");
    assert!(
        result.contains("Which language is the text in?"),
        "{result}"
    );
}

#[test]
fn cancelling_the_parent_task_cancels_the_remote_task() {
    let stats = ExampleAgent::start(30);
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url, _, _) = serve(dir.path(), "a2a-cancel", &stats);
    let started = run(&url, Binding::JsonRpc, "start", &["--text", "slow please"]);
    let task = started["task_id"].as_str().unwrap().to_owned();
    wait_for(
        || remote_tasks(&stats, "slow: count").len() == 1,
        "the remote task to start",
    );
    let cancelled = run(&url, Binding::JsonRpc, "cancel_task", &["--task", &task]);
    assert_eq!(cancelled["state"], "TASK_STATE_CANCELED", "{cancelled}");
    wait_for(
        || remote_tasks(&stats, "slow: count")[0]["state"] == "TASK_STATE_CANCELED",
        "the remote task to be cancelled",
    );
}

#[test]
fn a_crash_of_the_delegating_process_neither_loses_nor_repeats_the_remote_task() {
    let stats = ExampleAgent::start(4);
    let dir = tempfile::tempdir().unwrap();
    let (serve, url, config, addr) = serve(dir.path(), "a2a-crash", &stats);
    let started = run(&url, Binding::JsonRpc, "start", &["--text", "slow please"]);
    let task = started["task_id"].as_str().unwrap().to_owned();
    wait_for(
        || remote_tasks(&stats, "slow: count").len() == 1,
        "the remote task to start",
    );
    // Killed while the remote agent works: the parent waits in `waiting_agents` on disk.
    serve.kill9();
    let _serve = Serve::start_with(&config, "embedded", "all", &["--http", &addr]);
    let waited = run(&url, Binding::HttpJson, "wait", &["--task", &task]);
    assert_eq!(waited["final_state"], "TASK_STATE_COMPLETED", "{waited}");
    assert_eq!(waited["answer"], "The stats agent answered.", "{waited}");
    let result = call_result(&config, started["context_id"].as_str().unwrap());
    assert!(result.contains("The text has 4 words."), "{result}");
    let remote = remote_tasks(&stats, "slow: count");
    assert_eq!(
        remote.len(),
        1,
        "sent once, not again after the crash: {remote:?}"
    );
    assert_eq!(remote[0]["state"], "TASK_STATE_COMPLETED", "{remote:?}");
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_hermes_agent_delegates_to_an_agent_of_another_hermes_deployment() {
    let script = Scenario::new("a2a-two")
        .rule(on_user(&["sum please"]).calls("agent__remote", json!({"task": "what is the sum?"})))
        .rule(after_tool("agent__remote").says("The remote agent answered."))
        .rule(on_user(&["what is the sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        );
    let dir = tempfile::tempdir().unwrap();
    let token = "deployment-b-token";
    // Deployment B serves its assistant over A2A to callers with its token.
    let b_config = write_serve_config(dir.path(), "b", &script);
    let digest = hermes::mcp::server::auth::sha256_hex(token);
    let b_extra = format!(
        "\n[agents.assistant]\na2a = {{ expose = true }}\n\n[[mcp.server.tokens]]\nuser = \"deployment-a\"\ntoken_sha256 = \"{digest}\"\n"
    );
    std::fs::write(
        &b_config,
        std::fs::read_to_string(&b_config).unwrap() + &b_extra,
    )
    .unwrap();
    let b_addr = format!("127.0.0.1:{}", free_port());
    let _b = Serve::start_with(&b_config, "embedded", "all", &["--http", &b_addr]);
    // Deployment A's boss delegates to it, presenting the token from the environment.
    let a_config = write_serve_config(dir.path(), "a", &script);
    let a_extra = format!(
        r#"
[agents.boss]
system_prompt = "You delegate sums."
max_steps = 4
context_window = 16000
reply_reserve = 1000
delegates_to = ["remote"]
a2a = {{ expose = true }}

[agents.remote]
description = "Deployment B's assistant"
a2a = {{ card_url = "http://{b_addr}/a2a/assistant", token_env = "REMOTE_A2A_TOKEN" }}

[mcp.server]
anonymous = {{ user = "a2a-client" }}
"#
    );
    std::fs::write(
        &a_config,
        std::fs::read_to_string(&a_config).unwrap() + &a_extra,
    )
    .unwrap();
    let a_addr = format!("127.0.0.1:{}", free_port());
    let _a = Serve::start_with_env(
        &a_config,
        "embedded",
        "all",
        &["--http", &a_addr],
        &[("REMOTE_A2A_TOKEN", token)],
    );
    let (waited, context) = ask_boss(&format!("http://{a_addr}/a2a/boss"), "sum please");
    assert_eq!(waited["final_state"], "TASK_STATE_COMPLETED", "{waited}");
    assert_eq!(waited["answer"], "The remote agent answered.", "{waited}");
    let result = tool_result(&a_config, &context, "agent__remote");
    assert!(result.contains("The sum is 42."), "{result}");
}

#[test]
fn the_team_demo_asks_its_remote_python_member_over_a2a() {
    let out = hermes()
        .args(["demo", "team", "--remote", "--python"])
        .arg(crate::common::a2a_sdk::python())
        .output()
        .expect("hermes demo team runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("delegated to stats (session dlg-"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[x] the remote member stats (a Python agent) answered over A2A: The text has 14 words."),
        "{stdout}"
    );
    assert!(
        stdout.contains("[x] all 3 delegated agents ran at the same time"),
        "{stdout}"
    );
}
