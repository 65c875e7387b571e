//! The ledger: a Streamable HTTP MCP server in a process of its own (this harness started
//! as `faults ledger-server`), so a cell can kill it with SIGKILL, stop it with SIGSTOP, and
//! restart it on the same port. Two write tools, `record {entry}` and `transfer {entry}`
//! (declared high-risk in the deployment's config, so it needs the user's confirmation),
//! append `exec <tool> <entry>` to `ledger.log` in its directory for every execution: the
//! harness counts writes executed twice from that file, which outlives the process.
//!
//! A call can be held mid-flight: while the file `hold` in the directory names the call's
//! entry, the server appends `held <entry>` and waits before executing.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::procs::{die_with_parent, signal};

const LOG: &str = "ledger.log";
const HOLD: &str = "hold";

#[derive(Clone)]
struct LedgerServer {
    dir: Arc<PathBuf>,
}

fn tool(name: &str, description: &'static str, destructive: bool) -> Tool {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"entry": {"type": "string", "description": "what to record"}},
        "required": ["entry"]
    });
    let object = schema.as_object().cloned().unwrap_or_default();
    let mut tool = Tool::new(name.to_owned(), description, Arc::new(object));
    tool.annotations = Some(ToolAnnotations::from_raw(
        None,
        Some(false),
        Some(destructive),
        Some(false),
        Some(false),
    ));
    tool
}

impl ServerHandler for LedgerServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                "record",
                "Record an entry in the ledger (a write: each call adds one line).",
                false,
            ),
            tool(
                "transfer",
                "Transfer money for an entry (a write that needs the user's consent).",
                true,
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let entry = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("entry"))
            .and_then(|e| e.as_str())
            .unwrap_or_default()
            .to_string();
        let hold = self.dir.join(HOLD);
        if read_trimmed(&hold).as_deref() == Some(entry.as_str()) {
            append(&self.dir, &format!("held {entry}"));
            while read_trimmed(&hold).as_deref() == Some(entry.as_str()) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        append(&self.dir, &format!("exec {} {entry}", request.name));
        Ok(CallToolResult::success(vec![ContentBlock::text(entry)]).into())
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn append(dir: &Path, line: &str) {
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(LOG))
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!("ledger: cannot append to {}: {e}", dir.join(LOG).display());
    }
}

/// `faults ledger-server`: serve on 127.0.0.1:`port` until killed; prints `ready` once bound.
pub fn serve(port: u16, dir: PathBuf) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("ledger: cannot bind 127.0.0.1:{port}"))?;
        let handler = LedgerServer { dir: Arc::new(dir) };
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        println!("ready");
        loop {
            let (stream, _) = listener.accept().await?;
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// The ledger process as the harness sees it.
pub struct Ledger {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Set while the harness itself stopped or killed it (not a crash).
    pub expected_down: bool,
}

impl Ledger {
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut ledger = Self {
            port: crate::procs::free_port()?,
            dir: dir.to_path_buf(),
            child: None,
            expected_down: false,
        };
        ledger.spawn()?;
        Ok(ledger)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let exe = std::env::current_exe()?;
        let mut command = Command::new(exe);
        command
            .args(["ledger-server", "--port", &self.port.to_string(), "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        die_with_parent(&mut command);
        let mut child = command.spawn().context("start the ledger MCP server")?;
        let stdout = child.stdout.take().context("ledger stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("the ledger MCP server did not start (said {line:?})");
        }
        self.child = Some(child);
        self.expected_down = false;
        Ok(())
    }

    /// SIGKILL, as in a crash.
    pub fn kill9(&mut self) {
        self.expected_down = true;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): a server that stops answering, then resumes.
    pub fn freeze(&mut self, frozen: bool) {
        if let Some(child) = &self.child {
            signal(
                child.id(),
                if frozen { libc::SIGSTOP } else { libc::SIGCONT },
            );
        }
    }

    /// Hold the next call with this entry mid-flight.
    pub fn hold(&self, entry: &str) -> anyhow::Result<()> {
        std::fs::write(self.dir.join(HOLD), entry).context("write the ledger's hold file")
    }

    pub fn release(&self) {
        let _ = std::fs::remove_file(self.dir.join(HOLD));
    }

    /// Is a call with `entry` held?
    pub fn is_held(&self, entry: &str) -> bool {
        let wanted = format!("held {entry}");
        self.lines().contains(&wanted)
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(LOG))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// How many times each entry was executed (by either tool).
    pub fn executions(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for line in self.lines() {
            if let Some(rest) = line.strip_prefix("exec ") {
                if let Some((_, entry)) = rest.split_once(' ') {
                    *counts.entry(entry.to_string()).or_default() += 1;
                }
            }
        }
        counts
    }

    /// Did the process exit without the harness killing it?
    pub fn crashed(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) if !self.expected_down => {
                self.child = None;
                Some(format!("ledger MCP server exited: {status}"))
            }
            _ => None,
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.freeze(false);
        self.kill9();
    }
}
