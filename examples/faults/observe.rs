//! What the outside world was told: every event on `hermes.out.>`, folded per turn — turn
//! starts (turn id ↔ message id), answers with their envelope ids, errors, confirmation
//! requests, jobs waited on and memories written.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use hermes::bus::SharedBus;
use serde_json::Value;

/// Everything seen, keyed by turn id unless said otherwise.
#[derive(Default)]
pub struct Seen {
    /// turn id → message id (from `turn.started`).
    pub message_of: HashMap<String, String>,
    /// turn id → (envelope id, text) of each answer event (a copy re-sent with the same id
    /// is kept once).
    pub answers: HashMap<String, Vec<(String, String)>>,
    /// Answer copies re-sent with an id already seen (not a duplicate: a client dedupes by id).
    pub resent: usize,
    /// turn id → codes of the error events that ended it.
    pub errors: HashMap<String, Vec<String>>,
    /// turn id → codes of memory extraction errors (told after the answer).
    pub memory_errors: HashMap<String, Vec<String>>,
    /// turn ids that asked for a confirmation.
    pub confirmations: HashSet<String>,
    /// turn ids waiting on a job.
    pub jobs_waiting: HashSet<String>,
    /// turn id → memory keys reported written.
    pub memories: HashMap<String, Vec<String>>,
    /// Session → turn ids whose answer text names no known turn (matched by tag later).
    pub answers_by_tag: HashMap<String, Vec<String>>,
}

#[derive(Clone, Default)]
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
}

impl Observer {
    /// Subscribe before any load starts.
    pub async fn start(bus: &SharedBus) -> anyhow::Result<Self> {
        let observer = Self::default();
        let mut out = bus.subscribe("hermes.out.>").await?;
        let seen = observer.seen.clone();
        tokio::spawn(async move {
            while let Some(message) = out.next().await {
                if let Ok(envelope) = serde_json::from_slice::<Value>(&message.payload) {
                    let id = envelope["id"].as_str().unwrap_or_default();
                    // One event (`turn.event`), or several that left together (`turn.events`).
                    match envelope["body"]["events"].as_array() {
                        Some(events) => {
                            for body in events {
                                fold(&mut lock(&seen), id, body);
                            }
                        }
                        None => fold(&mut lock(&seen), id, &envelope["body"]),
                    }
                }
            }
        });
        bus.flush().await?;
        Ok(observer)
    }

    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        lock(&self.seen)
    }
}

fn lock(seen: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

/// One event `body` of the envelope `id` (the answer's envelope id is the answer's, see
/// `hermes::bus::events::answer_event_id`).
fn fold(seen: &mut Seen, id: &str, body: &Value) {
    let turn = body["turn_id"].as_str().unwrap_or_default().to_string();
    match body["type"].as_str().unwrap_or_default() {
        "turn.started" => {
            let message = body["message_id"].as_str().unwrap_or_default();
            seen.message_of.insert(turn, message.to_string());
        }
        "answer" => {
            let id = id.to_string();
            let text = body["text"].as_str().unwrap_or_default().to_string();
            if let Some(tag) = crate::model::find_tag(&format!("turn {}", answer_tag(&text))) {
                seen.answers_by_tag
                    .entry(tag)
                    .or_default()
                    .push(turn.clone());
            }
            let answers = seen.answers.entry(turn).or_default();
            if answers.iter().any(|(seen_id, _)| *seen_id == id) {
                seen.resent += 1;
            } else {
                answers.push((id, text));
            }
        }
        "error" if !turn.is_empty() => {
            let code = body["code"].as_str().unwrap_or_default().to_string();
            if code.starts_with("memory_") {
                seen.memory_errors.entry(turn).or_default().push(code);
            } else {
                seen.errors.entry(turn).or_default().push(code);
            }
        }
        "confirmation.required" => {
            seen.confirmations.insert(turn);
        }
        "job.waiting" => {
            seen.jobs_waiting.insert(turn);
        }
        "memory.written" => {
            let keys = body["changes"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|c| c["key"].as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            seen.memories.entry(turn).or_default().extend(keys);
        }
        _ => {}
    }
}

/// `<tag>:` from `The answer to <tag> is …` (the model's answers name their turn).
fn answer_tag(text: &str) -> String {
    text.strip_prefix("The answer to ")
        .and_then(|rest| rest.split_once(" is "))
        .map(|(tag, _)| format!("{tag}:"))
        .unwrap_or_default()
}
