//! What a turn's run tells the metrics ([`crate::telemetry::metrics`]) when it ends: how it
//! ended, how long the turn took, its tool rounds and its tokens — read from the turn's own
//! stored messages, so a turn resumed after a wait or a crash is measured whole.

use chrono::Utc;

use super::TurnError;
use crate::llm::Role;
use crate::store::sessions::StoredMessage;
use crate::store::tasks::{TaskState, TurnPhase};
use crate::telemetry::metrics::{self, TurnFacts, TurnOutcome};

/// How the run of turn `turn_id` ended; `None` when it was handed back to the inbox (it runs
/// again and is counted then).
pub(super) fn outcome(
    task: &TaskState,
    turn_id: &str,
    error: Option<&TurnError>,
) -> Option<TurnOutcome> {
    match error {
        Some(e) if e.hands_back() => None,
        Some(_) => Some(TurnOutcome::Failed),
        None => Some(match task.turn.as_ref().filter(|t| t.turn_id == turn_id) {
            Some(t) if t.phase == TurnPhase::Answered => TurnOutcome::Answered,
            Some(t) if t.phase == TurnPhase::Failed => TurnOutcome::Failed,
            _ => TurnOutcome::Waiting,
        }),
    }
}

/// Tool rounds and tokens of one turn's messages: what the provider reported, or for a reply
/// without a report our own count of the reply (its prompt then counts nothing).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub tool_rounds: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
}

pub(super) fn tally(current: &[StoredMessage]) -> Tally {
    let mut tally = Tally::default();
    for m in current {
        if m.message.role == Role::Assistant && !m.message.tool_calls.is_empty() {
            tally.tool_rounds += 1;
        }
        match m.usage {
            Some(usage) => {
                tally.prompt_tokens += u64::from(usage.prompt_tokens);
                tally.completion_tokens += u64::from(usage.completion_tokens);
                tally.cached_tokens += u64::from(usage.cached_tokens);
                tally.reasoning_tokens += u64::from(usage.reasoning_tokens);
            }
            // A provider that reports no usage (the replay model): the reply's own count.
            None if m.message.role == Role::Assistant => {
                tally.completion_tokens += u64::from(m.tokens);
            }
            None => {}
        }
    }
    tally
}

/// Record the end of a run of a turn for `agent`; `current` is the turn's messages, its user
/// message first.
pub(super) fn record(agent: &str, outcome: TurnOutcome, current: &[StoredMessage]) {
    let tally = if outcome.is_final() {
        tally(current)
    } else {
        Tally::default()
    };
    let duration = current
        .first()
        .and_then(|m| (Utc::now() - m.ts).to_std().ok())
        .unwrap_or_default();
    metrics::turn_finished(&TurnFacts {
        agent,
        outcome,
        duration,
        tool_rounds: tally.tool_rounds,
        prompt_tokens: tally.prompt_tokens,
        completion_tokens: tally.completion_tokens,
        cached_tokens: tally.cached_tokens,
        reasoning_tokens: tally.reasoning_tokens,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatMessage, ToolCall, Usage};
    use crate::store::tasks::TurnRecord;

    fn stored(message: ChatMessage, usage: Option<Usage>) -> StoredMessage {
        StoredMessage {
            seq: 0,
            id: "m".into(),
            turn_id: "t1".into(),
            ts: Utc::now(),
            tokens: 1,
            usage,
            message: message.into(),
            tool_status: None,
        }
    }

    fn task_in(phase: TurnPhase) -> TaskState {
        let mut record = TurnRecord::received("t1".into(), "m1".into(), "tr".into());
        record.phase = phase;
        TaskState {
            turn: Some(record),
            ..TaskState::default()
        }
    }

    #[test]
    fn the_outcome_follows_the_turns_phase_and_error() {
        let answered = task_in(TurnPhase::Answered);
        assert_eq!(outcome(&answered, "t1", None), Some(TurnOutcome::Answered));
        for phase in [
            TurnPhase::WaitingJob,
            TurnPhase::WaitingUser,
            TurnPhase::WaitingAgents,
        ] {
            assert_eq!(
                outcome(&task_in(phase), "t1", None),
                Some(TurnOutcome::Waiting)
            );
        }
        // Parked while another turn talks: still waiting.
        assert_eq!(outcome(&answered, "t0", None), Some(TurnOutcome::Waiting));
        let failed = TurnError::StepLimit(3);
        assert_eq!(
            outcome(&answered, "t1", Some(&failed)),
            Some(TurnOutcome::Failed)
        );
    }

    #[test]
    fn rounds_count_steps_that_called_tools_and_tokens_add_up() {
        let call = ToolCall {
            id: "c1".into(),
            name: "lookup".into(),
            arguments: serde_json::json!({}),
        };
        let usage = |p, c| Some(Usage::new(p, c));
        let messages = vec![
            stored(ChatMessage::user("hi"), None),
            stored(
                ChatMessage::assistant_calls(String::new(), vec![call]),
                usage(100, 10),
            ),
            stored(ChatMessage::tool("c1", "lookup", "{}"), None),
            stored(
                ChatMessage::assistant("done"),
                Some(Usage {
                    cached_tokens: 90,
                    reasoning_tokens: 3,
                    ..Usage::new(150, 5)
                }),
            ),
            // No usage reported: the reply's own count (1 in `stored`).
            stored(ChatMessage::assistant("more"), None),
        ];
        assert_eq!(
            tally(&messages),
            Tally {
                tool_rounds: 1,
                prompt_tokens: 250,
                completion_tokens: 16,
                cached_tokens: 90,
                reasoning_tokens: 3,
            }
        );
    }
}
