//! `hermes sessions`, `hermes memory` and `hermes mcp status|audit` while the server runs: over
//! NATS against a real deployment (two session processes), through the control socket of an
//! embedded `hermes serve`, and — once it stops — on its data directory, printing the same.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

fn script() -> Scenario {
    Scenario::new("cli-bus")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&[]).says("Noted."))
        .rule(on_user(&[]).role("extractor").says(
            r#"{"memory_updates": [{"op": "add", "kind": "preference", "key": "favourite_number", "content": "likes the number 42", "importance": 0.8}]}"#,
        ))
}

/// `hermes --config CONFIG ARGS…`: (success, stdout, stderr).
fn cli(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = hermes()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("hermes runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`cli`] that must succeed: its stdout.
fn ok(config: &Path, args: &[&str]) -> String {
    let (success, out, err) = cli(config, args);
    assert!(success, "hermes {args:?} failed:\n{out}\n{err}");
    out
}

/// `hermes send` one message and wait for its answer.
fn send(config: &Path, bus: &[&str], session: &str, user: &str, text: &str) {
    let mut args = vec!["send", "--session", session, "--user", user, "--text", text];
    args.extend_from_slice(&["--timeout", "60"]);
    args.extend_from_slice(bus);
    let out = ok(config, &args);
    assert!(out.contains("The sum is 42."), "{out}");
}

/// Run `args` until `done` holds for its stdout (extraction runs after the answer).
fn eventually(config: &Path, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out, err) = cli(config, args);
        if done(&out) {
            return out;
        }
        assert!(
            Instant::now() < until,
            "hermes {args:?} never got there:\n{out}\n{err}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn sessions_of(listed: &str) -> BTreeSet<String> {
    json_lines(listed)
        .iter()
        .map(|s| s["session"].as_str().unwrap().to_owned())
        .collect()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn sessions_ls_and_show_work_against_a_running_nats_deployment() {
    let nats = NatsServer::start();
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "nats", &script());
    let data: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("data-{i}")))
        .collect();
    let first = Serve::start_with(&config, &url, "all", &["--data-dir", path(&data[0])]);
    let second = Serve::start_with(&config, &url, "session", &["--data-dir", path(&data[1])]);
    let bus = ["--bus", url.as_str()];
    let names: BTreeSet<String> = (0..4).map(|i| format!("c{i}")).collect();
    for name in &names {
        send(&config, &bus, name, "u1", "what is the sum?");
    }
    send(&config, &bus, "other", "u2", "what is the sum?");

    // Whichever session process answers, it answers for every session (from the log).
    for _ in 0..4 {
        let table = ok(&config, &["sessions", "ls", "--user", "u1", "--bus", &url]);
        for name in &names {
            assert!(table.contains(name.as_str()), "{table}");
        }
        assert!(
            table.contains("4 sessions") && !table.contains("other"),
            "{table}"
        );
        assert!(
            table.contains("STATE") && table.contains("answered"),
            "{table}"
        );
    }
    let listed = ok(&config, &["sessions", "ls", "--bus", &url, "--json"]);
    let rows = json_lines(&listed);
    assert_eq!(rows.len(), 5, "{listed}");
    for row in &rows {
        assert_eq!(row["phase"], "answered", "{row}");
        assert_eq!(row["messages"], 4, "user, call, result, answer: {row}");
    }
    let paged = ok(&config, &["sessions", "ls", "--bus", &url, "--limit", "2"]);
    assert!(paged.contains("2 of 5 sessions"), "{paged}");

    let mut shown = Vec::new();
    for name in &names {
        let text = ok(&config, &["sessions", "show", name, "--bus", &url]);
        assert!(text.contains(&format!("session {name} (agent assistant, user u1)")));
        assert!(
            text.contains("what is the sum?") && text.contains("→ add"),
            "{text}"
        );
        assert!(
            text.contains("The sum is 42.") && text.contains("answered step"),
            "{text}"
        );
        let json = ok(
            &config,
            &["sessions", "show", name, "--bus", &url, "--json"],
        );
        let whole: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(whole["messages"].as_array().unwrap().len(), 4, "{whole}");
        assert_eq!(whole["session"]["turn"]["phase"], "answered");
        shown.push((name.clone(), text, json));
    }
    let (success, _, err) = cli(&config, &["sessions", "show", "nope", "--bus", &url]);
    assert!(
        !success && err.contains("no session `nope` of agent `assistant`"),
        "{err}"
    );

    let found = ok(
        &config,
        &[
            "sessions", "search", "--user", "u1", "sum", "--bus", &url, "--json",
        ],
    );
    assert_eq!(sessions_of(&found), names, "{found}");
    let found = ok(
        &config,
        &["sessions", "search", "--user", "u2", "sum", "--bus", &url],
    );
    assert!(found.contains("other") && !found.contains("c0"), "{found}");

    // With the first process gone, the session-only one answers for every session, those it
    // never owned included: it reads them from the replicated log.
    first.stop();
    let listed = ok(
        &config,
        &["sessions", "ls", "--user", "u1", "--bus", &url, "--json"],
    );
    assert_eq!(sessions_of(&listed), names);
    for (name, text, json) in &shown {
        assert_eq!(
            &ok(&config, &["sessions", "show", name, "--bus", &url]),
            text
        );
        assert_eq!(
            &ok(
                &config,
                &["sessions", "show", name, "--bus", &url, "--json"]
            ),
            json
        );
    }

    // Stopped: each data directory holds the sessions its process owned, printed as before.
    second.stop();
    let mut owned = BTreeSet::new();
    for d in &data {
        let listed = ok(
            &config,
            &[
                "sessions",
                "ls",
                "--user",
                "u1",
                "--data-dir",
                path(d),
                "--json",
            ],
        );
        owned.extend(sessions_of(&listed));
    }
    assert_eq!(owned, names);
    for (name, text, json) in &shown {
        let d = data
            .iter()
            .find(|d| cli(&config, &["sessions", "show", name, "--data-dir", path(d)]).0)
            .expect("one data directory holds the session");
        assert_eq!(
            &ok(&config, &["sessions", "show", name, "--data-dir", path(d)]),
            text
        );
        assert_eq!(
            &ok(
                &config,
                &["sessions", "show", name, "--data-dir", path(d), "--json"]
            ),
            json
        );
    }
}

