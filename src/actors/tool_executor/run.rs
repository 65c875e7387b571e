//! Running one call: whitelist and validation, the high-risk confirmation check, the
//! idempotency record of `write` tools, then a sync run under the timeout or an async job.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::runtime::Handle;

use super::jobs;
use crate::bus::SharedBus;
use crate::protocol::tool::{repeated_write_wait, tool_reply_wait, WRITE_SETTLE_GRACE};
use crate::protocol::{ToolCallRequest, ToolCallResult, ToolStatus, DEFERRED_VIA};
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode, ToolRisk};
use crate::tools::idempotency::{idempotency_key, Reservation, REPLAY_VIA};
use crate::tools::metrics::{Counter, ExecutorMetrics};
use crate::tools::registry::ToolRegistry;
use crate::tools::remote::MCP_SEPARATOR;
use crate::tools::stores::ToolStores;
use crate::tools::{CallOutcome, Tool, ToolError, ToolErrorCode};

/// Everything a call needs; clones share it.
#[derive(Clone)]
pub struct ExecCore {
    pub registry: ToolRegistry,
    /// Worker tools declared in config: listed in the catalog, not served here.
    pub workers: Arc<Vec<ToolDefinition>>,
    pub stores: ToolStores,
    pub metrics: ExecutorMetrics,
    pub bus: SharedBus,
    /// Where async jobs run.
    pub io: Handle,
}

/// Who is calling, from the request envelope.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub agent: Option<String>,
    pub session: Option<String>,
    pub user: Option<String>,
}

/// Validate, check, run (or replay) and report — never panics, never hangs.
pub async fn execute(core: &ExecCore, request: ToolCallRequest, caller: Caller) -> ToolCallResult {
    let started = Instant::now();
    let mut result = empty_result(&request);
    let mut result = match prepare_and_run(core, &request, &caller, &mut result).await {
        Ok(done) => done,
        Err(e) => {
            result.error = Some(e);
            result
        }
    };
    result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result
}

async fn prepare_and_run(
    core: &ExecCore,
    request: &ToolCallRequest,
    caller: &Caller,
    result: &mut ToolCallResult,
) -> Result<ToolCallResult, ToolError> {
    let (tool, mut prepared) = core
        .registry
        .prepare(&request.name, request.arguments.clone())?;
    let def = core.registry.definition(&request.name).ok_or_else(|| {
        ToolError::new(
            ToolErrorCode::Unavailable,
            "the tool was unregistered meanwhile",
        )
        .with_hint("call the tool catalog again")
    })?;
    result.via = via_of(&request.name);
    check_confirmation(core, &def, request)?;
    let user = request.user.clone().or_else(|| caller.user.clone());
    if let Some(user) = &user {
        core.registry
            .inject_user(&request.name, &mut prepared, user);
    }
    if let Some(input) = &request.input {
        let input = serde_json::to_value(input).unwrap_or_default();
        if !core
            .registry
            .inject_input(&request.name, &mut prepared, input)
        {
            return Err(ToolError::new(
                ToolErrorCode::InvalidArguments,
                format!(
                    "answers to a server's questions came for `{}`, which asks none",
                    request.name
                ),
            )
            .with_hint("call the tool again without answers"));
        }
    }
    result.auto_corrected = !prepared.corrections.is_empty();
    result.corrections = std::mem::take(&mut prepared.corrections);
    let idem_key = (def.effect == ToolEffect::Write).then(|| {
        let session = request.session.as_deref().or(caller.session.as_deref());
        let turn = request.turn_id.as_deref().unwrap_or(&request.call_id);
        idempotency_key(
            session.unwrap_or("-"),
            turn,
            &request.name,
            &prepared.arguments,
        )
    });
    // Taken before the reservation is written, so never later than the reservation's time.
    let settle_by = settle_deadline(&def);
    if let Some(key) = &idem_key {
        if let Some(replayed) = reserve(core, key, &def, request, settle_by).await? {
            return Ok(replayed);
        }
        tracing::debug!(tool = %request.name, key, "write call reserved its key");
    }
    core.metrics.bump(Counter::Execution);
    if def.risk == ToolRisk::High {
        let counter = if request.confirmed {
            Counter::HighRiskConfirmed
        } else {
            Counter::HighRiskUnconfirmed
        };
        core.metrics.bump(counter);
    }
    let mut out = result.clone();
    match def.mode {
        ToolMode::Async => {
            let job = jobs::JobStart {
                tool,
                definition: def,
                call_id: request.call_id.clone(),
                caller: Caller {
                    user,
                    ..caller.clone()
                },
                turn_id: request.turn_id.clone(),
                arguments: prepared.arguments,
                idempotency_key: idem_key.clone(),
            };
            // A submission that failed settles the write reservation below like any failed
            // call: released when nothing ran, kept with an unknown outcome otherwise.
            match jobs::submit(core, job).await {
                Ok(job_id) => {
                    out.status = ToolStatus::Ok;
                    out.output = json!({"job_id": job_id, "status": "submitted"});
                }
                Err(e) => out.error = Some(e),
            }
        }
        ToolMode::Sync => {
            let deferred = run_sync(
                core,
                tool.as_ref(),
                &def,
                request,
                prepared.arguments.clone(),
                &mut out,
            )
            .await;
            if let Some(handle) = deferred {
                let job = jobs::JobStart {
                    tool,
                    definition: def,
                    call_id: request.call_id.clone(),
                    caller: Caller {
                        user,
                        ..caller.clone()
                    },
                    turn_id: request.turn_id.clone(),
                    arguments: prepared.arguments,
                    idempotency_key: idem_key.clone(),
                };
                match jobs::adopt(core, job, handle).await {
                    Ok(job_id) => {
                        out.status = ToolStatus::Ok;
                        out.output = json!({"job_id": job_id, "status": "submitted"});
                        out.via = DEFERRED_VIA.to_owned();
                    }
                    Err(e) => out.error = Some(e),
                }
            }
        }
    }
    if let Some(key) = &idem_key {
        // A call slowed by a failover ends late; its outcome still gets a failover's worth of
        // tries, past what the waiting copies wait if it must (a repeat after them reads it).
        let by = settle_by.max(tokio::time::Instant::now() + LEAST_SETTLE_TRIES);
        tracing::debug!(tool = %request.name, key, status = ?out.status, "write call ran; settling its key");
        settle_reservation(core, key, request, &out, by).await?;
        tracing::debug!(tool = %request.name, key, "write call settled its key");
    }
    Ok(out)
}

