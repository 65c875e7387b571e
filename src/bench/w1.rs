//! W1 "tool loop": user message → model (tool call) → `add` → model (answer), N times.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::measure::{per_turn_row, progress, Snapshot, Stats};
use super::BenchError;
use crate::bus::nats::{MessageTap, TAP_CAUSED};
use crate::bus::BusBackend;
use crate::client::SessionClient;
use crate::engine::Engine;
use crate::protocol::TurnEvent;
use crate::store::sessions::SessionStore;

pub const AGENT: &str = "assistant";
pub const USER: &str = "bench";
const TURN_TIMEOUT: Duration = Duration::from_secs(60);

/// One bench turn: send turn `t`'s message and check the answer. Returns the latency.
pub async fn turn(
    client: &mut SessionClient,
    session: &str,
    t: u64,
) -> Result<Duration, BenchError> {
    turn_with_id(client, session, t).await.map(|(took, _)| took)
}

/// [`turn`], with the id of the turn it ran.
async fn turn_with_id(
    client: &mut SessionClient,
    session: &str,
    t: u64,
) -> Result<(Duration, Option<String>), BenchError> {
    let text = format!("turn {t}: add {t} and {}", 1000 + t);
    let expected = format!("The answer is {}.", 2 * t + 1000);
    let start = Instant::now();
    let trace = client
        .turn(&text, TURN_TIMEOUT, |_| {})
        .await
        .map_err(|e| fail(session, t, e.to_string()))?;
    let elapsed = start.elapsed();
    match trace.answer {
        Some(a) if a == expected => Ok((elapsed, trace.accepted.turn_id)),
        Some(a) => Err(fail(
            session,
            t,
            format!("answer `{a}`, expected `{expected}`"),
        )),
        None => Err(fail(
            session,
            t,
            trace.error.unwrap_or_else(|| "no answer".into()),
        )),
    }
}

fn fail(session: &str, turn: u64, reason: String) -> BenchError {
    BenchError::Turn {
        session: session.into(),
        turn,
        reason,
    }
}

pub async fn warm_up(engine: &Engine) -> Result<(), BenchError> {
    let session = format!("warmup-{}", uuid::Uuid::new_v4().simple());
    let mut client = open(engine, &session).await?;
    for t in 1..=20 {
        turn(&mut client, &session, t).await?;
    }
    Ok(())
}

pub async fn open(engine: &Engine, session: &str) -> Result<SessionClient, BenchError> {
    SessionClient::open(engine.bus.clone(), AGENT, session, USER)
        .await
        .map_err(|e| BenchError::Setup(e.to_string()))
}

/// `local_sessions`: the sessions are stored by this process, so their isolation is checked
/// in its store after the multi-session run.
pub async fn run(
    engine: &Engine,
    local_sessions: bool,
    show: bool,
) -> Result<Vec<Value>, BenchError> {
    warm_up(engine).await?;
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let mut single = single(engine, &run_id, show).await?;
    if engine.bus.backend() == BusBackend::Nats {
        let by_kind = messages_by_kind(engine, &run_id).await?;
        if let Some(row) = single.as_object_mut() {
            row.insert("bus_msgs_by_kind".into(), by_kind);
        }
    }
    Ok(vec![
        single,
        multi(engine, &run_id, local_sessions, show).await?,
        concurrent(engine, &run_id, local_sessions, show).await?,
    ])
}

/// Turns of a counted pass (after the timed one: the tap costs the server CPU).
const COUNTED_TURNS: u64 = 200;

/// Every message the NATS server routes per single-session turn, by kind, over a counted pass
/// of [`COUNTED_TURNS`] turns: the whole deployment's traffic, JetStream's own included (but
/// for the advisories only the tap causes, reported apart: [`TAP_CAUSED`]).
async fn messages_by_kind(engine: &Engine, run_id: &str) -> Result<Value, BenchError> {
    let config = &engine.config;
    let credentials = config
        .bus
        .auth
        .resolve()
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    let tap = MessageTap::start(&config.bus.url, &credentials)
        .await
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    let session = format!("w1k-{run_id}");
    let mut client = open(engine, &session).await?;
    // The session's first turn opens its log and consumers: not a steady-state turn. Its
    // extraction, after the earlier runs' (the jobs are handed over in log order), is waited
    // for before counting starts, and the last counted turn's before it ends: the counted
    // turns' background work is counted, and nobody else's.
    let (_, first) = turn_with_id(&mut client, &session, 1).await?;
    extracted(&mut client, first.as_deref()).await;
    let before = tap.counts().await;
    let mut last = None;
    for t in 2..=COUNTED_TURNS + 1 {
        last = turn_with_id(&mut client, &session, t).await?.1;
    }
    extracted(&mut client, last.as_deref()).await;
    let after = tap.counts().await;
    let n = COUNTED_TURNS as f64;
    let mut by_kind = serde_json::Map::new();
    let mut total = 0u64;
    for (kind, count) in &after {
        let delta = count - before.get(kind).copied().unwrap_or(0);
        if delta > 0 {
            if kind != TAP_CAUSED {
                total += delta;
            }
            by_kind.insert(
                kind.clone(),
                json!((delta as f64 / n * 100.0).round() / 100.0),
            );
        }
    }
    by_kind.insert(
        "total".into(),
        json!((total as f64 / n * 100.0).round() / 100.0),
    );
    Ok(Value::Object(by_kind))
}