#[test]
fn memory_ls_works_while_the_server_runs_and_after_it_stops() {
    let nats = NatsServer::start();
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "memory", &script());
    let data = dir.path().join("data");
    let serve = Serve::start_with(&config, &url, "all", &["--data-dir", path(&data)]);
    let bus = ["--bus", url.as_str()];
    send(&config, &bus, "m1", "u1", "what is the sum?");
    send(&config, &bus, "m2", "u3", "what is the sum?");

    let ls = ["memory", "ls", "--user", "u1", "--bus", &url];
    let table = eventually(&config, &ls, |out| out.contains("favourite_number"));
    assert!(
        table.contains("likes the number 42") && table.contains("1 memories"),
        "{table}"
    );
    let json = ok(
        &config,
        &["memory", "ls", "--user", "u1", "--bus", &url, "--json"],
    );
    let records = json_lines(&json);
    assert_eq!(records.len(), 1, "{json}");
    assert_eq!(records[0]["user"], "u1");

    // Each user sees only their own memories.
    let other = ok(&config, &["memory", "ls", "--user", "u2", "--bus", &url]);
    assert!(other.contains("no memories for user `u2`"), "{other}");
    let recalled = ok(
        &config,
        &[
            "memory",
            "search",
            "--user",
            "u2",
            "number 42",
            "--bus",
            &url,
        ],
    );
    assert!(recalled.contains("nothing recalled for `u2`"), "{recalled}");

    let shown = ok(
        &config,
        &[
            "memory",
            "show",
            "--user",
            "u1",
            "--key",
            "favourite_number",
            "--bus",
            &url,
        ],
    );
    assert!(shown.contains("content     likes the number 42"), "{shown}");
    let id = records[0]["id"].as_str().unwrap();
    let by_prefix = ok(
        &config,
        &["memory", "show", "--user", "u1", &id[..12], "--bus", &url],
    );
    assert_eq!(by_prefix, shown);
    let recalled = ok(
        &config,
        &[
            "memory",
            "search",
            "--user",
            "u1",
            "number 42",
            "--bus",
            &url,
        ],
    );
    assert!(
        recalled.contains("favourite_number") && recalled.contains("1 recalled"),
        "{recalled}"
    );

    eventually(
        &config,
        &["memory", "ls", "--user", "u3", "--bus", &url],
        |out| out.contains("favourite_number"),
    );
    let forgot = ok(
        &config,
        &[
            "memory",
            "forget",
            "--user",
            "u3",
            "--key",
            "favourite_number",
            "--bus",
            &url,
        ],
    );
    assert!(
        forgot.starts_with("forgot ") && forgot.contains("likes the number 42"),
        "{forgot}"
    );
    let gone = ok(&config, &["memory", "ls", "--user", "u3", "--bus", &url]);
    assert!(gone.contains("no memories for user `u3`"), "{gone}");
    let (success, _, err) = cli(&config, &["memory", "sweep", "--bus", &url]);
    assert!(!success && err.contains("sweep by themselves"), "{err}");

    serve.stop();
    let here = ["--data-dir", path(&data)];
    let stopped = ok(
        &config,
        &[&["memory", "ls", "--user", "u1"][..], &here].concat(),
    );
    assert_eq!(stopped, table, "the same table from the data directory");
    let stopped = ok(
        &config,
        &[&["memory", "ls", "--user", "u1", "--json"][..], &here].concat(),
    );
    assert_eq!(stopped, json);
    let gone = ok(
        &config,
        &[&["memory", "ls", "--user", "u3", "--all"][..], &here].concat(),
    );
    assert!(gone.contains("no memories for user `u3`"), "{gone}");
    let (success, _, err) = cli(&config, &["memory", "ls", "--user", "u1", "--bus", &url]);
    assert!(!success && err.contains("memory.list"), "{err}");
    assert!(
        err.contains("--data-dir"),
        "says how to read the stopped directory: {err}"
    );
}

