//! The executor's call path without actors: reads, raw outputs, timeouts, the high-risk
//! refusal and its counter, async jobs with their events, and resuming after a restart (the
//! run-once rules of `write` calls are in `write_tests`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{json, Value};

use super::jobs;
use super::run::{execute, Caller, ExecCore};
use crate::bus::{self, SharedBus};
use crate::llm::ToolSpec;
use crate::protocol::envelope::Envelope;
use crate::protocol::{kinds, JobEvent, ToolCallRequest, ToolStatus};
use crate::tools::builtin::{GenerateReport, JobStatusTool};
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode, ToolRisk};
use crate::tools::jobs::{new_job_id, JobRecord, JobStatus};
use crate::tools::metrics::ExecutorMetrics;
use crate::tools::registry::ToolRegistry;
use crate::tools::stores::ToolStores;
use crate::tools::{Tool, ToolError, ToolErrorCode};

/// A tool that counts its executions (each taking `delay`).
pub(super) struct Counting {
    pub(super) calls: Arc<AtomicUsize>,
    pub(super) effect: ToolEffect,
    pub(super) risk: ToolRisk,
    pub(super) mode: ToolMode,
    pub(super) delay: Duration,
}

#[async_trait]
impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "refund".into(),
            description: "refund an order".into(),
            input_schema: json!({"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}}}),
        }
    }
    fn definition(&self) -> ToolDefinition {
        let mut d = ToolDefinition::from_spec(self.spec(), Duration::from_secs(5));
        d.effect = self.effect;
        d.risk = self.risk;
        d.mode = self.mode;
        d
    }
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        tokio::time::sleep(self.delay).await;
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(json!({"refunded": arguments["order_id"], "execution": n}))
    }
}

pub(super) fn counting(
    calls: &Arc<AtomicUsize>,
    effect: ToolEffect,
    risk: ToolRisk,
) -> Arc<dyn Tool> {
    Arc::new(Counting {
        calls: calls.clone(),
        effect,
        risk,
        mode: ToolMode::Sync,
        delay: Duration::ZERO,
    })
}

fn core(
    db: &crate::store::durability::Durable,
    bus: SharedBus,
    tools: Vec<Arc<dyn Tool>>,
) -> ExecCore {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).unwrap();
    }
    ExecCore {
        registry,
        workers: Arc::default(),
        stores: ToolStores::open(db).unwrap(),
        metrics: ExecutorMetrics::default(),
        bus,
        io: tokio::runtime::Handle::current(),
    }
}

/// An executor core on the sled database in `dir` (opened anew: a restart when called twice)
/// and an embedded bus over it.
pub(super) async fn core_in(dir: &std::path::Path, tools: Vec<Arc<dyn Tool>>) -> ExecCore {
    let db = crate::store::durability::Durable::from(crate::store::open(dir).unwrap());
    let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
    core(&db, bus, tools)
}

/// [`core_in`] with the low-risk counting tool alone, counting into `calls`.
pub(super) async fn counting_core_in(
    dir: &std::path::Path,
    calls: &Arc<AtomicUsize>,
    effect: ToolEffect,
) -> ExecCore {
    core_in(dir, vec![counting(calls, effect, ToolRisk::Low)]).await
}

