//! The model tables (`[models.planner]`, `[models.extractor]`, `[models.summariser]`) and the
//! ecosystem's conventions for naming a model without a config file: `OPENAI_API_KEY`,
//! `OPENAI_BASE_URL` and `HERMES_MODEL` (and, for `provider = "anthropic"` tables,
//! `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL`).
//!
//! A table's `provider` decides which keys it may hold; a file that switches the provider
//! replaces the default table instead of merging into it ([`super::load`]).

use serde::{Deserialize, Serialize};

/// Where an OpenAI-compatible model lives when neither the table nor `OPENAI_BASE_URL` says.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when the environment names an endpoint but no model.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";
/// The environment variable read for the API key when a table names none.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// The environment variable read for the endpoint when a table names none.
pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
/// The environment variable naming the model for every role (like `--model`).
pub const HERMES_MODEL: &str = "HERMES_MODEL";
/// Where an Anthropic model lives when neither the table nor `ANTHROPIC_BASE_URL` says.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The environment variable read for an Anthropic table's key when it names none.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
/// The environment variable read for an Anthropic table's endpoint when it names none.
pub const ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";

/// The model roles, in the order they are shown.
pub const ROLES: [&str; 3] = ["planner", "extractor", "summariser"];

/// One model per role, and any number of named models that agents choose by name
/// (`[agents.<name>] model = "<model>"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelsConfig {
    pub planner: ModelConfig,
    pub extractor: ModelConfig,
    pub summariser: ModelConfig,
    /// `[models.<name>]` tables beyond the three roles.
    #[serde(flatten)]
    pub named: std::collections::BTreeMap<String, ModelConfig>,
}

impl ModelsConfig {
    /// The model called `name`: a role or a named table.
    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.role(name).or_else(|| self.named.get(name))
    }

    /// Every model's name: the roles, then the named tables.
    pub fn names(&self) -> Vec<String> {
        ROLES
            .iter()
            .map(|r| r.to_string())
            .chain(self.named.keys().cloned())
            .collect()
    }

    /// The model of `role` (one of [`ROLES`]).
    pub fn role(&self, role: &str) -> Option<&ModelConfig> {
        match role {
            "planner" => Some(&self.planner),
            "extractor" => Some(&self.extractor),
            "summariser" => Some(&self.summariser),
            _ => None,
        }
    }

    /// The model of `role`, to change it.
    pub fn role_mut(&mut self, role: &str) -> Option<&mut ModelConfig> {
        match role {
            "planner" => Some(&mut self.planner),
            "extractor" => Some(&mut self.extractor),
            "summariser" => Some(&mut self.summariser),
            _ => None,
        }
    }
}

/// One model role's provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "lowercase", deny_unknown_fields)]
pub enum ModelConfig {
    /// Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp…).
    Openai(OpenAiConfig),
    /// The OpenAI Responses API (OpenAI, Ollama, vLLM, LM Studio): reasoning kept across
    /// tool calls.
    #[serde(rename = "openai-responses")]
    OpenaiResponses(ResponsesConfig),
    /// The Anthropic Messages API (Anthropic, Ollama, llama.cpp): signed thinking, explicit
    /// prompt caching.
    Anthropic(AnthropicConfig),
    /// A scripted model read from a scenario file; `builtin:demo` is the demo's script,
    /// `builtin:connect` the defaults' placeholder.
    Replay { scenario: String },
    /// The benchmark model of `shared/bench/WORKLOAD.md`.
    Bench {},
}

