//! Validation + dispatch overhead of one tool call (the `add` built-in, so tool work is ~0):
//!
//! - `validate/*`: the registry's whitelist + schema validation (+ repair) alone;
//! - `execute/add`: the executor's call path without a bus (validation, run; `add`'s short
//!   output is not copied to the raw store);
//! - `dispatch/embedded`, `dispatch/nats`: a full request on `hermes.tool.add` to a running
//!   tool-executor actor and its reply. NATS runs only when `HERMES_NATS_SERVER` points to a
//!   nats-server binary (it is started on a free port), else it is skipped with a message.
//!
//! Besides criterion's means, each dispatch prints p50/p99 over 2000 sequential calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

use hermes::actors::tool_executor::{build_registry, execute, Caller, ExecCore};
use hermes::actors::ActorSet;
use hermes::bus::{rpc, SharedBus};
use hermes::config::Config;
use hermes::engine::Engine;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{ToolCallRequest, ToolCallResult};
use hermes::tools::metrics::ExecutorMetrics;
use hermes::tools::stores::ToolStores;

fn config(url: &str, dir: &std::path::Path) -> Config {
    let mut c = Config::demo().unwrap();
    c.bus.url = url.to_string();
    c.engine.data_dir = dir.to_path_buf();
    c.mcp.servers = Vec::new();
    c
}

/// Start a tool-executor on `url` in its own thread; returns the bus it serves on.
fn start_executor(url: &str, dir: &std::path::Path) -> SharedBus {
    let config = Arc::new(config(url, dir));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let handle = io.handle().clone();
        actix::System::new().block_on(async move {
            let actors = ActorSet::parse("tool-executor").unwrap();
            let engine = Engine::start(config, actors, handle).await.unwrap();
            tx.send(engine.bus.clone()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv_timeout(Duration::from_secs(60)).unwrap()
}

fn add_request(i: u64) -> Envelope<ToolCallRequest> {
    Envelope::request(ToolCallRequest {
        call_id: format!("c{i}"),
        name: "add".into(),
        arguments: json!({"a": "40", "b": 2}),
        ..Default::default()
    })
}

async fn dispatch(bus: &SharedBus, i: u64) {
    let reply: Envelope<ToolCallResult> =
        rpc::request(bus.as_ref(), add_request(i), Duration::from_secs(10))
            .await
            .unwrap();
    assert_eq!(reply.body.output["result"], 42);
}

fn percentiles(label: &str, rt: &tokio::runtime::Runtime, bus: &SharedBus) {
    let mut samples: Vec<Duration> = rt.block_on(async {
        let mut out = Vec::with_capacity(2000);
        for i in 0..2000 {
            let t = Instant::now();
            dispatch(bus, i).await;
            out.push(t.elapsed());
        }
        out
    });
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "{label}: p50 {:?}  p99 {:?}  (2000 sequential calls)",
        at(0.50),
        at(0.99)
    );
}

fn bench_dispatch(
    c: &mut Criterion,
    label: &str,
    connect: impl FnOnce(&tokio::runtime::Runtime) -> SharedBus,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let bus = connect(&rt);
    rt.block_on(dispatch(&bus, 0));
    percentiles(label, &rt, &bus);
    c.bench_function(label, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for i in 0..iters {
                    dispatch(&bus, i).await;
                }
                t.elapsed()
            })
        })
    });
}

fn validation(c: &mut Criterion) {
    let cfg = Config::demo().unwrap();
    let stores = ToolStores::temporary().unwrap();
    let (registry, _) = build_registry(&cfg.tools, &stores, None).unwrap();
    c.bench_function("validate/add_valid", |b| {
        b.iter(|| registry.prepare("add", json!({"a": 40, "b": 2})).unwrap())
    });
    c.bench_function("validate/order_lookup_repaired", |b| {
        b.iter(|| {
            registry
                .prepare(
                    "order_lookup",
                    json!({"order_date": "2025/11/11", "category": "Headphones", "limit": "3"}),
                )
                .unwrap()
        })
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = hermes::store::durability::Durable::from(hermes::store::open(dir.path()).unwrap());
    let bus = rt
        .block_on(hermes::bus::connect("embedded", Some(db.clone())))
        .unwrap();
    let core = ExecCore {
        registry,
        workers: Arc::default(),
        stores: ToolStores::open(&db).unwrap(),
        metrics: ExecutorMetrics::default(),
        bus,
        io: rt.handle().clone(),
    };
    c.bench_function("execute/add", |b| {
        b.iter(|| rt.block_on(execute(&core, add_request(0).body, Caller::default())))
    });
}

fn embedded(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let bus = start_executor("embedded", dir.path());
    bench_dispatch(c, "dispatch/embedded", |_| bus);
}

struct NatsProcess(Child);
impl Drop for NatsProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nats(c: &mut Criterion) {
    let Some(binary) = std::env::var_os("HERMES_NATS_SERVER") else {
        println!("dispatch/nats: skipped (set HERMES_NATS_SERVER to a nats-server binary)");
        return;
    };
    let port = TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = tempfile::tempdir().unwrap();
    let _server = NatsProcess(
        Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nats-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("nats://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let _executor = start_executor(&url, dir.path());
    bench_dispatch(c, "dispatch/nats", |rt| {
        rt.block_on(hermes::bus::connect(&url, None)).unwrap()
    });
}

fn quick() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = quick();
    targets = validation, embedded, nats
}
criterion_main!(benches);
