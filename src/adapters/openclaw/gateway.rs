//! One operator connection to the OpenClaw Gateway's WebSocket (protocol 4): the
//! challenge → `connect` → `hello-ok` handshake, requests matched to their replies by id,
//! and the event stream. A connection that falls silent for two tick intervals is treated
//! as dead, as OpenClaw's own client does.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::device::{Device, Signed};

/// What the watcher asks for: `operator.admin` makes every approval visible to it, which
/// is what makes the Gateway keep an approval pending instead of denying it at once.
pub const SCOPES: &[&str] = &["operator.admin", "operator.approvals", "operator.read"];
const CAPS: &[&str] = &["approvals", "exec-approvals"];
const CLIENT_ID: &str = "cli";
const CLIENT_MODE: &str = "cli";
const ROLE: &str = "operator";
/// How long the handshake and each request may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("cannot reach the Gateway: {0}")]
    Unreachable(String),
    #[error("the Gateway closed the connection")]
    Closed,
    #[error("the Gateway broke the protocol: {0}")]
    Protocol(String),
    /// The Gateway answered with an error; `code` is its `error.code`.
    #[error("the Gateway refused {method}: {message} ({code})")]
    Refused {
        method: String,
        code: String,
        message: String,
    },
    #[error("no reply from the Gateway within {0} s")]
    Timeout(u64),
}

/// One event frame: `exec.approval.requested`, `exec.approval.resolved`, `tick`, …
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    pub payload: Value,
}

type Reply = oneshot::Sender<Result<Value, GatewayError>>;

/// A handle to a live connection; cheap to clone. Requests fail once it has closed.
#[derive(Clone)]
pub struct Gateway {
    requests: mpsc::Sender<(String, Value, Reply)>,
}

impl Gateway {
    /// Sends `method` and waits for its reply's payload.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, GatewayError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((method.to_string(), params, tx))
            .await
            .map_err(|_| GatewayError::Closed)?;
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(GatewayError::Closed),
            Err(_) => Err(GatewayError::Timeout(REQUEST_TIMEOUT.as_secs())),
        }
    }

    /// Whether the connection behind this handle has ended.
    pub fn is_closed(&self) -> bool {
        self.requests.is_closed()
    }
}

/// Where and as whom to connect.
pub struct Target<'a> {
    pub url: &'a str,
    pub token: &'a str,
    pub device: &'a Device,
}

/// Connects and completes the handshake; events then arrive on the receiver, which ends
/// when the connection does.
pub async fn connect(
    target: &Target<'_>,
) -> Result<(Gateway, mpsc::Receiver<Event>), GatewayError> {
    let (mut ws, _) = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        // Without TCP_NODELAY a small frame can wait ~40 ms for a delayed ACK.
        tokio_tungstenite::connect_async_with_config(target.url, None, true),
    )
    .await
    .map_err(|_| GatewayError::Timeout(HANDSHAKE_TIMEOUT.as_secs()))?
    .map_err(|e| GatewayError::Unreachable(e.to_string()))?;
    let tick = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut ws, target))
        .await
        .map_err(|_| GatewayError::Timeout(HANDSHAKE_TIMEOUT.as_secs()))??;
    let (requests, inbox) = mpsc::channel(16);
    let (events, event_rx) = mpsc::channel(64);
    tokio::spawn(pump(ws, inbox, events, tick * 2));
    Ok((Gateway { requests }, event_rx))
}

