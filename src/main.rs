//! The `hermes` command line. Errors here are `anyhow`: this is the edge where they are
//! printed for a person.

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
