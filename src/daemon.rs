//! The broker process: life lock, store, `broker.json`, background jobs, idle exit, signals
//! (SPEC §1, §3.4, §3.5).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, Activity, ApiContext};
use crate::broker::{Broker, BrokerConfig, BrokerError};
use crate::config::{Config, ConfigError, DEFAULT_PORT};
use crate::endpoint::BrokerInfo;
use crate::model::Timestamp;
use crate::paths::{Paths, PathsError};
use agentnotify_http::rate_limit::RateLimiter;

/// How the daemon was asked to run.
#[derive(Debug, Clone, Default)]
pub struct DaemonOptions {
    /// Port to bind; `Some(0)` asks for an ephemeral one. `None`: env, config, default.
    pub port: Option<u16>,
    /// Started by a client: exits after the idle time.
    pub on_demand: bool,
    pub idle_exit: Option<Duration>,
    pub rate_per_second: Option<u32>,
    pub rate_burst: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot use {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// How the daemon ended.
#[derive(Debug, PartialEq, Eq)]
pub enum DaemonExit {
    /// Another broker holds the lock; it is left alone.
    AlreadyRunning(Option<BrokerInfo>),
    Stopped,
}

/// Runs the broker until a signal, a shutdown request or (on demand) the idle timeout.
/// `on_ready` is called once the API is reachable and `broker.json` is written.
pub async fn run(
    paths: &Paths,
    opts: DaemonOptions,
    on_ready: impl FnOnce(&BrokerInfo),
) -> Result<DaemonExit, DaemonError> {
    paths.ensure_dirs()?;
    raise_open_file_limit();
    let lock = crate::fsutil::open_lock_file(&paths.broker_lock()).map_err(io("broker.lock"))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Ok(DaemonExit::AlreadyRunning(BrokerInfo::read(paths)))
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("broker.lock")(e)),
    }
    let config = Config::load(&paths.config_file())?;
    let token =
        crate::secret::load_or_create_token(&paths.token_file()).map_err(io("the token file"))?;
    let store = crate::store::Store::open(&paths.store_dir()).map_err(BrokerError::from)?;
    let broker = Broker::open(store, BrokerConfig::default())?;
    let retention = Duration::from_secs(config.retention_days() as u64 * 86_400);
    broker.prune(Timestamp::now().minus(retention)).await?;

    let listener = bind(resolve_port(&opts, &config)).await?;
    let port = listener
        .local_addr()
        .map_err(io("the listening socket"))?
        .port();
    let socket = bind_socket(paths);
    let started_at = Timestamp::now();
    let info = BrokerInfo {
        pid: std::process::id(),
        port,
        socket: socket.as_ref().map(|_| paths.broker_socket()),
        url: format!("http://127.0.0.1:{port}"),
        version: crate::VERSION.to_string(),
        api: crate::API_VERSION.to_string(),
        started_at: started_at.to_rfc3339(),
    };
    let (shutdown_requested, mut shutdown_rx) = watch::channel(false);
    let relay = crate::relay::RelayLink::new(paths.clone(), Arc::clone(&broker));
    // Before the API serves: every question it accepts gets its deliveries queued.
    let channels = crate::channels::Hub::new(
        paths.clone(),
        Arc::clone(&broker),
        Arc::clone(&relay),
        &info.url,
    );
    let ctx = Arc::new(ApiContext {
        broker: Arc::clone(&broker),
        token,
        limiter: RateLimiter::new(
            opts.rate_per_second.unwrap_or(config.rate_per_second()),
            opts.rate_burst.unwrap_or(config.rate_burst()),
        ),
        started_at,
        url: info.url.clone(),
        port,
        activity: Activity::default(),
        shutdown_requested,
        ui: crate::api::ui::UiState::new(port),
        relay,
        channels,
    });
    // A click on a desktop notification opens the page; weak, or the two would keep each
    // other alive.
    let weak = Arc::downgrade(&ctx);
    ctx.channels.set_ui_link(Box::new(move || {
        weak.upgrade().map(|ctx| crate::api::ui::link_url(&ctx))
    }));
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(api::serve(listener, Arc::clone(&ctx), stop_rx.clone()));
    #[cfg(unix)]
    let socket_server = socket.map(|s| tokio::spawn(api::serve(s, Arc::clone(&ctx), stop_rx)));
    info.write(paths).map_err(io("broker.json"))?;
    tracing::info!(
        pid = info.pid,
        port,
        on_demand = opts.on_demand,
        "broker started"
    );
    on_ready(&info);

