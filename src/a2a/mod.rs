//! A2A (Agent2Agent 1.0, Linux Foundation): Hermes agents served to agents of any framework,
//! and agents of any framework reached from Hermes.
//!
//! - [`wire`]: the protocol's types — the official `a2a-lf` crate, re-exported from this one
//!   place, so a spec or crate upgrade touches this module only.
//! - [`ids`]: how A2A ids map onto Hermes ids (a `contextId` is a session, a task id names a
//!   session's turn, a `messageId` becomes the envelope id that deduplicates retries).
//! - [`tasks`]: a turn's durable state (read over the bus) as an A2A `Task`.
//! - [`sessions`]: sessions reached over the bus; [`push`] and [`push_store`]: webhooks.
//! - [`client`] and [`delegate`]: remote A2A agents as delegates of local ones.
//! - [`server`]: the A2A server on Hermes' HTTP listener (`hermes serve --http`): Agent Cards,
//!   the JSON-RPC 2.0 and HTTP+JSON bindings, SSE streams and push notifications.

pub mod client;
pub mod delegate;
pub mod ids;
pub mod kv;
pub mod push;
pub mod push_store;
pub mod server;
pub mod sessions;
pub mod tasks;

/// The A2A protocol's types (the `a2a-lf` crate), the only way the rest of Hermes names them.
pub mod wire {
    pub use a2a_types::*;
}

/// The protocol version Hermes speaks (`A2A-Version`, `protocolVersion` in cards).
pub const PROTOCOL_VERSION: &str = "1.0";
/// The header naming the protocol version of a request.
pub const VERSION_HEADER: &str = "A2A-Version";
