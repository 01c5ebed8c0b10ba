//! The phone path's security and liveness (SPEC §12): single-use pairing codes, revocation,
//! the installation's signatures, live delivery, withdrawal, Web Push and the served app.
//! Real `relay serve`, real broker, real device client, on loopback with ephemeral ports.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::relay::{new_code, pair_device, run, Setup, PASS, SERVER_ERROR};
use crate::support::Home;

fn device_in(home: &Home, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["relay", "device"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--device-dir", dir.to_str().unwrap()]);
    run(home, &all)
}

fn devices_json(home: &Home) -> Vec<Value> {
    let (code, out, err) = run(home, &["relay", "devices", "--json"]);
    assert_eq!(code, 0, "relay devices failed: {out} {err}");
    serde_json::from_str::<Value>(&out).unwrap()["devices"]
        .as_array()
        .unwrap()
        .clone()
}

/// Waits (bounded) until the device in `dir` has question `id` in its inbox.
fn inbox_of_shows(home: &Home, dir: &Path, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, out, err) = device_in(home, dir, &["inbox", "--json"]);
        assert_eq!(code, 0, "inbox failed: {err}");
        if out.contains(id) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never reached {dir:?}: {out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_pairing_code_pairs_one_device_and_a_thief_with_it_gets_nothing() {
    let s = Setup::new(3600).await;
    let (code, out, _) = run(&s.home, &["relay", "pair", "home", "--json"]);
    assert_eq!(code, 0);
    let pair: Value = serde_json::from_str(&out).unwrap();
    let code = pair["code"].as_str().unwrap();
    assert_eq!(
        pair["link"].as_str().unwrap(),
        format!("{}/app/#pair={code}", s.proxy().url)
    );
    // Each `relay pair` mints a new code.
    assert_ne!(new_code(&s.home), code);
    let tablet = s.home.path().join("tablet");
    let (c, out, err) = pair_device(&s.home, code, &tablet, "Tablet");
    assert_eq!(c, 0, "{out} {err}");
    // The thief copied the same code: refused, with the reason.
    let thief = s.home.path().join("thief");
    let (c, _, err) = pair_device(&s.home, code, &thief, "Thief");
    assert_eq!(c, 1);
    assert!(err.contains("pairing_used"), "{err}");
    let q = s.api.ask_permission("Only for the paired ones?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    inbox_of_shows(&s.home, &tablet, id);
    // Each admitted device was announced, and is listed with when it was last seen.
    let (_, notes) = s.api.get("/v1/notifications?limit=50").await;
    let texts = notes.to_string();
    assert!(
        texts.contains("A new device 'Tablet' was paired with home")
            && texts.contains("A new device 'cli-device' was paired with home"),
        "{texts}"
    );
    let listed = devices_json(&s.home);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let tab = listed.iter().find(|d| d["name"] == "Tablet").unwrap();
    assert!(
        tab["paired_at"].is_string() && tab["last_seen_at"].is_string(),
        "{tab}"
    );
    assert!(tab["revoked_at"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_expired_pairing_code_is_refused() {
    let s = Setup::new(3600).await;
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    let token = secrets["home"]["installation_token"].as_str().unwrap();
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .build()
        .unwrap();
    let expires = agentnotify::model::Timestamp::now().plus(Duration::from_millis(300));
    let r = http
        .post(format!("{}/v1/pairings", s.relay.url))
        .bearer_auth(token)
        .json(&serde_json::json!({"pairing_id": "p1.1.0000000000000000", "pairing_token": "short-lived-token-0123", "expires_at": expires.to_rfc3339()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    // More than ten minutes is refused.
    let far = agentnotify::model::Timestamp::now().plus(Duration::from_secs(3600));
    let r = http
        .post(format!("{}/v1/pairings", s.relay.url))
        .bearer_auth(token)
        .json(&serde_json::json!({"pairing_id": "p1.2.0000000000000000", "pairing_token": "long-lived-token-01234", "expires_at": far.to_rfc3339()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Wait out the code's deadline (the event under test is the passing of its expiry).
    tokio::time::sleep(until_past(expires)).await;
    let inst = secrets_installation(&s.home);
    let key = agentnotify_relay_proto::seal::KeyPair::generate().public_b64();
    let r = http
        .post(format!("{}/v1/devices", s.relay.url))
        .json(&serde_json::json!({"installation_id": inst, "pairing_token": "short-lived-token-0123", "public_key": key, "proof": "p"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["code"], "pairing_expired", "{v}");
}

fn until_past(t: agentnotify::model::Timestamp) -> Duration {
    agentnotify::model::Timestamp::now().until(t) + Duration::from_millis(20)
}

fn secrets_installation(home: &Home) -> String {
    let text = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("installation_id = "))
        .unwrap()
        .trim_matches('"')
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_revoked_device_gets_nothing_and_its_answers_are_refused() {
    let s = Setup::new(3600).await;
    let tablet = s.home.path().join("tablet");
    assert_eq!(
        pair_device(&s.home, &new_code(&s.home), &tablet, "Tablet").0,
        0
    );
    let q1 = s.api.ask_permission("Before the revocation").await;
    let id1 = q1["id"].as_str().unwrap().to_string();
    s.inbox_shows(&id1);
    inbox_of_shows(&s.home, &tablet, &id1);
    let phone_id = s.phone().state.device_id.clone();

    // Revoked while the Relay cannot be told: the broker's word is final anyway.
    s.proxy().set(SERVER_ERROR);
    let (code, out, err) = run(
        &s.home,
        &["relay", "devices", "revoke", &phone_id, "--json"],
    );
    assert_eq!(code, 0, "{out} {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["revoked"].clone(), v["relay_removed"].clone()),
        (true.into(), false.into())
    );
    s.proxy().set(PASS);
    // The phone still holds a live Relay token and answers the question it already had:
    // the broker refuses it.
    let (_, out, err) = s.device(&["answer", &id1, "--choice", "allow-once", "--timeout", "0"]);
    assert!(out.contains("pending"), "{out} {err}");
    let (_, report) = s.poll();
    assert_eq!(report["polls"][0]["refused"], 1, "{report}");
    assert_eq!(s.status(&id1).await["status"], "pending");
    // That poll also told the Relay again; now the phone's token is dead, and new questions
    // go to the tablet only.
    let (code, _, err) = s.device(&["inbox"]);
    assert_eq!(code, 1);
    assert!(err.contains("removed"), "{err}");
    let q2 = s.api.ask_permission("After the revocation").await;
    let id2 = q2["id"].as_str().unwrap().to_string();
    inbox_of_shows(&s.home, &tablet, &id2);
    let listed = devices_json(&s.home);
    let phone = listed
        .iter()
        .find(|d| d["device_id"] == phone_id.as_str())
        .unwrap();
    assert!(phone["revoked_at"].is_string(), "{phone}");
    // Unknown ids exit 3.
    assert_eq!(run(&s.home, &["relay", "devices", "revoke", "nosuch"]).0, 3);
}

/// The Relay knows every device's public key, so it can seal a made-up question to a phone
/// and fake the broker's verdict; neither is signed by the installation, and the device
/// shows neither as genuine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_questions_and_verdicts_not_signed_by_the_installation_are_not_shown_as_genuine() {
    use agentnotify::device::{Answer, DeviceError};
    use agentnotify_relay_proto::wire::{
        question_event_id, AnswerResult, Envelope, QuestionPayload,
    };
    use agentnotify_relay_proto::{seal, sign::SigningPair};

    let s = Setup::new(3600).await;
    let phone = s.phone();
    let q = s.api.ask_permission("The genuine one").await;
    let id = q["id"].as_str().unwrap().to_string();
    s.inbox_shows(&id);
    let genuine = phone
        .client()
        .envelopes()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.event_id == question_event_id(&id))
        .unwrap();
    assert!(agentnotify_relay_proto::sign::verify_envelope(
        &phone.state.installation_signing_key,
        &genuine
    ));

    // What the Relay (anyone with the installation token here) can make: a well-formed
    // question sealed to the phone's real key, unsigned or signed by a key of its own.
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(s.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    let relay = agentnotify_relay_proto::client::RelayClient::new(
        &s.relay.url,
        Some(agentnotify::secret::Secret::new(
            secrets["home"]["installation_token"].as_str().unwrap(),
        )),
    );
    let devices = relay.devices().await.unwrap();
    let me = devices
        .iter()
        .find(|d| d.device_id == phone.state.device_id)
        .unwrap();
    let device_key = seal::decode_key(&me.public_key).unwrap();
    let mut fake = agentnotify::model::Interaction::clone(
        &serde_json::from_value(s.status(&id).await).unwrap(),
    );
    fake.id = "ffffffffffffffffffffffffffffffff".into();
    fake.question.prompt = "Your session expired. Reply with your GitHub token".into();
    let event_id = question_event_id(&fake.id);
    let key_id = seal::key_id(&device_key);
    let expires_at = fake.expires_at.to_rfc3339();
    let binding = seal::Binding {
        installation_id: &me.installation_id,
        device_id: &me.device_id,
        key_id: &key_id,
        event_id: &event_id,
        expires_at: &expires_at,
    };
    let payload = serde_json::to_vec(&QuestionPayload::of(&fake)).unwrap();
    let sealed = seal::seal(&device_key, &binding, &payload).unwrap();
    let mut forged = Envelope {
        installation_id: me.installation_id.clone(),
        device_id: me.device_id.clone(),
        event_id: event_id.clone(),
        key_id: key_id.clone(),
        expires_at: expires_at.clone(),
        sealed,
        signature: None,
        stored_at: None,
    };
    // The box itself opens: only the signature tells it apart.
    SigningPair::generate().sign_envelope(&mut forged);
    relay.put_envelope(&forged).await.unwrap();
    assert!(matches!(phone.open(&forged), Err(DeviceError::Forged)));
    let (_, out, _) = s.device(&["inbox", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["forged"], 1, "{v}");
    assert!(!out.contains("GitHub token"), "{out}");
    let (_, out, _) = s.device(&["inbox"]);
    assert!(
        out.contains("1 question(s) not from your computer"),
        "{out}"
    );

    // A faked verdict: the Relay says "accepted" before the broker has judged anything.
    let question = phone.question(&id).await.unwrap();
    let post = phone.seal(
        &phone.payload(&question, "r-fake", &Answer::Choice("allow-once".into())),
        &question.expires_at,
    );
    phone.send(&post).await.unwrap();
    let mut lie = AnswerResult {
        status: "accepted".into(),
        ..AnswerResult::pending("r-fake")
    };
    SigningPair::generate().sign_verdict(&mut lie, &me.installation_id, &me.device_id, &id);
    relay.post_results(&[lie]).await.unwrap();
    match phone.verdict("r-fake", &id, Duration::from_secs(5)).await {
        Err(DeviceError::ForgedVerdict(r)) => assert_eq!(r, "r-fake"),
        other => panic!("a faked verdict was believed: {other:?}"),
    }
    // The broker's own verdict (after a poll) is signed, and believed. The faked result
    // already withdrew the envelope at the Relay, so the broker's answer is the truth here.
    let (_, report) = s.poll();
    assert_eq!(report["polls"][0]["accepted"], 1, "{report}");
    let r = phone
        .verdict("r-fake", &id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.status, "accepted");
}

/// Waits (bounded) for the first stream event that `want` accepts.
async fn next_matching(
    rx: &mut tokio::sync::mpsc::Receiver<agentnotify::device::StreamEvent>,
    what: &str,
    want: impl Fn(&agentnotify::device::StreamEvent) -> bool,
) -> agentnotify::device::StreamEvent {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) if want(&e) => return e,
            Ok(Some(_)) => {}
            other => panic!("no {what} on the stream: {other:?}"),
        }
    }
}

/// With a 60 s poll interval the answer still reaches the broker at once: the broker holds
/// a long-poll open at the Relay, which replies the moment the answer is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_answer_reaches_the_broker_over_the_long_poll_not_the_poll_interval() {
    let s = Setup::new(60).await;
    let q = s.api.ask_permission("Live?").await;
    let id = q["id"].as_str().unwrap().to_string();
    s.inbox_shows(&id);
    let phone = s.phone();
    let started = Instant::now();
    let rid = phone
        .answer(
            &id,
            &agentnotify::device::Answer::Choice("allow-once".into()),
            None,
        )
        .await
        .unwrap();
    let (_, done) = s
        .api
        .get(&format!("/v1/interactions/{id}/wait?timeout=20"))
        .await;
    let took = started.elapsed();
    assert_eq!(done["status"], "answered", "{done}");
    assert!(took < Duration::from_secs(3), "answer took {took:?}");
    // The device hears the signed verdict by long-poll too.
    let r = phone
        .verdict(&rid, &id, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(r.status, "accepted");
}

/// The device's stream: the snapshot on connect, new questions live, and after the Relay
/// restarts mid-stream a reconnect with a fresh snapshot, then live again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_stream_is_live_and_survives_a_relay_restart() {
    use agentnotify::device::StreamEvent;
    let mut s = Setup::new(60).await;
    let q1 = s.api.ask_permission("Before the stream").await;
    let id1 = q1["id"].as_str().unwrap().to_string();
    s.inbox_shows(&id1);
    let mut phone = s.phone();
    // Straight to the Relay: the test proxy buffers whole bodies, which a stream never ends.
    phone.state.relay_url = s.relay.url.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let watcher = tokio::spawn(async move { phone.watch(tx).await });
    let is_q =
        |id: String| move |e: &StreamEvent| matches!(e, StreamEvent::Question(q) if q.id == id);
    next_matching(&mut rx, "snapshot question", is_q(id1.clone())).await;
    next_matching(&mut rx, "ready", |e| matches!(e, StreamEvent::Ready(1))).await;

    let q2 = s.api.ask_permission("While streaming").await;
    let id2 = q2["id"].as_str().unwrap().to_string();
    next_matching(&mut rx, "live question", is_q(id2.clone())).await;

    s.relay.restart(&s.home);
    next_matching(&mut rx, "disconnect", |e| {
        matches!(e, StreamEvent::Disconnected(_))
    })
    .await;
    next_matching(&mut rx, "ready after reconnect", |e| {
        matches!(e, StreamEvent::Ready(2))
    })
    .await;
    let q3 = s.api.ask_permission("After the restart").await;
    let id3 = q3["id"].as_str().unwrap().to_string();
    next_matching(&mut rx, "live question after restart", is_q(id3)).await;
    watcher.abort();
}

/// An answer that reaches the Relay while the broker is down is applied as soon as the
/// broker is back, without waiting for a poll interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_answer_waiting_at_the_relay_is_applied_when_the_broker_restarts() {
    let mut s = Setup::new(60).await;
    let q = s
        .api
        .ask_permission("Answered while the desktop sleeps")
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    s.inbox_shows(&id);
    s._daemon.kill9();
    let phone = s.phone();
    phone
        .answer(
            &id,
            &agentnotify::device::Answer::Choice("deny".into()),
            None,
        )
        .await
        .unwrap();
    let started = Instant::now();
    let daemon = crate::support::Daemon::start(&s.home, &[]);
    let api = daemon.api(&s.home);
    let (_, done) = api
        .get(&format!("/v1/interactions/{id}/wait?timeout=20"))
        .await;
    assert_eq!(done["status"], "answered", "{done}");
    assert_eq!(done["response"]["choice_id"], "deny");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A question settled on the desktop leaves the phone at once (SPEC §12.4): the broker
/// deletes its envelopes at the Relay, the stream says `withdrawn`, and a late answer is
/// told why it was not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_settled_question_is_withdrawn_from_the_phone_within_a_second() {
    use agentnotify::device::StreamEvent;
    let s = Setup::new(60).await;
    let mut phone = s.phone();
    phone.state.relay_url = s.relay.url.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let watcher = {
        let mut watching = s.phone();
        watching.state.relay_url = s.relay.url.clone();
        tokio::spawn(async move { watching.watch(tx).await })
    };
    next_matching(&mut rx, "ready", |e| matches!(e, StreamEvent::Ready(_))).await;
    let q = s.api.ask_permission("Cancel me elsewhere").await;
    let id = q["id"].as_str().unwrap().to_string();
    let is_q = {
        let id = id.clone();
        move |e: &StreamEvent| matches!(e, StreamEvent::Question(q) if q.id == id)
    };
    next_matching(&mut rx, "question", is_q).await;
    let question = phone.question(&id).await.unwrap();

    let cancelled = Instant::now();
    let (code, _) = s
        .api
        .post(
            &format!("/v1/interactions/{id}/cancel"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(code, 200);
    let event = format!("interaction:{id}");
    next_matching(
        &mut rx,
        "withdrawn",
        |e| matches!(e, StreamEvent::Withdrawn(w) if *w == event),
    )
    .await;
    let took = cancelled.elapsed();
    assert!(took < Duration::from_secs(1), "withdrawal took {took:?}");
    let (_, out, _) = s.device(&["inbox", "--json"]);
    assert!(!out.contains(&id), "{out}");
    // A late answer (sealed from the copy the phone had) is refused with the reason.
    let post = phone.seal(
        &phone.payload(
            &question,
            "r-late",
            &agentnotify::device::Answer::Choice("allow-once".into()),
        ),
        &question.expires_at,
    );
    match phone.send(&post).await {
        Err(agentnotify::device::DeviceError::Refused { code, .. }) => {
            assert_eq!(code, "question_withdrawn")
        }
        other => panic!("{other:?}"),
    }
    watcher.abort();
}

/// The npm `web-push-testing` mock push service (it checks VAPID and decrypts RFC 8291),
/// installed on first use into `target/npm/` (never globally); killed on drop.
struct MockPush {
    child: std::process::Child,
    url: String,
    http: reqwest::Client,
}

static NPM_INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl MockPush {
    fn start() -> MockPush {
        use std::io::BufRead;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm/web-push-testing");
        let server = dir.join("node_modules/web-push-testing/src/bin/server.js");
        {
            let _one = NPM_INSTALL.lock().unwrap_or_else(|p| p.into_inner());
            if !server.exists() {
                std::fs::create_dir_all(&dir).unwrap();
                let ok =
                    std::process::Command::new(crate::provision::require(&crate::provision::NPM))
                        .args(["install", "--no-audit", "--no-fund", "--prefix"])
                        .arg(&dir)
                        .arg("web-push-testing@1.2.2")
                        .status()
                        .expect("npm runs");
                assert!(ok.success(), "npm install web-push-testing failed");
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child =
            std::process::Command::new(crate::provision::require(&crate::provision::NODE))
                .arg(&server)
                .arg(port.to_string())
                .current_dir(&dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .expect("node runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("running"), "{line:?}");
        MockPush {
            child,
            url: format!("http://localhost:{port}"),
            http: agentnotify_relay_proto::tls::plain_http_client()
                .build()
                .unwrap(),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap_or(Value::Null)
    }

    /// The decrypted messages it received for `client`, waiting (bounded) for `n`.
    async fn messages(&self, client: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self
                .post(
                    "/get-notifications",
                    serde_json::json!({ "clientHash": client }),
                )
                .await;
            let got: Vec<Value> = v["data"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|m| serde_json::from_str(m.as_str().unwrap_or("null")).unwrap_or(Value::Null))
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "only {got:?} arrived, wanted {n}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for MockPush {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The device's own calls to the Relay (its token), for the push routes.
async fn as_device(s: &Setup, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let phone = s.phone();
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .build()
        .unwrap();
    let mut req = http
        .request(method.parse().unwrap(), format!("{}{path}", s.relay.url))
        .bearer_auth(&phone.state.device_token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Web Push through a real (mock) push service that checks the VAPID token and decrypts
/// the payload: each new question and each withdrawal rings a doorbell that names the event
/// and nothing else; an expired subscription (410) is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_push_doorbells_pass_vapid_and_carry_no_secret() {
    let s = Setup::new_with(60, &["--push-allow-http".as_ref()]).await;
    let push = MockPush::start();
    let (_, key) = as_device(&s, "GET", "/v1/push/vapid-public-key", None).await;
    let vapid = key["public_key"].as_str().unwrap();
    assert_eq!(
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, vapid)
            .unwrap()
            .len(),
        65
    );
    let sub = push
        .post(
            "/subscribe",
            serde_json::json!({"userVisibleOnly": "true", "applicationServerKey": vapid}),
        )
        .await;
    let sub = &sub["data"];
    let client = sub["clientHash"].as_str().unwrap().to_string();
    let body = serde_json::json!({"endpoint": sub["endpoint"], "expirationTime": null, "keys": sub["keys"]});
    // Without --push-allow-http an http:// endpoint is refused, naming the field; here not.
    let (code, v) = as_device(
        &s,
        "POST",
        "/v1/devices/push-subscription",
        Some(body.clone()),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let (_, v) = as_device(&s, "GET", "/v1/devices/push-subscription", None).await;
    assert_eq!(v["subscribed"], true);

    let q = s
        .api
        .ask_permission("Push me: rm -rf /tmp/secret-prompt")
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    let got = push.messages(&client, 1).await;
    assert_eq!(
        got[0],
        serde_json::json!({"type": "question", "event_id": format!("interaction:{id}")})
    );
    s.api
        .post(
            &format!("/v1/interactions/{id}/cancel"),
            serde_json::json!({}),
        )
        .await;
    let got = push.messages(&client, 2).await;
    assert_eq!(
        got[1],
        serde_json::json!({"type": "withdrawn", "event_id": format!("interaction:{id}")})
    );
    let all = serde_json::to_string(&got).unwrap();
    for secret in [
        "secret-prompt",
        q["nonce"].as_str().unwrap(),
        q["request_digest"].as_str().unwrap(),
    ] {
        assert!(!all.contains(secret), "{secret} reached the push service");
    }

    // The push service says the subscription is gone: the Relay drops it.
    push.post(
        &format!("/expire-subscription/{client}"),
        serde_json::json!({}),
    )
    .await;
    s.api.ask_permission("After the subscription expired").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = as_device(&s, "GET", "/v1/devices/push-subscription", None).await;
        if v["subscribed"] == false {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a 410 did not drop the subscription"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A push service that answers 503 first: the Relay retries (with backoff) and the second
/// try lands. A stub, counting what it gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_push_is_retried_after_a_push_service_error() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let s = Setup::new_with(60, &["--push-allow-http".as_ref()]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/push/1", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant, bool)>();
    {
        let hits = Arc::clone(&hits);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (hits, tx) = (Arc::clone(&hits), tx.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (hits, tx) = (Arc::clone(&hits), tx.clone());
                            async move {
                                let vapid = req
                                    .headers()
                                    .get("authorization")
                                    .and_then(|v| v.to_str().ok())
                                    .is_some_and(|v| v.starts_with("vapid t="))
                                    && req
                                        .headers()
                                        .get("content-encoding")
                                        .is_some_and(|v| v == "aes128gcm")
                                    && req.headers().get("urgency").is_some_and(|v| v == "high");
                                let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
                                let _ = tx.send((n, Instant::now(), vapid));
                                let status = if n == 1 { 503 } else { 201 };
                                Ok::<_, std::convert::Infallible>(
                                    hyper::Response::builder()
                                        .status(status)
                                        .body(http_body_util::Full::new(bytes::Bytes::new()))
                                        .unwrap(),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    }
    let ua = p256_point();
    let body = serde_json::json!({"endpoint": endpoint, "keys": {"p256dh": ua, "auth": "AAECAwQFBgcICQoLDA0ODw"}});
    let (code, v) = as_device(&s, "POST", "/v1/devices/push-subscription", Some(body)).await;
    assert_eq!(code, 201, "{v}");
    s.api.ask_permission("Retry the push").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let (n1, t1, vapid1) = tokio::time::timeout_at(deadline, rx.recv())
        .await
        .unwrap()
        .unwrap();
    let (n2, t2, vapid2) = tokio::time::timeout_at(deadline, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((n1, n2), (1, 2));
    assert!(
        vapid1 && vapid2,
        "VAPID, aes128gcm and Urgency: high on every try"
    );
    assert!(
        t2 - t1 >= Duration::from_millis(900),
        "retried after {:?}",
        t2 - t1
    );
}

/// A P-256 public point (a browser's `p256dh`), base64url.
fn p256_point() -> String {
    // Any valid point works for a stub that does not decrypt; this one is the generator.
    let g =
        "BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU";
    g.to_string()
}

/// `relay serve` serves the phone app at `/app/` with the strict CSP and the right types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_app_is_served_at_app_with_a_strict_csp() {
    let home = Home::new();
    let relay = crate::relay::RelayProc::start(&home);
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(format!("{}/app", relay.url)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 308);
    assert_eq!(r.headers()["location"], "/app/");
    let r = http
        .get(format!("{}/app/", relay.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert!(r.text().await.unwrap().contains("<html"));
    for missing in ["/app/nope.js", "/app/.secret", "/app/index.exe"] {
        let r = http
            .get(format!("{}{missing}", relay.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{missing}");
    }
    let r = http
        .post(format!("{}/app/", relay.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
}

/// On a terminal `relay pair` also draws the app link as a QR code (`script` gives it one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_pair_on_a_terminal_prints_a_qr_code() {
    let s = Setup::new(3600).await;
    let bin = crate::support::AGENTNOTIFY;
    let out = s
        .home
        .cmd("script")
        .args(["-qec", &format!("{bin} relay pair home"), "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/app/#pair=anp1."), "{text}");
    assert!(
        text.contains('█') && text.contains('▀'),
        "no QR code drawn: {text}"
    );
    // Not on a terminal: no QR code, so the output stays easy to read by a program.
    let (_, plain, _) = run(&s.home, &["relay", "pair", "home"]);
    assert!(!plain.contains('█'), "{plain}");
}

/// A device watching its stream when it is revoked hears `revoked`, and the watcher stops
/// with "removed" instead of reconnecting forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phone_revoked_device_stream_ends_with_revoked() {
    use agentnotify::device::{DeviceError, StreamEvent};
    let s = Setup::new(60).await;
    let mut phone = s.phone();
    phone.state.relay_url = s.relay.url.clone();
    let id = phone.state.device_id.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let watcher = tokio::spawn(async move { phone.watch(tx).await });
    next_matching(&mut rx, "ready", |e| matches!(e, StreamEvent::Ready(_))).await;
    let (code, out, err) = run(&s.home, &["relay", "devices", "revoke", &id]);
    assert_eq!(code, 0, "{out} {err}");
    let ended = tokio::time::timeout(Duration::from_secs(20), watcher)
        .await
        .expect("the watcher kept going after the revocation")
        .unwrap();
    assert!(matches!(ended, Err(DeviceError::Removed)), "{ended:?}");
}
