//! Command-line parsing and dispatch; each subcommand lives in its own file.

mod agents;
mod backup;
mod bench_cmd;
mod chat;
mod demo;
mod demo_remote;
mod demo_team;
mod doctor;
mod eval;
mod eval_tasks;
mod init;
mod init_template;
mod mcp;
mod mcp_login;
mod mcp_probe;
mod memory;
mod memory_print;
mod print;
mod reach;
mod runtime;
mod schema;
mod send;
mod serve;
mod sessions;
mod sessions_print;
mod status;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use hermes::config::load::{apply_model_choice, load_layers, ModelChoice, Profile};
use hermes::config::{Config, ConfigReport, ModelEnv};

/// Hermes — an event-driven, actor-based agent engine.
///
/// Sessions, tools, MCP and memory as five actors (session, planner, tool-executor,
/// mcp-bridge, memory-extractor) that talk only over NATS subjects and keep their state in
/// sled. Start with `hermes demo`; write a config for your own model and agent with
/// `hermes init`; run a service with `hermes serve`; talk to it with `hermes send` or
/// `hermes chat`.
///
/// A real model without a config file: `export OPENAI_API_KEY=…` (plus `OPENAI_BASE_URL` for
/// Ollama, vLLM or llama.cpp) and `HERMES_MODEL=…` or `--model NAME`; `hermes doctor` shows
/// what each model role resolves to and probes the endpoint.
#[derive(Parser)]
#[command(name = "hermes", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file merged over the embedded defaults (see config/default.toml). Repeat
    /// it to layer files in order, e.g. `--config config/demo.toml --config mine.toml`
    /// (HERMES_CONFIG: a list separated by `:`).
    #[arg(long, global = true, env = "HERMES_CONFIG", value_delimiter = ':')]
    config: Vec<PathBuf>,
    /// Model for every role, at an OpenAI-compatible endpoint (`OPENAI_BASE_URL`, default
    /// OpenAI; key from `OPENAI_API_KEY`). Beats the config file. `HERMES_MODEL` does the same
    /// for chat, send and serve, unless the config file names the role's model.
    #[arg(long, global = true, value_name = "NAME")]
    model: Option<String>,
    /// Log filter, e.g. `info`, `hermes=debug` (default: warn).
    #[arg(long, global = true, env = "HERMES_LOG", default_value = "warn")]
    log: String,
    /// Write logs as JSON lines.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Play the seeds' shopping-assistant story end to end with the demo profile.
    ///
    /// Two sessions of one user: the first states a budget and a headphone purchase; the
    /// second asks about that order and the brand's newest model. The trace shows memory
    /// recall, a repaired tool call, an MCP tool call to a real server process, the answer and
    /// the memory written afterwards. The demo profile (config/demo.toml: the shop's prompt,
    /// tools, catalog MCP server and scripted model) is loaded over the embedded defaults,
    /// then --config if given; --model plays it with a real model.
    ///
    /// `hermes demo team` plays agents working together on an event instead (config/team.toml).
    Demo(demo::DemoArgs),
    /// Run actors as a service on a bus until Ctrl-C or SIGTERM.
    ///
    /// Examples:
    ///   hermes serve                                  # everything, embedded bus
    ///   hermes serve --bus nats://127.0.0.1:4222 --actors session,planner,memory-extractor
    ///   hermes serve --bus nats://127.0.0.1:4222 --actors tool-executor,mcp-bridge
    ///
    /// With `--bus embedded` (the default) every actor runs in this process on sled.
    ///
    /// With `--bus nats://host:4222` (several seeds: `nats://a:4222,nats://b:4222`) each
    /// actor kind may run in any number of processes, in any split:
    ///
    ///   session          owns sessions: JetStream assigns each partition of sessions to one
    ///                    live session process and moves it within `[cluster] failover_secs`
    ///                    when that process dies; session logs live in JetStream, so any copy
    ///                    carries on with the whole history. Needs JetStream (`nats-server -js`).
    ///   planner          stateless; needs the `[models.*]` credentials.
    ///   tool-executor    shares idempotency records (reserved before a write runs), job records
    ///                    and raw outputs through JetStream KV; async jobs run from a durable
    ///                    queue, so another copy takes over the jobs of a copy that dies.
    ///   mcp-bridge       opens its own connections to every `[[mcp.servers]]` entry; audit
    ///                    records go to the shared JetStream stream HERMES_AUDIT.
    ///   memory-extractor needs the extraction model; each user's memory writes go through the
    ///                    replicated memory log in JetStream, so any number of copies share
    ///                    one memory per user.
    ///
    /// Every copy must use the same config file (same `[cluster] partitions`, agents, tools).
    /// `scripts/cluster.sh up` starts a 3-node NATS cluster with two session processes, two
    /// planners, two tool-executors, an MCP-bridge and a memory-extractor.
    #[command(verbatim_doc_comment)]
    Serve(serve::ServeArgs),
    /// Send one message to a session and print the turn's events as they arrive.
    ///
    /// With `--bus nats://…` it talks to running services; with the embedded bus it starts
    /// the whole engine in this process for the one message.
    Send(send::SendArgs),
    /// Chat with an agent in the terminal.
    ///
    /// The answer streams as it is written (Markdown styled on a terminal; plain text when
    /// stdout is not one or NO_COLOR is set); each tool call, async job and delegated agent is
    /// one line. Logs go to `<data_dir>/chat.log` (`--log-stderr` keeps them on stderr).
    ///
    /// Keys: line editing and history (↑/↓), a trailing `\` or Alt-Enter for another line,
    /// Ctrl-C cancels the running turn, Ctrl-C twice or Ctrl-D at the prompt leaves. A turn
    /// waiting for a job goes on behind the prompt as soon as you type.
    ///
    /// Commands: /new, /sessions, /switch ID, /memory, /forget KEY, /agent NAME, /confirm and
    /// /deny (a waiting high-risk call), /cancel, /help, /quit.
    ///
    /// Piped input (`echo hi | hermes chat`) is read a line per message, each after the last
    /// turn ended. `--trace` prints every event instead, as `hermes send` does.
    Chat(chat::ChatArgs),
    /// Measure the engine itself: the workloads of shared/bench/WORKLOAD.md.
    Bench(bench_cmd::BenchArgs),
    /// Inspect and search stored sessions: of a running deployment (`--bus nats://…`), of the
    /// `hermes serve` holding the data directory, or of a stopped data directory.
    Sessions(sessions::SessionsArgs),
    /// MCP: Hermes' own MCP server, mounted servers' status, the audit trail.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Tool definitions: `tools ls` lists them, `tools lint [--strict]` checks descriptions.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Agents: `agents ls` lists each with its model, tools, delegation and handoff targets,
    /// memory namespaces, limits and triggers.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Look at and tidy a user's memories: of a running deployment (`--bus nats://…`), of the
    /// `hermes serve` holding the data directory, or of a stopped data directory.
    Memory(memory::MemoryArgs),
    /// Evaluations: `hermes eval memory --dataset FILE` (memory recall), `hermes eval tasks
    /// --suite FILE` (whole tasks against a model).
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// The whole deployment over the bus: every process with its actors and live sessions,
    /// and the metrics of those started with --http, summed.
    ///
    /// Example: hermes status --bus nats://127.0.0.1:4222
    Status(status::StatusArgs),
    /// Show the resolved configuration — which model each role uses and where that came
    /// from, each agent's effective settings — and probe each model endpoint.
    Doctor(doctor::DoctorArgs),
    /// Write a commented config file for your own model, bus, agent, MCP servers and event
    /// trigger, asking for each (or from flags with --non-interactive).
    ///
    /// Examples:
    ///   hermes init                                      # asks, writes hermes.toml
    ///   hermes init --non-interactive --base-url http://127.0.0.1:11434/v1 \
    ///     --model-name qwen2.5:7b --api-key-env none --agent helper \
    ///     --purpose "answers questions about our docs" \
    ///     --mcp "files=npx -y @modelcontextprotocol/server-filesystem /srv/docs"
    ///   hermes --config hermes.toml chat --agent helper
    #[command(verbatim_doc_comment)]
    Init(init::InitArgs),
    /// The wire's JSON Schema: one document per envelope kind and an index of subjects, for
    /// a client in another language to validate what it sends and receives.
    ///
    /// Examples:
    ///   hermes schema                  # the index: every subject and the kinds on it
    ///   hermes schema --out schema     # every document (schema/ in the repository)
    #[command(verbatim_doc_comment)]
    Schema(schema::SchemaArgs),
    /// Write a deployment's state to one file: an embedded data directory's sled trees (taken
    /// by the `hermes serve` holding it, while it serves), or a NATS deployment's streams and
    /// buckets. Sessions, memories, jobs, audit records — all of it.
    ///
    /// Example: hermes backup --out hermes.hermes-backup --data-dir data/hermes
    Backup(backup::BackupArgs),
    /// Restore a `hermes backup` file into a fresh deployment (an empty data directory, or a
    /// nats-server without Hermes' streams), verifying it first; then start Hermes there and
    /// every session continues.
    ///
    /// Example: hermes restore hermes.hermes-backup --data-dir data/restored
    Restore(backup::RestoreArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let (traces, traces_failed) = runtime::start_traces(&cli.config, cli.command.name());
    // The chat view keeps logs out of the conversation: in a file of the data directory.
    let log_file = match &cli.command {
        Command::Chat(args) => args.log_file(&cli.config),
        _ => None,
    };
    let logs = runtime::init_tracing(&cli.log, cli.log_json, traces.as_ref(), log_file);
    if let Some(error) = traces_failed {
        tracing::warn!("{error}");
    }
    // chat, send, serve and doctor honour OPENAI_* / HERMES_MODEL; the demo keeps its script
    // unless --model or a file says otherwise; the bench brings its own model.
    let (path, model) = (cli.config.clone(), cli.model.clone());
    let load = |honour_env| load_config(None, &path, model.clone(), honour_env);
    let all = |honour_env| load(honour_env).map(|(config, _)| config);
    let result = match cli.command {
        Command::Demo(args) => load_config(Some(Profile::Demo), &path, model.clone(), false)
            .and_then(|(c, _)| demo::run(c, args)),
        Command::Serve(args) => all(true).and_then(|c| serve::run(c, args)),
        Command::Send(args) => all(true).and_then(|c| send::run_send(c, args)),
        Command::Chat(args) => all(true).and_then(|c| chat::run(c, args, logs)),
        Command::Bench(args) => all(false).and_then(|c| bench_cmd::run(c, args)),
        Command::Sessions(args) => all(true).and_then(|c| sessions::run(c, args)),
        Command::Tools(cmd) => all(true).and_then(|c| tools::run(c, cmd)),
        Command::Agents(cmd) => all(true).and_then(|c| agents::run(c, cmd)),
        Command::Status(args) => all(true).and_then(|c| status::run(c, args)),
        Command::Memory(args) => all(true).and_then(|c| memory::run(c, args)),
        Command::Eval(cmd) => eval::run(&cli.config, cli.model.clone(), cmd),
        Command::Doctor(args) => load(true).and_then(|(c, r)| doctor::run(c, r, args)),
        Command::Mcp(command) => mcp::run(cli.config.clone(), command),
        Command::Init(args) => init::run(args),
        Command::Schema(args) => schema::run(args),
        Command::Backup(args) => all(false).and_then(|c| backup::backup(c, args)),
        Command::Restore(args) => all(false).and_then(|c| backup::restore(c, args)),
    };
    // The spans of the run (a one-shot command, or `serve` after Ctrl-C) leave before exit.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

impl Command {
    /// The subcommand's name, as recorded on the process's traces.
    fn name(&self) -> &'static str {
        match self {
            Command::Demo(_) => "demo",
            Command::Serve(_) => "serve",
            Command::Send(_) => "send",
            Command::Chat(_) => "chat",
            Command::Bench(_) => "bench",
            Command::Sessions(_) => "sessions",
            Command::Mcp(_) => "mcp",
            Command::Tools(_) => "tools",
            Command::Agents(_) => "agents",
            Command::Memory(_) => "memory",
            Command::Eval(_) => "eval",
            Command::Status(_) => "status",
            Command::Doctor(_) => "doctor",
            Command::Init(_) => "init",
            Command::Schema(_) => "schema",
            Command::Backup(_) => "backup",
            Command::Restore(_) => "restore",
        }
    }
}

/// The defaults, a built-in `profile`, the `--config` files, then `--model` and (when
/// `honour_env`) the environment's model conventions.
fn load_config(
    profile: Option<Profile>,
    paths: &[PathBuf],
    flag: Option<String>,
    honour_env: bool,
) -> anyhow::Result<(Config, ConfigReport)> {
    let (mut config, mut report) = load_layers(profile, paths)?;
    let choice = ModelChoice {
        flag,
        env: ModelEnv::from_process(),
        honour_env,
    };
    apply_model_choice(&mut config, &mut report, &choice);
    Ok((config, report))
}
