//! `agentnotify`: the broker daemon and the command line for people and scripts.

/// jemalloc keeps thousands of parked connections cheap (see Cargo.toml); the hook binary
/// keeps the system allocator.
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    std::process::exit(agentnotify::cli::main(std::env::args_os().collect()));
}
