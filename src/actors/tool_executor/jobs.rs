//! Async jobs in the executor: submit (persist, announce, run in the background), run with
//! progress, and resume after a restart.
//!
//! Every status change is written to the `jobs` tree first and then published on
//! `hermes.job.<id>` (kinds `job.submitted`, `job.progress`, `job.done`, `job.failed`).
//! On start, [`resume`] re-runs unfinished jobs of `read` and `idempotent` tools; an unfinished
//! `write` job whose work had started is marked failed, because the executor cannot know
//! whether its effect happened. On a cluster jobs run from a shared queue instead
//! ([`super::job_queue`]), so a dead copy's jobs are taken over by another.

use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;
use tracing::Instrument;

use super::run::{timeout_error, Caller, ExecCore};
use crate::bus::rpc;
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::JobEvent;
use crate::telemetry::metrics;
use crate::tools::definition::{ToolDefinition, ToolEffect};
use crate::tools::jobs::{new_job_id, JobRecord, JobStatus};
use crate::tools::metrics::Counter;
use crate::tools::{Progress, Tool, ToolError, ToolErrorCode};

/// What a submission needs.
pub struct JobStart {
    pub tool: Arc<dyn Tool>,
    pub definition: Arc<ToolDefinition>,
    pub call_id: String,
    pub caller: Caller,
    pub turn_id: Option<String>,
    pub arguments: Value,
    pub idempotency_key: Option<String>,
}

/// Persist the job (durably), announce `job.submitted`, start it; returns the job id.
pub async fn submit(core: &ExecCore, start: JobStart) -> Result<String, ToolError> {
    start_job(core, start, None).await
}

/// A sync call whose tool deferred its work (an MCP server answered with a task) becomes a
/// job that follows `handle`. The handle is stored durably before the caller hears the job
/// id, so whoever resumes the job follows the same work instead of starting it again.
pub async fn adopt(core: &ExecCore, start: JobStart, handle: Value) -> Result<String, ToolError> {
    start_job(core, start, Some(handle)).await
}

async fn start_job(
    core: &ExecCore,
    start: JobStart,
    external: Option<Value>,
) -> Result<String, ToolError> {
    let now = Utc::now();
    let mut record = JobRecord {
        job_id: new_job_id(),
        tool: start.definition.name.clone(),
        call_id: start.call_id,
        agent: start.caller.agent,
        session: start.caller.session,
        user: start.caller.user,
        turn_id: start.turn_id,
        arguments: start.arguments,
        status: JobStatus::Submitted,
        progress: None,
        result: None,
        error: None,
        idempotency_key: start.idempotency_key,
        attempts: 0,
        requeued: false,
        external,
        created: now,
        updated: now,
    };
    if let Err(e) = save(core, &mut record).await {
        return Err(unrecorded(core, record, e).await);
    }
    core.metrics.bump(Counter::JobSubmitted);
    publish(core, &record).await;
    let job_id = record.job_id.clone();
    if core.stores.jobs.is_shared() {
        match super::job_queue::enqueue(core, &job_id).await {
            Ok(()) => return Ok(job_id),
            Err(e) => {
                tracing::warn!(job = %job_id, error = %e, "job not queued; it runs here, and nobody takes it over if this process dies")
            }
        }
    }
    spawn(core.clone(), start.tool, start.definition, record);
    Ok(job_id)
}

/// The error of a submission whose record could not be saved (`e`), once its fate is
/// settled as far as it can be. The caller's write reservation follows the error's code:
/// released for `unavailable` (a retry may run), kept for `outcome_unknown`.
/// - Work deferred to a server (an MCP task) runs there already: its outcome is unknown.
/// - Otherwise nothing ran, and the submission is withdrawn ([`JobStore::withdraw`]) so it
///   never will; if even that cannot be written, a record that was stored may still start it
///   after a restart: unknown as well (unless no record was stored at all).
///
/// [`JobStore::withdraw`]: crate::tools::jobs::JobStore::withdraw
async fn unrecorded(
    core: &ExecCore,
    mut record: JobRecord,
    e: crate::store::StoreError,
) -> ToolError {
    let tool = record.tool.clone();
    if record.external.is_some() {
        tracing::error!(job = %record.job_id, %tool, error = %e, "a task a server runs could not be recorded as a job; nobody follows it");
        return ToolError::new(
            ToolErrorCode::OutcomeUnknown,
            format!("`{tool}` started as a task on its server, but the job that follows it could not be recorded (job store: {e}), so its result will not come back"),
        )
        .with_hint("it may take effect on the server: do not repeat it, tell the user to check");
    }
    let withdrawn = ToolError::new(
        ToolErrorCode::Unavailable,
        format!("the submission of `{tool}` could not be recorded (job store: {e}); it was withdrawn and never ran"),
    );
    let job_id = record.job_id.clone();
    match core
        .stores
        .jobs
        .withdraw(&mut record, withdrawn.clone())
        .await
    {
        Ok(()) => withdrawn.with_hint("nothing ran; retry once later"),
        // Its first write failed (the bucket is written after it): nothing is stored anywhere.
        Err(_) if matches!(core.stores.jobs.get(&job_id), Ok(None)) => ToolError::new(
            ToolErrorCode::Unavailable,
            format!("the submission of `{tool}` could not be recorded (job store: {e}); nothing was stored and it never ran"),
        )
        .with_hint("nothing ran; retry once later"),
        Err(again) => {
            tracing::error!(job = %job_id, %tool, error = %e, withdraw_error = %again, "a job whose submission could not be recorded could not be withdrawn either; it may start after a restart");
            ToolError::new(
                ToolErrorCode::OutcomeUnknown,
                format!("the submission of `{tool}` could not be recorded (job store: {e}) nor withdrawn ({again}): it did not start, but may start after a restart as job {job_id}"),
            )
            .with_hint("do not submit it again; tell the user to check job_status later")
        }
    }
}

