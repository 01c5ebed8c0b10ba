//! `agentnotify openclaw watch` against a scripted Gateway: a real WebSocket server in the
//! test speaking OpenClaw's protocol 4 (challenge, `connect`, `hello-ok`, requests, events),
//! the real `agentnotify` binary, the real broker. The real OpenClaw is driven by
//! `tests/hosts/test_openclaw.py`.

use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Api, Daemon, Home, AGENTNOTIFY};

const TOKEN: &str = "gateway-test-token";

/// What the test sends down every open connection.
#[derive(Clone, Debug)]
enum Down {
    Text(String),
    Binary,
    Close,
}

/// A scripted Gateway: answers the handshake, `exec.approval.list` from `pending`, records
/// every `connect` and `exec.approval.resolve`.
struct FakeGateway {
    url: String,
    pending: Arc<Mutex<Vec<Value>>>,
    down: broadcast::Sender<Down>,
    connects: mpsc::UnboundedReceiver<Value>,
    resolves: mpsc::UnboundedReceiver<Value>,
}

impl FakeGateway {
    async fn start() -> FakeGateway {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let pending: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (down, _) = broadcast::channel(64);
        let (connect_tx, connects) = mpsc::unbounded_channel();
        let (resolve_tx, resolves) = mpsc::unbounded_channel();
        let (p, d) = (Arc::clone(&pending), down.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let conn = Connection {
                    pending: Arc::clone(&p),
                    down: d.subscribe(),
                    broadcast: d.clone(),
                    connects: connect_tx.clone(),
                    resolves: resolve_tx.clone(),
                };
                tokio::spawn(conn.serve(tcp));
            }
        });
        FakeGateway {
            url,
            pending,
            down,
            connects,
            resolves,
        }
    }

    fn send(&self, frame: Value) {
        let _ = self.down.send(Down::Text(frame.to_string()));
    }

    fn requested(&self, payload: &Value) {
        self.send(json!({"type": "event", "event": "exec.approval.requested", "payload": payload}));
    }

    fn resolved(&self, id: &str) {
        self.pending.lock().unwrap().retain(|p| p["id"] != id);
        self.send(json!({"type": "event", "event": "exec.approval.resolved",
                         "payload": {"id": id, "decision": "deny", "resolvedBy": "elsewhere"}}));
    }

    async fn next_connect(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(20), self.connects.recv())
            .await
            .expect("the watcher connects")
            .unwrap()
    }

    async fn next_resolve(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(20), self.resolves.recv())
            .await
            .expect("a decision reaches the Gateway")
            .unwrap()
    }
}

struct Connection {
    pending: Arc<Mutex<Vec<Value>>>,
    down: broadcast::Receiver<Down>,
    broadcast: broadcast::Sender<Down>,
    connects: mpsc::UnboundedSender<Value>,
    resolves: mpsc::UnboundedSender<Value>,
}

impl Connection {
    async fn serve(mut self, tcp: tokio::net::TcpStream) {
        let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
            return;
        };
        let challenge = json!({"type": "event", "event": "connect.challenge",
                               "payload": {"nonce": "n-123", "ts": 1_700_000_000_000i64}});
        let _ = ws.send(Message::text(challenge.to_string())).await;
        loop {
            tokio::select! {
                down = self.down.recv() => {
                    let msg = match down {
                        Ok(Down::Text(t)) => Message::text(t),
                        Ok(Down::Binary) => Message::binary(vec![0xff, 0x00]),
                        Ok(Down::Close) | Err(_) => { let _ = ws.close(None).await; return; }
                    };
                    if ws.send(msg).await.is_err() { return; }
                }
                up = ws.next() => {
                    let Some(Ok(Message::Text(text))) = up else { return };
                    let frame: Value = serde_json::from_str(&text).unwrap();
                    let reply = self.handle(&frame);
                    if ws.send(Message::text(reply.to_string())).await.is_err() { return; }
                }
            }
        }
    }

    fn handle(&self, frame: &Value) -> Value {
        let id = frame["id"].clone();
        let params = &frame["params"];
        match frame["method"].as_str().unwrap_or_default() {
            "connect" => {
                let _ = self.connects.send(params.clone());
                if params["auth"]["token"] != TOKEN {
                    return json!({"type": "res", "id": id, "ok": false,
                                  "error": {"code": "UNAUTHORIZED", "message": "token mismatch"}});
                }
                json!({"type": "res", "id": id, "ok": true, "payload": {
                    "type": "hello-ok", "protocol": 4,
                    "auth": {"role": "operator", "scopes": params["scopes"]},
                    "policy": {"tickIntervalMs": 15000}}})
            }
            "exec.approval.list" => {
                let list = self.pending.lock().unwrap().clone();
                json!({"type": "res", "id": id, "ok": true, "payload": list})
            }
            "exec.approval.resolve" => {
                let _ = self.resolves.send(params.clone());
                let approval = params["id"].as_str().unwrap_or_default().to_string();
                self.pending.lock().unwrap().retain(|p| p["id"] != approval);
                let _ = self.broadcast.send(Down::Text(
                    json!({"type": "event", "event": "exec.approval.resolved",
                           "payload": {"id": approval, "decision": params["decision"]}})
                    .to_string(),
                ));
                json!({"type": "res", "id": id, "ok": true, "payload": {"ok": true}})
            }
            _ => json!({"type": "res", "id": id, "ok": false,
                        "error": {"code": "INVALID_REQUEST", "message": "unknown method"}}),
        }
    }
}

