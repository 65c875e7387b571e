//! Sessions: durable turns that resume after a crash, compaction with a pinned goal, session
//! search, isolation at scale, idle actors that stop and reload.

use crate::common::scenario::*;
use serde_json::json;
use std::time::Duration;

use chrono::Utc;
use hermes::client::SessionClient;
use hermes::config::ModelConfig;
use hermes::llm::{ChatMessage, Role, ToolCall};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::subjects;
use hermes::protocol::{PlanRequest, ToolStatus, TurnEvent};
use hermes::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use hermes::store::tasks::{TaskState, TurnPhase, TurnRecord};

use crate::common::engine::{test_config, with_engine};

const T: Duration = Duration::from_secs(60);

fn script() -> Scenario {
    Scenario::new("sessions")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(
            on_user(&["look back"])
                .calls("session_search", json!({"query": "tangerine submarine"})),
        )
        .rule(after_tool("session_search").says("Found it."))
        .rule(on_user(&[]).says("Noted."))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
        .rule(
            on_user(&[])
                .role("summariser")
                .says("The user has been listing numbered items."),
        )
}

fn stored(seq: u64, message: ChatMessage) -> StoredMessage {
    StoredMessage {
        seq,
        id: format!("m{seq}"),
        turn_id: "turn-1".into(),
        ts: Utc::now(),
        tokens: 10,
        usage: None,
        tool_status: None,
        message: message.into(),
    }
}

/// Write a session as a crash at `phase` would leave it.
fn plant(dir: &std::path::Path, phase: TurnPhase, messages: Vec<ChatMessage>) {
    let db = hermes::store::durability::Durable::from(hermes::store::open(dir).unwrap());
    let store = SessionStore::open(&db).unwrap();
    let mut meta = SessionMeta {
        agent: "assistant".into(),
        session: "crashed".into(),
        user: "u1".into(),
        created_at: Utc::now(),
        updated_at: Utc::now(),
        next_seq: 0,
        log_seq: 0,
        handoffs: Vec::new(),
        set_aside: Vec::new(),
    };
    let msgs: Vec<_> = messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| stored(i as u64, m))
        .collect();
    let task = TaskState {
        goal: Some("what is the sum".into()),
        goal_tokens: 12,
        turn: Some(TurnRecord {
            phase,
            step: 1,
            ..TurnRecord::received("turn-1".into(), "m0".into(), "trace-1".into())
        }),
        ..TaskState::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(store.save(&mut meta, &msgs, &task)).unwrap();
    db.flush().unwrap();
}

/// Start the engine on the planted data and wait until the turn is final.
fn resume_and_read(config: hermes::config::Config) -> (Vec<StoredMessage>, TaskState) {
    let mut out = None;
    let slot = &mut out;
    with_engine(config, |engine| async move {
        let store = SessionStore::open(engine.db.as_ref().unwrap()).unwrap();
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let task = store.task("assistant", "crashed").unwrap();
            if task.turn.as_ref().is_some_and(|t| t.phase.is_final()) {
                *slot = Some((store.messages("assistant", "crashed").unwrap(), task));
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the turn was not resumed: {task:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    out.unwrap()
}

fn call() -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: "add".into(),
        arguments: serde_json::json!({"a": 19, "b": 23}),
    }
}

#[test]
fn a_turn_killed_in_each_state_resumes_and_never_reruns_a_recorded_tool_call() {
    let planted_result = r#"{"status":"ok","detail":{"result":42},"planted":true}"#;
    let cases: Vec<(TurnPhase, Vec<ChatMessage>)> = vec![
        (
            TurnPhase::Received,
            vec![ChatMessage::user("what is the sum?")],
        ),
        (
            TurnPhase::Planning,
            vec![ChatMessage::user("what is the sum?")],
        ),
        (
            TurnPhase::AwaitingTools,
            vec![
                ChatMessage::user("what is the sum?"),
                ChatMessage::assistant_calls("", vec![call()]),
            ],
        ),
        (
            TurnPhase::Planning,
            vec![
                ChatMessage::user("what is the sum?"),
                ChatMessage::assistant_calls("", vec![call()]),
                ChatMessage::tool("c1", "add", planted_result),
            ],
        ),
        (
            // The answer was stored but not yet published when the process died.
            TurnPhase::Planning,
            vec![
                ChatMessage::user("what is the sum?"),
                ChatMessage::assistant_calls("", vec![call()]),
                ChatMessage::tool("c1", "add", planted_result),
                ChatMessage::assistant("The sum is 42."),
            ],
        ),
    ];
    for (phase, planted) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = test_config(dir.path(), &script());
        plant(&config.engine.data_dir, phase, planted.clone());
        let (messages, task) = resume_and_read(config);
        let turn = task.turn.unwrap();
        assert_eq!(
            turn.phase,
            TurnPhase::Answered,
            "from {phase:?}: {:?}",
            turn.error
        );
        let roles: Vec<Role> = messages.iter().map(|m| m.message.role).collect();
        assert_eq!(
            roles,
            vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant],
            "from {phase:?} with {} planted",
            planted.len()
        );
        assert_eq!(messages.last().unwrap().message.content, "The sum is 42.");
        let results: Vec<_> = messages
            .iter()
            .filter(|m| m.message.tool_call_id.is_some())
            .collect();
        assert_eq!(results.len(), 1, "exactly one result for the call");
        if planted.len() >= 3 {
            assert!(
                results[0].message.content.contains("planted"),
                "a recorded result is not executed again"
            );
        }
    }
}