    tokio::spawn(Arc::clone(&broker).run_reaper());
    tokio::spawn(retention_job(Arc::clone(&broker), retention));
    ctx.relay.spawn_background();
    ctx.channels.spawn_background();

    let idle = opts.on_demand.then(|| {
        opts.idle_exit
            .unwrap_or(Duration::from_secs(config.idle_exit_seconds()))
    });
    let reason = tokio::select! {
        r = agentnotify_http::wait_for_signal() => r,
        _ = idle_exit(&ctx, idle, &mut shutdown_rx) => "idle",
    };
    tracing::info!(reason, "broker stopping");
    let _ = stop_tx.send(true);
    let _ = server.await;
    #[cfg(unix)]
    if let Some(s) = socket_server {
        let _ = s.await;
    }
    broker.flush()?;
    if BrokerInfo::read(paths).is_some_and(|i| i.pid == info.pid) {
        BrokerInfo::remove(paths);
        if info.socket.is_some() {
            let _ = std::fs::remove_file(paths.broker_socket());
        }
    }
    drop(lock);
    Ok(DaemonExit::Stopped)
}

/// Every parked long-poll is a socket: lift the soft descriptor limit to the hard one so
/// thousands of waiting hooks fit.
fn raise_open_file_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit only read and write the struct passed in.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn resolve_port(opts: &DaemonOptions, config: &Config) -> (u16, bool) {
    if let Some(p) = opts.port {
        return (p, false);
    }
    if let Some(p) = std::env::var("AGENTNOTIFY_PORT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return (p, false);
    }
    match config.port {
        Some(p) => (p, false),
        None => (DEFAULT_PORT, true),
    }
}

/// Binds 127.0.0.1; the default port falls back to an ephemeral one when taken.
async fn bind((port, fallback): (u16, bool)) -> Result<TcpListener, DaemonError> {
    match listen(port) {
        Ok(l) => Ok(l),
        Err(e) if fallback && e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::info!(port, "default port taken; using an ephemeral port");
            listen(0).map_err(io("an ephemeral port on 127.0.0.1"))
        }
        Err(e) => Err(io(format!("127.0.0.1:{port}"))(e)),
    }
}

/// A listening socket with a deep accept queue: a burst of hooks starting at once must
/// queue, not have their connections dropped while the broker is busy.
fn listen(port: u16) -> std::io::Result<TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(4096)
}

/// The Unix socket the hook and the CLI use (SPEC §3.5): in the 0700 state folder, so only
/// this user can create it, and clients check the peer's uid too. A stale socket of a dead
/// broker is replaced (this process holds `broker.lock`). `None` where it cannot be bound
/// (a path longer than a socket address takes): clients then use TCP with the challenge.
#[cfg(unix)]
fn bind_socket(paths: &Paths) -> Option<tokio::net::UnixListener> {
    let path = paths.broker_socket();
    let _ = std::fs::remove_file(&path);
    match tokio::net::UnixListener::bind(&path) {
        Ok(listener) => {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            Some(listener)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot bind the broker socket; clients use TCP");
            None
        }
    }
}

#[cfg(not(unix))]
fn bind_socket(_paths: &Paths) -> Option<()> {
    None
}

