//! What a turn waits for between steps: the user's decision on a `risk = high` call
//! (`waiting_user`) and the completion of an async tool's job (`waiting_job`).
//!
//! The waits themselves are persisted in the turn's [`TurnRecord`]; this module builds the
//! results they end in (a declined call, a finished job) and asks the tool-executor for the
//! state of jobs whose completion event may have been missed (the session was not running,
//! or the job finished before the turn recorded it) — all of them, or only the overdue ones
//! when the turn was woken by an end it heard ([`Awaited`]).

use chrono::Utc;
use serde_json::{json, Value};

use super::TurnEnv;
use crate::llm::ToolCall;
use crate::protocol::{JobEvent, ToolCallResult, ToolStatus, DEFERRED_VIA};
use crate::store::sessions::SessionMeta;
use crate::store::tasks::AwaitedJob;
use crate::tools::builtin::JOB_STATUS;
use crate::tools::definition::{ToolDefinition, ToolMode, ToolRisk};
use crate::tools::jobs::JobStatus;
use crate::tools::{ToolError, ToolErrorCode};

/// What a turn that runs again knows about the jobs and delegated tasks it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// An end may have gone unheard (the session started, read its log again, or was told to
    /// look): every unfinished job and task is asked about.
    AskAll,
    /// Woken by one job's end in a copy that has heard every end since the wait began: the
    /// others wake the turn by their own ends, so only tasks past their deadline are looked
    /// at. A fan-out of n children then costs at most n wake-ups, not n² reads of their
    /// sessions.
    Heard,
}

/// Does this call need the user's confirmation before it runs?
pub(super) fn needs_confirmation(tools: &[ToolDefinition], call: &ToolCall) -> bool {
    tools
        .iter()
        .any(|t| t.name == call.name && t.risk == ToolRisk::High)
}

/// What the person deciding is told about a high-risk call.
pub(super) fn confirmation_message(call: &ToolCall) -> String {
    let args = call.arguments.to_string();
    let args: String = args.chars().take(300).collect();
    format!(
        "`{}` is a high-risk tool; it runs with {args} only if you approve \
         (hermes send --confirm, or --deny to decline)",
        call.name
    )
}

/// The result a declined call enters the conversation with; it never ran.
pub(super) fn declined(call: &ToolCall) -> ToolCallResult {
    ToolCallResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        status: ToolStatus::Error,
        output: Value::Null,
        error: Some(
            ToolError::new(
                ToolErrorCode::DeclinedByUser,
                format!("the user declined to run `{}`; it was not run", call.name),
            )
            .with_hint("do not call it again for this request; ask what the user wants instead"),
        ),
        auto_corrected: false,
        corrections: Vec::new(),
        via: "user".into(),
        duration_ms: 0,
        raw_reference: None,
    }
}

/// The job id when `result` is an async tool's `{job_id, status: "submitted"}` answer, or a
/// sync tool's whose backend deferred the work (`via` [`DEFERRED_VIA`]).
pub(super) fn submitted_job(tools: &[ToolDefinition], result: &ToolCallResult) -> Option<String> {
    let is_async = result.via == DEFERRED_VIA
        || tools
            .iter()
            .any(|t| t.name == result.name && t.mode == ToolMode::Async);
    if !is_async || result.status != ToolStatus::Ok || result.output["status"] != "submitted" {
        return None;
    }
    result.output["job_id"].as_str().map(str::to_string)
}

/// The result a finished job enters the conversation with.
pub fn job_result(
    job: &AwaitedJob,
    status: JobStatus,
    output: Option<Value>,
    error: Option<ToolError>,
) -> ToolCallResult {
    let elapsed = (Utc::now() - job.submitted_at).num_milliseconds().max(0);
    // An MCP task that asks the user: the result says so, as a call's own questions do.
    let asked = output
        .as_ref()
        .filter(|_| status == JobStatus::Done)
        .and_then(crate::tools::remote::asked_in_output);
    let (status, error, output) = match asked {
        Some(asked) => (
            JobStatus::Failed,
            Some(
                ToolError::new(
                    ToolErrorCode::InputRequired,
                    format!("the MCP task asks the user first: {}", asked.message()),
                )
                .with_hint("the user is asked; the task goes on with the answer"),
            ),
            serde_json::to_value(&asked).ok(),
        ),
        None => (status, error, output),
    };
    let (status, error) = match status {
        JobStatus::Done => (ToolStatus::Ok, None),
        _ => (
            ToolStatus::Error,
            Some(error.unwrap_or_else(|| {
                ToolError::new(
                    ToolErrorCode::ExecutionFailed,
                    format!(
                        "job {} of `{}` failed without a reason",
                        job.job_id, job.tool
                    ),
                )
            })),
        ),
    };
    ToolCallResult {
        call_id: job.call_id.clone(),
        name: job.tool.clone(),
        status,
        output: output.unwrap_or(Value::Null),
        error,
        auto_corrected: false,
        corrections: Vec::new(),
        via: format!("job:{}", job.job_id),
        duration_ms: u64::try_from(elapsed).unwrap_or(0),
        raw_reference: None,
    }
}

