//! `hermes demo team --remote`: the team's remote member. `examples/a2a/agent.py` (an A2A
//! agent written with the official Python SDK, embedded in the binary) runs as a child process
//! on a free loopback port; the config declares it as `stats`, an agent that lives elsewhere,
//! and triage delegates to it over A2A beside logistics and care.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use hermes::config::{AgentA2aConfig, Config};

/// The example agent's source.
const AGENT_PY: &str = include_str!("../../examples/a2a/agent.py");
/// The remote member's name.
pub const NAME: &str = "stats";

/// The running remote member; stopped on drop.
pub struct RemoteMember {
    child: Child,
    pub url: String,
}

impl Drop for RemoteMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RemoteMember {
    /// Write the agent to `dir` and start it with `python`; returns once its card is served.
    pub fn start(python: Option<PathBuf>, dir: &Path) -> anyhow::Result<Self> {
        let python = python
            .or_else(|| std::env::var_os("HERMES_PYTHON").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("python3"));
        let script = dir.join("a2a_agent.py");
        std::fs::create_dir_all(dir)?;
        std::fs::write(&script, AGENT_PY)
            .with_context(|| format!("writing the remote member to {}", script.display()))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(&python)
            .arg(&script)
            .args(["--port", &port.to_string(), "--slow", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start {} for the remote member; install Python 3 or pass --python",
                    python.display()
                )
            })?;
        let mut member = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let stdout = member.child.stdout.take();
        if let Some(stdout) = stdout {
            // `ready` once its socket is bound; the card is served a moment later.
            let _ = BufReader::new(stdout).lines().next();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !card_served(port) {
            let exited = member.child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > deadline {
                anyhow::bail!(
                    "the remote member (examples/a2a/agent.py) did not start; it needs `pip \
                     install \"a2a-sdk[http-server]==1.3.0\" \"uvicorn==0.55.0\"` for {} (or \
                     pass --python)",
                    python.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!(
            "  remote member `{NAME}` (a Python A2A agent) at {}",
            member.url
        );
        Ok(member)
    }
}

fn card_served(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!(
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// Declare the member in `config` and make it part of triage's step.
pub fn join(config: &mut Config, url: &str) -> anyhow::Result<()> {
    let mut member = config
        .agents
        .get("logistics")
        .cloned()
        .context("the team config has no logistics agent to model the remote member on")?;
    member.description = "Counts the words of a text (a Python agent, reached over A2A)".into();
    member.system_prompt = String::new();
    member.tools = Some(Vec::new());
    member.delegates_to = Vec::new();
    member.handoffs_to = Vec::new();
    member.a2a = Some(AgentA2aConfig {
        card_url: Some(url.to_owned()),
        ..AgentA2aConfig::default()
    });
    config.agents.insert(NAME.into(), member);
    if let Some(triage) = config.agents.get_mut("triage") {
        triage.delegates_to.push(NAME.into());
    }
    for trigger in &mut config.triggers {
        trigger
            .prompt
            .push_str(" Also have stats count the words of the tracking update.");
    }
    Ok(())
}
