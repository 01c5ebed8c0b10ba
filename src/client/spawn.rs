//! Attach-or-spawn (SPEC §3.5): find the running broker through `broker.json` and
//! `/health`; if none answers, start one under `spawn.lock`, detached from the caller.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{from_files, Client, ClientError, Result};
use crate::paths::Paths;

const HEALTH_TIMEOUT: Duration = Duration::from_millis(800);
/// How long a client waits for a broker it started to become healthy.
const SPAWN_DEADLINE: Duration = Duration::from_secs(3);
/// How long a client without a budget of its own (the CLI) waits for `spawn.lock`.
const LOCK_WAIT: Duration = Duration::from_secs(6);
/// Longest pause between two tries of `spawn.lock`.
const LOCK_POLL_MAX: Duration = Duration::from_millis(25);

/// The broker named by the env override or `broker.json`, if it answers and speaks our API.
pub async fn attach(paths: &Paths) -> Result<Option<Client>> {
    if let Some(client) = Client::from_env_override() {
        return Ok(Some(client));
    }
    // Nothing is read from a folder or file someone else could have planted.
    paths.check()?;
    let Some((client, info)) = from_files(paths) else {
        return Ok(None);
    };
    match client.health(HEALTH_TIMEOUT).await {
        Ok(h) if h["api"] == crate::API_VERSION => Ok(Some(client)),
        Ok(h) => {
            // Another API generation: ask it to exit once idle, so the next client can start
            // a matching broker; this request falls back meanwhile.
            let _ = client.shutdown_when_idle().await;
            Err(ClientError::NoBroker(format!(
                "the running broker (pid {}) speaks API {} (version {}), this client needs {}; it was asked to exit once nothing is pending",
                info.pid, h["api"], h["version"], crate::API_VERSION
            )))
        }
        // Stale broker.json (dead pid, wrong port): treated as no broker.
        Err(_) => Ok(None),
    }
}

/// Attaches to the running broker, or starts one and waits (≤3 s) until it is healthy.
/// Twenty callers at once still start exactly one broker: the spawn lock serialises them
/// and each re-checks after taking it.
pub async fn attach_or_spawn(paths: &Paths) -> Result<Client> {
    attach_or_spawn_by(paths, Instant::now() + LOCK_WAIT + SPAWN_DEADLINE).await
}

/// [`attach_or_spawn`] within a caller's budget: no wait in it outlasts `deadline`.
///
/// The lock is tried without blocking, with short async pauses: a thread blocked in
/// `flock` could not be cancelled, and runtime shutdown would wait for it (a hook told to
/// stop would hang for as long as another process holds the lock).
pub async fn attach_or_spawn_by(paths: &Paths, deadline: Instant) -> Result<Client> {
    if let Some(client) = attach(paths).await? {
        return Ok(client);
    }
    paths
        .ensure_dirs()
        .map_err(|e| ClientError::NoBroker(e.to_string()))?;
    let lock = lock_spawn(paths, deadline).await?;
    let result = spawn_locked(paths, deadline).await;
    drop(lock);
    result
}

/// Takes `spawn.lock`, or gives up at `deadline`.
async fn lock_spawn(paths: &Paths, deadline: Instant) -> Result<std::fs::File> {
    let file = crate::fsutil::open_lock_file(&paths.spawn_lock())
        .map_err(|e| ClientError::NoBroker(format!("cannot open spawn.lock: {e}")))?;
    let mut pause = Duration::from_millis(2);
    let mut waited = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(ClientError::NoBroker(format!(
                    "cannot lock spawn.lock: {e}"
                )))
            }
        }
        if !waited {
            waited = true;
            tracing::info!("another client is starting the broker; waiting for spawn.lock");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::NoBroker(
                "timed out waiting for spawn.lock".into(),
            ));
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(LOCK_POLL_MAX);
    }
}

async fn spawn_locked(paths: &Paths, deadline: Instant) -> Result<Client> {
    if let Some(client) = attach(paths).await? {
        return Ok(client);
    }
    let exe = broker_executable().map_err(ClientError::NoBroker)?;
    let mut child = detached(&exe)
        .spawn()
        .map_err(|e| ClientError::NoBroker(format!("cannot start {}: {e}", exe.display())))?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(client) = attach(paths).await? {
            return Ok(client);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It exited: either another broker holds the lock (then attach finds it next
            // round) or it failed to start.
            if attach(paths).await?.is_some() {
                continue;
            }
            return Err(ClientError::NoBroker(format!(
                "the broker exited at start ({status}); see the broker log"
            )));
        }
        if started.elapsed() > SPAWN_DEADLINE || Instant::now() >= deadline {
            return Err(ClientError::NoBroker(
                "the broker did not become healthy in time (at most 3 s)".into(),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(25));
    }
}

/// `agentnotify daemon --on-demand`, detached: its own session and process group, and
/// no stdio inherited (a host refuses an allow while a child still holds the hook's stdout,
/// and kills the hook's process group on timeout).
fn detached(exe: &PathBuf) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("daemon")
        .arg("--on-demand")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd
}

/// The `agentnotify` executable: `AGENTNOTIFY_BIN`, else next to the running executable,
/// else on `PATH`.
pub fn broker_executable() -> std::result::Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("AGENTNOTIFY_BIN").filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let name = format!("agentnotify{}", std::env::consts::EXE_SUFFIX);
    if let Ok(me) = std::env::current_exe() {
        if let Some(dir) = me.parent() {
            let sibling = dir.join(&name);
            if sibling.is_file() {
                return Ok(sibling);
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(&name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err("cannot find the `agentnotify` executable next to this one or on PATH".into())
}
