//! The typed loopback client, used by the CLI and the hook (SPEC §3.5, §4).
//!
//! Plain HTTP/1.1 on hyper's pooled client rather than reqwest: reqwest carries TLS (for
//! the Relay), and linking it into the hook cost every hook run ~0.35 ms of CPU and 60 page
//! faults (docs/BENCHMARKS.md). Nothing here ever speaks TLS.

mod spawn;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
pub use hyper::Method;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde_json::Value;

use crate::daemon::BrokerInfo;
use crate::paths::{Paths, PathsError};
use crate::secret::Secret;

pub use spawn::{attach, attach_or_spawn, attach_or_spawn_by, broker_executable};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error("no broker is running and none could be started: {0}")]
    NoBroker(String),
    #[error("the broker did not answer: {0}")]
    Unreachable(String),
    /// A connection was made but broke before the reply: worth one more try.
    #[error("the connection to the broker broke: {0}")]
    Interrupted(String),
    /// The broker answered with an error body.
    #[error("{message} ({code})")]
    Api {
        status: u16,
        code: String,
        message: String,
        retry_after: Option<u64>,
    },
    #[error("the broker sent a reply this client does not understand: {0}")]
    BadReply(String),
    #[error("the broker URL is not usable: {0}")]
    BadUrl(String),
    #[error("the API token contains characters an HTTP header cannot carry")]
    BadToken,
}

impl ClientError {
    /// The API error code, if the broker answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

type Http = hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>;

/// A connection to one broker.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Secret,
    http: Http,
}

impl Client {
    pub fn new(base: impl Into<String>, token: Secret) -> Client {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        connector.set_nodelay(true);
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            // Below the server's 10 s keep-alive header timeout, so a pooled connection is
            // never reused just as the server closes it.
            .pool_idle_timeout(Duration::from_secs(5))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Client {
            base: base.into().trim_end_matches('/').to_string(),
            token,
            http,
        }
    }

