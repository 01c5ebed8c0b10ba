//! The accept loop and per-connection HTTP/1.1 serving, and waiting for a stop signal.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::ResBody;

/// A bound socket that hands out connections: TCP, or (on Unix) a Unix domain socket.
pub trait Listener: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    type Addr: Send + 'static;
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Stream, Self::Addr)>> + Send;
}

impl Listener for TcpListener {
    type Stream = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;
    async fn accept(&self) -> std::io::Result<(Self::Stream, Self::Addr)> {
        let (stream, addr) = TcpListener::accept(self).await?;
        // Small request/reply exchanges: no Nagle delay.
        let _ = stream.set_nodelay(true);
        Ok((stream, addr))
    }
}

#[cfg(unix)]
impl Listener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    async fn accept(&self) -> std::io::Result<(Self::Stream, Self::Addr)> {
        tokio::net::UnixListener::accept(self).await
    }
}

/// Accepts connections until `shutdown` turns true, handing each to `serve` on a task of
/// its own. At most `max_connections` are served at once; past that a new connection is
/// closed at once (logged), so a flood cannot exhaust file descriptors.
pub async fn accept_loop<L, F, Fut>(
    listener: L,
    max_connections: usize,
    mut shutdown: watch::Receiver<bool>,
    serve: F,
) where
    L: Listener,
    F: Fn(L::Stream, L::Addr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
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
        let conn = serve(stream, peer);
        tokio::spawn(async move {
            conn.await;
            drop(permit);
        });
    }
}

/// How one connection is served.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionOptions {
    /// A client must send its request headers within this time.
    pub header_timeout: Duration,
    /// hyper's read buffer limit.
    pub max_buf_size: usize,
}

impl Default for ConnectionOptions {
    fn default() -> ConnectionOptions {
        ConnectionOptions {
            header_timeout: Duration::from_secs(10),
            max_buf_size: 128 * 1024,
        }
    }
}

/// Serves HTTP/1.1 on one connection (plain or TLS) until the client closes it.
pub async fn serve_connection<S, H, Fut>(stream: S, opts: ConnectionOptions, handle: H)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ResBody>> + Send + 'static,
{
    let handle = Arc::new(handle);
    let service = service_fn(move |req| {
        let handle = Arc::clone(&handle);
        async move { Ok::<_, Infallible>(handle(req).await) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout)
        .max_buf_size(opts.max_buf_size)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Resolves with the signal's name on SIGTERM, SIGHUP or SIGINT.
pub async fn wait_for_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = hup.recv() => "SIGHUP",
            _ = tokio::signal::ctrl_c() => "SIGINT",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}
