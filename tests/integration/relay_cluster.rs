//! Many `relay serve` processes on one PostgreSQL (SPEC §14): two Relays behind a real
//! HAProxy (the device through one, the broker through the other, one killed mid-run), the
//! database restarted under load, and migrations run twice and at once.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use agentnotify::device::{Answer, StreamEvent};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::postgres::{wait_healthy, Haproxy, Postgres};
use crate::relay::{
    finish_hook, pending_one, register, start_hook, RelayProc, Setup, TestCa, ALLOW,
};
use crate::relay_http::RawRelay;
use crate::support::{fixture, Daemon, Home};

fn on(pg: &Postgres) -> Vec<std::ffi::OsString> {
    vec!["--database".into(), pg.url().into()]
}

fn start_relay(home: &Home, pg: &Postgres) -> RelayProc {
    let args = on(pg);
    let refs: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    RelayProc::start_with(home, &refs)
}

/// Points the paired device in `dir` at another Relay URL.
fn move_device(dir: &std::path::Path, url: &str) {
    let path = dir.join("device.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    state["relay_url"] = json!(url);
    std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();
}

/// One question end to end: the hook asks, the device sees it and answers, the hook allows.
async fn one_question(home: &Home, api: &crate::support::Api, device_dir: &std::path::Path) {
    let hook = start_hook(home, &fixture("claude-bash.json"));
    let q = pending_one(api).await;
    let id = q["id"].as_str().unwrap().to_string();
    let phone = agentnotify::device::Device::load(device_dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inbox = phone.inbox().await;
        if inbox.is_ok_and(|i| i.questions.iter().any(|q| q.id == id)) {
            break;
        }
        assert!(Instant::now() < deadline, "{id} never reached the device");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Acknowledged by the Relay the device talks to; the broker hears of it through the other.
    phone
        .answer(&id, &Answer::Choice("allow-once".into()), None)
        .await
        .unwrap();
    let out = tokio::task::spawn_blocking(move || finish_hook(hook))
        .await
        .unwrap();
    assert_eq!(out.trim(), ALLOW);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_two_processes_behind_haproxy_share_one_database_and_survive_losing_one() {
    let pg = Postgres::start();
    let home = Home::new();
    let a = start_relay(&home, &pg);
    let mut b = start_relay(&home, &pg);
    let lb = Haproxy::start(&a.url, &b.url);
    // The broker reaches Relay b, the device Relay a (each falls back to the other).
    let device_dir = register(&home, &lb.broker_url, 1);
    move_device(&device_dir, &lb.device_url);
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    // Published through b, answered through a, woken across processes.
    one_question(&home, &api, &device_dir).await;
    // Kill the broker's Relay mid-run (its long-poll is held there): the broker fails over
    // to a through the load balancer, and nothing acknowledged is lost.
    let _ = b.child.kill();
    let _ = b.child.wait();
    one_question(&home, &api, &device_dir).await;
    // And the other way round: b back, a killed; the device now reaches b.
    b.restart(&home);
    wait_healthy(&lb.broker_url);
    drop(a);
    one_question(&home, &api, &device_dir).await;
    let answers = pg.psql(
        "relay",
        "SELECT count(*) FROM relay_kv WHERE tree = 'answers'",
    );
    assert_eq!(answers, "3", "every acknowledged answer is in the database");
}

/// Status and `Retry-After` of a GET with `token`.
async fn get_status(http: &reqwest::Client, url: &str, token: &str) -> (u16, Option<String>) {
    match http.get(url).bearer_auth(token).send().await {
        Ok(r) => (
            r.status().as_u16(),
            r.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string()),
        ),
        Err(e) => panic!("the relay dropped a request: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_database_restarted_under_load_gives_503_with_retry_after_and_recovers() {
    let mut store = crate::relay_stores::Store {
        pg: Some(Postgres::start()),
    };
    let args = store.args();
    let refs: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let s = Setup::new_with(1, &refs).await;
    let phone = s.phone();
    let token = phone.state.device_token.clone();
    let url = format!("{}/v1/envelopes", s.relay.url);
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .build()
        .unwrap();
    // Load: readers hammering the Relay through the restart.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (http, url, token, stop) = (http.clone(), url.clone(), token.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                seen.push(get_status(&http, &url, &token).await);
            }
            seen
        }));
    }
    let pg = store.pg.as_mut().unwrap();
    pg.stop();
    let (status, retry) = get_status(&http, &url, &token).await;
    assert_eq!(status, 503, "a request while the database is down");
    assert_eq!(retry.as_deref(), Some("1"));
    tokio::task::block_in_place(|| pg.restart());
    let deadline = Instant::now() + Duration::from_secs(20);
    while get_status(&http, &url, &token).await.0 != 200 {
        assert!(Instant::now() < deadline, "the relay never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut statuses = std::collections::BTreeMap::new();
    for h in load {
        for (status, retry) in h.await.unwrap() {
            assert!(
                status == 200 || (status == 503 && retry.is_some()),
                "under a database restart the relay answered {status} (Retry-After {retry:?})"
            );
            *statuses.entry(status).or_insert(0) += 1;
        }
    }
    assert!(
        statuses.contains_key(&503),
        "the load never saw the outage: {statuses:?}"
    );
    // The change listener reconnected: a stream opened now hears a new question live.
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let watcher = {
        // Straight to the Relay: the test proxy buffers whole replies, a stream never ends.
        let mut phone = s.phone();
        phone.state.relay_url = s.relay.url.clone();
        tokio::spawn(async move { phone.watch(tx).await })
    };
    assert!(matches!(
        crate::relay_stores::next(&mut rx).await,
        StreamEvent::Ready(_)
    ));
    let q = s.api.ask_permission("After the restart?").await;
    // The listener's reconnection may end this stream once (Resync); the watcher then
    // reconnects. Without a working listener the question would never arrive.
    loop {
        match crate::relay_stores::next(&mut rx).await {
            StreamEvent::Question(v) => {
                assert_eq!(v.id, q["id"].as_str().unwrap());
                break;
            }
            StreamEvent::Disconnected(_) | StreamEvent::Ready(_) => {}
            other => panic!("expected the question, got {other:?}"),
        }
    }
    watcher.abort();
    // Settle it, then the whole path once more (the hook's question must be the only one).
    phone
        .answer(
            q["id"].as_str().unwrap(),
            &Answer::Choice("deny".into()),
            None,
        )
        .await
        .unwrap();
    crate::relay::wait_status(&s, q["id"].as_str().unwrap(), "answered").await;
    one_question(&s.home, &s.api, &s.device_dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_migrations_are_safe_twice_and_at_once_and_one_code_pairs_one_device() {
    let pg = Postgres::start();
    let home = Home::new();
    // Two processes migrate a fresh database at the same moment: both come up.
    let url = pg.url();
    let (a, b) = std::thread::scope(|scope| {
        let start = || {
            let refs = [OsStr::new("--database"), OsStr::new(&url)];
            RelayProc::start_with(&home, &refs)
        };
        let a = scope.spawn(start);
        let b = scope.spawn(start);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(
        pg.psql(
            "relay",
            "SELECT string_agg(version::text, ',') FROM relay_schema"
        ),
        "1"
    );
    let (at_a, at_b) = (RawRelay::new(&a.url), RawRelay::new(&b.url));
    let inst = at_a.installation().await;
    let code = "pairing-token-for-the-race-0001";
    let expires = agentnotify_model::Timestamp::now()
        .plus(Duration::from_secs(300))
        .to_rfc3339();
    let (status, v) = at_b
        .post(
            "/v1/pairings",
            Some(&inst.token),
            json!({"pairing_id": "p1", "pairing_token": code, "expires_at": expires}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    // Eight phones race with one code at both processes: exactly one device.
    let tries = (0..8u8).map(|i| {
        let at = if i % 2 == 0 { &at_a } else { &at_b };
        at.post(
            "/v1/devices",
            None,
            json!({"installation_id": inst.id, "pairing_token": code,
                   "public_key": URL_SAFE_NO_PAD.encode([i + 1; 32]), "proof": "x"}),
        )
    });
    let statuses: Vec<u16> = futures_util::future::join_all(tries)
        .await
        .into_iter()
        .map(|(status, _)| status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "one code paired more than one device: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 201 | 403)),
        "{statuses:?}"
    );
    // Stopped and started again: the migration runs a second time and changes nothing.
    drop((a, b));
    let c = start_relay(&home, &pg);
    assert_eq!(pg.psql("relay", "SELECT count(*) FROM relay_schema"), "1");
    assert_eq!(RawRelay::new(&c.url).devices(&inst).await.len(), 1);
}

/// Behind a load balancer every connection comes from it: with `--trusted-proxy` the Relay
/// limits each client by the address the balancer appended to X-Forwarded-For, and a
/// client's own X-Forwarded-For does not let it pose as someone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_behind_haproxy_limits_each_client_address_not_the_balancer() {
    let pg = Postgres::start();
    let home = Home::new();
    let url = pg.url();
    let args = [
        "--database",
        &url,
        "--trusted-proxy",
        "127.0.0.1",
        "--rate-limit",
        "1",
        "--rate-burst",
        "3",
    ];
    let refs: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let a = RelayProc::start_with(&home, &refs);
    let b = RelayProc::start_with(&home, &refs);
    // Health checks come from the balancer itself, without X-Forwarded-For: slower than
    // the limit here, so they never trip it.
    let lb = Haproxy::start_with(&a.url, &b.url, 2000);
    let from = |source: &str| {
        agentnotify_relay_proto::tls::plain_http_client()
            .local_address(source.parse::<std::net::IpAddr>().ok())
            .build()
            .unwrap()
    };
    let busy = from("127.0.0.2");
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let res = busy
            .get(format!("{}/v1/push/vapid-public-key", lb.device_url))
            .header("x-forwarded-for", format!("10.0.0.{}", statuses.len()))
            .send()
            .await
            .unwrap();
        statuses.push(res.status().as_u16());
        if res.status() == 429 {
            break;
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429], "the burst, then a refusal");
    let other = from("127.0.0.3")
        .get(format!("{}/v1/push/vapid-public-key", lb.device_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        200,
        "another client is not held back by the busy one"
    );
}

/// `sslmode=require` is TLS with the database's certificate verified: against a CA the
/// machine does not trust the Relay refuses to start and says why; with the CA in
/// `SSL_CERT_FILE` every connection it holds is encrypted and it serves. Without
/// `sslmode=require` a database that accepts only TLS refuses the Relay, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_database_over_tls_is_verified_and_encrypted() {
    let (ca, stranger) = (TestCa::new(), TestCa::new());
    let pg = Postgres::start_tls(&ca.chain, &ca.key);
    let tls_url = format!("{}?sslmode=require", pg.url());
    let refused = |home: &Home, url: &str| {
        let out = home
            .cmd(crate::support::AGENTNOTIFY)
            .args(["relay", "serve", "--port", "0", "--database", url, "--data"])
            .arg(home.path().join("relay-data"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "the Relay started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(
        &Home::new().with_env("SSL_CERT_FILE", &stranger.ca),
        &tls_url,
    );
    assert!(
        err.contains("cannot reach the database") && err.contains("certificate"),
        "the refusal should name the certificate: {err}"
    );
    assert!(
        !err.contains("127.0.0.1:"),
        "the refusal shows the URL: {err}"
    );
    let err = refused(&Home::new(), &pg.url());
    assert!(
        err.contains("cannot reach the database"),
        "a plain connection to a TLS-only database: {err}"
    );
    let home = Home::new().with_env("SSL_CERT_FILE", &ca.ca);
    let relay = RelayProc::start_with(&home, &[OsStr::new("--database"), OsStr::new(&tls_url)]);
    wait_healthy(&relay.url);
    let r = RawRelay::new(&relay.url);
    let inst = r.installation().await;
    let dev = r.pair(&inst).await;
    r.envelope(&inst, &dev, &"d".repeat(32)).await;
    assert_eq!(r.held(&dev).await, vec!["d".repeat(32)]);
    let plain = pg.psql(
        "relay",
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name = 'agentnotify-relay' AND NOT s.ssl",
    );
    let encrypted = pg.psql(
        "relay",
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name = 'agentnotify-relay' AND s.ssl",
    );
    assert_eq!(plain, "0", "a Relay connection without TLS");
    assert_ne!(encrypted, "0", "no Relay connection seen");
}