/// An `exec.approval.requested` payload as the real Gateway sends it.
fn approval(id: &str, command: &str, allowed: &[&str]) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    json!({
        "approvalKind": "exec",
        "id": id,
        "request": {
            "command": command, "cwd": "/home/me/shop", "host": "gateway", "security": "full",
            "ask": "always", "allowedDecisions": allowed, "agentId": "main",
            "sessionKey": "agent:main:main"
        },
        "createdAtMs": now,
        "expiresAtMs": now + 1_800_000
    })
}

/// The watcher, killed on drop.
struct Watch(Child);

impl Watch {
    fn start(home: &Home, url: &str) -> Watch {
        Watch(
            home.cmd(AGENTNOTIFY)
                .args(["openclaw", "watch", "--url", url])
                .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the watcher"),
        )
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pending interaction for an approval, once the watcher has opened it.
async fn question_for(api: &Api, approval_id: &str) -> Value {
    // Keys are `openclaw:<gateway>:<approval id>`.
    let suffix = format!(":{approval_id}");
    api.pending_where(&format!("the question for {approval_id}"), |q| {
        q["key"]
            .as_str()
            .is_some_and(|k| k.starts_with("openclaw:") && k.ends_with(&suffix))
    })
    .await
}

/// Waits (on the broker's long-poll) until a question leaves `pending`.
async fn settled(api: &Api, id: &str) -> Value {
    let (status, v) = api
        .get(&format!("/v1/interactions/{id}/wait?timeout=20"))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

#[tokio::test]
async fn openclaw_watch_offers_only_allowed_decisions_and_sends_the_persons_answer() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let mut gw = FakeGateway::start().await;
    let _watch = Watch::start(&home, &gw.url);

    // The connect carries the operator role, the admin scope that makes the Gateway keep
    // approvals pending for us, and a device signature over the challenge.
    let connect = gw.next_connect().await;
    assert_eq!(connect["role"], "operator");
    assert!(connect["scopes"]
        .as_array()
        .unwrap()
        .contains(&json!("operator.admin")));
    let device = &connect["device"];
    assert_eq!(device["nonce"], "n-123");
    assert_eq!(device["signedAt"], 1_700_000_000_000i64);
    let key = URL_SAFE_NO_PAD
        .decode(device["publicKey"].as_str().unwrap())
        .unwrap();
    let key = ed25519_dalek::VerifyingKey::from_bytes(&key.try_into().unwrap()).unwrap();
    let scopes: Vec<&str> = connect["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let signed = format!(
        "v3|{}|cli|cli|operator|{}|1700000000000|{TOKEN}|n-123|{}|",
        device["id"].as_str().unwrap(),
        scopes.join(","),
        std::env::consts::OS
    );
    let sig = URL_SAFE_NO_PAD
        .decode(device["signature"].as_str().unwrap())
        .unwrap();
    key.verify_strict(
        signed.as_bytes(),
        &ed25519_dalek::Signature::from_slice(&sig).unwrap(),
    )
    .expect("the device signature covers the v3 payload");

    gw.requested(&approval(
        "ap-1",
        "rm -rf work/victim",
        &["allow-once", "deny"],
    ));
    let q = question_for(&api, "ap-1").await;
    let choices: Vec<&str> = q["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(choices, ["allow-once", "deny"], "only allowedDecisions");
    assert_eq!(q["body"], "rm -rf work/victim");
    assert_eq!(q["agent"], "OpenClaw");
    let (status, v) = api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    assert_eq!(status, 200, "{v} {q}");
    assert_eq!(
        gw.next_resolve().await,
        json!({"id": "ap-1", "decision": "deny"})
    );

    // All three when OpenClaw allows all three; the person's choice is what is sent.
    gw.requested(&approval(
        "ap-2",
        "ls",
        &["allow-once", "allow-always", "deny"],
    ));
    let q = question_for(&api, "ap-2").await;
    assert_eq!(q["choices"].as_array().unwrap().len(), 3);
    api.respond(&q, Api::answer(&q, "r2", "allow-always")).await;
    assert_eq!(
        gw.next_resolve().await,
        json!({"id": "ap-2", "decision": "allow-always"})
    );
}

#[tokio::test]
async fn openclaw_watch_backfills_withdraws_and_reconnects() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let mut gw = FakeGateway::start().await;
    // Pending before the watcher starts: found by exec.approval.list.
    gw.pending
        .lock()
        .unwrap()
        .push(approval("early", "make deploy", &["allow-once", "deny"]));
    let _watch = Watch::start(&home, &gw.url);
    gw.next_connect().await;
    let early = question_for(&api, "early").await;

    // Resolved in OpenClaw's own prompt: the question is withdrawn here.
    gw.resolved("early");
    let record = settled(&api, early["id"].as_str().unwrap()).await;
    assert_eq!(record["status"], "cancelled");

    // One more, then the Gateway drops; while it is gone that one is resolved elsewhere
    // and another arrives. The watcher reconnects, back-fills the new one and withdraws
    // the old.
    let one = approval("during", "echo one", &["allow-once", "deny"]);
    gw.pending.lock().unwrap().push(one.clone());
    gw.requested(&one);
    let during = question_for(&api, "during").await;
    gw.pending.lock().unwrap().clear();
    gw.pending
        .lock()
        .unwrap()
        .push(approval("after", "echo two", &["allow-once", "deny"]));
    let _ = gw.down.send(Down::Close);
    gw.next_connect().await;
    question_for(&api, "after").await;
    let record = settled(&api, during["id"].as_str().unwrap()).await;
    assert_eq!(record["status"], "cancelled");
    assert!(
        gw.resolves.try_recv().is_err(),
        "nothing was resolved without an answer"
    );
}

/// Two Gateways, a watcher each, one broker: when one watcher back-fills after a
/// reconnect, the other Gateway's question is not its leftover and stays open; each answer
/// goes to its own Gateway.
#[tokio::test]
async fn openclaw_two_watchers_on_one_broker_keep_to_their_own_gateway() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let (mut first, mut second) = (FakeGateway::start().await, FakeGateway::start().await);
    first
        .pending
        .lock()
        .unwrap()
        .push(approval("at-first", "make one", &["allow-once", "deny"]));
    second
        .pending
        .lock()
        .unwrap()
        .push(approval("at-second", "make two", &["allow-once", "deny"]));
    let _watch_first = Watch::start(&home, &first.url);
    let _watch_second = Watch::start(&home, &second.url);
    first.next_connect().await;
    second.next_connect().await;
    let q_first = question_for(&api, "at-first").await;
    let q_second = question_for(&api, "at-second").await;
    assert_ne!(q_first["key"], q_second["key"]);
    // The first Gateway drops and comes back: its watcher back-fills and withdraws what
    // its Gateway no longer has pending, and nothing else.
    let _ = first.down.send(Down::Close);
    first.next_connect().await;
    first.requested(&approval("probe", "true", &["allow-once", "deny"]));
    question_for(&api, "probe").await;
    let status = |id: &Value| {
        let api = &api;
        let id = id.as_str().unwrap().to_string();
        async move { api.get(&format!("/v1/interactions/{id}")).await.1["status"].clone() }
    };
    assert_eq!(
        status(&q_second["id"]).await,
        "pending",
        "one watcher withdrew another Gateway's question"
    );
    assert_eq!(status(&q_first["id"]).await, "pending");
    let (code, v) = api
        .respond(&q_second, Api::answer(&q_second, "r-second", "allow-once"))
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        second.next_resolve().await,
        json!({"id": "at-second", "decision": "allow-once"})
    );
    assert!(
        first.resolves.try_recv().is_err(),
        "an answer went to the wrong Gateway"
    );
}

