//! `examples/python_worker.py` as a child process on a NATS url, killed on drop.
//!
//! Python comes from `HERMES_PYTHON` (a venv with nats-py), else
//! `<repo>/.tools/venv/bin/python`, else `python3` on `PATH`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct PythonWorker {
    child: Child,
}

impl PythonWorker {
    /// Start the example worker against `url` and wait until it has subscribed.
    pub fn start(url: &str) -> Self {
        Self::start_as(url, None)
    }

    /// [`Self::start`] as the NATS user and password `credential`.
    pub fn start_as(url: &str, credential: Option<(&str, &str)>) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/python_worker.py");
        let python = find_python();
        let mut command = Command::new(&python);
        command.arg(&script).args(["--url", url]);
        if let Some((user, password)) = credential {
            command
                .args(["--user", user])
                .env("NATS_PASSWORD", password);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.trim() == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!(
                "the python worker did not become ready; does {} have nats-py? \
                 (run scripts/setup-test-deps.sh and source .tools/env.sh)",
                python.display()
            );
        }
        Self { child }
    }
}

impl Drop for PythonWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn find_python() -> PathBuf {
    if let Some(path) = std::env::var_os("HERMES_PYTHON") {
        return PathBuf::from(path);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/python");
    if local.is_file() {
        return local;
    }
    PathBuf::from("python3")
}
