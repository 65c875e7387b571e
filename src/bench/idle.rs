//! "Idle sessions" (ours, issue 3): what a live but idle session costs in memory. N sessions
//! (default 10,000) each take one W1 turn, 200 in flight at a time, and then stay idle with
//! their actors — metadata, log and task state — in memory (eviction is after
//! `engine.session_idle_secs`). Reported: the process's resident set before and after, and
//! the difference per idle session. The RSS includes sled's page cache for the new sessions'
//! data, which a real deployment pays too.
//!
//! RSS is read twice: right after the last turn, and once the sessions have been idle for
//! [`SETTLE`]. In between the allocator returns the pages the burst of turns freed: mimalloc
//! purges free memory only after a delay (1 s for pages, 10 s for its arenas), so the first
//! reading still counts garbage that an idle process does not keep.

use std::time::Instant;

use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::measure::{current_rss_mb, progress};
use super::w1::{open, turn, warm_up};
use super::BenchError;
use crate::engine::Engine;

/// Sessions when `--sessions` is not given.
pub const DEFAULT_SESSIONS: usize = 10_000;
const IN_FLIGHT: usize = 200;
/// How long the sessions stay idle before the settled reading: past mimalloc's arena purge
/// delay (`purge_delay` 1 s × `arena_purge_mult` 10).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(12);

pub async fn run(engine: &Engine, sessions: usize, show: bool) -> Result<Value, BenchError> {
    warm_up(engine).await?;
    let live_before = engine.live_sessions().await;
    let rss_before = current_rss_mb();
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let bar = progress(sessions as u64, "idle", show);
    let wall0 = Instant::now();
    let mut started = 0;
    let mut running = JoinSet::new();
    while started < sessions || !running.is_empty() {
        while running.len() < IN_FLIGHT && started < sessions {
            let name = format!("idle-{run_id}-{started}");
            let mut client = open(engine, &name).await?;
            running.spawn(async move { turn(&mut client, &name, 1).await });
            started += 1;
        }
        if let Some(done) = running.join_next().await {
            done.map_err(|e| BenchError::Setup(e.to_string()))??;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let live = engine.live_sessions().await.saturating_sub(live_before);
    let rss_after = current_rss_mb();
    let idle_from = Instant::now();
    if show {
        eprintln!(
            "idle: {sessions} sessions live; letting them idle for {} s",
            SETTLE.as_secs()
        );
    }
    tokio::time::sleep(SETTLE).await;
    // Every session stays live through the wait (eviction is minutes away).
    let live_settled = engine.live_sessions().await.saturating_sub(live_before);
    let rss_settled = current_rss_mb();
    let per_session_kib = (rss_settled - rss_before) * 1024.0 / sessions.max(1) as f64;
    Ok(json!({
        "workload": "idle_sessions",
        "sessions": sessions,
        "live_idle_sessions": live,
        "rss_before_mb": rss_before,
        "rss_after_mb": rss_after,
        "rss_settled_mb": rss_settled,
        "settled_after_s": idle_from.elapsed().as_secs_f64(),
        "live_idle_sessions_settled": live_settled,
        "kib_per_idle_session": per_session_kib,
        "setup_s": wall0.elapsed().as_secs_f64(),
    }))
}
