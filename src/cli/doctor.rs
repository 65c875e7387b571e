//! `hermes doctor`: the configuration `chat`, `send` and `serve` would run with — which model
//! each role uses and where that came from — and a probe of every model endpoint.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Args;

use hermes::actors::tool_executor::configured_definitions;
use hermes::config::models::ROLES;
use hermes::config::{Config, ConfigReport, EmbedderConfig, ModelConfig, ModelEnv, ModelOrigin};
use hermes::llm::probe::{probe, ProbeOutcome, Wire};
use hermes::memory::embed::static_model;

#[derive(Args)]
pub struct DoctorArgs {
    /// Show the configuration only; do not contact the model endpoints.
    #[arg(long)]
    no_probe: bool,
    /// Seconds to wait for each endpoint.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

/// How to connect a real model, for people who have only the demo script.
pub const CONNECT_A_MODEL: &str = "\
Connect a real model in one of two ways:
  1. the environment, no file:  export OPENAI_API_KEY=sk-…  (and, for Ollama, vLLM or a
     llama.cpp server: export OPENAI_BASE_URL=http://127.0.0.1:11434/v1), then
     export HERMES_MODEL=gpt-4o-mini or pass --model NAME
  2. a config file:  `hermes init` writes one for your model and agents; then
     hermes --config hermes.toml chat (see README.md, \"A real model\")
`hermes doctor` shows which model each role uses and checks the endpoint.";

/// What `hermes chat` says first when the planner on the embedded bus is a built-in script.
pub fn scripted_model_notice(config: &Config) -> Option<String> {
    if config.bus.url != "embedded" {
        return None;
    }
    let planner = &config.models.planner;
    if planner.is_placeholder() {
        Some(format!(
            "No model is configured, so a placeholder answers: it only says how to connect one.\n{CONNECT_A_MODEL}"
        ))
    } else if planner.is_demo_script() {
        Some(format!(
            "hermes chat uses the scripted demo model: it knows only the demo story (a headphone \
             budget, then \"帮我查一下我去年双十一买的耳机订单…\").\n{CONNECT_A_MODEL}"
        ))
    } else {
        None
    }
}

pub fn run(config: Config, report: ConfigReport, args: DoctorArgs) -> anyhow::Result<()> {
    let env = ModelEnv::from_process();
    print_config(&config, &report);
    print_models(&config, &report, &env);
    print_agents(&config)?;
    let roles = ROLES.iter().filter_map(|r| config.models.role(r));
    if roles.clone().all(ModelConfig::is_placeholder) {
        println!("\nNo model is configured: every role uses the placeholder script, which only says how to connect one.");
        println!("{CONNECT_A_MODEL}");
    } else if roles.clone().all(ModelConfig::is_builtin_script) {
        println!("\nEvery role uses the scripted demo model: it knows only the demo story.");
        println!("{CONNECT_A_MODEL}");
    }
    if args.no_probe {
        return Ok(());
    }
    let failed = super::runtime::io_runtime()?.block_on(probe_endpoints(
        &config,
        &env,
        Duration::from_secs(args.timeout),
    ));
    if failed > 0 {
        anyhow::bail!("{failed} model endpoint(s) failed the probe; see above");
    }
    Ok(())
}

fn print_config(config: &Config, report: &ConfigReport) {
    let mut file = String::from("embedded defaults");
    if let Some(profile) = report.profile {
        file.push_str(&format!(" + {} profile", profile.name()));
    }
    for path in &report.files {
        file.push_str(&format!(" + {}", path.display()));
    }
    if report.files.is_empty() {
        file.push_str(" (no --config / HERMES_CONFIG)");
    }
    println!("{:<10}  {file}", "config");
    println!("{:<10}  {}", "bus", config.bus.url);
    println!("{:<10}  {}", "data dir", config.engine.data_dir.display());
    let servers: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    println!(
        "{:<10}  {}",
        "mcp",
        if servers.is_empty() {
            "no servers mounted".to_string()
        } else {
            servers.join(", ")
        }
    );
    println!(
        "{:<10}  {}",
        "embedder",
        describe_embedder(&config.memory.embedder)
    );
    println!();
}

/// The memory embedder and, for the default static one, whether it is installed.
fn describe_embedder(embedder: &EmbedderConfig) -> String {
    match embedder {
        EmbedderConfig::None => "none (recall uses BM25 alone)".into(),
        EmbedderConfig::Static { model_dir } => {
            let dir = model_dir
                .clone()
                .unwrap_or_else(static_model::default_model_dir);
            if static_model::is_installed(&dir) {
                format!("static, {}", dir.display())
            } else {
                format!(
                    "static, NOT INSTALLED: recall uses BM25 alone; install it with `{}`",
                    static_model::INSTALL_COMMAND
                )
            }
        }
        EmbedderConfig::Openai {
            base_url, model, ..
        } => format!("openai, {model} at {base_url}"),
        EmbedderConfig::Local { model_dir } => match model_dir {
            Some(dir) => format!("local all-MiniLM-L6-v2, {}", dir.display()),
            None => "local all-MiniLM-L6-v2".into(),
        },
    }
}

fn print_models(config: &Config, report: &ConfigReport, env: &ModelEnv) {
    let rows: Vec<[String; 6]> = ROLES
        .iter()
        .filter_map(|role| Some((role, config.models.role(role)?)))
        .map(|(role, model)| {
            let origin = report
                .models
                .get(role)
                .unwrap_or(&ModelOrigin::Defaults)
                .to_string();
            let (name, endpoint, key) = describe(model, env);
            [
                role.to_string(),
                model.provider().to_string(),
                name,
                endpoint,
                key,
                origin,
            ]
        })
        .collect();
    let header = ["role", "provider", "model", "endpoint", "key", "from"].map(str::to_string);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

/// Each agent's effective settings: what its turns run with.
fn print_agents(config: &Config) -> anyhow::Result<()> {
    let definitions = configured_definitions(&config.tools).map_err(anyhow::Error::msg)?;
    println!("\nagents (effective settings; `hermes agents ls` has the rest)");
    for (name, agent) in &config.agents {
        let window = agent.window(&config.models);
        let tools = super::agents::shown_tools(config, agent, &definitions);
        println!(
            "  {name}: model {} ({}), window {} ({}), reply reserve {} ({}), {} steps",
            agent.model,
            super::agents::model_of(config, agent),
            window.context_window,
            window.window_from,
            window.reply_reserve,
            window.reserve_from,
            agent.max_steps
        );
        println!("    tools: {}", super::agents::list(&tools));
    }
    Ok(())
}

/// `(model, endpoint, key)` columns for one role.
fn describe(model: &ModelConfig, env: &ModelEnv) -> (String, String, String) {
    let Some(target) = Target::of(model, env) else {
        return match model {
            ModelConfig::Replay { scenario } => (scenario.clone(), "-".into(), "-".into()),
            _ => (model.provider().into(), "-".into(), "-".into()),
        };
    };
    let key = match &target.key_variable {
        Some(var) if std::env::var(var).is_ok_and(|v| !v.trim().is_empty()) => {
            format!("${var} (set)")
        }
        Some(var) => format!("${var} (NOT SET)"),
        None => "none".into(),
    };
    let mut name = target.model;
    if let Some(fallback) = model.fallback() {
        let (fallback_name, _, _) = describe(fallback, env);
        name.push_str(&format!(
            " → fallback {} {fallback_name}",
            fallback.provider()
        ));
    }
    (name, target.url, key)
}

/// A model behind an endpoint: what to probe.
struct Target {
    wire: Wire,
    url: String,
    model: String,
    key_variable: Option<String>,
}

impl Target {
    fn of(model: &ModelConfig, env: &ModelEnv) -> Option<Self> {
        Some(match model {
            ModelConfig::Openai(t) => Target {
                wire: Wire::ChatCompletions,
                url: t.resolved_base_url(env),
                model: t.model.clone(),
                key_variable: t.key_variable(env),
            },
            ModelConfig::OpenaiResponses(t) => Target {
                wire: Wire::Responses,
                url: t.resolved_base_url(env),
                model: t.model.clone(),
                key_variable: t.key_variable(env),
            },
            ModelConfig::Anthropic(t) => Target {
                wire: Wire::Anthropic {
                    version: t.anthropic_version.clone(),
                },
                url: t.resolved_base_url(env),
                model: t.model.clone(),
                key_variable: t.key_variable(env),
            },
            _ => return None,
        })
    }
}

/// The wire format's name as the probe line shows it.
fn wire_name(wire: &Wire) -> &'static str {
    match wire {
        Wire::ChatCompletions => "chat completions",
        Wire::Responses => "responses",
        Wire::Anthropic { .. } => "anthropic messages",
    }
}

/// Probe each distinct (wire, endpoint, model, key) once, in its own wire format; the number
/// that failed.
async fn probe_endpoints(config: &Config, env: &ModelEnv, timeout: Duration) -> usize {
    type Key = (String, String, String, Option<String>);
    let mut targets: BTreeMap<Key, (Wire, Vec<&str>)> = BTreeMap::new();
    for role in ROLES {
        let mut model = config.models.role(role);
        while let Some(m) = model {
            if let Some(t) = Target::of(m, env) {
                let key = (
                    wire_name(&t.wire).to_string(),
                    t.url,
                    t.model,
                    t.key_variable,
                );
                targets
                    .entry(key)
                    .or_insert((t.wire, Vec::new()))
                    .1
                    .push(role);
            }
            model = m.fallback();
        }
    }
    let mut failed = 0;
    for ((name, url, model, key_var), (wire, roles)) in targets {
        let key = key_var
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.trim().is_empty());
        println!(
            "\nprobing {url} ({name}) for `{model}` ({})",
            roles.join(", ")
        );
        let result = probe(&wire, &url, &model, key.as_deref(), timeout).await;
        let ms = result.elapsed.as_millis();
        match result.outcome {
            ProbeOutcome::Listed { models, has_model } => {
                let list = match wire {
                    Wire::Anthropic { .. } => "GET /v1/models",
                    _ => "GET /models",
                };
                println!("  ok: {list} answered in {ms} ms ({} models)", models.len());
                if !has_model {
                    failed += 1;
                    let some: Vec<&str> = models.iter().take(10).map(String::as_str).collect();
                    println!(
                        "  problem: `{model}` is not among them; it serves: {}",
                        some.join(", ")
                    );
                }
            }
            ProbeOutcome::Completed => {
                println!("  ok: the smallest {name} request with `{model}` worked in {ms} ms")
            }
            ProbeOutcome::Failed(why) => {
                failed += 1;
                println!("  problem: {why}");
            }
        }
    }
    failed
}