impl ModelConfig {
    /// The provider's name as written in the config.
    pub fn provider(&self) -> &'static str {
        match self {
            Self::Openai(_) => "openai",
            Self::OpenaiResponses(_) => "openai-responses",
            Self::Anthropic(_) => "anthropic",
            Self::Replay { .. } => "replay",
            Self::Bench {} => "bench",
        }
    }

    /// The model's name at its provider, where it has one (scripted models have none).
    pub fn model_name(&self) -> Option<&str> {
        match self {
            Self::Openai(table) => Some(&table.model),
            Self::OpenaiResponses(table) => Some(&table.model),
            Self::Anthropic(table) => Some(&table.model),
            Self::Replay { .. } | Self::Bench {} => None,
        }
    }

    /// What the model's tokens cost, when the table says.
    pub fn price(&self) -> Option<Price> {
        match self {
            Self::Openai(t) => t.price,
            Self::OpenaiResponses(t) => t.price,
            Self::Anthropic(t) => t.price,
            Self::Replay { .. } | Self::Bench {} => None,
        }
    }

    /// The model tried when this one fails, if the table names one.
    pub fn fallback(&self) -> Option<&ModelConfig> {
        match self {
            Self::Openai(t) => t.fallback.as_deref(),
            Self::OpenaiResponses(t) => t.fallback.as_deref(),
            Self::Anthropic(t) => t.fallback.as_deref(),
            Self::Replay { .. } | Self::Bench {} => None,
        }
    }

    /// True for the demo's script (`provider = "replay"`, `scenario = "builtin:demo"`).
    pub fn is_demo_script(&self) -> bool {
        matches!(self, Self::Replay { scenario } if scenario == "builtin:demo")
    }

    /// True for the defaults' placeholder (`scenario = "builtin:connect"`): no model is
    /// configured.
    pub fn is_placeholder(&self) -> bool {
        matches!(self, Self::Replay { scenario } if scenario == "builtin:connect")
    }

    /// True for a built-in script that only knows its own story (the demo's, the placeholder).
    pub fn is_builtin_script(&self) -> bool {
        self.is_demo_script() || self.is_placeholder()
    }
}

/// `provider = "openai"`: an OpenAI-compatible `POST {base_url}/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1` (Ollama); default:
    /// `$OPENAI_BASE_URL`, else `https://api.openai.com/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    pub model: String,
    /// Name of the environment variable holding the API key; default: `OPENAI_API_KEY` when it
    /// is set, else no key (local servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Longest wait for one model call (one attempt), seconds.
    #[serde(default = "default_model_timeout")]
    pub timeout_secs: u64,
    /// Stream the reply (text deltas reach `hermes.out…` as they arrive).
    #[serde(default = "default_true")]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Retries after HTTP 429 or 5xx (or a dropped connection) before the call fails, with
    /// exponential backoff and jitter, honouring `Retry-After`.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Another model tried when this one fails after its retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Box<ModelConfig>>,
    /// What its tokens cost, for `hermes eval tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

/// Prices in a currency of your choice per million tokens:
/// `price = { input_per_mtok = 2.5, cached_input_per_mtok = 1.25, output_per_mtok = 10 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens that were not read from the cache.
    pub input_per_mtok: f64,
    /// Input tokens read from the prompt cache; default: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    /// Input tokens written to the cache (Anthropic bills them at 1.25×); default: the input
    /// price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    /// Output tokens, reasoning included.
    pub output_per_mtok: f64,
}

