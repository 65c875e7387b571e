mod bad_input;
mod demo_cli;
mod multi_process;
mod openai_provider;
mod turn_loop;
