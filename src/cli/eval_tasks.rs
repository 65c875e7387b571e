//! `hermes eval tasks`: run a suite of whole tasks (logic in [`hermes::eval`]) and print the
//! table or JSON; exit non-zero when a case fails, or with `--baseline` when the run regressed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use hermes::config::Config;
use hermes::eval::run::{Progress, Runner};
use hermes::eval::suite::Suite;
use hermes::eval::{baseline, resolve_scenarios, table};

use super::runtime::with_engine_runtime;

#[derive(Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct EvalTasksArgs {
    /// The suite file (TOML; format below).
    #[arg(long, value_name = "FILE")]
    suite: PathBuf,
    /// Print the report as one JSON object (the format `--baseline` reads) instead of a table.
    #[arg(long)]
    json: bool,
    /// An earlier run's `--json` output: compare with it and exit non-zero only on a
    /// regression (rules below), not on cases that failed in the baseline too.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// How much mean tool rounds and mean tokens per task may rise over the baseline, percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0)]
    tolerance: f64,
    /// Run only this case (repeat for several).
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
}

const AFTER_HELP: &str = "\
Examples:
  hermes eval tasks --suite config/eval/seed-tasks.toml            # the scripted model
  hermes eval tasks --suite config/eval/seed-tasks.toml --json > baseline.json
  hermes eval tasks --suite config/eval/seed-tasks.toml --baseline baseline.json
  hermes --config my-openai.toml eval tasks --suite config/eval/seed-tasks.toml
  hermes --model gpt-4o-mini eval tasks --suite config/eval/seed-tasks.toml --case order-by-id-zh

The model: `--config FILE` beats the suite's own `config = \"…\"`, and `--model NAME` (an
OpenAI-compatible endpoint from OPENAI_BASE_URL / OPENAI_API_KEY) beats both; the environment
alone does not replace the suite's model. Every case runs on a fresh engine over a fresh
temporary data directory (embedded bus), so cases are independent and runs repeatable.

The suite file:
  name = \"seed-tasks\"                 # optional
  config = \"seed-tasks.config.toml\"   # optional Hermes config, relative to the suite file
  timeout_secs = 120                  # optional default: bound on each case's turns
  memory_wait_secs = 30               # optional: bound on waiting for background memory writes

  [[case]]
  name = \"order-status\"               # A-Z a-z 0-9 _ -; sessions are <name>-s1, <name>-s2, …
  agent = \"assistant\"                 # optional (default assistant)
  user = \"u-1001\"                     # optional (default eval-<name>)
  messages = [\"Where is my order JD-20251111-0042?\"]      # one session, sent in order
  # sessions = [[\"My budget is 5000\"], [\"What is my budget?\"]]  # or several sessions
  timeout_secs = 60                   # optional
  [case.expect]                       # every check optional
  tools_called = [{ name = \"order_lookup\", arguments = { order_id = \"JD-20251111-0042\" } }]
  tools_not_called = [\"generate_report\"]
  answer_contains = [\"SF1428837610295\"]    # in the last answer, ignoring case
  answer_not_contains = [\"sorry\"]
  answer_matches = \"(?i)in transit|运输\"   # a regex on the last answer
  memory_written = [\"5000\"]         # in some memory (key or content) of the user afterwards
  memory_not_written = [\"weather\"]
  memory_recalled = [\"budget\"]      # in some memory a turn recalled
  max_tool_rounds = 2                 # model steps that asked for tools, all turns together

Each message waits for its turn's answer (an async tool's turn answers when its job is done).
A case passes when every turn answered and every check holds; a turn that fails, times out or
pauses for a confirmation fails the case and the rest of its messages are not sent. Tool
arguments match as a subset: expected keys only, strings ignoring case, numbers by value.

The report: per case pass/FAIL with the reason of each failed check, tool rounds, the
planner's tokens (prompt+completion: the provider's usage, else counted with the model's
tokenizer), the share of prompt tokens read from the provider's prompt cache, the reasoning
tokens, the cost (when the model's table has a `price`, e.g. `price = { input_per_mtok = 2.5,
cached_input_per_mtok = 1.25, output_per_mtok = 10 }`) and latency (message sent → answer,
summed over the case's turns); overall the completion rate, mean tool rounds, mean tokens per
task, cached share, mean cost per task and latency p50/p95.

--baseline compares the cases both runs have. A regression is: a case that passed in the
baseline fails now; a lower completion rate; mean tool rounds or mean tokens per task above
the baseline's by more than --tolerance percent. Latency is shown, never judged.

Exit status: 0 when every case passed (with --baseline: when nothing regressed); 1 otherwise,
or when the suite, config or baseline cannot be used.";

pub fn run(
    config_flag: &[PathBuf],
    model_flag: Option<String>,
    args: EvalTasksArgs,
) -> anyhow::Result<()> {
    if !(args.tolerance.is_finite() && args.tolerance >= 0.0) {
        anyhow::bail!("--tolerance takes a percentage ≥ 0, e.g. --tolerance 10");
    }
    let mut suite = Suite::load(&args.suite)?;
    suite.select(&args.cases)?;
    let config = suite_config(&suite, config_flag, model_flag)?;
    let baseline = args.baseline.as_deref().map(baseline::load).transpose()?;
    let mut report = with_engine_runtime(config.engine.io_threads, |io| async move {
        let runner = Runner::new(config, io).await?;
        let bar = indicatif::ProgressBar::new(suite.cases.len() as u64);
        bar.set_style(indicatif::ProgressStyle::with_template(
            "{spinner} {bar:30} {pos}/{len} cases · {msg}",
        )?);
        let report = runner
            .run(&suite, |p| match p {
                Progress::Started(case) => bar.set_message(case.name.clone()),
                Progress::Finished(case) => {
                    bar.inc(1);
                    if !case.passed {
                        bar.println(format!("FAIL {}", case.name));
                    }
                }
            })
            .await;
        bar.finish_and_clear();
        anyhow::Ok(report?)
    })?;
    if let Some(base) = &baseline {
        report.comparison = Some(baseline::compare(base, &report, args.tolerance / 100.0));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table::render(&report));
    }
    let o = &report.overall;
    match &report.comparison {
        Some(c) if c.regressed() => anyhow::bail!(
            "{} regression(s) against the baseline {}",
            c.regressions.len(),
            args.baseline.as_deref().unwrap_or(Path::new("")).display()
        ),
        Some(_) => Ok(()),
        None if o.passed < o.cases => anyhow::bail!(
            "{} of {} cases failed (reasons in the report)",
            o.cases - o.passed,
            o.cases
        ),
        None => Ok(()),
    }
}

/// The configuration the suite runs against: the suite's profile, then `--config`, else the
/// suite's own config; then `--model`. The environment's model variables alone do not apply.
fn suite_config(
    suite: &Suite,
    config_flag: &[PathBuf],
    model_flag: Option<String>,
) -> anyhow::Result<Config> {
    let files: Vec<PathBuf> = if config_flag.is_empty() {
        suite.config.iter().cloned().collect()
    } else {
        config_flag.to_vec()
    };
    let (mut config, _) = super::load_config(suite.profile, &files, model_flag, false)
        .with_context(|| match (&suite.config, config_flag.is_empty()) {
            (Some(f), true) => format!(
                "cannot load the config {} named by the suite {}",
                f.display(),
                suite.path.display()
            ),
            _ => "cannot load the configuration".to_string(),
        })?;
    for file in &files {
        resolve_scenarios(&mut config, file);
    }
    Ok(config)
}