/// Record an execution's outcome under its key by `by`: a successful result, or a timeout or
/// an unknown outcome (the call may have taken effect, so it is not run again on this key).
/// Release the key of a call that failed otherwise, so a retry may run.
async fn settle_reservation(
    core: &ExecCore,
    key: &str,
    request: &ToolCallRequest,
    out: &ToolCallResult,
    by: tokio::time::Instant,
) -> Result<(), ToolError> {
    let may_have_run = out.error.as_ref().is_some_and(|e| {
        matches!(
            e.code,
            ToolErrorCode::Timeout | ToolErrorCode::OutcomeUnknown
        )
    });
    if out.status != ToolStatus::Ok && !may_have_run {
        if let Err(e) = core.stores.idem.release(key, by).await {
            tracing::warn!(tool = %request.name, error = %e, "idempotency reservation not released; a retry of this call will be refused");
        }
        return Ok(());
    }
    let recorded = core.stores.idem.record(key, out, by).await;
    match recorded {
        Ok(()) => Ok(()),
        Err(e) if may_have_run => {
            tracing::error!(tool = %request.name, error = %e, "the timeout (or unknown outcome) of a write call was not recorded; a repeat of this call is told its outcome is unknown");
            Ok(())
        }
        Err(e) => {
            tracing::error!(tool = %request.name, error = %e, "idempotency record failed after the call ran");
            Err(ToolError::new(
                ToolErrorCode::Unavailable,
                format!(
                    "`{}` ran, but its result could not be recorded: {e}",
                    request.name
                ),
            )
            .with_hint("the action probably took effect; do not repeat it, tell the user to check"))
        }
    }
}

/// A `risk = high` call runs only with `confirmed: true`.
fn check_confirmation(
    core: &ExecCore,
    def: &ToolDefinition,
    request: &ToolCallRequest,
) -> Result<(), ToolError> {
    if def.risk != ToolRisk::High || request.confirmed {
        return Ok(());
    }
    core.metrics.bump(Counter::HighRiskRefused);
    Err(ToolError::new(
        ToolErrorCode::ConfirmationRequired,
        format!(
            "`{}` is a high-risk tool and runs only after the user confirms this call",
            request.name
        ),
    )
    .with_hint("ask the user to confirm (say exactly what will happen), then call again confirmed"))
}

