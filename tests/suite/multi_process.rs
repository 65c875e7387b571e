//! Hermes split over processes on a real nats-server, and crash safety of acknowledged input.

use crate::common::scenario::*;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hermes::bus::{self, rpc};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{Accepted, UserMessage};
use hermes::store::sessions::SessionStore;

use crate::common::hermes_proc::{hermes, send_json, Serve};
use crate::common::nats_server::NatsServer;

fn script() -> Scenario {
    sum_scenario("multi-process")
}

/// A config file for a serve process: data in `dir`, the scripted model, the catalog server.
fn write_config(dir: &Path, name: &str) -> std::path::PathBuf {
    write_serve_config(dir, name, &script())
}

#[test]
fn a_turn_with_a_tool_call_crosses_two_processes_over_nats() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let core = Serve::start(
        &write_config(dir.path(), "core"),
        &nats.url(),
        "session,planner,memory-extractor",
    );
    let tools = Serve::start(
        &write_config(dir.path(), "tools"),
        &nats.url(),
        "tool-executor,mcp-bridge",
    );
    let stdout = send_json(&nats.url(), "mp1", "u1", "what is the sum?");
    assert!(stdout.contains(r#""type":"tool.call""#), "{stdout}");
    assert!(stdout.contains(r#""status":"ok""#), "{stdout}");
    assert!(stdout.contains("The sum is 42."), "{stdout}");
    drop((core, tools));
}

fn request_accepted(url: &str, session: &str, text: &str) -> Accepted {
    send_accepted(url, session, text, 1).remove(0)
}

/// Send one envelope of `text` to the assistant's `session` `times` times, as a publisher that
/// lost its acknowledgement would; the `accepted` each send got.
fn send_accepted(url: &str, session: &str, text: &str, times: usize) -> Vec<Accepted> {
    crate::common::runtime::multi_thread(2).block_on(async {
        let bus = bus::connect(url, None).await.unwrap();
        let env = Envelope::request(UserMessage::text(text)).for_session(
            "assistant",
            session,
            Some("u1"),
        );
        let mut accepted = Vec::new();
        for _ in 0..times {
            let reply: Envelope<Accepted> =
                rpc::request(bus.as_ref(), env.clone(), Duration::from_secs(60))
                    .await
                    .expect("every send of the message is acknowledged");
            accepted.push(reply.body);
        }
        accepted
    })
}

/// The messages of the assistant's `session` in a stopped serve's data directory.
fn stored_messages(data: &Path, session: &str) -> Vec<hermes::store::sessions::StoredMessage> {
    let db = hermes::store::durability::Durable::from(hermes::store::open(data).unwrap());
    SessionStore::open(&db)
        .unwrap()
        .messages("assistant", session)
        .unwrap()
}

#[test]
fn an_acknowledged_message_survives_kill_9_and_the_session_reloads() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "crash");
    let serve = Serve::start(&config, &nats.url(), "all");
    let first = request_accepted(&nats.url(), "crash1", "remember this message");
    serve.kill9();

    let serve = Serve::start(&config, &nats.url(), "all");
    let second = request_accepted(&nats.url(), "crash1", "and this one");
    assert!(
        second.seq > first.seq,
        "the restarted session continued its log: {first:?} then {second:?}"
    );
    serve.stop();

    let messages = stored_messages(&dir.path().join("crash-data"), "crash1");
    let stored = messages
        .iter()
        .find(|m| m.id == first.message_id)
        .expect("the acknowledged message is stored");
    assert_eq!(stored.message.content, "remember this message");
    assert!(messages.iter().any(|m| m.id == second.message_id));
}

/// A publisher that lost its `accepted` and sends the same envelope again is answered again —
/// the inbox drops the resend by its id, and the session answers a repeat of it — and the
/// message is in the session once.
#[test]
fn a_message_sent_again_with_the_same_id_is_acknowledged_again_and_stored_once() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "again");
    let serve = Serve::start(&config, &nats.url(), "all");
    let replies = send_accepted(&nats.url(), "again1", "say it once", 2);
    let first = &replies[0];
    assert_eq!(first, &replies[1]);
    serve.stop();

    let messages = stored_messages(&dir.path().join("again-data"), "again1");
    let copies = messages.iter().filter(|m| m.id == first.message_id).count();
    assert_eq!(copies, 1, "{messages:?}");
}

/// Each `answer` event published for the assistant's `session` on `url`, as (turn id, envelope
/// id), from now on; collected by a task on `rt`.
fn watch_answers(
    rt: &tokio::runtime::Runtime,
    url: &str,
    session: &str,
) -> std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let subject = hermes::protocol::subjects::outbound_any_reader("assistant", session).unwrap();
    let bus = rt.block_on(bus::connect(url, None)).unwrap();
    let mut out = rt.block_on(bus.subscribe(&subject)).unwrap();
    let into = seen.clone();
    rt.spawn(async move {
        let _bus = bus;
        while let Some(m) = out.next().await {
            let id = Envelope::decode(&m.payload, usize::MAX)
                .map(|e| e.id)
                .unwrap_or_default();
            for event in hermes::client::events_of(&m) {
                if let hermes::protocol::TurnEvent::Answer { turn_id, .. } = event {
                    into.lock().unwrap().push((turn_id, id.clone()));
                }
            }
        }
    });
    seen
}

/// A stop (SIGTERM) right after an answer, before the session wrote the note that its
/// extraction is queued (that note waits for the session's next write), writes it on the way
/// out: started again, the session does not deliver that answer a second time.
#[test]
fn a_graceful_restart_right_after_an_answer_sends_no_answer_again() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "graceful");
    let rt = crate::common::runtime::multi_thread(2);
    let answers = watch_answers(&rt, &nats.url(), "graceful1");
    let serve = Serve::start(&config, &nats.url(), "all");
    let first = send_json(&nats.url(), "graceful1", "u1", "what is the sum?");
    assert!(first.contains("The sum is 42."), "{first}");
    serve.stop();

    let serve = Serve::start(&config, &nats.url(), "all");
    let second = send_json(&nats.url(), "graceful1", "u1", "and now?");
    assert!(second.contains(r#""type":"answer""#), "{second}");
    // A re-sent answer leaves as the loaded session starts, before the second turn's.
    std::thread::sleep(Duration::from_millis(500));
    serve.stop();

    let answers = answers.lock().unwrap().clone();
    assert_eq!(answers.len(), 2, "one answer per turn: {answers:?}");
    assert_ne!(answers[0].0, answers[1].0, "{answers:?}");
}

#[test]
fn the_ready_file_exists_exactly_while_serve_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    // Left by a killed process: not a sign of readiness.
    std::fs::write(&ready, "stale").unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, "[mcp]\nservers = []\n").unwrap();
    let mut child = hermes()
        .arg("--config")
        .arg(&config)
        .args(["serve", "--actors", "planner", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let written = loop {
        let content = std::fs::read_to_string(&ready).unwrap_or_default();
        if content.trim() == child.id().to_string() {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SIGTERM, as docker stop sends.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(
        written,
        "serve wrote its pid to the ready file once serving"
    );
    assert!(
        status.success(),
        "serve stops cleanly on SIGTERM: {status:?}"
    );
    assert!(!ready.exists(), "the ready file is removed on stop");
}
