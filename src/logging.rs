//! Logging to a rotating file under the state dir (SPEC §3.6). Never to stdout: stdout is
//! the hook's decision channel. What may be logged: ids, kinds, statuses, sources, timings —
//! never prompts, choices, answers, digests, nonces or tokens.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

use crate::model::Timestamp;
use crate::paths::Paths;

/// Log lines the background writer may have queued before new ones are dropped.
const QUEUED_LINES: usize = 4096;
/// Daily files kept per program.
const KEEP_FILES: usize = 7;
const DAY_MS: u64 = 86_400_000;

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

/// Daily files, a week kept; `None` when the folders are missing or not safely ours.
fn appender(paths: &Paths, name: &str) -> Option<DailyFile> {
    paths.ensure_dirs().ok()?;
    Some(DailyFile {
        dir: paths.logs_dir(),
        name: name.to_string(),
        file: None,
        day_ends: 0,
    })
}

/// `logs/<name>.YYYY-MM-DD.log` (UTC days), appended to. Written here rather than with
/// tracing-appender's roller, which opens its files with the default mode and follows a
/// symlink planted in their place: these are opened 0600 and never through a symlink, and
/// one owned by someone else is not written to.
struct DailyFile {
    dir: PathBuf,
    name: String,
    file: Option<File>,
    /// When the current file's day ends (Unix millis).
    day_ends: u64,
}

impl DailyFile {
    fn current(&mut self) -> std::io::Result<&mut File> {
        let now = Timestamp::now().millis();
        if self.file.is_none() || now >= self.day_ends {
            self.file = None;
            let day = &Timestamp(now).to_rfc3339()[..10];
            let path = self.dir.join(format!("{}.{day}.log", self.name));
            self.file = Some(open_log(&path)?);
            self.day_ends = (now / DAY_MS + 1) * DAY_MS;
            self.prune();
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    /// Keeps the newest [`KEEP_FILES`] of this program's files.
    fn prune(&self) {
        let prefix = format!("{}.", self.name);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".log"))
            .collect();
        names.sort();
        let excess = names.len().saturating_sub(KEEP_FILES);
        for old in &names[..excess] {
            let _ = std::fs::remove_file(self.dir.join(old));
        }
    }
}

fn open_log(path: &std::path::Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if file.metadata()?.uid() != unsafe { libc::geteuid() } {
            return Err(std::io::Error::other(
                "the log file belongs to someone else",
            ));
        }
    }
    Ok(file)
}

impl Write for DailyFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.current()?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
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
