//! A tasks-extension MCP server (`io.modelcontextprotocol/tasks`, SEP-2663) for the official
//! conformance suite's `tasks-*` scenarios: scripts/conformance.sh starts it, mounts it in
//! Hermes (`[mcp.server] passthrough`) and runs the scenarios against Hermes, so what is
//! tested is Hermes forwarding tasks. The suite ships no such server (its everything-server
//! has none of these tools), hence this one, written from the scenario files.
//!
//! The tests build the same server into tests/common/tasks_fixture.rs.
//!
//! `PORT=<port> cargo run --example conformance_tasks_server` serves Streamable HTTP at
//! `http://127.0.0.1:<port>/mcp` (port 0: a free one) and prints `running on <url>`.

mod server;
mod store;
mod tools;

use std::sync::Arc;

use anyhow::Context;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use server::Fixture;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .with_context(|| format!("PORT `{port}` is not a port number"))?,
        Err(_) => 0,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}; choose another PORT"))?;
    let address = listener.local_addr()?;
    let fixture = Fixture::default();
    let service = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    println!("running on http://{address}/mcp");
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                eprintln!("a connection ended with an error: {error}");
            }
        });
    }
}
