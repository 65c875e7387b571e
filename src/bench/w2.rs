//! W2 "history growth": one session, 500 turns; does a turn get slower as history grows?

use std::time::Instant;

use serde_json::{json, Value};

use super::measure::{percentile, progress, slope, Stats};
use super::w1::{open, turn};
use super::BenchError;
use crate::engine::Engine;

const N: u64 = 500;

pub async fn run(engine: &Engine, show: bool) -> Result<Value, BenchError> {
    super::w1::warm_up(engine).await?;
    let session = format!("w2-{}", uuid::Uuid::new_v4().simple());
    let mut client = open(engine, &session).await?;
    let bar = progress(N, "w2", show);
    let mut stats = Stats::default();
    let wall0 = Instant::now();
    for t in 1..=N {
        stats.push(turn(&mut client, &session, t).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let lat = stats.samples();
    let early = percentile(&lat[5..15], 50.0);
    let late = percentile(&lat[490..500], 50.0);
    Ok(json!({
        "workload": "w2",
        "turns": N,
        "wall_s": wall0.elapsed().as_secs_f64(),
        "lat_turn10_us": early,
        "lat_turn500_us": late,
        "growth_ratio": late / early,
        "slope_us_per_turn": slope(lat),
    }))
}
