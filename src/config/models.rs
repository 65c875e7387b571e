//! The model tables (`[models.planner]`, `[models.extractor]`, `[models.summariser]`) and the
//! ecosystem's conventions for naming a model without a config file: `OPENAI_API_KEY`,
//! `OPENAI_BASE_URL` and `HERMES_MODEL`.
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
            Self::Replay { .. } => "replay",
            Self::Bench {} => "bench",
        }
    }

    /// The model's name at its provider, where it has one (scripted models have none).
    pub fn model_name(&self) -> Option<&str> {
        match self {
            Self::Openai(table) => Some(&table.model),
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
