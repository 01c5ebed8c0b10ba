//! One contract suite, run against both Relay stores (SPEC §14): every test here runs once
//! on sled (the default) and once on a real PostgreSQL (`relay serve --database`), so the two
//! cannot drift. Real broker, hook, device client and Relay process each time.

use std::ffi::OsString;
use std::time::Duration;

use agentnotify::device::{Answer, DeviceError, StreamEvent};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::postgres::Postgres;
use crate::relay::{finish_hook, pending_one, start_hook, RelayProc, Setup, ALLOW};
use crate::relay_http::RawRelay;
use crate::support::{fixture, Home};

/// Which store the Relay under test keeps its state in.
pub(crate) struct Store {
    pub(crate) pg: Option<Postgres>,
}

impl Store {
    fn sled() -> Store {
        Store { pg: None }
    }

    fn postgres() -> Store {
        Store {
            pg: Some(Postgres::start()),
        }
    }

    /// The extra `relay serve` arguments.
    pub(crate) fn args(&self) -> Vec<OsString> {
        match &self.pg {
            None => vec![],
            Some(pg) => vec!["--database".into(), pg.url().into()],
        }
    }

    async fn setup(&self, poll_interval: u64) -> Setup {
        let args = self.args();
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        Setup::new_with(poll_interval, &refs).await
    }

    /// A Relay alone (no broker) on this store.
    fn relay(&self, home: &Home) -> RelayProc {
        let args = self.args();
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        RelayProc::start_with(home, &refs)
    }
}

/// Generates `NAME::sled` and `NAME::postgres` for each `async fn NAME(Store)`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sled() {
                super::$name(super::Store::sled()).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::Store::postgres()).await
            }
        }
    )*};
}

on_both_stores!(
    long_poll_carries_the_answer_to_the_hook,
    first_answer_wins_and_withdraws_the_question,
    stream_shows_question_withdrawal_and_verdict,
    http_contract_refuses_bad_input_by_field,
    restart_keeps_devices_envelopes_and_push_subscriptions,
    a_question_leaves_exactly_the_devices_holding_it,
);

/// The broker's long-poll (fallback poll 10 minutes away) is woken by the device's answer:
/// the Relay's change feed works on this store.
async fn long_poll_carries_the_answer_to_the_hook(store: Store) {
    let s = store.setup(600).await;
    let hook = start_hook(&s.home, &fixture("claude-bash.json"));
    let q = pending_one(&s.api).await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    s.phone()
        .answer(id, &Answer::Choice("allow-once".into()), None)
        .await
        .unwrap();
    let out = tokio::task::spawn_blocking(move || finish_hook(hook))
        .await
        .unwrap();
    assert_eq!(out.trim(), ALLOW);
}

