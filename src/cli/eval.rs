//! `hermes eval memory`: recall quality on a LoCoMo-format dataset (logic in
//! [`hermes::memory::eval`]), printed as a table or one JSON object.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use hermes::config::{Config, EmbedderConfig};
use hermes::memory::eval::{self, EvalReport, Retriever};
use hermes::memory::recall::Weights;
use hermes::memory::MemoryService;

use super::runtime::io_runtime;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Store every turn of a LoCoMo JSON file as a memory, ask every question, and report
    /// recall any@k / all@k / fraction@k overall and per category, with recall latency.
    ///
    /// `vector` and `hybrid` use [memory.embedder]; when it is `none`, the local
    /// all-MiniLM-L6-v2 (scripts/fetch-embedder.sh) is used. Data goes to a temporary store.
    Memory(EvalMemoryArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum RetrieverArg {
    Bm25,
    Vector,
    Hybrid,
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
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(config: Config, command: EvalCommand) -> anyhow::Result<()> {
    let EvalCommand::Memory(args) = command;
    let retriever = match args.retriever {
        RetrieverArg::Bm25 => Retriever::Bm25,
        RetrieverArg::Vector => Retriever::Vector,
        RetrieverArg::Hybrid => Retriever::Hybrid,
    };
    if args.k.is_empty() || args.k.contains(&0) {
        anyhow::bail!("--k takes positive cut-offs, e.g. --k 5,10");
    }
    let samples = eval::load(&args.dataset)?;
    let questions: usize = samples.iter().map(|s| s.qa.len()).sum();
    let temp = tempfile::tempdir()?;
    let db = hermes::store::open_durable(
        temp.path(),
        hermes::store::durability::Mode::Batch(std::time::Duration::from_millis(50)),
    )?;
    let embedder_config = match (&config.memory.embedder, retriever) {
        (_, Retriever::Bm25) => EmbedderConfig::None,
        (EmbedderConfig::None, _) => EmbedderConfig::Local { model_dir: None },
        (configured, _) => configured.clone(),
    };
    let fusion = Weights {
        bm25: config.memory.fusion.bm25_weight,
        vector: config.memory.fusion.vector_weight,
    };
    let rt = io_runtime()?;
    let report = rt.block_on(async {
        let embedder = tokio::task::spawn_blocking(move || {
            hermes::memory::embed::from_config(&embedder_config)
        })
        .await??;
        let service = MemoryService::open(&db, &config.memory, embedder)?;
        let bar = indicatif::ProgressBar::new(questions as u64);
        bar.set_style(indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {pos}/{len} questions",
        )?);
        bar.set_message(format!("eval {}", retriever.name()));
        let report =
            eval::evaluate(&service, &samples, retriever, fusion, &args.k, Some(&bar)).await;
        bar.finish_and_clear();
        anyhow::Ok(report?)
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
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
        "recall latency p50 {:.2} ms, p99 {:.2} ms",
        r.latency_ms_p50, r.latency_ms_p99
    );
}