#[test]
fn long_sessions_fold_older_turns_into_a_summary_and_keep_the_goal_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.agents.get_mut("assistant").unwrap().recent_turns = 2;
    with_engine(config, |engine| async move {
        // Watch the planning requests on the bus, as any subscriber could.
        let mut plans = engine.bus.subscribe(subjects::PLAN).await.unwrap();
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "long", "u1")
            .await
            .unwrap();
        c.turn("my goal: plan a trip to Lisbon", T, |_| {})
            .await
            .unwrap();
        for i in 1..=9 {
            c.turn(&format!("item number {i}"), T, |_| {})
                .await
                .unwrap();
        }
        let mut last = None;
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), plans.next()).await
        {
            last = Some(
                Envelope::<PlanRequest>::decode_request(&m.payload, usize::MAX)
                    .unwrap()
                    .body,
            );
        }
        let messages = last.unwrap().messages;
        let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert!(
            texts[1].contains("Task goal") && texts[1].contains("Lisbon"),
            "goal pinned second: {texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|t| t.contains("The user has been listing numbered items")),
            "summary present: {texts:?}"
        );
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            users.len() <= 2 + 1 + 5,
            "bounded verbatim history: {users:?}"
        );
        assert!(
            !users.contains(&"item number 1"),
            "old turns are folded: {users:?}"
        );
        assert_eq!(users.last(), Some(&"item number 9"));
        let store = SessionStore::open(engine.db.as_ref().unwrap()).unwrap();
        let task = store.task("assistant", "long").unwrap();
        assert!(task.summary_upto > 0);
        // The full history stays in sled.
        assert_eq!(store.messages("assistant", "long").unwrap().len(), 20);
    });
}

#[test]
fn session_search_finds_what_the_user_said_in_an_earlier_session() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut a = SessionClient::open(engine.bus.clone(), "assistant", "old", "u1")
            .await
            .unwrap();
        a.turn("my tangerine submarine arrives on Tuesday", T, |_| {})
            .await
            .unwrap();
        let mut other = SessionClient::open(engine.bus.clone(), "assistant", "x", "u2")
            .await
            .unwrap();
        other
            .turn("tangerine submarine for u2", T, |_| {})
            .await
            .unwrap();
        let mut b = SessionClient::open(engine.bus.clone(), "assistant", "new", "u1")
            .await
            .unwrap();
        let trace = b.turn("please look back for it", T, |_| {}).await.unwrap();
        let result = trace
            .events
            .iter()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        let hits = result.output["hits"].as_array().unwrap();
        assert!(!hits.is_empty());
        assert_eq!(hits[0]["session"], "old");
        assert!(
            hits.iter().all(|h| h["session"] != "x"),
            "never another user's messages"
        );
    });
}

#[test]
fn a_thousand_sessions_in_flight_each_keep_only_their_own_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.models.planner = ModelConfig::Bench {};
    config.mcp.servers.clear();
    with_engine(config, |engine| async move {
        let mut tasks = Vec::new();
        for i in 1..=1000u64 {
            let bus = engine.bus.clone();
            tasks.push(tokio::spawn(async move {
                let session = format!("iso-{i}");
                let mut c = SessionClient::open(bus, "assistant", &session, &format!("user-{i}"))
                    .await
                    .unwrap();
                let trace = c
                    .turn(
                        &format!("turn {i}: add {i} and {}", 1000 + i),
                        Duration::from_secs(300),
                        |_| {},
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    trace.answer,
                    Some(format!("The answer is {}.", 2 * i + 1000)),
                    "session {session}"
                );
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let store = SessionStore::open(engine.db.as_ref().unwrap()).unwrap();
        for i in 1..=1000u64 {
            let messages = store.messages("assistant", &format!("iso-{i}")).unwrap();
            assert_eq!(messages.len(), 4, "session iso-{i}");
            assert_eq!(
                messages[0].message.content,
                format!("turn {i}: add {i} and {}", 1000 + i)
            );
            assert_eq!(
                messages[3].message.content,
                format!("The answer is {}.", 2 * i + 1000)
            );
        }
    });
}

#[test]
fn idle_session_actors_stop_and_reload_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.engine.session_idle_secs = 1;
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "idle", "u1")
            .await
            .unwrap();
        c.turn("hello", T, |_| {}).await.unwrap();
        assert_eq!(engine.live_sessions().await, 1);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while engine.live_sessions().await > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "idle actor did not stop"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let t = c.turn("hello again", T, |_| {}).await.unwrap();
        assert_eq!(t.accepted.seq, 2, "reloaded from sled, the log continues");
        assert_eq!(t.answer.as_deref(), Some("Noted."));
    });
}
