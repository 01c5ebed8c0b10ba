//! The Relay on PostgreSQL (SPEC §14), 1 and 2 `relay serve` processes on one database on
//! this machine: envelopes stored and fanned out to live streams, answers round-tripped
//! (device → Relay → the broker's long-poll → verdict back), answer → broker latency with
//! 10,000 paired devices, and memory per held stream. Raw HTTP plays the broker and the
//! devices, so the Relay and the database are what is measured.
//! Run: `BENCH_ONLY=relay-pg cargo bench --bench bench`.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::postgres::Postgres;
use crate::{percentile, rss_kib, AGENTNOTIFY};

struct Relay {
    child: Child,
    url: String,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_relay(home: &std::path::Path, database: &str) -> Relay {
    use std::io::BufRead;
    let mut child = Command::new(AGENTNOTIFY)
        .args(["relay", "serve", "--port", "0", "--rate-limit", "1000000"])
        .args(["--rate-burst", "1000000", "--database", database, "--data"])
        .arg(home.join("relay-data"))
        .env("AGENTNOTIFY_HOME", home)
        .env("AGENTNOTIFY_LOG", "warn")
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
    Relay { child, url }
}

/// Requests that met a 503 (the database pool busy past 5 s) and were retried.
static RETRIED: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone)]
struct Http(reqwest::Client);

impl Http {
    /// POSTs, retrying a 503 after its `Retry-After` as real clients do (counted).
    async fn post(&self, url: String, token: Option<&str>, body: &Value) -> Value {
        loop {
            let mut r = self.0.post(&url).json(body);
            if let Some(t) = token {
                r = r.bearer_auth(t);
            }
            let res = r.send().await.unwrap();
            if res.status() == 503 {
                RETRIED.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            assert!(res.status().is_success(), "{}", res.status());
            return res.json().await.unwrap();
        }
    }
}

struct Fleet {
    inst_id: String,
    inst_token: String,
    /// (device id, device token)
    devices: Vec<(String, String)>,
    expires: String,
}

/// One installation with `n` paired devices (8 registering at once).
async fn pair(http: &Http, url: &str, n: usize) -> Fleet {
    let inst = http
        .post(
            format!("{url}/v1/installations"),
            None,
            &json!({"pairing_token": "bench-installation-token"}),
        )
        .await;
    let inst_id = inst["installation_id"].as_str().unwrap().to_string();
    let inst_token = inst["installation_token"].as_str().unwrap().to_string();
    let expires = agentnotify::model::Timestamp::now()
        .plus(Duration::from_secs(600))
        .to_rfc3339();
    let pairing_expires = agentnotify::model::Timestamp::now()
        .plus(Duration::from_secs(590))
        .to_rfc3339();
    let workers = 8;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (http, url, inst_id, inst_token, pe) = (
                http.clone(),
                url.to_string(),
                inst_id.clone(),
                inst_token.clone(),
                pairing_expires.clone(),
            );
            tokio::spawn(async move {
                let mut out = Vec::new();
                for d in (w..n).step_by(workers) {
                    let token = format!("bench-pairing-{inst_id}-{d:08}");
                    http.post(format!("{url}/v1/pairings"), Some(&inst_token),
                        &json!({"pairing_id": format!("p{d}"), "pairing_token": token, "expires_at": pe})).await;
                    let key = agentnotify_relay_proto::seal::KeyPair::generate().public_b64();
                    let dev = http.post(format!("{url}/v1/devices"), None,
                        &json!({"installation_id": inst_id, "pairing_token": token, "public_key": key, "proof": "bench"})).await;
                    out.push((
                        dev["device_id"].as_str().unwrap().to_string(),
                        dev["device_token"].as_str().unwrap().to_string(),
                    ));
                }
                out
            })
        })
        .collect();
    let mut devices = Vec::new();
    for t in tasks {
        devices.extend(t.await.unwrap());
    }
    Fleet {
        inst_id,
        inst_token,
        devices,
        expires,
    }
}

