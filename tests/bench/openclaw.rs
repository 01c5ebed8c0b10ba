//! The OpenClaw adapter's overhead (docs/BENCHMARKS.md, "OpenClaw"): a scripted Gateway
//! (the protocol-4 handshake, `exec.approval.list`, events) drives the real
//! `agentnotify openclaw watch` against the real broker. Measured: the Gateway's
//! `exec.approval.requested` sent → the question listed as pending at the broker, and the
//! person's answer posted → `exec.approval.resolve` received by the Gateway; beside them
//! the same broker's direct request, the floor any client pays.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::{start_broker, summary, Api, AGENTNOTIFY};

/// A Gateway for one connection: frames from `down` are sent to the watcher, resolves
/// come back on the returned receiver with the instant they arrived.
async fn gateway(
    connected: tokio::sync::oneshot::Sender<()>,
) -> (
    String,
    mpsc::UnboundedSender<String>,
    mpsc::UnboundedReceiver<(Value, Instant)>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let (down_tx, mut down) = mpsc::unbounded_channel::<String>();
    let (resolved_tx, resolved) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut connected = Some(connected);
        let (tcp, _) = listener.accept().await.unwrap();
        // As OpenClaw's `ws` server does.
        tcp.set_nodelay(true).unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let challenge = json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}});
        ws.send(Message::text(challenge.to_string())).await.unwrap();
        loop {
            tokio::select! {
                Some(text) = down.recv() => { ws.send(Message::text(text)).await.unwrap(); }
                Some(Ok(Message::Text(text))) = ws.next() => {
                    let at = Instant::now();
                    let frame: Value = serde_json::from_str(&text).unwrap();
                    let payload = match frame["method"].as_str() {
                        Some("connect") => json!({"type": "hello-ok", "policy": {"tickIntervalMs": 30000}}),
                        Some("exec.approval.list") => {
                            if let Some(tx) = connected.take() {
                                let _ = tx.send(());
                            }
                            json!([])
                        }
                        Some("exec.approval.resolve") => {
                            let _ = resolved_tx.send((frame["params"].clone(), at));
                            json!({"ok": true})
                        }
                        _ => json!({}),
                    };
                    let reply = json!({"type": "res", "id": frame["id"], "ok": true, "payload": payload});
                    ws.send(Message::text(reply.to_string())).await.unwrap();
                }
                else => return,
            }
        }
    });
    (url, down_tx, resolved)
}

pub async fn run(scale: f64) {
    let n = ((100.0 * scale) as usize).max(5);
    let b = start_broker(tempfile::tempdir().unwrap());
    let api = Api::new(&b);
    // Events go out only once the watcher has listed (its handshake is done).
    let (connected_tx, connected) = tokio::sync::oneshot::channel();
    let (url, down, mut resolved) = gateway(connected_tx).await;
    let mut watch = Command::new(AGENTNOTIFY)
        .args(["openclaw", "watch", "--url", &url])
        .env("AGENTNOTIFY_HOME", b._home.path())
        .env("OPENCLAW_GATEWAY_TOKEN", "bench")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), connected)
        .await
        .expect("the watcher connects")
        .unwrap();
    let (mut opened, mut answered, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let id = format!("bench-{i}");
        // Keys are `openclaw:<gateway>:<approval id>`.
        let suffix = format!(":{id}");
        let payload = json!({"id": id, "request": {"command": format!("echo {i}"), "cwd": "/tmp",
                             "allowedDecisions": ["allow-once", "deny"]},
                             "expiresAtMs": 4_000_000_000_000i64});
        let t = Instant::now();
        down.send(
            json!({"type": "event", "event": "exec.approval.requested", "payload": payload})
                .to_string(),
        )
        .unwrap();
        let q = loop {
            let list = api.get("/v1/interactions?pending=true").await;
            if let Some(q) = list["interactions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["key"].as_str().is_some_and(|k| k.ends_with(&suffix)))
            {
                break q.clone();
            }
        };
        opened.push(t.elapsed());
        let t = Instant::now();
        assert_eq!(api.answer(&q, &format!("r{i}"), "allow-once").await, 200);
        let (params, at) = tokio::time::timeout(Duration::from_secs(10), resolved.recv())
            .await
            .expect("the decision reaches the Gateway")
            .unwrap();
        assert_eq!(params["id"], id);
        answered.push(at - t);
        let t = Instant::now();
        api.ask(&format!("direct {i}"), "direct").await;
        direct.push(t.elapsed());
    }
    summary(
        "OpenClaw: exec.approval.requested sent → question pending at the broker",
        opened,
        None,
    );
    summary(
        "OpenClaw: answer posted → exec.approval.resolve received by the Gateway",
        answered,
        None,
    );
    summary(
        "the same broker: a direct POST /v1/interactions/request (the floor)",
        direct,
        None,
    );
    let _ = watch.kill();
    let _ = watch.wait();
}
