//! The one typed configuration tree, loaded once (embedded defaults, then an optional file,
//! then the model conventions of the environment and CLI overrides) and passed down. Nothing
//! reads configuration from globals.
//!
//! [`load`] owns the merge of a file over the defaults and where each model role came from;
//! [`models`] owns the model tables and the `OPENAI_*` / `HERMES_MODEL` conventions.

pub mod a2a;
pub mod agents;
pub mod bus_auth;
pub mod cluster;
pub mod load;
pub mod mcp;
pub mod memory;
pub mod models;
pub mod publishers;
pub mod telemetry;
pub mod tools;
pub mod triggers;

pub use a2a::{A2aConfig, AgentA2aConfig};
pub use agents::{AgentConfig, AgentMemoryConfig};
pub use cluster::ClusterConfig;
pub use load::{ConfigReport, ModelOrigin};
pub use mcp::*;
pub use memory::{EmbedderConfig, FusionConfig, MemoryConfig};
pub use models::{
    AnthropicConfig, ModelConfig, ModelEnv, ModelsConfig, OpenAiConfig, Price, ResponsesConfig,
    DEFAULT_OPENAI_BASE_URL,
};
pub use telemetry::TelemetryConfig;
pub use tools::ToolDefineConfig;
pub use triggers::TriggerConfig;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The defaults every run starts from; `config/default.toml` in the repository.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/default.toml");
/// The demo profile (`hermes demo`): the shop's prompt, tools, catalog MCP server and script;
/// `config/demo.toml`.
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");
/// The placeholder model of the defaults (`builtin:connect`): how to connect a real model;
/// `config/connect-scenario.toml`.
pub const CONNECT_SCENARIO: &str = include_str!("../../config/connect-scenario.toml");
/// The demo story's scripted model replies; `config/demo-scenario.toml`.
pub const DEMO_SCENARIO: &str = include_str!("../../config/demo-scenario.toml");
/// The team demo's configuration (`hermes demo team`); `config/team.toml`.
pub const TEAM_CONFIG: &str = include_str!("../../config/team.toml");
/// The team demo's scripted models (`builtin:team`); `config/team-scenario.toml`.
pub const TEAM_SCENARIO: &str = include_str!("../../config/team-scenario.toml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {origin} is not valid: {message}")]
    Parse { origin: String, message: String },
    #[error("config value {key} is invalid: {message}")]
    Invalid { key: String, message: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub engine: EngineConfig,
    pub bus: BusConfig,
    #[serde(default)]
    pub cluster: ClusterConfig,
    pub agents: BTreeMap<String, AgentConfig>,
    pub models: ModelsConfig,
    pub memory: MemoryConfig,
    pub tools: ToolsConfig,
    #[serde(default)]
    pub mcp: McpConfig,
    /// Hermes' own HTTP endpoint (`/metrics`).
    #[serde(default)]
    pub http: HttpConfig,
    /// NATS subjects whose events start agent turns.
    #[serde(default)]
    pub triggers: Vec<TriggerConfig>,
    /// Where trace spans are exported (OTLP over HTTP).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Serving agents over A2A on the HTTP listener.
    #[serde(default)]
    pub a2a: A2aConfig,
}

/// `[http]`: Hermes' own HTTP endpoint while `hermes serve` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to serve `/metrics` on, e.g. `127.0.0.1:9464`; off when unset.
    #[serde(default)]
    pub listen: Option<String>,
    /// Connections each of Hermes' listeners (this endpoint, the MCP server over HTTP, the
    /// control socket) serves at once; past it new connections wait until one closes.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: None,
            max_connections: default_max_connections(),
        }
    }
}

