//! Turns that wait: a `risk = high` call pauses the turn in `waiting_user` until the user
//! confirms or declines it (also across a restart), and an async tool's job pauses it in
//! `waiting_job` until the job's completion wakes the session — including a completion that
//! happened while the session service was down.

use crate::common::scenario::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

use hermes::actors::ActorSet;
use hermes::bus::{self, rpc, SharedBus};
use hermes::client::SessionClient;
use hermes::config::Config;
use hermes::engine::Engine;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{ToolStatus, TurnEvent};
use hermes::store::sessions::SessionStore;
use hermes::store::tasks::TurnPhase;
use hermes::tools::metrics::ToolMetrics;
use hermes::tools::ToolErrorCode;

use crate::common::engine::{test_config, with_engine};
use crate::common::hermes_proc::Serve;
use crate::common::nats_server::NatsServer;

const T: Duration = Duration::from_secs(60);

fn script() -> Scenario {
    Scenario::new("waiting-turns")
        .rule(on_user(&["transfer"]).calls("add", json!({"a": 40, "b": 2})))
        .rule(after_tool("add").says("Transfer step finished."))
        .rule(
            on_user(&["slow report"])
                .calls("generate_report", json!({"topic": "laptops", "seconds": 3})),
        )
        .rule(
            on_user(&["report"]).calls("generate_report", json!({"topic": "phones", "seconds": 1})),
        )
        .rule(after_tool("generate_report").says("Your report is ready."))
        .rule(on_user(&[]).says("Hello."))
}

/// The test config with `add` turned into a high-risk write (as `[[tools.define]]` does).
fn config_with_risky_add(dir: &std::path::Path) -> Config {
    let mut config = test_config(dir, &script());
    config.tools.define =
        vec![toml::from_str("name = \"add\"\nrisk = \"high\"\neffect = \"write\"").unwrap()];
    config.mcp.servers.clear();
    config
}

async fn metrics(bus: &SharedBus) -> ToolMetrics {
    let request = Envelope::request(hermes::protocol::request::ToolsMetricsRequest);
    let reply: Envelope<ToolMetrics> = rpc::request(bus.as_ref(), request.clone(), T)
        .await
        .unwrap();
    reply.body
}

fn sessions(engine: &Engine) -> SessionStore {
    SessionStore::open(engine.db.as_ref().unwrap()).unwrap()
}

fn phase(engine: &Engine, agent: &str, session: &str) -> Option<TurnPhase> {
    let task = sessions(engine).task(agent, session).unwrap();
    task.turn.map(|t| t.phase)
}

#[test]
fn a_high_risk_call_waits_for_the_users_confirmation_and_then_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config_with_risky_add(dir.path()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "risky", "u-1")
            .await
            .unwrap();
        let paused = c.turn("transfer 42 please", T, |_| {}).await.unwrap();
        let pending = paused.needs_confirmation.clone().expect("the turn pauses");
        assert_eq!(pending.name, "add");
        assert!(paused.answer.is_none());
        assert_eq!(
            phase(&engine, "assistant", "risky"),
            Some(TurnPhase::WaitingUser)
        );
        assert_eq!(
            metrics(&engine.bus).await.executions,
            0,
            "nothing ran before the decision"
        );

        // A new message while the turn waits is refused with what to do instead.
        let busy = c.send("something else", T).await.unwrap_err().to_string();
        assert!(
            busy.contains("awaiting_confirmation") && busy.contains("--confirm"),
            "{busy}"
        );

        let done = c
            .confirm_and_follow(true, Some(&pending.call_id), T, |_| {})
            .await
            .unwrap();
        assert_eq!(
            done.answer.as_deref(),
            Some("Transfer step finished."),
            "{:?}",
            done.events
        );
        let result = done
            .events
            .iter()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(result.status, ToolStatus::Ok);
        assert_eq!(result.output, serde_json::json!({"result": 42}));
        let m = metrics(&engine.bus).await;
        assert_eq!(m.high_risk_confirmed_executions, 1);
        assert_eq!(m.high_risk_unconfirmed_executions, 0);
        assert_eq!(m.executions, 1);

        // Nothing is left to confirm.
        let again = c.confirm(true, None, T).await.unwrap_err().to_string();
        assert!(again.contains("nothing_to_confirm"), "{again}");
    });
}

