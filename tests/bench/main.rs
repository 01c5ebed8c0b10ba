//! Benchmarks for the broker and the hook (not tests: they measure, print, and never fail on
//! timing). Run: `cargo bench --bench bench` (release build). Results go to docs/BENCHMARKS.md.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod delivery;
mod openclaw;
#[path = "../integration/postgres.rs"]
#[allow(dead_code)]
mod postgres;
/// The test harness's PostgreSQL (a temp data dir on a free loopback port).
#[path = "../support/provision.rs"]
#[allow(dead_code)]
mod provision;
/// The loopback ntfy stand-in and webhook receiver of the integration tests.
#[path = "../integration/receivers.rs"]
mod receivers;
mod relay_pg;

const AGENTNOTIFY: &str = env!("CARGO_BIN_EXE_agentnotify");
const HOOK: &str = env!("CARGO_BIN_EXE_agentnotify-hook");

struct Broker {
    child: Child,
    url: String,
    token: String,
    pid: u32,
    _home: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_broker(home: tempfile::TempDir) -> Broker {
    use std::io::BufRead;
    let mut child = Command::new(AGENTNOTIFY)
        .args([
            "daemon",
            "--port",
            "0",
            "--rate-limit",
            "1000000",
            "--rate-burst",
            "1000000",
        ])
        .env("AGENTNOTIFY_HOME", home.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let token = std::fs::read_to_string(home.path().join("token"))
        .unwrap()
        .trim()
        .to_string();
    let pid = child.id();
    Broker {
        child,
        url,
        token,
        pid,
        _home: home,
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn summary(name: &str, mut v: Vec<Duration>, base: Option<Duration>) {
    v.sort();
    let p50 = percentile(&v, 0.5);
    let ratio = base
        .map(|b| {
            format!(
                " ({:.1}× a trivial binary's exec)",
                p50.as_secs_f64() / b.as_secs_f64()
            )
        })
        .unwrap_or_default();
    println!(
        "| {name} | {} | {} | {} | {}{ratio} |",
        v.len(),
        ms(p50),
        ms(percentile(&v, 0.99)),
        ms(*v.last().unwrap())
    );
}

#[derive(Clone)]
struct Api {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    fn new(b: &Broker) -> Api {
        Api {
            url: b.url.clone(),
            token: b.token.clone(),
            http: agentnotify_relay_proto::tls::plain_http_client()
                .pool_max_idle_per_host(20_000)
                .build()
                .unwrap(),
        }
    }
    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }
    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }
    async fn ask(&self, prompt: &str, session: &str) -> Value {
        self.post(
            "/v1/interactions/request",
            &json!({"prompt": prompt, "agent": "bench", "session_id": session}),
        )
        .await
        .1
    }
    async fn answer(&self, q: &Value, rid: &str, choice: &str) -> u16 {
        let body = json!({"response_id": rid, "request_digest": q["request_digest"], "nonce": q["nonce"], "choice_id": choice, "source": "bench"});
        self.post(
            &format!("/v1/interactions/{}/respond", q["id"].as_str().unwrap()),
            &body,
        )
        .await
        .0
    }
}

async fn bench_wake_latency(api: &Api, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let q = api.ask(&format!("wake {i}"), "wake").await;
        let id = q["id"].as_str().unwrap().to_string();
        let waiter = {
            let api = api.clone();
            tokio::spawn(async move {
                let v = api
                    .get(&format!("/v1/interactions/{id}/wait?timeout=60"))
                    .await;
                (Instant::now(), v)
            })
        };
        // Give the wait time to park on the broker (a benchmark may sleep; tests may not).
        tokio::time::sleep(Duration::from_millis(3)).await;
        let sent = Instant::now();
        assert_eq!(api.answer(&q, "r", "allow-once").await, 200);
        let (woke, v) = waiter.await.unwrap();
        assert_eq!(v["status"], "answered");
        out.push(woke.saturating_duration_since(sent));
    }
    out
}

async fn bench_throughput(api: &Api, secs: u64, workers: usize) -> (u64, f64) {
    let stop = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut pairs = 0u64;
                while Instant::now() < stop {
                    let q = api.ask(&format!("tp {w} {pairs}"), "tp").await;
                    assert_eq!(api.answer(&q, "r", "deny").await, 200);
                    pairs += 1;
                }
                pairs
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    (total, total as f64 / started.elapsed().as_secs_f64())
}

async fn bench_many_waits(b: &Broker, waits: usize) -> (u64, usize, Duration) {
    let api = Api::new(b);
    let questions: Vec<Value> = {
        let mut v = Vec::new();
        for i in 0..100 {
            v.push(api.ask(&format!("many {i}"), "many").await);
        }
        v
    };
    let mut handles = Vec::with_capacity(waits);
    for i in 0..waits {
        let api = api.clone();
        let id = questions[i % questions.len()]["id"]
            .as_str()
            .unwrap()
            .to_string();
        handles.push(tokio::spawn(async move {
            api.get(&format!("/v1/interactions/{id}/wait?timeout=300"))
                .await
        }));
    }
    // Wait until the broker holds every connection (its open descriptors reach the count).
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(format!("/proc/{}/fd", b.pid))
        .map(|d| d.count())
        .unwrap_or(0)
        < waits
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = rss_kib(b.pid, "VmRSS:");
    let started = Instant::now();
    for q in &questions {
        assert_eq!(api.answer(q, "r", "allow-once").await, 200);
    }
    let mut woken = 0;
    for h in handles {
        if h.await.unwrap()["status"] == "answered" {
            woken += 1;
        }
    }
    (rss, woken, started.elapsed())
}

fn trivial_binary(dir: &Path) -> PathBuf {
    let src = dir.join("trivial.rs");
    std::fs::write(&src, "fn main() {}\n").unwrap();
    let out = dir.join("trivial");
    let ok = Command::new("rustc")
        .args(["-O", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    out
}

fn exec_time(bin: &Path, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            Command::new(bin).status().unwrap();
            t.elapsed()
        })
        .collect()
}

/// Spawns the hook with a payload for `session`; returns the child and its start instant.
/// `command`, when given, replaces the fixture's command (the body the hook sends whole).
fn spawn_hook(home: &Path, session: &str, command: Option<&str>) -> (Child, Instant) {
    let mut payload = include_str!("../../hooks/fixtures/claude-bash.json")
        .replace("3f9c1d2e-8a7b-4c6d-9e0f-112233445566", session);
    if let Some(c) = command {
        payload = payload.replace("rm -rf node_modules && npm ci", c);
    }
    let t = Instant::now();
    let mut child = Command::new(HOOK)
        .args(["claude", "ask-permission", "--timeout", "60"])
        .env("AGENTNOTIFY_HOME", home)
        .env("AGENTNOTIFY_PORT", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    (child, t)
}

async fn visible(api: &Api, session: &str) -> Value {
    loop {
        let v = api
            .get(&format!("/v1/interactions?pending=true&session={session}"))
            .await;
        if let Some(q) = v["interactions"].as_array().and_then(|a| a.first()) {
            return q.clone();
        }
    }
}

/// Waits for a child with wait4, returning its exit instant and peak RSS (KiB).
fn wait_rusage(child: &Child) -> (Instant, i64) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    (Instant::now(), usage.ru_maxrss)
}

async fn bench_hook_warm(
    b: &Broker,
    home: &Path,
    n: usize,
    command: Option<&str>,
) -> (Vec<Duration>, Vec<Duration>, i64) {
    let api = Api::new(b);
    let (mut visible_t, mut exit_t, mut peak) = (Vec::new(), Vec::new(), 0);
    for i in 0..n {
        let session = format!("warm-{}-{i}", command.map_or(0, str::len));
        let (child, started) = spawn_hook(home, &session, command);
        let q = visible(&api, &session).await;
        visible_t.push(started.elapsed());
        let child = Arc::new(child);
        let exited = {
            let child = Arc::clone(&child);
            std::thread::spawn(move || wait_rusage(&child))
        };
        assert_eq!(api.answer(&q, "r", "allow-once").await, 200);
        let accepted = Instant::now();
        let (at, rss) = exited.join().unwrap();
        exit_t.push(at.saturating_duration_since(accepted));
        peak = peak.max(rss);
    }
    (visible_t, exit_t, peak)
}

/// The phone path through the real binaries on loopback: a Relay (`relay serve`), a broker
/// with one provider and a device paired by the device client. Each round a hook opens a
/// question. Two clocks: hook start → the question opened on the device's live stream, and
/// the device's sealed answer (`POST /v1/interaction-responses`) → the hook's exit.
async fn bench_relay_answer(n: usize) -> (Vec<Duration>, Vec<Duration>) {
    use agentnotify::device::{Answer, Device, StreamEvent};
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(AGENTNOTIFY)
            .args(args)
            .env("AGENTNOTIFY_HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut relay = Command::new(AGENTNOTIFY)
        .args([
            "relay",
            "serve",
            "--port",
            "0",
            "--rate-limit",
            "1000000",
            "--rate-burst",
            "1000000",
            "--data",
        ])
        .arg(home.path().join("relay-data"))
        .env("AGENTNOTIFY_HOME", home.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(relay.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    // The poll interval is long on purpose: answers must come by the long-poll.
    std::fs::write(
        home.path().join("config.toml"),
        "[relay]\npoll_interval_seconds = 60\n",
    )
    .unwrap();
    run(&["relay", "add", "home", "--url", &url, "--include-message"]);
    let code = run(&["relay", "pair", "home"])
        .lines()
        .next()
        .unwrap()
        .to_string();
    let device = Device::register(&home.path().join("phone"), &code, "bench")
        .await
        .unwrap();
    let path = home.path().to_path_buf();
    let broker = start_broker(home);
    let (tx, mut events) = tokio::sync::mpsc::channel(256);
    let watching = {
        let device = Device::load(&path.join("phone")).unwrap();
        tokio::spawn(async move { device.watch(tx).await })
    };
    while !matches!(events.recv().await, Some(StreamEvent::Ready(_))) {}
    let mut out = Vec::with_capacity(n);
    let mut seen = Vec::with_capacity(n);
    for i in 0..n {
        let session = format!("relay-{i}");
        let (mut child, started) = spawn_hook(&path, &session, None);
        let q = loop {
            match events.recv().await {
                Some(StreamEvent::Question(q))
                    if q.question.session_id.as_deref() == Some(&session) =>
                {
                    break *q
                }
                Some(_) => {}
                None => panic!("the device's stream ended"),
            }
        };
        seen.push(started.elapsed());
        let post = device.seal(
            &device.payload(
                &q,
                &format!("bench-{i}"),
                &Answer::Choice("allow-once".into()),
            ),
            &q.expires_at,
        );
        let exited = std::thread::spawn(move || {
            let _ = child.wait();
            Instant::now()
        });
        let answered = Instant::now();
        device.send(&post).await.unwrap();
        let at = exited.join().unwrap();
        out.push(at.saturating_duration_since(answered));
    }
    watching.abort();
    drop(broker);
    let _ = relay.kill();
    let _ = relay.wait();
    (seen, out)
}

/// One Relay process holding `devices` device streams open, then storing `envelopes` sealed
/// envelopes (from concurrent installation clients) and fanning each out to its device's
/// stream. Returns (Relay RSS with the streams open, KiB; envelopes stored; per second;
/// envelope events delivered to the streams).
async fn bench_relay_fanout(devices: usize, envelopes: usize) -> (u64, usize, f64, usize) {
    use std::io::BufRead;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let home = tempfile::tempdir().unwrap();
    let mut relay = Command::new(AGENTNOTIFY)
        .args([
            "relay",
            "serve",
            "--port",
            "0",
            "--rate-limit",
            "1000000",
            "--rate-burst",
            "1000000",
            "--data",
        ])
        .arg(home.path().join("relay-data"))
        .env("AGENTNOTIFY_HOME", home.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(relay.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let post = |path: &str, token: Option<&str>, body: Value| {
        let mut r = http.post(format!("{url}{path}")).json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move {
            let res = r.send().await.unwrap();
            assert!(res.status().is_success(), "{}", res.status());
            res.json::<Value>().await.unwrap()
        }
    };
    let inst = post(
        "/v1/installations",
        None,
        json!({"pairing_token": "bench-installation-token"}),
    )
    .await;
    let (inst_id, inst_token) = (
        inst["installation_id"].as_str().unwrap().to_string(),
        inst["installation_token"].as_str().unwrap().to_string(),
    );
    let expires = agentnotify::model::Timestamp::now()
        .plus(Duration::from_secs(300))
        .to_rfc3339();
    let mut device_ids = Vec::with_capacity(devices);
    let received = Arc::new(AtomicUsize::new(0));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(devices);
    for d in 0..devices {
        let token = format!("bench-pairing-token-{d:06}");
        post(
            "/v1/pairings",
            Some(&inst_token),
            json!({"pairing_id": format!("p1.1.{d:016x}"), "pairing_token": token, "expires_at": expires}),
        )
        .await;
        let key = agentnotify_relay_proto::seal::KeyPair::generate().public_b64();
        let dev = post(
            "/v1/devices",
            None,
            json!({"installation_id": inst_id, "pairing_token": token, "public_key": key, "proof": "bench"}),
        )
        .await;
        device_ids.push(dev["device_id"].as_str().unwrap().to_string());
        let stream_client = agentnotify_relay_proto::client::RelayClient::new(
            &url,
            Some(agentnotify::secret::Secret::new(
                dev["device_token"].as_str().unwrap(),
            )),
        );
        let (received, ready_tx) = (Arc::clone(&received), ready_tx.clone());
        tokio::spawn(async move {
            let mut res = stream_client.open_events().await.unwrap();
            let mut announced = false;
            while let Ok(Some(chunk)) = res.chunk().await {
                let text = String::from_utf8_lossy(&chunk);
                if !announced && text.contains("event: ready") {
                    announced = true;
                    let _ = ready_tx.send(()).await;
                }
                received.fetch_add(text.matches("event: envelope").count(), Ordering::Relaxed);
            }
        });
    }
    for _ in 0..devices {
        ready_rx.recv().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_kib(relay.id(), "VmRSS:");
    let sealed = "x".repeat(600);
    let started = Instant::now();
    let workers = 16;
    let per = envelopes / workers;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (http, url, token, ids, sealed, expires) = (
                http.clone(),
                url.clone(),
                inst_token.clone(),
                device_ids.clone(),
                sealed.clone(),
                expires.clone(),
            );
            tokio::spawn(async move {
                for i in 0..per {
                    let device = &ids[(w * per + i) % ids.len()];
                    let body = json!({"device_id": device, "event_id": format!("interaction:{w:08x}{i:024x}"), "key_id": "0011223344556677", "expires_at": expires, "sealed": sealed, "signature": "bench"});
                    let res = http
                        .post(format!("{url}/v1/envelopes"))
                        .bearer_auth(&token)
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    assert!(res.status().is_success(), "{}", res.status());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = (per * workers) as f64 / started.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.load(Ordering::Relaxed) < per * workers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = relay.kill();
    let _ = relay.wait();
    (rss, per * workers, rate, received.load(Ordering::Relaxed))
}

async fn bench_hook_cold(n: usize) -> Vec<Duration> {
    let mut out = Vec::new();
    for i in 0..n {
        let home = tempfile::tempdir().unwrap();
        let session = format!("cold-{i}");
        let (mut child, started) = spawn_hook(home.path(), &session, None);
        let info = loop {
            if let Ok(bytes) = std::fs::read(home.path().join("broker.json")) {
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    break v;
                }
            }
        };
        let token = loop {
            if let Ok(t) = std::fs::read_to_string(home.path().join("token")) {
                break t.trim().to_string();
            }
        };
        let api = Api {
            url: info["url"].as_str().unwrap().to_string(),
            token,
            http: agentnotify_relay_proto::tls::plain_http_client()
                .build()
                .unwrap(),
        };
        visible(&api, &session).await;
        out.push(started.elapsed());
        let _ = child.kill();
        let _ = child.wait();
        unsafe { libc::kill(info["pid"].as_i64().unwrap() as i32, libc::SIGKILL) };
    }
    out
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let n = |x: usize| ((x as f64 * scale) as usize).max(5);
    if std::env::var("BENCH_ONLY").as_deref() == Ok("openclaw") {
        println!("| measurement | samples | p50 | p99 | max |");
        println!("| --- | --- | --- | --- | --- |");
        openclaw::run(scale).await;
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("relay-pg") {
        relay_pg::run(scale).await;
        return;
    }
    if std::env::var("BENCH_ONLY").as_deref() == Ok("delivery") {
        println!("| measurement | samples | p50 | p99 | max |");
        println!("| --- | --- | --- | --- | --- |");
        delivery::run(scale).await;
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trivial = trivial_binary(tmp.path());
    let mut trivial_exec = exec_time(&trivial, n(200));
    trivial_exec.sort();
    let base = percentile(&trivial_exec, 0.5);

    println!(
        "machine: {} cores; {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/cpuinfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("model name"))
            .unwrap_or("")
            .trim()
    );
    println!();
    println!("| measurement | samples | p50 | p99 | max |");
    println!("| --- | --- | --- | --- | --- |");
    summary(
        "trivial Rust binary: exec to exit",
        trivial_exec.clone(),
        None,
    );

    let b = start_broker(tempfile::tempdir().unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss = rss_kib(b.pid, "VmRSS:");
    let api = Api::new(&b);
    summary(
        "answer accepted → woken waiter (HTTP round trips, fsync included)",
        bench_wake_latency(&api, n(1000)).await,
        None,
    );

    let home = tempfile::tempdir().unwrap();
    let hb = start_broker(home);
    let hook_home = hb._home.path().to_path_buf();
    let (vis, exit, peak) = bench_hook_warm(&hb, &hook_home, n(200), None).await;
    summary(
        "warm hook: start → question visible in the API",
        vis,
        Some(base),
    );
    summary(
        "warm hook: answer accepted → hook exited with its decision",
        exit,
        Some(base),
    );
    // What runs is sent whole (SPEC §13.1): a command at the 16,384-character body limit.
    let big = format!("echo {}", "a".repeat(16_384 - 5));
    let (big_vis, _, _) = bench_hook_warm(&hb, &hook_home, n(200), Some(&big)).await;
    summary(
        "warm hook, 16 KiB command as the body: start → question visible",
        big_vis,
        Some(base),
    );
    drop(hb);
    let (seen, answered) = bench_relay_answer(n(100)).await;
    summary(
        "phone path: hook start → question opened on the device's live stream",
        seen,
        Some(base),
    );
    summary(
        "phone path: device's sealed answer → hook exited (loopback Relay, long-poll)",
        answered,
        Some(base),
    );
    summary(
        "cold hook (no broker): start → question visible",
        bench_hook_cold(n(20)).await,
        Some(base),
    );
    println!();
    let streams = ((1000.0 * scale) as usize).max(50);
    let stored = ((2000.0 * scale) as usize).max(160);
    let (rss, stored, rate, fanned) = bench_relay_fanout(streams, stored).await;
    println!("- one Relay holding {streams} device streams: RSS **{:.1} MiB**; {stored} sealed envelopes stored at **{rate:.0}/s** (16 concurrent installation clients), {fanned}/{stored} delivered live to their streams", rss as f64 / 1024.0);
    let (pairs, rate) = bench_throughput(&api, 10, 32).await;
    println!("- durable create+answer pairs over 10 s, 32 concurrent clients: {pairs} pairs, **{rate:.0}/s**");
    drop(b);
    let waits = ((10_000.0 * scale) as usize).max(100);
    let b = start_broker(tempfile::tempdir().unwrap());
    let (rss, woken, took) = bench_many_waits(&b, waits).await;
    println!("- {waits} concurrent waits held open: broker RSS **{:.1} MiB**; {woken}/{waits} woken as answered, all within {}", rss as f64 / 1024.0, ms(took));
    println!(
        "- idle broker RSS (fresh start): **{:.1} MiB**",
        idle_rss as f64 / 1024.0
    );
    println!(
        "- hook peak RSS (warm path, max over runs): **{:.1} MiB**",
        peak as f64 / 1024.0
    );
    println!();
    delivery::run(scale).await;
    openclaw::run(scale).await;
    for bin in [AGENTNOTIFY, HOOK] {
        let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
        println!(
            "- binary size {}: **{:.1} MiB**",
            Path::new(bin).file_name().unwrap().to_string_lossy(),
            size as f64 / 1048576.0
        );
    }
}
