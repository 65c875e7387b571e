//! `hermes bench`: run the engine workloads and print JSON lines or a table.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use hermes::actors::ActorSet;
use hermes::bench::{self, Workload};
use hermes::config::Config;

use super::runtime::with_engine_runtime;

#[derive(Clone, Copy, ValueEnum)]
enum Which {
    W1,
    W2,
    W3,
    /// Memory of live idle sessions (not part of `all`).
    Idle,
    /// Delegation overhead: one agent fanning out to 1, 4 and 16 agents against the same
    /// number of direct tool calls, p50/p99 (not part of `all`).
    Delegation,
    All,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Workload: w1 (tool loop), w2 (history growth), w3 (message passing), all (w1–w3),
    /// idle (RSS with many live idle sessions; see --sessions), or delegation (what a
    /// delegated agent adds over a direct tool call, 1/4/16 children).
    #[arg(value_enum, default_value = "all")]
    workload: Which,
    /// Sessions for the `idle` workload.
    #[arg(long, default_value_t = bench::IDLE_DEFAULT_SESSIONS)]
    sessions: usize,
    /// Bus: `embedded` or `nats://host:port` (a nats-server started with -js).
    #[arg(long, default_value = "embedded")]
    bus: String,
    /// Where the bench's sled data goes (default: a fresh temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print one JSON line per workload instead of a table.
    #[arg(long)]
    json: bool,
    /// Actors this process runs: `all`, a comma list (see `hermes serve --help`), or `none`
    /// to drive a deployment already serving on `--bus` (its processes need the bench model:
    /// `[models.planner] provider = "bench"` and the built-in `add`; see
    /// scripts/bench-cluster.sh). CPU figures then cover this process only.
    #[arg(long, default_value = "all")]
    actors: String,
    /// Serve this run's Prometheus metrics at http://ADDR/metrics while it runs (e.g.
    /// `127.0.0.1:9464`); see --hold.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// With --http: keep serving /metrics this many seconds after the run, so a scraper (or
    /// `curl`) reads the final figures.
    #[arg(long, default_value_t = 0, requires = "http")]
    hold: u64,
    /// Also count the CPU time of these processes (comma-separated pids: the deployment
    /// `--actors none` drives) in each row's `deployment_cpu_us_per_turn`.
    #[arg(long, value_delimiter = ',', value_name = "PID,...")]
    count_cpu_of: Vec<u32>,
}

pub fn run(config: Config, args: BenchArgs) -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let mut config = bench::bench_config(config, &args.bus, &dir)?;
    if matches!(args.workload, Which::Delegation) {
        config = bench::delegation::config(config, &dir)?;
    }
    let workloads = match args.workload {
        Which::W1 => vec![Workload::W1],
        Which::W2 => vec![Workload::W2],
        Which::W3 => vec![Workload::W3],
        Which::Idle => vec![Workload::Idle(args.sessions)],
        Which::Delegation => vec![Workload::Delegation],
        Which::All => vec![Workload::W1, Workload::W2, Workload::W3],
    };
    let json = args.json;
    if !args.count_cpu_of.is_empty() {
        bench::count_cpu_of(args.count_cpu_of.clone());
    }
    let actors = match args.actors.trim() {
        "none" => ActorSet::NONE,
        list => ActorSet::parse(list).map_err(anyhow::Error::msg)?,
    };
    let (http, hold) = (args.http.clone(), args.hold);
    let max_connections = config.http.max_connections;
    let rows = with_engine_runtime(config.engine.io_threads, |io| async move {
        let server = match http {
            Some(listen) => {
                let server = io
                    .spawn(async move { hermes::http::start(&listen, max_connections).await })
                    .await??;
                eprintln!("hermes: metrics at {}", server.metrics_url());
                Some(server)
            }
            None => None,
        };
        let rows = bench::run(config, actors, &workloads, io, !json).await?;
        if server.is_some() && hold > 0 {
            eprintln!("hermes: serving the final metrics for {hold} s");
            tokio::time::sleep(std::time::Duration::from_secs(hold)).await;
        }
        Ok(rows)
    })?;
    for row in rows {
        if json {
            println!("{row}");
        } else {
            print_table(&row);
        }
    }
    Ok(())
}

fn print_table(row: &serde_json::Value) {
    let Some(obj) = row.as_object() else { return };
    let name = obj.get("workload").and_then(|v| v.as_str()).unwrap_or("?");
    println!("{name}");
    for (k, v) in obj {
        if k == "workload" {
            continue;
        }
        let shown = match v.as_f64() {
            Some(f) if v.is_f64() => format!("{f:.2}"),
            _ => v.to_string(),
        };
        println!("  {k:<20} {shown}");
    }
}
