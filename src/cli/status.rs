//! `hermes status`: the whole deployment at a glance, gathered over the bus — every process
//! with what it runs and its live sessions, and the deployment's metrics summed over the
//! processes that record them (`hermes serve --http`). With `--serve ADDR`, the live status
//! page of the deployment instead, from a process that runs no actors.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Args;

use hermes::actors::status::gather;
use hermes::config::Config;

use super::runtime::io_runtime;

#[derive(Args)]
pub struct StatusArgs {
    /// The deployment's NATS url(s); default: `[bus] url` of the configuration.
    #[arg(long)]
    bus: Option<String>,
    /// Seconds to wait for every process to answer.
    #[arg(long, default_value_t = 1.0)]
    wait: f64,
    /// Print one JSON object: the processes and the summed series.
    #[arg(long)]
    json: bool,
    /// Serve the deployment's live status page at http://ADDR/ (e.g. `127.0.0.1:8080`) until
    /// Ctrl-C, instead of printing once. Every `hermes serve --http` shows the same page.
    #[arg(long, value_name = "ADDR", conflicts_with = "json")]
    serve: Option<String>,
}

pub fn run(config: Config, args: StatusArgs) -> anyhow::Result<()> {
    let url = args.bus.clone().unwrap_or_else(|| config.bus.url.clone());
    if url == "embedded" {
        anyhow::bail!(
            "hermes status reads a running deployment over NATS: pass --bus nats://host:4222 \
             (on the embedded bus every command runs an engine of its own; `hermes serve --http` \
             shows that process's status page and metrics)"
        );
    }
    let credentials = config.bus.auth.resolve().map_err(anyhow::Error::msg)?;
    let cluster = config.cluster.options();
    let wait = Duration::from_secs_f64(args.wait.max(0.1));
    let runtime = io_runtime()?;
    if let Some(listen) = args.serve {
        return runtime.block_on(async move {
            let bus = hermes::bus::connect_with(&url, None, cluster, &credentials).await?;
            let http = hermes::http::start(&listen, config.http.max_connections).await?;
            http.show_live(bus).await?;
            eprintln!(
                "hermes: status page of the deployment on {url} at {}; Ctrl-C stops",
                http.page_url()
            );
            super::serve::wait_for_stop_signal().await
        });
    }
    let processes = runtime.block_on(async move {
        let bus = hermes::bus::connect_with(&url, None, cluster, &credentials).await?;
        anyhow::Ok(gather(&bus, wait).await?)
    })?;
    if processes.is_empty() {
        anyhow::bail!(
            "no Hermes process answered within {:.1} s; is `hermes serve` running on this bus?",
            args.wait
        );
    }
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    for p in &processes {
        for (series, value) in &p.series {
            *totals.entry(series.clone()).or_default() += value;
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({"processes": processes, "totals": totals})
        );
        return Ok(());
    }
    println!(
        "{:<16} {:>8}  {:<42} {:>8}  UP",
        "HOST", "PID", "ACTORS", "SESSIONS"
    );
    let now = chrono::Utc::now();
    for p in &processes {
        let up = (now - p.started_at).num_seconds().max(0);
        println!(
            "{:<16} {:>8}  {:<42} {:>8}  {}",
            p.host,
            p.pid,
            p.actors.join(","),
            p.sessions_live.map_or("-".to_string(), |n| n.to_string()),
            format_args!("{}h{:02}m{:02}s", up / 3600, up / 60 % 60, up % 60)
        );
    }
    let recording = processes.iter().filter(|p| !p.series.is_empty()).count();
    println!(
        "\n{} processes; metrics from {recording} (those started with --http)",
        processes.len()
    );
    for (series, value) in &totals {
        println!("  {series:<72} {value}");
    }
    Ok(())
}