fn default_max_connections() -> usize {
    crate::serving::DEFAULT_MAX_CONNECTIONS
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Directory of the sled database (created if missing).
    pub data_dir: PathBuf,
    /// Largest inbound envelope accepted, in bytes.
    pub max_envelope_bytes: usize,
    /// Largest user message text accepted, in characters.
    pub max_message_chars: usize,
    /// Timeout for one planning step (model call), seconds.
    pub plan_timeout_secs: u64,
    /// Timeout for bus requests between actors other than planning and tools, seconds.
    pub request_timeout_secs: u64,
    /// A session actor idle this long stops; the next message reloads it from sled.
    #[serde(default = "default_idle_secs")]
    pub session_idle_secs: u64,
    /// `sync`: what a turn acknowledged or answered is on disk before the acknowledgement or
    /// answer leaves. `batch`: flushed within `durability_batch_ms`.
    #[serde(default)]
    pub durability: DurabilityConfig,
    /// The longest a write waits for its flush in `batch` mode, milliseconds.
    #[serde(default = "default_batch_ms")]
    pub durability_batch_ms: u64,
    /// Arbiters (threads) the session actors are spread over; 0 = one per CPU.
    #[serde(default)]
    pub session_arbiters: usize,
    /// Worker threads of the I/O runtime (NATS, HTTP, MCP); 0 = one on a machine of one or
    /// two CPUs, two on a larger one ([`crate::runtime::io_threads`]).
    #[serde(default)]
    pub io_threads: usize,
    /// The most memory the database's page cache takes, MiB.
    #[serde(default = "default_cache_mb")]
    pub cache_mb: u64,
    /// How many agents deep a chain of delegations may go (A → B → C is 2).
    #[serde(default = "default_delegation_depth")]
    pub max_delegation_depth: usize,
}

fn default_delegation_depth() -> usize {
    3
}

/// `engine.durability`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityConfig {
    #[default]
    Sync,
    Batch,
}

/// The database page cache when `engine.cache_mb` is not set, MiB.
pub const DEFAULT_CACHE_MB: u64 = 64;

fn default_cache_mb() -> u64 {
    DEFAULT_CACHE_MB
}

fn default_batch_ms() -> u64 {
    5
}

