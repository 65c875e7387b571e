#![allow(dead_code)]
pub mod mcp_servers;
