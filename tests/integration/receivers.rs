//! Loopback stand-ins for what channels deliver to: a webhook receiver and an ntfy server.
//!
//! ntfy's server cannot be installed here (no Debian, PyPI or npm package ships it), so
//! [`Ntfy`] follows its documented API: JSON publishing to the root URL (`topic`, `title`,
//! `message`, `priority`, `tags`, `click`, `actions` — at most 3, refused with 400 beyond —
//! and `sequence_id`, which replaces an earlier message of the same sequence), a plain
//! `POST /<topic>` (what an `http` action button sends), the NDJSON stream
//! `GET /<topic>/json` (an `open` event first, then cached messages after `since=` — `all`,
//! a message id or a Unix time — then live ones; `poll=1` closes after the cached ones), and
//! `DELETE /<topic>/<sequence_id>`, which publishes a `message_delete` event.
//!
//! Both speak just enough HTTP/1.1: one request per connection, answered with
//! `Connection: close` (a stream's body ends when the connection does).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch, Notify};

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        stream.read_line(&mut h).await.ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await.ok()?;
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let decode = |s: &str| {
                form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            (k.to_string(), decode(v))
        })
        .collect();
    Some(Request {
        method,
        path: path.to_string(),
        query,
        headers,
        body,
    })
}

async fn reply(stream: &mut BufReader<TcpStream>, status: u16, body: &Value) {
    reply_with(stream, status, "", body).await
}

/// A reply with extra header lines (each ending in `\r\n`).
async fn reply_with(stream: &mut BufReader<TcpStream>, status: u16, headers: &str, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n",
        body.len()
    );
    let s = stream.get_mut();
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body.as_bytes()).await;
    let _ = s.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// Webhook receiver

