//! `hermes serve` processes of a deployment, each with a role: started and waited for
//! (`ready` on stdout), killed with SIGKILL and restarted by the harness as a process manager
//! would, its stderr kept in a log file per start, and watched for exits the harness did not
//! cause and for panics.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};

/// How long a `hermes serve` may take to say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The kinds of Hermes process in the matrix's deployment (one actor kind each; two session
/// processes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Session,
    Planner,
    ToolExecutor,
    McpBridge,
    MemoryExtractor,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Session,
        Role::Planner,
        Role::ToolExecutor,
        Role::McpBridge,
        Role::MemoryExtractor,
    ];

    /// The `--actors` value.
    pub fn actors(self) -> &'static str {
        match self {
            Role::Session => "session",
            Role::Planner => "planner",
            Role::ToolExecutor => "tool-executor",
            Role::McpBridge => "mcp-bridge",
            Role::MemoryExtractor => "memory-extractor",
        }
    }
}

/// One `hermes serve` of the deployment.
pub struct Proc {
    pub name: String,
    pub role: Role,
    actors: &'static str,
    hermes: PathBuf,
    config: PathBuf,
    bus: String,
    data_dir: PathBuf,
    log_dir: PathBuf,
    child: Option<Child>,
    starts: u32,
    /// Exits the harness did not cause.
    pub unexpected_exits: Vec<String>,
}

pub struct ProcSpec<'a> {
    pub name: &'a str,
    pub role: Role,
    pub hermes: &'a Path,
    pub config: &'a Path,
    pub bus: &'a str,
    pub data_dir: PathBuf,
    pub log_dir: &'a Path,
    /// The `--actors` value (the role's own, or more).
    pub actors: &'static str,
}

impl Proc {
    pub fn start(spec: ProcSpec<'_>) -> anyhow::Result<Self> {
        let mut proc = Self {
            name: spec.name.to_string(),
            role: spec.role,
            actors: spec.actors,
            hermes: spec.hermes.to_path_buf(),
            config: spec.config.to_path_buf(),
            bus: spec.bus.to_string(),
            data_dir: spec.data_dir,
            log_dir: spec.log_dir.to_path_buf(),
            child: None,
            starts: 0,
            unexpected_exits: Vec::new(),
        };
        proc.spawn()?;
        Ok(proc)
    }

    /// Its sled directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.log_dir.join(format!("{}.{start}.log", self.name))
    }

    /// Start it (again) and wait for `ready`.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let log = std::fs::File::create(self.log_path(self.starts))?;
        let mut command = Command::new(&self.hermes);
        command
            // FAULTS_HERMES_LOG=info (say) keeps more of each process' log for a failed cell.
            .env(
                "HERMES_LOG",
                std::env::var("FAULTS_HERMES_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("OTEL_SDK_DISABLED", "true")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("HERMES_MODEL")
            .env_remove("HERMES_CONFIG")
            .arg("--config")
            .arg(&self.config)
            .args(["serve", "--bus", &self.bus, "--actors", self.actors])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .with_context(|| format!("start {} ({})", self.name, self.hermes.display()))?;
        let stdout = child.stdout.take().context("hermes serve stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.trim() == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        if rx.recv_timeout(READY_TIMEOUT).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(self.log_path(self.starts)).unwrap_or_default();
            bail!("{} did not become ready:\n{log}", self.name);
        }
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL: no chance to clean up, as in a crash (an expected exit).
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Note an exit the harness did not cause; the process manager restarts it.
    pub fn check(&mut self) -> anyhow::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if let Some(status) = child.try_wait()? {
            self.child = None;
            self.unexpected_exits
                .push(format!("{} exited on its own: {status}", self.name));
            self.spawn()?;
        }
        Ok(())
    }

    /// Lines of its stderr (every start) that report a panic.
    pub fn panics(&self) -> Vec<String> {
        (1..=self.starts)
            .filter_map(|n| std::fs::read_to_string(self.log_path(n)).ok())
            .flat_map(|log| {
                log.lines()
                    .filter(|l| l.contains("panicked"))
                    .map(|l| format!("{}: {l}", self.name))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// SIGTERM and wait a moment, then SIGKILL.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGTERM);
            for _ in 0..50 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A child that outlives the harness (Ctrl-C, a crash) is killed with it.
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe and touches only the child being started.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

pub fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: signalling a child of ours by its pid.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// A free loopback port (free when asked).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
