//! Building the model's context for one planning step, and folding older turns into the
//! summary when enough have piled up.

use std::borrow::Cow;
use std::sync::Arc;

use super::{TurnEnv, TurnError, TurnState};
use crate::config::AgentConfig;
use crate::context::budget::{self, ContextParts, Counted};
use crate::context::calibrate;
use crate::context::compaction::{self, ToolResultShrinker};
use crate::context::tokens::MESSAGE_OVERHEAD;
use crate::llm::ChatMessage;
use crate::protocol::{RecallHit, SummariseRequest};
use crate::store::sessions::StoredMessage;
use crate::store::tasks::TaskState;

/// The parts of the context that stay the same for every step of a turn.
pub(super) struct Fixed {
    system: Arc<ChatMessage>,
    system_tokens: u32,
    tools_tokens: u32,
    memory: Option<Arc<ChatMessage>>,
    memory_tokens: u32,
    budget: usize,
}

impl Fixed {
    pub(super) fn new(
        env: &TurnEnv,
        agent: &AgentConfig,
        hits: &[RecallHit],
        tools_tokens: u32,
    ) -> Self {
        let system = Arc::new(ChatMessage::system(agent.system_prompt.clone()));
        let memory = memory_block(hits).map(Arc::new);
        let window = agent.window(&env.config.models);
        Self {
            system_tokens: env.tokens.count_fixed(&system.content) + MESSAGE_OVERHEAD,
            tools_tokens,
            memory_tokens: memory.as_ref().map_or(0, |m| env.tokens.count_message(m)),
            system,
            memory,
            budget: budget::budget(window.context_window, window.reply_reserve),
        }
    }
}

/// The recalled memories as background the model may ignore (the seeds' warning: five
/// "relevant" memories can pull the model off course).
fn memory_block(hits: &[RecallHit]) -> Option<ChatMessage> {
    if hits.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Background memory about this user, from earlier conversations. It may be outdated or \
         unrelated to the current request: use only what clearly applies, ignore the rest.\n",
    );
    for h in hits {
        text.push_str(&format!(
            "- [{}] {} (recorded {})\n",
            h.record.key,
            h.record.content,
            h.record.updated_at.format("%Y-%m-%d")
        ));
    }
    Some(ChatMessage::system(text))
}

pub(super) fn goal_message(goal: &str) -> ChatMessage {
    ChatMessage::system(format!(
        "Task goal (pinned; keep working towards it): {goal}"
    ))
}

fn summary_message(summary: &str) -> ChatMessage {
    ChatMessage::system(format!("Summary of the earlier conversation: {summary}"))
}

/// The messages for one planning request, within the budget, and the tokens they count
/// (tool definitions included). For a model whose tokenizer Hermes does not know, the budget
/// is scaled by what the session learnt from the provider's usage.
pub(super) fn assemble(
    state: &TurnState<'_>,
    fixed: &Fixed,
    current: &[StoredMessage],
) -> Result<(Vec<Arc<ChatMessage>>, usize), TurnError> {
    let task = &*state.task;
    let goal = task.goal.as_deref().map(|g| Arc::new(goal_message(g)));
    let summary = (!task.summary.is_empty()).then(|| Arc::new(summary_message(&task.summary)));
    let facts = (!task.key_facts.is_empty()).then(|| {
        ChatMessage::system(format!(
            "Key facts from tool results in this session: {}",
            task.key_facts.join(", ")
        ))
    });
    let start = usize::try_from(task.summary_upto)
        .unwrap_or(usize::MAX)
        .min(state.log.len());
    let end = task
        .turn
        .as_ref()
        .map_or(state.log.len(), |t| super::turn_start(state.log, t));
    let history = finished_turns(&state.log[start..end.max(start)], task);
    let facts = match (facts, running_note(task)) {
        (Some(f), Some(note)) => Some(ChatMessage::system(format!("{}\n{note}", f.content))),
        (f, note) => f.or_else(|| note.map(ChatMessage::system)),
    }
    .map(Arc::new);
    let facts_tokens = facts
        .as_ref()
        .map_or(0, |m| state.env.tokens.count_message(m));
    let history: &[StoredMessage] = &history;
    let parts = ContextParts {
        system: Counted {
            message: &fixed.system,
            tokens: fixed.system_tokens,
        },
        tools_tokens: fixed.tools_tokens,
        goal: goal.as_ref().map(|m| Counted {
            message: m,
            tokens: task.goal_tokens,
        }),
        memory: fixed.memory.as_ref().map(|m| Counted {
            message: m,
            tokens: fixed.memory_tokens,
        }),
        key_facts: facts.as_ref().map(|m| Counted {
            message: m,
            tokens: facts_tokens,
        }),
        summary: summary.as_ref().map(|m| Counted {
            message: m,
            tokens: task.summary_tokens,
        }),
        history,
        current,
    };
    let shrinker = ToolResultShrinker {
        tokens: &state.env.tokens,
    };
    let scale = (!state.env.tokens.is_exact())
        .then_some(task.token_scale)
        .flatten();
    let limit = calibrate::scaled_budget(fixed.budget, scale);
    let assembled = budget::assemble(&parts, limit, &shrinker)?;
    if assembled.dropped > 0 || assembled.shrunk > 0 {
        tracing::debug!(
            session = %state.meta.session,
            dropped = assembled.dropped,
            shrunk = assembled.shrunk,
            tokens = assembled.tokens,
            "context trimmed to the budget"
        );
    }
    Ok((assembled.messages, assembled.tokens))
}