#[test]
fn mcp_status_over_the_bus_lists_mounted_servers() {
    let nats = NatsServer::start();
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "mcp", &script());
    let data = dir.path().join("data");
    let _bridge = Serve::start_with(
        &config,
        &url,
        "tool-executor,mcp-bridge",
        &["--data-dir", path(&data)],
    );
    let table = ok(&config, &["mcp", "status", "--bus", &url]);
    assert!(
        table.contains("catalog") && table.contains("READY"),
        "{table}"
    );
    assert!(table.contains("tool catalog__"), "{table}");
    let json = ok(&config, &["mcp", "status", "--bus", &url, "--json"]);
    let catalog: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(catalog["servers"][0]["name"], "catalog", "{catalog}");
    assert_eq!(catalog["servers"][0]["status"], "ready", "{catalog}");
    assert!(!catalog["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .is_empty());
    let audit = ok(&config, &["mcp", "audit", "--bus", &url, "--limit", "5"]);
    assert!(audit.starts_with("time"), "{audit}");
}

#[test]
fn an_embedded_serve_answers_the_cli_through_its_data_directory_and_after_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "embedded", &script());
    // A turn before the serve starts (`hermes send` runs its own engine on the directory).
    send(&config, &[], "e1", "u1", "what is the sum?");
    let serve = Serve::start(&config, "embedded", "all");

    let table = ok(&config, &["sessions", "ls"]);
    assert!(
        table.contains("e1") && table.contains("answered"),
        "{table}"
    );
    let shown = ok(&config, &["sessions", "show", "e1"]);
    assert!(shown.contains("The sum is 42."), "{shown}");
    let found = ok(&config, &["sessions", "search", "--user", "u1", "sum"]);
    assert!(found.contains("e1"), "{found}");
    // The serve mines the turn's memories from the queue `hermes send` left.
    let memories = eventually(&config, &["memory", "ls", "--user", "u1"], |out| {
        out.contains("favourite_number")
    });
    let status = ok(&config, &["mcp", "status"]);
    assert!(
        status.contains("catalog") && status.contains("READY"),
        "{status}"
    );
    let audit = ok(&config, &["mcp", "audit"]);
    assert!(audit.starts_with("time"), "{audit}");
    let (success, _, err) = cli(&config, &["memory", "sweep"]);
    assert!(!success && err.contains("sweeps by itself"), "{err}");

    serve.stop();
    assert_eq!(ok(&config, &["sessions", "ls"]), table);
    assert_eq!(ok(&config, &["sessions", "show", "e1"]), shown);
    assert_eq!(
        ok(&config, &["sessions", "search", "--user", "u1", "sum"]),
        found
    );
    assert_eq!(ok(&config, &["memory", "ls", "--user", "u1"]), memories);
    let swept = ok(&config, &["memory", "sweep"]);
    assert!(swept.starts_with("swept "), "{swept}");
}
