//! The reference Relay server (`agentnotify relay serve`): installations and devices with
//! tokens, an envelope store with expiry, and the answer queue the broker polls.
//!
//! It is deliberately dumb: it routes opaque sealed boxes and never judges an answer — the
//! broker does (SPEC §3.3). What it can see and do is listed in `docs/RELAY.md`. Its state is
//! its own sled database; every change is flushed before the reply that reports it.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::wire::{
    question_event_id, AnswerBatch, AnswerPost, AnswerResult, DeviceInfo, Envelope,
    CONTRACT_VERSION,
};
use crate::api::http::{json_response, parse_json, query, query_int, read_body, ApiError, ResBody};
use crate::api::rate_limit::PerAddressLimiter;
use crate::model::{is_id, Timestamp};
use crate::secret::{constant_time_eq, random_b64url};

/// Expired envelopes are kept this long, so a late answer is told "expired", not "unknown".
const EXPIRED_GRACE: Duration = Duration::from_secs(3600);
/// Answers are kept this long after they arrive.
const ANSWER_RETENTION: Duration = Duration::from_secs(7 * 86_400);

#[derive(Debug, thiserror::Error)]
pub enum RelayServerError {
    #[error("cannot open the relay store at {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: sled::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, thiserror::Error)]
enum StoreFail {
    #[error("relay storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("a stored relay record could not be decoded: {0}")]
    Decode(#[from] serde_json::Error),
}

impl From<StoreFail> for ApiError {
    fn from(e: StoreFail) -> ApiError {
        tracing::error!(error = %e, "relay storage failure");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the relay could not store the change; nothing was changed",
        )
    }
}

/// The Relay's durable state.
pub struct RelayServer {
    db: sled::Db,
    /// sha256(token) → [`Principal`]; tokens themselves are never stored.
    tokens: sled::Tree,
    installations: sled::Tree,
    devices: sled::Tree,
    /// device ‖ 0 ‖ event id → [`Envelope`].
    envelopes: sled::Tree,
    /// installation ‖ 0 ‖ seq (big endian) → [`AnswerRecord`].
    answers: sled::Tree,
    /// installation ‖ 0 ‖ response id → seq.
    answer_ids: sled::Tree,
    /// installation ‖ 0 ‖ interaction id → accepted response id.
    answered: sled::Tree,
    /// Serialises read-check-write sequences; a reference server needs no more.
    write: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Principal {
    /// `installation` or `device`.
    kind: String,
    id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct InstallationRecord {
    id: String,
    pairing_token_sha256: String,
    created_at: Timestamp,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AnswerRecord {
    seq: u64,
    body_sha256: String,
    answer: AnswerPost,
    result: AnswerResult,
    received: Timestamp,
}

type Handled = Result<Response<ResBody>, ApiError>;

fn key2(a: &str, b: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(a.len() + 1 + b.len());
    k.extend_from_slice(a.as_bytes());
    k.push(0);
    k.extend_from_slice(b);
    k
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn get<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    key: &[u8],
) -> Result<Option<T>, StoreFail> {
    Ok(match tree.get(key)? {
        Some(v) => Some(serde_json::from_slice(&v)?),
        None => None,
    })
}

fn put<T: Serialize>(tree: &sled::Tree, key: &[u8], value: &T) -> Result<(), StoreFail> {
    tree.insert(key, serde_json::to_vec(value)?)?;
    Ok(())
}

fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, code, message)
}

fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message)
}

fn encode_cursor(seq: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("c1:{seq}"))
}

fn decode_cursor(s: &str) -> Option<u64> {
    let raw = URL_SAFE_NO_PAD.decode(s.trim()).ok()?;
    std::str::from_utf8(&raw)
        .ok()?
        .strip_prefix("c1:")?
        .parse()
        .ok()
}

