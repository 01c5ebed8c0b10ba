//! `agentnotify`: the broker daemon and the command line for people and scripts.

fn main() {
    std::process::exit(agentnotify::cli::main(std::env::args_os().collect()));
}
