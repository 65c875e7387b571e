//! The `hermes` command line. Errors here are `anyhow`: this is the edge where they are
//! printed for a person.

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its position in `mi_option_e`, the same in mimalloc 2
/// and 3; libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    purge_freed_memory_at_once();
    cli::main()
}

/// mimalloc 3 keeps freed pages for 1 s and freed arena memory for 10 s before returning them
/// to the system, and only purges on a thread that allocates again. A thread that built a
/// large temporary (the token-rank table is built from tiktoken's 200k-entry encoder, ~38 MB
/// of garbage) and then went idle kept it resident for good, and a burst of turns left its
/// garbage counted in the RSS of idle sessions. Purging at once costs about one `madvise`
/// per two W1 turns, 5–8% of a W1 turn's CPU on a 2-core VM, for 15–40 MB less RSS.
/// `MIMALLOC_PURGE_DELAY` in the environment still decides when it is set (1000 is
/// mimalloc's default).
fn purge_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a global allocator option (an atomic store in mimalloc); called
        // before any other thread exists.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}