/// The history as the model may see it: without the messages of turns that are not over
/// (a turn waiting for its work has a tool call without its result), and each turn's
/// messages together even where a newer turn talked while it waited.
fn finished_turns<'a>(history: &'a [StoredMessage], task: &TaskState) -> Cow<'a, [StoredMessage]> {
    if !task.interleaved {
        // Only the current turn can be open, and its messages come after the history.
        return Cow::Borrowed(history);
    }
    let open = task.open_turn_ids();
    let kept: Vec<&StoredMessage> = history
        .iter()
        .filter(|m| !open.contains(&m.turn_id.as_str()))
        .collect();
    // Turns in the order they started; interleaved when one comes back after another.
    let mut order: Vec<&str> = Vec::new();
    let mut interleaved = false;
    for m in &kept {
        if order.last() != Some(&m.turn_id.as_str()) {
            interleaved |= order.contains(&m.turn_id.as_str());
            if !interleaved || !order.contains(&m.turn_id.as_str()) {
                order.push(&m.turn_id);
            }
        }
    }
    if !interleaved {
        return Cow::Owned(kept.into_iter().cloned().collect());
    }
    Cow::Owned(
        order
            .iter()
            .flat_map(|id| kept.iter().filter(move |m| m.turn_id == *id))
            .map(|m| (*m).clone())
            .collect(),
    )
}

/// What earlier turns of the session still wait for, so a turn that talks meanwhile can say
/// how far along they are.
fn running_note(task: &TaskState) -> Option<String> {
    let mut lines = Vec::new();
    for turn in &task.parked {
        for job in turn.unfinished_jobs() {
            let since = chrono::Utc::now()
                .signed_duration_since(job.submitted_at)
                .num_seconds()
                .max(0);
            lines.push(match &job.child {
                Some(child) => format!(
                    "- agent `{}` is working on \"{}\" (for {since} s)",
                    child.agent,
                    child.task.chars().take(120).collect::<String>()
                ),
                None => format!(
                    "- job {} of `{}` is running (for {since} s; `job_status` with this job_id \
                     tells its progress)",
                    job.job_id, job.tool
                ),
            });
        }
    }
    (!lines.is_empty()).then(|| {
        format!(
            "Work still running for earlier requests of this conversation; its results come \
             back by themselves, do not start it again:\n{}",
            lines.join("\n")
        )
    })
}

/// Fold older turns into the summary once enough have piled up behind the recent ones. A
/// summariser failure is logged and the turns stay verbatim (the budget still holds).
///
/// The new summary is not written on its own: it rides the turn's next save (every save
/// carries the whole task state), as a mid-turn step does. On the replicated log that is one
/// append (and its delivery to the extractors) fewer every few turns, and it lets a turn's
/// message wait for the answer's write ([`super::first_write`]) rather than go out with the
/// summary. A crash before that save loses only the summary, which is made again.
pub(super) async fn compact(state: &mut TurnState<'_>, agent: &AgentConfig) {
    let start = usize::try_from(state.task.summary_upto)
        .unwrap_or(usize::MAX)
        .min(state.log.len());
    // Only what lies before every open turn: a waiting turn's messages are not history yet.
    let end = if state.task.interleaved {
        let open = state.task.open_turn_ids();
        state
            .log
            .iter()
            .position(|m| open.contains(&m.turn_id.as_str()))
            .unwrap_or(state.log.len())
    } else {
        state
            .task
            .turn
            .as_ref()
            .map_or(state.log.len(), |t| super::turn_start(state.log, t))
    }
    .max(start);
    let history = &state.log[start..end];
    let Some(split) = compaction::fold_split(history, agent.recent_turns) else {
        return;
    };
    let to_fold = &history[..split];
    let request = SummariseRequest {
        previous: state.task.summary.clone(),
        messages: compaction::for_summary(to_fold),
        goal: state.task.goal.clone(),
    };
    let reply = state
        .env
        .ports
        .summarise(state.emitter.scope(), request)
        .await;
    match reply {
        Ok(summary) => {
            let upto = to_fold
                .last()
                .map_or(state.task.summary_upto, |m| m.seq + 1);
            state.task.summary_tokens = state.env.tokens.count_message(&summary_message(&summary));
            state.task.summary = summary;
            state.task.summary_upto = upto;
        }
        Err(e) => tracing::warn!(error = %e, "summariser failed; older turns stay verbatim"),
    }
}