/// Resolves when the broker should exit for lack of work: an on-demand broker after `idle`
/// with nothing pending, no request and no web UI page open, or any broker asked to shut
/// down once idle.
async fn idle_exit(ctx: &ApiContext, idle: Option<Duration>, shutdown: &mut watch::Receiver<bool>) {
    let mut events = ctx.broker.subscribe();
    loop {
        // Undelivered entries keep it up too (until delivered or dead-lettered).
        let busy = ctx.broker.is_busy() || ctx.activity.in_flight() > 0 || ctx.channels.has_work();
        if *shutdown.borrow() && !busy {
            return;
        }
        let quiet_since = ctx
            .activity
            .last()
            .max(ctx.ui.last_stream_closed().unwrap_or(Timestamp(0)));
        let state = Idleness {
            busy,
            // An open web UI page counts as someone watching: no idle exit under it.
            watched: ctx.ui.open_streams() > 0,
            quiet_since,
        };
        let Some(wake_in) = state.wait(idle, Timestamp::now()) else {
            return;
        };
        // Asked to stop but a request is still in flight (often the very request that asked):
        // requests end without an event, so look again shortly.
        let wake_in = if *shutdown.borrow() {
            wake_in.min(Duration::from_millis(100))
        } else {
            wake_in
        };
        tokio::select! {
            _ = tokio::time::sleep(wake_in) => {}
            _ = shutdown.changed() => {}
            _ = events.recv() => {}
        }
    }
}

/// What the idle exit decides on.
#[derive(Debug, Clone, Copy)]
struct Idleness {
    /// Something is pending or a request is in flight.
    busy: bool,
    /// A web UI page is open.
    watched: bool,
    /// The last request, or the last web UI page closing.
    quiet_since: Timestamp,
}

impl Idleness {
    /// `None`: exit now. Otherwise how long to wait before looking again (sooner if an
    /// event arrives). `idle` is `None` for a foreground daemon, which never idles out.
    fn wait(&self, idle: Option<Duration>, now: Timestamp) -> Option<Duration> {
        match idle {
            Some(idle) if !self.busy && !self.watched => {
                let left = now.until(self.quiet_since + idle);
                (!left.is_zero()).then_some(left)
            }
            // Busy, watched or never idling: look again when something changes, or in a while.
            _ => Some(
                idle.unwrap_or(Duration::from_secs(3600))
                    .max(Duration::from_secs(1)),
            ),
        }
    }
}

async fn retention_job(broker: Arc<Broker>, retention: Duration) {
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        if let Err(e) = broker.prune(Timestamp::now().minus(retention)).await {
            tracing::error!(error = %e, "retention job failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Option<Duration> = Some(Duration::from_secs(1));

    fn at(secs: u64) -> Timestamp {
        Timestamp(1_000_000 + secs * 1000)
    }

    fn state(busy: bool, watched: bool) -> Idleness {
        Idleness {
            busy,
            watched,
            quiet_since: at(0),
        }
    }

    #[test]
    fn an_on_demand_broker_exits_once_quiet_for_the_idle_time() {
        let quiet = state(false, false);
        assert_eq!(quiet.wait(IDLE, at(0)), Some(Duration::from_secs(1)));
        assert_eq!(quiet.wait(IDLE, at(1)), None);
        assert_eq!(quiet.wait(IDLE, at(3600)), None);
    }

    #[test]
    fn never_with_a_question_pending_or_a_page_open() {
        for s in [state(true, false), state(false, true), state(true, true)] {
            for later in [1, 3, 3600, 86_400] {
                assert!(
                    s.wait(IDLE, at(later)).is_some(),
                    "{s:?} exited after {later} s"
                );
            }
        }
    }

    #[test]
    fn a_foreground_daemon_never_idles_out() {
        for s in [state(false, false), state(true, false)] {
            for later in [1, 3, 3600, 86_400 * 30] {
                assert!(
                    s.wait(None, at(later)).is_some(),
                    "{s:?} exited after {later} s"
                );
            }
        }
    }
}