/// Records every POST; answers `status` (settable: 500 plays a failing receiver).
pub struct WebhookReceiver {
    pub url: String,
    pub port: u16,
    received: Arc<Mutex<Vec<Request>>>,
    status: Arc<Mutex<(u16, String)>>,
    arrived: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookReceiver {
    pub async fn start() -> WebhookReceiver {
        Self::start_on(0).await
    }

    /// On a given port (to come back where a receiver that was down used to be).
    pub async fn start_on(port: u16) -> WebhookReceiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received: Arc<Mutex<Vec<Request>>> = Arc::default();
        let status = Arc::new(Mutex::new((200u16, String::new())));
        let arrived = Arc::new(Notify::new());
        let (r, s, a) = (received.clone(), status.clone(), arrived.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (r, s, a) = (r.clone(), s.clone(), a.clone());
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    if let Some(req) = read_request(&mut stream).await {
                        let (code, headers) = s.lock().unwrap().clone();
                        r.lock().unwrap().push(req);
                        a.notify_waiters();
                        reply_with(&mut stream, code, &headers, &json!({})).await;
                    }
                });
            }
        });
        WebhookReceiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            port,
            received,
            status,
            arrived,
            task,
        }
    }

    pub fn set_status(&self, code: u16) {
        *self.status.lock().unwrap() = (code, String::new());
    }

    /// Answers `code` with a `Retry-After: {secs}` header.
    pub fn set_status_retry_after(&self, code: u16, secs: u64) {
        *self.status.lock().unwrap() = (code, format!("retry-after: {secs}\r\n"));
    }

    pub fn received(&self) -> Vec<Request> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until `pred` holds over what was received (or panics after `secs`).
    pub async fn wait_for(&self, secs: u64, pred: impl Fn(&[Request]) -> bool) -> Vec<Request> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let notified = self.arrived.notified();
            let now = self.received();
            if pred(&now) {
                return now;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the webhook receiver did not get what was expected: {:#?}",
                    now.iter().map(|r| r.json()).collect::<Vec<_>>()
                );
            }
        }
    }

    /// Stops listening (a receiver that is down: connections are refused).
    pub fn stop(self) -> u16 {
        self.task.abort();
        self.port
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------
// ntfy stand-in

#[derive(Default)]
struct NtfyState {
    /// Every message and event, in order (the cache).
    cache: Vec<Value>,
    /// Every publish request body as received, refused ones included.
    publishes: Vec<Value>,
    deletes: Vec<String>,
    next: u64,
}

pub struct Ntfy {
    pub url: String,
    state: Arc<Mutex<NtfyState>>,
    live: broadcast::Sender<Value>,
    /// Bumped to drop every open stream (a network blip).
    cut: watch::Sender<u64>,
    changed: Arc<Notify>,
    /// Streams currently open, per topic.
    open: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

impl Ntfy {
    pub async fn start() -> Ntfy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state: Arc<Mutex<NtfyState>> = Arc::default();
        let (live, _) = broadcast::channel(1024);
        let (cut, _) = watch::channel(0u64);
        let changed = Arc::new(Notify::new());
        let open: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let ctx = (
            state.clone(),
            live.clone(),
            cut.clone(),
            changed.clone(),
            open.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    if let Some(req) = read_request(&mut stream).await {
                        handle(ctx, req, stream).await;
                    }
                });
            }
        });
        Ntfy {
            url: format!("http://127.0.0.1:{port}"),
            state,
            live,
            cut,
            changed,
            open,
            task,
        }
    }

    /// Every publish body received (JSON publishes as sent; plain ones as `{topic, message}`).
    pub fn publishes(&self) -> Vec<Value> {
        self.state.lock().unwrap().publishes.clone()
    }

    /// Messages (not events) published to `topic` and not deleted since.
    pub fn shown(&self, topic: &str) -> Vec<Value> {
        let st = self.state.lock().unwrap();
        let deleted: Vec<&str> = st
            .cache
            .iter()
            .filter(|m| m["event"] == "message_delete")
            .filter_map(|m| m["sequence_id"].as_str())
            .collect();
        let mut shown: Vec<Value> = Vec::new();
        for m in st
            .cache
            .iter()
            .filter(|m| m["event"] == "message" && m["topic"] == topic)
        {
            let seq = m["sequence_id"].as_str().unwrap_or("");
            if deleted.contains(&seq) {
                continue;
            }
            // A later message of the same sequence replaces the earlier one.
            shown.retain(|s| s["sequence_id"] != m["sequence_id"]);
            shown.push(m.clone());
        }
        shown
    }

    pub fn deletes(&self) -> Vec<String> {
        self.state.lock().unwrap().deletes.clone()
    }

    /// Drops every open stream.
    pub fn cut_streams(&self) {
        self.cut.send_modify(|g| *g += 1);
    }

    pub fn open_streams(&self, topic: &str) -> usize {
        *self.open.lock().unwrap().get(topic).unwrap_or(&0)
    }

    /// Presses a button: what the phone's ntfy app does for an `http` action.
    pub async fn press(&self, action: &Value) -> u16 {
        let client = agentnotify_relay_proto::tls::plain_http_client()
            .build()
            .unwrap();
        let mut req = client
            .request(
                reqwest::Method::from_bytes(action["method"].as_str().unwrap_or("POST").as_bytes())
                    .unwrap(),
                action["url"].as_str().unwrap(),
            )
            .body(action["body"].as_str().unwrap_or("").to_string());
        if let Some(h) = action["headers"].as_object() {
            for (k, v) in h {
                req = req.header(k, v.as_str().unwrap());
            }
        }
        req.send().await.unwrap().status().as_u16()
    }

    /// Waits until `pred` holds over the stand-in (or panics after `secs`).
    pub async fn wait_for(&self, secs: u64, pred: impl Fn(&Ntfy) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let notified = self.changed.notified();
            if pred(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the ntfy stand-in did not get what was expected; cache: {:#?}",
                    self.state.lock().unwrap().cache
                );
            }
        }
    }
}

impl Drop for Ntfy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut_streams();
    }
}

type Ctx = (
    Arc<Mutex<NtfyState>>,
    broadcast::Sender<Value>,
    watch::Sender<u64>,
    Arc<Notify>,
    Arc<Mutex<HashMap<String, usize>>>,
);

