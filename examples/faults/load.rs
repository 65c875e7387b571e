//! The background load of a cell: `sessions` sessions × `turns` turns, each session's turns
//! one after the other, the kinds rotating (read, MCP write, async job, confirmed write) and
//! offset per session so every kind is in flight at any moment.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::deploy::Deployment;
use crate::drive::{drive, Driven, Kind, Turn};

/// Longest wait for one turn's end.
pub const TURN_DEADLINE: Duration = Duration::from_secs(150);

type Results = Arc<Mutex<Vec<(Turn, Driven)>>>;

pub struct Load {
    results: Results,
    total: usize,
    pub sessions: Vec<String>,
}

impl Load {
    pub fn start(deployment: &Deployment, sessions: usize, turns: u32) -> anyhow::Result<Self> {
        let results: Results = Arc::default();
        let names: Vec<String> = (0..sessions).map(|i| format!("s{i}")).collect();
        for (i, session) in names.iter().enumerate() {
            let plan: Vec<Turn> = (0..turns)
                .map(|t| Turn::new(session, t, Kind::of_turn(t + i as u32)))
                .collect::<anyhow::Result<_>>()?;
            let (bus, observer, results) = (
                deployment.bus.clone(),
                deployment.observer.clone(),
                results.clone(),
            );
            deployment.runtime().spawn(async move {
                for turn in plan {
                    let deadline = Instant::now() + TURN_DEADLINE;
                    let driven = drive(&bus, &observer, &turn, deadline, None).await;
                    lock(&results).push((turn, driven));
                }
            });
        }
        Ok(Self {
            results,
            total: sessions * turns as usize,
            sessions: names,
        })
    }

    /// Turns finished (ended or given up).
    pub fn finished(&self) -> usize {
        lock(&self.results).len()
    }

    pub fn done(&self) -> bool {
        self.finished() >= self.total
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// Sessions with at least one finished turn (they exist, with their user).
    pub fn started_sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> = lock(&self.results)
            .iter()
            .map(|(t, _)| t.session.clone())
            .collect();
        sessions.sort();
        sessions.dedup();
        sessions
    }

    pub fn results(&self) -> Vec<(Turn, Driven)> {
        lock(&self.results).clone()
    }
}

fn lock(results: &Results) -> std::sync::MutexGuard<'_, Vec<(Turn, Driven)>> {
    results.lock().unwrap_or_else(|p| p.into_inner())
}
