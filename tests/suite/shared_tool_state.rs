//! Tool-executor state on a NATS cluster: what one copy writes, every copy reads, and a write
//! call reserved by one copy is not run by another.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use hermes::actors::tool_executor::{execute, Caller, ExecCore};
use hermes::bus;
use hermes::llm::ToolSpec;
use hermes::protocol::{ToolCallRequest, ToolStatus};
use hermes::store::durability::Durable;
use hermes::tools::definition::{ToolDefinition, ToolEffect};
use hermes::tools::metrics::ExecutorMetrics;
use hermes::tools::registry::ToolRegistry;
use hermes::tools::stores::ToolStores;
use hermes::tools::{Tool, ToolError};

use crate::common::nats_server::NatsServer;

/// A write tool that counts its executions and takes a moment, so racing calls overlap.
struct SlowRefund {
    calls: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for SlowRefund {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "refund".into(),
            description: "refund an order".into(),
            input_schema: json!({"type": "object", "properties": {"order_id": {"type": "string"}}}),
        }
    }
    fn definition(&self) -> ToolDefinition {
        let mut d = ToolDefinition::from_spec(self.spec(), Duration::from_secs(5));
        d.effect = ToolEffect::Write;
        d
    }
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(json!({"refunded": arguments["order_id"]}))
    }
}

/// One tool-executor copy: its own sled, the cluster's shared buckets.
async fn executor_copy(url: &str, dir: &std::path::Path, calls: &Arc<AtomicUsize>) -> ExecCore {
    let bus = bus::connect(url, None).await.unwrap();
    let cluster = bus.cluster().expect("a NATS bus has a cluster");
    let db = Durable::from(sled::Config::new().path(dir).open().unwrap());
    let stores = ToolStores::open(&db)
        .unwrap()
        .shared_through(cluster.as_ref(), 30);
    let registry = ToolRegistry::new();
    registry
        .register(Arc::new(SlowRefund {
            calls: calls.clone(),
        }))
        .unwrap();
    ExecCore {
        registry,
        workers: Arc::default(),
        stores,
        metrics: ExecutorMetrics::default(),
        bus,
        io: tokio::runtime::Handle::current(),
    }
}

fn refund(call_id: &str) -> ToolCallRequest {
    ToolCallRequest {
        call_id: call_id.into(),
        name: "refund".into(),
        arguments: json!({"order_id": "JD-7"}),
        user: Some("u-1".into()),
        turn_id: Some("turn-1".into()),
        session: Some("s1".into()),
        confirmed: false,
        input: None,
    }
}

#[test]
fn two_executor_copies_racing_on_one_write_key_execute_it_once() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = crate::common::runtime::multi_thread(2);
    rt.block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let a = Arc::new(executor_copy(&nats.url(), &dir.path().join("a"), &calls).await);
        let b = Arc::new(executor_copy(&nats.url(), &dir.path().join("b"), &calls).await);
        // The same call (a turn retried, a redelivered request) lands on both copies at once.
        let mut racing = Vec::new();
        for i in 0..8 {
            let core = if i % 2 == 0 { a.clone() } else { b.clone() };
            racing.push(tokio::spawn(async move {
                execute(&core, refund(&format!("call-{i}")), Caller::default()).await
            }));
        }
        let mut results = Vec::new();
        for r in racing {
            results.push(r.await.unwrap());
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "the write ran more than once"
        );
        // Every other copy answered with the recorded result, or said an execution is under
        // way (it never runs the call itself).
        for r in &results {
            let ok_or_pending = r.status == ToolStatus::Ok
                || r.error
                    .as_ref()
                    .is_some_and(|e| e.message.contains("never recorded"));
            assert!(ok_or_pending, "{r:?}");
        }
        // Once recorded, both copies replay it.
        for core in [&a, &b] {
            let again = execute(core, refund("call-late"), Caller::default()).await;
            assert_eq!(again.status, ToolStatus::Ok, "{again:?}");
            assert_eq!(again.via, "idempotent-replay");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_raw_output_stored_by_one_copy_is_read_by_another() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let a = executor_copy(&nats.url(), &dir.path().join("a"), &calls).await;
        let b = executor_copy(&nats.url(), &dir.path().join("b"), &calls).await;
        let output = json!({"rows": (0..50).collect::<Vec<_>>()});
        let reference = a
            .stores
            .raw
            .store("report", "call-1", &output)
            .await
            .unwrap();
        let read = b
            .stores
            .raw
            .find(&reference)
            .await
            .unwrap()
            .expect("b reads a's output");
        assert_eq!(read.output, output);
        assert!(b.stores.raw.find("raw-missing").await.unwrap().is_none());
        assert!(b.stores.raw.find("not a key!").await.unwrap().is_none());
    });
}
