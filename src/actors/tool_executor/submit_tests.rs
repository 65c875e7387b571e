//! A `write` call whose job cannot be recorded: a submission that never ran is withdrawn and
//! its key freed for the retry; work a server already runs keeps its key with an unknown
//! outcome, so the retry does not start it twice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{json, Value};

use super::run::{execute, Caller, ExecCore};
use super::tests::{core_in, request, Counting};
use crate::bus::kv::SharedKv;
use crate::bus::BusError;
use crate::llm::ToolSpec;
use crate::protocol::ToolStatus;
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode, ToolRisk};
use crate::tools::jobs::{JobStatus, JobStore};
use crate::tools::{CallOutcome, Tool, ToolError, ToolErrorCode};

/// A shared job bucket that refuses every write, as JetStream with its stream unreachable.
struct RefusingBucket;

#[async_trait]
impl SharedKv for RefusingBucket {
    async fn create(&self, key: &str, _: Bytes) -> Result<bool, BusError> {
        Err(refused(key))
    }
    async fn get(&self, _: &str) -> Result<Option<Bytes>, BusError> {
        Ok(None)
    }
    async fn put(&self, key: &str, _: Bytes) -> Result<(), BusError> {
        Err(refused(key))
    }
    async fn delete(&self, key: &str) -> Result<(), BusError> {
        Err(refused(key))
    }
}

fn refused(key: &str) -> BusError {
    BusError::Timeout {
        subject: format!("$KV.hermes_jobs.{key}"),
        after: Duration::from_millis(1),
    }
}

/// `core` with its job records copied to a bucket that refuses them.
fn with_refusing_job_bucket(mut core: ExecCore) -> ExecCore {
    core.stores.jobs = core
        .stores
        .jobs
        .clone()
        .with_shared(Arc::new(RefusingBucket));
    core
}

fn async_refund(calls: &Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(Counting {
        calls: calls.clone(),
        effect: ToolEffect::Write,
        risk: ToolRisk::Low,
        mode: ToolMode::Async,
        delay: Duration::ZERO,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_job_that_cannot_be_recorded_is_withdrawn_and_its_retry_runs() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let args = json!({"order_id": "JD-20251111-0042", "amount": 30});
    let healthy = core_in(dir.path(), vec![async_refund(&calls)]).await;
    let failing = with_refusing_job_bucket(healthy.clone());

    let first = execute(
        &failing,
        request("call-1", "refund", args.clone()),
        Caller::default(),
    )
    .await;
    assert_eq!(first.status, ToolStatus::Error, "{first:?}");
    let error = first.error.clone().unwrap();
    assert_eq!(error.code, ToolErrorCode::Unavailable, "{error:?}");
    assert!(
        error.message.contains("withdrawn and never ran"),
        "{error:?}"
    );
    assert!(
        error.hint.as_deref().unwrap_or("").contains("retry"),
        "{error:?}"
    );

    // Withdrawn: recorded as failed, so neither a restart nor a cluster copy runs it.
    assert!(healthy.stores.jobs.unfinished().unwrap().is_empty());
    assert_eq!(super::jobs::resume(&healthy).await, (0, 0));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the withdrawn job ran");

    // The same call again, the store healthy: its key was freed, so it is submitted and runs.
    let retry = execute(
        &healthy,
        request("call-2", "refund", args),
        Caller::default(),
    )
    .await;
    assert_eq!(retry.status, ToolStatus::Ok, "{retry:?}");
    assert_eq!(retry.output["status"], "submitted", "{retry:?}");
    let job_id = retry.output["job_id"].as_str().unwrap().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the retried job ran once");
    let withdrawn = healthy
        .stores
        .jobs
        .unfinished()
        .unwrap()
        .into_iter()
        .all(|j| j.job_id == job_id);
    assert!(withdrawn, "only the retried job may still be unfinished");
}

/// The counting `refund` tool (sync, `write`) whose server takes each call as a task.
struct DeferringRefund(Counting);

#[async_trait]
impl Tool for DeferringRefund {
    fn spec(&self) -> ToolSpec {
        self.0.spec()
    }
    fn definition(&self) -> ToolDefinition {
        self.0.definition()
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        unreachable!("the executor asks call_or_defer")
    }
    async fn call_or_defer(&self, _: Value) -> Result<CallOutcome, ToolError> {
        let n = self.0.calls.fetch_add(1, Ordering::SeqCst);
        Ok(CallOutcome::Deferred(
            json!({"task_id": format!("task-{n}")}),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_task_whose_job_cannot_be_recorded_has_an_unknown_outcome_and_is_not_started_again(
) {
    let dir = tempfile::tempdir().unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let tool: Arc<dyn Tool> = Arc::new(DeferringRefund(Counting {
        calls: taken.clone(),
        effect: ToolEffect::Write,
        risk: ToolRisk::Low,
        mode: ToolMode::Sync,
        delay: Duration::ZERO,
    }));
    let core = with_refusing_job_bucket(core_in(dir.path(), vec![tool]).await);
    let args = json!({"order_id": "JD-20251111-0042"});

    let first = execute(
        &core,
        request("call-1", "refund", args.clone()),
        Caller::default(),
    )
    .await;
    let error = first.error.clone().unwrap();
    assert_eq!(error.code, ToolErrorCode::OutcomeUnknown, "{first:?}");
    assert!(error.message.contains("started as a task"), "{error:?}");
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("do not repeat"),
        "{error:?}"
    );
    assert_eq!(taken.load(Ordering::SeqCst), 1);

    // The retry is told the same, and the server is not given the call again.
    let again = execute(&core, request("call-2", "refund", args), Caller::default()).await;
    assert_eq!(
        taken.load(Ordering::SeqCst),
        1,
        "the task was started twice"
    );
    assert_eq!(
        again.error.as_ref().map(|e| e.code),
        Some(ToolErrorCode::OutcomeUnknown),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_withdrawn_submission_is_failed_with_its_reason_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let job_id = {
        let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
        let jobs = JobStore::open(&db).unwrap();
        let mut record: crate::tools::jobs::JobRecord = serde_json::from_value(json!({
            "job_id": "job-1", "tool": "refund", "call_id": "c1", "arguments": {},
            "status": "submitted", "attempts": 0,
            "created": "2026-12-07T00:00:00Z", "updated": "2026-12-07T00:00:00Z"
        }))
        .unwrap();
        let reason = ToolError::new(ToolErrorCode::Unavailable, "not recorded");
        jobs.withdraw(&mut record, reason).await.unwrap();
        record.job_id
    };
    let db = crate::store::durability::Durable::from(crate::store::open(dir.path()).unwrap());
    let jobs = JobStore::open(&db).unwrap();
    let stored = jobs.get(&job_id).unwrap().unwrap();
    assert_eq!(stored.status, JobStatus::Failed);
    assert_eq!(stored.error.unwrap().message, "not recorded");
    assert!(jobs.unfinished().unwrap().is_empty());
}
