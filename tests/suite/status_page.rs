//! The live status page (`/` of `hermes serve --http`) in real headless Chromium: a turn run
//! after the page opened appears on it without a reload. The screenshot is kept among the
//! test's outputs (`target/tmp/status-page.png`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use crate::common::hermes_proc::{free_port, hermes, http_get, send_json, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

fn script() -> Scenario {
    sum_scenario("status-page")
}

/// `node tests/browser/status_page.mjs URL SESSION SHOT 2` (two processes to show), its stdout lines sent to the
/// returned channel.
fn open_in_chromium(
    url: &str,
    session: &str,
    shot: &Path,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/status_page.mjs");
    let mut browser = Command::new(std::env::var("HERMES_NODE").unwrap_or_else(|_| "node".into()))
        .arg(&script)
        .args([url, session])
        .arg(shot)
        .arg("2")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs the browser script; run `bash scripts/setup-test-deps.sh`");
    let stdout = browser.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (browser, rx)
}

fn send_turn(bus: &str, session: &str) {
    send_json(bus, session, "u1", "what is the sum?");
}

/// `/api/live` of `addr` once `accept` holds for it, within 30 s.
fn live_until(addr: &str, accept: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        let (status, _, body) = http_get(addr, "/api/live");
        if status == 200 {
            let snapshot: serde_json::Value = serde_json::from_str(&body).unwrap();
            if accept(&snapshot) {
                return snapshot;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "status {status}: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_turn_appears_on_the_open_status_page_without_a_reload() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "page", &script());
    let addr = format!("127.0.0.1:{}", free_port());
    let _serve = Serve::start_with(&config, &nats.url(), "all", &["--http", &addr]);
    // A second process: the page shows the deployment, not only the process serving it.
    let _planner = Serve::start(&config, &nats.url(), "planner");
    let (status, head, page) = http_get(&addr, "/");
    assert_eq!(status, 200, "{head}");
    assert!(page.contains("<title>Hermes"), "{page}");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    let (browser, lines) = open_in_chromium(&format!("http://{addr}/"), "page-s1", &shot);
    let mut browser = KillOnDrop(browser);
    let ready = lines.recv_timeout(Duration::from_secs(60));
    assert_eq!(ready.as_deref(), Ok("ready"), "the page did not go live");

    send_turn(&nats.url(), "page-s1");

    let seen = lines
        .recv_timeout(Duration::from_secs(120))
        .expect("the browser reports what it saw");
    let status = browser.0.wait().unwrap();
    assert!(status.success(), "the browser check failed: {seen}");
    let seen: serde_json::Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(seen["state"], "answered", "{seen}");
    assert_eq!(seen["sameLoad"], true, "{seen}");
    assert_eq!(seen["tools"], json!(["add"]), "{seen}");
    assert!(seen["processes"].as_u64() >= Some(2), "{seen}");
    assert!(seen["charts"].as_u64() >= Some(6), "{seen}");
    let png = std::fs::read(&shot).expect("the screenshot was saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

#[test]
fn hermes_status_serve_shows_the_deployment_from_a_process_without_actors() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_serve_config(dir.path(), "page", &script());
    let _serve = Serve::start(&config, &nats.url(), "all");
    let addr = format!("127.0.0.1:{}", free_port());
    let _page = KillOnDrop(
        hermes()
            .args(["--config"])
            .arg(&config)
            .args(["status", "--bus", &nats.url(), "--serve", &addr])
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let snapshot = live_until(&addr, |s| {
        s["processes"].as_array().is_some_and(|p| !p.is_empty())
    });
    assert_eq!(
        snapshot["processes"].as_array().unwrap().len(),
        1,
        "{snapshot}"
    );
    send_turn(&nats.url(), "page-s2");
    let snapshot = live_until(&addr, |s| {
        s["sessions"].as_array().is_some_and(|v| {
            v.iter()
                .any(|x| x["session"] == "page-s2" && x["state"] == "answered")
        })
    });
    assert_eq!(snapshot["tool_calls"][0]["tool"], "add", "{snapshot}");
}

/// A child process killed when the test ends, passed or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
