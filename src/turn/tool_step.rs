//! One planning step's tool calls: which run now, which wait for the user's confirmation or
//! an async job, and storing the results that are there, so a call whose result is stored
//! never runs again. (The step of `read` calls is stored with the turn's next commit point —
//! see `TurnState::deferred` — and a crash before it may run those reads again.)

use std::collections::HashSet;

use chrono::Utc;

use super::tool_calls::UserGrant;
use super::{delegation, handoff, questions, tool_calls, waiting, Awaited, TurnError, TurnState};
use crate::config::AgentConfig;
use crate::llm::{ChatMessage, Role, ToolCall};
use crate::protocol::{ToolCallResult, TurnEvent};
use crate::store::sessions::StoredMessage;
use crate::store::tasks::{AwaitedJob, ChildTask, Decision, PendingConfirmation, TurnPhase};
use crate::store::tool_result::StoredToolResult;
use crate::tools::definition::{ToolDefinition, ToolEffect};

/// Most identifiers kept in the key-facts region (oldest go first).
const MAX_KEY_FACTS: usize = 20;

/// What the turn does after a step's tool calls.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Every call has its result: plan again.
    Plan,
    /// A call waits for the user or a job; the turn stops here and is resumed by the
    /// confirmation or the job's completion.
    Wait,
}

/// The tool calls of the step in progress: the last assistant message's calls, when some of
/// them have no stored result yet.
pub(super) fn open_calls(current: &[StoredMessage]) -> Option<Vec<ToolCall>> {
    let at = current
        .iter()
        .rposition(|m| m.message.role == Role::Assistant)?;
    let calls = &current[at].message.tool_calls;
    let answered: HashSet<&str> = current[at + 1..]
        .iter()
        .filter_map(|m| m.message.tool_call_id.as_deref())
        .collect();
    calls
        .iter()
        .any(|c| !answered.contains(c.id.as_str()))
        .then(|| calls.clone())
}

/// Who runs a step's calls: the agent, and the tools it may call.
pub(super) struct Step<'a> {
    pub agent_name: &'a str,
    pub agent: &'a AgentConfig,
    pub tools: &'a [ToolDefinition],
}

