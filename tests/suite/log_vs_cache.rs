//! A session's data directory (the sled cache) and its replicated log (JetStream) disagreeing,
//! on a real nats-server with real `hermes serve` processes: each case ends with the session
//! answered from the log's truth (issue 28).
//!
//! - the log rebuilt empty under a data directory that remembers the session (a new
//!   nats-server store): the cache re-seeds the log and the next message is answered;
//! - the data directory lost while the log is intact: the session goes on from the log;
//! - the two diverged (another deployment served the session meanwhile): the log wins, and
//!   `hermes sessions show` names the local messages kept aside;
//! - the log wiped while a turn waits for an async job: the job, lost with the queue, is
//!   queued again from the data directory and its turn answers.

use std::path::Path;

use serde_json::json;

use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

fn script() -> Scenario {
    Scenario::new("log-vs-cache")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(
            on_user(&["report"]).calls("generate_report", json!({"topic": "tides", "seconds": 8})),
        )
        .rule(after_tool("generate_report").says("Your tide report is ready."))
        .rule(
            on_user(&[])
                .role("extractor")
                .says(r#"{"memory_updates": []}"#),
        )
        .rule(on_user(&[]).says("Noted."))
}

/// `hermes --config CONFIG ARGS…` that must succeed: its stdout.
fn ok(config: &Path, args: &[&str]) -> String {
    let out = hermes()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("hermes runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "hermes {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// Send `text` to session `s1` and wait (at most the 30 s request timeout) for the turn's end:
/// what the client printed.
fn send(config: &Path, url: &str, text: &str) -> String {
    ok(
        config,
        &[
            "send",
            "--bus",
            url,
            "--session",
            "s1",
            "--user",
            "u1",
            "--text",
            text,
            "--timeout",
            "30",
        ],
    )
}

fn serve(config: &Path, url: &str, data: &Path) -> Serve {
    Serve::start_with(
        config,
        url,
        "all",
        &["--data-dir", data.to_str().expect("a UTF-8 path")],
    )
}

fn show(config: &Path, url: &str) -> String {
    ok(config, &["sessions", "show", "s1", "--bus", url])
}

#[test]
fn a_data_directory_that_outlives_its_log_is_answered_once_the_log_is_rebuilt_empty() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "outlives", &script());
    let data = dir.path().join("data");
    let mut first_nats = NatsServer::start();
    let first = serve(&config, &first_nats.url(), &data);
    let out = send(&config, &first_nats.url(), "sum, please");
    assert!(out.contains("The sum is 42."), "{out}");
    first.stop();
    first_nats.stop();

    // A rebuilt cluster: a new nats-server with an empty store, the same data directory.
    let nats = NatsServer::start();
    let url = nats.url();
    let serving = serve(&config, &url, &data);
    let out = send(&config, &url, "the sum once more");
    assert!(
        out.contains("The sum is 42."),
        "the second message is answered: {out}"
    );
    // The log was re-seeded from the cache: it holds both turns.
    let shown = show(&config, &url);
    assert!(
        shown.contains("sum, please") && shown.contains("the sum once more"),
        "{shown}"
    );
    serving.stop();
}

#[test]
fn a_session_whose_data_directory_was_lost_goes_on_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "lost", &script());
    let nats = NatsServer::start();
    let url = nats.url();
    let data = dir.path().join("data");
    let first = serve(&config, &url, &data);
    let out = send(&config, &url, "sum, please");
    assert!(out.contains("The sum is 42."), "{out}");
    first.stop();
    std::fs::remove_dir_all(&data).unwrap();

    let serving = serve(&config, &url, &data);
    let out = send(&config, &url, "remember me?");
    assert!(out.contains("Noted."), "{out}");
    let shown = show(&config, &url);
    assert!(
        shown.contains("sum, please") && shown.contains("remember me?"),
        "{shown}"
    );
    // The rebuilt cache serves the session's history to the planner: the first turn is in it.
    serving.stop();
}