impl RelayServer {
    pub fn open(dir: &Path) -> Result<Arc<RelayServer>, RelayServerError> {
        let fail = |source| RelayServerError::Open {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(e.into()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let db = sled::Config::new()
            .path(dir.join("relay.sled"))
            .cache_capacity(8 * 1024 * 1024)
            .open()
            .map_err(fail)?;
        let tree = |name: &str| db.open_tree(name).map_err(fail);
        Ok(Arc::new(RelayServer {
            tokens: tree("tokens")?,
            installations: tree("installations")?,
            devices: tree("devices")?,
            envelopes: tree("envelopes")?,
            answers: tree("answers")?,
            answer_ids: tree("answer_ids")?,
            answered: tree("answered")?,
            db,
            write: tokio::sync::Mutex::new(()),
        }))
    }

    async fn commit(&self) -> Result<(), StoreFail> {
        self.db.flush_async().await?;
        Ok(())
    }

    fn principal(&self, req: &Request<Incoming>) -> Result<Principal, ApiError> {
        let unauthorized = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or unknown bearer token",
            )
        };
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(unauthorized)?;
        get::<Principal>(&self.tokens, sha256_hex(token.as_bytes()).as_bytes())?
            .ok_or_else(unauthorized)
    }

    fn installation(&self, req: &Request<Incoming>) -> Result<String, ApiError> {
        let p = self.principal(req)?;
        if p.kind != "installation" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes an installation token, not a device token",
            ));
        }
        Ok(p.id)
    }

    fn device(&self, req: &Request<Incoming>) -> Result<DeviceInfo, ApiError> {
        let p = self.principal(req)?;
        if p.kind != "device" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes a device token, not an installation token",
            ));
        }
        get::<DeviceInfo>(&self.devices, p.id.as_bytes())?.ok_or_else(|| {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "unknown device")
        })
    }

    fn mint_token(&self, kind: &str, id: &str) -> Result<String, StoreFail> {
        let token = random_b64url(32);
        put(
            &self.tokens,
            sha256_hex(token.as_bytes()).as_bytes(),
            &Principal {
                kind: kind.into(),
                id: id.into(),
            },
        )?;
        Ok(token)
    }

    /// Drops envelopes well past expiry and answers past retention.
    pub fn prune(&self, now: Timestamp) -> Result<(), sled::Error> {
        for entry in self.envelopes.iter() {
            let (k, v) = entry?;
            let expired = serde_json::from_slice::<Envelope>(&v)
                .ok()
                .and_then(|e| Timestamp::parse_rfc3339(&e.expires_at))
                .is_none_or(|t| t.plus(EXPIRED_GRACE) < now);
            if expired {
                self.envelopes.remove(k)?;
            }
        }
        for entry in self.answers.iter() {
            let (k, v) = entry?;
            if let Ok(rec) = serde_json::from_slice::<AnswerRecord>(&v) {
                if rec.received.plus(ANSWER_RETENTION) < now {
                    self.answers.remove(k)?;
                    let inst = &rec.answer.installation_id;
                    self.answer_ids
                        .remove(key2(inst, rec.answer.response_id.as_bytes()))?;
                }
            }
        }
        Ok(())
    }
}

/// How `agentnotify relay serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    /// Serve HTTPS with this configuration (`--tls-cert`/`--tls-key`); plain HTTP if absent.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Requests per second each client address may make, sustained.
    pub rate_per_second: u32,
    /// Requests each client address may make in a burst.
    pub rate_burst: u32,
}

