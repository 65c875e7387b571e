//! The official A2A Python SDK (`a2a-sdk`, installed by `scripts/setup-test-deps.sh` into
//! `.tools/venv`) driving a Hermes A2A server: `tests/common/a2a_sdk_client.py` runs one
//! scenario and prints what it saw as one JSON object.
//!
//! Python is found as for the worker example ([`super::python_worker::find_python`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The Python with `a2a-sdk`.
pub fn python() -> PathBuf {
    super::python_worker::find_python()
}

/// Which binding the SDK's client uses.
#[derive(Debug, Clone, Copy)]
pub enum Binding {
    JsonRpc,
    HttpJson,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }
}

/// Run `scenario` against the agent at `url` (its base URL) with `extra` arguments; its JSON.
pub fn run(url: &str, binding: Binding, scenario: &str, extra: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/a2a_sdk_client.py");
    let python = python();
    let out = Command::new(&python)
        .arg(&script)
        .args([url, binding.name(), scenario])
        .args(extra)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e}; run scripts/setup-test-deps.sh (it installs a2a-sdk into \
                 .tools/venv)",
                python.display()
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the A2A SDK client failed in scenario {scenario} over {}: {stdout}",
        binding.name()
    );
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("scenario {scenario} printed no JSON ({e}): {stdout}"))
}

/// A scenario running in the background: its first line read, its JSON awaited later.
pub struct Running {
    child: std::process::Child,
    pub first: Value,
}

impl Running {
    /// Start `scenario` and read the JSON line it prints first.
    pub fn start(url: &str, binding: Binding, scenario: &str, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/a2a_sdk_client.py");
        let mut child = Command::new(python())
            .arg(&script)
            .args([url, binding.name(), scenario])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the A2A SDK client starts");
        let stdout = child.stdout.as_mut().expect("its stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("a first line");
        let first = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("scenario {scenario} began without JSON ({e}): {line}"));
        Self { child, first }
    }

    /// Wait for the scenario's result.
    pub fn finish(self) -> Value {
        let out = self.child.wait_with_output().expect("the scenario ends");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the scenario failed: {stdout}");
        serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("no JSON result ({e}): {stdout}"))
    }
}

/// `examples/a2a/agent.py` (an A2A agent written with the SDK) on a free loopback port,
/// killed on drop.
pub struct ExampleAgent {
    child: std::process::Child,
    pub url: String,
}

impl ExampleAgent {
    /// Start it with "slow" tasks taking `slow_secs`, and wait until its card is served.
    pub fn start(slow_secs: u32) -> Self {
        let port = super::hermes_proc::free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/a2a/agent.py");
        let child = Command::new(python())
            .arg(&script)
            .args([
                "--port",
                &port.to_string(),
                "--slow",
                &slow_secs.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the example A2A agent: {e}"));
        let agent = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let addr = format!("127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let served = std::net::TcpStream::connect(&addr).is_ok()
                && super::hermes_proc::http_get(&addr, "/.well-known/agent-card.json").0 == 200;
            if served {
                return agent;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the example A2A agent did not serve its card; does .tools/venv have a2a-sdk \
                 and uvicorn? (scripts/setup-test-deps.sh)"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for ExampleAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
