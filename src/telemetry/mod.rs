//! Seeing inside (DESIGN §9): what the engine counts and times about itself, and the traces of
//! its turns. [`metrics`] owns the Prometheus metrics every process records and renders for
//! `/metrics` (served by [`crate::http`]). [`spans`] names the spans of a turn after the
//! OpenTelemetry GenAI conventions, [`trace_context`] carries their context across processes
//! (NATS headers, MCP `_meta`), and [`otel`] exports them over OTLP when `[telemetry]` says
//! where.

mod export;
pub mod metrics;
pub mod otel;
pub mod spans;
pub mod trace_context;
