//! Hermes: an event-driven, actor-based agent engine.
//!
//! Five actix actors — Session, Planner, Tool-executor, MCP-bridge, Memory-extractor — talk
//! only through messages on NATS subjects ([`bus`]), keep their state in sled, and never block
//! one another. See `DESIGN.md` for the plan and `README.md` for use.

pub mod bus;
pub mod config;
pub mod llm;
pub mod mcp;
pub mod memory;
pub mod tools;
