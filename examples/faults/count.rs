//! Counting a cell: what each accepted turn was owed (one answer or one error, recorded in
//! its session's replicated log, and its memory) against what the outside world was told
//! and what the ledger and the memory service hold afterwards.
//!
//! - **lost**: a turn owed an outcome that got none while its log says it ended (or does
//!   not hold its message); an answer whose text the log does not hold; an answered turn's
//!   memory missing with no extraction error told.
//! - **duplicated**: a turn answered twice (two answer ids, or an answer and an error); its
//!   message stored twice; a ledger entry executed twice; a memory written twice (a second
//!   version of its key, or two records with it).
//! - **stuck**: a turn owed an outcome that got none while its log says it is still running
//!   or waiting.

use std::collections::HashMap;
use std::time::Duration;

use hermes::bus::rpc;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::memory::MemoryListRequest;
use hermes::store::replica::LogRecord;
use hermes::store::tasks::TurnPhase;

use crate::deploy::Deployment;
use crate::drive::{Driven, Turn, AGENT};
use crate::model::memory_key;

#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub lost: usize,
    pub duplicated: usize,
    pub stuck: usize,
    /// Turns the deployment took on (accepted, or found in their session's log).
    pub owed: usize,
    pub answered: usize,
    /// Turns that ended with an error the user was told (model down, outcome unknown…).
    pub errors_told: usize,
    /// Turns refused at once with an error reply, or never acknowledged (not owed).
    pub refused: usize,
    pub unsent: usize,
    /// Answer copies re-sent with the same id after a crash (a client dedupes them).
    pub answers_resent: usize,
    pub memories: usize,
    /// Codes of the errors told, with how many turns got each.
    pub error_codes: std::collections::BTreeMap<String, usize>,
    pub notes: Vec<String>,
}

/// What one session's log says: message id → (turn id, times stored), turn id → last phase,
/// and the assistant texts stored per turn.
#[derive(Default)]
struct SessionLog {
    messages: HashMap<String, (String, usize)>,
    phases: HashMap<String, TurnPhase>,
    texts: HashMap<String, Vec<String>>,
}

async fn read_log(deployment: &Deployment, session: &str) -> anyhow::Result<SessionLog> {
    let cluster = deployment
        .bus
        .cluster()
        .ok_or_else(|| anyhow::anyhow!("the harness's bus has no cluster view"))?;
    let records = cluster.session_log().read_after(AGENT, session, 0).await?;
    let mut log = SessionLog::default();
    let mut seqs: HashMap<u64, String> = HashMap::new();
    for (_, bytes) in records {
        let record: LogRecord = serde_json::from_slice(&bytes)?;
        for m in &record.messages {
            if m.message.role == hermes::llm::Role::User {
                let first = seqs.insert(m.seq, m.id.clone()).is_none();
                let entry = log
                    .messages
                    .entry(m.id.clone())
                    .or_insert_with(|| (m.turn_id.clone(), 0));
                if first {
                    entry.1 += 1;
                }
            } else if m.message.role == hermes::llm::Role::Assistant {
                log.texts
                    .entry(m.turn_id.clone())
                    .or_default()
                    .push(m.message.content.clone());
            }
        }
        let turns = record.task.turn.iter().chain(record.task.parked.iter());
        for turn in turns {
            log.phases.insert(turn.turn_id.clone(), turn.phase);
        }
    }
    Ok(log)
}

/// Memory key → (records with it, highest version) for `user`.
async fn memories(
    deployment: &Deployment,
    user: &str,
) -> anyhow::Result<HashMap<String, (usize, u32)>> {
    let mut keys: HashMap<String, (usize, u32)> = HashMap::new();
    let mut offset = 0;
    loop {
        let request = MemoryListRequest {
            user: user.to_string(),
            offset,
            limit: Some(200),
            ..MemoryListRequest::default()
        };
        let reply = rpc::request(
            deployment.bus.as_ref(),
            Envelope::request(request),
            Duration::from_secs(10),
        )
        .await?;
        for record in reply.body.records {
            let entry = keys.entry(record.key).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(record.version);
        }
        match reply.body.next_offset {
            Some(next) => offset = next,
            None => return Ok(keys),
        }
    }
}