fn envelope(device: &str, interaction: &str, expires: &str) -> Value {
    json!({"device_id": device, "event_id": format!("interaction:{interaction}"),
           "key_id": "0011223344556677", "expires_at": expires,
           "sealed": "x".repeat(600), "signature": "bench"})
}

fn unsealed_answer(f: &Fleet, device: &str, interaction: &str, rid: &str) -> Value {
    json!({"contract_version": "1", "response_id": rid, "interaction_id": interaction,
           "request_digest": "d", "nonce": "n", "choice_id": "allow-once",
           "installation_id": f.inst_id, "device_id": device})
}

/// Opens `n` device streams at `urls` (round robin); counts envelope events received.
async fn open_streams(f: &Fleet, urls: &[String], n: usize) -> Arc<AtomicUsize> {
    let received = Arc::new(AtomicUsize::new(0));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(n.max(1));
    for (i, (_, token)) in f.devices.iter().take(n).enumerate() {
        let client = agentnotify_relay_proto::client::RelayClient::new(
            &urls[i % urls.len()],
            Some(agentnotify::secret::Secret::new(token.clone())),
        );
        let (received, ready_tx) = (Arc::clone(&received), ready_tx.clone());
        tokio::spawn(async move {
            let mut res = loop {
                match client.open_events().await {
                    Ok(res) => break res,
                    Err(_) => {
                        RETRIED.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            };
            // Events are counted whole: one may arrive split over two chunks.
            let mut buf = String::new();
            while let Ok(Some(chunk)) = res.chunk().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let event = buf[..end].lines().next().unwrap_or("").to_string();
                    buf.drain(..end + 2);
                    match event.as_str() {
                        "event: ready" => {
                            let _ = ready_tx.send(()).await;
                        }
                        "event: envelope" => {
                            received.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                }
            }
        });
    }
    for _ in 0..n {
        ready_rx.recv().await.unwrap();
    }
    received
}

/// Stores `count` envelopes for the first `streams` devices from 16 clients spread over
/// `urls`; returns (per second stored, per second delivered to the streams: from the first
/// store to the last arrival, envelopes the streams received within 30 s).
async fn store_and_fan_out(
    http: &Http,
    f: &Fleet,
    urls: &[String],
    streams: usize,
    count: usize,
    received: &AtomicUsize,
    tag: &str,
) -> (f64, f64, usize) {
    let before = received.load(Ordering::Relaxed);
    let workers = 16;
    let per = count / workers;
    let started = Instant::now();
    let ids: Vec<String> = f.devices[..streams].iter().map(|d| d.0.clone()).collect();
    let senders = (0..workers)
        .map(|_| (f.inst_token.clone(), ids.clone()))
        .collect();
    store_envelopes(http, urls, senders, per, &f.expires, tag).await;
    let rate = (per * workers) as f64 / started.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.load(Ordering::Relaxed) - before < per * workers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fanned = received.load(Ordering::Relaxed) - before;
    (
        rate,
        fanned as f64 / started.elapsed().as_secs_f64(),
        fanned,
    )
}

/// Stores `per` envelopes from each sender (an installation's token and the devices it
/// stores for, in turn) at once, the senders spread over `urls`; returns per second stored.
async fn store_envelopes(
    http: &Http,
    urls: &[String],
    senders: Vec<(String, Vec<String>)>,
    per: usize,
    expires: &str,
    tag: &str,
) -> f64 {
    let started = Instant::now();
    let total = per * senders.len();
    let tasks: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(w, (token, ids))| {
            let http = http.clone();
            let url = urls[w % urls.len()].clone();
            let (expires, tag) = (expires.to_string(), tag.to_string());
            tokio::spawn(async move {
                for i in 0..per {
                    let device = &ids[(w * per + i) % ids.len()];
                    let id = format!("{tag}{w:04x}{i:024x}");
                    http.post(
                        format!("{url}/v1/envelopes"),
                        Some(&token),
                        &envelope(device, &id, &expires),
                    )
                    .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// The broker's side: long-polls at `url` from `cursor`, reports each answer accepted, and
/// tells `seen` the time each response id arrived.
async fn broker_loop(
    http: Http,
    url: String,
    f_inst: (String, String),
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: tokio::sync::mpsc::UnboundedSender<(String, Instant)>,
) {
    let (inst, token) = f_inst;
    let mut cursor = String::new();
    while !stop.load(Ordering::Relaxed) {
        let res = http
            .0
            .get(format!(
                "{url}/v1/interaction-responses?installation_id={inst}&since={cursor}&wait=2&limit=500"
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let batch: Value = res.json().await.unwrap();
        let now = Instant::now();
        let responses = batch["responses"].as_array().cloned().unwrap_or_default();
        cursor = batch["cursor"].as_str().unwrap_or("").to_string();
        if responses.is_empty() {
            continue;
        }
        let results: Vec<Value> = responses
            .iter()
            .map(|r| json!({"response_id": r["response_id"], "status": "accepted"}))
            .collect();
        http.post(
            format!("{url}/v1/interaction-responses/results"),
            Some(&token),
            &json!({ "results": results }),
        )
        .await;
        for r in responses {
            let _ = seen.send((r["response_id"].as_str().unwrap().to_string(), now));
        }
    }
}

/// Answers: `n` one at a time for latency (device posts at `device_url`, broker long-polls
/// at `broker_url`), then `burst` from 16 devices at once for the rate.
async fn answers(
    http: &Http,
    f: &Fleet,
    device_url: &str,
    broker_url: &str,
    n: usize,
    burst: usize,
    tag: &str,
) -> (Vec<Duration>, f64) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let broker = tokio::spawn(broker_loop(
        http.clone(),
        broker_url.to_string(),
        (f.inst_id.clone(), f.inst_token.clone()),
        Arc::clone(&stop),
        tx,
    ));
    // Envelopes first (one per answer, spread over all 10,000 devices).
    let total = n + burst;
    let ids: Vec<(usize, String)> = (0..total)
        .map(|i| ((i * 7919) % f.devices.len(), format!("{tag}{i:030x}")))
        .collect();
    for (d, id) in &ids {
        http.post(
            format!("{broker_url}/v1/envelopes"),
            Some(&f.inst_token),
            &envelope(&f.devices[*d].0, id, &f.expires),
        )
        .await;
    }
    let mut lat = Vec::new();
    for (d, id) in &ids[..n] {
        let (dev, token) = &f.devices[*d];
        let rid = format!("r-{id}");
        let t0 = Instant::now();
        http.post(
            format!("{device_url}/v1/interaction-responses"),
            Some(token),
            &unsealed_answer(f, dev, id, &rid),
        )
        .await;
        loop {
            let (got, at) = rx.recv().await.unwrap();
            if got == rid {
                lat.push(at - t0);
                break;
            }
        }
    }
    let started = Instant::now();
    let chunks: Vec<Vec<(usize, String)>> = ids[n..]
        .chunks(burst.div_ceil(16))
        .map(|c| c.to_vec())
        .collect();
    let posted = ids.len() - n;
    for chunk in chunks {
        let (http, url, fleet_devices, inst) = (
            http.clone(),
            device_url.to_string(),
            f.devices.clone(),
            f.inst_id.clone(),
        );
        tokio::spawn(async move {
            for (d, id) in chunk {
                let (dev, token) = &fleet_devices[d];
                let body = json!({"contract_version": "1", "response_id": format!("r-{id}"), "interaction_id": id,
                    "request_digest": "d", "nonce": "n", "choice_id": "allow-once",
                    "installation_id": inst, "device_id": dev});
                http.post(
                    format!("{url}/v1/interaction-responses"),
                    Some(token),
                    &body,
                )
                .await;
            }
        });
    }
    for _ in 0..posted {
        rx.recv().await.unwrap();
    }
    let rate = posted as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = broker.await;
    (lat, rate)
}

pub(crate) async fn run(scale: f64) {
    let devices = ((10_000.0 * scale) as usize).max(100);
    let streams = ((1000.0 * scale) as usize).max(50);
    // A multiple of the 16 storing clients, so each stores the same number.
    let stored = ((2000.0 * scale) as usize).max(160) / 16 * 16;
    let n = ((300.0 * scale) as usize).max(20);
    let burst = ((2000.0 * scale) as usize).max(160);
    let pg = Postgres::start();
    let home = tempfile::tempdir().unwrap();
    let http = Http(
        agentnotify_relay_proto::tls::plain_http_client()
            .pool_max_idle_per_host(64)
            .build()
            .unwrap(),
    );
    let a = start_relay(home.path(), &pg.url());
    let started = Instant::now();
    let fleet = pair(&http, &a.url, devices).await;
    println!(
        "- paired {devices} devices in {:.1} s (8 at once, one process)",
        started.elapsed().as_secs_f64()
    );
    // 16 more installations of one device each: writes of different installations do not
    // wait for each other.
    let mut tenants = Vec::new();
    for _ in 0..16 {
        let t = pair(&http, &a.url, 1).await;
        tenants.push((t.inst_token.clone(), vec![t.devices[0].0.clone()]));
    }
    for procs in [1usize, 2] {
        let b = (procs == 2).then(|| start_relay(home.path(), &pg.url()));
        let mut urls = vec![a.url.clone()];
        if let Some(b) = &b {
            urls.push(b.url.clone());
        }
        let rss_before: u64 = rss_kib(a.child.id(), "VmRSS:");
        let t = Instant::now();
        let received = open_streams(&fleet, &urls, streams).await;
        eprintln!(
            "  ({procs}) {streams} streams open in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let per_stream = (rss_kib(a.child.id(), "VmRSS:").saturating_sub(rss_before)) as f64
            / (streams / urls.len()) as f64;
        let (rate, fan_rate, fanned) = store_and_fan_out(
            &http,
            &fleet,
            &urls,
            streams,
            stored,
            &received,
            &format!("{procs:x}e"),
        )
        .await;
        eprintln!("  ({procs}) envelopes stored and fanned out");
        let (mut lat, arate) = answers(
            &http,
            &fleet,
            &urls[0],
            urls.last().unwrap(),
            n,
            burst,
            &format!("{procs:x}a"),
        )
        .await;
        lat.sort();
        let spread = store_envelopes(
            &http,
            &urls,
            tenants.clone(),
            stored / 16,
            &fleet.expires,
            &format!("{procs:x}s"),
        )
        .await;
        println!(
            "- **{procs} process{}**: envelopes stored **{rate:.0}/s** (16 clients, one installation), **{spread:.0}/s** (16 clients, an installation each), {fanned}/{stored} fanned out live to {streams} streams at **{fan_rate:.0}/s**; answers round-tripped **{arate:.0}/s** (16 devices, one broker long-poll); answer → broker p50 **{}** / p99 **{}** ({n} answers, {devices} paired devices{}); RSS per held stream {:.1} KiB",
            if procs == 1 { "" } else { "es" },
            crate::ms(percentile(&lat, 0.5)),
            crate::ms(percentile(&lat, 0.99)),
            if procs == 2 { ", device and broker on different processes" } else { "" },
            per_stream
        );
    }
    let rows = pg.psql("relay", "SELECT count(*) FROM relay_kv");
    let size = pg.psql(
        "relay",
        "SELECT pg_size_pretty(pg_total_relation_size('relay_kv'))",
    );
    println!(
        "- afterwards: {rows} rows in relay_kv, {size} on disk; {} requests met a 503 and were retried",
        RETRIED.load(Ordering::Relaxed)
    );
}
