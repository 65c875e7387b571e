mod bad_input;
mod demo_cli;
mod multi_process;
mod turn_loop;
