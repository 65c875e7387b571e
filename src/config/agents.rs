//! `[agents.<name>]`: each agent's prompt, model, tools, memory namespaces and limits, and the
//! agents it may delegate to or hand the conversation to — checked against the rest of the
//! configuration when it is loaded, so a typo is refused at start, not in the middle of a turn.

use serde::{Deserialize, Serialize};

use super::models::{ModelConfig, ModelsConfig};
use super::{Config, ConfigError};
use crate::context::tokens::known_window;
use crate::protocol::memory::DEFAULT_NAMESPACE;

/// What prefixes the tool through which an agent delegates to agent `<name>`: `agent__<name>`.
pub const DELEGATION_PREFIX: &str = "agent__";

/// The system prompt of an agent that sets none: a general assistant.
pub const NEUTRAL_SYSTEM_PROMPT: &str = "You are a helpful assistant. Answer clearly and \
concisely. When a tool can give you a fact you do not have (the time, the user's earlier \
conversations, a background job's state), use it rather than guess; when you do not know, say so.";
/// Most planning steps of a turn when an agent sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 8;
/// The window assumed for a model whose window is not known (the replay and bench models, a
/// local model under a name of its own), tokens.
pub const DEFAULT_CONTEXT_WINDOW: usize = 128_000;
/// What an agent keeps free for the model's reply when it sets no `reply_reserve`, tokens
/// (at most a quarter of a small window).
pub const DEFAULT_REPLY_RESERVE: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// One line on what the agent is for; the description of its `agent__<name>` tool.
    #[serde(default)]
    pub description: String,
    /// Default: [`NEUTRAL_SYSTEM_PROMPT`]; unused by an agent that lives elsewhere
    /// (`a2a.card_url`).
    #[serde(default = "default_system_prompt")]
    pub system_prompt: String,
    /// The `[models.<name>]` entry that plans this agent's turns; default: `planner`.
    #[serde(default = "default_model")]
    pub model: String,
    /// Most planning steps (model calls) in one turn before the turn fails.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Token window of the agent's model; absent: the model's known window, else
    /// [`DEFAULT_CONTEXT_WINDOW`] (see [`AgentConfig::window`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<usize>,
    /// Tokens of the window kept free for the reply; absent: [`DEFAULT_REPLY_RESERVE`], at most
    /// a quarter of the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_reserve: Option<usize>,
    /// Turns sent verbatim; older ones are folded into the history summary.
    #[serde(default = "default_recent_turns")]
    pub recent_turns: usize,
    /// The scene (tool group) whose tools this agent's model sees; none: every tool.
    #[serde(default)]
    pub scene: Option<String>,
    /// The only tools this agent may see and call (`session_search` comes with any non-empty
    /// list); `[]`: no tools at all; absent: every tool (narrowed by `scene`).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Which memory namespaces the agent recalls from and which one its turns are mined into.
    #[serde(default)]
    pub memory: AgentMemoryConfig,
    /// Most tokens (prompt + completion, the delegated agents' included) one task of this
    /// agent may use; 0 = no limit.
    #[serde(default)]
    pub token_budget: u64,
    /// Agents this one may delegate tasks to; each appears to its model as a tool
    /// `agent__<name>`.
    #[serde(default)]
    pub delegates_to: Vec<String>,
    /// Agents this one may hand the whole conversation to (tool `handoff`).
    #[serde(default)]
    pub handoffs_to: Vec<String>,
    /// Longest wait for a delegated agent's answer, seconds.
    #[serde(default = "default_delegation_timeout")]
    pub delegation_timeout_secs: u64,
    /// A2A: serve this agent (`{ expose = true }`) or reach it elsewhere (`{ card_url = … }`).
    #[serde(default)]
    pub a2a: Option<super::AgentA2aConfig>,
}

/// `[agents.<name>.memory]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMemoryConfig {
    /// Namespaces recalled from; empty: the agent recalls nothing.
    #[serde(default = "default_namespaces")]
    pub read: Vec<String>,
    /// The namespace finished turns are mined into.
    #[serde(default = "default_write")]
    pub write: String,
    /// Mine this agent's finished turns for memories at all.
    #[serde(default = "yes")]
    pub extract: bool,
}

impl AgentMemoryConfig {
    /// The namespace this agent's turns are mined into, if they are mined.
    pub fn writes(&self) -> Option<&str> {
        self.extract.then_some(self.write.as_str())
    }
}

impl Default for AgentMemoryConfig {
    fn default() -> Self {
        Self {
            read: default_namespaces(),
            write: default_write(),
            extract: true,
        }
    }
}

fn yes() -> bool {
    true
}

fn default_namespaces() -> Vec<String> {
    vec![DEFAULT_NAMESPACE.to_string()]
}

fn default_write() -> String {
    DEFAULT_NAMESPACE.to_string()
}

fn default_system_prompt() -> String {
    NEUTRAL_SYSTEM_PROMPT.into()
}

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS
}

fn default_model() -> String {
    "planner".into()
}

fn default_recent_turns() -> usize {
    10
}

