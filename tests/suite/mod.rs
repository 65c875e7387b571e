mod bad_input;
mod bus_contract;
mod demo_cli;
mod mcp_client;
mod multi_process;
mod openai_provider;
mod sessions;
mod turn_loop;
