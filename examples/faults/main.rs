//! The fault matrix (issue 14): each fault struck against a live multi-process NATS
//! deployment under load, and one JSON line per cell counting the turns `lost`,
//! `duplicated` and `stuck` and the processes `crashed`, then a summary line. Exits non-zero
//! when any count is.
//!
//! Run it with `scripts/faults.sh [--quick] [--only PATTERN]`, which builds `hermes` and this
//! harness and passes the binary's path. It is a program rather than a test target so that
//! `cargo test` never runs the matrix (minutes of real processes) by accident, while
//! `cargo test --all-targets` and clippy still build and lint it; it reuses the test suite's
//! nats-server runner and fake OpenAI-compatible server (`tests/common/`).
//!
//! The same executable serves the ledger MCP server of the deployment (`faults
//! ledger-server`), so a cell can kill that server as a process of its own.

// Harness code: a broken set-up (no nats-server, a port taken) is reported by the shared test
// helpers with a panic, as in the test suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../tests/common/fake_openai.rs"]
mod fake_openai;
#[allow(dead_code)]
#[path = "../../tests/common/nats_server.rs"]
mod nats_server;

mod cells;
mod count;
mod deploy;
mod disk;
mod drive;
mod flood;
mod heal;
mod inject;
mod ledger;
mod load;
mod model;
mod observe;
mod procs;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use serde_json::json;

/// Run the fault matrix against live deployments.
#[derive(Parser)]
#[command(name = "faults")]
struct Args {
    /// The reduced matrix (a few minutes): one kill of each process kind, a NATS restart,
    /// an MCP server killed mid-call, model 500s, a full disk, 2,000 bad envelopes and a
    /// data directory deleted under an intact log.
    #[arg(long)]
    quick: bool,
    /// Only the cells whose name matches this regular expression (e.g. `kill:session`).
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// List the cells and exit.
    #[arg(long)]
    list: bool,
    /// The `hermes` binary (default: next to this program's directory, as cargo builds it).
    #[arg(long, value_name = "PATH")]
    hermes: Option<PathBuf>,
    /// Sessions of background load per cell (default 4 quick, 6 full).
    #[arg(long)]
    sessions: Option<usize>,
    /// Run the planner in each session process too (`--actors session,planner`), so a turn
    /// plans in-process: the layout where a turn's message goes into the session log with
    /// its first write (the separate planner process stays, and serves no session process).
    #[arg(long)]
    planner_with_sessions: bool,
    /// Turns per session (default 4: one of each kind).
    #[arg(long, default_value_t = 4)]
    turns: u32,
    /// Where each cell's config and process logs go; a failed cell's stay there.
    #[arg(long, value_name = "DIR", default_value = "target/faults")]
    out: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the ledger MCP server (used by the matrix itself).
    #[command(hide = true)]
    LedgerServer {
        #[arg(long)]
        port: u16,
        #[arg(long)]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::LedgerServer { port, dir }) = args.command {
        return match ledger::serve(port, dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ledger: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run_matrix(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("faults: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Run the selected cells; `Ok(true)` when every count is zero.
fn run_matrix(args: &Args) -> anyhow::Result<bool> {
    let only = args.only.as_deref().map(regex::Regex::new).transpose()?;
    let cells: Vec<cells::Cell> = cells::matrix()
        .into_iter()
        .filter(|c| !args.quick || c.quick)
        .filter(|c| only.as_ref().is_none_or(|re| re.is_match(&c.name)))
        .collect();
    if args.list {
        for cell in &cells {
            println!("{}{}", cell.name, if cell.quick { "  (quick)" } else { "" });
        }
        return Ok(true);
    }
    anyhow::ensure!(!cells.is_empty(), "no cell matches {:?}", args.only);
    let hermes = match &args.hermes {
        Some(path) => path.clone(),
        None => default_hermes()?,
    };
    anyhow::ensure!(
        hermes.is_file(),
        "{} is not a hermes binary; build it (`cargo build`) or pass --hermes",
        hermes.display()
    );
    let options = run::Options {
        hermes,
        sessions: args.sessions.unwrap_or(if args.quick { 4 } else { 6 }),
        turns: args.turns,
        flood_size: args.quick.then_some(2_000),
        planner_with_sessions: args.planner_with_sessions,
        out: std::path::absolute(&args.out)?,
    };
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
    );
    let started = Instant::now();
    let (mut failed, mut skipped) = (0, 0);
    let mut totals = [0u64; 5];
    for cell in &cells {
        eprintln!("faults: {} …", cell.name);
        let outcome = run::run_cell(&rt, &options, cell);
        for (total, key) in
            totals
                .iter_mut()
                .zip(["lost", "duplicated", "stuck", "crashed", "errors_told"])
        {
            *total += outcome.line[key].as_u64().unwrap_or(0);
        }
        failed += usize::from(outcome.failed);
        skipped += usize::from(outcome.skipped);
        println!("{}", outcome.line);
    }
    let summary = json!({
        "summary": true,
        "cells": cells.len(),
        "failed": failed,
        "skipped": skipped,
        "lost": totals[0],
        "duplicated": totals[1],
        "stuck": totals[2],
        "crashed": totals[3],
        "errors_told": totals[4],
        "quick": args.quick,
        "planner_with_sessions": args.planner_with_sessions,
        "secs": started.elapsed().as_secs(),
    });
    println!("{summary}");
    Ok(failed == 0)
}

/// `target/<profile>/hermes`, beside `target/<profile>/examples/faults`.
fn default_hermes() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile = exe
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or_else(|| anyhow::anyhow!("cannot tell where cargo put {}", exe.display()))?;
    Ok(profile.join("hermes"))
}
