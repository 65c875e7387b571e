//! W3 "message passing": the cost of the bus and a service on it, the way the engine's actors
//! talk: a counting service for one-way messages and an echo service for request/reply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{json, Value};

use super::measure::{progress, Stats};
use super::BenchError;
use crate::bus::{Handler, Message};
use crate::engine::Engine;

const ONEWAY: u64 = 100_000;
const RR: u64 = 20_000;
const CALLERS: u64 = 100;
/// Most one-way messages in flight: core NATS drops messages for a subscriber that falls too
/// far behind (a "slow consumer"), so the publisher waits for the consumer past this window.
const WINDOW: u64 = 8192;

/// Answers every request with its payload.
struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, msg: Message) -> Option<Bytes> {
        Some(msg.payload)
    }
}

/// Counts messages and wakes the bench when the last one is handled.
struct Counter {
    seen: Arc<AtomicU64>,
    target: u64,
    done: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

#[async_trait]
impl Handler for Counter {
    async fn handle(&self, _: Message) -> Option<Bytes> {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            let done = self.done.lock().ok().and_then(|mut d| d.take());
            if let Some(done) = done {
                let _ = done.send(());
            }
        }
        None
    }
}

fn setup(e: impl std::fmt::Display) -> BenchError {
    BenchError::Setup(e.to_string())
}

pub async fn run(engine: &Engine, show: bool) -> Result<Vec<Value>, BenchError> {
    let bus = engine.bus.clone();
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let (oneway_subject, rr_subject) = (
        format!("bench.w3.{run_id}.oneway"),
        format!("bench.w3.{run_id}.rr"),
    );

    // One-way: publish ONEWAY messages; time until the consumer actor handled the last.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let seen = Arc::new(AtomicU64::new(0));
    let counter = Arc::new(Counter {
        seen: seen.clone(),
        target: ONEWAY,
        done: std::sync::Mutex::new(Some(tx)),
    });
    let _counting = bus
        .serve(&oneway_subject, "bench", counter)
        .await
        .map_err(setup)?;
    let payload = Bytes::from_static(b"{\"n\":1}");
    tracing::info!("w3: one-way phase");
    let bar = progress(ONEWAY, "w3_oneway", show);
    let start = Instant::now();
    for i in 0..ONEWAY {
        bus.publish(&oneway_subject, payload.clone())
            .await
            .map_err(setup)?;
        if i % 1000 == 0 {
            bar.set_position(i);
            while i.saturating_sub(seen.load(Ordering::Relaxed)) > WINDOW {
                bus.flush().await.map_err(setup)?;
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        }
    }
    bus.flush().await.map_err(setup)?;
    tokio::time::timeout(Duration::from_secs(300), rx)
        .await
        .map_err(|_| setup("one-way messages were not all handled within 300 s"))?
        .map_err(setup)?;
    let oneway_per_s = ONEWAY as f64 / start.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // Request/reply against an echo actor.
    let _echoing = bus
        .serve(&rr_subject, "bench", Arc::new(Echo))
        .await
        .map_err(setup)?;
    tracing::info!("w3: request/reply phase");
    let bar = progress(RR, "w3_rr", show);
    let mut stats = Stats::default();
    let start = Instant::now();
    for _ in 0..RR {
        let t = Instant::now();
        bus.request(&rr_subject, payload.clone(), Duration::from_secs(10))
            .await
            .map_err(setup)?;
        stats.push(t.elapsed());
        bar.inc(1);
    }
    let rr_per_s = RR as f64 / start.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // The same, spread over CALLERS concurrent callers.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CALLERS {
        let (bus, subject, payload) = (bus.clone(), rr_subject.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..RR / CALLERS {
                bus.request(&subject, payload.clone(), Duration::from_secs(30))
                    .await?;
            }
            Ok::<_, crate::bus::BusError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(setup)?.map_err(setup)?;
    }
    let rr_x100_per_s = RR as f64 / start.elapsed().as_secs_f64();
    let mut rows = vec![json!({
        "workload": "w3",
        "oneway_msgs_per_s": oneway_per_s,
        "rr_per_s": rr_per_s,
        "rr_p50_us": stats.percentile(50.0),
        "rr_p99_us": stats.percentile(99.0),
        "rr_x100_per_s": rr_x100_per_s,
    })];
    if bus.backend() == crate::bus::BusBackend::Nats {
        rows.push(bare_nats(&engine.config.bus.url, &run_id, rr_per_s, &payload).await?);
    }
    Ok(rows)
}

/// The same sequential request/reply loop with bare async-nats, and how the bus compares.
async fn bare_nats(
    url: &str,
    run_id: &str,
    rr_per_s: f64,
    payload: &Bytes,
) -> Result<Value, BenchError> {
    tracing::info!("w3: bare async-nats request/reply");
    let subject = format!("bench.w3.{run_id}.bare");
    let start = Instant::now();
    let latencies = crate::bus::nats::bare_request_reply(url, &subject, RR, payload.clone())
        .await
        .map_err(setup)?;
    let bare_per_s = RR as f64 / start.elapsed().as_secs_f64();
    let mut stats = Stats::default();
    for l in latencies {
        stats.push(l);
    }
    Ok(json!({
        "workload": "w3_bare_async_nats",
        "rr_per_s": bare_per_s,
        "rr_p50_us": stats.percentile(50.0),
        "rr_p99_us": stats.percentile(99.0),
        "hermes_slowdown": bare_per_s / rr_per_s,
    }))
}
