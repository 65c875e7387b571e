//! MCP servers for tests: where to find them and configs that start them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hermes::config::McpServerConfig;

/// The `mcp-server-everything` executable: `$HERMES_MCP_EVERYTHING`, else the repo's
/// `.tools/node/node_modules/.bin/mcp-server-everything`, else `PATH`.
pub fn everything_server_path() -> PathBuf {
    node_tool("HERMES_MCP_EVERYTHING", "mcp-server-everything")
}

/// The `mcp-server-filesystem` executable, found like [`everything_server_path`]
/// (`$HERMES_MCP_FILESYSTEM`).
pub fn filesystem_server_path() -> PathBuf {
    node_tool("HERMES_MCP_FILESYSTEM", "mcp-server-filesystem")
}

fn node_tool(variable: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".tools/node/node_modules/.bin")
        .join(name);
    if local.exists() {
        return local;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "{name} not found ({variable} unset, {} missing, not on PATH); run `bash \
             scripts/setup-test-deps.sh` and `source .tools/env.sh`",
            local.display()
        )
    })
}

/// `mcp-server-everything streamableHttp` on a free port, killed on drop.
pub struct EverythingHttp {
    child: std::process::Child,
    pub url: String,
}

impl EverythingHttp {
    /// Start it and wait until the port accepts connections.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(everything_server_path())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "everything HTTP server did not listen on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A config starting `mcp-server-everything` over stdio.
pub fn everything_server_config(name: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        command: everything_server_path().to_string_lossy().into_owned(),
        args: vec!["stdio".to_owned()],
        env: BTreeMap::new(),
        timeout_secs: 30,
        ..Default::default()
    }
}

/// A config starting an arbitrary command.
pub fn command_config(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        command: command.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: BTreeMap::new(),
        timeout_secs: 30,
        ..Default::default()
    }
}