/// Runs the Relay until SIGINT/SIGTERM. `on_ready` gets the URL once it listens.
pub async fn run(opts: ServeOptions, on_ready: impl FnOnce(&str)) -> Result<(), RelayServerError> {
    let server = RelayServer::open(&opts.data_dir)?;
    let listener = TcpListener::bind(opts.addr)
        .await
        .map_err(|source| RelayServerError::Bind {
            addr: opts.addr.to_string(),
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| RelayServerError::Bind {
            addr: opts.addr.to_string(),
            source,
        })?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    tracing::info!(%addr, scheme, "relay listening");
    on_ready(&url);
    let (stop_tx, stop_rx) = watch::channel(false);
    let pruner = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            loop {
                if let Err(e) = server.prune(Timestamp::now()) {
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
    let serving = tokio::spawn(serve(listener, Arc::clone(&server), tls, limiter, stop_rx));
    wait_for_signal().await;
    let _ = stop_tx.send(true);
    let _ = serving.await;
    pruner.abort();
    let _ = server.db.flush();
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// A TLS handshake that has not finished by then is dropped (a stalled client must not hold
/// a connection open forever).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the Relay API on a bound listener until `shutdown` turns true; over TLS when an
/// acceptor is given; each client address within its rate.
pub async fn serve(
    listener: TcpListener,
    server: Arc<RelayServer>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limiter: Arc<PerAddressLimiter>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let client = Client {
            server: Arc::clone(&server),
            limiter: Arc::clone(&limiter),
            addr: peer.ip(),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, client).await,
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
                    match handshake {
                        Ok(Ok(stream)) => serve_connection(stream, client).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// One accepted connection: who it is from, and what serves it.
#[derive(Clone)]
struct Client {
    server: Arc<RelayServer>,
    limiter: Arc<PerAddressLimiter>,
    addr: IpAddr,
}

/// Serves HTTP/1.1 on one accepted connection, plain or TLS.
async fn serve_connection<S>(stream: S, client: Client)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let client = client.clone();
        async move {
            let handled = match client.limiter.take(client.addr) {
                Ok(()) => route(&client.server, req).await,
                Err(secs) => Err(ApiError::rate_limited(secs)),
            };
            Ok::<_, std::convert::Infallible>(handled.unwrap_or_else(ApiError::into_response))
        }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn route(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let method = req.method().clone();
    if method == Method::POST {
        require_json(&req)?;
    }
    match (method, segments.as_slice()) {
        (Method::GET, ["health"]) => Ok(json_response(
            StatusCode::OK,
            &json!({"status": "ok", "service": "agentnotify-relay", "version": crate::VERSION}),
        )),
        (Method::POST, ["v1", "installations"]) => register_installation(s, req).await,
        (Method::POST, ["v1", "devices"]) => register_device(s, req).await,
        (Method::GET, ["v1", "devices"]) => list_devices(s, &req),
        (Method::POST, ["v1", "envelopes"]) => put_envelope(s, req).await,
        (Method::GET, ["v1", "envelopes"]) => list_envelopes(s, &req),
        (Method::POST, ["v1", "interaction-responses"]) => post_answer(s, req).await,
        (Method::GET, ["v1", "interaction-responses"]) => list_answers(s, &req),
        (Method::POST, ["v1", "interaction-responses", "results"]) => post_results(s, req).await,
        (Method::GET, ["v1", "interaction-responses", id]) => answer_status(s, &req, id),
        (_, ["health"])
        | (_, ["v1", "installations" | "devices" | "envelopes" | "interaction-responses"])
        | (_, ["v1", "interaction-responses", _]) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method",
        )),
        _ => Err(ApiError::not_found("no such route")),
    }
}

fn require_json(req: &Request<Incoming>) -> Result<(), ApiError> {
    let ok = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST bodies must be JSON (Content-Type: application/json)",
        ))
    }
}

/// Reads a JSON body into `T`; a wrong shape is a 400 naming the problem.
async fn body<T: serde::de::DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let value = parse_json(&read_body(req).await?, false)?;
    if !value.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

/// Longest sealed question: a body at its limit (16,384 characters, SPEC §13.1) sealed
/// and base64-encoded, within the 128 KiB request cap.
const SEALED_QUESTION_MAX: usize = 127 * 1024;

fn check_len(name: &str, value: &str, min: usize, max: usize) -> Result<(), ApiError> {
    let n = value.chars().count();
    if n < min || n > max {
        return Err(ApiError::bad_request(format!(
            "{name} must be {min}-{max} characters"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct InstallationBody {
    pairing_token: String,
}

async fn register_installation(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let b: InstallationBody = body(req).await?;
    check_len("pairing_token", &b.pairing_token, 16, 200)?;
    let _w = s.write.lock().await;
    let id = crate::model::new_id();
    put(
        &s.installations,
        id.as_bytes(),
        &InstallationRecord {
            id: id.clone(),
            pairing_token_sha256: sha256_hex(b.pairing_token.as_bytes()),
            created_at: Timestamp::now(),
        },
    )?;
    let token = s.mint_token("installation", &id)?;
    s.commit().await?;
    tracing::info!(installation = %id, "installation registered");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"installation_id": id, "installation_token": token}),
    ))
}

#[derive(Deserialize)]
struct DeviceBody {
    installation_id: String,
    pairing_token: String,
    public_key: String,
    #[serde(default)]
    name: Option<String>,
    proof: String,
}

async fn register_device(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let b: DeviceBody = body(req).await?;
    check_len("proof", &b.proof, 1, 200)?;
    let name = b.name.unwrap_or_else(|| "device".into());
    check_len("name", &name, 1, 100)?;
    super::seal::decode_key(&b.public_key)
        .map_err(|_| ApiError::bad_request("public_key must be 32 bytes of base64url"))?;
    let refused = || {
        forbidden(
            "pairing_refused",
            "unknown installation or wrong pairing token: pair again with a fresh code",
        )
    };
    let inst: InstallationRecord =
        get(&s.installations, b.installation_id.as_bytes())?.ok_or_else(refused)?;
    let presented = sha256_hex(b.pairing_token.as_bytes());
    if !constant_time_eq(presented.as_bytes(), inst.pairing_token_sha256.as_bytes()) {
        return Err(refused());
    }
    let _w = s.write.lock().await;
    let device = DeviceInfo {
        device_id: crate::model::new_id(),
        installation_id: inst.id,
        name,
        public_key: b.public_key,
        proof: b.proof,
        created_at: Timestamp::now().to_rfc3339(),
    };
    put(&s.devices, device.device_id.as_bytes(), &device)?;
    let token = s.mint_token("device", &device.device_id)?;
    s.commit().await?;
    tracing::info!(device = %device.device_id, installation = %device.installation_id, "device registered");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"device_id": device.device_id, "device_token": token}),
    ))
}