fn is_topic(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Stores and announces one message or event; returns it.
fn publish(ctx: &Ctx, mut m: Value) -> Value {
    let mut st = ctx.0.lock().unwrap();
    st.next += 1;
    let id = format!("m{:011}", st.next);
    m["id"] = json!(id);
    m["time"] = json!(now_secs());
    if m["sequence_id"].is_null() {
        m["sequence_id"] = json!(id);
    }
    st.cache.push(m.clone());
    drop(st);
    let _ = ctx.1.send(m.clone());
    ctx.3.notify_waiters();
    m
}

async fn handle(ctx: Ctx, req: Request, mut stream: BufReader<TcpStream>) {
    let segs: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    match (req.method.as_str(), segs.as_slice()) {
        ("POST" | "PUT", [""]) => {
            let body = req.json();
            ctx.0.lock().unwrap().publishes.push(body.clone());
            ctx.3.notify_waiters();
            let topic = body["topic"].as_str().unwrap_or("");
            if !is_topic(topic) {
                return reply(
                    &mut stream,
                    400,
                    &json!({"code": 40009, "http": 400, "error": "invalid topic"}),
                )
                .await;
            }
            let actions = body["actions"].as_array().cloned().unwrap_or_default();
            if actions.len() > 3 {
                return reply(&mut stream, 400, &json!({"code": 40018, "http": 400, "error": "invalid request: only 3 actions allowed"})).await;
            }
            for a in &actions {
                let ok = match a["action"].as_str() {
                    Some("http") => a["label"].is_string() && a["url"].is_string(),
                    Some("view") => a["label"].is_string() && a["url"].is_string(),
                    _ => false,
                };
                if !ok {
                    return reply(
                        &mut stream,
                        400,
                        &json!({"code": 40018, "http": 400, "error": "invalid action"}),
                    )
                    .await;
                }
            }
            let mut m = json!({"event": "message", "topic": topic});
            for k in [
                "title",
                "message",
                "priority",
                "tags",
                "click",
                "actions",
                "sequence_id",
            ] {
                if !body[k].is_null() {
                    m[k] = body[k].clone();
                }
            }
            let m = publish(&ctx, m);
            reply(&mut stream, 200, &m).await
        }
        ("POST" | "PUT", [topic]) if is_topic(topic) => {
            let message = String::from_utf8_lossy(&req.body).into_owned();
            ctx.0
                .lock()
                .unwrap()
                .publishes
                .push(json!({"topic": topic, "message": message}));
            let m = publish(
                &ctx,
                json!({"event": "message", "topic": topic, "message": message}),
            );
            reply(&mut stream, 200, &m).await
        }
        ("DELETE", [topic, seq]) if is_topic(topic) => {
            ctx.0.lock().unwrap().deletes.push(seq.to_string());
            let m = publish(
                &ctx,
                json!({"event": "message_delete", "topic": topic, "sequence_id": seq}),
            );
            reply(&mut stream, 200, &m).await
        }
        ("GET", [topic, "json"]) if is_topic(topic) => stream_json(ctx, topic, &req, stream).await,
        _ => {
            reply(
                &mut stream,
                404,
                &json!({"code": 40401, "http": 404, "error": "page not found"}),
            )
            .await
        }
    }
}

async fn stream_json(ctx: Ctx, topic: &str, req: &Request, stream: BufReader<TcpStream>) {
    let mut live = ctx.1.subscribe();
    let mut cut = ctx.2.subscribe();
    let since = req.query.get("since").cloned().unwrap_or_default();
    let poll = req.query.get("poll").is_some_and(|p| p == "1");
    let cached: Vec<Value> = {
        let st = ctx.0.lock().unwrap();
        let mine: Vec<&Value> = st.cache.iter().filter(|m| m["topic"] == topic).collect();
        if since.is_empty() {
            Vec::new()
        } else if since == "all" {
            mine.into_iter().cloned().collect()
        } else if let Some(at) = mine.iter().position(|m| m["id"] == since.as_str()) {
            mine[at + 1..].iter().map(|m| (*m).clone()).collect()
        } else if let Ok(t) = since.parse::<u64>() {
            mine.into_iter()
                .filter(|m| m["time"].as_u64().unwrap_or(0) >= t)
                .cloned()
                .collect()
        } else {
            Vec::new()
        }
    };
    // Split, so a client that goes away is noticed (its read end closes) even while quiet.
    let (mut rd, mut s) = stream.into_inner().into_split();
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson; charset=utf-8\r\nconnection: close\r\n\r\n";
    if s.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let line = |v: &Value| format!("{v}\n");
    let open = json!({"id": "open", "time": now_secs(), "event": "open", "topic": topic});
    if s.write_all(line(&open).as_bytes()).await.is_err() {
        return;
    }
    for m in &cached {
        if s.write_all(line(m).as_bytes()).await.is_err() {
            return;
        }
    }
    if poll {
        let _ = s.shutdown().await;
        return;
    }
    *ctx.4.lock().unwrap().entry(topic.to_string()).or_insert(0) += 1;
    ctx.3.notify_waiters();
    let generation = *cut.borrow_and_update();
    let mut scratch = [0u8; 64];
    loop {
        tokio::select! {
            m = live.recv() => match m {
                Ok(m) if m["topic"] == topic => {
                    if s.write_all(line(&m).as_bytes()).await.is_err() { break; }
                }
                Ok(_) => {}
                Err(_) => break,
            },
            _ = cut.changed() => if *cut.borrow() != generation { break },
            n = rd.read(&mut scratch) => if !matches!(n, Ok(k) if k > 0) { break },
        }
    }
    *ctx.4.lock().unwrap().entry(topic.to_string()).or_insert(1) -= 1;
    ctx.3.notify_waiters();
    let _ = s.shutdown().await;
}