#[tokio::test]
async fn openclaw_watch_ignores_garbage_and_never_resolves_without_an_answer() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let mut gw = FakeGateway::start().await;
    let _watch = Watch::start(&home, &gw.url);
    gw.next_connect().await;

    let _ = gw.down.send(Down::Text("not json {".into()));
    let _ = gw.down.send(Down::Binary);
    gw.send(json!(["an", "array"]));
    gw.send(json!({"type": "mystery"}));
    gw.send(json!({"type": "res", "id": "nobody-asked", "ok": true}));
    gw.send(json!({"type": "event", "event": "exec.approval.requested", "payload": "x"}));
    // Only one decision OpenClaw allows: nothing to choose, so OpenClaw decides.
    gw.requested(&approval("deny-only", "ls", &["deny"]));
    gw.requested(&json!({"id": "no-command", "request": {"cwd": "/"}}));
    gw.send(json!({"type": "event", "event": "exec.approval.resolved", "payload": {"id": 7}}));

    // The person withdraws this one: nothing may reach the Gateway for it.
    gw.requested(&approval("withdrawn", "rm -rf /", &["allow-once", "deny"]));
    let q = question_for(&api, "withdrawn").await;
    let id = q["id"].as_str().unwrap();
    api.post(&format!("/v1/interactions/{id}/cancel"), json!(null))
        .await;
    // Then one that is answered; its decision must be the first and only one to arrive.
    gw.requested(&approval("answered", "ls", &["allow-once", "deny"]));
    let q = question_for(&api, "answered").await;
    api.respond(&q, Api::answer(&q, "r1", "allow-once")).await;
    assert_eq!(
        gw.next_resolve().await,
        json!({"id": "answered", "decision": "allow-once"})
    );
    assert!(gw.resolves.try_recv().is_err());
    let keys: Vec<Value> = api
        .pending()
        .await
        .iter()
        .map(|q| q["key"].clone())
        .collect();
    assert!(keys.is_empty(), "nothing else was asked: {keys:?}");
    assert!(
        gw.connects.try_recv().is_err(),
        "garbage did not cost the connection"
    );
}