/// Count the cell's turns.
pub async fn count(deployment: &Deployment, turns: &[(Turn, Driven)]) -> anyhow::Result<Counts> {
    let mut counts = Counts {
        answers_resent: deployment.observer.seen().resent,
        ..Counts::default()
    };
    let mut logs: HashMap<String, SessionLog> = HashMap::new();
    let mut memory_lists: HashMap<String, HashMap<String, (usize, u32)>> = HashMap::new();
    for (turn, _) in turns {
        if !logs.contains_key(&turn.session) {
            logs.insert(
                turn.session.clone(),
                read_log(deployment, &turn.session).await?,
            );
        }
        if !memory_lists.contains_key(&turn.user) {
            let listed = memories(deployment, &turn.user).await?;
            memory_lists.insert(turn.user.clone(), listed);
        }
    }
    let executions = deployment.ledger.executions();
    let seen = deployment.observer.seen();
    for (turn, driven) in turns {
        let log = &logs[&turn.session];
        let stored = log.messages.get(&turn.message_id);
        let owed = driven.accepted || stored.is_some();
        if !owed {
            if driven.refused.is_some() {
                counts.refused += 1;
            } else {
                counts.unsent += 1;
            }
            continue;
        }
        counts.owed += 1;
        let tag = &turn.tag;
        let turn_id = stored
            .map(|(id, _)| id.clone())
            .or_else(|| driven.turn_id.clone())
            .or_else(|| {
                seen.answers_by_tag
                    .get(tag)
                    .and_then(|t| t.first().cloned())
            });
        let Some(turn_id) = turn_id else {
            counts.lost += 1;
            counts
                .notes
                .push(format!("{tag}: accepted, never stored, never answered"));
            continue;
        };
        if let Some((_, times)) = stored {
            if *times > 1 {
                counts.duplicated += 1;
                counts
                    .notes
                    .push(format!("{tag}: message stored {times} times"));
            }
        }
        let answers = seen.answers.get(&turn_id).cloned().unwrap_or_default();
        let errors = seen.errors.get(&turn_id).cloned().unwrap_or_default();
        let phase = log.phases.get(&turn_id).copied();
        match (answers.len(), errors.len()) {
            (0, 0) => match phase {
                Some(p) if !p.is_final() => {
                    counts.stuck += 1;
                    counts.notes.push(format!("{tag}: stuck in {p:?}"));
                }
                _ => {
                    counts.lost += 1;
                    counts
                        .notes
                        .push(format!("{tag}: never answered (log phase {phase:?})"));
                }
            },
            (0, _) => {
                counts.errors_told += 1;
                *counts.error_codes.entry(errors[0].clone()).or_default() += 1;
                if errors.len() > 1 {
                    counts.duplicated += 1;
                    counts.notes.push(format!("{tag}: errors {errors:?}"));
                }
            }
            (n, e) => {
                counts.answered += 1;
                if n > 1 || e > 0 {
                    counts.duplicated += 1;
                    counts
                        .notes
                        .push(format!("{tag}: {n} answers and errors {errors:?}"));
                }
                let recorded = log.texts.get(&turn_id).cloned().unwrap_or_default();
                let unrecorded = answers
                    .iter()
                    .filter(|(_, text)| !recorded.contains(text))
                    .count();
                if unrecorded > 0 {
                    counts.lost += 1;
                    counts
                        .notes
                        .push(format!("{tag}: answered with nothing recorded"));
                }
                count_memory(&mut counts, &seen, &memory_lists[&turn.user], tag, &turn_id);
            }
        }
        if let Some(entry) = turn.entry() {
            let executed = executions.get(entry).copied().unwrap_or(0);
            if executed > 1 {
                counts.duplicated += 1;
                counts
                    .notes
                    .push(format!("{tag}: write executed {executed} times"));
            }
        }
    }
    Ok(counts)
}

fn count_memory(
    counts: &mut Counts,
    seen: &crate::observe::Seen,
    listed: &HashMap<String, (usize, u32)>,
    tag: &str,
    turn_id: &str,
) {
    let key = memory_key(tag);
    match listed.get(&key) {
        Some((records, version)) => {
            counts.memories += 1;
            if *records > 1 || *version > 1 {
                counts.duplicated += 1;
                counts.notes.push(format!(
                    "{tag}: memory {key} written twice ({records} records, version {version})"
                ));
            }
        }
        None if seen.memory_errors.contains_key(turn_id) => {
            counts.notes.push(format!(
                "{tag}: memory not written; the user was told ({:?})",
                seen.memory_errors[turn_id]
            ));
        }
        None => {
            counts.lost += 1;
            counts.notes.push(format!("{tag}: memory {key} lost"));
        }
    }
}
