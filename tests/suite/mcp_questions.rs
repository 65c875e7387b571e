//! A mounted MCP server that asks the user before it completes a call (2026-07-28
//! `input_required`): the turn pauses in `waiting_user` with the server's question, the
//! question outlives an engine restart, an answer that does not fit the form is refused with
//! what is wrong, and the user's answer — or a decline — goes back to the server with its
//! state, so the call completes and the turn answers.

use std::path::Path;
use std::time::Duration;

use hermes::client::SessionClient;
use hermes::config::{Config, McpServerConfig, ModelConfig};
use hermes::protocol::{ToolCallResult, ToolStatus, TurnEvent};
use serde_json::{json, Value};

use crate::common::asking_mcp::AskingServer;
use crate::common::engine::with_engine;
use crate::common::provider_engine::engine_config;
use crate::common::scenario::*;

const T: Duration = Duration::from_secs(30);

fn config(dir: &Path, url: &str) -> Config {
    let scenario = Scenario::new("questions")
        .rule(on_user(&["greet"]).calls("ask__greet", json!({})))
        .rule(after_tool("ask__greet").says("Greeted."));
    let path = dir.join("questions-scenario.toml");
    std::fs::write(&path, scenario.to_toml()).unwrap();
    let replay = ModelConfig::Replay {
        scenario: path.display().to_string(),
    };
    let mut config = engine_config(dir, replay);
    config.mcp.servers = vec![McpServerConfig {
        name: "ask".into(),
        url: Some(url.to_owned()),
        ..Default::default()
    }];
    config.agents.get_mut("assistant").unwrap().tools = Some(vec!["ask__greet".into()]);
    config
}

/// The result of `ask__greet` among a turn's events.
fn greet_result(events: &[TurnEvent]) -> ToolCallResult {
    events
        .iter()
        .find_map(|e| match e {
            TurnEvent::ToolResult { result, .. } if result.name == "ask__greet" => {
                Some(result.clone())
            }
            _ => None,
        })
        .expect("the call's result is published")
}

#[test]
fn a_servers_question_pauses_the_turn_survives_a_restart_and_the_answer_completes_the_call() {
    let rt = crate::common::fake_http::runtime();
    let server = AskingServer::default();
    let url = rt.block_on(server.serve());
    let dir = tempfile::tempdir().unwrap();

    let call_id = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let asked = call_id.clone();
    with_engine(config(dir.path(), &url), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "hi", "u1")
            .await
            .unwrap();
        let trace = c.turn("please greet me", T, |_| {}).await.unwrap();
        let Some(pending) = trace.needs_confirmation else {
            panic!(
                "the turn waits for the user: {:?} {:?}",
                trace.answer, trace.events
            )
        };
        assert_eq!(pending.name, "ask__greet");
        assert_eq!(pending.questions.len(), 1, "{pending:?}");
        assert_eq!(pending.questions[0].message, "Who is asking?");
        assert!(
            pending.message.contains("Who is asking?"),
            "{}",
            pending.message
        );
        assert!(
            !trace
                .events
                .iter()
                .any(|e| matches!(e, TurnEvent::ToolResult { .. })),
            "a question is no result"
        );
        *asked.lock().unwrap() = pending.call_id;
    });
    assert_eq!(
        server.seen(),
        vec![Value::Null],
        "asked once, not answered yet"
    );

    // A new engine on the same data: the question is still there, and the answer completes it.
    let call_id = call_id.lock().unwrap().clone();
    with_engine(config(dir.path(), &url), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "hi", "u1")
            .await
            .unwrap();
        let wrong = c.answer(&call_id, json!({"name": 7}), T).await.unwrap_err();
        let wrong = wrong.to_string();
        assert!(
            wrong.contains("invalid_answer") || wrong.contains("does not fit"),
            "{wrong}"
        );
        assert!(wrong.contains("/name"), "the problem is named: {wrong}");

        let done = c
            .answer_and_follow(&call_id, json!({"name": "Grace"}), T, |_| {})
            .await
            .unwrap();
        assert_eq!(done.answer.as_deref(), Some("Greeted."), "{:?}", done.error);
        let result = greet_result(&done.events);
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        assert_eq!(result.output["text"], "Hello, Grace!");
    });
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "asked, then answered once: {seen:?}");
    assert_eq!(
        seen[1]["who"],
        json!({"action": "accept", "content": {"name": "Grace"}}),
        "the answer went back (and the server found its state echoed, or it would refuse)"
    );
}

#[test]
fn a_declined_question_reaches_the_server_as_a_decline_and_approving_alone_sends_the_defaults() {
    let rt = crate::common::fake_http::runtime();
    let server = AskingServer::default();
    let url = rt.block_on(server.serve());
    let dir = tempfile::tempdir().unwrap();
    with_engine(config(dir.path(), &url), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "no", "u1")
            .await
            .unwrap();
        let trace = c.turn("greet me", T, |_| {}).await.unwrap();
        let pending = trace.needs_confirmation.expect("the turn waits");
        let done = c
            .confirm_and_follow(false, Some(&pending.call_id), T, |_| {})
            .await
            .unwrap();
        assert_eq!(done.answer.as_deref(), Some("Greeted."), "{:?}", done.error);
        assert_eq!(
            greet_result(&done.events).output["text"],
            "greeting declined"
        );

        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "yes", "u1")
            .await
            .unwrap();
        let trace = c.turn("greet me", T, |_| {}).await.unwrap();
        let pending = trace.needs_confirmation.expect("the turn waits");
        let done = c
            .confirm_and_follow(true, Some(&pending.call_id), T, |_| {})
            .await
            .unwrap();
        assert_eq!(
            greet_result(&done.events).output["text"],
            "Hello, Ada!",
            "the form's default"
        );
    });
    assert_eq!(server.seen().len(), 4);
}

