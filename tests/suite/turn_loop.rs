//! One real turn loop through the five actors on the embedded bus: recall, plan, tool calls
//! (built-in and MCP), answer, background memory extraction.

use crate::common::scenario::*;
use serde_json::json;
use std::time::Duration;

use hermes::client::SessionClient;
use hermes::protocol::{ToolStatus, TurnEvent};
use hermes::tools::ToolErrorCode;

use crate::common::engine::{test_config, with_engine};

const T: Duration = Duration::from_secs(60);

fn script() -> Scenario {
    Scenario::new("turn-loop")
        .rule(on_user(&["add please"]).calls("add", json!({"a": "40", "b": 2})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&["invent"]).calls("order_lookpu", json!({"order_id": "A1"})))
        .rule(after_tool("order_lookpu").says("That tool does not exist."))
        .rule(on_user(&["bad args"]).calls("add", json!({"a": "forty", "b": 2})))
        .rule(on_user(&["search"]).calls("catalog__search_products", json!({"brand": "Sony", "category": "headphones", "max_price_yuan": 5000})))
        .rule(after_tool("catalog__search_products").says("Found Sony headphones."))
        .rule(on_user(&["remember"]).says("Noted."))
        .rule(on_user(&[]).says("Hello."))
        .rule(on_user(&["purple"]).role("extractor").says("{\"memory_updates\": [{\"op\": \"add\", \"kind\": \"preference\", \"key\": \"favourite_colour\", \"content\": \"favourite colour is purple\", \"importance\": 0.8}]}"))
        .rule(on_user(&[]).role("extractor").says("{\"memory_updates\": []}"))
}

fn tool_results(events: &[TurnEvent]) -> Vec<hermes::protocol::ToolCallResult> {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

/// The text of a turn's `delta` events, in order.
fn streamed(events: &[TurnEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Delta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn tool_call_with_repaired_arguments_completes_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u1")
            .await
            .unwrap();
        let trace = c.turn("add please", T, |_| {}).await.unwrap();
        assert_eq!(trace.answer.as_deref(), Some("The sum is 42."));
        let results = tool_results(&trace.events);
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].status, ToolStatus::Ok);
        assert!(results[0].auto_corrected, "{:?}", results[0]);
        assert_eq!(results[0].output["result"], 42);
    });
}

#[test]
fn unknown_tool_is_answered_with_the_closest_existing_names() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u1")
            .await
            .unwrap();
        let trace = c.turn("invent a tool", T, |_| {}).await.unwrap();
        let results = tool_results(&trace.events);
        let err = results[0].error.clone().expect("an error");
        assert_eq!(err.code, ToolErrorCode::UnknownTool);
        assert!(err.details.iter().any(|d| d == "order_lookup"), "{err:?}");
        assert!(
            err.message.contains("add"),
            "lists the tools: {}",
            err.message
        );
        assert_eq!(trace.answer.as_deref(), Some("That tool does not exist."));
    });
}

#[test]
fn arguments_failing_the_schema_get_a_structured_error_not_an_execution() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = script().rule(after_tool("add").says("fixed"));
    with_engine(test_config(dir.path(), &scenario), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u1")
            .await
            .unwrap();
        let trace = c.turn("bad args", T, |_| {}).await.unwrap();
        let results = tool_results(&trace.events);
        let err = results[0].error.clone().expect("an error");
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert!(err.details.iter().any(|d| d.contains("/a")), "{err:?}");
    });
}

#[test]
fn mcp_tool_call_goes_through_the_bridge_to_a_real_server_process() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let catalog = engine.mcp.clone().unwrap();
        assert_eq!(
            catalog.servers[0].status, "ready",
            "{:?}",
            catalog.servers[0].error
        );
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u1")
            .await
            .unwrap();
        let trace = c.turn("search sony", T, |_| {}).await.unwrap();
        let results = tool_results(&trace.events);
        assert_eq!(results[0].status, ToolStatus::Ok, "{:?}", results[0]);
        assert_eq!(results[0].via, "mcp:catalog");
        assert!(results[0].output.to_string().contains("Sony"));
    });
}

