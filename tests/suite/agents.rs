//! Agents together and events in: the team of config/team.toml (triage delegating in parallel
//! to logistics and care) driven by its trigger, on the embedded bus and on a real
//! nats-server, through kill -9, with events that do not fit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use hermes::bus::SharedBus;
use hermes::config::Config;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::TurnEvent;

use crate::common::engine::with_engine;
use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::python_worker::find_python;
use crate::common::runtime::multi_thread;

const ORDER: &str = "JD-20251111-0042";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// config/team.toml with its data in `dir`, as a file for `hermes serve`.
fn team_file(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("config/team.toml")).unwrap();
    let path = dir.join("team.toml");
    let data = dir.join("data");
    std::fs::write(
        &path,
        format!("{text}\n[engine]\ndata_dir = \"{}\"\n", data.display()),
    )
    .unwrap();
    path
}

fn event(event_id: &str) -> Bytes {
    serde_json::to_vec(&serde_json::json!({
        "event_id": event_id,
        "customer": "u-1001",
        "days_late": 2,
        "tracking": "SF1428837610295",
    }))
    .unwrap()
    .into()
}

/// The turn events of a `hermes.out.<agent>.<session>` message (one, or several that left
/// together): (agent, session, event) each.
fn turn_events(subject: &str, payload: &[u8]) -> Vec<(String, String, TurnEvent)> {
    let mut tokens = subject.split('.').skip(2);
    let (Some(agent), Some(session)) = (tokens.next(), tokens.next()) else {
        return Vec::new();
    };
    let Ok(envelope) = Envelope::decode_events(payload, usize::MAX) else {
        return Vec::new();
    };
    envelope
        .body
        .events
        .into_iter()
        .map(|event| (agent.to_string(), session.to_string(), event))
        .collect()
}

#[test]
fn the_team_demo_plays_on_the_embedded_defaults() {
    let out = hermes()
        .args(["demo", "team", "--timeout", "60"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "[x] triage delegated to logistics and care in one step",
        "[x] both delegated agents ran at the same time",
        "[x] logistics waited on its async carrier-tracking job",
        "[x] care recalled the customer's remembered preferences",
        "[x] one reply was published",
    ] {
        assert!(stdout.contains(line), "missing `{line}` in\n{stdout}");
    }
}

#[test]
fn agents_ls_shows_each_agents_model_tools_and_delegates() {
    let out = hermes()
        .args(["--config", "config/team.toml", "agents", "ls"])
        .current_dir(repo())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("delegates to agent__logistics, agent__care"),
        "{stdout}"
    );
    assert!(
        stdout.contains("model        care (replay builtin:team)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("triggers     order-delayed (shop.orders.*.delayed)"),
        "{stdout}"
    );
}

#[test]
fn an_event_that_does_not_fit_is_audited_and_the_next_one_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::team().unwrap();
    config.engine.data_dir = dir.path().join("data");
    with_engine(config, |engine| async move {
        let bus = engine.bus.clone();
        let mut audit = bus.subscribe("hermes.audit.trigger").await.unwrap();
        let mut replies = bus.subscribe("shop.orders.*.reply").await.unwrap();
        for bad in [&b"not json"[..], br#"{"event_id": "e0", "days_late": 1}"#] {
            bus.publish(&format!("shop.orders.{ORDER}.delayed"), Bytes::from(bad))
                .await
                .unwrap();
            let record = tokio::time::timeout(Duration::from_secs(10), audit.next())
                .await
                .expect("an audit record")
                .unwrap();
            let text = String::from_utf8_lossy(&record.payload).to_string();
            assert!(
                text.contains("not JSON") || text.contains("no field `customer`"),
                "{text}"
            );
        }
        bus.publish(&format!("shop.orders.{ORDER}.delayed"), event("e1"))
            .await
            .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), replies.next())
            .await
            .expect("the good event is answered")
            .unwrap();
        assert!(String::from_utf8_lossy(&reply.payload).contains("SF1428837610295"));
    });
}

