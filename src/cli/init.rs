//! `hermes init`: write a commented `hermes.toml` for the user's own case — model endpoint
//! and name (probed as `hermes doctor` probes it), bus, first agent, MCP servers, an event
//! trigger — asking for each, or taking flags with `--non-interactive`. The written file is
//! loaded back before the command succeeds, so it always starts.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use hermes::config::models::{
    ANTHROPIC_API_KEY, DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_ANTHROPIC_VERSION, DEFAULT_OPENAI_MODEL,
    OPENAI_API_KEY,
};
use hermes::config::{ModelEnv, DEFAULT_OPENAI_BASE_URL};
use hermes::llm::probe::{probe, ProbeOutcome, Wire};

use super::init_template::{render, InitAnswers, InitProvider, McpServerAnswer};

/// The model `hermes init` suggests for Anthropic's API.
const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

#[derive(Args)]
pub struct InitArgs {
    /// Where to write the file.
    #[arg(long, default_value = "hermes.toml")]
    out: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    force: bool,
    /// Ask nothing: take every answer from the flags (and their defaults).
    #[arg(long)]
    non_interactive: bool,
    /// The wire format the endpoint speaks.
    #[arg(long, value_enum, default_value = "openai")]
    provider: InitProvider,
    /// The model's endpoint (OpenAI, Ollama `http://127.0.0.1:11434/v1`, vLLM, llama.cpp…).
    /// Default: $OPENAI_BASE_URL, else OpenAI's; Anthropic's for --provider anthropic.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model's name at that endpoint. Default: $HERMES_MODEL, else gpt-4o-mini
    /// (claude-sonnet-4-5 for --provider anthropic).
    #[arg(long = "model-name", value_name = "NAME")]
    model_name: Option<String>,
    /// The environment variable that holds the API key; `none` for a local server without
    /// one. Default: OPENAI_API_KEY (ANTHROPIC_API_KEY for --provider anthropic).
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// `embedded` (one process, nothing to install) or `nats://host:4222`.
    #[arg(long, value_name = "URL", default_value = "embedded")]
    bus: String,
    /// Where the data (sessions, memories, queues) is stored.
    #[arg(long, value_name = "DIR", default_value = "data/hermes")]
    data_dir: String,
    /// The first agent's name (letters, digits, `_`, `-`).
    #[arg(long, default_value = "assistant")]
    agent: String,
    /// What the first agent is for, in one line; it shapes its system prompt.
    #[arg(long, default_value = "a general-purpose assistant")]
    purpose: String,
    /// An MCP server to mount, as NAME=COMMAND ARGS… (stdio) or NAME=URL (Streamable HTTP);
    /// repeat for more. Example: --mcp "files=npx -y @modelcontextprotocol/server-filesystem /srv"
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL")]
    mcp: Vec<String>,
    /// A NATS subject whose events start turns of the agent, e.g. `ci.builds.*.failed`.
    #[arg(long, value_name = "SUBJECT")]
    trigger: Option<String>,
    /// Do not contact the model endpoint.
    #[arg(long)]
    no_probe: bool,
    /// Seconds to wait for the endpoint's answer.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

pub fn run(args: InitArgs) -> anyhow::Result<()> {
    if args.out.exists() && !args.force {
        anyhow::bail!(
            "{} exists; pass --force to replace it, or --out FILE to write elsewhere",
            args.out.display()
        );
    }
    let answers = if args.non_interactive {
        from_flags(&args)?
    } else {
        ask(&args)?
    };
    if !args.no_probe {
        probe_model(&answers, Duration::from_secs(args.timeout))?;
    }
    let text = render(&answers);
    std::fs::write(&args.out, &text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    // What we wrote must start: load it back as every command will.
    hermes::config::load::load_file(Some(&args.out)).with_context(|| {
        format!(
            "{} was written but does not load; this is a bug in `hermes init`",
            args.out.display()
        )
    })?;
    let out = args.out.display();
    println!("wrote {out}");
    println!("  check it:   hermes --config {out} doctor");
    println!(
        "  talk to it: hermes --config {out} chat --agent {}",
        answers.agent
    );
    if answers.bus != "embedded" {
        println!("  serve it:   hermes --config {out} serve");
    }
    Ok(())
}

/// The defaults the flags, the environment (`OPENAI_BASE_URL`, `HERMES_MODEL`) and the
/// provider suggest.
fn suggested(args: &InitArgs, provider: InitProvider) -> (String, String, Option<String>) {
    let env = ModelEnv::from_process();
    let anthropic = provider == InitProvider::Anthropic;
    let base_url = args.base_url.clone().unwrap_or_else(|| {
        if anthropic {
            DEFAULT_ANTHROPIC_BASE_URL.to_string()
        } else {
            env.base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_string())
        }
    });
    let model = args.model_name.clone().or(env.model).unwrap_or_else(|| {
        if anthropic {
            DEFAULT_ANTHROPIC_MODEL
        } else {
            DEFAULT_OPENAI_MODEL
        }
        .to_string()
    });
    let key = match args.api_key_env.as_deref() {
        Some("none") | Some("") => None,
        Some(var) => Some(var.to_string()),
        None if anthropic => Some(ANTHROPIC_API_KEY.to_string()),
        None => Some(OPENAI_API_KEY.to_string()),
    };
    (base_url, model, key)
}

fn from_flags(args: &InitArgs) -> anyhow::Result<InitAnswers> {
    let (base_url, model, api_key_env) = suggested(args, args.provider);
    let mcp_servers = args
        .mcp
        .iter()
        .map(|spec| McpServerAnswer::parse(spec).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    Ok(InitAnswers {
        provider: args.provider,
        base_url,
        model,
        api_key_env,
        bus: args.bus.clone(),
        data_dir: args.data_dir.clone(),
        agent: args.agent.clone(),
        purpose: args.purpose.clone(),
        mcp_servers,
        trigger: args.trigger.clone(),
    })
}

/// Ask each question on the terminal; the flags' values are the defaults offered.
fn ask(args: &InitArgs) -> anyhow::Result<InitAnswers> {
    let mut answers = from_flags(args)?;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut question = |text: &str, default: &str| -> anyhow::Result<String> {
        if default.is_empty() {
            eprint!("{text}: ");
        } else {
            eprint!("{text} [{default}]: ");
        }
        std::io::stderr().flush()?;
        let line = lines.next().transpose()?.unwrap_or_default();
        let line = line.trim();
        Ok(if line.is_empty() { default } else { line }.to_string())
    };
    eprintln!("hermes init — a config file for your own agent (Enter keeps the suggestion)\n");
    loop {
        let provider = question(
            "Wire format: openai (Chat Completions), openai-responses or anthropic",
            answers.provider.as_str(),
        )?;
        match InitProvider::parse(&provider) {
            Some(p) => {
                if p != answers.provider {
                    // Another provider suggests another endpoint, model and key variable.
                    (answers.base_url, answers.model, answers.api_key_env) = suggested(args, p);
                    answers.provider = p;
                }
                break;
            }
            None => eprintln!("  `{provider}` is none of openai, openai-responses, anthropic"),
        }
    }
    answers.base_url = question(
        "Model endpoint (Ollama: http://127.0.0.1:11434/v1)",
        &answers.base_url,
    )?;
    answers.model = question("Model name", &answers.model)?;
    let key = answers.api_key_env.clone().unwrap_or_else(|| "none".into());
    let key = question(
        "Environment variable holding the API key (`none` for a local server)",
        &key,
    )?;
    answers.api_key_env = (key != "none").then_some(key);
    answers.bus = question("Bus (`embedded`, or nats://host:4222)", &answers.bus)?;
    answers.agent = question("First agent's name", &answers.agent)?;
    answers.purpose = question("What is it for, in one line", &answers.purpose)?;
    loop {
        let spec = question(
            "An MCP server to mount as NAME=COMMAND or NAME=URL (empty: no more)",
            "",
        )?;
        if spec.is_empty() {
            break;
        }
        match McpServerAnswer::parse(&spec) {
            Ok(server) => answers.mcp_servers.push(server),
            Err(e) => eprintln!("  {e}"),
        }
    }
    let trigger = question(
        "A NATS subject whose events start turns, e.g. ci.builds.*.failed (empty: none)",
        answers.trigger.as_deref().unwrap_or(""),
    )?;
    answers.trigger = (!trigger.is_empty()).then_some(trigger);
    Ok(answers)
}

/// Probe the endpoint as `hermes doctor` does; a failure is reported, and the file is still
/// written (the endpoint may simply not be up yet).
fn probe_model(answers: &InitAnswers, timeout: Duration) -> anyhow::Result<()> {
    let key = answers
        .api_key_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.trim().is_empty());
    if let (Some(var), None) = (&answers.api_key_env, &key) {
        eprintln!("note: ${var} is not set here; the probe goes without a key");
    }
    let io = super::runtime::io_runtime()?;
    let wire = match answers.provider {
        InitProvider::Openai => Wire::ChatCompletions,
        InitProvider::OpenaiResponses => Wire::Responses,
        InitProvider::Anthropic => Wire::Anthropic {
            version: DEFAULT_ANTHROPIC_VERSION.into(),
        },
    };
    let result = io.block_on(probe(
        &wire,
        &answers.base_url,
        &answers.model,
        key.as_deref(),
        timeout,
    ));
    let ms = result.elapsed.as_millis();
    match result.outcome {
        ProbeOutcome::Listed {
            has_model: true, ..
        }
        | ProbeOutcome::Completed => {
            eprintln!(
                "model: `{}` answers at {} ({ms} ms)",
                answers.model, result.url
            )
        }
        ProbeOutcome::Listed { models, .. } => {
            let some: Vec<&str> = models.iter().take(10).map(String::as_str).collect();
            eprintln!(
                "problem: {} does not serve `{}`; it serves: {}. The file is written anyway; \
                 fix `model` in it and run `hermes doctor`.",
                result.url,
                answers.model,
                some.join(", ")
            );
        }
        ProbeOutcome::Failed(why) => eprintln!(
            "problem: {why}\nThe file is written anyway; fix the endpoint and run `hermes doctor`."
        ),
    }
    Ok(())
}