/// The final result a job event carries for `job`, if the event is that job's end.
pub fn finished_by(job: &AwaitedJob, event: &JobEvent) -> Option<ToolCallResult> {
    (event.job_id == job.job_id && event.status.is_final())
        .then(|| job_result(job, event.status, event.result.clone(), event.error.clone()))
}

/// Ask the tool-executor (`job_status`) for a job's state; `Some` when it has ended.
/// A failing ask is logged and answered `None`: the completion event still wakes the turn.
pub(super) async fn poll(
    env: &TurnEnv,
    emitter: &super::Emitter,
    meta: &SessionMeta,
    turn_id: &str,
    job: &AwaitedJob,
) -> Option<ToolCallResult> {
    let call = ToolCall {
        id: format!("poll-{}", job.call_id),
        name: JOB_STATUS.into(),
        arguments: json!({"job_id": job.job_id}),
    };
    let wait = super::tool_calls::default_wait(env);
    let reply = super::tool_calls::dispatch(
        env,
        emitter,
        meta,
        turn_id,
        &call,
        &super::tool_calls::UserGrant::default(),
        wait,
    )
    .await;
    if let Some(e) = &reply.error {
        tracing::warn!(job = %job.job_id, error = %e, "job state not readable now; waiting for its completion event");
        return None;
    }
    let out = reply.output;
    let status: JobStatus = serde_json::from_value(out["status"].clone()).ok()?;
    if !status.is_final() {
        return None;
    }
    let error = serde_json::from_value(out["error"].clone()).ok();
    let output = Some(out["result"].clone()).filter(|v| !v.is_null());
    Some(job_result(job, status, output, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn awaited() -> AwaitedJob {
        AwaitedJob {
            call_id: "c1".into(),
            tool: "generate_report".into(),
            job_id: "job-1".into(),
            submitted_at: Utc::now(),
            result: None,
            child: None,
        }
    }

    fn event(job_id: &str, status: JobStatus) -> JobEvent {
        JobEvent {
            job_id: job_id.into(),
            tool: "generate_report".into(),
            call_id: "c1".into(),
            agent: None,
            session: None,
            user: None,
            turn_id: None,
            status,
            progress: None,
            result: Some(json!({"topic": "phones"})),
            error: None,
        }
    }

    #[test]
    fn only_the_final_event_of_the_awaited_job_finishes_it() {
        let job = awaited();
        assert!(finished_by(&job, &event("job-1", JobStatus::Running)).is_none());
        assert!(finished_by(&job, &event("job-2", JobStatus::Done)).is_none());
        let done = finished_by(&job, &event("job-1", JobStatus::Done)).unwrap();
        assert_eq!(done.status, ToolStatus::Ok);
        assert_eq!(done.call_id, "c1");
        assert_eq!(done.output["topic"], "phones");
        assert_eq!(done.via, "job:job-1");
    }

    #[test]
    fn a_failed_job_without_a_reason_still_explains_itself() {
        let failed = job_result(&awaited(), JobStatus::Failed, None, None);
        assert_eq!(failed.status, ToolStatus::Error);
        let error = failed.error.unwrap();
        assert_eq!(error.code, ToolErrorCode::ExecutionFailed);
        assert!(error.message.contains("job-1"), "{}", error.message);
    }

    #[test]
    fn a_declined_call_is_an_error_that_says_not_to_retry() {
        let call = ToolCall {
            id: "c9".into(),
            name: "order_cancel".into(),
            arguments: json!({"order_id": "A1"}),
        };
        let result = declined(&call);
        let error = result.error.unwrap();
        assert_eq!(error.code, ToolErrorCode::DeclinedByUser);
        assert!(error.hint.unwrap().contains("do not call it again"));
    }
}