#[test]
fn an_event_published_before_hermes_starts_is_answered_once_on_its_reply_subject() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = team_file(dir.path());
    let publish = |event_id: &str, timeout: &str| {
        Command::new(find_python())
            .arg(repo().join("examples/publish_event.py"))
            .args([
                "--url",
                &nats.url(),
                "--event-id",
                event_id,
                "--timeout",
                timeout,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Hermes has never run on this server: the trigger stream does not exist yet, so this
    // event is lost to core NATS. Start Hermes once so the stream exists, then stop it.
    let first = Serve::start(&config, &nats.url(), "all");
    first.stop();
    let script = publish("evt-before-start", "90");
    std::thread::sleep(Duration::from_secs(1));
    let serve = Serve::start(&config, &nats.url(), "all");
    let out = script.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("published shop.orders.JD-20251111-0042.delayed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("SF1428837610295"),
        "the agent's answer: {stdout}"
    );
    // The same event again (same Nats-Msg-Id): handled once, so no second answer comes.
    let again = publish("evt-before-start", "6").wait_with_output().unwrap();
    assert!(
        !again.status.success(),
        "a repeated event must not be answered twice: {}",
        String::from_utf8_lossy(&again.stdout)
    );
    drop(serve);
}

#[test]
fn killing_the_process_while_delegated_agents_run_loses_and_repeats_nothing() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = team_file(dir.path());
    let mut serve = Some(Serve::start(&config, &nats.url(), "all"));
    let rt = multi_thread(2);
    let url = nats.url();
    let bus: SharedBus = rt.block_on(hermes::bus::connect(&url, None)).unwrap();
    // Once both children have their task, kill -9 the process that runs them and their parent
    // (logistics' carrier job takes 2 s, so both are mid-way), and start it again.
    let (events, answers) = rt.block_on(crash_mid_delegation(&bus, ORDER, || {
        if let Some(running) = serve.take() {
            running.kill9();
        }
        serve = Some(Serve::start(&config, &url, "all"));
    }));
    assert_eq!(answers, 1, "exactly one reply after the crash");
    let children: std::collections::BTreeSet<String> = events
        .iter()
        .filter_map(|(_, _, e)| match e {
            TurnEvent::AgentDelegated { session, .. } => Some(session.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        children.len(),
        2,
        "no task was delegated twice: {children:?}"
    );
    for agent in ["logistics", "care"] {
        let answered = events
            .iter()
            .filter(|(a, _, e)| a == agent && matches!(e, TurnEvent::Answer { .. }))
            .count();
        assert!(answered >= 1, "{agent} answered after the restart");
    }
    let triage_answers = events
        .iter()
        .filter(|(a, _, e)| a == "triage" && matches!(e, TurnEvent::Answer { .. }))
        .count();
    assert!(triage_answers >= 1);
}

/// Turn events from `out` until triage's session `session` has delegated both tasks.
async fn until_delegated(
    out: &mut hermes::bus::Subscription,
    session: &str,
) -> Vec<(String, String, TurnEvent)> {
    let mut events = Vec::new();
    let mut delegated = 0;
    while delegated < 2 {
        let m = tokio::time::timeout(Duration::from_secs(30), out.next())
            .await
            .expect("the triage turn delegates")
            .unwrap();
        for e in turn_events(&m.subject, &m.payload) {
            delegated +=
                usize::from(e.1 == session && matches!(e.2, TurnEvent::AgentDelegated { .. }));
            events.push(e);
        }
    }
    events
}

/// One event for `order`, with `crash` run once its triage turn has delegated both tasks;
/// the events seen and the replies published until a few seconds after the first reply.
async fn crash_mid_delegation(
    bus: &SharedBus,
    order: &str,
    crash: impl FnOnce(),
) -> (Vec<(String, String, TurnEvent)>, usize) {
    let mut out = bus.subscribe("hermes.out.>").await.unwrap();
    let mut replies = bus
        .subscribe(&format!("shop.orders.{order}.reply"))
        .await
        .unwrap();
    bus.publish(
        &format!("shop.orders.{order}.delayed"),
        event(&format!("evt-{order}")),
    )
    .await
    .unwrap();
    let mut events = until_delegated(&mut out, &format!("order-{order}")).await;
    crash();
    let mut answers = 0;
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        tokio::select! {
            m = out.next() => {
                let m = m.unwrap();
                events.extend(turn_events(&m.subject, &m.payload));
            }
            r = replies.next() => {
                r.unwrap();
                answers += 1;
                // A second reply would come within a few seconds.
                deadline = tokio::time::Instant::now() + Duration::from_secs(4);
            }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    (events, answers)
}

#[test]
fn killing_either_of_two_session_processes_mid_delegation_loses_nothing() {
    let nats = NatsServer::start();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let configs: Vec<PathBuf> = dirs.iter().map(|d| team_file(d.path())).collect();
    let url = nats.url();
    let mut serves: Vec<Option<Serve>> = configs
        .iter()
        .map(|c| Some(Serve::start(c, &url, "all")))
        .collect();
    let rt = multi_thread(2);
    let bus: SharedBus = rt.block_on(hermes::bus::connect(&url, None)).unwrap();
    // Sessions are spread over both processes by partition: each round kills one of them
    // while a triage turn and its two children are in flight, wherever they run.
    for round in 0..2 {
        let order = format!("JD-R{round}");
        let (events, answers) = rt.block_on(crash_mid_delegation(&bus, &order, || {
            serves[round].take().unwrap().kill9();
        }));
        serves[round] = Some(Serve::start(&configs[round], &url, "all"));
        assert_eq!(answers, 1, "round {round}: exactly one reply");
        let children: std::collections::BTreeSet<String> = events
            .iter()
            .filter(|(_, s, _)| s == &format!("order-{order}"))
            .filter_map(|(_, _, e)| match e {
                TurnEvent::AgentDelegated { session, .. } => Some(session.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(children.len(), 2, "round {round}: no task delegated twice");
        for child in &children {
            assert!(
                events
                    .iter()
                    .any(|(_, s, e)| s == child && matches!(e, TurnEvent::Answer { .. })),
                "round {round}: child {child} answered"
            );
        }
    }
}

#[test]
fn a_handoff_sends_the_next_messages_to_care_and_sessions_show_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut config = Config::team().unwrap();
    config.engine.data_dir = data.clone();
    with_engine(config, |engine| async move {
        let mut client =
            hermes::client::SessionClient::open(engine.bus.clone(), "triage", "chat-1", "u-1001")
                .await
                .unwrap();
        let first = client
            .turn(
                "Please let me talk to care",
                Duration::from_secs(30),
                |_| {},
            )
            .await
            .unwrap();
        assert!(first.events.iter().any(
            |e| matches!(e, TurnEvent::Handoff { from, to, .. } if from == "triage" && to == "care")
        ));
        // Triage recalls no memories (memory.read = []); care does: its turn shows them.
        assert!(!first
            .events
            .iter()
            .any(|e| matches!(e, TurnEvent::MemoryRecalled { .. })));
        let second = client
            .turn(
                "How do I like to be contacted?",
                Duration::from_secs(30),
                |_| {},
            )
            .await
            .unwrap();
        assert!(
            second
                .events
                .iter()
                .any(|e| matches!(e, TurnEvent::MemoryRecalled { .. })),
            "the second message was answered by care: {:?}",
            second.events
        );
    });
    let out = hermes()
        .args(["--config", "config/team.toml", "sessions", "show", "chat-1"])
        .args(["--agent", "triage", "--data-dir", data.to_str().unwrap()])
        .current_dir(repo())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("handoff  triage → care"), "{stdout}");
    assert!(stdout.contains("answers  agent care now"), "{stdout}");
}

/// The team's config with a carrier job of 30 s instead of 2: the cancel must find the
/// logistics child still waiting on it however slow the machine is.
fn team_file_with_a_slow_carrier(dir: &Path) -> PathBuf {
    let scenario = dir.join("team-scenario.toml");
    let script = hermes::config::TEAM_SCENARIO.replace("seconds = 2 }", "seconds = 30 }");
    assert_ne!(
        script,
        hermes::config::TEAM_SCENARIO,
        "the carrier job's length is scripted"
    );
    std::fs::write(&scenario, script).unwrap();
    let path = team_file(dir);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("builtin:team", &scenario.display().to_string()),
    )
    .unwrap();
    path
}

#[test]
fn cancelling_a_delegating_turn_cancels_its_running_child() {
    let dir = tempfile::tempdir().unwrap();
    let file = team_file_with_a_slow_carrier(dir.path());
    let (config, _) = hermes::config::load::load_file(Some(&file)).unwrap();
    with_engine(config, |engine| cancel_mid_delegation(engine.bus.clone()));
}

#[test]
fn on_nats_cancelling_a_delegating_turn_cancels_its_running_child() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = team_file_with_a_slow_carrier(dir.path());
    let _serve = Serve::start(&config, &nats.url(), "all");
    let rt = multi_thread(2);
    let url = nats.url();
    rt.block_on(async move {
        let bus: SharedBus = hermes::bus::connect(&url, None).await.unwrap();
        cancel_mid_delegation(bus).await;
    });
}

/// Publish an event, cancel the triage turn once it has delegated, and check that the
/// still-running logistics child is cancelled and no answer follows.
async fn cancel_mid_delegation(bus: SharedBus) {
    let mut out = bus.subscribe("hermes.out.>").await.unwrap();
    bus.publish(&format!("shop.orders.{ORDER}.delayed"), event("evt-cancel"))
        .await
        .unwrap();
    until_delegated(&mut out, &format!("order-{ORDER}")).await;
    let session = format!("order-{ORDER}");
    let mut client = hermes::client::SessionClient::open(bus.clone(), "triage", &session, "u-1001")
        .await
        .unwrap();
    let stopped = client.cancel(Duration::from_secs(10)).await.unwrap();
    assert!(stopped.turn_id.is_some(), "{stopped:?}");
    assert!(
        stopped.children.iter().any(|c| c.starts_with("logistics.")),
        "logistics was still waiting on its carrier job: {stopped:?}"
    );
    // The child's turn ends as cancelled too, and no answer of triage follows.
    let mut child_cancelled = false;
    let mut triage_answered = false;
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Some(m)) = tokio::time::timeout_at(until, out.next()).await {
        for event in turn_events(&m.subject, &m.payload) {
            match event {
                (a, _, TurnEvent::Error { code, .. }) if a == "logistics" => {
                    child_cancelled |= code == "cancelled";
                }
                (a, _, TurnEvent::Answer { .. }) if a == "triage" => triage_answered = true,
                _ => {}
            }
        }
    }
    assert!(
        child_cancelled,
        "the delegated logistics turn was cancelled"
    );
    assert!(!triage_answered, "a cancelled turn does not answer");
}

#[test]
fn on_nats_a_session_waiting_for_its_agents_still_answers_a_new_message() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = team_file(dir.path());
    let _serve = Serve::start(&config, &nats.url(), "all");
    let rt = multi_thread(2);
    let url = nats.url();
    rt.block_on(async move {
        let bus: SharedBus = hermes::bus::connect(&url, None).await.unwrap();
        let session = format!("order-{ORDER}");
        let mut client =
            hermes::client::SessionClient::open(bus.clone(), "triage", &session, "u-1001")
                .await
                .unwrap();
        bus.publish(&format!("shop.orders.{ORDER}.delayed"), event("evt-talk"))
            .await
            .unwrap();
        let waiting_turn = loop {
            match client.next_event(Duration::from_secs(30)).await.unwrap() {
                Some(TurnEvent::AgentDelegated { turn_id, .. }) => break turn_id,
                Some(_) => continue,
                None => panic!("the triage turn never delegated"),
            }
        };
        // Logistics' carrier job takes 2 s: the session answers this meanwhile.
        let side = client
            .turn(
                "Is anyone looking at my order?",
                Duration::from_secs(30),
                |_| {},
            )
            .await
            .unwrap();
        assert!(
            side.answer.is_some(),
            "answered, not refused: {:?}",
            side.error
        );
        let late = loop {
            match client.next_event(Duration::from_secs(30)).await.unwrap() {
                Some(TurnEvent::Answer { turn_id, text }) => break (turn_id, text),
                Some(_) => continue,
                None => panic!("the waiting triage turn never answered"),
            }
        };
        assert_eq!(late.0, waiting_turn);
        assert!(late.1.contains("SF1428837610295"), "{}", late.1);
    });
}