/// Reserve the call's key before it runs. `Some` is what to answer instead of running: the
/// recorded result of an earlier execution, or an error when an earlier execution started
/// and never recorded an outcome (it is not repeated blindly). An earlier execution that may
/// still be running is waited for first (see [`holder_patience`]).
async fn reserve(
    core: &ExecCore,
    key: &str,
    def: &ToolDefinition,
    request: &ToolCallRequest,
    settle_by: tokio::time::Instant,
) -> Result<Option<ToolCallResult>, ToolError> {
    let store_error = |e: crate::store::StoreError| {
        ToolError::new(
            ToolErrorCode::Unavailable,
            format!("idempotency store: {e}"),
        )
        .with_hint("the tool-executor's store is failing; do not retry, tell the user")
    };
    let mut reservation = core
        .stores
        .idem
        .reserve(key, settle_by)
        .await
        .map_err(store_error)?;
    if let Reservation::Pending { since } = reservation {
        let patience = if core.stores.idem.may_be_running(key) {
            holder_patience(since, def, chrono::Utc::now())
        } else {
            std::time::Duration::ZERO
        };
        if !patience.is_zero() {
            tracing::info!(tool = %request.name, key, %since, ?patience, "the same write call is already running; waiting for its outcome");
            reservation = core
                .stores
                .idem
                .await_settled(key, patience)
                .await
                .map_err(store_error)?;
        }
    }
    match reservation {
        Reservation::Reserved => Ok(None),
        Reservation::Recorded(stored) => {
            core.metrics.bump(Counter::IdempotentReplay);
            let mut result = ToolCallResult::from(stored.as_ref());
            result.call_id.clone_from(&request.call_id);
            result.via = REPLAY_VIA.to_string();
            Ok(Some(result))
        }
        Reservation::Pending { since } => {
            core.metrics.bump(Counter::IdempotentUnfinished);
            tracing::warn!(tool = %request.name, key, %since, "an earlier execution of this write call never recorded its outcome; not running it again");
            Err(ToolError::new(
                ToolErrorCode::Unavailable,
                format!(
                    "`{}` with these arguments was started at {} and its outcome was never \
                     recorded (the tool-executor stopped mid-call, or the same call is running \
                     right now); it is not run a second time",
                    request.name,
                    since.to_rfc3339()
                ),
            )
            .with_hint(
                "the action may have taken effect: check its result (e.g. look the record up) \
                 before trying anything else, and tell the user",
            ))
        }
    }
}

/// How long a call waits for an earlier execution of the same write call (on NATS, the same
/// request sent again after its reply was lost). That execution is over by its own timeout
/// (for an async tool, a submission: at most [`SUBMISSION_PATIENCE`]) plus
/// [`WRITE_SETTLE_GRACE`] to record its result; past that it died mid-call and waiting is
/// pointless. The caller of a copy waits [`repeated_write_wait`] for it, which outlasts that,
/// so through a JetStream failover the earlier execution gets every second it may need to
/// record its result; the wait still ends a moment before the caller's does.
pub(super) fn holder_patience(
    since: chrono::DateTime<chrono::Utc>,
    def: &ToolDefinition,
    now: chrono::DateTime<chrono::Utc>,
) -> std::time::Duration {
    let left = (settled_by(since, def) - now).to_std().unwrap_or_default();
    let caller_waits = repeated_write_wait(tool_reply_wait(runs_for(def)));
    left.min(caller_waits.saturating_sub(ANSWER_AHEAD))
}

/// How long a call of `def` runs at most before it settles: its timeout, or for an async
/// tool its submission's.
fn runs_for(def: &ToolDefinition) -> std::time::Duration {
    match def.mode {
        ToolMode::Sync => def.timeout(),
        ToolMode::Async => SUBMISSION_PATIENCE,
    }
}

/// When an execution reserved at `since` has settled, or never will: the copies waiting for
/// it wait until then.
fn settled_by(
    since: chrono::DateTime<chrono::Utc>,
    def: &ToolDefinition,
) -> chrono::DateTime<chrono::Utc> {
    chrono::Duration::from_std(runs_for(def) + WRITE_SETTLE_GRACE)
        .ok()
        .and_then(|d| since.checked_add_signed(d))
        .unwrap_or(since)
}