pub(super) fn request(call_id: &str, name: &str, arguments: Value) -> ToolCallRequest {
    ToolCallRequest {
        call_id: call_id.into(),
        name: name.into(),
        arguments,
        user: Some("u-1001".into()),
        turn_id: Some("turn-1".into()),
        session: Some("s1".into()),
        confirmed: false,
        input: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_tools_run_every_time() {
    let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
    let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = core(
        &db,
        bus,
        vec![counting(&calls, ToolEffect::Read, ToolRisk::Low)],
    );
    for id in ["a", "b"] {
        let r = execute(
            &c,
            request(id, "refund", json!({"order_id": "x"})),
            Caller::default(),
        )
        .await;
        assert_eq!(r.status, ToolStatus::Ok);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_output_too_long_for_the_context_is_kept_for_tool_raw_get() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = counting_core_in(dir.path(), &calls, ToolEffect::Read).await;
    let short = execute(
        &c,
        request("a", "refund", json!({"order_id": "JD-20251111-0042"})),
        Caller::default(),
    )
    .await;
    assert_eq!(short.status, ToolStatus::Ok);
    assert_eq!(short.raw_reference, None, "the context shows it all");

    let long_id = "x".repeat(crate::tools::transform::DEFAULT_DETAIL_CHARS);
    let long = execute(
        &c,
        request("b", "refund", json!({"order_id": long_id})),
        Caller::default(),
    )
    .await;
    let reference = long.raw_reference.clone().expect("a long output is kept");
    let kept = c.stores.raw.find(&reference).await.unwrap().unwrap();
    assert_eq!(kept.output, long.output);
    let shown =
        crate::tools::transform::transform(&long, crate::tools::transform::DEFAULT_DETAIL_CHARS);
    assert!(
        shown.detail.contains("see raw_reference"),
        "{}",
        shown.detail
    );
}

/// A tool slower than its one-second timeout, counting its executions.
pub(super) struct Hanging {
    pub(super) effect: ToolEffect,
    pub(super) calls: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Hanging {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "hang".into(),
            description: "never answers in time".into(),
            input_schema: json!({"type": "object"}),
        }
    }

    fn definition(&self) -> ToolDefinition {
        let mut d = ToolDefinition::from_spec(self.spec(), Duration::from_secs(1));
        d.effect = self.effect;
        d
    }

    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(json!({}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_says_what_timed_out_why_and_whether_to_retry() {
    for (effect, retry_advice) in [
        (ToolEffect::Read, "retry once"),
        (ToolEffect::Write, "do not retry"),
    ] {
        let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
        let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
        let calls = Arc::default();
        let c = core(&db, bus, vec![Arc::new(Hanging { effect, calls })]);
        let r = execute(&c, request("h1", "hang", json!({})), Caller::default()).await;
        assert_eq!(r.status, ToolStatus::Error);
        let e = r.error.unwrap();
        assert_eq!(e.code, ToolErrorCode::Timeout);
        assert!(
            e.message.contains("`hang`") && e.message.contains("1s"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("slow or down"),
            "likely causes: {}",
            e.message
        );
        assert!(e.hint.unwrap().contains(retry_advice), "{effect:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_risk_call_without_confirmation_is_refused_and_counted() {
    let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
    let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = core(
        &db,
        bus,
        vec![counting(&calls, ToolEffect::Write, ToolRisk::High)],
    );
    let refused = execute(
        &c,
        request("c1", "refund", json!({"order_id": "x"})),
        Caller::default(),
    )
    .await;
    let err = refused.error.unwrap();
    assert_eq!(err.code, ToolErrorCode::ConfirmationRequired);
    assert!(err.hint.unwrap().contains("confirm"));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let mut confirmed = request("c2", "refund", json!({"order_id": "x"}));
    confirmed.confirmed = true;
    let ran = execute(&c, confirmed, Caller::default()).await;
    assert_eq!(ran.status, ToolStatus::Ok);
    let m = c.metrics.snapshot();
    assert_eq!(m.high_risk_refused, 1);
    assert_eq!(m.high_risk_confirmed_executions, 1);
    assert_eq!(m.high_risk_unconfirmed_executions, 0);
}

/// Collect job events on `hermes.job.>` until one is final.
async fn events_until_final(sub: &mut bus::Subscription) -> Vec<(String, JobEvent)> {
    let mut seen = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("a job event within 10 s")
            .unwrap();
        let env = Envelope::decode(&msg.payload, 1 << 20).unwrap();
        let kind = env.kind.clone();
        let event: JobEvent = serde_json::from_value(env.body).unwrap();
        let last = event.status.is_final();
        seen.push((kind, event));
        if last {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tool_answers_with_a_job_and_publishes_progress_and_done() {
    let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
    let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
    let stores = ToolStores::open(&db).unwrap();
    let status_tool: Arc<dyn Tool> = Arc::new(JobStatusTool::new(stores.jobs.clone()));
    let c = core(
        &db,
        bus.clone(),
        vec![Arc::new(GenerateReport), status_tool],
    );
    let mut sub = bus.subscribe("hermes.job.>").await.unwrap();
    let caller = Caller {
        agent: Some("assistant".into()),
        session: Some("s1".into()),
        user: Some("u-1001".into()),
    };
    let reply = execute(
        &c,
        request(
            "c1",
            "generate_report",
            json!({"topic": "headphones", "seconds": 1}),
        ),
        caller,
    )
    .await;
    assert_eq!(reply.status, ToolStatus::Ok, "{reply:?}");
    assert_eq!(reply.output["status"], "submitted");
    assert!(
        reply.duration_ms < 500,
        "submission took {} ms",
        reply.duration_ms
    );
    let job_id = reply.output["job_id"].as_str().unwrap().to_string();
    let events = events_until_final(&mut sub).await;
    let kinds_seen: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds_seen.first(), Some(&kinds::JOB_SUBMITTED));
    assert_eq!(kinds_seen.last(), Some(&kinds::JOB_DONE));
    assert!(
        kinds_seen
            .iter()
            .filter(|k| **k == kinds::JOB_PROGRESS)
            .count()
            >= 4,
        "{kinds_seen:?}"
    );
    let (_, done) = events.last().unwrap();
    assert_eq!(done.job_id, job_id);
    assert_eq!(done.session.as_deref(), Some("s1"));
    assert_eq!(done.result.as_ref().unwrap()["topic"], "headphones");
    let polled = execute(
        &c,
        request("c2", "job_status", json!({"job_id": job_id})),
        Caller::default(),
    )
    .await;
    assert_eq!(polled.output["status"], "done", "{polled:?}");
}

fn unfinished(tool: &str) -> JobRecord {
    JobRecord {
        job_id: new_job_id(),
        tool: tool.into(),
        call_id: "c1".into(),
        agent: None,
        session: Some("s1".into()),
        user: None,
        turn_id: Some("turn-1".into()),
        arguments: json!({"topic": "phones", "seconds": 1, "order_id": "x"}),
        status: JobStatus::Running,
        progress: None,
        result: None,
        error: None,
        idempotency_key: None,
        attempts: 1,
        requeued: false,
        external: None,
        created: Utc::now(),
        updated: Utc::now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_read_jobs_rerun_and_write_jobs_fail_clearly() {
    let db = crate::store::tree::temporary(crate::store::durability::Mode::Sync).unwrap();
    let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let writer: Arc<dyn Tool> = Arc::new(Counting {
        calls: calls.clone(),
        effect: ToolEffect::Write,
        risk: ToolRisk::Low,
        mode: ToolMode::Async,
        delay: Duration::ZERO,
    });
    let c = core(&db, bus.clone(), vec![Arc::new(GenerateReport), writer]);
    let mut read_job = unfinished("generate_report");
    let mut write_job = unfinished("refund");
    let mut gone_job = unfinished("retired_tool");
    for r in [&mut read_job, &mut write_job, &mut gone_job] {
        c.stores.jobs.put(r).unwrap();
    }
    let mut sub = bus
        .subscribe(&format!("hermes.job.{}", read_job.job_id))
        .await
        .unwrap();
    assert_eq!(jobs::resume(&c).await, (1, 2));
    let events = events_until_final(&mut sub).await;
    assert_eq!(events.last().unwrap().1.status, JobStatus::Done);
    let read_after = c.stores.jobs.get(&read_job.job_id).unwrap().unwrap();
    assert_eq!(read_after.attempts, 2);
    let write_after = c.stores.jobs.get(&write_job.job_id).unwrap().unwrap();
    assert_eq!(write_after.status, JobStatus::Failed);
    assert!(write_after
        .error
        .unwrap()
        .message
        .contains("may or may not have taken effect"));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a write job was run again");
    let gone_after = c.stores.jobs.get(&gone_job.job_id).unwrap().unwrap();
    assert_eq!(gone_after.status, JobStatus::Failed);
    let m = c.metrics.snapshot();
    assert_eq!((m.jobs_resumed, m.jobs_failed_on_restart), (1, 2));
}