#[test]
fn a_declined_call_never_runs_and_the_model_is_told_the_user_said_no() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config_with_risky_add(dir.path()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "declined", "u-1")
            .await
            .unwrap();
        let paused = c.turn("transfer 42 please", T, |_| {}).await.unwrap();
        assert!(paused.needs_confirmation.is_some());
        let done = c.confirm_and_follow(false, None, T, |_| {}).await.unwrap();
        assert!(done.answer.is_some(), "{:?}", done.events);
        let error = done
            .events
            .iter()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => result.error.clone(),
                _ => None,
            })
            .expect("the declined call has an error result");
        assert_eq!(error.code, ToolErrorCode::DeclinedByUser);
        let log = sessions(&engine).load("assistant", "declined").unwrap().1;
        let tool_message = log
            .iter()
            .find(|m| m.message.tool_call_id.is_some())
            .unwrap();
        assert!(
            tool_message.message.content.contains("declined_by_user"),
            "the model sees the refusal: {}",
            tool_message.message.content
        );
        let m = metrics(&engine.bus).await;
        assert_eq!(m.executions, 0);
        assert_eq!(m.high_risk_unconfirmed_executions, 0);
        assert_eq!(m.high_risk_refused, 0, "a declined call is never even sent");
    });
}

#[test]
fn a_turn_waiting_for_confirmation_survives_an_engine_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_risky_add(dir.path());
    with_engine(config.clone(), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "restart", "u-1")
            .await
            .unwrap();
        let paused = c.turn("transfer 42 please", T, |_| {}).await.unwrap();
        assert!(paused.needs_confirmation.is_some());
    });
    with_engine(config, |engine| async move {
        assert_eq!(
            phase(&engine, "assistant", "restart"),
            Some(TurnPhase::WaitingUser),
            "still waiting after the restart, and not resumed on its own"
        );
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "restart", "u-1")
            .await
            .unwrap();
        let done = c.confirm_and_follow(true, None, T, |_| {}).await.unwrap();
        assert_eq!(done.answer.as_deref(), Some("Transfer step finished."));
        assert_eq!(
            metrics(&engine.bus).await.high_risk_unconfirmed_executions,
            0
        );
    });
}

#[test]
fn an_async_job_completion_wakes_the_session_and_the_turn_answers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(config_with_risky_add(dir.path()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "jobs", "u-1")
            .await
            .unwrap();
        let t = c.turn("a report on phones", T, |_| {}).await.unwrap();
        assert_eq!(
            t.answer.as_deref(),
            Some("Your report is ready."),
            "{:?}",
            t.events
        );
        let waited = t
            .events
            .iter()
            .position(|e| matches!(e, TurnEvent::JobWaiting { .. }))
            .expect("the turn announced that it waits for the job");
        let result = t.events[waited..]
            .iter()
            .find_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
            .expect("the job's result arrives after the wait");
        assert_eq!(result.status, ToolStatus::Ok);
        assert!(result.via.starts_with("job:"), "{}", result.via);
        assert_eq!(result.output["topic"], "phones");
        let log = sessions(&engine).load("assistant", "jobs").unwrap().1;
        let tool_messages: Vec<_> = log
            .iter()
            .filter(|m| m.message.tool_call_id.is_some())
            .collect();
        assert_eq!(tool_messages.len(), 1, "one result per call, the final one");
        assert!(tool_messages[0].message.content.contains("phones"));
    });
}

