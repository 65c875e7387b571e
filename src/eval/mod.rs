//! `hermes eval tasks`: a regression harness for whole tasks.
//!
//! A suite ([`suite`]) lists cases — user messages in one or more sessions of a user, plus
//! checks on what the turns did: tools called with matching arguments, what the answer holds,
//! memories written or recalled, at most N tool rounds. [`run::Runner`] plays each case on a
//! fresh in-process engine against whichever model the configuration names, [`check`] turns
//! the observed turns into failure reasons, [`report`] sums the run up (completion rate, tool
//! rounds, tokens, latency) and [`baseline`] compares it with an earlier run.
//!
//! The library has no terminal output: `src/cli/eval_tasks.rs` draws the progress bar and the
//! table ([`table`]).

pub mod baseline;
pub mod check;
pub mod report;
pub mod run;
pub mod suite;
pub mod table;

use std::path::Path;

use crate::config::models::ModelConfig;
use crate::config::Config;
use crate::llm::replay::BUILTIN_DEMO;

/// Find each replay model's relative `scenario` next to `config_file` when it is there
/// (a suite's config travels with its scenario); otherwise the path stays as written,
/// relative to the working directory like every other path of the config.
pub fn resolve_scenarios(config: &mut Config, config_file: &Path) {
    let Some(dir) = config_file.parent() else {
        return;
    };
    for role in crate::config::models::ROLES {
        if let Some(ModelConfig::Replay { scenario }) = config.models.role_mut(role) {
            let path = Path::new(scenario.as_str());
            if scenario.as_str() == BUILTIN_DEMO
                || scenario.starts_with("builtin:")
                || path.is_absolute()
            {
                continue;
            }
            let beside = dir.join(path);
            if beside.is_file() {
                *scenario = beside.to_string_lossy().into_owned();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_scenario_is_found_beside_its_config_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("script.toml"), "name = \"x\"\n").unwrap();
        let config_file = dir.path().join("c.toml");
        let mut config = Config::embedded().unwrap();
        for role in crate::config::models::ROLES {
            *config.models.role_mut(role).unwrap() = ModelConfig::Replay {
                scenario: "script.toml".into(),
            };
        }
        *config.models.role_mut("summariser").unwrap() = ModelConfig::Replay {
            scenario: "elsewhere.toml".into(),
        };
        resolve_scenarios(&mut config, &config_file);
        let beside = dir
            .path()
            .join("script.toml")
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            config.models.planner,
            ModelConfig::Replay { scenario: beside }
        );
        assert_eq!(
            config.models.summariser,
            ModelConfig::Replay {
                scenario: "elsewhere.toml".into()
            }
        );
    }
}
