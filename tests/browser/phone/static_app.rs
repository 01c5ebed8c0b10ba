//! The app's folder served at `/app/` on a loopback port, with the Relay's headers: enough
//! for the tests that need the page's modules but no Relay API.

use std::path::PathBuf;

use agentnotify_http::{full, ConnectionOptions, ResBody};
use hyper::{Response, StatusCode};

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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(agentnotify_http::serve_connection(
                    stream,
                    ConnectionOptions::default(),
                    |req| async move { serve(req.uri().path()) },
                ));
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

fn serve(path: &str) -> Response<ResBody> {
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
        (false, Ok(bytes)) => Response::builder()
            .header("Content-Type", kind)
            .header("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
            .header("Cache-Control", "no-cache")
            .body(full(bytes))
            .unwrap(),
        _ => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(full("not found"))
            .unwrap(),
    }
}