#[test]
fn a_job_that_ends_while_the_session_service_is_down_is_picked_up_on_restart() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tools_config = dir.path().join("tools.toml");
    std::fs::write(
        &tools_config,
        format!(
            "[engine]\ndata_dir = \"{}\"\n[mcp]\nservers = []\n{}",
            dir.path().join("tools-data").display(),
            crate::common::scenario::demo_builtin_toml()
        ),
    )
    .unwrap();
    let executor = Serve::start(&tools_config, &nats.url(), "tool-executor");
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers.clear();
    config.bus.url = nats.url();
    let config = Arc::new(config);
    let core = ActorSet::parse("session,planner,memory-extractor").unwrap();

    let job_id = in_system(|io| {
        let config = config.clone();
        async move {
            let engine = Engine::start(config, core, io).await.unwrap();
            let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s-down", "u-1")
                .await
                .unwrap();
            c.send("a slow report on laptops", T).await.unwrap();
            let job_id = loop {
                match c
                    .next_event(T)
                    .await
                    .unwrap()
                    .expect("events until the job waits")
                {
                    TurnEvent::JobWaiting { job_id, .. } => break job_id,
                    TurnEvent::Answer { text, .. } => panic!("answered without waiting: {text}"),
                    _ => {}
                }
            };
            engine.shutdown().await;
            job_id
        }
    });
    // The job finishes while no session service runs: its completion event reaches nobody.
    let watcher = tokio::runtime::Runtime::new().unwrap();
    watcher.block_on(async {
        let bus = bus::connect(&nats.url(), None).await.unwrap();
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let status = job_status(&bus, &job_id).await;
            if status == "done" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job stuck in {status}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    in_system(|io| async move {
        let bus = bus::connect(&config.bus.url, None).await.unwrap();
        // Subscribed before the service starts, so the resumed turn's answer is not missed.
        let mut c = SessionClient::open(bus, "assistant", "s-down", "u-1")
            .await
            .unwrap();
        let engine = Engine::start(config.clone(), core, io).await.unwrap();
        let answer = loop {
            match c
                .next_event(T)
                .await
                .unwrap()
                .expect("the resumed turn answers")
            {
                TurnEvent::Answer { text, .. } => break text,
                TurnEvent::Error { message, .. } => panic!("{message}"),
                _ => {}
            }
        };
        assert_eq!(answer, "Your report is ready.");
        engine.shutdown().await;
    });
    executor.stop();
}

async fn job_status(bus: &SharedBus, job_id: &str) -> String {
    let request = Envelope::request(hermes::protocol::ToolCallRequest {
        call_id: "watch".into(),
        name: "job_status".into(),
        arguments: serde_json::json!({"job_id": job_id}),
        ..Default::default()
    });
    let reply: Envelope<hermes::protocol::ToolCallResult> =
        rpc::request(bus.as_ref(), request.clone(), T)
            .await
            .unwrap();
    reply.body.output["status"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Run `body` inside an actix system with a multi-threaded I/O runtime, as `hermes serve` does.
fn in_system<R, F, Fut>(body: F) -> R
where
    F: FnOnce(tokio::runtime::Handle) -> Fut,
    Fut: std::future::Future<Output = R>,
{
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = io.handle().clone();
    let out = actix::System::new().block_on(body(handle));
    io.shutdown_timeout(Duration::from_secs(2));
    out
}

#[test]
fn hermes_send_confirm_resumes_a_paused_turn_from_another_process() {
    use crate::common::hermes_proc::hermes;
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(&scenario, script().to_toml()).unwrap();
    let config = dir.path().join("hermes.toml");
    let replay = format!(
        "provider = \"replay\"\nscenario = \"{}\"\n",
        scenario.display()
    );
    std::fs::write(
        &config,
        format!(
            "[engine]\ndata_dir = \"{}\"\n[mcp]\nservers = []\n\
             [models.planner]\n{replay}[models.extractor]\n{replay}[models.summariser]\n{replay}\
             [[tools.define]]\nname = \"add\"\nrisk = \"high\"\neffect = \"write\"\n{}",
            dir.path().join("db").display(),
            crate::common::scenario::demo_builtin_toml()
        ),
    )
    .unwrap();
    let send = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            config.to_str().unwrap(),
            "send",
            "--session",
            "cli-risky",
        ];
        args.extend_from_slice(extra);
        let out = hermes().args(&args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let (ok, stdout, stderr) = send(&["--text", "transfer 42 please"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("[confirmation.required]"), "{stdout}");
    assert!(stderr.contains("--confirm or --deny"), "{stderr}");
    assert!(!stdout.contains("[answer]"), "{stdout}");

    let (ok, stdout, stderr) = send(&["--confirm"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("[tool.result] add ok"), "{stdout}");
    assert!(
        stdout.contains("[answer] Transfer step finished."),
        "{stdout}"
    );

    let (ok, _, stderr) = send(&["--deny"]);
    assert!(!ok, "nothing is left to decide");
    assert!(stderr.contains("nothing_to_confirm"), "{stderr}");
}

#[test]
fn the_user_can_talk_while_a_job_runs_and_the_job_turn_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.mcp.servers.clear();
    with_engine(config, |engine| async move {
        let mut client = SessionClient::open(engine.bus.clone(), "assistant", "talk", "u1")
            .await
            .unwrap();
        client.send("a slow report please", T).await.unwrap();
        let report_turn = loop {
            match client.next_event(T).await.unwrap() {
                Some(TurnEvent::JobWaiting { turn_id, .. }) => break turn_id,
                Some(_) => continue,
                None => panic!("the report turn never waited for its job"),
            }
        };
        // While the 3 s job runs, a new message is answered instead of refused.
        let side = client
            .turn("how far along is it?", T, |_| {})
            .await
            .unwrap();
        assert_eq!(side.answer.as_deref(), Some("Hello."), "{:?}", side.error);
        let late = loop {
            match client.next_event(T).await.unwrap() {
                Some(TurnEvent::Answer { turn_id, text }) => break (turn_id, text),
                Some(_) => continue,
                None => panic!("the report turn never answered"),
            }
        };
        assert_eq!(late.0, report_turn, "the late answer names its own turn");
        assert_eq!(late.1, "Your report is ready.");
    });
}