fn default_idle_secs() -> u64 {
    300
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusConfig {
    /// `embedded` or `nats://host:port`.
    pub url: String,
    /// How to prove who this process is to nats-server (`[bus.auth]`).
    #[serde(default)]
    pub auth: bus_auth::BusAuthConfig,
    /// Whether every inbound message must name its publisher ([`publishers`]).
    #[serde(default)]
    pub bind_user: publishers::BindUser,
    /// The users each publisher may speak for (`[bus.publishers.<name>]`).
    #[serde(default)]
    pub publishers: BTreeMap<String, publishers::PublisherConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Default timeout of one tool call, seconds.
    pub default_timeout_secs: u64,
    /// Which built-in tools the tool-executor serves.
    pub builtin: Vec<String>,
    /// Tool definitions: metadata overrides for existing tools, or external worker tools.
    #[serde(default)]
    pub define: Vec<ToolDefineConfig>,
    /// Days a raw tool output stays readable through its `raw_reference`; 0 keeps them forever.
    #[serde(default = "default_raw_retention_days")]
    pub raw_retention_days: u64,
}

fn default_raw_retention_days() -> u64 {
    30
}

impl Config {
    /// The embedded defaults.
    pub fn embedded() -> Result<Self, ConfigError> {
        Self::parse(DEFAULT_CONFIG, "embedded defaults")
    }

    /// The demo profile over the embedded defaults: what `hermes demo` plays.
    pub fn demo() -> Result<Self, ConfigError> {
        Ok(load::load_layers(Some(load::Profile::Demo), &[])?.0)
    }

    /// The team demo's configuration: `config/team.toml` over the embedded defaults.
    pub fn team() -> Result<Self, ConfigError> {
        load::merged(TEAM_CONFIG, "config/team.toml")
    }

    /// The embedded defaults with `path`'s tables merged over them (see [`load`]).
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Ok(load::load_file(path)?.0)
    }

    /// The embedded defaults with each of `paths`' tables merged over them, in order.
    pub fn load_all(paths: &[PathBuf]) -> Result<Self, ConfigError> {
        Ok(load::load_layers(None, paths)?.0)
    }

    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.into(),
            message: e.to_string(),
        })?;
        config.check()?;
        Ok(config)
    }

    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        self.cluster.check()?;
        publishers::check(&self.bus.publishers)?;
        for name in self.agents.keys() {
            crate::protocol::subjects::check_id("agent", name).map_err(|e| {
                ConfigError::Invalid {
                    key: format!("agents.{name}"),
                    message: e.to_string(),
                }
            })?;
        }
        for name in &self.mcp.server.expose_agents {
            if !self.agents.contains_key(name) {
                return Err(ConfigError::Invalid {
                    key: "mcp.server.expose_agents".into(),
                    message: format!(
                        "`{name}` is not a configured agent; name one of [agents.*] ({})",
                        self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        if let Some(name) = &self.mcp.server.passthrough {
            if !self.mcp.servers.iter().any(|server| &server.name == name) {
                return Err(ConfigError::Invalid {
                    key: "mcp.server.passthrough".into(),
                    message: format!(
                        "`{name}` is not a mounted server; name one of [[mcp.servers]] ({})",
                        self.mcp
                            .servers
                            .iter()
                            .map(|server| server.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        for server in &self.mcp.servers {
            crate::protocol::subjects::check_id("mcp server", &server.name).map_err(|e| {
                ConfigError::Invalid {
                    key: "mcp.servers.name".into(),
                    message: e.to_string(),
                }
            })?;
            if server.name.contains("__") {
                return Err(ConfigError::Invalid {
                    key: format!("mcp.servers.{}", server.name),
                    message: "a server name may not contain `__` (it separates server and tool)"
                        .into(),
                });
            }
            if server.command.is_empty() == server.url.is_none() {
                return Err(ConfigError::Invalid {
                    key: format!("mcp.servers.{}", server.name),
                    message: "set exactly one of `command` (a stdio server) or `url` (a \
                              Streamable HTTP server)"
                        .into(),
                });
            }
        }
        let fusion = self.memory.fusion;
        let weights_ok = |w: f64| w.is_finite() && w >= 0.0;
        if !weights_ok(fusion.bm25_weight)
            || !weights_ok(fusion.vector_weight)
            || fusion.bm25_weight + fusion.vector_weight <= 0.0
        {
            return Err(ConfigError::Invalid {
                key: "memory.fusion".into(),
                message: "bm25_weight and vector_weight must be ≥ 0 and not both 0".into(),
            });
        }
        if !(-1.0..1.0).contains(&fusion.min_cosine) {
            return Err(ConfigError::Invalid {
                key: "memory.fusion.min_cosine".into(),
                message: "must be a cosine similarity in -1..1 (1 would turn vectors off)".into(),
            });
        }
        self.check_mcp_host()?;
        agents::check(self)?;
        triggers::check(self)?;
        Ok(())
    }

    fn check_mcp_host(&self) -> Result<(), ConfigError> {
        let host = &self.mcp.server;
        for (i, token) in host.tokens.iter().enumerate() {
            if token.token_env.is_some() == token.token_sha256.is_some() {
                return Err(ConfigError::Invalid {
                    key: format!("mcp.server.tokens[{i}]"),
                    message: "set exactly one of `token_env` or `token_sha256`".into(),
                });
            }
            if let Some(hash) = &token.token_sha256 {
                if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(ConfigError::Invalid {
                        key: format!("mcp.server.tokens[{i}].token_sha256"),
                        message: "must be 64 hex digits (`printf %s TOKEN | sha256sum`)".into(),
                    });
                }
            }
            for role in &token.roles {
                if !host.roles.contains_key(role) {
                    return Err(ConfigError::Invalid {
                        key: format!("mcp.server.tokens[{i}].roles"),
                        message: format!(
                            "role `{role}` is not defined; add [mcp.server.roles.{role}]"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The agent named `name`, or a clear error listing the configured agents.
    pub fn agent(&self, name: &str) -> Result<&AgentConfig, ConfigError> {
        self.agents.get(name).ok_or_else(|| ConfigError::Invalid {
            key: format!("agents.{name}"),
            message: format!(
                "no such agent; configured agents: {}",
                self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposing_an_agent_that_is_not_configured_is_an_error_naming_it() {
        let mut c = Config::embedded().unwrap();
        c.mcp.server.expose_agents = vec!["assistant".into()];
        assert!(c.check().is_ok());
        c.mcp.server.expose_agents = vec!["triage".into()];
        let error = c.check().unwrap_err().to_string();
        assert!(
            error.contains("triage") && error.contains("expose_agents"),
            "{error}"
        );
    }

    #[test]
    fn a_passthrough_server_must_be_a_mounted_one() {
        let mut c = Config::embedded().unwrap();
        c.mcp.servers.push(McpServerConfig {
            name: "everything".into(),
            url: Some("http://127.0.0.1:3001/mcp".into()),
            ..Default::default()
        });
        c.mcp.server.passthrough = Some("everything".into());
        assert!(c.check().is_ok());
        c.mcp.server.passthrough = Some("nowhere".into());
        let error = c.check().unwrap_err().to_string();
        assert!(
            error.contains("nowhere")
                && error.contains("passthrough")
                && error.contains("everything"),
            "{error}"
        );
    }

    #[test]
    fn the_team_config_loads_with_its_agents_models_and_trigger() {
        let c = Config::team().unwrap();
        assert_eq!(
            c.agent("triage").unwrap().delegates_to,
            ["logistics", "care"]
        );
        assert_eq!(c.agent("care").unwrap().model, "care");
        assert_eq!(c.triggers.len(), 1);
        assert!(c.tools.builtin.iter().any(|t| t == "track_parcel"));
    }

    #[test]
    fn embedded_defaults_are_neutral_one_assistant_the_engines_own_tools_and_no_mcp_server() {
        let c = Config::embedded().unwrap();
        assert_eq!(c.agents.keys().collect::<Vec<_>>(), ["assistant"]);
        let assistant = c.agent("assistant").unwrap();
        assert_eq!(assistant.system_prompt, agents::NEUTRAL_SYSTEM_PROMPT);
        assert_eq!(
            c.tools.builtin,
            [
                "current_time",
                "job_status",
                "tool_raw_get",
                "session_search"
            ]
        );
        assert!(c.mcp.servers.is_empty());
        assert!(c.models.planner.is_placeholder());
        for text in [DEFAULT_CONFIG, CONNECT_SCENARIO] {
            for demo in ["shop", "order", "catalog", "headphone"] {
                let live: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.trim_start().starts_with('#') && l.contains(demo))
                    .collect();
                assert!(live.is_empty(), "`{demo}` in the defaults: {live:?}");
            }
        }
    }

    #[test]
    fn the_demo_profile_brings_the_shop_over_the_defaults() {
        let c = Config::demo().unwrap();
        assert!(c
            .agent("assistant")
            .unwrap()
            .system_prompt
            .contains("shopping"));
        for tool in ["order_lookup", "generate_report", "track_parcel", "add"] {
            assert!(c.tools.builtin.iter().any(|t| t == tool), "{tool}");
        }
        assert_eq!(c.mcp.servers[0].name, "catalog");
        assert!(c.models.planner.is_demo_script());
    }

    #[test]
    fn file_overrides_merge_over_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[bus]\nurl = \"nats://127.0.0.1:4222\"\n").unwrap();
        let c = Config::load(Some(&p)).unwrap();
        assert_eq!(c.bus.url, "nats://127.0.0.1:4222");
        assert!(c.agents.contains_key("assistant"));
    }

    #[test]
    fn the_http_endpoint_is_off_by_default_and_set_by_http_listen() {
        assert_eq!(Config::embedded().unwrap().http.listen, None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[http]\nlisten = \"127.0.0.1:9464\"\n").unwrap();
        let c = Config::load(Some(&p)).unwrap();
        assert_eq!(c.http.listen.as_deref(), Some("127.0.0.1:9464"));
    }

    #[test]
    fn mcp_server_needs_exactly_one_of_command_and_url() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        let both = "[[mcp.servers]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://h/mcp\"\n";
        std::fs::write(&p, both).unwrap();
        let e = Config::load(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("exactly one of `command`"), "{e}");
        std::fs::write(&p, "[[mcp.servers]]\nname = \"x\"\n").unwrap();
        assert!(Config::load(Some(&p)).is_err());
        std::fs::write(
            &p,
            "[[mcp.servers]]\nname = \"x\"\nurl = \"http://h/mcp\"\n",
        )
        .unwrap();
        let c = Config::load(Some(&p)).unwrap();
        assert_eq!(c.mcp.servers[0].url.as_deref(), Some("http://h/mcp"));
    }

    #[test]
    fn mcp_token_roles_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        let text = "[[mcp.server.tokens]]\nuser = \"a\"\nroles = [\"ghost\"]\ntoken_env = \"T\"\n";
        std::fs::write(&p, text).unwrap();
        let e = Config::load(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("role `ghost` is not defined"), "{e}");
    }

    #[test]
    fn unknown_keys_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[bus]\nurll = \"x\"\n").unwrap();
        let e = Config::load(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("urll"), "{e}");
    }
}