#[tokio::test]
async fn openclaw_watch_waits_out_a_broker_crash_and_retries_a_refused_connect() {
    let home = Home::new();
    let mut daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let mut gw = FakeGateway::start().await;
    // A wrong token first: refused, retried, the process stays up.
    let mut wrong = home
        .cmd(AGENTNOTIFY)
        .args(["openclaw", "watch", "--url", &gw.url])
        .env("OPENCLAW_GATEWAY_TOKEN", "wrong")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    gw.next_connect().await;
    gw.next_connect().await;
    assert!(wrong.try_wait().unwrap().is_none(), "a refusal is retried");
    let _ = wrong.kill();
    let _ = wrong.wait();

    let _watch = Watch::start(&home, &gw.url);
    while gw.next_connect().await["auth"]["token"] != TOKEN {}
    gw.pending
        .lock()
        .unwrap()
        .push(approval("crash", "ls", &["allow-once", "deny"]));
    gw.requested(&approval("crash", "ls", &["allow-once", "deny"]));
    let q = question_for(&api, "crash").await;
    // Only once the broker has told the watcher (after its flush) is the question durable.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !home.logs().contains("question open") {
        assert!(Instant::now() < deadline, "the watcher never heard back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The broker dies mid-wait; the watcher starts a new one and waits on the same record.
    daemon.kill9();
    let old_pid = daemon.pid as i64;
    let deadline = Instant::now() + Duration::from_secs(20);
    let api = loop {
        if let Some(info) = home.broker_json() {
            if info["pid"].as_i64() != Some(old_pid) {
                let api = home.api();
                if api.get("/health").await.0 == 200 {
                    break api;
                }
            }
        }
        assert!(Instant::now() < deadline, "no broker came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (status, v) = api.respond(&q, Api::answer(&q, "r1", "allow-once")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        gw.next_resolve().await,
        json!({"id": "crash", "decision": "allow-once"})
    );
}

#[test]
fn openclaw_watch_refuses_bad_arguments_naming_them() {
    let home = Home::new();
    let out = home
        .cmd(AGENTNOTIFY)
        .args(["openclaw", "watch", "--url", "ws://127.0.0.1:1"])
        .env_remove("OPENCLAW_GATEWAY_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OPENCLAW_GATEWAY_TOKEN"));
    let out = home
        .cmd(AGENTNOTIFY)
        .args(["openclaw", "watch", "--url", "https://example.com"])
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url"));
}

#[test]
fn openclaw_harness_installs_the_user_unit_doctor_reports_it_and_uninstall_removes_it() {
    use crate::support::HOOK;
    let home = Home::new();
    let unit = home
        .path()
        .join("home/.config/systemd/user/agentnotify-openclaw.service");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let out = home
        .cmd(HOOK)
        .args(["install-harness", "openclaw", "--url", &url])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&unit.display().to_string()),
        "says where: {stdout}"
    );
    assert!(
        stdout.contains("systemctl --user enable --now agentnotify-openclaw.service"),
        "prints the step it does not run: {stdout}"
    );
    // The snippet from harness/, placeholders filled with this machine's paths.
    let snippet = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("harness/openclaw/agentnotify-openclaw.service"),
    )
    .unwrap();
    let token_file = home.path().join("openclaw_gateway_token");
    let expected = snippet
        .replace(
            "{{agentnotify}}",
            &std::path::Path::new(HOOK)
                .with_file_name("agentnotify")
                .display()
                .to_string(),
        )
        .replace("{{url}}", &url)
        .replace("{{token_file}}", &token_file.display().to_string())
        // The installer's agentnotify folder goes with the service.
        .replacen(
            "Type=simple\n",
            &format!(
                "Type=simple\nEnvironment=\"AGENTNOTIFY_HOME={}\"\n",
                home.path().display()
            ),
            1,
        );
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), expected);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&unit).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the unit is private");
    }

    let doctor = |home: &Home| -> Vec<Value> {
        let out = home.cmd(HOOK).args(["doctor", "--json"]).output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["host"] == "openclaw")
            .cloned()
            .collect()
    };
    let status = |checks: &[Value], name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["status"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no {name} in {checks:?}"))
    };
    let checks = doctor(&home);
    assert_eq!(status(&checks, "openclaw_unit"), "ok");
    assert_eq!(status(&checks, "openclaw_command"), "ok");
    assert_eq!(status(&checks, "openclaw_token"), "fail", "no token yet");
    assert_eq!(
        status(&checks, "openclaw_gateway"),
        "ok",
        "something listens"
    );
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_file)
            .unwrap();
        f.write_all(b"tok\n").unwrap();
    }
    drop(listener);
    // A port held bound but not listening: nobody else can take it while the test runs.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = format!("ws://{}", held.local_addr().unwrap());
    let out = home
        .cmd(HOOK)
        .args(["install-harness", "openclaw", "--url", &closed])
        .output()
        .unwrap();
    assert!(out.status.success());
    let checks = doctor(&home);
    assert_eq!(status(&checks, "openclaw_token"), "ok");
    assert_eq!(
        status(&checks, "openclaw_gateway"),
        "info",
        "not running is no failure"
    );

    // A unit of someone else's is neither replaced nor removed.
    let out = home
        .cmd(HOOK)
        .args(["uninstall-harness", "openclaw"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!unit.exists());
    std::fs::write(&unit, "[Service]\nExecStart=/bin/true\n").unwrap();
    for args in [
        &["install-harness", "openclaw"][..],
        &["uninstall-harness", "openclaw"][..],
    ] {
        let out = home.cmd(HOOK).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not written by agentnotify"));
    }
    assert_eq!(
        std::fs::read_to_string(&unit).unwrap(),
        "[Service]\nExecStart=/bin/true\n"
    );
    let out = home
        .cmd(HOOK)
        .args(["install-harness", "openclaw", "--url", "http://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url"));
}
