//! `agentnotify`: the broker daemon and the command line for people and scripts.

/// Links jemalloc in as this process's `malloc`: it keeps thousands of parked connections
/// cheap (see Cargo.toml). The hook binary keeps the system allocator.
#[cfg(all(unix, not(target_env = "musl")))]
use tikv_jemalloc_sys as _;

fn main() {
    std::process::exit(agentnotify::cli::main(std::env::args_os().collect()));
}
