//! The official A2A Python SDK (`a2a-sdk`, installed by `scripts/setup-test-deps.sh` into
//! `.tools/a2a-venv`) driving a Hermes A2A server: `tests/common/a2a_sdk_client.py` runs one
//! scenario and prints what it saw as one JSON object.
//!
//! Python comes from `HERMES_A2A_PYTHON`, else `<repo>/.tools/a2a-venv/bin/python`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The Python with `a2a-sdk`.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("HERMES_A2A_PYTHON") {
        return PathBuf::from(path);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/a2a-venv/bin/python")
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
                 .tools/a2a-venv)",
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