fn list_devices(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let inst = s.installation(req)?;
    let mut devices = Vec::new();
    for v in s.devices.iter().values() {
        let d: DeviceInfo =
            serde_json::from_slice(&v.map_err(StoreFail::from)?).map_err(StoreFail::from)?;
        if d.installation_id == inst {
            devices.push(d);
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({ "devices": devices }),
    ))
}

async fn put_envelope(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req)?;
    let mut e: Envelope = body(req).await?;
    check_len("event_id", &e.event_id, 1, 200)?;
    check_len("key_id", &e.key_id, 1, 64)?;
    check_len("sealed", &e.sealed, 1, SEALED_QUESTION_MAX)?;
    let expires = Timestamp::parse_rfc3339(&e.expires_at)
        .ok_or_else(|| ApiError::bad_request("expires_at must be an RFC 3339 time"))?;
    if expires <= Timestamp::now() {
        return Err(ApiError::bad_request("expires_at is already past"));
    }
    let device: DeviceInfo = get(&s.devices, e.device_id.as_bytes())?
        .filter(|d: &DeviceInfo| d.installation_id == inst)
        .ok_or_else(|| {
            forbidden(
                "unknown_device",
                "device_id is not a device of this installation",
            )
        })?;
    e.installation_id = inst;
    e.stored_at = Some(Timestamp::now().to_rfc3339());
    let _w = s.write.lock().await;
    let key = key2(&device.device_id, e.event_id.as_bytes());
    let replaced = s.envelopes.contains_key(&key).map_err(StoreFail::from)?;
    put(&s.envelopes, &key, &e)?;
    s.commit().await?;
    let status = if replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(json_response(
        status,
        &json!({"device_id": device.device_id, "event_id": e.event_id, "replaced": replaced}),
    ))
}

fn list_envelopes(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let device = s.device(req)?;
    let now = Timestamp::now();
    let mut out = Vec::new();
    for entry in s.envelopes.scan_prefix(key2(&device.device_id, b"")) {
        let (_, v) = entry.map_err(StoreFail::from)?;
        let e: Envelope = serde_json::from_slice(&v).map_err(StoreFail::from)?;
        if Timestamp::parse_rfc3339(&e.expires_at).is_some_and(|t| t > now) {
            out.push(e);
        }
    }
    Ok(json_response(StatusCode::OK, &json!({ "envelopes": out })))
}

