//! `/metrics`: `hermes serve --http ADDR` serves Prometheus text about the turns it ran.

use std::path::Path;

use crate::common::hermes_proc::{free_port, hermes, http_get, send_json, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

fn script() -> Scenario {
    sum_scenario("metrics")
}

/// A serve config: data in `dir`, the scripted model for every role.
fn write_config(dir: &Path) -> std::path::PathBuf {
    write_serve_config(dir, "metrics", &script())
}

/// The value of the sample line that starts with `series ` (name and labels exactly).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[test]
fn one_turn_with_a_tool_call_shows_in_metrics_over_http() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let serve = Serve::start_with(
        &write_config(dir.path()),
        &nats.url(),
        "all",
        &["--http", &addr],
    );
    let stdout = send_json(&nats.url(), "m1", "u1", "what is the sum?");
    assert!(stdout.contains("The sum is 42."), "{stdout}");

    // The turn is counted as it closes, just after its answer went out: scrape until it is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (status, head, text) = loop {
        let (status, head, text) = http_get(&addr, "/metrics");
        let counted = sample(
            &text,
            r#"hermes_turns_total{agent="assistant",outcome="answered"}"#,
        )
        .is_some()
            // On NATS the local cache is flushed in the background, just after the turn.
            && sample(&text, "hermes_flush_duration_seconds_count").unwrap_or(0.0) >= 1.0;
        if counted || std::time::Instant::now() > deadline {
            break (status, head, text);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status, 200, "{head}\n{text}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert_eq!(
        sample(
            &text,
            r#"hermes_turns_total{agent="assistant",outcome="answered"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"hermes_tool_calls_total{tool="add",status="ok"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "hermes_task_tool_rounds_sum"),
        Some(1.0),
        "{text}"
    );
    for kind in ["prompt", "completion"] {
        assert_eq!(
            sample(
                &text,
                &format!(r#"hermes_turn_tokens_count{{kind="{kind}"}}"#)
            ),
            Some(1.0),
            "{text}"
        );
    }
    assert!(
        sample(&text, r#"hermes_turn_tokens_sum{kind="completion"}"#).unwrap_or(0.0) > 0.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "hermes_turn_duration_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(&text, "hermes_flush_duration_seconds_count").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains("# TYPE hermes_flush_duration_seconds histogram"),
        "{text}"
    );
    assert_eq!(sample(&text, "hermes_sessions_live"), Some(1.0), "{text}");

    let (status, _, _) = http_get(&addr, "/nothing-here");
    assert_eq!(status, 404);

    // `hermes status` gathers every process of the deployment over the bus.
    let planner = Serve::start(&write_config(dir.path()), &nats.url(), "planner");
    let out = hermes()
        .args(["status", "--bus", &nats.url(), "--json", "--wait", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let processes = status["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{status}");
    let actors: Vec<String> = processes.iter().map(|p| p["actors"].to_string()).collect();
    assert!(actors.iter().any(|a| a == r#"["planner"]"#), "{actors:?}");
    assert!(
        actors
            .iter()
            .any(|a| a.contains("session") && a.contains("tool-executor")),
        "{actors:?}"
    );
    assert_eq!(
        status["totals"][r#"hermes_turns_total{agent="assistant",outcome="answered"}"#], 1.0,
        "{status}"
    );
    let table = hermes()
        .args(["status", "--bus", &nats.url()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("2 processes; metrics from 1"), "{text}");
    planner.stop();
    serve.stop();
}

#[test]
fn status_on_the_embedded_bus_says_to_name_a_deployment() {
    let out = hermes().args(["status"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--bus nats://"), "{err}");
}