impl Price {
    /// The cost of `usage`.
    pub fn cost(&self, usage: &crate::protocol::chat::Usage) -> f64 {
        let cached = f64::from(usage.cached_tokens);
        let written = f64::from(usage.cache_write_tokens);
        let fresh = (f64::from(usage.prompt_tokens) - cached - written).max(0.0);
        (fresh * self.input_per_mtok
            + cached * self.cached_input_per_mtok.unwrap_or(self.input_per_mtok)
            + written * self.cache_write_per_mtok.unwrap_or(self.input_per_mtok)
            + f64::from(usage.completion_tokens) * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// `provider = "openai-responses"`: `POST {base_url}/responses`. Endpoint and key as for
/// `provider = "openai"` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponsesConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default = "default_model_timeout")]
    pub timeout_secs: u64,
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Sent only to models without `reasoning_effort` (reasoning models refuse it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Box<ModelConfig>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// `minimal`, `low`, `medium` or `high`; none: the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// `auto`, `concise` or `detailed`: a readable summary of the reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_summary: Option<String>,
    /// Keep responses on the server. Default false: reasoning comes back encrypted
    /// (`include = ["reasoning.encrypted_content"]`) and Hermes returns it.
    #[serde(default)]
    pub store: bool,
    #[serde(default = "default_true")]
    pub parallel_tool_calls: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

impl ResponsesConfig {
    /// The endpoint: the table's, else `$OPENAI_BASE_URL`, else OpenAI's.
    pub fn resolved_base_url(&self, env: &ModelEnv) -> String {
        self.base_url
            .clone()
            .or_else(|| env.base_url.clone())
            .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_string())
    }

    /// `api_key_env`, else `OPENAI_API_KEY` when it is set.
    pub fn key_variable(&self, env: &ModelEnv) -> Option<String> {
        match &self.api_key_env {
            Some(var) => Some(var.clone()),
            None if env.api_key_set => Some(OPENAI_API_KEY.to_string()),
            None => None,
        }
    }
}

/// `provider = "anthropic"`: `POST {base_url}/v1/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    /// e.g. `https://api.anthropic.com` or `http://127.0.0.1:11434` (Ollama); default:
    /// `$ANTHROPIC_BASE_URL`, else `https://api.anthropic.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    pub model: String,
    /// Default: `ANTHROPIC_API_KEY` when it is set, else no key (local servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default = "default_model_timeout")]
    pub timeout_secs: u64,
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Sent only without thinking (thinking allows no other temperature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Box<ModelConfig>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Most output tokens per call (thinking included); the API requires a bound.
    #[serde(default = "default_anthropic_max_tokens")]
    pub max_tokens: u32,
    /// Extended thinking with this many tokens (≥ 1024, below `max_tokens`); none: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Place `cache_control` breakpoints (tools + system, end of history, end of request).
    #[serde(default = "default_true")]
    pub cache: bool,
    /// The `anthropic-version` header.
    #[serde(default = "default_anthropic_version")]
    pub anthropic_version: String,
}

impl AnthropicConfig {
    /// The endpoint: the table's, else `$ANTHROPIC_BASE_URL`, else Anthropic's.
    pub fn resolved_base_url(&self, env: &ModelEnv) -> String {
        self.base_url
            .clone()
            .or_else(|| env.anthropic_base_url.clone())
            .unwrap_or_else(|| DEFAULT_ANTHROPIC_BASE_URL.to_string())
    }

    /// `api_key_env`, else `ANTHROPIC_API_KEY` when it is set.
    pub fn key_variable(&self, env: &ModelEnv) -> Option<String> {
        match &self.api_key_env {
            Some(var) => Some(var.clone()),
            None if env.anthropic_api_key_set => Some(ANTHROPIC_API_KEY.to_string()),
            None => None,
        }
    }
}

fn default_anthropic_max_tokens() -> u32 {
    4096
}
/// The `anthropic-version` header sent unless a table names another.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

fn default_anthropic_version() -> String {
    DEFAULT_ANTHROPIC_VERSION.into()
}

impl OpenAiConfig {
    /// An endpoint named by the environment's conventions, for `model`.
    pub fn from_env(model: &str) -> Self {
        Self {
            base_url: None,
            model: model.to_string(),
            api_key_env: None,
            timeout_secs: default_model_timeout(),
            stream: true,
            temperature: None,
            max_retries: default_max_retries(),
            fallback: None,
            price: None,
        }
    }

    /// The endpoint this table resolves to: its `base_url`, else the environment's, else
    /// OpenAI's.
    pub fn resolved_base_url(&self, env: &ModelEnv) -> String {
        self.base_url
            .clone()
            .or_else(|| env.base_url.clone())
            .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_string())
    }

    /// The environment variable the key is read from, if any: `api_key_env`, else
    /// `OPENAI_API_KEY` when it is set.
    pub fn key_variable(&self, env: &ModelEnv) -> Option<String> {
        match &self.api_key_env {
            Some(var) => Some(var.clone()),
            None if env.api_key_set => Some(OPENAI_API_KEY.to_string()),
            None => None,
        }
    }
}

fn default_model_timeout() -> u64 {
    120
}
fn default_true() -> bool {
    true
}
fn default_max_retries() -> u32 {
    3
}

/// What the environment says about models: the OpenAI conventions and `HERMES_MODEL`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelEnv {
    /// `OPENAI_API_KEY` is set and not empty (its value is read where it is used).
    pub api_key_set: bool,
    /// `OPENAI_BASE_URL`.
    pub base_url: Option<String>,
    /// `HERMES_MODEL`.
    pub model: Option<String>,
    /// `ANTHROPIC_API_KEY` is set and not empty (read only by `provider = "anthropic"`).
    pub anthropic_api_key_set: bool,
    /// `ANTHROPIC_BASE_URL` (read only by `provider = "anthropic"`).
    pub anthropic_base_url: Option<String>,
}

impl ModelEnv {
    /// Read the variables of this process.
    pub fn from_process() -> Self {
        let read = |name: &str| {
            std::env::var(name)
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        Self {
            api_key_set: read(OPENAI_API_KEY).is_some(),
            base_url: read(OPENAI_BASE_URL),
            model: read(HERMES_MODEL),
            anthropic_api_key_set: read(ANTHROPIC_API_KEY).is_some(),
            anthropic_base_url: read(ANTHROPIC_BASE_URL),
        }
    }

    /// The variables that are set, by name.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.api_key_set {
            names.push(OPENAI_API_KEY);
        }
        if self.base_url.is_some() {
            names.push(OPENAI_BASE_URL);
        }
        if self.model.is_some() {
            names.push(HERMES_MODEL);
        }
        names
    }

