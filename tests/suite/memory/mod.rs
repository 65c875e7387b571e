//! Memory: the service subjects over the bus, durable extraction, embedders, the CLI and eval.

mod cli;
mod copies;
mod eval;
mod service;
