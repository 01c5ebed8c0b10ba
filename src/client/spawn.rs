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

/// The broker named by the env override or `broker.json`, if it answers and speaks our API.
pub async fn attach(paths: &Paths) -> Result<Option<Client>> {
    if let Some(client) = Client::from_env_override() {
        return Ok(Some(client));
    }
    let Some((client, info)) = from_files(paths) else {
        return Ok(None);
    };
    match client.health(HEALTH_TIMEOUT).await {
        Ok(h) if h["api"] == crate::API_VERSION => Ok(Some(client)),
        Ok(h) => Err(ClientError::NoBroker(format!(
            "the running broker (pid {}) speaks API {} (version {}), this client needs {}; stop it with `agentnotify stop` once nothing is pending",
            info.pid, h["api"], h["version"], crate::API_VERSION
        ))),
        // Stale broker.json (dead pid, wrong port): treated as no broker.
        Err(_) => Ok(None),
    }
}

/// Attaches to the running broker, or starts one and waits (≤3 s) until it is healthy.
/// Twenty callers at once still start exactly one broker: the spawn lock serialises them
/// and each re-checks after taking it.
pub async fn attach_or_spawn(paths: &Paths) -> Result<Client> {
    if let Some(client) = attach(paths).await? {
        return Ok(client);
    }
    paths
        .ensure_dirs()
        .map_err(|e| ClientError::NoBroker(e.to_string()))?;
    let lock_path = paths.spawn_lock();
    let lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
        let file = crate::fsutil::open_lock_file(&lock_path)?;
        file.lock()?;
        Ok(file)
    });
    let lock = tokio::time::timeout(SPAWN_DEADLINE * 2, lock)
        .await
        .map_err(|_| ClientError::NoBroker("timed out waiting for spawn.lock".into()))?
        .map_err(|e| ClientError::NoBroker(e.to_string()))?
        .map_err(|e| ClientError::NoBroker(format!("cannot lock spawn.lock: {e}")))?;
    let result = spawn_locked(paths).await;
    drop(lock);
    result
}

async fn spawn_locked(paths: &Paths) -> Result<Client> {
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
        if started.elapsed() > SPAWN_DEADLINE {
            return Err(ClientError::NoBroker(
                "the broker did not become healthy within 3 s".into(),
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
