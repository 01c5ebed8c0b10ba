//! The loopback HTTP API (SPEC §4): hyper 1.x, bearer auth, body cap, shared POST rate
//! limit, `{"error","code"}` bodies. Handlers are thin: every rule lives in the broker.

pub mod http;
pub mod rate_limit;
mod routes;

pub use routes::ROUTES;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::broker::Broker;
use crate::model::Timestamp;
use crate::secret::Secret;
use rate_limit::RateLimiter;

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
    pub activity: Activity,
    /// Set by `POST /v1/admin/shutdown`: the daemon exits once nothing is pending.
    pub shutdown_requested: watch::Sender<bool>,
    /// Sessions and live streams of the web UI (SPEC §9).
    pub ui: crate::ui::UiState,
    /// Publishing to and polling from Relays (SPEC §8).
    pub relay: Arc<crate::relay::Relay>,
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

/// Serves the API on a bound listener until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    ctx: Arc<ApiContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (stream, _) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off briefly, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::warn!("connection limit reached; refusing a connection");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let ctx = Arc::clone(&ctx);
                async move {
                    let _busy = ctx.activity.begin();
                    Ok::<_, std::convert::Infallible>(routes::handle(&ctx, req).await)
                }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(128 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
            drop(permit);
        });
    }
}