fn default_delegation_timeout() -> u64 {
    600
}

/// Where an agent's effective setting came from (`hermes agents ls` and `hermes doctor` say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    /// Set in the agent's own table.
    Agent,
    /// The known window of the agent's model, named.
    Model(String),
    /// The engine's default.
    Default,
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Agent => f.write_str("set in the agent's table"),
            Self::Model(model) => write!(f, "known window of {model}"),
            Self::Default => f.write_str("engine default"),
        }
    }
}

/// An agent's effective token window and reply reserve, and where each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentWindow {
    pub context_window: usize,
    pub window_from: SettingSource,
    pub reply_reserve: usize,
    pub reserve_from: SettingSource,
}

impl AgentConfig {
    /// The window and reply reserve this agent plans with: its own values, else its model's
    /// known window (`models`) and the default reserve, else the engine defaults.
    pub fn window(&self, models: &ModelsConfig) -> AgentWindow {
        let (context_window, window_from) = match self.context_window {
            Some(window) => (window, SettingSource::Agent),
            None => models
                .model(&self.model)
                .and_then(ModelConfig::model_name)
                .and_then(|name| Some((known_window(name)?, name)))
                .map_or(
                    (DEFAULT_CONTEXT_WINDOW, SettingSource::Default),
                    |(window, name)| (window, SettingSource::Model(name.to_string())),
                ),
        };
        let (reply_reserve, reserve_from) = match self.reply_reserve {
            Some(reserve) => (reserve, SettingSource::Agent),
            None => (
                DEFAULT_REPLY_RESERVE.min(context_window / 4),
                SettingSource::Default,
            ),
        };
        AgentWindow {
            context_window,
            window_from,
            reply_reserve,
            reserve_from,
        }
    }

    /// The agent lives elsewhere and is reached over A2A (`a2a = { card_url = … }`).
    pub fn is_remote(&self) -> bool {
        self.a2a.as_ref().is_some_and(|a| a.card_url.is_some())
    }

    /// The tool name through which another agent delegates to `agent`.
    pub fn delegation_tool(agent: &str) -> String {
        format!("{DELEGATION_PREFIX}{agent}")
    }
}

/// The agent a delegation tool addresses (`agent__care` → `care`).
pub fn delegated_agent(tool: &str) -> Option<&str> {
    tool.strip_prefix(DELEGATION_PREFIX)
}

/// An agent that lives elsewhere: reached over A2A, it delegates and hands off to no one here,
/// and no local agent hands the conversation to it.
fn check_remote(config: &Config, name: &str, agent: &AgentConfig) -> Result<(), ConfigError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        key: format!("agents.{name}.{field}"),
        message,
    };
    if !agent.delegates_to.is_empty() || !agent.handoffs_to.is_empty() {
        return Err(invalid(
            "delegates_to",
            "an agent that lives elsewhere (a2a.card_url) delegates to no one here".into(),
        ));
    }
    for (other, a) in &config.agents {
        if a.handoffs_to.iter().any(|h| h == name) {
            return Err(ConfigError::Invalid {
                key: format!("agents.{other}.handoffs_to"),
                message: format!(
                    "`{name}` lives elsewhere (A2A): delegate to it (delegates_to) instead of \
                     handing it the conversation"
                ),
            });
        }
    }
    let url = agent
        .a2a
        .as_ref()
        .and_then(|a| a.card_url.as_deref())
        .unwrap_or("");
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(
            "a2a.card_url",
            format!("`{url}` is not an http(s) URL of an A2A agent (or of its Agent Card)"),
        ));
    }
    Ok(())
}