    /// True when any of the variables names a model or an endpoint.
    pub fn names_a_model(&self) -> bool {
        !self.names().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_provider_tables_load_with_their_defaults_and_a_price() {
        let table: ModelConfig = toml::from_str(
            "provider = \"openai-responses\"\nmodel = \"gpt-5-mini\"\nreasoning_effort = \"low\"\n\
             price = { input_per_mtok = 0.25, cached_input_per_mtok = 0.025, output_per_mtok = 2.0 }\n",
        )
        .unwrap();
        let ModelConfig::OpenaiResponses(r) = &table else {
            panic!("{table:?}")
        };
        assert!(!r.store && r.parallel_tool_calls && r.stream);
        assert_eq!(table.provider(), "openai-responses");
        let usage = crate::protocol::chat::Usage {
            cached_tokens: 1_000_000,
            ..crate::protocol::chat::Usage::new(2_000_000, 1_000_000)
        };
        let cost = table.price().unwrap().cost(&usage);
        assert!((cost - (0.25 + 0.025 + 2.0)).abs() < 1e-9, "{cost}");
        let table: ModelConfig = toml::from_str(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nthinking_budget = 2048\n",
        )
        .unwrap();
        let ModelConfig::Anthropic(a) = &table else {
            panic!("{table:?}")
        };
        assert_eq!((a.max_tokens, a.cache), (4096, true));
        assert_eq!(a.anthropic_version, "2023-06-01");
        assert_eq!(
            a.resolved_base_url(&ModelEnv::default()),
            DEFAULT_ANTHROPIC_BASE_URL
        );
        let err = toml::from_str::<ModelConfig>(
            "provider = \"anthropic\"\nmodel = \"c\"\nstore = true\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("store"), "{err}");
    }

    #[test]
    fn base_url_comes_from_table_then_environment_then_openai() {
        let mut table = OpenAiConfig::from_env("m");
        let env = ModelEnv {
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            ..ModelEnv::default()
        };
        assert_eq!(
            table.resolved_base_url(&ModelEnv::default()),
            DEFAULT_OPENAI_BASE_URL
        );
        assert_eq!(table.resolved_base_url(&env), "http://127.0.0.1:11434/v1");
        table.base_url = Some("http://h/v1".into());
        assert_eq!(table.resolved_base_url(&env), "http://h/v1");
    }

    #[test]
    fn key_variable_defaults_to_openai_api_key_only_when_set() {
        let mut table = OpenAiConfig::from_env("m");
        assert_eq!(table.key_variable(&ModelEnv::default()), None);
        let env = ModelEnv {
            api_key_set: true,
            ..ModelEnv::default()
        };
        assert_eq!(table.key_variable(&env).as_deref(), Some(OPENAI_API_KEY));
        table.api_key_env = Some("MY_KEY".into());
        assert_eq!(
            table.key_variable(&ModelEnv::default()).as_deref(),
            Some("MY_KEY")
        );
    }
}