/// When an execution reserved now stops trying to settle: [`SETTLE_AHEAD`] before the
/// copies waiting for it give up ([`settled_by`]).
pub(super) fn settle_deadline(def: &ToolDefinition) -> tokio::time::Instant {
    tokio::time::Instant::now() + (runs_for(def) + WRITE_SETTLE_GRACE).saturating_sub(SETTLE_AHEAD)
}

/// How long before the waiting copies give up the execution stops trying to record its
/// outcome: their last look at the bucket must find what it wrote.
const SETTLE_AHEAD: std::time::Duration = std::time::Duration::from_secs(1);

/// The least time an execution keeps trying to record its outcome once its call is over: a
/// JetStream failover's retries (15 s) and one last attempt.
const LEAST_SETTLE_TRIES: std::time::Duration = std::time::Duration::from_secs(21);

/// How long before its caller's wait runs out a copy that waited for an earlier execution
/// answers.
const ANSWER_AHEAD: std::time::Duration = std::time::Duration::from_secs(1);

/// How long an async tool's submission may take (the session waits the engine's request
/// timeout, 5 s by default, plus a margin for it).
const SUBMISSION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Run a sync call into `out`; `Some(handle)` when the tool deferred its work instead (the
/// caller turns the call into a job following it).
async fn run_sync(
    core: &ExecCore,
    tool: &dyn Tool,
    def: &ToolDefinition,
    request: &ToolCallRequest,
    arguments: Value,
    out: &mut ToolCallResult,
) -> Option<Value> {
    let timeout = def.timeout();
    match tokio::time::timeout(timeout, tool.call_or_defer(arguments)).await {
        Ok(Ok(CallOutcome::Deferred(handle))) => return Some(handle),
        Ok(Ok(CallOutcome::InputRequired(asked))) => {
            // An error, so a `write` call's key is released for the round with the answers.
            out.error = Some(
                ToolError::new(
                    ToolErrorCode::InputRequired,
                    format!("the MCP server asks the user first: {}", asked.message()),
                )
                .with_hint("the user is asked; the call goes on with the answer"),
            );
            out.output = serde_json::to_value(&asked).unwrap_or_default();
        }
        Ok(Ok(CallOutcome::Done(output))) => {
            out.status = ToolStatus::Ok;
            out.output = output;
            // Only an output the context cannot show in full is kept for `tool_raw_get`.
            if request.name != crate::tools::builtin::RAW_GET
                && !crate::tools::transform::shown_in_full(out)
            {
                match core
                    .stores
                    .raw
                    .store(&request.name, &request.call_id, &out.output)
                    .await
                {
                    Ok(reference) => out.raw_reference = Some(reference),
                    Err(e) => tracing::warn!(error = %e, "raw output not stored"),
                }
            }
        }
        Ok(Err(e)) => out.error = Some(e),
        Err(_) => out.error = Some(timeout_error(&request.name, timeout, def.effect)),
    }
    None
}

/// The explanatory timeout result: what timed out, likely causes, whether to retry.
pub fn timeout_error(name: &str, timeout: std::time::Duration, effect: ToolEffect) -> ToolError {
    let hint = match effect {
        ToolEffect::Write => {
            "the action may or may not have taken effect: do not retry; tell the user and suggest checking"
        }
        _ => "retry once with a narrower request; if it times out again, tell the user",
    };
    ToolError::new(
        ToolErrorCode::Timeout,
        format!(
            "`{name}` did not finish within {timeout:?}; its backend may be slow or down, or the request too large"
        ),
    )
    .with_hint(hint)
}

fn via_of(name: &str) -> String {
    match name.split_once(MCP_SEPARATOR) {
        Some((server, _)) => format!("mcp:{server}"),
        None => "builtin".into(),
    }
}

fn empty_result(request: &ToolCallRequest) -> ToolCallResult {
    ToolCallResult {
        call_id: request.call_id.clone(),
        name: request.name.clone(),
        status: ToolStatus::Error,
        output: Value::Null,
        error: None,
        auto_corrected: false,
        corrections: Vec::new(),
        via: "builtin".into(),
        duration_ms: 0,
        raw_reference: None,
    }
}
