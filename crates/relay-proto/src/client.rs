//! A typed HTTP client for the Relay API, used by the broker (publish, poll), the
//! `relay add` command and the device client.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::wire::{AnswerBatch, AnswerPost, AnswerResult, DeviceInfo, Envelope};
use agentnotify_model::secret::Secret;

#[derive(Debug, thiserror::Error)]
pub enum RelayClientError {
    #[error("the relay at {url} did not answer: {reason}")]
    Unreachable { url: String, reason: String },
    /// The relay answered with an error status.
    #[error("the relay refused: {message} ({code}, HTTP {status})")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    #[error("the relay sent a reply this client does not understand (HTTP {status})")]
    BadReply { status: u16 },
}

impl RelayClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            RelayClientError::Refused { status, .. } | RelayClientError::BadReply { status } => {
                Some(*status)
            }
            RelayClientError::Unreachable { .. } => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, RelayClientError>;

/// A connection to one Relay, optionally with a bearer token.
#[derive(Clone)]
pub struct RelayClient {
    base: String,
    token: Option<Secret>,
    http: reqwest::Client,
}

impl RelayClient {
    pub fn new(base: &str, token: Option<Secret>) -> RelayClient {
        let http = crate::tls::relay_client(base)
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .build()
            .expect("an HTTP client builds");
        RelayClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            http,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T> {
        self.call_within(method, path, body, None).await
    }

    /// [`Self::call`] with its own time limit (a long-poll outlasts the default 15 s).
    async fn call_within<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Option<Duration>,
    ) -> Result<T> {
        let url = format!("{}{}", self.base, path);
        let mut req = self.http.request(method, &url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t.expose());
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req
            .send()
            .await
            .map_err(|e| RelayClientError::Unreachable {
                url: self.base.clone(),
                reason: without_url(&e),
            })?;
        let status = res.status().as_u16();
        let bytes = res
            .bytes()
            .await
            .map_err(|e| RelayClientError::Unreachable {
                url: self.base.clone(),
                reason: without_url(&e),
            })?;
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|_| RelayClientError::BadReply { status })?;
        if !(200..300).contains(&status) {
            return Err(RelayClientError::Refused {
                status,
                code: value["code"].as_str().unwrap_or("error").to_string(),
                message: value["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            });
        }
        serde_json::from_value(value).map_err(|_| RelayClientError::BadReply { status })
    }

    pub async fn health(&self) -> Result<Value> {
        self.call(Method::GET, "/health", None).await
    }

    /// Registers an installation; returns (installation id, installation token).
    pub async fn register_installation(&self, pairing_token: &str) -> Result<(String, Secret)> {
        let v: Value = self
            .call(
                Method::POST,
                "/v1/installations",
                Some(&json!({ "pairing_token": pairing_token })),
            )
            .await?;
        match (
            v["installation_id"].as_str(),
            v["installation_token"].as_str(),
        ) {
            (Some(id), Some(t)) => Ok((id.to_string(), Secret::new(t))),
            _ => Err(RelayClientError::BadReply { status: 201 }),
        }
    }

    /// Registers a device; returns (device id, device token).
    pub async fn register_device(&self, body: &Value) -> Result<(String, Secret)> {
        let v: Value = self.call(Method::POST, "/v1/devices", Some(body)).await?;
        match (v["device_id"].as_str(), v["device_token"].as_str()) {
            (Some(id), Some(t)) => Ok((id.to_string(), Secret::new(t))),
            _ => Err(RelayClientError::BadReply { status: 201 }),
        }
    }

    pub async fn devices(&self) -> Result<Vec<DeviceInfo>> {
        #[derive(serde::Deserialize)]
        struct R {
            devices: Vec<DeviceInfo>,
        }
        Ok(self
            .call::<R>(Method::GET, "/v1/devices", None)
            .await?
            .devices)
    }

    /// Announces a single-use pairing code (its token only) to the Relay.
    pub async fn register_pairing(
        &self,
        pairing_id: &str,
        pairing_token: &str,
        expires_at: &str,
    ) -> Result<Value> {
        self.call(
            Method::POST,
            "/v1/pairings",
            Some(&json!({"pairing_id": pairing_id, "pairing_token": pairing_token, "expires_at": expires_at})),
        )
        .await
    }

    /// Removes a device of this installation; its token stops working.
    pub async fn delete_device(&self, device_id: &str) -> Result<Value> {
        let id: String = form_urlencoded::byte_serialize(device_id.as_bytes()).collect();
        self.call(Method::DELETE, &format!("/v1/devices/{id}"), None)
            .await
    }

    pub async fn put_envelope(&self, e: &Envelope) -> Result<Value> {
        let body = serde_json::to_value(e).expect("an envelope serialises");
        self.call(Method::POST, "/v1/envelopes", Some(&body)).await
    }

    /// Withdraws a question from every device of this installation; `reason` (answered,
    /// cancelled, expired, superseded) is what a late answer is told.
    pub async fn delete_envelope(&self, event_id: &str, reason: &str) -> Result<Value> {
        let id: String = form_urlencoded::byte_serialize(event_id.as_bytes()).collect();
        let reason: String = form_urlencoded::byte_serialize(reason.as_bytes()).collect();
        self.call(
            Method::DELETE,
            &format!("/v1/envelopes/{id}?reason={reason}"),
            None,
        )
        .await
    }

    pub async fn envelopes(&self) -> Result<Vec<Envelope>> {
        #[derive(serde::Deserialize)]
        struct R {
            envelopes: Vec<Envelope>,
        }
        Ok(self
            .call::<R>(Method::GET, "/v1/envelopes", None)
            .await?
            .envelopes)
    }

    /// Opens the device's event stream (`GET /v1/envelopes/events`); the caller reads the
    /// body as it comes (`chunk`). No overall time limit: the stream lives until closed.
    pub async fn open_events(&self) -> Result<reqwest::Response> {
        let url = format!("{}/v1/envelopes/events", self.base);
        let mut req = self
            .http
            .get(&url)
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(365 * 86_400));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t.expose());
        }
        let res = req
            .send()
            .await
            .map_err(|e| RelayClientError::Unreachable {
                url: self.base.clone(),
                reason: without_url(&e),
            })?;
        let status = res.status().as_u16();
        if status != 200 {
            let value: Value = res
                .json()
                .await
                .map_err(|_| RelayClientError::BadReply { status })?;
            return Err(RelayClientError::Refused {
                status,
                code: value["code"].as_str().unwrap_or("error").to_string(),
                message: value["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            });
        }
        Ok(res)
    }

    pub async fn post_answer(&self, a: &AnswerPost) -> Result<AnswerResult> {
        let body = serde_json::to_value(a).expect("an answer serialises");
        self.call(Method::POST, "/v1/interaction-responses", Some(&body))
            .await
    }

    pub async fn answer_status(&self, response_id: &str) -> Result<AnswerResult> {
        self.answer_status_wait(response_id, Duration::ZERO).await
    }

    /// The verdict, waiting up to `wait` (at most 60 s) for the broker to judge.
    pub async fn answer_status_wait(
        &self,
        response_id: &str,
        wait: Duration,
    ) -> Result<AnswerResult> {
        let id: String = form_urlencoded::byte_serialize(response_id.as_bytes()).collect();
        let secs = wait.as_secs().min(60);
        self.call_within(
            Method::GET,
            &format!("/v1/interaction-responses/{id}?wait={secs}"),
            None,
            Some(Duration::from_secs(secs + 15)),
        )
        .await
    }

    pub async fn answers(&self, installation_id: &str, since: Option<&str>) -> Result<AnswerBatch> {
        self.answers_wait(installation_id, since, Duration::ZERO)
            .await
    }

    /// Answers after `since`; with none yet, the Relay holds the request up to `wait` (at
    /// most 60 s) and replies as soon as one arrives (SPEC §12.2).
    pub async fn answers_wait(
        &self,
        installation_id: &str,
        since: Option<&str>,
        wait: Duration,
    ) -> Result<AnswerBatch> {
        let secs = wait.as_secs().min(60);
        let query = {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("installation_id", installation_id);
            if let Some(c) = since {
                q.append_pair("since", c);
            }
            if secs > 0 {
                q.append_pair("wait", &secs.to_string());
            }
            q.finish()
        };
        self.call_within(
            Method::GET,
            &format!("/v1/interaction-responses?{query}"),
            None,
            Some(Duration::from_secs(secs + 15)),
        )
        .await
    }

    pub async fn post_results(&self, results: &[AnswerResult]) -> Result<Value> {
        self.call(
            Method::POST,
            "/v1/interaction-responses/results",
            Some(&json!({ "results": results })),
        )
        .await
    }
}

/// reqwest errors name the URL, which may carry query parameters; keep just the reason.
fn without_url(e: &reqwest::Error) -> String {
    if let Some(tls) = tls_failure(e) {
        return format!(
            "TLS failed: {tls} (a Relay with a private CA needs SSL_CERT_FILE pointing at it)"
        );
    }
    let mut reason = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection refused or unreachable".to_string()
    } else {
        "request failed".to_string()
    };
    if let Some(src) = std::error::Error::source(e) {
        reason.push_str(&format!(": {src}"));
    }
    reason
}

/// The rustls error behind a failed request, if TLS is what failed.
fn tls_failure(e: &reqwest::Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(found) = tls_failure_in(s) {
            return Some(found);
        }
        source = s.source();
    }
    None
}

fn tls_failure_in(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls.to_string());
    }
    // hyper-rustls nests the rustls error in io::Errors, whose `source` skips it.
    let mut io = e.downcast_ref::<std::io::Error>();
    while let Some(inner) = io.and_then(|io| io.get_ref()) {
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        io = inner.downcast_ref::<std::io::Error>();
    }
    None
}
