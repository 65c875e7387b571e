//! `hermes eval memory`: recall quality on a LoCoMo-format dataset (logic in
//! [`hermes::memory::eval`]), printed as a table or JSON; `hermes eval tasks` lives in
//! [`super::eval_tasks`].

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use hermes::config::{Config, EmbedderConfig};
use hermes::context::tokens::TokenCounter;
use hermes::memory::eval::{self, ContextTokens, EvalReport, Retriever};
use hermes::memory::recall::{Signals, Weights};
use hermes::memory::MemoryService;

use super::runtime::io_runtime;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Store every turn of a LoCoMo JSON file as a memory, ask every question, and report
    /// recall any@k / all@k / fraction@k overall and per category, with recall latency and the
    /// tokens of memory context per question.
    ///
    /// `vector` and `hybrid` use [memory.embedder]; when it is `none`, the default static
    /// embedder (scripts/fetch-embedder.sh) is used. Data goes to a temporary store.
    Memory(EvalMemoryArgs),
    /// Run a suite of whole tasks — user messages plus checks on tools called, the answer,
    /// memories written or recalled and tool rounds — against the configured model, and
    /// report completion rate, tool rounds, tokens and latency per case and overall.
    ///
    /// Ships with config/eval/seed-tasks.toml (orders, budgets, async reports, MCP tools and
    /// memory from the seed articles, in Chinese and English), which passes with its scripted
    /// model and runs unchanged against a real one with --config or --model.
    Tasks(super::eval_tasks::EvalTasksArgs),
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum RetrieverArg {
    Bm25,
    Vector,
    Hybrid,
    /// bm25, vector and hybrid one after the other.
    All,
}

#[derive(Clone, Copy, ValueEnum)]
enum SignalArg {
    Neighbours,
    Session,
    Speaker,
    Time,
}

#[derive(Args)]
pub struct EvalMemoryArgs {
    /// LoCoMo-format JSON file (a list of samples with conversation and qa).
    #[arg(long)]
    dataset: PathBuf,
    #[arg(long, value_enum, default_value = "hybrid")]
    retriever: RetrieverArg,
    /// Cut-offs to report, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "5,10")]
    k: Vec<usize>,
    /// Context signals to switch off, comma separated (to measure what each brings).
    #[arg(long, value_delimiter = ',', value_enum)]
    without: Vec<SignalArg>,
    /// Print JSON (one object per retriever, one per line) instead of tables.
    #[arg(long)]
    json: bool,
}

/// `config` and `model` are the global `--config` and `--model`.
pub fn run(config: &[PathBuf], model: Option<String>, command: EvalCommand) -> anyhow::Result<()> {
    match command {
        EvalCommand::Memory(args) => {
            let (config, _) = super::load_config(None, config, model, true)?;
            run_memory(config, args)
        }
        EvalCommand::Tasks(args) => super::eval_tasks::run(config, model, args),
    }
}

fn run_memory(config: Config, args: EvalMemoryArgs) -> anyhow::Result<()> {
    if args.k.is_empty() || args.k.contains(&0) {
        anyhow::bail!("--k takes positive cut-offs, e.g. --k 5,10");
    }
    let retrievers = match args.retriever {
        RetrieverArg::Bm25 => vec![Retriever::Bm25],
        RetrieverArg::Vector => vec![Retriever::Vector],
        RetrieverArg::Hybrid => vec![Retriever::Hybrid],
        RetrieverArg::All => vec![Retriever::Bm25, Retriever::Vector, Retriever::Hybrid],
    };
    let mut signals = Signals::DEFAULT;
    for off in &args.without {
        match off {
            SignalArg::Neighbours => signals.neighbours = 0.0,
            SignalArg::Session => signals.session = 0.0,
            SignalArg::Speaker => signals.speaker = 0.0,
            SignalArg::Time => signals.time = 0.0,
        }
    }
    let samples = eval::load(&args.dataset)?;
    let counter = TokenCounter::for_model("gpt-4o")?;
    let count = |text: &str| counter.count_text(text) as usize;
    let context = ContextTokens {
        hits: config.memory.recall_limit,
        count: &count,
    };
    for retriever in retrievers {
        let report = run_one(&config, &samples, retriever, signals, &args.k, &context)?;
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print_report(&report);
        }
    }
    Ok(())
}

fn run_one(
    config: &Config,
    samples: &[eval::Sample],
    retriever: Retriever,
    signals: Signals,
    ks: &[usize],
    context: &ContextTokens<'_>,
) -> anyhow::Result<EvalReport> {
    let questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    let temp = tempfile::tempdir()?;
    let db = hermes::store::open_durable(
        temp.path(),
        hermes::store::durability::Mode::Batch(std::time::Duration::from_millis(50)),
    )?;
    let embedder_config = match (&config.memory.embedder, retriever) {
        (_, Retriever::Bm25) => EmbedderConfig::None,
        (EmbedderConfig::None, _) => EmbedderConfig::Static { model_dir: None },
        (configured, _) => configured.clone(),
    };
    let fusion = Weights::from_config(&config.memory.fusion);
    let rt = io_runtime()?;
    rt.block_on(async {
        let embedder = tokio::task::spawn_blocking(move || {
            hermes::memory::embed::from_config(&embedder_config)
        })
        .await??;
        let service = MemoryService::open(&db, &config.memory, embedder)?.with_signals(signals);
        let bar = indicatif::ProgressBar::new(questions as u64);
        bar.set_style(indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {pos}/{len} questions",
        )?);
        bar.set_message(format!("eval {}", retriever.name()));
        let report = eval::evaluate(
            &service,
            samples,
            retriever,
            fusion,
            ks,
            Some(context),
            Some(&bar),
        )
        .await;
        bar.finish_and_clear();
        anyhow::Ok(report?)
    })
}

fn print_report(r: &EvalReport) {
    println!(
        "retriever {} ({}) — {} samples, {} turns stored, {} questions ({} without evidence skipped)",
        r.retriever,
        r.embedder.as_deref().unwrap_or("no embedder"),
        r.samples,
        r.records,
        r.questions,
        r.skipped_no_evidence
    );
    println!(
        "{:<10} {:>4} {:>5} {:>7} {:>7} {:>10}",
        "CATEGORY", "K", "N", "ANY@K", "ALL@K", "FRACTION@K"
    );
    let rows = std::iter::once(("overall", &r.overall))
        .chain(r.per_category.iter().map(|(c, v)| (c.as_str(), v)));
    for (name, at) in rows {
        for a in at {
            println!(
                "{:<10} {:>4} {:>5} {:>7.3} {:>7.3} {:>10.3}",
                name, a.k, a.questions, a.any, a.all, a.fraction
            );
        }
    }
    println!(
        "recall latency p50 {:.2} ms, p99 {:.2} ms; memory context of the top {} hits: {:.0} tokens per question on average, p99 {:.0}",
        r.latency_ms_p50, r.latency_ms_p99, r.context_hits, r.context_tokens_mean, r.context_tokens_p99
    );
    println!();
}
