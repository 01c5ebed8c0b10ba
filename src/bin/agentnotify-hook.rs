//! `agentnotify-hook`: the host bridge (`<claude|codex> ask-permission`) and setup commands.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("install-harness" | "uninstall-harness" | "doctor") => {
            std::process::exit(agentnotify::setup::main(&args))
        }
        _ => agentnotify::hook::main(args),
    }
}
