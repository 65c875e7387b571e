#![allow(dead_code)]
//! Test helpers: real nats-server, real MCP servers, fake model servers speaking the Chat
//! Completions, Responses and Anthropic Messages wire formats, a local
//! OTLP trace receiver, the engine in-process and `hermes` as a child process.

pub mod a2a_sdk;
pub mod asking_mcp;
pub mod dynamic_mcp;
pub mod engine;
pub mod fake_anthropic;
pub mod fake_embeddings;
pub mod fake_http;
pub mod fake_openai;
pub mod fake_responses;
pub mod hermes_proc;
pub mod ledger_mcp;
pub mod mcp_servers;
pub mod nats_roles;
pub mod nats_server;
pub mod oauth_server;
pub mod otlp_receiver;
pub mod provider_engine;
pub mod pty;
pub mod python_worker;
pub mod runtime;
pub mod scenario;
pub mod strict_mcp;
pub mod task_mcp;
pub mod tasks_fixture;
pub mod trace_probe_mcp;
