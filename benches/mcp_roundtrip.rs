//! MCP call overhead: one `tools/call` round trip (client → server → client) to the demo
//! catalog server's `get_product`, three ways:
//! - `duplex`: rmcp client and server in-process over an in-memory pipe (the protocol floor);
//! - `stdio`: Hermes' `RmcpClient` to `hermes mcp catalog-server` as a child process;
//! - `http`: Hermes' `RmcpClient` to the catalog server over Streamable HTTP on loopback.
//!
//! Besides criterion's estimates it prints p50/p99 of 500 timed calls per transport. Run by
//! `cargo test` (no `--bench` argument) it only makes 20 calls per transport, unmeasured by
//! criterion, so the suite stays fast and the bench cannot rot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use hermes::config::McpServerConfig;
use hermes::mcp::catalog_server::{serve_catalog, Catalog, CatalogServer};
use hermes::mcp::client::RmcpClient;
use hermes::mcp::McpClient;
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use serde_json::json;

const SAMPLES: usize = 500;
const SMOKE_SAMPLES: usize = 20;

fn percentiles(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    eprintln!(
        "mcp_roundtrip/{name}: p50 {:?}  p99 {:?}  (n = {})",
        at(0.50),
        at(0.99),
        samples.len()
    );
}

async fn http_catalog() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = StreamableHttpService::new(
        || Ok(CatalogServer::new(Catalog::embedded().unwrap())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

fn roundtrip(c: Option<&mut Criterion>) {
    let samples = if c.is_some() { SAMPLES } else { SMOKE_SAMPLES };
    let mut c = c;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let arguments = json!({"sku": "SONY-WH1000XM6"});

    // In-process, over a duplex pipe.
    let (server, client) = rt.block_on(async {
        let (server_end, client_end) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(serve_catalog(server_end));
        let client = ClientConfig::new(Default::default(), Implementation::new("bench", "0"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .serve(client_end)
            .await
            .unwrap();
        (server.await.unwrap().unwrap(), client)
    });
    let params = || {
        CallToolRequestParams::new("get_product")
            .with_arguments(arguments.as_object().unwrap().clone())
    };
    let timed: Vec<Duration> = rt.block_on(async {
        let mut out = Vec::with_capacity(samples);
        for _ in 0..samples {
            let started = Instant::now();
            client.call_tool(params()).await.unwrap();
            out.push(started.elapsed());
        }
        out
    });
    percentiles("duplex", timed);
    if let Some(c) = c.as_deref_mut() {
        c.bench_function("mcp_roundtrip/duplex", |b| {
            b.to_async(&rt)
                .iter(|| async { client.call_tool(params()).await.unwrap() })
        });
    }

    // Hermes' client: stdio child and Streamable HTTP.
    let stdio = McpServerConfig {
        name: "catalog".into(),
        command: env!("CARGO_BIN_EXE_hermes").into(),
        args: vec!["mcp".into(), "catalog-server".into()],
        ..Default::default()
    };
    let url = rt.block_on(http_catalog());
    let http = McpServerConfig {
        name: "catalog-http".into(),
        url: Some(url),
        ..Default::default()
    };
    for (name, config) in [("stdio", stdio), ("http", http)] {
        let ours = rt
            .block_on(RmcpClient::connect(
                &config,
                std::path::Path::new("/nonexistent"),
            ))
            .unwrap();
        let timed: Vec<Duration> = rt.block_on(async {
            let mut out = Vec::with_capacity(samples);
            for _ in 0..samples {
                let started = Instant::now();
                ours.call_tool("get_product", arguments.clone(), Duration::from_secs(10))
                    .await
                    .unwrap();
                out.push(started.elapsed());
            }
            out
        });
        percentiles(name, timed);
        if let Some(c) = c.as_deref_mut() {
            c.bench_function(&format!("mcp_roundtrip/{name}"), |b| {
                b.to_async(&rt).iter(|| {
                    ours.call_tool("get_product", arguments.clone(), Duration::from_secs(10))
                })
            });
        }
        rt.block_on(ours.shutdown());
    }
    rt.block_on(async {
        let _ = client.cancel().await;
        let _ = server.cancel().await;
    });
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        roundtrip(None);
        return;
    }
    let mut criterion = Criterion::default()
        .sample_size(50)
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    roundtrip(Some(&mut criterion));
    criterion.final_summary();
}