async fn post_answer(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let device = s.device(&req)?;
    let raw = read_body(req).await?;
    let value = parse_json(&raw, false)?;
    if !value.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    let mut a: AnswerPost = serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    if a.contract_version != CONTRACT_VERSION {
        return Err(ApiError::bad_request("contract_version must be \"1\""));
    }
    check_len("response_id", &a.response_id, 1, 128)?;
    if !is_id(&a.interaction_id) {
        return Err(ApiError::bad_request(
            "interaction_id must be 32 lowercase hex characters",
        ));
    }
    match &a.sealed {
        Some(sealed) => {
            check_len("sealed", sealed, 1, 60_000)?;
            let plain = a.request_digest.is_some()
                || a.nonce.is_some()
                || a.choice_id.is_some()
                || a.text.is_some();
            if plain || a.key_id.is_none() || a.expires_at.is_none() {
                return Err(ApiError::bad_request(
                    "a sealed answer carries key_id and expires_at and no plain answer fields",
                ));
            }
        }
        None => {
            if a.request_digest.is_none() || a.nonce.is_none() {
                return Err(ApiError::bad_request(
                    "an unsealed answer needs request_digest and nonce",
                ));
            }
            if a.choice_id.is_some() == a.text.is_some() {
                return Err(ApiError::bad_request(
                    "give exactly one of choice_id or text",
                ));
            }
        }
    }
    if a.device_id != device.device_id {
        return Err(forbidden(
            "wrong_device",
            "device_id is not the device this token belongs to",
        ));
    }
    if a.installation_id != device.installation_id {
        return Err(forbidden(
            "wrong_installation",
            "this device is not paired with that installation",
        ));
    }
    let inst = device.installation_id.clone();
    let body_sha256 = sha256_hex(&raw);
    let _w = s.write.lock().await;
    let id_key = key2(&inst, a.response_id.as_bytes());
    if let Some(seq) = s.answer_ids.get(&id_key).map_err(StoreFail::from)? {
        let rec: Option<AnswerRecord> = get(&s.answers, &key2(&inst, &seq))?;
        let result = rec.as_ref().map(|r| r.result.clone());
        let same = rec.is_some_and(|r| r.body_sha256 == body_sha256);
        let (code, message) = if same {
            ("duplicate_response", "this answer was already received")
        } else {
            (
                "response_id_conflict",
                "another answer already used this response_id",
            )
        };
        let mut res = conflict(code, message).into_response();
        if let Some(result) = result {
            *res.body_mut() = crate::api::http::full(
                serde_json::to_vec(&json!({"error": message, "code": code, "result": result}))
                    .unwrap_or_default(),
            );
        }
        return Ok(res);
    }
    // Checked before the envelope: an answered question's envelope is withdrawn, and
    // "already answered" is the reason the phone should see.
    if let Some(winner) = s
        .answered
        .get(key2(&inst, a.interaction_id.as_bytes()))
        .map_err(StoreFail::from)?
    {
        if winner.as_ref() != a.response_id.as_bytes() {
            return Err(conflict(
                "already_answered",
                "this question was already answered",
            ));
        }
    }
    let envelope: Envelope = get(
        &s.envelopes,
        &key2(
            &device.device_id,
            question_event_id(&a.interaction_id).as_bytes(),
        ),
    )?
    .ok_or_else(|| forbidden("not_a_recipient", "this device was not sent that question"))?;
    if Timestamp::parse_rfc3339(&envelope.expires_at).is_none_or(|t| t <= Timestamp::now()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "question_expired",
            "the question has expired; the answer was not forwarded",
        ));
    }
    // Sequence numbers start at 1: cursor 0 means "from the beginning".
    let seq = s.db.generate_id().map_err(StoreFail::from)? + 1;
    let now = Timestamp::now();
    a.received_at = Some(now.to_rfc3339());
    let rec = AnswerRecord {
        seq,
        body_sha256,
        result: AnswerResult {
            response_id: a.response_id.clone(),
            status: "pending".into(),
            code: None,
            message: None,
        },
        answer: a,
        received: now,
    };
    put(&s.answers, &key2(&inst, &seq.to_be_bytes()), &rec)?;
    s.answer_ids
        .insert(&id_key, &seq.to_be_bytes())
        .map_err(StoreFail::from)?;
    s.commit().await?;
    tracing::info!(installation = %inst, device = %device.device_id, interaction = %rec.answer.interaction_id, "answer received");
    Ok(json_response(StatusCode::CREATED, &rec.result))
}