/// Stop `job_id`'s deferred work at its backend (an MCP server's task); the job then ends
/// as the backend reports it (cancelled). A job that ended with its task's question stops the
/// task that waits for the answer. A job without deferred work runs to its end.
pub async fn cancel(core: &ExecCore, job_id: &str) -> crate::protocol::JobCancelReply {
    let not = |note: String| crate::protocol::JobCancelReply {
        cancelled: false,
        note: Some(note),
    };
    let record = match core.stores.jobs.find(job_id).await {
        Ok(Some(record)) => record,
        Ok(None) => return not(format!("no job {job_id} is recorded here")),
        Err(e) => return not(format!("job store: {e}")),
    };
    // A job that ended with its task's question leaves the task waiting on its server.
    let asking = record.status == JobStatus::Done
        && record
            .result
            .as_ref()
            .and_then(crate::tools::remote::asked_in_output)
            .is_some();
    let Some(handle) = record
        .external
        .clone()
        .filter(|_| asking || !record.status.is_final())
    else {
        return not("the job has ended or its work cannot be stopped".to_owned());
    };
    let Some(tool) = core.registry.get(&record.tool) else {
        return not(format!(
            "this tool-executor does not serve `{}`",
            record.tool
        ));
    };
    match tool.cancel_deferred(handle).await {
        Ok(()) => {
            tracing::info!(job = %job_id, tool = %record.tool, "deferred work of a job cancelled");
            crate::protocol::JobCancelReply {
                cancelled: true,
                note: None,
            }
        }
        Err(e) => not(e.to_string()),
    }
}

/// Why an unfinished job cannot simply run (again) here: its tool is gone, or it changes
/// state and may already have taken effect. `what_stopped` names what interrupted it.
pub(super) fn refusal(
    core: &ExecCore,
    record: &JobRecord,
    what_stopped: &str,
) -> Result<(Arc<dyn Tool>, Arc<ToolDefinition>), String> {
    let found = core
        .registry
        .get(&record.tool)
        .zip(core.registry.definition(&record.tool));
    match found {
        None => Err(format!(
            "{what_stopped} and this tool-executor does not serve `{}`; the job cannot finish",
            record.tool
        )),
        Some((_, def))
            if def.effect == ToolEffect::Write
                && record.attempts > 0
                && record.external.is_none() =>
        {
            Err(format!(
                "{what_stopped} while `{}` ran; it changes state, so it was not run again and may \
             or may not have taken effect",
                record.tool
            ))
        }
        Some(found) => Ok(found),
    }
}

/// End `record` as failed with `reason`.
pub(super) async fn fail(core: &ExecCore, mut record: JobRecord, reason: String) {
    core.metrics.bump(Counter::JobFailedOnRestart);
    metrics::job_moved(None, Some(JobStatus::Failed));
    record.status = JobStatus::Failed;
    record.error = Some(
        ToolError::new(ToolErrorCode::ExecutionFailed, reason)
            .with_hint("tell the user; check the effect before running it again"),
    );
    finish(core, &mut record).await;
}

/// Re-run or fail every unfinished job found in the store; returns (resumed, failed).
pub async fn resume(core: &ExecCore) -> (usize, usize) {
    let unfinished = match core.stores.jobs.unfinished() {
        Ok(list) => list,
        Err(e) => {
            tracing::error!(error = %e, "cannot read unfinished jobs; they are not resumed");
            return (0, 0);
        }
    };
    let (mut resumed, mut failed) = (0, 0);
    for record in unfinished {
        match refusal(core, &record, "the tool-executor restarted") {
            Ok((tool, def)) => {
                core.metrics.bump(Counter::JobResumed);
                tracing::info!(job = %record.job_id, tool = %record.tool, "resuming job after restart");
                spawn(core.clone(), tool, def, record);
                resumed += 1;
            }
            Err(reason) => {
                fail(core, record, reason).await;
                failed += 1;
            }
        }
    }
    (resumed, failed)
}

