//! The live status page at `/` of Hermes' HTTP endpoint: the whole deployment as read over the
//! bus — sessions and their turn states, the last tool calls, memory writes and recalls, the
//! mounted MCP servers, the processes and small charts of the seeds' measures — pushed to the
//! browser as server-sent events (`/events`), so it updates without a reload. `/api/live`
//! answers the same snapshot once, as JSON.

pub mod feed;
pub mod page;
pub mod state;

pub use feed::Snapshots;

#[cfg(test)]
mod state_tests;
