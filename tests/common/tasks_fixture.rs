//! The conformance tasks fixture (examples/conformance_tasks_server, the server
//! scripts/conformance.sh runs the suite's `tasks-*` scenarios against through Hermes),
//! built from the same files into the tests: tools whose calls become tasks that complete,
//! fail with a tool error or a JSON-RPC error, wait for input (`tasks/update`) or are
//! cancelled, and that refuse (`-32021`) a client without the tasks extension.

#[path = "../../examples/conformance_tasks_server/server.rs"]
mod server;
#[path = "../../examples/conformance_tasks_server/store.rs"]
mod store;
#[path = "../../examples/conformance_tasks_server/tools.rs"]
mod tools;

pub use server::Fixture;

/// Serve a fresh fixture on a free loopback port; returns `http://127.0.0.1:<port>/mcp`.
pub async fn serve() -> String {
    serve_observed().await.0
}

/// [`serve`], with the fixture to look at its tasks.
pub async fn serve_observed() -> (String, Fixture) {
    let fixture = Fixture::default();
    let url = crate::common::dynamic_mcp::serve_http(fixture.clone()).await;
    (url, fixture)
}