#[test]
fn a_data_directory_that_diverged_from_the_log_loses_to_it_and_what_it_kept_aside_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "diverged", &script());
    let old_data = dir.path().join("old-data");
    let mut old_nats = NatsServer::start();
    let old = serve(&config, &old_nats.url(), &old_data);
    let out = send(&config, &old_nats.url(), "sum of the old days");
    assert!(out.contains("The sum is 42."), "{out}");
    old.stop();
    old_nats.stop();

    // A new deployment serves s1 from scratch while the old data directory is away.
    let nats = NatsServer::start();
    let url = nats.url();
    let new = serve(&config, &url, &dir.path().join("new-data"));
    let out = send(&config, &url, "hello from the new cluster");
    assert!(out.contains("Noted."), "{out}");
    new.stop();

    // The old data directory comes back to the new deployment.
    let back = serve(&config, &url, &old_data);
    let out = send(&config, &url, "and the sum now");
    assert!(out.contains("The sum is 42."), "{out}");
    let shown = show(&config, &url);
    assert!(
        shown.contains("hello from the new cluster"),
        "the log wins: {shown}"
    );
    assert!(
        !shown.contains("old days"),
        "the diverging message is not served: {shown}"
    );
    assert!(
        shown.contains("aside") && shown.contains("sessions_aside"),
        "`sessions show` names the kept-aside messages: {shown}"
    );
    back.stop();
}

#[test]
fn a_job_lost_with_a_wiped_log_is_queued_again_and_its_turn_answers() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "job-lost", &script());
    let data = dir.path().join("data");
    let mut first_nats = NatsServer::start();
    let first = serve(&config, &first_nats.url(), &data);
    // The turn waits for the 8-second job; the client gives up on its answer early.
    let out = hermes()
        .arg("--config")
        .arg(&config)
        .args([
            "send",
            "--bus",
            &first_nats.url(),
            "--session",
            "s1",
            "--user",
            "u1",
        ])
        .args(["--text", "a report please", "--timeout", "2"])
        .output()
        .expect("hermes runs");
    let waiting = String::from_utf8_lossy(&out.stdout);
    assert!(waiting.contains("generate_report"), "{waiting}");
    first.kill9();
    first_nats.stop();

    // A rebuilt cluster under the same data directory: the job's queue item went with it.
    let nats = NatsServer::start();
    let url = nats.url();
    let serving = serve(&config, &url, &data);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let shown = show(&config, &url);
        if shown.contains("Your tide report is ready.") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job's turn never answered after the wipe:\n{shown}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    serving.stop();
}

#[test]
fn a_session_whose_log_refuses_every_append_tells_the_client_why_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "log-denied", &script());
    // Everything allowed but publishing to the session and memory logs: every append fails.
    let nats_conf = dir.path().join("nats.conf");
    std::fs::write(
        &nats_conf,
        r#"
authorization {
  users = [
    { user: "hermes", password: "denied", permissions: { publish: { allow: [">"], deny: ["hermes.slog.>", "hermes.mlog.>"] }, subscribe: { allow: [">"] } } }
  ]
}
no_auth_user: "hermes"
"#,
    )
    .unwrap();
    let nats = NatsServer::start_with_config(&nats_conf, &[]);
    let url = nats.url();
    let serving = serve(&config, &url, &dir.path().join("data"));
    let started = std::time::Instant::now();
    let out = hermes()
        .arg("--config")
        .arg(&config)
        .args(["send", "--bus", &url, "--session", "s1", "--user", "u1"])
        .args(["--text", "sum, please", "--timeout", "30"])
        .output()
        .expect("hermes runs");
    let told = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{told}");
    assert!(
        told.contains("session_unavailable") && told.contains("cannot be served"),
        "the client is told the cause, not left waiting: {told}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "told within the request timeout: {told}"
    );
    serving.stop();
}
