//! `hermes tools ls|lint`: the tool definitions a configuration yields, and a check that each
//! description says what the model needs (heuristic in `hermes::tools::lint`).
//!
//! Both read the configuration only (built-ins, overrides and worker tools of
//! `[[tools.define]]`); `ls --bus nats://…` asks a running tool-executor instead, which also
//! lists MCP tools.

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};

use hermes::actors::tool_executor::configured_definitions;
use hermes::bus::{self, rpc};
use hermes::config::Config;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::request::ToolsListRequest;
use hermes::protocol::ToolsCatalog;
use hermes::tools::definition::ToolDefinition;
use hermes::tools::lint::{lint, Finding};

use super::runtime::io_runtime;

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// List the tools: name, mode, effect, risk, timeout, source, scenes.
    Ls(LsArgs),
    /// Check every tool description for: what it does, when to use it, when not, each
    /// parameter, what it returns, and its errors.
    Lint(LintArgs),
}

#[derive(Args)]
pub struct LsArgs {
    /// Ask the tool-executor running on this bus (`nats://host:port`) instead of reading the
    /// configuration; includes MCP tools and the executor's counters.
    #[arg(long)]
    bus: Option<String>,
    /// Print the definitions as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct LintArgs {
    /// Exit with status 1 when there are findings.
    #[arg(long)]
    strict: bool,
}

pub fn run(config: Config, command: ToolsCommand) -> anyhow::Result<()> {
    match command {
        ToolsCommand::Ls(args) => ls(&config, args),
        ToolsCommand::Lint(args) => run_lint(&config, args),
    }
}

fn ls(config: &Config, args: LsArgs) -> anyhow::Result<()> {
    let (defs, metrics) = match &args.bus {
        Some(url) => {
            let catalog = fetch_catalog(url, config)?;
            (catalog.definitions, Some(catalog.metrics))
        }
        None => (
            configured_definitions(&config.tools).map_err(anyhow::Error::msg)?,
            None,
        ),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&defs)?);
        return Ok(());
    }
    println!(
        "{:<28} {:<6} {:<10} {:<5} {:>8}  {:<8} SCENES",
        "NAME", "MODE", "EFFECT", "RISK", "TIMEOUT", "SOURCE"
    );
    for d in &defs {
        println!(
            "{:<28} {:<6} {:<10} {:<5} {:>7}s  {:<8} {}",
            d.name,
            label(&d.mode),
            label(&d.effect),
            label(&d.risk),
            d.timeout_secs,
            label(&d.source),
            if d.scenes.is_empty() {
                "*".to_string()
            } else {
                d.scenes.join(",")
            }
        );
    }
    if let Some(m) = metrics {
        println!("\nexecutor counters: {}", serde_json::to_string(&m)?);
    }
    Ok(())
}

fn label<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn fetch_catalog(url: &str, config: &Config) -> anyhow::Result<ToolsCatalog> {
    let timeout_secs = config.engine.request_timeout_secs;
    let credentials = config.bus.auth.resolve().map_err(anyhow::Error::msg)?;
    let rt = io_runtime()?;
    rt.block_on(async {
        let bus = bus::connect_with(url, None, config.cluster.options(), &credentials)
            .await
            .with_context(|| format!("cannot connect to {url}"))?;
        let request = Envelope::request(ToolsListRequest);
        let reply = rpc::request(bus.as_ref(), request, Duration::from_secs(timeout_secs))
            .await
            .context(
                "no tool-executor answered on hermes.tools.list; is one running on this bus?",
            )?;
        Ok(reply.body)
    })
}

fn run_lint(config: &Config, args: LintArgs) -> anyhow::Result<()> {
    let defs = configured_definitions(&config.tools).map_err(anyhow::Error::msg)?;
    let findings: Vec<Finding> = defs.iter().flat_map(lint).collect();
    print_findings(&defs, &findings);
    if args.strict && !findings.is_empty() {
        anyhow::bail!(
            "{} finding(s); complete the descriptions (or run without --strict)",
            findings.len()
        );
    }
    Ok(())
}

fn print_findings(defs: &[ToolDefinition], findings: &[Finding]) {
    if !findings.is_empty() {
        println!("{:<28} {:<10} PROBLEM", "TOOL", "PART");
        for f in findings {
            println!("{:<28} {:<10} {}", f.tool, f.part, f.message);
        }
        println!();
    }
    let flagged: std::collections::BTreeSet<&str> =
        findings.iter().map(|f| f.tool.as_str()).collect();
    println!(
        "{} tools checked: {} pass, {} with findings ({} findings)",
        defs.len(),
        defs.len() - flagged.len(),
        flagged.len(),
        findings.len()
    );
}
