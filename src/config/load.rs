//! Loading: the embedded defaults, a file merged over them, then the model the environment or
//! `--model` names — and a [`ConfigReport`] that says where each model role came from
//! (`hermes doctor` prints it).
//!
//! Merge rule: tables merge key by key, arrays and plain values replace. A table that names a
//! different variant than the default — another `provider` in `[models.<role>]`, another
//! `kind` in `[memory.embedder]` — replaces the default table whole, so no key of the old
//! variant is left behind.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::models::{ModelConfig, ModelEnv, OpenAiConfig, DEFAULT_OPENAI_MODEL, ROLES};
use super::{Config, ConfigError, DEFAULT_CONFIG, DEMO_CONFIG};

/// Keys that select a table's variant.
const VARIANT_KEYS: [&str; 2] = ["provider", "kind"];

/// Where a model role's settings came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelOrigin {
    /// The embedded defaults (the placeholder script that says how to connect a model).
    Defaults,
    /// A built-in profile (`hermes demo` loads the demo's).
    Profile(Profile),
    /// `[models.<role>]` in this file.
    File(PathBuf),
    /// The environment's conventions, naming the variables that were set.
    Environment(Vec<&'static str>),
    /// `--model` on the command line.
    Flag,
}

impl fmt::Display for ModelOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Defaults => f.write_str("embedded defaults"),
            Self::Profile(profile) => write!(f, "{} profile", profile.name()),
            Self::File(path) => write!(f, "config file {}", path.display()),
            Self::Environment(names) => write!(f, "environment ({})", names.join(", ")),
            Self::Flag => f.write_str("--model"),
        }
    }
}

/// A configuration compiled into the binary that a command merges over the defaults before
/// the user's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The seeds' shop story (`config/demo.toml`): what `hermes demo` plays.
    Demo,
}

impl Profile {
    /// The profile called `name` (`demo`).
    pub fn named(name: &str) -> Option<Self> {
        (name == "demo").then_some(Self::Demo)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Demo => "demo",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Demo => DEMO_CONFIG,
        }
    }

    fn origin(self) -> &'static str {
        match self {
            Self::Demo => "config/demo.toml (the demo profile)",
        }
    }
}

/// What went into a loaded configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigReport {
    /// The built-in profile merged over the defaults, if any.
    pub profile: Option<Profile>,
    /// The files merged over the defaults (and the profile), in order.
    pub files: Vec<PathBuf>,
    /// Per role (planner, extractor, summariser): where its model came from.
    pub models: BTreeMap<&'static str, ModelOrigin>,
}

/// Which model conventions a command honours.
#[derive(Debug, Clone, Default)]
pub struct ModelChoice {
    /// `--model NAME`: every role uses this model.
    pub flag: Option<String>,
    /// `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `HERMES_MODEL`.
    pub env: ModelEnv,
    /// Whether the environment alone may replace the defaults' scripted model (chat, send and
    /// serve do; the demo keeps its script unless `--model` or a file says otherwise).
    pub honour_env: bool,
}

/// The defaults with `path` merged over them, and where each model came from.
pub fn load_file(path: Option<&Path>) -> Result<(Config, ConfigReport), ConfigError> {
    let paths: Vec<PathBuf> = path.map(Path::to_path_buf).into_iter().collect();
    load_layers(None, &paths)
}

/// The defaults, then `profile`, then each of `paths` in order merged over them, and where
/// each model came from.
pub fn load_layers(
    profile: Option<Profile>,
    paths: &[PathBuf],
) -> Result<(Config, ConfigReport), ConfigError> {
    let mut base = parse(DEFAULT_CONFIG, "embedded defaults")?;
    let mut models: BTreeMap<&'static str, ModelOrigin> =
        ROLES.iter().map(|r| (*r, ModelOrigin::Defaults)).collect();
    let mut origin = String::from("embedded defaults");
    let mut layer = |text: &str, origin_now: String, model_origin: ModelOrigin| {
        let overlay = parse(text, &origin_now)?;
        for role in ROLES {
            if overlay.get("models").and_then(|m| m.get(role)).is_some() {
                models.insert(role, model_origin.clone());
            }
        }
        merge(&mut base, overlay);
        origin = origin_now;
        Ok::<(), ConfigError>(())
    };
    if let Some(profile) = profile {
        layer(
            profile.text(),
            profile.origin().into(),
            ModelOrigin::Profile(profile),
        )?;
    }
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        layer(
            &text,
            path.display().to_string(),
            ModelOrigin::File(path.to_path_buf()),
        )?;
    }
    let config: Config = base
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            origin,
            message: e.to_string(),
        })?;
    config.check()?;
    let report = ConfigReport {
        profile,
        files: paths.to_vec(),
        models,
    };
    Ok((config, report))
}

fn parse(text: &str, origin: &str) -> Result<toml::Value, ConfigError> {
    toml::from_str::<toml::Value>(text).map_err(|e| ConfigError::Parse {
        origin: origin.into(),
        message: e.to_string(),
    })
}

/// The defaults with the TOML `text` merged over them (`origin` names it in errors): how the
/// team demo gets its configuration without a file.
pub fn merged(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let mut base = parse(DEFAULT_CONFIG, "embedded defaults")?;
    merge(&mut base, parse(text, origin)?);
    let config: Config = base
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            origin: origin.into(),
            message: e.to_string(),
        })?;
    config.check()?;
    Ok(config)
}

