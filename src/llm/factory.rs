//! [`build_model`]: the configured provider for one model role.

use std::sync::Arc;
use std::time::Duration;

use super::anthropic::{AnthropicModel, AnthropicOptions};
use super::bench::BenchModel;
use super::fallback::FallbackModel;
use super::openai::OpenAiModel;
use super::replay::ReplayModel;
use super::responses::{ResponsesModel, ResponsesOptions};
use super::{ChatModel, LlmError};
use crate::config::{
    AnthropicConfig, ModelConfig, ModelEnv, OpenAiConfig, ResponsesConfig, DEMO_SCENARIO,
};

/// The model `config` describes, serving `role` (planner | extractor | summariser).
///
/// An OpenAI or OpenAI Responses model reads its endpoint and key as its table says (its own
/// keys, else `OPENAI_BASE_URL` / `OPENAI_API_KEY`), an Anthropic model likewise with
/// `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`, now; a replay model with
/// `scenario = "builtin:demo"` uses the embedded demo scenario; a `fallback` table (of any
/// provider) wraps the model in a [`FallbackModel`].
pub fn build_model(config: &ModelConfig, role: &str) -> Result<Arc<dyn ChatModel>, LlmError> {
    let env = ModelEnv::from_process();
    let primary: Arc<dyn ChatModel> = match config {
        ModelConfig::Openai(table) => build_openai(table, role, &env)?,
        ModelConfig::OpenaiResponses(table) => build_responses(table, role, &env)?,
        ModelConfig::Anthropic(table) => build_anthropic(table, role, &env)?,
        ModelConfig::Replay { scenario } => {
            Arc::new(ReplayModel::load(scenario, role, DEMO_SCENARIO)?)
        }
        ModelConfig::Bench {} => Arc::new(BenchModel::new()),
    };
    match config.fallback() {
        Some(fallback) => {
            let fallback = build_model(fallback, role)?;
            Ok(Arc::new(FallbackModel::new(primary, fallback)))
        }
        None => Ok(primary),
    }
}

/// The key in the variable `key_variable` names, if any.
fn api_key(key_variable: &Option<String>, role: &str) -> Result<Option<String>, LlmError> {
    key_variable
        .as_deref()
        .map(|var| api_key_from_env(var, role))
        .transpose()
}

fn build_responses(
    table: &ResponsesConfig,
    role: &str,
    env: &ModelEnv,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let key_variable = table.key_variable(env);
    let options = ResponsesOptions {
        stream: table.stream,
        temperature: table.temperature,
        reasoning_effort: table.reasoning_effort.clone(),
        reasoning_summary: table.reasoning_summary.clone(),
        store: table.store,
        parallel_tool_calls: table.parallel_tool_calls,
        max_output_tokens: table.max_output_tokens,
    };
    let model = ResponsesModel::new(
        &table.resolved_base_url(env),
        &table.model,
        api_key(&key_variable, role)?,
        Duration::from_secs(table.timeout_secs),
        options,
    )?
    .with_retries(table.max_retries)
    .with_key_variable(key_variable);
    Ok(Arc::new(model))
}

fn build_anthropic(
    table: &AnthropicConfig,
    role: &str,
    env: &ModelEnv,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let key_variable = table.key_variable(env);
    let options = AnthropicOptions {
        stream: table.stream,
        temperature: table.temperature,
        max_tokens: table.max_tokens,
        thinking_budget: table.thinking_budget,
        cache: table.cache,
        version: table.anthropic_version.clone(),
    };
    let model = AnthropicModel::new(
        &table.resolved_base_url(env),
        &table.model,
        api_key(&key_variable, role)?,
        Duration::from_secs(table.timeout_secs),
        options,
    )?
    .with_retries(table.max_retries)
    .with_key_variable(key_variable);
    Ok(Arc::new(model))
}

fn build_openai(
    table: &OpenAiConfig,
    role: &str,
    env: &ModelEnv,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let key_variable = table.key_variable(env);
    let model = OpenAiModel::new(
        &table.resolved_base_url(env),
        &table.model,
        api_key(&key_variable, role)?,
        Duration::from_secs(table.timeout_secs),
        table.stream,
        table.temperature,
    )?
    .with_retries(table.max_retries)
    .with_key_variable(key_variable);
    Ok(Arc::new(model))
}

/// The key in environment variable `var`, or an error that says how to set it.
pub fn api_key_from_env(var: &str, role: &str) -> Result<String, LlmError> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_string()),
        Ok(_) => Err(LlmError::Config(format!(
            "the {role} model's API key variable {var} is set but empty; export {var}=<your key>"
        ))),
        Err(_) => Err(LlmError::Config(format!(
            "the {role} model reads its API key from the environment variable {var}, which is not \
             set; export {var}=<your key>, or remove `api_key_env` for a server without auth"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(api_key_env: Option<&str>) -> ModelConfig {
        ModelConfig::Openai(OpenAiConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key_env: api_key_env.map(str::to_string),
            timeout_secs: 5,
            ..OpenAiConfig::from_env("gpt-4o-mini")
        })
    }

    #[test]
    fn fallback_table_wraps_the_model() {
        let ModelConfig::Openai(mut table) = openai(None) else {
            panic!()
        };
        table.fallback = Some(Box::new(ModelConfig::Bench {}));
        let model = build_model(&ModelConfig::Openai(table), "planner").unwrap();
        assert_eq!(model.id(), "openai:gpt-4o-mini (fallback bench)");
    }

    #[test]
    fn openai_without_key_variable_builds() {
        let model = build_model(&openai(None), "planner").unwrap();
        assert_eq!(model.id(), "openai:gpt-4o-mini");
        assert_eq!(model.model_name(), "gpt-4o-mini");
    }

    #[test]
    fn missing_api_key_variable_is_named_in_the_error() {
        let var = "HERMES_TEST_SURELY_UNSET_KEY_4711";
        let err = match build_model(&openai(Some(var)), "planner") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a missing key variable must be an error"),
        };
        assert!(err.contains(var) && err.contains("planner"), "{err}");
    }

    #[test]
    fn responses_and_anthropic_tables_build_with_a_fallback_between_them() {
        let table: ModelConfig = toml::from_str(
            "provider = \"anthropic\"\nmodel = \"claude-x\"\nbase_url = \"http://127.0.0.1:9\"\n\
             fallback = { provider = \"openai-responses\", model = \"gpt-5-mini\", base_url = \"http://127.0.0.1:9/v1\" }\n",
        )
        .unwrap();
        let model = build_model(&table, "planner").unwrap();
        assert_eq!(
            model.id(),
            "anthropic:claude-x (fallback openai-responses:gpt-5-mini)"
        );
    }

    #[test]
    fn bench_and_replay_files_build() {
        assert_eq!(
            build_model(&ModelConfig::Bench {}, "planner").unwrap().id(),
            "bench"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "name = \"mine\"\n[[rule]]\nrole = \"planner\"\ntext = \"hi\"\n",
        )
        .unwrap();
        let replay = ModelConfig::Replay {
            scenario: path.display().to_string(),
        };
        assert_eq!(build_model(&replay, "planner").unwrap().id(), "replay:mine");
    }

    #[test]
    fn builtin_demo_scenario_is_valid_for_every_role() {
        let replay = ModelConfig::Replay {
            scenario: "builtin:demo".into(),
        };
        for role in ["planner", "extractor", "summariser"] {
            assert!(build_model(&replay, role).is_ok(), "{role}");
        }
    }
}
