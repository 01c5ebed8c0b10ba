//! Setup of host configuration files: `install-harness`, `uninstall-harness`, `doctor` (SPEC §7).

use std::ffi::OsString;

/// Runs a setup command (`args[1]` is the subcommand) and returns the process exit code.
pub fn main(args: &[OsString]) -> i32 {
    let _ = args;
    eprintln!("agentnotify-hook: setup commands are not built yet");
    1
}
