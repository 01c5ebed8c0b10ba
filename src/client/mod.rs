//! The loopback client, used by the CLI and the hook (SPEC §3.5, §4).
//!
//! It talks to the broker over the Unix socket in the 0700 state folder whenever the
//! broker has one: the kernel vouches that only this user could have created it, and every
//! connection checks the peer's uid. Over TCP (`AGENTNOTIFY_URL`, or a broker without a
//! socket) the broker must first prove that it holds the token — an HMAC of a fresh
//! client nonce and the port — before the token is sent: a process squatting on the port
//! of a dead broker learns nothing and decides nothing.
//!
//! Plain HTTP/1.1 on hyper's pooled client rather than reqwest: reqwest carries TLS (for
//! the Relay), and linking it into the hook cost every hook run ~0.35 ms of CPU and 60 page
//! faults (docs/BENCHMARKS.md). Nothing here ever speaks TLS.

mod spawn;
mod transport;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
pub use hyper::Method;
use hyper::{Request, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::endpoint::BrokerInfo;
use crate::model::{
    AnswerSubmission, Interaction, InteractionRequest, Notification, NotificationRequest,
};
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
    /// The peer did not prove it is this user's broker: nothing was sent to it.
    #[error("{0}")]
    NotOurBroker(String),
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

/// A connection to one broker.
#[derive(Clone)]
pub struct Client {
    base: String,
    /// The Unix socket, when the client uses one.
    socket: Option<std::path::PathBuf>,
    token: Secret,
    transport: transport::Transport,
    /// Over TCP: set once the broker has proved it holds the token.
    proven: std::sync::Arc<tokio::sync::OnceCell<()>>,
}

impl Client {
    /// A client for the broker at `base` over TCP (the broker proves itself first).
    pub fn new(base: impl Into<String>, token: Secret) -> Client {
        Client {
            base: base.into().trim_end_matches('/').to_string(),
            socket: None,
            token,
            transport: transport::Transport::tcp(),
            proven: Default::default(),
        }
    }

    /// A client for the broker listening on the Unix socket at `path`.
    #[cfg(unix)]
    pub fn unix(path: impl Into<std::path::PathBuf>, token: Secret) -> Client {
        let path = path.into();
        Client {
            base: "http://localhost".into(),
            socket: Some(path.clone()),
            token,
            transport: transport::Transport::unix(path),
            proven: Default::default(),
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

    /// Where this client reaches the broker: `unix:<socket>` or the broker's URL.
    pub fn address(&self) -> String {
        match &self.socket {
            Some(path) => format!("unix:{}", path.display()),
            None => self.base.clone(),
        }
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
        if self.transport.needs_proof() {
            self.proven.get_or_try_init(|| self.prove()).await?;
        }
        let req = self.request(method, path, body, true)?;
        self.exchange(req, timeout).await
    }

    /// Over TCP: asks the broker to prove it holds the token (SPEC §3.5) before the token
    /// is ever sent. Anyone can ask for a proof, but only the token's holder can make one,
    /// and it is bound to the client's fresh nonce and to the port the client dialled, so a
    /// proof relayed from the real broker on another port does not pass either.
    async fn prove(&self) -> Result<()> {
        let nonce = crate::secret::random_b64url(24);
        let req = self.request(
            Method::GET,
            &format!("/v1/auth/proof?nonce={nonce}"),
            None,
            false,
        )?;
        let not_ours = |why: &str| {
            ClientError::NotOurBroker(format!(
                "the program at {} is not this user's broker ({why}); nothing was sent to it",
                self.base
            ))
        };
        let (_, v) = match self.exchange(req, DEFAULT_TIMEOUT).await {
            Ok(reply) => reply,
            Err(ClientError::Api { .. }) | Err(ClientError::BadReply(_)) => {
                return Err(not_ours("it cannot prove it holds the token"))
            }
            Err(e) => return Err(e),
        };
        let port = self
            .base
            .parse::<hyper::Uri>()
            .ok()
            .and_then(|u| u.port_u16())
            .unwrap_or(80);
        let expected = crate::secret::broker_proof(&self.token, port, &nonce);
        let presented = v["proof"].as_str().unwrap_or("");
        if crate::secret::constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(not_ours("its proof of the token is wrong"))
        }
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
            let res = self.transport.send(req).await.map_err(transport_error)?;
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

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        typed(self.call(Method::GET, path, None, DEFAULT_TIMEOUT).await?.1)
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<(u16, T)> {
        let body = serde_json::to_value(body).expect("a request body serialises");
        let (status, v) = self
            .call(Method::POST, path, Some(&body), DEFAULT_TIMEOUT)
            .await?;
        Ok((status, typed(v)?))
    }

    /// `POST /v1/interactions/request`: the record, and whether it was created (201) rather
    /// than a keyed reuse (200).
    pub async fn request_interaction(
        &self,
        req: &InteractionRequest,
    ) -> Result<(Interaction, bool)> {
        let (status, record) = self.post("/v1/interactions/request", req).await?;
        Ok((record, status == 201))
    }

    pub async fn get_interaction(&self, id: &str) -> Result<Interaction> {
        self.get(&format!("/v1/interactions/{}", enc(id))).await
    }

    /// `GET /v1/interactions?…` with the given query pairs, newest first.
    pub async fn list_interactions(&self, query: &[(&str, String)]) -> Result<Vec<Interaction>> {
        #[derive(serde::Deserialize)]
        struct List {
            interactions: Vec<Interaction>,
        }
        let list: List = self
            .get(&format!("/v1/interactions{}", query_string(query)))
            .await?;
        Ok(list.interactions)
    }

    /// Long-polls for up to `secs` (1–300); the HTTP timeout leaves room for the reply.
    /// `owner` marks the question's owner, whose waits keep its lease alive.
    pub async fn wait(&self, id: &str, secs: u64, owner: bool) -> Result<Interaction> {
        let path = format!(
            "/v1/interactions/{}/wait?timeout={secs}&owner={owner}",
            enc(id)
        );
        let timeout = Duration::from_secs(secs + 5);
        typed(self.call(Method::GET, &path, None, timeout).await?.1)
    }

    pub async fn respond(&self, id: &str, answer: &AnswerSubmission) -> Result<Interaction> {
        Ok(self
            .post(&format!("/v1/interactions/{}/respond", enc(id)), answer)
            .await?
            .1)
    }

    pub async fn cancel(&self, id: &str) -> Result<Interaction> {
        Ok(self
            .post(
                &format!("/v1/interactions/{}/cancel", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    /// `POST /v1/interactions/{id}/publish`: `{"id", "published": <providers>}`.
    pub async fn publish(&self, id: &str) -> Result<Value> {
        Ok(self
            .post(
                &format!("/v1/interactions/{}/publish", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    pub async fn notify(&self, req: &NotificationRequest) -> Result<Notification> {
        Ok(self.post("/v1/notifications", req).await?.1)
    }

    pub async fn list_notifications(&self, query: &[(&str, String)]) -> Result<Vec<Notification>> {
        #[derive(serde::Deserialize)]
        struct List {
            notifications: Vec<Notification>,
        }
        let list: List = self
            .get(&format!("/v1/notifications{}", query_string(query)))
            .await?;
        Ok(list.notifications)
    }

    pub async fn get_notification(&self, id: &str) -> Result<Notification> {
        self.get(&format!("/v1/notifications/{}", enc(id))).await
    }

    /// `action` is `resolve` or `dismiss`.
    pub async fn close_notification(&self, id: &str, action: &str) -> Result<Notification> {
        Ok(self
            .post(
                &format!("/v1/notifications/{}/{action}", enc(id)),
                &Value::Null,
            )
            .await?
            .1)
    }

    /// `POST /v1/ui/link`: a one-time login link for the web UI (`{"url", "expires_in"}`).
    pub async fn ui_link(&self) -> Result<Value> {
        Ok(self.post("/v1/ui/link", &Value::Null).await?.1)
    }

    /// `GET /v1/status`: the broker's counts and settings, as it reports them.
    pub async fn status(&self) -> Result<Value> {
        self.get("/v1/status").await
    }

    /// Asks the broker to exit once nothing is pending.
    pub async fn shutdown_when_idle(&self) -> Result<Value> {
        Ok(self.post("/v1/admin/shutdown", &Value::Null).await?.1)
    }
}

/// A reply in the shape this client expects, or [`ClientError::BadReply`].
fn typed<T: DeserializeOwned>(v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| ClientError::BadReply(e.to_string()))
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

/// Reads `broker.json` and the token: the client for the broker it names, over its Unix
/// socket when it has one (not yet checked: that happens on connecting).
pub fn from_files(paths: &Paths) -> Option<(Client, BrokerInfo)> {
    let info = BrokerInfo::read(paths)?;
    let token = crate::secret::read_token(&paths.token_file()).ok()??;
    let client = match &info.socket {
        #[cfg(unix)]
        Some(socket) => Client::unix(socket.clone(), token),
        _ => Client::new(info.url.clone(), token),
    };
    Some((client, info))
}
