mod bad_input;
mod bus_contract;
mod demo_cli;
mod mcp_bridge;
mod mcp_client;
mod multi_process;
mod openai_provider;
mod turn_loop;