/// Apply `--model` and the environment's conventions to the loaded `config`.
///
/// Per role: `--model` wins (an OpenAI, OpenAI Responses or Anthropic table keeps its
/// endpoint and changes its model; any other provider becomes the environment's endpoint with that model); else a table from the
/// file stays; else, when `choice.honour_env` and any of `OPENAI_API_KEY`, `OPENAI_BASE_URL`,
/// `HERMES_MODEL` is set, the role uses that endpoint with `HERMES_MODEL` (default
/// `gpt-4o-mini`); else the defaults stay.
pub fn apply_model_choice(config: &mut Config, report: &mut ConfigReport, choice: &ModelChoice) {
    for role in ROLES {
        let Some(model) = config.models.role_mut(role) else {
            continue;
        };
        // A file's or profile's model stays unless `--model` says otherwise.
        let from_file = matches!(
            report.models.get(role),
            Some(ModelOrigin::File(_) | ModelOrigin::Profile(_))
        );
        if let Some(name) = &choice.flag {
            match model {
                ModelConfig::Openai(table) => table.model = name.clone(),
                ModelConfig::OpenaiResponses(table) => table.model = name.clone(),
                ModelConfig::Anthropic(table) => table.model = name.clone(),
                _ => *model = ModelConfig::Openai(OpenAiConfig::from_env(name)),
            }
            report.models.insert(role, ModelOrigin::Flag);
        } else if !from_file && choice.honour_env && choice.env.names_a_model() {
            let name = choice.env.model.as_deref().unwrap_or(DEFAULT_OPENAI_MODEL);
            *model = ModelConfig::Openai(OpenAiConfig::from_env(name));
            report
                .models
                .insert(role, ModelOrigin::Environment(choice.env.names()));
        }
    }
}

/// Merge `overlay` into `base` (see the module doc).
fn merge(base: &mut toml::Value, overlay: toml::Value) {
    match (base, overlay) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing)
                        if existing.is_table() && v.is_table() && same_variant(existing, &v) =>
                    {
                        merge(existing, v)
                    }
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// False when `overlay` names a variant (`provider`, `kind`) other than `base`'s.
fn same_variant(base: &toml::Value, overlay: &toml::Value) -> bool {
    VARIANT_KEYS.iter().all(|key| match overlay.get(key) {
        Some(new) => base.get(key).is_none_or(|old| old == new),
        None => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn switching_provider_leaves_no_key_of_the_default_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[models.planner]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n",
        );
        let (config, report) = load_file(Some(&path)).unwrap();
        let ModelConfig::Openai(table) = &config.models.planner else {
            panic!("planner should be openai: {:?}", config.models.planner);
        };
        assert_eq!(table.model, "gpt-4o-mini");
        assert_eq!(report.models["planner"], ModelOrigin::File(path));
        assert_eq!(report.models["extractor"], ModelOrigin::Defaults);
    }

    #[test]
    fn same_provider_merges_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "[models.planner]\nscenario = \"x.toml\"\n");
        let (config, _) = load_file(Some(&path)).unwrap();
        assert_eq!(
            config.models.planner,
            ModelConfig::Replay {
                scenario: "x.toml".into()
            }
        );
    }

    #[test]
    fn flag_beats_file_and_environment_fills_only_default_roles() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            "[models.planner]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"a\"\n",
        );
        let env = ModelEnv {
            api_key_set: true,
            base_url: None,
            model: Some("from-env".into()),
            ..ModelEnv::default()
        };
        let (mut config, mut report) = load_file(Some(&path)).unwrap();
        let choice = ModelChoice {
            flag: None,
            env: env.clone(),
            honour_env: true,
        };
        apply_model_choice(&mut config, &mut report, &choice);
        let ModelConfig::Openai(planner) = &config.models.planner else {
            panic!()
        };
        assert_eq!(planner.model, "a", "the file's table stays");
        let ModelConfig::Openai(extractor) = &config.models.extractor else {
            panic!()
        };
        assert_eq!(extractor.model, "from-env");
        assert_eq!(
            report.models["extractor"],
            ModelOrigin::Environment(vec!["OPENAI_API_KEY", "HERMES_MODEL"])
        );

        let choice = ModelChoice {
            flag: Some("b".into()),
            env,
            honour_env: true,
        };
        apply_model_choice(&mut config, &mut report, &choice);
        let ModelConfig::Openai(planner) = &config.models.planner else {
            panic!()
        };
        assert_eq!(
            (planner.model.as_str(), planner.base_url.as_deref()),
            ("b", Some("http://h/v1"))
        );
        assert_eq!(report.models["planner"], ModelOrigin::Flag);
    }

    #[test]
    fn the_demo_profile_keeps_its_script_whatever_the_environment_says() {
        let (mut config, mut report) = load_layers(Some(Profile::Demo), &[]).unwrap();
        let choice = ModelChoice {
            flag: None,
            env: ModelEnv {
                api_key_set: true,
                ..ModelEnv::default()
            },
            honour_env: false,
        };
        apply_model_choice(&mut config, &mut report, &choice);
        assert!(config.models.planner.is_demo_script());
        assert_eq!(
            report.models["planner"],
            ModelOrigin::Profile(Profile::Demo)
        );
    }
}
