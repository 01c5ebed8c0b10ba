//! The app's folder served at `/app/` on a loopback port, with the Relay's headers, and
//! every other path passed through (streamed) to a Relay when one is given.

use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

pub fn app_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates/relay-server/app")
}

/// Serves the app until dropped; `url` is the origin.
pub struct StaticApp {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl StaticApp {
    pub async fn start() -> StaticApp {
        StaticApp::in_front_of(None).await
    }

    /// The app, and the Relay at `upstream` behind it on the same origin.
    pub async fn in_front_of(upstream: Option<String>) -> StaticApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let client = Client::builder(TokioExecutor::new()).build_http::<Incoming>();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (client, upstream) = (client.clone(), upstream.clone());
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (client, upstream) = (client.clone(), upstream.clone());
                    async move { handle(req, &client, upstream).await }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        StaticApp { url, task }
    }
}

impl Drop for StaticApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn full(status: StatusCode, bytes: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Full::new(bytes.into()).map_err(|e| match e {}).boxed())
        .unwrap()
}

/// A Relay that is down drops the connection, as the real one would (no 502 page).
async fn handle(
    req: Request<Incoming>,
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Incoming>,
    upstream: Option<String>,
) -> Result<Response<Body>, hyper_util::client::legacy::Error> {
    let path = req.uri().path().to_string();
    if path.starts_with("/app/") {
        return Ok(file(&path));
    }
    let Some(upstream) = upstream else {
        return Ok(full(StatusCode::NOT_FOUND, "not found"));
    };
    let (mut parts, body) = req.into_parts();
    let pq = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    parts.uri = format!("{upstream}{pq}").parse().unwrap();
    parts.headers.remove(hyper::header::HOST);
    Ok(client
        .request(Request::from_parts(parts, body))
        .await?
        .map(|b| b.boxed()))
}

fn file(path: &str) -> Response<Body> {
    let rel = path.strip_prefix("/app/").unwrap_or("");
    let rel = if rel.is_empty() { "index.html" } else { rel };
    let file = app_dir().join(rel);
    let kind = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("webmanifest") => "application/manifest+json; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    };
    match (rel.contains(".."), std::fs::read(&file)) {
        (false, Ok(bytes)) => {
            let mut r = full(StatusCode::OK, bytes);
            let h = r.headers_mut();
            h.insert("Content-Type", kind.parse().unwrap());
            h.insert("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'".parse().unwrap());
            h.insert("Cache-Control", "no-cache".parse().unwrap());
            r
        }
        _ => full(StatusCode::NOT_FOUND, "not found"),
    }
}
