//! The phone app end to end, as a person uses it: pair from the link, a hook's question
//! arrives live, one tap answers it sealed, the verdict shows and the hook prints the
//! decision; every kind of answer; what the phone keeps and what the Relay stores.

use std::io::{Read, Write};
use std::process::Stdio;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use super::world::{answer_on, paired_phone, quiet, settled_card, verdict_on, World};
use crate::support::{fixture, HOOK};

const ALLOW: &str = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;

/// The Relay's stored answers for the installation, as the broker would fetch them.
async fn stored_answers(world: &World) -> Value {
    let secrets: Value = serde_json::from_str(
        &std::fs::read_to_string(world.home.path().join("relay_secrets.json")).unwrap(),
    )
    .unwrap();
    let token = secrets["home"]["installation_token"].as_str().unwrap();
    let config = std::fs::read_to_string(world.home.path().join("config.toml")).unwrap();
    let inst = config
        .lines()
        .find_map(|l| l.strip_prefix("installation_id = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .build()
        .unwrap();
    http.get(format!(
        "{}/v1/interaction-responses?installation_id={inst}",
        world.relay.url
    ))
    .bearer_auth(token)
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paired_from_the_link_a_hooks_question_arrives_live_and_one_tap_answers_it() {
    let world = World::new().await;
    let link = world.pairing_link();
    let code = link.split("#pair=").nth(1).unwrap().to_string();
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };

    phone.screenshot("phone-paired.png").await;
    quiet(&phone).await;

    // The broker admitted the phone under its name and announced it.
    let devices = world.devices();
    assert!(
        devices.iter().any(|d| d["name"] == "Pixel 8"),
        "{devices:?}"
    );
    let (_, notes) = world.api.get("/v1/notifications?limit=50").await;
    assert!(
        notes
            .to_string()
            .contains("A new device 'Pixel 8' was paired with home"),
        "{notes}"
    );

    // A real hook asks; the question appears on the phone, whole.
    let mut hook = world
        .home
        .cmd(HOOK)
        .args(["claude", "ask-permission"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(fixture("claude-bash.json").as_bytes())
        .unwrap();
    let shown = phone
        .wait(
            "the hook's question on the phone",
            "(() => { const c = document.querySelector('#cards li.card[data-kind=permission]'); return c && [c.dataset.id, c.innerText]; })()",
        )
        .await;
    let id = shown[0].as_str().unwrap().to_string();
    let record = world.record(&id).await;
    let text = shown[1].as_str().unwrap();
    assert!(
        text.contains(record["prompt"].as_str().unwrap().lines().next().unwrap()),
        "{text}"
    );
    settled_card(&phone, &id).await;
    phone.screenshot("phone-question.png").await;

    // One tap answers it; the verdict shows; the hook prints the host's decision.
    answer_on(&phone, &id, "button[data-choice='allow-once']").await;
    let (verdict, message) = verdict_on(&phone, &id).await;
    assert_eq!(verdict, "accepted", "{message}");
    assert!(message.contains("Accepted"), "{message}");
    phone.screenshot("phone-verdict.png").await;
    let mut out = String::new();
    hook.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(hook.wait().unwrap().code(), Some(0));
    assert_eq!(out.trim(), ALLOW);
    let record = world.record(&id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(record["response"]["source"], "relay");
    assert_eq!(record["response"]["choice_id"], "allow-once");

    // What the Relay stored is sealed: no choice, text, digest or nonce in clear.
    let stored = stored_answers(&world).await;
    let answer = stored["responses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["interaction_id"] == id.as_str())
        .unwrap_or_else(|| panic!("the answer at the Relay: {stored}"));
    assert!(answer["sealed"].is_string(), "{answer}");
    for clear in ["choice_id", "text", "request_digest", "nonce", "choice_ids"] {
        assert!(
            answer.get(clear).is_none(),
            "{clear} in clear at the Relay: {answer}"
        );
    }
    let all = stored.to_string();
    assert!(!all.contains("allow-once") && !all.contains(record["nonce"].as_str().unwrap()));

    // What the phone keeps: a key it cannot export, no pairing secret, no nonce.
    let kept: Value = phone
        .eval(
            r#"(async () => {
                const s = await import('./js/store.js');
                const d = await s.loadDevice();
                const h = await s.loadHistory();
                return { key: d.privateKey instanceof CryptoKey, extractable: d.privateKey.extractable,
                         device: JSON.stringify({ ...d, privateKey: null }), history: JSON.stringify(h),
                         local: JSON.stringify({ ...localStorage }) };
            })()"#,
        )
        .await;
    assert_eq!(kept["key"], json!(true));
    assert_eq!(kept["extractable"], json!(false));
    let secret = {
        let raw = URL_SAFE_NO_PAD
            .decode(code.trim_start_matches("anp1."))
            .unwrap();
        let v: Value = serde_json::from_slice(&raw).unwrap();
        v["pairing_secret"].as_str().unwrap().to_string()
    };
    let nonce = record["nonce"].as_str().unwrap();
    for (what, text) in [
        ("device", &kept["device"]),
        ("history", &kept["history"]),
        ("localStorage", &kept["local"]),
    ] {
        let t = text.as_str().unwrap();
        assert!(!t.contains(&secret), "the pairing secret is kept in {what}");
        assert!(!t.contains(nonce), "a nonce is kept in {what}");
        assert!(!t.contains("request_digest"), "a digest is kept in {what}");
    }
    assert!(kept["history"].as_str().unwrap().contains("accepted"));

    // The history tab shows it.
    phone.tap("#tab-history").await;
    phone
        .wait(
            "the answer in the history",
            &format!(
                "document.querySelector(\"#history li[data-id='{id}'][data-status='accepted']\")"
            ),
        )
        .await;
    phone.screenshot("phone-history.png").await;
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_answer_is_sealed_and_judged_and_always_allow_takes_a_second_tap() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    quiet(&phone).await;

    // A choice among several.
    let q = world
        .ask(json!({"kind": "single_choice", "prompt": "Which database?", "choices": [
            {"id": "pg", "label": "Postgres"}, {"id": "sqlite", "label": "SQLite", "detail": "one file"}]}))
        .await;
    let id = q["id"].as_str().unwrap();
    answer_on(&phone, id, "button[data-choice='sqlite']").await;
    assert_eq!(verdict_on(&phone, id).await.0, "accepted");
    let r = world.record(id).await;
    assert_eq!(
        (&r["response"]["choice_id"], &r["response"]["source"]),
        (&json!("sqlite"), &json!("relay"))
    );

    // Text, counted as typed and bounded.
    let q = world
        .ask(json!({"kind": "text", "prompt": "Name the branch", "text_max_length": 20}))
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    let sel = super::world::card(&id);
    settled_card(&phone, &id).await;
    phone
        .type_into(&format!("{sel} textarea"), "fix/åßç-läuft")
        .await;
    let counter: String = phone
        .eval(&format!(
            "document.querySelector({sel:?}).querySelector('.counter').textContent"
        ))
        .await;
    assert_eq!(counter, "13 / 20");
    phone.tap(&format!("{sel} button[data-action=send]")).await;
    assert_eq!(verdict_on(&phone, &id).await.0, "accepted");
    assert_eq!(world.record(&id).await["response"]["text"], "fix/åßç-läuft");

    // "Always allow": the first tap only asks; Cancel sends nothing; the confirm sends it.
    let q = world
        .ask(json!({"kind": "permission", "prompt": "Run npm ci?", "choices": [
            {"id": "allow-once", "label": "Allow once"}, {"id": "allow-always", "label": "Always allow"}, {"id": "deny", "label": "Deny"}]}))
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    let sel = super::world::card(&id);
    answer_on(&phone, &id, "button[data-choice='allow-always']").await;
    phone
        .wait(
            "the confirm step",
            &format!("document.querySelector({sel:?}).querySelector('.confirm')"),
        )
        .await;
    settled_card(&phone, &id).await;
    phone.screenshot("phone-always.png").await;
    phone
        .tap(&format!("{sel} button[data-action=cancel-always]"))
        .await;
    assert_eq!(
        world.record(&id).await["status"],
        "pending",
        "the first tap sent nothing"
    );
    answer_on(&phone, &id, "button[data-choice='allow-always']").await;
    settled_card(&phone, &id).await;
    phone
        .tap(&format!("{sel} button[data-action=confirm-always]"))
        .await;
    assert_eq!(verdict_on(&phone, &id).await.0, "accepted");
    assert_eq!(
        world.record(&id).await["response"]["choice_id"],
        "allow-always"
    );
    phone.close().await;
}
