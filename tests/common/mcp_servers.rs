//! MCP servers for tests: where to find them and configs that start them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hermes::config::McpServerConfig;

/// The `mcp-server-everything` executable: `$HERMES_MCP_EVERYTHING`, else the repo's
/// `.tools/node/node_modules/.bin/mcp-server-everything`, else `PATH`.
pub fn everything_server_path() -> PathBuf {
    if let Some(path) = std::env::var_os("HERMES_MCP_EVERYTHING") {
        return PathBuf::from(path);
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".tools/node/node_modules/.bin/mcp-server-everything");
    if local.exists() {
        return local;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mcp-server-everything"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "mcp-server-everything not found (HERMES_MCP_EVERYTHING unset, {} missing, not on \
             PATH); run `bash scripts/setup-test-deps.sh` and `source .tools/env.sh`",
            local.display()
        )
    })
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