/// Waits for `connect.challenge`, sends `connect`, and returns the tick interval from
/// `hello-ok`.
async fn handshake(ws: &mut Ws, target: &Target<'_>) -> Result<Duration, GatewayError> {
    let (nonce, ts) = loop {
        let frame = next_frame(ws).await?;
        if frame["type"] == "event" && frame["event"] == "connect.challenge" {
            let p = &frame["payload"];
            match (p["nonce"].as_str(), p["ts"].as_i64()) {
                (Some(n), Some(ts)) if ts >= 0 => break (n.to_string(), ts),
                _ => return Err(GatewayError::Protocol("a malformed challenge".into())),
            }
        }
    };
    let platform = std::env::consts::OS;
    let device = target.device.connect_params(&Signed {
        client_id: CLIENT_ID,
        client_mode: CLIENT_MODE,
        role: ROLE,
        scopes: SCOPES,
        signed_at_ms: ts,
        token: target.token,
        nonce: &nonce,
        platform,
    });
    let params = json!({
        "minProtocol": 4,
        "maxProtocol": 4,
        "client": {
            "id": CLIENT_ID,
            "displayName": "agentnotify",
            "version": crate::VERSION,
            "platform": platform,
            "mode": CLIENT_MODE,
        },
        "role": ROLE,
        "scopes": SCOPES,
        "caps": CAPS,
        "auth": {"token": target.token},
        "userAgent": format!("agentnotify/{}", crate::VERSION),
        "device": device,
    });
    let frame = json!({"type": "req", "id": "connect", "method": "connect", "params": params});
    send(ws, &frame).await?;
    loop {
        let frame = next_frame(ws).await?;
        if frame["type"] == "res" && frame["id"] == "connect" {
            let payload = reply(&frame, "connect")?;
            let tick = payload["policy"]["tickIntervalMs"]
                .as_u64()
                .unwrap_or(30_000);
            return Ok(Duration::from_millis(tick.clamp(1_000, 300_000)));
        }
    }
}

/// Owns the socket: writes requests, routes replies to their callers and events to the
/// receiver, and ends (failing every request in flight) when the socket does.
async fn pump(
    mut ws: Ws,
    mut inbox: mpsc::Receiver<(String, Value, Reply)>,
    events: mpsc::Sender<Event>,
    silence_limit: Duration,
) {
    let mut waiting: HashMap<String, (String, Reply)> = HashMap::new();
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            outgoing = inbox.recv() => {
                let Some((method, params, reply)) = outgoing else { break };
                next_id += 1;
                let id = format!("r{next_id}");
                let frame = json!({"type": "req", "id": id, "method": method, "params": params});
                if let Err(e) = send(&mut ws, &frame).await {
                    let _ = reply.send(Err(e));
                    break;
                }
                waiting.insert(id, (method, reply));
            }
            incoming = tokio::time::timeout(silence_limit, next_frame(&mut ws)) => {
                let frame = match incoming {
                    Ok(Ok(frame)) => frame,
                    Ok(Err(GatewayError::Protocol(why))) => {
                        tracing::warn!(%why, "ignored a frame the Gateway sent");
                        continue;
                    }
                    Ok(Err(_)) => break,
                    Err(_) => {
                        tracing::warn!("the Gateway fell silent; reconnecting");
                        break;
                    }
                };
                match frame["type"].as_str() {
                    Some("res") => {
                        let id = frame["id"].as_str().unwrap_or_default();
                        if let Some((method, reply)) = waiting.remove(id) {
                            let _ = reply.send(self::reply(&frame, &method));
                        }
                    }
                    Some("event") => {
                        let Some(name) = frame["event"].as_str() else { continue };
                        let event = Event { name: name.to_string(), payload: frame["payload"].clone() };
                        if events.send(event).await.is_err() {
                            break;
                        }
                    }
                    _ => tracing::warn!("ignored a frame of an unknown type"),
                }
            }
        }
    }
    let _ = ws.close(None).await;
}

/// A `res` frame's payload, or its error.
fn reply(frame: &Value, method: &str) -> Result<Value, GatewayError> {
    if frame["ok"] == true {
        return Ok(frame["payload"].clone());
    }
    let e = &frame["error"];
    Err(GatewayError::Refused {
        method: method.to_string(),
        code: e["code"].as_str().unwrap_or("error").to_string(),
        message: e["message"]
            .as_str()
            .unwrap_or("no reason given")
            .to_string(),
    })
}

async fn send(ws: &mut Ws, frame: &Value) -> Result<(), GatewayError> {
    ws.send(Message::text(frame.to_string()))
        .await
        .map_err(|_| GatewayError::Closed)
}

/// The next JSON text frame; pings are answered by tungstenite. A frame that is not a JSON
/// object is a [`GatewayError::Protocol`] the caller may skip.
async fn next_frame(ws: &mut Ws) -> Result<Value, GatewayError> {
    loop {
        let msg = match ws.next().await {
            Some(Ok(msg)) => msg,
            Some(Err(_)) | None => return Err(GatewayError::Closed),
        };
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return Err(GatewayError::Closed),
            Message::Binary(_) => return Err(GatewayError::Protocol("a binary frame".into())),
            _ => continue,
        };
        return match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => Ok(v),
            _ => Err(GatewayError::Protocol(
                "a frame that is not a JSON object".into(),
            )),
        };
    }
}