/// Run the job here: `submitted` in this process's gauge until its work starts.
fn spawn(core: ExecCore, tool: Arc<dyn Tool>, def: Arc<ToolDefinition>, record: JobRecord) {
    let io = core.io.clone();
    metrics::job_moved(None, Some(JobStatus::Submitted));
    // In the span of the call that submitted it (if any): the job's work is part of its trace.
    io.spawn(
        async move {
            metrics::job_moved(Some(JobStatus::Submitted), None);
            run(core, tool, def, record).await
        }
        .in_current_span(),
    );
}

pub(super) async fn run(
    core: ExecCore,
    tool: Arc<dyn Tool>,
    def: Arc<ToolDefinition>,
    mut record: JobRecord,
) {
    record.status = JobStatus::Running;
    record.attempts += 1;
    record.requeued = false;
    metrics::job_moved(None, Some(JobStatus::Running));
    if let Err(e) = save(&core, &mut record).await {
        tracing::warn!(job = %record.job_id, error = %e, "job state not saved");
    }
    publish(&core, &record).await;
    let (progress, mut updates) = Progress::channel();
    let (timeout, work) = match record.external.clone() {
        // Following work started elsewhere: it takes as long as the backend says.
        Some(handle) => (FOLLOW_LIMIT, tool.follow(handle, progress)),
        None => (
            def.timeout(),
            tool.call_with_progress(record.arguments.clone(), progress),
        ),
    };
    let work = tokio::time::timeout(timeout, work);
    tokio::pin!(work);
    let outcome = loop {
        tokio::select! {
            outcome = &mut work => break outcome,
            Some(update) = updates.recv() => {
                record.progress = Some(update);
                if let Err(e) = save(&core, &mut record).await {
                    tracing::warn!(job = %record.job_id, error = %e, "job progress not saved");
                }
                publish(&core, &record).await;
            }
        }
    };
    match outcome {
        Ok(Ok(value)) => {
            record.status = JobStatus::Done;
            record.result = Some(value);
        }
        Ok(Err(e)) => {
            record.status = JobStatus::Failed;
            record.error = Some(e);
        }
        Err(_) => {
            record.status = JobStatus::Failed;
            record.error = Some(timeout_error(&record.tool, timeout, def.effect));
        }
    }
    metrics::job_moved(Some(JobStatus::Running), Some(record.status));
    finish(&core, &mut record).await;
}

/// The longest a job follows work started elsewhere (an MCP task); the backend's own limits
/// (a task's time to live) usually end it sooner.
const FOLLOW_LIMIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Save a final state and announce it.
async fn finish(core: &ExecCore, record: &mut JobRecord) {
    if let Err(e) = save(core, record).await {
        tracing::error!(job = %record.job_id, error = %e, "final job state not saved");
    }
    publish(core, record).await;
}

async fn save(core: &ExecCore, record: &mut JobRecord) -> Result<(), crate::store::StoreError> {
    core.stores.jobs.save(record).await
}

/// Publish the record's state on `hermes.job.<id>`; a failure is logged (the record is the
/// source of truth, readable with `job_status`).
pub(super) async fn publish(core: &ExecCore, record: &JobRecord) {
    let subject = match subjects::job(&record.job_id) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "job id is not a subject token");
            return;
        }
    };
    let mut envelope = Envelope::new(record.status.event_kind(), JobEvent::from(record));
    envelope.agent.clone_from(&record.agent);
    envelope.session.clone_from(&record.session);
    envelope.user.clone_from(&record.user);
    if let Err(e) = rpc::publish(core.bus.as_ref(), &subject, &envelope).await {
        tracing::warn!(job = %record.job_id, error = %e, "job event not published");
    }
    wake_owner(core, record, &envelope).await;
}

/// On a partitioned deployment a final event also goes straight into the waiting session's
/// partition inbox, so it wakes the turn even when no session process is running now. The
/// session service forwards the published copy too; both carry the envelope id, so the
/// inbox keeps one.
async fn wake_owner(core: &ExecCore, record: &JobRecord, envelope: &Envelope<JobEvent>) {
    let (Some(cluster), true) = (core.bus.cluster(), record.status.is_final()) else {
        return;
    };
    let (Some(agent), Some(session), Some(_)) = (&record.agent, &record.session, &record.turn_id)
    else {
        return;
    };
    let payload = match envelope.encode() {
        Ok(payload) => payload,
        Err(e) => {
            tracing::error!(job = %record.job_id, error = %e, "job event not encodable");
            return;
        }
    };
    if let Err(e) = cluster
        .enqueue(agent, session, payload, None, &envelope.id)
        .await
    {
        tracing::warn!(job = %record.job_id, error = %e, "job event not stored in its session's inbox; the published copy is the only one");
    }
}