/// Wait (at most [`TURN_TIMEOUT`]) until the turn `turn_id`'s memories are extracted: its
/// `memory.written` (or its extraction's error) arrives.
async fn extracted(client: &mut SessionClient, turn_id: Option<&str>) {
    let Some(turn_id) = turn_id else {
        return;
    };
    let deadline = tokio::time::Instant::now() + TURN_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match client.next_event(left).await {
            Ok(Some(TurnEvent::MemoryWritten { turn_id: done, .. })) if done == turn_id => return,
            Ok(Some(TurnEvent::Error {
                turn_id: Some(done),
                ..
            })) if done == turn_id => return,
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => {
                tracing::warn!(
                    turn_id,
                    "no memory.written for the counted pass's turn; counts may be short"
                );
                return;
            }
        }
    }
}

async fn single(engine: &Engine, run_id: &str, show: bool) -> Result<Value, BenchError> {
    const N: u64 = 2000;
    let session = format!("w1s-{run_id}");
    let mut client = open(engine, &session).await?;
    tracing::info!("w1_single");
    let bar = progress(N, "w1_single", show);
    let mut stats = Stats::default();
    let start = Snapshot::take(engine);
    for t in 1..=N {
        stats.push(turn(&mut client, &session, t).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(per_turn_row("w1_single", &stats, start, engine, N))
}

const SESSIONS: usize = 200;
const TURNS: u64 = 10;

async fn multi(
    engine: &Engine,
    run_id: &str,
    local_sessions: bool,
    show: bool,
) -> Result<Value, BenchError> {
    let names: Vec<String> = (0..SESSIONS).map(|i| format!("w1m-{run_id}-{i}")).collect();
    let mut clients = Vec::with_capacity(SESSIONS);
    for n in &names {
        clients.push(open(engine, n).await?);
    }
    tracing::info!("w1_multi");
    let bar = progress(SESSIONS as u64 * TURNS, "w1_multi", show);
    let mut stats = Stats::default();
    let start = Snapshot::take(engine);
    for t in 1..=TURNS {
        for (client, name) in clients.iter_mut().zip(&names) {
            stats.push(turn(client, name, t).await?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let r = per_turn_row("w1_multi", &stats, start, engine, SESSIONS as u64 * TURNS);
    if local_sessions {
        check_isolation(engine, &names).await?;
    }
    Ok(r)
}

async fn concurrent(
    engine: &Engine,
    run_id: &str,
    local_sessions: bool,
    show: bool,
) -> Result<Value, BenchError> {
    let names: Vec<String> = (0..SESSIONS).map(|i| format!("w1c-{run_id}-{i}")).collect();
    tracing::info!("w1_concurrent");
    let bar = progress(SESSIONS as u64 * TURNS, "w1_concurrent", show);
    let start = Snapshot::take(engine);
    let mut tasks = Vec::with_capacity(SESSIONS);
    for name in names.clone() {
        let mut client = open(engine, &name).await?;
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            let mut stats = Stats::default();
            for t in 1..=TURNS {
                stats.push(turn(&mut client, &name, t).await?);
                bar.inc(1);
            }
            Ok::<_, BenchError>(stats)
        }));
    }
    let mut all = Stats::default();
    for task in tasks {
        let stats = task.await.map_err(|e| BenchError::Setup(e.to_string()))??;
        for s in stats.samples() {
            all.push(Duration::from_secs_f64(s / 1e6));
        }
    }
    bar.finish_and_clear();
    let r = per_turn_row(
        "w1_concurrent",
        &all,
        start,
        engine,
        SESSIONS as u64 * TURNS,
    );
    if local_sessions {
        check_isolation(engine, &names).await?;
    }
    Ok(r)
}

/// Every session holds exactly its own turns: 4 messages per turn, user texts 1..=TURNS in
/// order, nothing from another session.
async fn check_isolation(engine: &Engine, names: &[String]) -> Result<(), BenchError> {
    let db = engine
        .db
        .clone()
        .ok_or_else(|| BenchError::Isolation("no local store to check".into()))?;
    let store = SessionStore::open(&db).map_err(|e| BenchError::Isolation(e.to_string()))?;
    for name in names {
        let messages = store
            .messages(AGENT, name)
            .map_err(|e| BenchError::Isolation(e.to_string()))?;
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m.message.role == crate::llm::Role::User)
            .map(|m| m.message.content.as_str())
            .collect();
        let expected: Vec<String> = (1..=TURNS)
            .map(|t| format!("turn {t}: add {t} and {}", 1000 + t))
            .collect();
        if messages.len() != 4 * TURNS as usize || users != expected {
            return Err(BenchError::Isolation(format!(
                "session {name} holds {} messages ({} user messages); expected {} and its own {TURNS} turns",
                messages.len(),
                users.len(),
                4 * TURNS
            )));
        }
    }
    Ok(())
}
