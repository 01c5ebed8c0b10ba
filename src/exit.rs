//! One exit-code table for both programs: `agentnotify` and the setup commands of
//! `agentnotify-hook` (the bridge itself always exits 0, whatever happens). Scripts can
//! tell a typo from a missing record from a failure; each top-level error maps into it.

use std::fmt::Display;

/// How a command ended, as its process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done, or all is well.
    Ok = 0,
    /// Refused or failed (a problem `doctor` found, too).
    Error = 1,
    /// The command line is wrong: unknown command or option, missing or malformed argument.
    Usage = 2,
    /// What the command names does not exist.
    NotFound = 3,
}

/// The table as `--help` and the docs state it.
pub const TABLE: &str = "0 ok, 1 error, 2 usage, 3 not found";

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// An error that knows its row of the table.
pub trait ExitStatus: Display {
    fn exit(&self) -> Exit;
}

/// Prints `error` on stderr as one line, after the program's name; returns its exit code.
pub fn fail(program: &str, error: &impl ExitStatus) -> i32 {
    eprintln!("{program}: {error}");
    error.exit().code()
}

/// Prints clap's message (help and version on stdout, errors on stderr); returns the code:
/// 0 for help and version, 2 for a command line clap refused.
pub fn clap_error(error: &clap::Error) -> i32 {
    let _ = error.print();
    if error.use_stderr() {
        Exit::Usage.code()
    } else {
        Exit::Ok.code()
    }
}
