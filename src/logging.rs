//! Logging to a rotating file under the state dir (SPEC §3.6). Never to stdout: stdout is
//! the hook's decision channel. What may be logged: ids, kinds, statuses, sources, timings —
//! never prompts, choices, answers, digests, nonces or tokens.

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation};
use tracing_subscriber::EnvFilter;

use crate::paths::Paths;

/// Starts logging to `logs/<name>.YYYY-MM-DD.log`; keep the guard alive until exit.
/// Returns `None` (and logs nothing) if the log folder cannot be used.
pub fn init(paths: &Paths, name: &str, default_level: &str) -> Option<WorkerGuard> {
    paths.ensure_dirs().ok()?;
    let appender = Builder::new()
        .rotation(Rotation::DAILY)
        .filename_prefix(name)
        .filename_suffix("log")
        .max_log_files(7)
        .build(paths.logs_dir())
        .ok()?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_env("AGENTNOTIFY_LOG")
        .unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .ok()?;
    Some(guard)
}

/// Like [`init`] but writes synchronously: for short-lived processes (the hook) that exit
/// with `std::process::exit`, where a background writer would lose the last lines.
pub fn init_blocking(paths: &Paths, name: &str, default_level: &str) -> Option<()> {
    paths.ensure_dirs().ok()?;
    let appender = Builder::new()
        .rotation(Rotation::DAILY)
        .filename_prefix(name)
        .filename_suffix("log")
        .max_log_files(7)
        .build(paths.logs_dir())
        .ok()?;
    let filter = EnvFilter::try_from_env("AGENTNOTIFY_LOG")
        .unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(appender))
        .with_ansi(false)
        .try_init()
        .ok()
}