#[test]
fn fact_from_one_session_is_recalled_in_a_later_session_of_the_same_user_only() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut s1 = SessionClient::open(engine.bus.clone(), "assistant", "first", "alice")
            .await
            .unwrap();
        s1.turn("please remember my favourite colour is purple", T, |_| {})
            .await
            .unwrap();
        // Extraction runs in the background; wait for its event.
        let mut written = false;
        while let Ok(Some(e)) = s1.next_event(T).await {
            if let TurnEvent::MemoryWritten { changes, .. } = e {
                assert_eq!(changes[0].key, "favourite_colour");
                written = true;
                break;
            }
        }
        assert!(written, "memory.written arrives");

        let recalled = |events: &[TurnEvent]| -> Vec<String> {
            events
                .iter()
                .filter_map(|e| match e {
                    TurnEvent::MemoryRecalled { memories, .. } => Some(
                        memories
                            .iter()
                            .map(|m| m.content.clone())
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        let mut later = SessionClient::open(engine.bus.clone(), "assistant", "second", "alice")
            .await
            .unwrap();
        let t = later
            .turn("what is my favourite colour?", T, |_| {})
            .await
            .unwrap();
        assert_eq!(
            recalled(&t.events),
            vec!["favourite colour is purple".to_string()]
        );

        let mut other = SessionClient::open(engine.bus.clone(), "assistant", "third", "bob")
            .await
            .unwrap();
        let t = other
            .turn("what is my favourite colour?", T, |_| {})
            .await
            .unwrap();
        assert!(
            recalled(&t.events).is_empty(),
            "bob must not see alice's memory"
        );
    });
}

#[test]
fn messages_of_a_session_survive_an_engine_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), &script());
    with_engine(config.clone(), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "keep", "u1")
            .await
            .unwrap();
        let t = c.turn("hi", T, |_| {}).await.unwrap();
        assert_eq!(t.accepted.seq, 0);
    });
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "keep", "u1")
            .await
            .unwrap();
        let t = c.turn("hi again", T, |_| {}).await.unwrap();
        assert_eq!(
            t.accepted.seq, 2,
            "the reloaded log continues after user + answer"
        );
    });
}

#[test]
fn an_openai_compatible_model_streams_deltas_and_calls_tools_through_the_engine() {
    use crate::common::fake_openai::FakeOpenAi;
    // The fake model server lives on its own runtime, as a remote endpoint would.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = server_rt.block_on(FakeOpenAi::start());
    fake.push_tool_calls(vec![("add", serde_json::json!({"a": 1, "b": 2}))]);
    fake.push_text("One plus two is three, as the tool says.");
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.models.planner = hermes::config::ModelConfig::Openai(hermes::config::OpenAiConfig {
        base_url: Some(fake.base_url()),
        timeout_secs: 30,
        ..hermes::config::OpenAiConfig::from_env("gpt-4o-mini")
    });
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "oa", "u1")
            .await
            .unwrap();
        let trace = c.turn("what is 1 + 2?", T, |_| {}).await.unwrap();
        assert_eq!(
            trace.answer.as_deref(),
            Some("One plus two is three, as the tool says.")
        );
        assert_eq!(
            streamed(&trace.events),
            "One plus two is three, as the tool says."
        );
        assert_eq!(tool_results(&trace.events)[0].output["result"], 3);
    });
    // The second request carried the tool result back with its call id.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().unwrap();
    let tool_msg = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert!(tool_msg["tool_call_id"].is_string());
    assert!(requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["function"]["name"] == "add"));
}

#[test]
fn the_same_tool_failing_three_times_makes_the_turn_ask_the_user() {
    let scenario = Scenario::new("guard")
        .rule(on_user(&[]).calls("add", json!({"a": "not a number", "b": 1})))
        .rule(after_tool("add").calls("add", json!({"a": "still not a number", "b": 1})))
        .rule(
            on_user(&[])
                .role("extractor")
                .says(r#"{"memory_updates": []}"#),
        );
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &scenario), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "g", "u1")
            .await
            .unwrap();
        let trace = c.turn("add these", T, |_| {}).await.unwrap();
        assert_eq!(tool_results(&trace.events).len(), 3, "no fourth attempt");
        let answer = trace.answer.unwrap();
        assert!(
            answer.contains("`add`") && answer.contains("3 times"),
            "{answer}"
        );
    });
}

#[test]
fn tool_results_enter_the_context_in_the_compact_transformed_shape() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut plans = engine
            .bus
            .subscribe(hermes::protocol::subjects::PLAN)
            .await
            .unwrap();
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "tr", "u1")
            .await
            .unwrap();
        c.turn("add please", T, |_| {}).await.unwrap();
        let mut last = None;
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), plans.next()).await
        {
            last = Some(m);
        }
        let env =
            hermes::protocol::envelope::Envelope::<hermes::protocol::PlanRequest>::decode_request(
                &last.unwrap().payload,
                usize::MAX,
            )
            .unwrap();
        let tool_msg = env
            .body
            .messages
            .iter()
            .find(|m| m.role == hermes::llm::Role::Tool)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&tool_msg.content).unwrap();
        for key in ["tool_use_id", "tool_name", "status", "summary", "detail"] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert!(v["summary"].as_str().unwrap().chars().count() <= 100);
    });
}

#[test]
fn a_quick_answer_streams_its_deltas_after_its_turn_started_in_sync_mode() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), &script());
    assert_eq!(
        config.engine.durability,
        hermes::config::DurabilityConfig::Sync,
        "the default, where the acknowledgement may still be on its way when the model streams"
    );
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u1")
            .await
            .unwrap();
        let trace = c.turn("remember this", T, |_| {}).await.unwrap();
        assert_eq!(trace.answer.as_deref(), Some("Noted."));
        let kinds: Vec<&str> = trace.events.iter().map(TurnEvent::type_name).collect();
        assert_eq!(
            streamed(&trace.events),
            "Noted.",
            "every delta reaches the client: {kinds:?}"
        );
        assert_eq!(kinds.first(), Some(&"turn.started"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"answer"), "{kinds:?}");
    });
}
