//! Hermes' protocol: the bottom layer every other crate builds on (the engine, `hermes-client`).
//! It depends on nothing else of Hermes and on no async runtime — serde, and schemars for the
//! JSON Schema.
//!
//! - [`envelope`]: the versioned JSON envelope every payload travels in, and its checks.
//! - [`subjects`]: every subject name and the id rules that keep subjects safe.
//! - [`kinds`]: the envelope kinds.
//! - [`request`]: each request type names its subject, its kind and its reply type once, so
//!   encoding, decoding and dispatch follow from the type.
//! - The bodies, by concern: [`chat`] (messages, tool calls, usage), [`session`] (inbound
//!   messages, planning, turn events), [`tool`] (definitions, calls, results, jobs), [`memory`]
//!   (recall, writes, extraction), [`mcp`] (mounted servers, calls, audit), [`session_view`]
//!   (stored sessions as `hermes sessions` reads them).
//! - [`schema`]: the JSON Schema of all of it, as committed under `schema/`.
//!
//! Wire types are not storage formats: records kept in sled have types of their own in the
//! module that owns the tree, converted at the edge.

pub mod chat;
pub mod envelope;
#[cfg(test)]
mod envelope_props;
pub mod kinds;
pub mod mcp;
pub mod memory;
pub mod refusal;
pub mod request;
pub mod schema;
pub mod session;
pub mod session_view;
pub mod status;
pub mod subjects;
pub mod timestamp;
pub mod tool;

pub use chat::*;
pub use mcp::*;
pub use memory::*;
pub use session::*;
pub use session_view::*;
pub use status::*;
pub use tool::*;
