//! One cell from start to end: deploy, load, strike, let the deployment settle, count, and
//! the cell's JSON line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;

use crate::cells::{Cell, Fault};
use crate::count::{count, Counts};
use crate::deploy::{Deployment, Dirs};
use crate::disk::Tmpfs;
use crate::drive::{Driven, Turn};
use crate::inject::{inject, sleep_supervised, CellContext};
use crate::load::Load;

/// How long answered turns' memories may take to be written once the load is over.
const MEMORY_SETTLE: Duration = Duration::from_secs(40);

pub struct Options {
    pub hermes: PathBuf,
    pub sessions: usize,
    pub turns: u32,
    pub flood_size: Option<usize>,
    /// Session processes plan in-process (`--actors session,planner`).
    pub planner_with_sessions: bool,
    /// Where each cell's config, ledger and process logs go (`<out>/<cell>`).
    pub out: PathBuf,
}

/// A cell's result: its JSON line and whether it failed.
pub struct Outcome {
    pub line: Value,
    pub failed: bool,
    pub skipped: bool,
}

pub fn run_cell(rt: &Arc<Runtime>, options: &Options, cell: &Cell) -> Outcome {
    let started = Instant::now();
    let work = options.out.join(cell.name.replace([':', '@'], "_"));
    // The shared test helpers report a broken set-up (no nats-server…) by panicking: that
    // is this cell's error, not the end of the matrix.
    let result = prepare(&work).and_then(|()| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(rt, options, cell, &work)
        }))
        .unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(anyhow::anyhow!("the harness failed: {text}"))
        })
    });
    let secs = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    let mut line = Map::new();
    line.insert("fault".into(), json!(cell.name));
    let (failed, skipped) = match result {
        Ok(Ran::Skipped(reason)) => {
            line.insert("skipped".into(), json!(reason));
            (false, true)
        }
        Ok(Ran::Counted {
            counts,
            crashes,
            extra,
            missed,
        }) => {
            let bad = extra
                .get("bad_accepted")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            line.insert("lost".into(), json!(counts.lost));
            line.insert("duplicated".into(), json!(counts.duplicated));
            line.insert("stuck".into(), json!(counts.stuck));
            line.insert("crashed".into(), json!(crashes.len()));
            line.insert("turns".into(), json!(counts.owed));
            line.insert("answered".into(), json!(counts.answered));
            line.insert("errors_told".into(), json!(counts.errors_told));
            if !counts.error_codes.is_empty() {
                line.insert("error_codes".into(), json!(counts.error_codes));
            }
            line.insert("refused".into(), json!(counts.refused));
            line.insert("unsent".into(), json!(counts.unsent));
            line.insert("memories".into(), json!(counts.memories));
            line.insert("answers_resent".into(), json!(counts.answers_resent));
            line.extend(extra);
            let mut notes = counts.notes.clone();
            notes.extend(crashes.iter().cloned());
            if let Some(missed) = &missed {
                line.insert("missed".into(), json!(missed));
            }
            if !notes.is_empty() {
                notes.truncate(20);
                line.insert("notes".into(), json!(notes));
            }
            let failed = counts.lost + counts.duplicated + counts.stuck + crashes.len() > 0
                || bad > 0
                || missed.is_some();
            (failed, false)
        }
        Err(e) => {
            line.insert("error".into(), json!(format!("{e:#}")));
            (true, false)
        }
    };
    line.insert("secs".into(), json!(secs));
    if !failed && std::env::var_os("FAULTS_KEEP_LOGS").is_none() {
        // Keep the logs of failed cells only (of every cell with FAULTS_KEEP_LOGS set).
        let _ = std::fs::remove_dir_all(&work);
    } else {
        line.insert("logs".into(), json!(work.display().to_string()));
    }
    Outcome {
        line: Value::Object(line),
        failed,
        skipped,
    }
}

fn prepare(work: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work)?;
    Ok(())
}

enum Ran {
    Skipped(String),
    Counted {
        counts: Counts,
        crashes: Vec<String>,
        extra: Map<String, Value>,
        missed: Option<String>,
    },
}

