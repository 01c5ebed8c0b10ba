//! The reference Relay's routing and serving: the accept loop (plain or TLS), a token
//! bucket per client address, and the route table.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentnotify_http::rate_limit::PerAddressLimiter;
use agentnotify_http::{
    accept_loop, json_response, serve_connection, wait_for_signal, ApiError, ConnectionOptions,
};
use agentnotify_model::Timestamp;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::handlers::{self, Handled};
use crate::store::{RelayServer, RelayServerError};

/// Most connections served at once.
const MAX_CONNECTIONS: usize = 16_384;

/// How `agentnotify relay serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub addr: SocketAddr,
    /// Where the sled store and the VAPID key live (unused with `database`).
    pub data_dir: PathBuf,
    /// A PostgreSQL URL: keep the state there, shared with other processes (SPEC §14).
    pub database: Option<String>,
    /// Serve HTTPS with this configuration (`--tls-cert`/`--tls-key`); plain HTTP if absent.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Requests per second each client address may make, sustained.
    pub rate_per_second: u32,
    /// Requests each client address may make in a burst.
    pub rate_burst: u32,
    /// Peers whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// The `sub` of VAPID tokens (a mailto: or https: contact for push services).
    pub vapid_subject: String,
    /// Accept `http://` push endpoints (a local mock push service in tests).
    pub push_allow_http: bool,
}

/// What the handlers need beyond the store.
pub(crate) struct Context {
    pub(crate) server: Arc<RelayServer>,
    pub(crate) vapid: Arc<crate::push::Vapid>,
    pub(crate) push_allow_http: bool,
}

/// Runs the Relay until SIGINT/SIGTERM/SIGHUP. `on_ready` gets the URL once it listens.
pub async fn run(opts: ServeOptions, on_ready: impl FnOnce(&str)) -> Result<(), RelayServerError> {
    let (server, vapid) = match &opts.database {
        None => {
            let server = RelayServer::open(&opts.data_dir)?;
            let vapid = crate::push::Vapid::load_or_create(&opts.data_dir, &opts.vapid_subject)
                .map_err(|e| RelayServerError::Vapid {
                    path: opts.data_dir.join("vapid.key"),
                    source: e,
                })?;
            (server, vapid)
        }
        Some(url) => {
            let server = RelayServer::open_postgres(url).await?;
            let vapid = crate::push::Vapid::shared(&server, &opts.vapid_subject)
                .await
                .map_err(|e| RelayServerError::Database(e.to_string()))?;
            (server, vapid)
        }
    };
    server.build_indexes().await.map_err(|e| {
        RelayServerError::Database(format!("cannot index the relay's records: {e}"))
    })?;
    let vapid = Arc::new(vapid);
    let pusher = tokio::spawn(crate::push::run_sender(
        Arc::clone(&server),
        Arc::clone(&vapid),
    ));
    let ctx = Arc::new(Context {
        server: Arc::clone(&server),
        vapid,
        push_allow_http: opts.push_allow_http,
    });
    let bind_error = |source| RelayServerError::Bind {
        addr: opts.addr.to_string(),
        source,
    };
    let listener = TcpListener::bind(opts.addr).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    tracing::info!(%addr, scheme, "relay listening");
    on_ready(&url);
    let (stop_tx, stop_rx) = watch::channel(false);
    let pruner = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            loop {
                if let Err(e) = server.prune(Timestamp::now()).await {
                    tracing::error!(error = %e, "relay prune failed");
                }
                tokio::time::sleep(Duration::from_secs(600)).await;
            }
        })
    };
    let tls = opts.tls.map(tokio_rustls::TlsAcceptor::from);
    let limiter = Arc::new(PerAddressLimiter::new(
        opts.rate_per_second,
        opts.rate_burst,
    ));
    let trusted = Arc::new(opts.trusted_proxies);
    let serving = tokio::spawn(serve(listener, ctx, tls, limiter, trusted, stop_rx));
    wait_for_signal().await;
    let _ = stop_tx.send(true);
    let _ = serving.await;
    pruner.abort();
    pusher.abort();
    if let crate::kv::Kv::Sled(s) = &server.kv {
        let _ = s.db.flush();
    }
    Ok(())
}

/// A TLS handshake that has not finished by then is dropped (a stalled client must not hold
/// a connection open forever).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How each connection is served: hyper's default read buffer (Relay bodies are larger than
/// the broker's).
const CONNECTION: ConnectionOptions = ConnectionOptions {
    header_timeout: Duration::from_secs(10),
    max_buf_size: 400 * 1024,
};

