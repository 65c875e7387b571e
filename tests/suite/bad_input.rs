//! Bad input gets a clear error and loses nothing; the engine keeps serving.

use crate::common::scenario::*;
use std::time::Duration;

use bytes::Bytes;
use hermes::client::{ClientError, SessionClient};
use hermes::config::McpServerConfig;
use hermes::protocol::envelope::{Envelope, ErrorBody};
use hermes::protocol::UserMessage;

use crate::common::engine::{test_config, with_engine};

const T: Duration = Duration::from_secs(30);
fn script() -> Scenario {
    Scenario::new("bad-input")
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

async fn error_reply(bus: &hermes::bus::SharedBus, subject: &str, payload: Bytes) -> ErrorBody {
    let reply = bus.request(subject, payload, T).await.expect("a reply");
    let env = Envelope::<ErrorBody>::decode_reply(&reply, usize::MAX).expect("an error envelope");
    env.body
}

fn message(session: &str, user: &str, text: &str) -> Envelope<UserMessage> {
    Envelope::request(UserMessage::text(text)).for_session("assistant", session, Some(user))
}

#[test]
fn malformed_envelope_is_refused_and_the_engine_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let bus = engine.bus.clone();
        let e = error_reply(
            &bus,
            "hermes.in.assistant.s1",
            Bytes::from_static(b"{not json"),
        )
        .await;
        assert_eq!(e.code, "bad_envelope");
        assert!(e.message.contains("not a valid envelope"), "{}", e.message);
        let wrong_kind = Envelope::new("something.else", serde_json::json!({})).for_session(
            "assistant",
            "s1",
            Some("u"),
        );
        let e = error_reply(&bus, "hermes.in.assistant.s1", wrong_kind.encode().unwrap()).await;
        assert_eq!(e.code, "bad_envelope");
        // Still serving.
        let mut c = SessionClient::open(bus, "assistant", "s1", "u")
            .await
            .unwrap();
        assert_eq!(
            c.turn("hello", T, |_| {}).await.unwrap().answer.as_deref(),
            Some("ok")
        );
    });
}

#[test]
fn invalid_ids_are_refused_before_they_reach_a_subject_or_a_session() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let bus = engine.bus.clone();
        assert!(matches!(
            SessionClient::open(bus.clone(), "assistant", "bad.session", "u").await,
            Err(ClientError::Id(_))
        ));
        let mut env = message("s1", "u", "hi");
        env.user = Some("u ser".into());
        let e = error_reply(&bus, "hermes.in.assistant.s1", env.encode().unwrap()).await;
        assert_eq!(e.code, "bad_envelope");
        assert!(e.message.contains("invalid user id"), "{}", e.message);
        let e = error_reply(
            &bus,
            "hermes.in.assistant.s1.extra.more",
            message("s1", "u", "hi").encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "invalid_subject");
        // One more token names the publisher, which speaks only for the user of its name.
        let e = error_reply(
            &bus,
            "hermes.in.assistant.s1.extra",
            message("s1", "u", "hi").encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "user_not_allowed");
        let e = error_reply(
            &bus,
            "hermes.in.nobody.s1",
            message("s1", "u", "hi").encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "address_mismatch");
        let mut env = message("s1", "u", "hi");
        env.agent = Some("nobody".into());
        let e = error_reply(&bus, "hermes.in.nobody.s1", env.encode().unwrap()).await;
        assert_eq!(e.code, "unknown_agent");
        assert!(
            e.message.contains("assistant"),
            "names the configured agents: {}",
            e.message
        );
    });
}

#[test]
fn oversized_messages_are_refused_with_the_limit_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.engine.max_message_chars = 100;
    config.engine.max_envelope_bytes = 4096;
    with_engine(config, |engine| async move {
        let bus = engine.bus.clone();
        let e = error_reply(
            &bus,
            "hermes.in.assistant.s1",
            message("s1", "u", &"x".repeat(101)).encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "message_too_long");
        assert!(e.message.contains("max_message_chars"), "{}", e.message);
        let e = error_reply(
            &bus,
            "hermes.in.assistant.s1",
            message("s1", "u", &"y".repeat(5000)).encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "bad_envelope");
        assert!(e.message.contains("over the limit"), "{}", e.message);
        // Nothing was stored for the refused messages: the first accepted one is seq 0.
        let mut c = SessionClient::open(bus, "assistant", "s1", "u")
            .await
            .unwrap();
        assert_eq!(c.turn("short", T, |_| {}).await.unwrap().accepted.seq, 0);
    });
}

#[test]
fn a_session_cannot_be_hijacked_by_another_user() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut alice = SessionClient::open(engine.bus.clone(), "assistant", "shared", "alice")
            .await
            .unwrap();
        alice.turn("hello", T, |_| {}).await.unwrap();
        let e = error_reply(
            &engine.bus,
            "hermes.in.assistant.shared",
            message("shared", "mallory", "hi").encode().unwrap(),
        )
        .await;
        assert_eq!(e.code, "wrong_user");
    });
}

#[test]
fn an_mcp_server_that_exits_is_reported_and_the_engine_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers.push(McpServerConfig {
        name: "broken".into(),
        command: "sh".into(),
        args: vec!["-c".into(), "echo dying >&2; exit 3".into()],
        env: Default::default(),
        timeout_secs: 5,
        ..Default::default()
    });
    with_engine(config, |engine| async move {
        let catalog = engine.mcp.clone().unwrap();
        let broken = catalog.servers.iter().find(|s| s.name == "broken").unwrap();
        assert_eq!(broken.status, "failed");
        assert!(
            broken
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("broken"),
            "{:?}",
            broken.error
        );
        let good = catalog
            .servers
            .iter()
            .find(|s| s.name == "catalog")
            .unwrap();
        assert_eq!(good.status, "ready");
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "u")
            .await
            .unwrap();
        assert_eq!(
            c.turn("hello", T, |_| {}).await.unwrap().answer.as_deref(),
            Some("ok")
        );
    });
}