fn run(rt: &Arc<Runtime>, options: &Options, cell: &Cell, work: &Path) -> anyhow::Result<Ran> {
    let tmpfs = match cell.fault {
        Fault::DiskFull => match Tmpfs::mount(&work.join("data")) {
            Ok(tmpfs) => Some(tmpfs),
            Err(e) => return Ok(Ran::Skipped(format!("{e:#}"))),
        },
        _ => None,
    };
    let data = work.join("data");
    let nats_config = match cell.fault {
        Fault::PermissionsChanged => Some(crate::heal::write_nats_config(work, false)?),
        _ => None,
    };
    let dirs = Dirs {
        work,
        data: &data,
        nats_config: nats_config.as_deref(),
        planner_with_sessions: options.planner_with_sessions,
    };
    let mut dep = Deployment::start(rt, &options.hermes, &dirs)?;
    let load = Load::start(&dep, options.sessions, options.turns)?;
    // Strike under load: once a third of the turns are done.
    let deadline = Instant::now() + Duration::from_secs(90);
    while load.finished() * 3 < load.total() && Instant::now() < deadline {
        sleep_supervised(&mut dep, Duration::from_millis(100))?;
    }
    let flood_size = match cell.fault {
        Fault::BadEnvelopes(n) => options.flood_size.unwrap_or(n),
        _ => 0,
    };
    let context = CellContext {
        load: &load,
        work,
        tmpfs: tmpfs.as_ref(),
        flood_size,
    };
    let injected = inject(&mut dep, cell.fault, &context)?;
    while !load.done() || injected.probe.as_ref().is_some_and(|p| !p.is_finished()) {
        sleep_supervised(&mut dep, Duration::from_millis(200))?;
    }
    let mut turns: Vec<(Turn, Driven)> = load.results();
    let mut extra = injected.extra;
    if let Some(probe) = injected.probe {
        let (turn, driven) = dep.block_on(probe)?;
        extra.insert("probe_told".into(), json!(told(&dep, &driven)));
        turns.push((turn, driven));
    }
    settle_memories(&mut dep, &turns)?;
    if matches!(cell.fault, Fault::BadEnvelopes(_)) {
        let phantoms = phantom_turns(&dep, &turns);
        let bad = extra
            .get("bad_accepted")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        extra.insert("phantom_turns".into(), json!(phantoms));
        extra.insert("bad_accepted".into(), json!(bad + phantoms as u64));
    }
    let counts = dep.block_on(count(&dep, &turns))?;
    let crashes = dep.crashes();
    dep.stop();
    drop(tmpfs);
    Ok(Ran::Counted {
        counts,
        crashes,
        extra,
        missed: injected.missed,
    })
}

/// Wait until every answered turn's memory is written (or its extraction error told).
fn settle_memories(dep: &mut Deployment, turns: &[(Turn, Driven)]) -> anyhow::Result<()> {
    let deadline = Instant::now() + MEMORY_SETTLE;
    while Instant::now() < deadline {
        let pending = {
            let seen = dep.observer.seen();
            turns
                .iter()
                .filter_map(|(_, d)| d.turn_id.as_ref())
                .filter(|t| seen.answers.contains_key(*t))
                .filter(|t| !seen.memories.contains_key(*t) && !seen.memory_errors.contains_key(*t))
                .count()
        };
        if pending == 0 {
            break;
        }
        sleep_supervised(dep, Duration::from_millis(200))?;
    }
    // Late duplicates would arrive now.
    sleep_supervised(dep, Duration::from_secs(2))
}

/// What the probe turn was told, in short: its answer, or the codes of its errors.
fn told(dep: &Deployment, driven: &Driven) -> String {
    let seen = dep.observer.seen();
    let Some(turn) = &driven.turn_id else {
        return "nothing (no turn started)".into();
    };
    if let Some((_, text)) = seen.answers.get(turn).and_then(|a| a.first()) {
        return text.chars().take(120).collect();
    }
    match seen.errors.get(turn) {
        Some(codes) => format!("error {}", codes.join(", ")),
        None => "nothing".into(),
    }
}

/// Turns started for messages nobody drove (a bad envelope that got in).
fn phantom_turns(dep: &Deployment, turns: &[(Turn, Driven)]) -> usize {
    let seen = dep.observer.seen();
    seen.message_of
        .values()
        .filter(|m| !turns.iter().any(|(t, _)| t.message_id == **m))
        .count()
}