    /// A client from `AGENTNOTIFY_URL` + `AGENTNOTIFY_TOKEN`, when both are set.
    pub fn from_env_override() -> Option<Client> {
        let url = std::env::var("AGENTNOTIFY_URL")
            .ok()
            .filter(|s| !s.is_empty())?;
        let token = std::env::var("AGENTNOTIFY_TOKEN")
            .ok()
            .filter(|s| !s.is_empty())?;
        Some(Client::new(url, Secret::new(token)))
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `GET /health` (no auth): the broker's version and API generation.
    pub async fn health(&self, timeout: Duration) -> Result<Value> {
        let req = self.request(Method::GET, "/health", None, false)?;
        match self.exchange(req, timeout).await {
            Ok((_, value)) => Ok(value),
            Err(ClientError::Interrupted(e)) => Err(ClientError::Unreachable(e)),
            Err(e) => Err(e),
        }
    }

    /// One authenticated call; non-2xx replies become [`ClientError::Api`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(u16, Value)> {
        let req = self.request(method, path, body, true)?;
        self.exchange(req, timeout).await
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        auth: bool,
    ) -> Result<Request<Full<Bytes>>> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if auth {
            let bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
                .map_err(|_| ClientError::BadToken)?;
            req = req.header(AUTHORIZATION, bearer);
        }
        let body = match body {
            Some(v) => {
                req = req.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(v).expect("a JSON value serialises"))
            }
            None => Bytes::new(),
        };
        req.body(Full::new(body))
            .map_err(|e| ClientError::BadUrl(format!("{}{path}: {e}", self.base)))
    }

    /// Sends `req` and reads the whole reply, all within `timeout`.
    async fn exchange(&self, req: Request<Full<Bytes>>, timeout: Duration) -> Result<(u16, Value)> {
        let exchange = async {
            let res = self.http.request(req).await.map_err(transport_error)?;
            read_reply(res).await
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Interrupted(format!(
                    "no reply within {} s",
                    timeout.as_secs_f64()
                )))
            })
    }

    async fn get(&self, path: &str) -> Result<Value> {
        Ok(self.call(Method::GET, path, None, DEFAULT_TIMEOUT).await?.1)
    }

    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value)> {
        self.call(Method::POST, path, Some(body), DEFAULT_TIMEOUT)
            .await
    }

    /// `POST /v1/interactions/request`: returns the record and whether it was created.
    pub async fn request_interaction(&self, body: &Value) -> Result<(Value, bool)> {
        let (status, v) = self.post("/v1/interactions/request", body).await?;
        Ok((v, status == 201))
    }

    pub async fn get_interaction(&self, id: &str) -> Result<Value> {
        self.get(&format!("/v1/interactions/{}", enc(id))).await
    }

    /// `GET /v1/interactions?…` with the given query pairs.
    pub async fn list_interactions(&self, query: &[(&str, String)]) -> Result<Value> {
        self.get(&format!("/v1/interactions{}", query_string(query)))
            .await
    }

    /// Long-polls for up to `secs` (1–300); the HTTP timeout leaves room for the reply.
    /// `owner` marks the question's owner, whose waits keep its lease alive.
    pub async fn wait(&self, id: &str, secs: u64, owner: bool) -> Result<Value> {
        let path = format!(
            "/v1/interactions/{}/wait?timeout={secs}&owner={owner}",
            enc(id)
        );
        let timeout = Duration::from_secs(secs + 5);
        Ok(self.call(Method::GET, &path, None, timeout).await?.1)
    }

    pub async fn respond(&self, id: &str, body: &Value) -> Result<Value> {
        Ok(self
            .post(&format!("/v1/interactions/{}/respond", enc(id)), body)
            .await?
            .1)
    }

    pub async fn cancel(&self, id: &str) -> Result<Value> {
        Ok(self
            .post(
                &format!("/v1/interactions/{}/cancel", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    pub async fn publish(&self, id: &str) -> Result<Value> {
        Ok(self
            .post(
                &format!("/v1/interactions/{}/publish", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    pub async fn notify(&self, body: &Value) -> Result<Value> {
        Ok(self.post("/v1/notifications", body).await?.1)
    }

    pub async fn list_notifications(&self, query: &[(&str, String)]) -> Result<Value> {
        self.get(&format!("/v1/notifications{}", query_string(query)))
            .await
    }

    pub async fn get_notification(&self, id: &str) -> Result<Value> {
        self.get(&format!("/v1/notifications/{}", enc(id))).await
    }

    /// `action` is `resolve` or `dismiss`.
    pub async fn close_notification(&self, id: &str, action: &str) -> Result<Value> {
        Ok(self
            .post(
                &format!("/v1/notifications/{}/{action}", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    /// `POST /v1/ui/link`: a one-time login link for the web UI.
    pub async fn ui_link(&self) -> Result<Value> {
        Ok(self.post("/v1/ui/link", &Value::Null).await?.1)
    }

    pub async fn status(&self) -> Result<Value> {
        self.get("/v1/status").await
    }

    /// Asks the broker to exit once nothing is pending.
    pub async fn shutdown_when_idle(&self) -> Result<Value> {
        Ok(self.post("/v1/admin/shutdown", &Value::Null).await?.1)
    }
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

async fn read_reply(res: Response<hyper::body::Incoming>) -> Result<(u16, Value)> {
    let status = res.status();
    let retry_after = res
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let bytes = res
        .into_body()
        .collect()
        .await
        .map_err(|e| ClientError::Interrupted(e.to_string()))?
        .to_bytes();
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ClientError::BadReply(format!("HTTP {status}: {e}")))?;
    if status.is_success() {
        return Ok((status.as_u16(), value));
    }
    Err(ClientError::Api {
        status: status.as_u16(),
        code: value["code"].as_str().unwrap_or("error").to_string(),
        message: value["error"]
            .as_str()
            .unwrap_or("the broker refused the request")
            .to_string(),
        retry_after,
    })
}

/// A refused or timed-out connect means no broker; anything later broke a live connection.
fn transport_error(e: hyper_util::client::legacy::Error) -> ClientError {
    let mut message = e.to_string();
    if let Some(source) = std::error::Error::source(&e) {
        message.push_str(&format!(": {source}"));
    }
    if e.is_connect() {
        ClientError::Unreachable(message)
    } else {
        ClientError::Interrupted(message)
    }
}

fn enc(segment: &str) -> String {
    form_urlencoded::byte_serialize(segment.as_bytes()).collect()
}

fn query_string(pairs: &[(&str, String)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut s = form_urlencoded::Serializer::new(String::from("?"));
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

/// Reads `broker.json` and the token: the client for the broker it names (not checked).
pub fn from_files(paths: &Paths) -> Option<(Client, BrokerInfo)> {
    let info = BrokerInfo::read(paths)?;
    let token = crate::secret::read_token(&paths.token_file()).ok()??;
    Some((Client::new(info.url.clone(), token), info))
}