/// Two answers reach the Relay before the broker judges: the broker accepts the first and
/// refuses the second; after that the Relay itself refuses a third (already answered), a
/// replay (duplicate), and the question has left the device.
async fn first_answer_wins_and_withdraws_the_question(store: Store) {
    let s = store.setup(3600).await;
    let q = s.api.ask_permission("Who wins?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let phone = s.phone();
    let question = phone.question(id).await.unwrap();
    let post = |rid: &str, choice: &str| {
        phone.seal(
            &phone.payload(&question, rid, &Answer::Choice(choice.into())),
            &question.expires_at,
        )
    };
    let first = post("r-first", "deny");
    phone.send(&first).await.unwrap();
    phone.send(&post("r-second", "allow-once")).await.unwrap();
    let (code, v) = s.poll();
    assert_eq!(code, 0, "{v}");
    let verdict = |rid: &'static str| phone.verdict(rid, id, Duration::from_secs(10));
    assert_eq!(verdict("r-first").await.unwrap().status, "accepted");
    assert!(
        matches!(verdict("r-second").await, Err(DeviceError::Refused { .. })),
        "the second answer was not refused"
    );
    assert_eq!(s.status(id).await["status"], "answered");
    match phone.send(&post("r-third", "allow-once")).await {
        Err(DeviceError::Refused { code, .. }) => assert_eq!(code, "already_answered"),
        other => panic!("a third answer was taken: {other:?}"),
    }
    match phone.send(&first).await {
        Err(DeviceError::Refused { code, .. }) => assert_eq!(code, "duplicate_response"),
        other => panic!("a replay was taken: {other:?}"),
    }
    let inbox = phone.inbox().await.unwrap();
    assert!(
        inbox.questions.iter().all(|q| q.id != id),
        "an accepted answer did not withdraw the question"
    );
}

/// The device's live stream: the snapshot, a new question, then its verdict and withdrawal.
async fn stream_shows_question_withdrawal_and_verdict(store: Store) {
    let s = store.setup(600).await;
    let phone = s.phone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let watcher = {
        // Straight to the Relay: the test proxy buffers whole replies, a stream never ends.
        let mut phone = s.phone();
        phone.state.relay_url = s.relay.url.clone();
        tokio::spawn(async move { phone.watch(tx).await })
    };
    assert!(matches!(next(&mut rx).await, StreamEvent::Ready(0)));
    let q = s.api.ask_permission("Live?").await;
    let id = q["id"].as_str().unwrap().to_string();
    match next(&mut rx).await {
        StreamEvent::Question(v) => assert_eq!(v.id, id),
        other => panic!("expected the question, got {other:?}"),
    }
    let rid = phone
        .answer(&id, &Answer::Choice("allow-once".into()), None)
        .await
        .unwrap();
    let mut seen = (false, false);
    while seen != (true, true) {
        match next(&mut rx).await {
            StreamEvent::Verdict(r) => {
                assert_eq!(
                    (r.response_id.as_str(), r.status.as_str()),
                    (rid.as_str(), "accepted")
                );
                seen.0 = true;
            }
            StreamEvent::Withdrawn(event) => {
                assert_eq!(event, format!("interaction:{id}"));
                seen.1 = true;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    watcher.abort();
}

/// The next event of a device stream other than a heartbeat (bounded).
pub(crate) async fn next(rx: &mut tokio::sync::mpsc::Receiver<StreamEvent>) -> StreamEvent {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended");
        if !matches!(e, StreamEvent::Heartbeat) {
            return e;
        }
    }
}

/// Bad input is a 4xx naming the problem, on either store.
async fn http_contract_refuses_bad_input_by_field(store: Store) {
    let home = Home::new();
    let relay = store.relay(&home);
    let r = RawRelay::new(&relay.url);
    let (status, v) = r
        .post("/v1/installations", None, json!({"pairing_token": "short"}))
        .await;
    assert_eq!(status, 400);
    assert!(v.to_string().contains("pairing_token"), "{v}");
    let inst = r.installation().await;
    let (status, _) = r
        .get(
            &format!(
                "/v1/interaction-responses?installation_id={}&since=bogus",
                inst.id
            ),
            &inst.token,
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(r.get("/v1/devices", "not-a-token").await.0, 401);
    let (status, v) = r
        .post(
            "/v1/envelopes",
            Some(&inst.token),
            json!({"device_id": "nope", "event_id": "interaction:x", "key_id": "k",
                   "expires_at": "2999-01-01T00:00:00Z", "sealed": "x", "signature": "s",
                   "installation_id": inst.id}),
        )
        .await;
    assert_eq!(status, 400, "an envelope beyond any question's life");
    assert!(v.to_string().contains("expires_at"), "{v}");
    let (status, _) = r
        .post(
            "/v1/devices",
            None,
            json!({"installation_id": inst.id, "pairing_token": "wrong-token-wrong-token",
                   "public_key": URL_SAFE_NO_PAD.encode([9u8; 32]), "proof": "x"}),
        )
        .await;
    assert_eq!(status, 403);
}

/// The uncompressed P-256 base point: a valid `p256dh` key.
const P256_POINT: &str = "046B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C2964FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Everything acknowledged survives a Relay restart: the device's token, its envelope, its
/// push subscription, and the VAPID key it subscribed with.
async fn restart_keeps_devices_envelopes_and_push_subscriptions(store: Store) {
    let mut s = store.setup(3600).await;
    let q = s.api.ask_permission("Still there?").await;
    let id = q["id"].as_str().unwrap();
    s.inbox_shows(id);
    let phone = s.phone();
    let http = agentnotify_relay_proto::tls::plain_http_client()
        .build()
        .unwrap();
    let relay = s.relay.url.clone();
    let vapid = |http: reqwest::Client| {
        let relay = relay.clone();
        async move {
            let v: Value = http
                .get(format!("{relay}/v1/push/vapid-public-key"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["public_key"].as_str().unwrap().to_string()
        }
    };
    let key_before = vapid(http.clone()).await;
    let r = http
        .post(format!("{}/v1/devices/push-subscription", s.relay.url))
        .bearer_auth(&phone.state.device_token)
        .header("content-type", "application/json")
        .body(
            json!({"endpoint": "https://push.example.net/sub/1",
                   "keys": {"p256dh": URL_SAFE_NO_PAD.encode(hex(P256_POINT)),
                            "auth": URL_SAFE_NO_PAD.encode([7u8; 16])}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    s.relay.restart(&s.home);
    assert_eq!(
        vapid(http.clone()).await,
        key_before,
        "the VAPID key changed"
    );
    let v: Value = http
        .get(format!("{}/v1/devices/push-subscription", s.relay.url))
        .bearer_auth(&phone.state.device_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["subscribed"], true, "{v}");
    let inbox = phone.inbox().await.unwrap();
    assert!(
        inbox.questions.iter().any(|q| q.id == id),
        "the envelope was lost across a restart"
    );
}

/// A withdrawal reaches every device of the installation holding the question and no
/// other: not another installation's device with the same event id, not a removed device.
/// The devices listed are the installation's own. Records stored before the Relay kept its
/// indexes (wiped here, as an older Relay would have left them) are indexed at the next
/// start and behave the same.
async fn a_question_leaves_exactly_the_devices_holding_it(store: Store) {
    let home = Home::new();
    let mut relay = store.relay(&home);
    let r = RawRelay::new(&relay.url);
    let (a, b) = (r.installation().await, r.installation().await);
    let (a1, a2, a3, b1) = (
        r.pair(&a).await,
        r.pair(&a).await,
        r.pair(&a).await,
        r.pair(&b).await,
    );
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let (x, y, z) = ("a".repeat(32), "b".repeat(32), "c".repeat(32));
    r.envelope(&a, &a1, &x).await;
    r.envelope(&a, &a2, &x).await;
    r.envelope(&a, &a1, &y).await;
    r.envelope(&a, &a2, &y).await;
    r.envelope(&b, &b1, &x).await;
    assert_eq!(
        r.devices(&a).await,
        sorted(vec![a1.id.clone(), a2.id.clone(), a3.id.clone()])
    );
    assert_eq!(r.devices(&b).await, vec![b1.id.clone()]);
    let (status, v) = r.withdraw(&a, &x).await;
    assert_eq!((status, &v["deleted"]), (200, &json!(2)), "{v}");
    assert_eq!(r.held(&a1).await, vec![y.clone()]);
    assert_eq!(r.held(&a2).await, vec![y.clone()]);
    assert_eq!(
        r.held(&b1).await,
        vec![x.clone()],
        "another installation's device lost its envelope"
    );
    let (status, v) = r.delete(&format!("/v1/devices/{}", a2.id), &a.token).await;
    assert_eq!((status, &v["removed"]), (200, &json!(true)), "{v}");
    assert_eq!(
        r.devices(&a).await,
        sorted(vec![a1.id.clone(), a3.id.clone()])
    );
    // As an older Relay left its store: records, no indexes.
    r.envelope(&a, &a3, &y).await;
    r.envelope(&a, &a1, &z).await;
    let _ = relay.child.kill();
    let _ = relay.child.wait();
    match &store.pg {
        Some(pg) => {
            pg.psql(
                "relay",
                "DELETE FROM relay_kv WHERE tree IN ('recipients', 'installation_devices') \
                 OR (tree = 'meta' AND key = 'indexes_v1'::bytea)",
            );
        }
        None => {
            let db = sled::open(home.path().join("relay-data").join("relay.sled")).unwrap();
            db.drop_tree("recipients").unwrap();
            db.drop_tree("installation_devices").unwrap();
            db.open_tree("meta").unwrap().remove("indexes_v1").unwrap();
            db.flush().unwrap();
        }
    }
    relay.restart(&home);
    let r = RawRelay::new(&relay.url);
    assert_eq!(
        r.devices(&a).await,
        sorted(vec![a1.id.clone(), a3.id.clone()])
    );
    let (status, v) = r.withdraw(&a, &y).await;
    assert_eq!((status, &v["deleted"]), (200, &json!(2)), "{v}");
    assert_eq!(r.held(&a1).await, vec![z.clone()]);
    assert!(r.held(&a3).await.is_empty());
}
