//! The stdio flavour of [`RmcpClient`]: start the configured command as a child process and
//! run the handshake over its stdin/stdout, failing fast (with the child's last stderr lines)
//! when it exits first, and stopping it when the handshake fails or times out.

use std::path::Path;
use std::time::Duration;

use rmcp::ClientServiceExt;
use tokio::process::{ChildStdin, ChildStdout};

use super::handler::{lifecycle, Notifier};
use super::link::Link;
use super::process::{ChildProcess, Launch};
use super::{RmcpClient, Session, STDERR_SETTLE};
use crate::config::McpServerConfig;
use crate::mcp::McpError;

impl RmcpClient {
    /// Start `config.command` (`self` = `self_exe`) and complete the MCP handshake within
    /// `config.timeout_secs`.
    pub async fn spawn(config: &McpServerConfig, self_exe: &Path) -> Result<Self, McpError> {
        let program = if config.command == "self" {
            self_exe.as_os_str()
        } else {
            std::ffi::OsStr::new(&config.command)
        };
        let command_line = command_line(program, &config.args);
        let launch = Launch {
            server: &config.name,
            program,
            args: &config.args,
            env: &config.env,
        };
        let spawned = ChildProcess::spawn(&launch).map_err(|error| McpError::Spawn {
            server: config.name.clone(),
            reason: format!("running `{command_line}` failed: {error}"),
        })?;
        let process = spawned.process;
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        tracing::info!(
            server = %config.name,
            command = %command_line,
            pid = ?process.pid(),
            "MCP server started"
        );
        let (notifier, changed) = Notifier::new(None);
        let session = handshake(
            &config.name,
            &command_line,
            timeout,
            (spawned.stdout, spawned.stdin),
            &process,
            notifier,
            lifecycle(config.protocol),
        )
        .await?;
        Ok(Self::ready(
            config,
            command_line,
            session,
            Link::Child(process),
            changed,
        ))
    }
}

/// Run `initialize` over the child's pipes, failing fast if the child exits first and
/// stopping it if the handshake fails or times out.
async fn handshake(
    server: &str,
    command_line: &str,
    timeout: Duration,
    pipes: (ChildStdout, ChildStdin),
    process: &ChildProcess,
    notifier: Notifier,
    lifecycle: rmcp::ClientLifecycleMode,
) -> Result<Session, McpError> {
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(timeout, notifier.serve_with_lifecycle(pipes, lifecycle)) => outcome,
        reason = process.exited() => {
            let reason =
                format!("`{command_line}` exited before completing the handshake: {reason}");
            return Err(handshake_error(server, reason, process).await);
        }
    };
    let reason = match outcome {
        Ok(Ok(session)) => return Ok(session),
        Ok(Err(error)) => format!("`{command_line}`: {error}"),
        Err(_) => format!("`{command_line}` did not answer `initialize` within {timeout:?}"),
    };
    Err(failed_handshake(server, reason, process).await)
}

/// The handshake failed while the child may still run: stop it, then report.
async fn failed_handshake(server: &str, reason: String, process: &ChildProcess) -> McpError {
    process.kill();
    let exit = process.exited().await;
    handshake_error(server, format!("{reason}; {exit}"), process).await
}

async fn handshake_error(server: &str, reason: String, process: &ChildProcess) -> McpError {
    let tail = process.stderr_tail(STDERR_SETTLE).await;
    let reason = if tail.is_empty() {
        reason
    } else {
        format!("{reason}; its last stderr lines: {}", tail.join(" | "))
    };
    let reason = format!(
        "{reason}; check that the command in [[mcp.servers]] starts an MCP server speaking \
         JSON-RPC on stdin/stdout"
    );
    McpError::Handshake {
        server: server.to_owned(),
        reason,
    }
}

/// `program arg1 'arg two'` for messages, quoted the way a POSIX shell would read it.
fn command_line(program: &std::ffi::OsStr, args: &[String]) -> String {
    std::iter::once(program.to_string_lossy().into_owned())
        .chain(args.iter().cloned())
        .map(|part| shell_quoted(&part))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quoted(part: &str) -> String {
    let plain = !part.is_empty()
        && part
            .chars()
            .all(|c| c.is_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        part.to_owned()
    } else {
        format!("'{}'", part.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_quotes_arguments_with_spaces() {
        let line = command_line(
            std::ffi::OsStr::new("sh"),
            &[
                "-c".to_owned(),
                "echo 'x' >&2; exit 3".to_owned(),
                String::new(),
            ],
        );
        assert_eq!(line, r"sh -c 'echo '\''x'\'' >&2; exit 3' ''");
    }
}