/// A config mounting the conformance tasks fixture as `fx`, whose model calls `tool`.
fn fixture_config(dir: &Path, url: &str, tool: &str, arguments: Value) -> Config {
    let scenario = Scenario::new("task-questions")
        .rule(on_user(&["please"]).calls(tool, arguments))
        .rule(after_tool(tool).says("Done."));
    let path = dir.join("task-questions-scenario.toml");
    std::fs::write(&path, scenario.to_toml()).unwrap();
    let replay = ModelConfig::Replay {
        scenario: path.display().to_string(),
    };
    let mut config = engine_config(dir, replay);
    config.mcp.servers = vec![McpServerConfig {
        name: "fx".into(),
        url: Some(url.to_owned()),
        ..Default::default()
    }];
    config.agents.get_mut("assistant").unwrap().tools = Some(vec![tool.into()]);
    config
}

#[test]
fn a_task_that_asks_the_user_pauses_the_turn_and_the_answer_goes_back_to_the_task() {
    let rt = crate::common::fake_http::runtime();
    let url = rt.block_on(crate::common::tasks_fixture::serve());
    let dir = tempfile::tempdir().unwrap();
    let tool = "fx__confirm_delete";
    let config = fixture_config(dir.path(), &url, tool, json!({"filename": "notes.txt"}));
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "del", "u1")
            .await
            .unwrap();
        let trace = c.turn("please delete notes.txt", T, |_| {}).await.unwrap();
        assert!(
            trace
                .events
                .iter()
                .any(|e| matches!(e, TurnEvent::JobWaiting { .. })),
            "the call became a task the turn waited for: {:?}",
            trace.events
        );
        let Some(pending) = trace.needs_confirmation else {
            panic!("the task's question reaches the user: {:?}", trace.events)
        };
        assert_eq!(pending.questions[0].message, "Delete notes.txt?");
        let done = c
            .answer_and_follow(&pending.call_id, json!({"confirm": true}), T, |_| {})
            .await
            .unwrap();
        assert_eq!(done.answer.as_deref(), Some("Done."), "{:?}", done.error);
        // The last result: the first is the task's submission.
        let result = done
            .events
            .iter()
            .rev()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } if result.name == tool => Some(result),
                _ => None,
            })
            .expect("the task's result is the call's result");
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        assert_eq!(result.output["text"], "deleted notes.txt");
    });
}

#[test]
fn cancelling_the_turn_while_a_tasks_question_waits_cancels_the_task_on_its_server() {
    let rt = crate::common::fake_http::runtime();
    let (url, fixture) = rt.block_on(crate::common::tasks_fixture::serve_observed());
    let dir = tempfile::tempdir().unwrap();
    let tool = "fx__confirm_delete";
    let config = fixture_config(dir.path(), &url, tool, json!({"filename": "notes.txt"}));
    let observed = fixture.clone();
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "del", "u1")
            .await
            .unwrap();
        let trace = c.turn("please delete notes.txt", T, |_| {}).await.unwrap();
        assert!(trace.needs_confirmation.is_some(), "{:?}", trace.events);
        assert_eq!(
            observed.statuses(),
            vec![rmcp::model::TaskStatus::InputRequired]
        );
        c.cancel(T).await.unwrap();
        let deadline = std::time::Instant::now() + T;
        while observed.statuses() != vec![rmcp::model::TaskStatus::Cancelled] {
            assert!(
                std::time::Instant::now() < deadline,
                "the task still waits for its answer: {:?}",
                observed.statuses()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    drop(fixture);
}

#[test]
fn a_call_that_asks_first_and_then_runs_as_a_task_completes_with_the_answer() {
    let rt = crate::common::fake_http::runtime();
    let url = rt.block_on(crate::common::tasks_fixture::serve());
    let dir = tempfile::tempdir().unwrap();
    let tool = "fx__test_tool_with_task";
    with_engine(
        fixture_config(dir.path(), &url, tool, json!({})),
        |engine| async move {
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "name", "u1")
                .await
                .unwrap();
            let trace = c.turn("please say hello", T, |_| {}).await.unwrap();
            let Some(pending) = trace.needs_confirmation else {
                panic!("the call's question reaches the user: {:?}", trace.events)
            };
            assert_eq!(pending.questions[0].message, "Your name?");
            let done = c
                .answer_and_follow(&pending.call_id, json!({"name": "Ada"}), T, |_| {})
                .await
                .unwrap();
            assert_eq!(done.answer.as_deref(), Some("Done."), "{:?}", done.error);
            assert_eq!(greet_like(&done.events, tool), "Hello, Ada!");
        },
    );
}

/// The text of the last result of `tool` (the first may be its task's submission).
fn greet_like(events: &[TurnEvent], tool: &str) -> String {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            TurnEvent::ToolResult { result, .. } if result.name == tool => {
                result.output["text"].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .unwrap_or_default()
}