/// Run, decline or wait for each call of `calls` that has no stored result.
pub(super) async fn run(
    state: &mut TurnState<'_>,
    step: &Step<'_>,
    calls: &[ToolCall],
    turn_id: &str,
) -> Result<Next, TurnError> {
    let tools = step.tools;
    // Only results after the step's own assistant message count: some servers (Ollama,
    // llama.cpp) number call ids per reply, so `call_0` of an earlier step is another call.
    let current = state.current();
    let since = current
        .iter()
        .rposition(|m| m.message.role == Role::Assistant)
        .map_or(0, |at| at + 1);
    let answered: HashSet<String> = current[since..]
        .iter()
        .filter_map(|m| m.message.tool_call_id.clone())
        .collect();
    let open: Vec<&ToolCall> = calls.iter().filter(|c| !answered.contains(&c.id)).collect();
    let plan = classify(state, step, &open);
    if !only_reads(tools, &plan) {
        state.flush_deferred().await?;
    }
    let mut ready = plan.ready;
    for call in &plan.handoffs {
        announce_call(state, call, turn_id).await;
        let result = handoff::run(state, step.agent_name, step.agent, call, turn_id).await;
        ready.push((call.clone(), result, true));
    }
    let mut started = Vec::new();
    for call in &plan.delegate {
        announce_call(state, call, turn_id).await;
        let record = state.record().clone();
        let config = &state.env.config;
        match delegation::prepare(config, step.agent_name, step.agent, &record, call) {
            Ok(job) => {
                state.record().jobs.push(job.clone());
                started.push(job);
            }
            Err(error) => ready.push((call.clone(), delegation::refused(call, error), true)),
        }
    }
    let mut submitted = Vec::new();
    for (call, result) in execute(state, tools, &plan.to_run, turn_id).await {
        match waiting::submitted_job(tools, &result) {
            Some(job_id) => {
                state.record().jobs.push(AwaitedJob {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    job_id: job_id.clone(),
                    submitted_at: Utc::now(),
                    result: None,
                    child: None,
                });
                submitted.push((call, job_id));
            }
            None => ready.push((call, result, false)),
        }
    }
    let fresh: Vec<&str> = started.iter().map(|j| j.job_id.as_str()).collect();
    ready.extend(poll_jobs(state, step, &open, &fresh).await);
    let (mut ready, questioned) = questions::take(state.record(), ready);
    // Results are stored in the order the model asked for them.
    ready.sort_by_key(|(call, _, _)| calls.iter().position(|c| c.id == call.id));
    let waits = waiting_phase(state);
    store(state, ready, waits.unwrap_or(TurnPhase::Planning), turn_id).await?;
    let Some(_) = waits else {
        return Ok(Next::Plan);
    };
    // The pause is on disk before anyone is told to confirm, that a job runs, or is given a
    // delegated task: a crash from here on resumes the wait, and sends a task again only if
    // its agent never stored it. A turn woken by one job's end that only took its result and
    // waits on tells nobody anything new: its write needs no flush of its own (a crash before
    // the next one finds the result again where the job left it, when the turn resumes).
    let news = !plan.to_run.is_empty()
        || !plan.delegate.is_empty()
        || !plan.handoffs.is_empty()
        || !plan.asked.is_empty()
        || !questioned.is_empty();
    if news || state.awaited == Awaited::AskAll {
        state.env.commit().await?;
    } else {
        state.env.store.flush_soon();
    }
    if !send_tasks(state, step, started, turn_id).await {
        // A child refused its task: its error result is stored; plan again if nothing else
        // is awaited.
        return Ok(Next::Plan);
    }
    for call in plan.asked {
        state
            .emitter
            .emit(TurnEvent::ConfirmationRequired {
                turn_id: turn_id.to_string(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                message: waiting::confirmation_message(&call),
                questions: Vec::new(),
            })
            .await;
    }
    for call in questioned {
        let input = state
            .record()
            .confirmation(&call.id)
            .and_then(|c| c.input.clone());
        if let Some(input) = input {
            let event = questions::event(turn_id, &call, &input);
            state.emitter.emit(event).await;
        }
    }
    for (call, job_id) in submitted {
        state
            .emitter
            .emit(TurnEvent::JobWaiting {
                turn_id: turn_id.to_string(),
                call_id: call.id,
                name: call.name,
                job_id,
            })
            .await;
    }
    Ok(Next::Wait)
}

/// Publish the `tool.call` event of a call the turn handles itself.
async fn announce_call(state: &TurnState<'_>, call: &ToolCall, turn_id: &str) {
    state
        .emitter
        .emit(TurnEvent::ToolCall {
            turn_id: turn_id.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await;
}

/// Give each new child its task, in parallel, and announce it; a child whose session refuses
/// gets its error result recorded. False when one was refused.
async fn send_tasks(
    state: &mut TurnState<'_>,
    step: &Step<'_>,
    started: Vec<AwaitedJob>,
    turn_id: &str,
) -> bool {
    if started.is_empty() {
        return true;
    }
    let record = state.record().clone();
    let sends = futures::future::join_all(started.iter().map(|job| {
        delegation::send(
            state.env,
            &state.emitter,
            state.meta,
            step.agent,
            &record,
            job,
        )
    }))
    .await;
    let mut all_sent = true;
    for (job, sent) in started.iter().zip(sends) {
        match sent {
            Ok(()) => {
                if let Some(event) = delegation::delegated_event(turn_id, job) {
                    state.emitter.emit(event).await;
                }
            }
            Err(e) => {
                all_sent = false;
                let agent = job.child.as_ref().map_or("", |c| c.agent.as_str());
                tracing::warn!(agent, error = %e, "delegated task refused");
                let error = crate::tools::ToolError::new(
                    crate::tools::ToolErrorCode::Unavailable,
                    format!("agent `{agent}` did not take the task: {e}"),
                )
                .with_hint("do the task yourself or tell the user it cannot be done now");
                let result = waiting::job_result(
                    job,
                    crate::tools::jobs::JobStatus::Failed,
                    None,
                    Some(error),
                );
                if let Some(j) = state
                    .record()
                    .jobs
                    .iter_mut()
                    .find(|j| j.job_id == job.job_id)
                {
                    j.result = Some(StoredToolResult::from(&result));
                }
            }
        }
    }
    all_sent
}

/// Calls sorted by what happens to them now.
struct Classified {
    /// Calls to execute, with what the user gave them (a confirmation, answers).
    to_run: Vec<(ToolCall, UserGrant)>,
    /// Results that exist without executing (declined calls, finished jobs), and whether
    /// they still need a `tool.result` event.
    ready: Vec<(ToolCall, ToolCallResult, bool)>,
    /// High-risk calls asked about for the first time.
    asked: Vec<ToolCall>,
    /// Tasks for other agents, to start.
    delegate: Vec<ToolCall>,
    /// The agent hands the conversation on.
    handoffs: Vec<ToolCall>,
}

/// Whether everything `plan` does now is a call of a tool declared `read`: nothing that may
/// act on the world (a call of any other or an unknown tool, a handoff, a delegation, a
/// confirmation).
fn only_reads(tools: &[ToolDefinition], plan: &Classified) -> bool {
    plan.handoffs.is_empty()
        && plan.delegate.is_empty()
        && plan.asked.is_empty()
        && plan.to_run.iter().all(|(call, _)| {
            tools
                .iter()
                .any(|t| t.name == call.name && t.effect == ToolEffect::Read)
        })
}

fn classify(state: &mut TurnState<'_>, step: &Step<'_>, open: &[&ToolCall]) -> Classified {
    let tools = step.tools;
    let mut out = Classified {
        to_run: Vec::new(),
        ready: Vec::new(),
        asked: Vec::new(),
        delegate: Vec::new(),
        handoffs: Vec::new(),
    };
    let record = state.record();
    for &call in open {
        if let Some(job) = record.job_of(&call.id) {
            if let Some(result) = &job.result {
                out.ready.push((call.clone(), result.into(), true));
            }
            continue;
        }
        if delegation::is_delegation(call) {
            out.delegate.push(call.clone());
            continue;
        }
        if handoff::is_handoff(step.agent, call) {
            out.handoffs.push(call.clone());
            continue;
        }
        let confirmed = waiting::needs_confirmation(tools, call);
        if let Some(pending) = record.confirmation(&call.id) {
            if let Some(input) = &pending.input {
                // The server's questions: once answered, the call runs again with the answers
                // (a high-risk call asks only after its confirmation let it run).
                if pending.decision.is_some() {
                    let input = Some(questions::answers(pending, input));
                    out.to_run
                        .push((call.clone(), UserGrant { confirmed, input }));
                }
                continue;
            }
        }
        if !confirmed {
            out.to_run.push((call.clone(), UserGrant::default()));
            continue;
        }
        match record.confirmation(&call.id).map(|c| c.decision) {
            None => {
                record.confirmations.push(PendingConfirmation {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    asked_at: Utc::now(),
                    decision: None,
                    decided_by: None,
                    input: None,
                    content: None,
                });
                out.asked.push(call.clone());
            }
            Some(None) => {}
            Some(Some(Decision::Approved)) => {
                let grant = UserGrant {
                    confirmed: true,
                    input: None,
                };
                out.to_run.push((call.clone(), grant));
            }
            Some(Some(Decision::Denied)) => {
                out.ready
                    .push((call.clone(), waiting::declined(call), true));
            }
        }
    }
    out
}

/// Execute calls; independent `read` calls run concurrently, the rest one after another.
async fn execute(
    state: &TurnState<'_>,
    tools: &[ToolDefinition],
    to_run: &[(ToolCall, UserGrant)],
    turn_id: &str,
) -> Vec<(ToolCall, ToolCallResult)> {
    let (env, emitter, meta) = (state.env, &state.emitter, &*state.meta);
    let calls: Vec<ToolCall> = to_run.iter().map(|(c, _)| c.clone()).collect();
    let results = if tool_calls::all_reads(tools, &calls) {
        futures::future::join_all(to_run.iter().map(|(call, grant)| {
            tool_calls::execute(env, emitter, tools, meta, turn_id, call, grant)
        }))
        .await
    } else {
        let mut results = Vec::with_capacity(to_run.len());
        for (call, grant) in to_run {
            results
                .push(tool_calls::execute(env, emitter, tools, meta, turn_id, call, grant).await);
        }
        results
    };
    calls.into_iter().zip(results).collect()
}

/// Ask about awaited jobs and delegated tasks of open calls whose completion has not arrived
/// (the event may have been missed while this session was not running): the executor for a
/// job, the child's session for a task — sending the task again if the child never stored
/// it, and cancelling it once its deadline passed. `fresh` tasks were just started. A turn
/// woken by a job's end it heard ([`Awaited::Heard`]) asks only about tasks past their
/// deadline.
async fn poll_jobs(
    state: &mut TurnState<'_>,
    step: &Step<'_>,
    open: &[&ToolCall],
    fresh: &[&str],
) -> Vec<(ToolCall, ToolCallResult, bool)> {
    let now = Utc::now();
    let ask_all = state.awaited == Awaited::AskAll;
    let unfinished: Vec<AwaitedJob> = state
        .record()
        .unfinished_jobs()
        .filter(|j| !fresh.contains(&j.job_id.as_str()))
        .filter(|j| ask_all || j.child.as_ref().is_some_and(|c| now >= c.deadline))
        .cloned()
        .collect();
    let turn_id = state.record().turn_id.clone();
    let mut out = Vec::new();
    for job in unfinished {
        let Some(call) = open.iter().find(|c| c.id == job.call_id) else {
            continue;
        };
        let result = match &job.child {
            Some(child) => poll_child(state, step, &job, child).await,
            None => {
                let poll = waiting::poll(state.env, &state.emitter, state.meta, &turn_id, &job);
                poll.await
            }
        };
        let Some(result) = result else {
            continue;
        };
        if let Some(j) = state
            .record()
            .jobs
            .iter_mut()
            .find(|j| j.job_id == job.job_id)
        {
            j.result = Some(StoredToolResult::from(&result));
        }
        out.push(((*call).clone(), result, true));
    }
    out
}

/// A delegated task's result, when its agent ended it or its deadline passed.
async fn poll_child(
    state: &mut TurnState<'_>,
    step: &Step<'_>,
    job: &AwaitedJob,
    child: &ChildTask,
) -> Option<ToolCallResult> {
    let overdue = Utc::now() >= child.deadline;
    match delegation::poll(state.env, job).await {
        delegation::ChildState::Ended(result) => Some(*result),
        _ if overdue => {
            let record = state.record().clone();
            let reason = format!("the parent turn stopped waiting for `{}`", child.agent);
            delegation::cancel_child(state.env, state.meta, &record, job, &reason).await;
            Some(delegation::timed_out(job, child))
        }
        delegation::ChildState::Working => None,
        delegation::ChildState::Missing => {
            let record = state.record().clone();
            let sent = delegation::send(
                state.env,
                &state.emitter,
                state.meta,
                step.agent,
                &record,
                job,
            );
            if let Err(e) = sent.await {
                tracing::warn!(agent = %child.agent, error = %e, "delegated task not sent again; trying at the next wake-up");
            }
            None
        }
    }
}

/// The phase the turn waits in, if anything is still missing.
fn waiting_phase(state: &mut TurnState<'_>) -> Option<TurnPhase> {
    let record = state.record();
    if record.undecided().next().is_some() {
        Some(TurnPhase::WaitingUser)
    } else if record.unfinished_children().next().is_some() {
        Some(TurnPhase::WaitingAgents)
    } else if record.unfinished_jobs().next().is_some() {
        Some(TurnPhase::WaitingJob)
    } else {
        None
    }
}

/// Store each result as a tool message; the last write also carries the turn's next phase.
async fn store(
    state: &mut TurnState<'_>,
    results: Vec<(ToolCall, ToolCallResult, bool)>,
    phase: TurnPhase,
    turn_id: &str,
) -> Result<(), TurnError> {
    let mut messages = Vec::with_capacity(results.len());
    for (call, result, announce) in results {
        if announce {
            state
                .emitter
                .emit(TurnEvent::ToolResult {
                    turn_id: turn_id.to_string(),
                    result: result.clone(),
                })
                .await;
        }
        crate::telemetry::metrics::tool_call(
            metric_tool_name(&result),
            result.status == crate::protocol::ToolStatus::Ok,
        );
        if delegation::is_delegation(&call) {
            // The child's tokens count in this task's budget.
            state.record().tokens_used += result.output["tokens"].as_u64().unwrap_or(0);
        }
        for fact in tool_calls::key_facts(&result) {
            if !state.task.key_facts.contains(&fact) {
                state.task.key_facts.push(fact);
            }
        }
        let excess = state.task.key_facts.len().saturating_sub(MAX_KEY_FACTS);
        state.task.key_facts.drain(..excess);
        // A job's result is in the conversation from this write on: its record keeps a stub.
        if let Some(job) = state.record().job_of_mut(&call.id) {
            job.result = job.result.as_ref().map(StoredToolResult::taken);
        }
        let content = tool_calls::content_for_model(&result);
        let message = ChatMessage::tool(call.id, call.name, content);
        messages.push((message, result.status));
    }
    state.set_phase(phase);
    if messages.is_empty() {
        state.save_task().await?;
    } else {
        state.persist_tool_results(messages).await?;
    }
    Ok(())
}

/// The `tool` label of a result: its tool's name, or `unknown` for a name the model made up
/// (so invented names cannot grow the metric without bound).
fn metric_tool_name(result: &ToolCallResult) -> &str {
    match &result.error {
        Some(e) if e.code == crate::tools::ToolErrorCode::UnknownTool => "unknown",
        _ => &result.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolStatus;
    use serde_json::json;

    fn stored(seq: u64, message: ChatMessage) -> StoredMessage {
        StoredMessage {
            seq,
            id: format!("m{seq}"),
            turn_id: "t".into(),
            ts: Utc::now(),
            tokens: 1,
            usage: None,
            tool_status: None,
            message: message.into(),
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "add".into(),
            arguments: json!({"a": 1, "b": 2}),
        }
    }

    #[test]
    fn calls_without_a_stored_result_keep_the_step_open() {
        let ask = ChatMessage::assistant_calls(String::new(), vec![call("c1"), call("c2")]);
        let log = vec![
            stored(0, ChatMessage::user("sum")),
            stored(1, ask),
            stored(2, ChatMessage::tool("c1", "add", "3")),
        ];
        let open = open_calls(&log).unwrap();
        assert_eq!(open.len(), 2, "the whole step is returned; run() skips c1");
        let mut done = log.clone();
        done.push(stored(3, ChatMessage::tool("c2", "add", "3")));
        assert!(open_calls(&done).is_none());
        done.push(stored(4, ChatMessage::assistant("3 and 3")));
        assert!(open_calls(&done).is_none());
    }

    #[test]
    fn the_loop_guard_counts_failures_by_status_not_by_what_a_result_quotes() {
        let result = |seq, status, content: &str| StoredMessage {
            tool_status: Some(status),
            ..stored(seq, ChatMessage::tool(format!("c{seq}"), "echo", content))
        };
        // Successful results that quote a failure's wire text are not failures.
        let quoting = r#"{"status":"ok","output":{"text":"\"status\":\"error\""}}"#;
        let quoted: Vec<_> = (0..3).map(|i| result(i, ToolStatus::Ok, quoting)).collect();
        assert!(crate::turn::loop_guard(&quoted).is_none());
        let failed: Vec<_> = (0..3).map(|i| result(i, ToolStatus::Error, "{}")).collect();
        assert!(crate::turn::loop_guard(&failed).is_some());
    }
}
