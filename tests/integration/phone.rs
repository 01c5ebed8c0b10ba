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