/// Serves the Relay API on a bound listener until `shutdown` turns true; over TLS when an
/// acceptor is given; each client address within its rate.
pub(crate) async fn serve(
    listener: TcpListener,
    server: Arc<Context>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limiter: Arc<PerAddressLimiter>,
    trusted: Arc<Vec<std::net::IpAddr>>,
    shutdown: watch::Receiver<bool>,
) {
    accept_loop(listener, MAX_CONNECTIONS, shutdown, move |stream, peer| {
        let server = Arc::clone(&server);
        let limiter = Arc::clone(&limiter);
        let trusted = Arc::clone(&trusted);
        let tls = tls.clone();
        let handle = move |req: Request<Incoming>| {
            let server = Arc::clone(&server);
            let limiter = Arc::clone(&limiter);
            let client = client_address(peer.ip(), &trusted, &req);
            async move {
                let handled = match limiter.take(client) {
                    Ok(()) => route(&server, req).await,
                    Err(secs) => Err(ApiError::rate_limited(secs)),
                };
                handled.unwrap_or_else(ApiError::into_response)
            }
        };
        async move {
            match tls {
                None => serve_connection(stream, CONNECTION, handle).await,
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
                    match handshake {
                        Ok(Ok(stream)) => serve_connection(stream, CONNECTION, handle).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        }
    })
    .await
}

/// Who a request is from: the peer, or, when the peer is a trusted load balancer, the last
/// address it appended to `X-Forwarded-For` (the ones before it are the client's own word).
fn client_address(
    peer: std::net::IpAddr,
    trusted: &[std::net::IpAddr],
    req: &Request<Incoming>,
) -> std::net::IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    req.headers()
        .get_all("x-forwarded-for")
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(peer)
}

pub(crate) async fn route(ctx: &Context, req: Request<Incoming>) -> Handled {
    let s = &*ctx.server;
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let method = req.method().clone();
    if let Some(rest) = path.strip_prefix("/app") {
        if rest.is_empty() || rest.starts_with('/') {
            return match method {
                Method::GET => crate::app::serve(rest),
                _ => Err(ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "the app is served with GET only",
                )),
            };
        }
    }
    if method == Method::POST {
        handlers::require_json(&req)?;
    }
    match (method, segments.as_slice()) {
        (Method::GET, ["health"]) => Ok(json_response(
            StatusCode::OK,
            &json!({"status": "ok", "service": "agentnotify-relay", "version": crate::VERSION}),
        )),
        (Method::POST, ["v1", "installations"]) => handlers::register_installation(s, req).await,
        (Method::POST, ["v1", "devices"]) => handlers::register_device(s, req).await,
        (Method::GET, ["v1", "devices"]) => handlers::list_devices(s, &req).await,
        (Method::GET, ["v1", "push", "vapid-public-key"]) => Ok(json_response(
            StatusCode::OK,
            &json!({"public_key": ctx.vapid.public_key()}),
        )),
        (Method::POST, ["v1", "devices", "push-subscription"]) => {
            handlers::subscribe_push(s, req, ctx.push_allow_http).await
        }
        (Method::GET, ["v1", "devices", "push-subscription"]) => {
            handlers::push_subscription(s, &req).await
        }
        (Method::DELETE, ["v1", "devices", "push-subscription"]) => {
            handlers::unsubscribe_push(s, &req).await
        }
        (Method::DELETE, ["v1", "devices", id]) => handlers::delete_device(s, &req, id).await,
        (Method::POST, ["v1", "pairings"]) => handlers::register_pairing(s, req).await,
        (Method::POST, ["v1", "envelopes"]) => handlers::put_envelope(s, req).await,
        (Method::GET, ["v1", "envelopes"]) => handlers::list_envelopes(s, &req).await,
        (Method::GET, ["v1", "envelopes", "events"]) => handlers::envelope_events(s, req).await,
        (Method::DELETE, ["v1", "envelopes", id]) => handlers::delete_envelope(s, &req, id).await,
        (Method::POST, ["v1", "interaction-responses"]) => handlers::post_answer(s, req).await,
        (Method::GET, ["v1", "interaction-responses"]) => handlers::list_answers(s, req).await,
        (Method::POST, ["v1", "interaction-responses", "results"]) => {
            handlers::post_results(s, req).await
        }
        (Method::GET, ["v1", "interaction-responses", id]) => {
            let id = id.to_string();
            handlers::answer_status(s, req, &id).await
        }
        (_, ["health"])
        | (
            _,
            ["v1", "installations" | "devices" | "pairings" | "envelopes" | "interaction-responses"],
        )
        | (_, ["v1", "devices" | "envelopes", _])
        | (_, ["v1", "push", "vapid-public-key"])
        | (_, ["v1", "interaction-responses", _]) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method",
        )),
        _ => Err(ApiError::not_found("no such route")),
    }
}
