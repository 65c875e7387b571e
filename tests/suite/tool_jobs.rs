//! Async jobs across a crash: a `hermes serve --actors tool-executor` process on NATS is
//! killed with SIGKILL while a job runs; restarted on the same data directory it resumes the
//! job, which completes and is announced `job.done` on `hermes.job.<id>`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes::bus::{self, rpc, Subscription};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::subjects;
use hermes::protocol::{kinds, JobEvent, ToolCallRequest, ToolCallResult, ToolStatus};
use hermes::tools::jobs::JobStatus;
use hermes::tools::metrics::ToolMetrics;
use serde_json::json;

use crate::common::hermes_proc::Serve;
use crate::common::nats_server::NatsServer;

const T: Duration = Duration::from_secs(30);

fn write_config(dir: &Path) -> PathBuf {
    let config = format!(
        "[engine]\ndata_dir = \"{}\"\n[mcp]\nservers = []\n{}",
        dir.join("tools-data").display(),
        crate::common::scenario::demo_builtin_toml()
    );
    let path = dir.join("tools.toml");
    std::fs::write(&path, config).unwrap();
    path
}

async fn next_job_event(sub: &mut Subscription) -> (String, JobEvent) {
    let msg = tokio::time::timeout(T, sub.next())
        .await
        .expect("a job event in time")
        .unwrap();
    let env = Envelope::decode(&msg.payload, 1 << 20).unwrap();
    let kind = env.kind.clone();
    (kind, serde_json::from_value(env.body).unwrap())
}

async fn call(bus: &bus::SharedBus, name: &str, arguments: serde_json::Value) -> ToolCallResult {
    let request = Envelope::request(ToolCallRequest {
        call_id: format!("{name}-1"),
        name: name.into(),
        arguments,
        ..Default::default()
    });
    let reply: Envelope<ToolCallResult> = rpc::request(bus.as_ref(), request.clone(), T)
        .await
        .unwrap();
    reply.body
}

/// A nats-server, a tool-executor config in a fresh directory, and a client on its own runtime.
struct World {
    nats: NatsServer,
    _dir: tempfile::TempDir,
    config: PathBuf,
    rt: tokio::runtime::Runtime,
    bus: bus::SharedBus,
}

impl World {
    fn start() -> Self {
        let nats = NatsServer::start();
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let bus = rt.block_on(bus::connect(&nats.url(), None)).unwrap();
        Self {
            nats,
            _dir: dir,
            config,
            rt,
            bus,
        }
    }

    /// `hermes serve --actors tool-executor` on the world's server and config.
    fn serve(&self) -> Serve {
        Serve::start(&self.config, &self.nats.url(), "tool-executor")
    }
}

#[test]
fn an_async_job_survives_kill_9_of_the_tool_executor() {
    let w = World::start();
    let serve = w.serve();
    let (job_id, mut sub) = w.rt.block_on(async {
        let submitted = call(
            &w.bus,
            "generate_report",
            json!({"topic": "phones", "seconds": 4}),
        )
        .await;
        assert_eq!(submitted.status, ToolStatus::Ok, "{submitted:?}");
        assert_eq!(submitted.output["status"], "submitted");
        let job_id = submitted.output["job_id"].as_str().unwrap().to_string();
        let mut sub = w
            .bus
            .subscribe(&subjects::job(&job_id).unwrap())
            .await
            .unwrap();
        // Wait until the job has made progress: it is running when the executor dies.
        loop {
            let (_, event) = next_job_event(&mut sub).await;
            assert!(
                !event.status.is_final(),
                "the job ended before the crash: {event:?}"
            );
            if event.progress.is_some() {
                break;
            }
        }
        (job_id, sub)
    });
    serve.kill9();

    let serve = w.serve();
    w.rt.block_on(async {
        let (kind, done) = loop {
            let (kind, event) = next_job_event(&mut sub).await;
            if event.status.is_final() {
                break (kind, event);
            }
        };
        assert_eq!(kind, kinds::JOB_DONE, "{done:?}");
        assert_eq!(done.status, JobStatus::Done);
        assert_eq!(done.result.unwrap()["topic"], "phones");
        let polled = call(&w.bus, "job_status", json!({"job_id": job_id})).await;
        assert_eq!(polled.output["status"], "done", "{polled:?}");
        let request = Envelope::request(hermes::protocol::request::ToolsMetricsRequest);
        let metrics: Envelope<ToolMetrics> = rpc::request(w.bus.as_ref(), request.clone(), T)
            .await
            .unwrap();
        assert_eq!(metrics.body.jobs_resumed, 1);
    });
    serve.stop();
}

/// A job id can reach a copy of the tool-executor before the job's record does (the bucket's
/// leader changed in between): the copy looks again a moment later instead of dropping it.
#[test]
fn a_queued_job_whose_record_shows_up_late_still_runs() {
    let w = World::start();
    let serve = w.serve();
    w.rt.block_on(async {
        let job_id = hermes::tools::jobs::new_job_id();
        let mut sub = w
            .bus
            .subscribe(&subjects::job(&job_id).unwrap())
            .await
            .unwrap();
        w.bus
            .durable_publish(subjects::JOB_QUEUE, job_id.clone().into())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = chrono::Utc::now();
        let record = hermes::tools::jobs::JobRecord {
            job_id: job_id.clone(),
            tool: "generate_report".into(),
            call_id: "late-1".into(),
            agent: None,
            session: None,
            user: None,
            turn_id: None,
            arguments: json!({"topic": "late", "seconds": 0}),
            status: JobStatus::Submitted,
            progress: None,
            result: None,
            error: None,
            idempotency_key: None,
            attempts: 0,
            requeued: false,
            external: None,
            created: now,
            updated: now,
        };
        w.bus
            .cluster()
            .expect("NATS has a cluster")
            .bucket(hermes::tools::jobs::BUCKET, None)
            .put(&job_id, serde_json::to_vec(&record).unwrap().into())
            .await
            .unwrap();
        let done = loop {
            let (_, event) = next_job_event(&mut sub).await;
            if event.status.is_final() {
                break event;
            }
        };
        assert_eq!(done.status, JobStatus::Done, "{done:?}");
        assert_eq!(done.result.unwrap()["topic"], "late");
    });
    serve.stop();
}
