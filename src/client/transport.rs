//! How requests reach the broker: hyper's pooled HTTP/1.1 client over TCP, or over the
//! broker's Unix socket with the peer's uid checked on every connection.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, Error};
use hyper_util::rt::{TokioExecutor, TokioTimer};

#[derive(Clone)]
pub(super) enum Transport {
    Tcp(Client<HttpConnector, Full<Bytes>>),
    #[cfg(unix)]
    Unix(Client<unix::UnixConnector, Full<Bytes>>),
}

fn builder() -> hyper_util::client::legacy::Builder {
    let mut b = Client::builder(TokioExecutor::new());
    // Below the server's 10 s keep-alive header timeout, so a pooled connection is never
    // reused just as the server closes it.
    b.pool_idle_timeout(Duration::from_secs(5))
        .pool_timer(TokioTimer::new());
    b
}

impl Transport {
    pub(super) fn tcp() -> Transport {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        connector.set_nodelay(true);
        Transport::Tcp(builder().build(connector))
    }

    #[cfg(unix)]
    pub(super) fn unix(path: std::path::PathBuf) -> Transport {
        Transport::Unix(builder().build(unix::UnixConnector::new(path)))
    }

    /// Whether the peer must prove it holds the token before the token is sent.
    pub(super) fn needs_proof(&self) -> bool {
        matches!(self, Transport::Tcp(_))
    }

    pub(super) async fn send(
        &self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, Error> {
        match self {
            Transport::Tcp(c) => c.request(req).await,
            #[cfg(unix)]
            Transport::Unix(c) => c.request(req).await,
        }
    }
}

#[cfg(unix)]
pub mod unix {
    use std::future::Future;
    use std::path::PathBuf;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use hyper::Uri;
    use hyper_util::rt::TokioIo;
    use tokio::net::UnixStream;

    /// Connects to the broker's socket, whatever the URI says, and refuses a peer that
    /// runs as another user.
    #[derive(Clone)]
    pub struct UnixConnector {
        path: Arc<PathBuf>,
    }

    impl UnixConnector {
        pub fn new(path: PathBuf) -> UnixConnector {
            UnixConnector {
                path: Arc::new(path),
            }
        }
    }

    impl tower_service::Service<Uri> for UnixConnector {
        type Response = TokioIo<UnixStream>;
        type Error = std::io::Error;
        type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Uri) -> Self::Future {
            let path = Arc::clone(&self.path);
            Box::pin(async move {
                let stream = UnixStream::connect(&*path).await?;
                // SAFETY: geteuid has no preconditions and cannot fail.
                check_peer(&stream, unsafe { libc::geteuid() })?;
                Ok(TokioIo::new(stream))
            })
        }
    }

    /// Refuses a socket whose listening process runs as another user than `uid`.
    pub fn check_peer(stream: &UnixStream, uid: u32) -> std::io::Result<()> {
        let peer = stream.peer_cred()?;
        if peer.uid() == uid {
            Ok(())
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "the broker socket is served by uid {}, not by this user ({uid})",
                    peer.uid()
                ),
            ))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[tokio::test]
        async fn a_socket_served_by_another_user_is_refused() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.sock");
            let listener = tokio::net::UnixListener::bind(&path).unwrap();
            let stream = UnixStream::connect(&path).await.unwrap();
            let _accepted = listener.accept().await.unwrap();
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            assert!(check_peer(&stream, me).is_ok());
            let err = check_peer(&stream, me.wrapping_add(1)).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(err.to_string().contains("not by this user"), "{err}");
        }
    }
}
