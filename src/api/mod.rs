//! The loopback HTTP API (SPEC §4): hyper 1.x, bearer auth, body cap, shared POST rate
//! limit, `{"error","code"}` bodies. Handlers are thin: every rule lives in the broker.

pub mod channel_routes;
mod error;
mod events;
pub mod relay_routes;
mod routes;
pub mod ui;

pub use routes::ROUTES;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentnotify_http::rate_limit::RateLimiter;
use agentnotify_http::{accept_loop, serve_connection, ConnectionOptions, Listener};
use tokio::sync::watch;

use crate::broker::Broker;
use crate::model::Timestamp;
use crate::secret::Secret;

/// Most connections served at once; enough for thousands of parked long-polls.
pub const MAX_CONNECTIONS: usize = 16_384;
/// A client must send its request headers within this time.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything a handler needs.
pub struct ApiContext {
    pub broker: Arc<Broker>,
    pub token: Secret,
    pub limiter: RateLimiter,
    pub started_at: Timestamp,
    pub url: String,
    /// The TCP port the API listens on (bound into the broker's proof).
    pub port: u16,
    pub activity: Activity,
    /// Set by `POST /v1/admin/shutdown`: the daemon exits once nothing is pending.
    pub shutdown_requested: watch::Sender<bool>,
    /// Sessions and live streams of the web UI (SPEC §9).
    pub ui: ui::UiState,
    /// Publishing to and polling from Relays (SPEC §8).
    pub relay: Arc<crate::relay::RelayLink>,
    /// Delivery to desktop, ntfy, webhook and relay channels (SPEC §11).
    pub channels: Arc<crate::channels::Hub>,
}

/// Request bookkeeping for the on-demand broker's idle exit.
pub struct Activity {
    in_flight: AtomicUsize,
    last_millis: AtomicU64,
}

impl Default for Activity {
    /// Starting counts as activity: an idle clock starts now, not at the epoch.
    fn default() -> Activity {
        let a = Activity {
            in_flight: AtomicUsize::new(0),
            last_millis: AtomicU64::new(0),
        };
        a.touch();
        a
    }
}

impl Activity {
    fn begin(&self) -> ActivityGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        ActivityGuard(self)
    }
    fn touch(&self) {
        self.last_millis
            .store(Timestamp::now().millis(), Ordering::SeqCst);
    }
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
    /// When the last request started or finished.
    pub fn last(&self) -> Timestamp {
        Timestamp(self.last_millis.load(Ordering::SeqCst))
    }
}

struct ActivityGuard<'a>(&'a Activity);

impl Drop for ActivityGuard<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves the API on a bound listener (TCP for the browser and HTTP clients, the Unix
/// socket for the hook and the CLI) until `shutdown` turns true.
pub async fn serve<L: Listener>(
    listener: L,
    ctx: Arc<ApiContext>,
    shutdown: watch::Receiver<bool>,
) {
    let connection = ConnectionOptions {
        header_timeout: HEADER_TIMEOUT,
        max_buf_size: 128 * 1024,
    };
    accept_loop(listener, MAX_CONNECTIONS, shutdown, move |stream, _peer| {
        let ctx = Arc::clone(&ctx);
        serve_connection(stream, connection, move |req| {
            let ctx = Arc::clone(&ctx);
            async move {
                let _busy = ctx.activity.begin();
                routes::handle(&ctx, req).await
            }
        })
    })
    .await
}
