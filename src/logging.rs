//! Logging to a rotating file under the state dir (SPEC §3.6). Never to stdout: stdout is
//! the hook's decision channel. What may be logged: ids, kinds, statuses, sources, timings —
//! never prompts, choices, answers, digests, nonces or tokens.

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, RollingFileAppender, Rotation};
use tracing_subscriber::EnvFilter;

use crate::paths::Paths;

/// Log lines the background writer may have queued before new ones are dropped.
const QUEUED_LINES: usize = 4096;

/// Starts logging to `logs/<name>.YYYY-MM-DD.log` through a background writer; keep the
/// guard alive until exit. `None` (and no logging) if the log folder cannot be used.
///
/// The queue holds [`QUEUED_LINES`] lines rather than tracing-appender's 128,000: its
/// slots are written up front, so the default alone would keep 4 MiB resident in an idle
/// broker. A burst beyond the queue drops lines instead of blocking the broker.
pub fn init(paths: &Paths, name: &str, default_level: &str) -> Option<WorkerGuard> {
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(QUEUED_LINES)
        .lossy(true)
        .finish(appender(paths, name)?);
    install(writer, default_level)?;
    Some(guard)
}

/// Like [`init`] but writes synchronously: for short-lived processes (the hook) that exit
/// with `std::process::exit`, where a background writer would lose the last lines.
pub fn init_blocking(paths: &Paths, name: &str, default_level: &str) -> Option<()> {
    install(std::sync::Mutex::new(appender(paths, name)?), default_level)
}

/// Daily files, a week kept.
fn appender(paths: &Paths, name: &str) -> Option<RollingFileAppender> {
    paths.ensure_dirs().ok()?;
    Builder::new()
        .rotation(Rotation::DAILY)
        .filename_prefix(name)
        .filename_suffix("log")
        .max_log_files(7)
        .build(paths.logs_dir())
        .ok()
}

/// Level from `AGENTNOTIFY_LOG` (tracing's filter syntax), else `default_level`.
fn install<W>(writer: W, default_level: &str) -> Option<()>
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_env("AGENTNOTIFY_LOG")
        .unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .ok()
}
