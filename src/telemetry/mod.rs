//! Seeing inside (DESIGN §9): what the engine counts and times about itself. [`metrics`] owns
//! the Prometheus metrics every process records and renders for `/metrics` (served by
//! [`crate::http`]).

pub mod metrics;
