//! Errors of the setup layer. Each message says what is wrong, that nothing was changed
//! when that is the case, and how to fix it.

use std::path::PathBuf;

/// Everything that can stop `install-harness`, `uninstall-harness` or `doctor`.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot find your home folder: set HOME")]
    NoHome,

    #[error("cannot read the current folder; run the command from an existing folder")]
    NoCwd,

    #[error(
        "CODEX_HOME points to {path}, which cannot be opened ({source}); \
         create that folder or unset CODEX_HOME"
    )]
    CodexHome {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{path} is not valid JSON ({message}, line {line}, column {column}); nothing was changed. \
         Fix the file, or re-run with --force to replace it (its current content is kept in a .bak file)"
    )]
    InvalidJson {
        path: PathBuf,
        message: String,
        line: usize,
        column: usize,
    },

    #[error(
        "{path}: {problem}; nothing was changed. Fix the file, or re-run with --force to \
         replace that value (the current file is kept in a .bak file)"
    )]
    WrongShape { path: PathBuf, problem: String },

    #[error("{path}: {problem}; nothing was changed. Fix the file by hand and try again")]
    WrongShapeNoForce { path: PathBuf, problem: String },

    #[error(
        "{path} is not valid TOML ({message}); nothing was changed. Fix it (Codex cannot \
         start with it either) and try again"
    )]
    InvalidToml { path: PathBuf, message: String },

    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot find this program's own path ({0}); pass --command-path")]
    CurrentExe(#[source] std::io::Error),

    #[error("--command-path {path}: {reason}")]
    BadCommandPath { path: PathBuf, reason: String },

    #[error(transparent)]
    Paths(#[from] crate::paths::PathsError),
}

impl SetupError {
    /// Shorthand for an I/O error on a named file.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SetupError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl crate::exit::ExitStatus for SetupError {
    /// Every setup error is a refusal or a failure; usage errors are clap's.
    fn exit(&self) -> crate::exit::Exit {
        crate::exit::Exit::Error
    }
}
