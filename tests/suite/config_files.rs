//! Real config files (tests/data/config) loaded over the defaults: switching a provider or an
//! embedder kind replaces the table, so no key of the old variant survives.

use std::path::{Path, PathBuf};

use hermes::config::load::load_file;
use hermes::config::{Config, EmbedderConfig, ModelConfig, ModelOrigin, OpenAiConfig};
use pretty_assertions::assert_eq;

fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/config")
        .join(name)
}

fn load(name: &str) -> Config {
    load_file(Some(&file(name)))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .0
}

fn openai(model: &ModelConfig) -> &OpenAiConfig {
    match model {
        ModelConfig::Openai(table) => table,
        other => panic!("expected an openai model, got {other:?}"),
    }
}

#[test]
fn replay_to_openai_for_one_role_keeps_the_others_scripted() {
    let path = file("planner-openai.toml");
    let (config, report) = load_file(Some(&path)).unwrap();
    assert_eq!(
        openai(&config.models.planner),
        &OpenAiConfig {
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            ..OpenAiConfig::from_env("qwen2.5:7b")
        }
    );
    assert!(config.models.extractor.is_placeholder());
    assert_eq!(report.models["planner"], ModelOrigin::File(path));
    assert_eq!(report.models["summariser"], ModelOrigin::Defaults);
}

#[test]
fn every_openai_key_is_read_including_a_fallback() {
    let config = load("every-role-openai.toml");
    let planner = openai(&config.models.planner);
    assert_eq!(
        planner,
        &OpenAiConfig {
            base_url: Some("https://api.openai.com/v1".into()),
            model: "gpt-4o-mini".into(),
            api_key_env: Some("HERMES_TEST_KEY".into()),
            timeout_secs: 60,
            stream: false,
            temperature: Some(0.2),
            max_retries: 5,
            fallback: Some(Box::new(ModelConfig::Openai(OpenAiConfig {
                base_url: Some("http://127.0.0.1:8000/v1".into()),
                ..OpenAiConfig::from_env("local")
            }))),
            price: None,
        }
    );
    assert_eq!(
        openai(&config.models.extractor),
        &OpenAiConfig::from_env("gpt-4o-mini")
    );
    assert_eq!(
        openai(&config.models.summariser),
        &OpenAiConfig::from_env("gpt-4o-mini")
    );
}

#[test]
fn replay_to_bench_and_to_another_scenario() {
    assert_eq!(
        load("bench-planner.toml").models.planner,
        ModelConfig::Bench {}
    );
    assert_eq!(
        load("replay-file.toml").models.planner,
        ModelConfig::Replay {
            scenario: "tests/data/scenarios/my-story.toml".into()
        }
    );
}

#[test]
fn embedder_kind_switch_replaces_the_table() {
    let config = load("embedder-openai.toml");
    match &config.memory.embedder {
        EmbedderConfig::Openai {
            base_url, model, ..
        } => assert_eq!(
            (base_url.as_str(), model.as_str()),
            ("http://127.0.0.1:11434/v1", "nomic-embed-text")
        ),
        other => panic!("expected the openai embedder, got {other:?}"),
    }
}

#[test]
fn a_key_of_another_provider_is_refused_by_name() {
    let err = load_file(Some(&file("openai-leftover-key.toml")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("scenario"), "{err}");
}

#[test]
fn shipped_example_configs_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // Scenario scripts and the defaults themselves are not overlays.
        if !name.ends_with(".toml") || name.contains("scenario") || name == "default.toml" {
            continue;
        }
        if let Err(e) = load_file(Some(&path)) {
            panic!("config/{name} does not load: {e}");
        }
    }
}
