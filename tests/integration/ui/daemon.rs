//! A real `agentnotify daemon --port 0` on a private temp home (the shared [`Home`] and
//! [`Daemon`]), plus the HTTP calls the web UI tests make against it.

use std::process::{Child, Output, Stdio};
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{Daemon, Home, AGENTNOTIFY};

pub struct TestDaemon {
    daemon: Daemon,
    pub url: String,
    pub port: u16,
    pub token: String,
    pub home: Home,
    pub http: reqwest::Client,
}

/// A reply, kept whole so tests can grep the bytes.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        TestDaemon::start_with(&[])
    }

    /// Starts the daemon with extra arguments (e.g. `--on-demand`), logging at debug level.
    pub fn start_with(extra: &[&str]) -> TestDaemon {
        let home = Home::new().with_env("AGENTNOTIFY_LOG", "debug");
        let mut args = vec!["daemon", "--port", "0"];
        args.extend_from_slice(extra);
        let daemon = Daemon::start_with(&home, &args);
        let url = daemon.url.clone();
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in url");
        let token = home.token();
        let http = agentnotify_relay_proto::tls::plain_http_client()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        TestDaemon {
            daemon,
            url,
            port,
            token,
            home,
            http,
        }
    }

    /// Runs the `agentnotify` CLI against this daemon.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.home
            .cmd(AGENTNOTIFY)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run agentnotify")
    }

    /// A bearer-authenticated call to the `/v1` API.
    pub async fn v1(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        reply(req.send().await.expect("v1 call")).await
    }

    /// Opens a question; returns its full record (nonce included: the bearer API has it).
    pub async fn ask(&self, body: Value) -> Value {
        let r = self
            .v1(Method::POST, "/v1/interactions/request", Some(body))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json());
        r.json()
    }

    pub async fn get(&self, id: &str) -> Value {
        self.v1(Method::GET, &format!("/v1/interactions/{id}"), None)
            .await
            .json()
    }

    /// Long-polls (event-driven, no sleeping) until the question leaves `pending`.
    pub async fn wait_done(&self, id: &str, secs: u64) -> Value {
        self.v1(
            Method::GET,
            &format!("/v1/interactions/{id}/wait?timeout={secs}"),
            None,
        )
        .await
        .json()
    }

    /// Answers over the bearer API, as another surface would.
    pub async fn answer_as(&self, q: &Value, choice: &str, source: &str) -> Reply {
        let id = q["id"].as_str().unwrap();
        self.v1(
            Method::POST,
            &format!("/v1/interactions/{id}/respond"),
            Some(json!({
                "response_id": format!("{source}-1"),
                "request_digest": q["request_digest"],
                "nonce": q["nonce"],
                "choice_id": choice,
                "source": source,
            })),
        )
        .await
    }

    /// A one-time login link, as `agentnotify ui --print` prints it.
    pub fn link(&self) -> String {
        let out = self.cli(&["ui", "--print"]);
        assert!(
            out.status.success(),
            "agentnotify ui --print failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Trades a fresh link's secret for a session the way the page does; returns the token.
    pub async fn login(&self) -> String {
        let r = self.sign_in(&link_secret(&self.link())).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json());
        r.json()["session"].as_str().expect("a session").to_string()
    }

    /// `POST /ui/api/session` with a link's secret, from the page's origin.
    pub async fn sign_in(&self, secret: &str) -> Reply {
        self.send_body(
            Method::POST,
            "/ui/api/session",
            &[("x-agentnotify-ui", "1"), ("origin", &self.url)],
            Some(json!({ "link": secret })),
        )
        .await
    }

    /// A raw request with the given headers (no cookie, no bearer unless given).
    pub async fn send(&self, method: Method, url: &str, headers: &[(&str, &str)]) -> Reply {
        self.send_body(method, url, headers, None).await
    }

    pub async fn send_body(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Reply {
        let url = if url.starts_with("http") {
            url.to_string()
        } else {
            format!("{}{url}", self.url)
        };
        let mut req = self.http.request(method, url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        reply(req.send().await.expect("request")).await
    }

    /// A page-API call the way the page makes it: session header, custom header, Origin.
    pub async fn page_post(&self, session: &str, path: &str, body: Value) -> Reply {
        self.send_body(
            Method::POST,
            path,
            &[
                (SESSION, session),
                ("x-agentnotify-ui", "1"),
                ("origin", &self.url),
            ],
            Some(body),
        )
        .await
    }

    pub async fn page_get(&self, session: &str, path: &str) -> Reply {
        self.send(Method::GET, path, &[(SESSION, session)]).await
    }

    /// Waits up to `within` for the daemon to exit on its own; true when it did.
    pub fn exits_within(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Ok(Some(_)) = self.daemon.child.try_wait() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the daemon (SIGTERM, so logs are flushed) and returns everything it logged.
    pub fn stop_and_read_logs(&mut self) -> String {
        terminate(&mut self.daemon.child);
        self.home.logs()
    }
}

fn terminate(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SIGTERM lets the daemon flush; the wait is bounded by the kill below if it hangs.
    // SAFETY: sending a signal to our own child's pid has no memory effects.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

async fn reply(res: reqwest::Response) -> Reply {
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

/// The header the page sends its session token in.
pub const SESSION: &str = "x-agentnotify-session";

/// The one-time secret in a link's fragment (`…/ui/#t=SECRET`).
pub fn link_secret(link: &str) -> String {
    link.split_once("#t=")
        .unwrap_or_else(|| panic!("a link with a #t= fragment: {link}"))
        .1
        .to_string()
}