fn list_answers(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let inst = s.installation(req)?;
    let q = query(req)?;
    match q.get("installation_id") {
        Some(asked) if asked == &inst => {}
        Some(_) => {
            return Err(forbidden(
                "wrong_installation",
                "installation_id is not the installation this token belongs to",
            ))
        }
        None => return Err(ApiError::bad_request("installation_id is required")),
    }
    let since = match q.get("since").map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => 0,
        Some(c) => decode_cursor(c).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_cursor",
                "since is not a cursor this relay issued",
            )
        })?,
    };
    let limit = query_int(&q, "limit", 1, 500)?.unwrap_or(100) as usize;
    let start = key2(&inst, &(since.saturating_add(1)).to_be_bytes());
    let end = key2(&inst, &u64::MAX.to_be_bytes());
    let mut out = Vec::new();
    let mut last = since;
    for entry in s.answers.range(start..=end) {
        let (_, v) = entry.map_err(StoreFail::from)?;
        let rec: AnswerRecord = serde_json::from_slice(&v).map_err(StoreFail::from)?;
        last = rec.seq;
        out.push(rec.answer);
        if out.len() >= limit {
            break;
        }
    }
    let batch = AnswerBatch {
        responses: out,
        cursor: Some(encode_cursor(last)),
    };
    Ok(json_response(StatusCode::OK, &batch))
}

#[derive(Deserialize)]
struct ResultsBody {
    results: Vec<AnswerResult>,
}

async fn post_results(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req)?;
    let b: ResultsBody = body(req).await?;
    if b.results.len() > 500 {
        return Err(ApiError::bad_request(
            "results must have at most 500 entries",
        ));
    }
    for r in &b.results {
        if !matches!(r.status.as_str(), "accepted" | "refused") {
            return Err(ApiError::bad_request(
                "each result's status must be accepted or refused",
            ));
        }
        check_len("response_id", &r.response_id, 1, 128)?;
    }
    let _w = s.write.lock().await;
    let mut updated = 0;
    for r in b.results {
        let Some(seq) = s
            .answer_ids
            .get(key2(&inst, r.response_id.as_bytes()))
            .map_err(StoreFail::from)?
        else {
            continue;
        };
        let key = key2(&inst, &seq);
        let Some(mut rec) = get::<AnswerRecord>(&s.answers, &key)? else {
            continue;
        };
        if r.status == "accepted" {
            let interaction = rec.answer.interaction_id.clone();
            s.answered
                .insert(
                    key2(&inst, interaction.as_bytes()),
                    r.response_id.as_bytes(),
                )
                .map_err(StoreFail::from)?;
            withdraw(s, &inst, &interaction)?;
        }
        rec.result = r;
        put(&s.answers, &key, &rec)?;
        updated += 1;
    }
    s.commit().await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "updated": updated }),
    ))
}

/// Removes an answered question from every device of the installation.
fn withdraw(s: &RelayServer, inst: &str, interaction_id: &str) -> Result<(), StoreFail> {
    let event = question_event_id(interaction_id);
    for v in s.devices.iter().values() {
        let d: DeviceInfo = serde_json::from_slice(&v?)?;
        if d.installation_id == inst {
            s.envelopes.remove(key2(&d.device_id, event.as_bytes()))?;
        }
    }
    Ok(())
}

fn answer_status(s: &RelayServer, req: &Request<Incoming>, response_id: &str) -> Handled {
    let device = s.device(req)?;
    let inst = &device.installation_id;
    let not_found = || ApiError::not_found("no answer with that response_id from this device");
    let seq = s
        .answer_ids
        .get(key2(inst, response_id.as_bytes()))
        .map_err(StoreFail::from)?
        .ok_or_else(not_found)?;
    let rec: AnswerRecord = get(&s.answers, &key2(inst, &seq))?.ok_or_else(not_found)?;
    if rec.answer.device_id != device.device_id {
        return Err(not_found());
    }
    Ok(json_response(StatusCode::OK, &rec.result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_opaque_and_checked() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        assert_eq!(decode_cursor("42"), None);
        assert_eq!(decode_cursor("!!"), None);
    }
}
