//! The child process behind a stdio MCP client: spawning it (`kill_on_drop`, piped stdio, a
//! process group of its own), forwarding its stderr line by line into `tracing`, and one
//! watcher task that owns the [`Child`], reaps it, and publishes why it exited so calls can
//! fail fast.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How many of the last stderr lines are kept for error messages.
const STDERR_TAIL_LINES: usize = 8;

/// What to start: program, arguments, extra environment.
#[derive(Debug, Clone)]
pub(super) struct Launch<'a> {
    pub server: &'a str,
    pub program: &'a OsStr,
    pub args: &'a [String],
    pub env: &'a std::collections::BTreeMap<String, String>,
}

/// A running (or exited) child process. Dropping it kills the child.
#[derive(Debug)]
pub(super) struct ChildProcess {
    pid: Option<u32>,
    exit: watch::Receiver<Option<String>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    stderr_task: Mutex<Option<JoinHandle<()>>>,
}

/// The child and the two pipes the MCP transport runs over.
pub(super) struct Spawned {
    pub process: ChildProcess,
    pub stdout: ChildStdout,
    pub stdin: ChildStdin,
}

impl ChildProcess {
    /// Start the program with piped stdin/stdout/stderr, inheriting this process's
    /// environment plus `launch.env`.
    pub fn spawn(launch: &Launch<'_>) -> std::io::Result<Spawned> {
        let mut command = Command::new(launch.program);
        command
            .args(launch.args)
            .envs(launch.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A process group of its own: Ctrl-C in the terminal (which `hermes chat` turns into
        // cancelling a turn) reaches Hermes, not its MCP servers. Hermes stops them itself.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other(
                "the child process was started without piped stdio",
            ));
        };
        let pid = child.id();
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_task = tokio::spawn(forward_stderr(
            launch.server.to_owned(),
            stderr,
            Arc::clone(&stderr_tail),
        ));
        let (kill_tx, kill_rx) = oneshot::channel();
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(watch_child(child, kill_rx, exit_tx));
        Ok(Spawned {
            process: Self {
                pid,
                exit: exit_rx,
                kill: Mutex::new(Some(kill_tx)),
                stderr_tail,
                stderr_task: Mutex::new(Some(stderr_task)),
            },
            stdout,
            stdin,
        })
    }

    /// The OS process id, while the child was running when spawned.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Why the child exited, once it has (e.g. `the process exited (signal: 9 (SIGKILL))`).
    pub fn exit_reason(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Wait until the child has exited and been reaped; returns why it exited.
    pub async fn exited(&self) -> String {
        let mut exit = self.exit.clone();
        let reason = match exit.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => "the process watcher stopped (the runtime is shutting down)".to_owned(),
        };
        reason
    }

    /// [`Self::exited`], giving up after `timeout`.
    pub async fn exited_within(&self, timeout: Duration) -> Option<String> {
        tokio::time::timeout(timeout, self.exited()).await.ok()
    }

    /// Ask the watcher to kill the child (SIGKILL); [`Self::exited`] reports when it is gone.
    pub fn kill(&self) {
        let sender = self
            .kill
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }

    /// The last lines the child wrote to stderr, waiting up to `settle` for the stream to end
    /// (a process that just exited may still have lines in flight).
    pub async fn stderr_tail(&self, settle: Duration) -> Vec<String> {
        let task = self
            .stderr_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(settle, task).await;
        }
        self.stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

/// Own the child until it exits or a kill is requested (or the [`ChildProcess`] is dropped,
/// which drops the kill sender), reap it, and publish the reason.
async fn watch_child(
    mut child: Child,
    kill: oneshot::Receiver<()>,
    exit: watch::Sender<Option<String>>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = kill => {
            if let Err(error) = child.start_kill() {
                tracing::warn!(%error, "could not kill MCP server process");
            }
            child.wait().await
        }
    };
    let reason = match status {
        Ok(status) => format!("the process exited ({status})"),
        Err(error) => format!("waiting for the process failed: {error}"),
    };
    let _ = exit.send(Some(reason));
}

async fn forward_stderr(server: String, stderr: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(stderr);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer).await {
            Ok(0) => break,
            Ok(_) => {
                // Lossy: a server writing non-UTF-8 must not stop the forwarding (a full
                // stderr pipe would block the server).
                let line = String::from_utf8_lossy(&buffer);
                let line = line.trim_end_matches(['\n', '\r']).to_owned();
                tracing::info!(server = %server, "stderr: {line}");
                let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            Err(error) => {
                tracing::warn!(server = %server, %error, "reading the server's stderr failed");
                break;
            }
        }
    }
}
