//! `hermes` as a child process: `hermes serve …` started and waited for, killed on drop.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary under test, with no model conventions inherited from the environment.
pub fn hermes() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
    cmd.env(
        "HERMES_LOG",
        std::env::var("HERMES_TEST_SERVE_LOG").unwrap_or_else(|_| "warn".into()),
    );
    for var in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "HERMES_MODEL",
        "HERMES_CONFIG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// A finished command's stdout, then its stderr under a marker: what a failed assertion shows.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A running `hermes serve`.
pub struct Serve {
    child: Child,
}

impl Serve {
    /// Start `hermes --config CONFIG serve --bus URL --actors ACTORS` and wait for `ready`.
    pub fn start(config: &Path, bus: &str, actors: &str) -> Serve {
        Self::start_with(config, bus, actors, &[])
    }

    /// [`Serve::start`] with more `serve` arguments (e.g. `--http ADDR`).
    pub fn start_with(config: &Path, bus: &str, actors: &str, extra: &[&str]) -> Serve {
        Self::start_with_env::<&str, &str>(config, bus, actors, extra, &[])
    }

    /// [`Serve::start_with`] with `env` in the process's environment (its NATS credential,
    /// the trace exporter's settings).
    pub fn start_with_env<K: AsRef<std::ffi::OsStr>, V: AsRef<std::ffi::OsStr>>(
        config: &Path,
        bus: &str,
        actors: &str,
        extra: &[&str],
        env: &[(K, V)],
    ) -> Serve {
        let mut child = hermes();
        child.envs(env.iter().map(|(k, v)| (k, v)));
        child
            .args([
                "--config",
                config.to_str().unwrap(),
                "serve",
                "--bus",
                bus,
                "--actors",
                actors,
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe. A test process killed before its destructors
        // run (Ctrl-C, a closed pipe) takes its `hermes serve` children with it instead of
        // leaving them running against a dead stderr.
        unsafe {
            child.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = child.spawn().expect("hermes serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.trim() == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("hermes serve --actors {actors} did not become ready"));
        Serve { child }
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait.
    pub fn stop(mut self) {
        // SAFETY: sending a signal to our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// `hermes send --bus BUS --session SESSION --user USER --text TEXT --json` (60 s for the
/// turn), which must succeed: its stdout, one JSON event per line.
pub fn send_json(bus: &str, session: &str, user: &str, text: &str) -> String {
    let out = hermes()
        .args(["send", "--bus", bus, "--session", session, "--user", user])
        .args(["--text", text, "--json", "--timeout", "60"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("hermes send runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "hermes send failed: {stdout}");
    stdout
}

/// A free loopback port (free when asked; bind it soon).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// `GET path` on `addr` over plain HTTP/1.1: (status code, headers, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the HTTP server");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream
        .read_to_string(&mut raw)
        .expect("read the HTTP response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    (status, head.to_string(), body.to_string())
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