/// Every agent's settings agree with the rest of the configuration.
pub(super) fn check(config: &Config) -> Result<(), ConfigError> {
    for (name, agent) in &config.agents {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            key: format!("agents.{name}.{field}"),
            message,
        };
        if agent.is_remote() {
            check_remote(config, name, agent)?;
            continue;
        }
        if agent.max_steps == 0 {
            return Err(invalid("max_steps", "must be at least 1".into()));
        }
        let window = agent.window(&config.models);
        if window.reply_reserve >= window.context_window {
            return Err(invalid(
                "reply_reserve",
                format!(
                    "{} must be smaller than the context window, {} ({})",
                    window.reply_reserve, window.context_window, window.window_from
                ),
            ));
        }
        if config.models.model(&agent.model).is_none() {
            return Err(invalid(
                "model",
                format!(
                    "no [models.{}] table; models: {}",
                    agent.model,
                    config.models.names().join(", ")
                ),
            ));
        }
        for (field, targets) in [
            ("delegates_to", &agent.delegates_to),
            ("handoffs_to", &agent.handoffs_to),
        ] {
            for target in targets {
                if target == name {
                    return Err(invalid(field, format!("`{name}` cannot name itself")));
                }
                if !config.agents.contains_key(target) {
                    return Err(invalid(
                        field,
                        format!(
                            "no agent `{target}`; agents: {}",
                            config.agents.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
        }
        for ns in agent.memory.read.iter().chain([&agent.memory.write]) {
            crate::protocol::subjects::check_id("memory namespace", ns)
                .map_err(|e| invalid("memory", e.to_string()))?;
        }
        if let Some(a2a) = &agent.a2a {
            if a2a.expose && a2a.card_url.is_some() {
                return Err(invalid(
                    "a2a",
                    "set `expose = true` (serve this agent) or `card_url` (an agent that \
                     lives elsewhere), not both"
                        .into(),
                ));
            }
        }
        if agent.delegation_timeout_secs == 0 {
            return Err(invalid(
                "delegation_timeout_secs",
                "must be at least 1".into(),
            ));
        }
    }
    // A named model no agent uses is most likely a misspelt role (`[models.planer]`).
    for model in config.models.named.keys() {
        if !config.agents.values().any(|a| &a.model == model) {
            return Err(ConfigError::Invalid {
                key: format!("models.{model}"),
                message: format!(
                    "no agent uses it (agents.<name>.model = \"{model}\"); the roles are {}",
                    super::models::ROLES.join(", ")
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(extra: &str) -> Result<Config, ConfigError> {
        let text = format!("{}\n{extra}", super::super::DEFAULT_CONFIG);
        Config::parse(&text, "test")
    }

    const CARE: &str = r#"
[agents.care]
description = "Knows the customer's preferences"
system_prompt = "You care."
model = "care"
max_steps = 4
context_window = 8000
reply_reserve = 1000
memory = { read = ["default", "care"], write = "care" }
[models.care]
provider = "replay"
scenario = "builtin:demo"
"#;

    #[test]
    fn an_agent_may_name_its_own_model_and_namespaces() {
        let config = with(CARE).unwrap();
        let care = config.agent("care").unwrap();
        assert_eq!(care.model, "care");
        assert_eq!(care.memory.writes(), Some("care"));
        assert_eq!(config.agent("assistant").unwrap().model, "planner");
        assert!(config.models.model("care").is_some());
    }

    #[test]
    fn delegating_to_an_unknown_agent_is_refused_at_load() {
        let err = with(&format!(
            "{CARE}\n[agents.triage]\nsystem_prompt = \"t\"\nmax_steps = 4\ncontext_window = 8000\nreply_reserve = 100\ndelegates_to = [\"care\", \"logistcs\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("agents.triage.delegates_to"), "{err}");
        assert!(err.contains("logistcs"), "{err}");
    }

    #[test]
    fn a_model_no_agent_uses_is_refused_as_a_likely_typo() {
        let err = with("[models.planer]\nprovider = \"bench\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("models.planer"), "{err}");
        assert!(err.contains("planner, extractor, summariser"), "{err}");
    }

    #[test]
    fn an_agent_table_needs_only_what_matters() {
        let config = with("[agents.calc]\ntools = [\"add\"]\n").unwrap();
        let calc = config.agent("calc").unwrap();
        assert_eq!(calc.system_prompt, NEUTRAL_SYSTEM_PROMPT);
        assert_eq!(calc.max_steps, DEFAULT_MAX_STEPS);
        assert_eq!(
            calc.window(&config.models),
            AgentWindow {
                context_window: DEFAULT_CONTEXT_WINDOW,
                window_from: SettingSource::Default,
                reply_reserve: DEFAULT_REPLY_RESERVE,
                reserve_from: SettingSource::Default,
            }
        );
    }

    #[test]
    fn an_agent_without_a_window_takes_its_models_known_one() {
        let config = with(
            "[models.small]\nprovider = \"openai\"\nmodel = \"gpt-4-0613\"\n\
             [agents.calc]\nmodel = \"small\"\n\
             [agents.big]\nmodel = \"small\"\ncontext_window = 20000\nreply_reserve = 1000\n",
        )
        .unwrap();
        let calc = config.agent("calc").unwrap().window(&config.models);
        assert_eq!(calc.context_window, 8192);
        assert_eq!(calc.window_from, SettingSource::Model("gpt-4-0613".into()));
        assert_eq!(calc.reply_reserve, 2048, "a quarter of a small window");
        let big = config.agent("big").unwrap().window(&config.models);
        assert_eq!((big.context_window, big.reply_reserve), (20000, 1000));
        assert_eq!(big.window_from, SettingSource::Agent);
    }

    #[test]
    fn a_reserve_as_large_as_the_known_window_is_refused_with_both_numbers() {
        let err = with(
            "[models.small]\nprovider = \"openai\"\nmodel = \"gpt-4-0613\"\n\
             [agents.calc]\nmodel = \"small\"\nreply_reserve = 9000\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("agents.calc.reply_reserve"), "{err}");
        assert!(err.contains("9000") && err.contains("8192"), "{err}");
    }

    #[test]
    fn an_agent_naming_a_missing_model_is_refused() {
        let err = with("[agents.x]\nsystem_prompt = \"x\"\nmodel = \"nope\"\nmax_steps = 1\ncontext_window = 100\nreply_reserve = 10\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("agents.x.model"), "{err}");
    }
}
