//! Hermes: an event-driven, actor-based agent engine.
//!
//! Five actix actors — Session, Planner, Tool-executor, MCP-bridge, Memory-extractor — talk
//! only through messages on NATS subjects ([`bus`]), keep their state in sled, and never block
//! one another. See `DESIGN.md` for the plan and `README.md` for use.

pub mod a2a;
pub mod actors;
pub mod backup;
pub mod bench;
pub mod bus;
pub mod client;
pub mod config;
pub mod context;
pub mod engine;
pub mod eval;
pub mod http;
pub mod llm;
pub mod mcp;
pub mod memory;
/// The wire, from its own crate (`crates/hermes-protocol`), under the path the engine has
/// always used for it.
pub use hermes_protocol as protocol;
pub mod runtime;
pub mod serving;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod turn;
