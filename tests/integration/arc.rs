//! ARC 0.2 (`POST /v1/events`, SPEC §10.1) against the real daemon over HTTP: one test per
//! assertion of the reference consumer's API tests, plus the delivery outbox seen through a
//! real webhook receiver.

use std::time::Duration;

use serde_json::{json, Value};

use crate::channels::add_webhook;
use crate::receivers::{Request, WebhookReceiver};
use crate::support::{Api, Daemon, Home};

fn event(event_type: &str, event_id: &str, request: Value) -> Value {
    json!({
        "arc_version": "0.2",
        "event_id": event_id,
        "event_type": event_type,
        "occurred_at": "2026-12-01T10:00:00Z",
        "sender": {"id": "codex", "name": "Codex", "version": "0.169.0"},
        "request": request,
    })
}

fn answerable(key: &str) -> Value {
    let expires = agentnotify::model::Timestamp::now()
        .plus(Duration::from_secs(600))
        .to_rfc3339();
    event(
        "request.created",
        &format!("ev-{key}"),
        json!({
            "key": key, "kind": "permission", "message": "Run `cargo publish`?",
            "response": {
                "kind": "permission",
                "choices": [{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}],
                "expires_at": expires,
            }
        }),
    )
}

fn submitted(key: &str, response: Value) -> Value {
    let mut e = event(
        "response.submitted",
        &format!("answer-{key}"),
        json!({"key": key}),
    );
    e["response"] = response;
    e
}

async fn post(api: &Api, body: Value) -> (u16, Value) {
    api.post("/v1/events", body).await
}

/// Asserts a 400 whose message names `field`.
async fn refused(api: &Api, body: Value, field: &str) {
    let (status, v) = post(api, body).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["code"], "invalid_request", "{v}");
    let msg = v["error"].as_str().unwrap();
    assert!(msg.contains(field), "{msg:?} should name {field}");
}

fn started() -> (Home, Daemon, Api) {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    (home, d, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_created_with_key_context_and_our_extension_is_201_with_every_field() {
    let (_home, _d, api) = started();
    let mut e = event(
        "request.created",
        "evt-1",
        json!({"key": "build-7", "kind": "completion", "title": "Build finished",
               "message": "All 312 tests pass", "priority": "low"}),
    );
    e["context"] = json!({"session_id": "s-1", "correlation_id": "turn-1", "project": "shop",
                          "cwd": "/src/shop", "pid": 42, "turn_id": "t1", "native_request_id": "n1"});
    e["extensions"] = json!({"x-agentnotify": {"notification_type": "success"}});
    let (status, v) = post(&api, e).await;
    assert_eq!(status, 201, "{v}");
    let n = &v["notification"];
    assert_eq!(n["title"], "Build finished");
    assert_eq!(n["message"], "All 312 tests pass");
    assert_eq!(n["type"], "success");
    assert_eq!(n["priority"], "low");
    assert_eq!(n["key"], "build-7");
    assert_eq!(n["agent"], "codex");
    assert_eq!(n["project"], "shop");
    assert_eq!(n["metadata"]["arc_version"], "0.2");
    assert_eq!(n["metadata"]["arc_event_id"], "evt-1");
    assert_eq!(n["metadata"]["arc_correlation_id"], "turn-1");
    assert_eq!(v["interaction"], Value::Null);
    let (_, listed) = api.get("/v1/notifications").await;
    assert_eq!(listed["notifications"][0]["id"], n["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_kinds_default_their_type_priority_and_title_and_unkeyed_events_get_arc_keys() {
    let (_home, _d, api) = started();
    let table = [
        ("information", "info", "normal", "Update from Codex"),
        ("question", "input_required", "high", "Codex needs input"),
        (
            "permission",
            "permission_required",
            "high",
            "Codex needs permission",
        ),
        ("blocked", "blocked", "high", "Codex is blocked"),
        ("failure", "error", "high", "Codex reported a failure"),
        ("completion", "completed", "normal", "Codex completed work"),
    ];
    for (kind, ty, priority, title) in table {
        let e = event(
            "request.created",
            &format!("k-{kind}"),
            json!({"kind": kind, "message": "m"}),
        );
        let (status, v) = post(&api, e).await;
        assert_eq!(status, 201, "{kind}: {v}");
        let n = &v["notification"];
        assert_eq!(
            (
                n["type"].as_str(),
                n["priority"].as_str(),
                n["title"].as_str()
            ),
            (Some(ty), Some(priority), Some(title)),
            "{kind}"
        );
        let key = n["key"].as_str().unwrap();
        // arc: + sha256hex(sender.id + "\n" + event_id), computed here independently.
        use sha2::Digest;
        let want = sha2::Sha256::digest(format!("codex\nk-{kind}").as_bytes());
        let want: String = want.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(key, format!("arc:{want}"));
    }
    // Without a name the sender's id is used.
    let mut e = event(
        "request.created",
        "no-name",
        json!({"kind": "blocked", "message": "m"}),
    );
    e["sender"] = json!({"id": "hermes"});
    assert_eq!(
        post(&api, e).await.1["notification"]["title"],
        "hermes is blocked"
    );
}

fn notification_deliveries(rs: &[Request], id: &str) -> usize {
    rs.iter()
        .filter(|r| {
            let v = r.json();
            v["type"] == "notification.created" && v["data"]["id"] == id
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_unkeyed_replay_returns_the_same_records_and_is_delivered_once() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    add_webhook(&home, "ops", &rx.url, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let e = event(
        "request.created",
        "once-only",
        json!({"kind": "information", "message": "m"}),
    );
    let (s1, first) = post(&api, e.clone()).await;
    assert_eq!(s1, 201, "{first}");
    let id = first["notification"]["id"].as_str().unwrap().to_string();
    rx.wait_for(10, |rs| notification_deliveries(rs, &id) == 1)
        .await;
    let (s2, again) = post(&api, e.clone()).await;
    assert_eq!(
        (s2, &again["notification"]["id"]),
        (200, &first["notification"]["id"])
    );
    let (code, _) = api
        .post(&format!("/v1/notifications/{id}/resolve"), json!({}))
        .await;
    assert_eq!(code, 200);
    let (s3, third) = post(&api, e).await;
    assert_eq!(s3, 200, "{third}");
    assert_eq!(third["notification"]["id"], first["notification"]["id"]);
    assert_eq!(third["notification"]["status"], "resolved");
    // Nothing more was queued: once the outbox holds nothing for it, one delivery it is.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, st) = api.get("/v1/channels/status").await;
        let outbox = st["outbox"].as_array().unwrap();
        if outbox
            .iter()
            .all(|x| x["subject_id"] != id.as_str() || x["action"] != "deliver")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{st:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(notification_deliveries(&rx.received(), &id), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_updated_changes_the_same_notification_and_an_unknown_key_is_404() {
    let (_home, _d, api) = started();
    let (_, v) = post(
        &api,
        event(
            "request.created",
            "u1",
            json!({"key": "deploy", "kind": "blocked", "message": "waiting for CI"}),
        ),
    )
    .await;
    let (status, u) = post(
        &api,
        event(
            "request.updated",
            "u2",
            json!({"key": "deploy", "kind": "blocked", "message": "CI is red"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{u}");
    assert_eq!(u["notification"]["id"], v["notification"]["id"]);
    assert_eq!(u["notification"]["message"], "CI is red");
    let (status, nf) = post(
        &api,
        event(
            "request.updated",
            "u3",
            json!({"key": "nobody", "kind": "blocked", "message": "m"}),
        ),
    )
    .await;
    assert_eq!(
        (status, nf["code"].as_str()),
        (404, Some("not_found")),
        "{nf}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_resolved_is_idempotent_and_an_unknown_key_is_404() {
    let (home, d, api) = started();
    post(
        &api,
        event(
            "request.created",
            "r1",
            json!({"key": "job", "kind": "information", "message": "m"}),
        ),
    )
    .await;
    for _ in 0..2 {
        let (status, v) = post(&api, event("request.resolved", "r2", json!({"key": "job"}))).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["notification"]["status"], "resolved");
    }
    // A restarted broker still knows the closed condition under its key.
    drop(d);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let (status, v) = post(&api, event("request.resolved", "r2", json!({"key": "job"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["notification"]["status"], "resolved");
    let (status, _) = post(
        &api,
        event("request.resolved", "r3", json!({"key": "never"})),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_wrong_versions_types_kinds_and_missing_keys_are_400_naming_the_field() {
    let (_home, _d, api) = started();
    let ok = json!({"kind": "information", "message": "m"});
    for version in ["1.0", "0.1"] {
        let mut e = event("request.created", "v", ok.clone());
        e["arc_version"] = json!(version);
        refused(&api, e, "arc_version").await;
    }
    refused(
        &api,
        event("notification.sent", "t", ok.clone()),
        "event_type",
    )
    .await;
    refused(
        &api,
        event(
            "request.created",
            "k",
            json!({"kind": "unsupported", "message": "m"}),
        ),
        "request.kind",
    )
    .await;
    refused(
        &api,
        event("request.updated", "nk", ok.clone()),
        "request.key",
    )
    .await;
    let mut e = event("request.created", "o", ok.clone());
    e["occurred_at"] = json!("yesterday");
    refused(&api, e, "occurred_at").await;
    let mut e = event("request.created", "s", ok);
    e["sender"] = json!({"name": "no id"});
    refused(&api, e, "sender.id").await;
    let (_, listed) = api.get("/v1/notifications").await;
    assert_eq!(listed["notifications"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_events_without_the_token_are_401() {
    let (_home, _d, api) = started();
    let res = api
        .http
        .post(format!("{}/v1/events", api.url))
        .json(&event(
            "request.created",
            "x",
            json!({"kind": "information", "message": "m"}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let wrong = Api::new(&api.url, "not-the-token");
    assert_eq!(
        post(&wrong, event("request.created", "x", json!({})))
            .await
            .0,
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_vendor_extensions_are_ignored_and_unknown_fields_are_400() {
    let (_home, _d, api) = started();
    let ok = json!({"kind": "information", "message": "m"});
    let mut e = event("request.created", "x1", ok.clone());
    e["extensions"] = json!({"x-example": {"anything": [1, 2, 3]}});
    assert_eq!(post(&api, e).await.0, 201);
    let mut e = event("request.created", "x2", ok.clone());
    e["future_field"] = json!(1);
    refused(&api, e, "future_field").await;
    let mut e = event("request.created", "x3", ok.clone());
    e["extensions"] = json!({"x-agentnotify": {"future_field": true}});
    refused(&api, e, "extensions.x-agentnotify.future_field").await;
    let mut e = event("request.created", "x4", ok.clone());
    e["extensions"] = json!({"x-agentnotify": {"notification_type": "no spaces"}});
    refused(&api, e, "extensions.x-agentnotify.notification_type").await;
    let mut e = event("request.created", "x5", ok);
    e["request"]["colour"] = json!("red");
    refused(&api, e, "request.colour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_answerable_request_is_answered_by_key_first_answer_wins_and_a_second_is_409() {
    let (_home, _d, api) = started();
    let (status, v) = post(&api, answerable("publish")).await;
    assert_eq!(status, 201, "{v}");
    let i = v["interaction"].clone();
    assert_eq!(i["kind"], "permission");
    assert_eq!(i["prompt"], "Run `cargo publish`?");
    assert_eq!(i["status"], "pending");
    assert_eq!(i["key"], "publish");
    assert_eq!(v["notification"]["interaction_id"], i["id"]);
    // A producer waiting on the question wakes with the answer given by key.
    let waiter = {
        let api = api.clone();
        let id = i["id"].as_str().unwrap().to_string();
        tokio::spawn(async move {
            api.get(&format!("/v1/interactions/{id}/wait?timeout=30"))
                .await
        })
    };
    let answer = json!({"response_id": "r-1", "digest": i["request_digest"], "nonce": i["nonce"],
                        "choice_id": "allow_once", "source": "cli"});
    let (status, a) = post(&api, submitted("publish", answer.clone())).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["interaction"]["status"], "answered");
    assert_eq!(a["interaction"]["response"]["choice_id"], "allow_once");
    assert_eq!(a["interaction"]["response"]["source"], "cli");
    assert_eq!(a["notification"]["status"], "resolved");
    let (_, waited) = waiter.await.unwrap();
    assert_eq!(waited["status"], "answered");
    // The same answer again is a replay; a different one is refused.
    assert_eq!(
        post(&api, submitted("publish", answer.clone())).await.0,
        200
    );
    let mut other = answer;
    other["response_id"] = json!("r-2");
    other["choice_id"] = json!("deny");
    let (status, c) = post(&api, submitted("publish", other)).await;
    assert_eq!(
        (status, c["code"].as_str()),
        (409, Some("already_answered")),
        "{c}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_a_stale_digest_is_400_a_wrong_nonce_is_400_and_an_unasked_key_is_404() {
    let (_home, _d, api) = started();
    let v = post(&api, answerable("k1")).await.1;
    let i = &v["interaction"];
    let stale = json!({"response_id": "r", "digest": "a".repeat(64), "nonce": i["nonce"],
                       "choice_id": "allow_once", "source": "cli"});
    let (status, e) = post(&api, submitted("k1", stale)).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("digest_mismatch")),
        "{e}"
    );
    let bad_nonce = json!({"response_id": "r", "digest": i["request_digest"], "nonce": "x",
                           "choice_id": "allow_once", "source": "cli"});
    let (status, e) = post(&api, submitted("k1", bad_nonce)).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("nonce_mismatch")),
        "{e}"
    );
    let unasked = json!({"response_id": "r", "digest": "a".repeat(64), "choice_id": "deny"});
    assert_eq!(post(&api, submitted("never-asked", unasked)).await.0, 404);
    // Nothing was accepted.
    let (_, now) = api
        .get(&format!("/v1/interactions/{}", i["id"].as_str().unwrap()))
        .await;
    assert_eq!(now["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_resolved_with_an_outcome_cancels_the_open_question() {
    let (_home, _d, api) = started();
    let v = post(&api, answerable("gone")).await.1;
    let id = v["interaction"]["id"].as_str().unwrap().to_string();
    let waiter = {
        let api = api.clone();
        let id = id.clone();
        tokio::spawn(async move {
            api.get(&format!("/v1/interactions/{id}/wait?timeout=30"))
                .await
        })
    };
    let (status, r) = post(
        &api,
        event(
            "request.resolved",
            "done",
            json!({"key": "gone", "outcome": "not_needed"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["notification"]["status"], "resolved");
    assert_eq!(r["interaction"]["status"], "cancelled");
    assert_eq!(waiter.await.unwrap().1["status"], "cancelled");
    assert!(api.pending().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_an_invalid_question_is_400_and_opens_nothing() {
    let (_home, _d, api) = started();
    let mut e = answerable("one-choice");
    e["request"]["response"]["choices"] = json!([{"id": "ok", "label": "OK"}]);
    refused(&api, e, "request.response.choices").await;
    let mut e = answerable("past");
    e["request"]["response"]["expires_at"] = json!("2020-01-01T00:00:00Z");
    refused(&api, e, "request.response.expires_at").await;
    let mut e = answerable("no-expiry");
    e["request"]["response"]
        .as_object_mut()
        .unwrap()
        .remove("expires_at");
    refused(&api, e, "request.response.expires_at").await;
    let (_, listed) = api.get("/v1/notifications").await;
    assert_eq!(listed["notifications"], json!([]));
    assert!(api.pending().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_malformed_envelopes_are_400() {
    let (_home, _d, api) = started();
    let mut e = event(
        "request.created",
        "m1",
        json!({"kind": "information", "message": "m"}),
    );
    e["response"] = json!({"response_id": "r", "digest": "a".repeat(64), "choice_id": "x"});
    refused(&api, e, "response").await;
    refused(
        &api,
        event(
            "request.created",
            "m2",
            json!({"kind": "information", "message": "m", "outcome": "answered"}),
        ),
        "request.outcome",
    )
    .await;
    post(&api, answerable("both")).await;
    let both =
        json!({"response_id": "r", "digest": "a".repeat(64), "choice_id": "deny", "text": "no"});
    refused(&api, submitted("both", both), "choice_id").await;
    for body in [json!(null), json!([]), json!("0.2")] {
        let (status, _) = post(&api, body).await;
        assert_eq!(status, 400);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arc_a_text_question_takes_a_text_answer_and_late_updates_change_nothing() {
    let (_home, _d, api) = started();
    let mut e = answerable("name");
    e["request"]["kind"] = json!("question");
    e["request"]["message"] = json!("Name the release");
    e["request"]["response"] = json!({"kind": "text", "text_max_length": 20,
                                     "expires_at": "2999-01-01T00:00:00+02:00"});
    let (status, v) = post(&api, e).await;
    assert_eq!(status, 201, "{v}");
    let i = &v["interaction"];
    assert_eq!(
        (i["kind"].as_str(), i["text_max_length"].as_u64()),
        (Some("text"), Some(20))
    );
    assert_eq!(v["notification"]["type"], "input_required");
    let long = json!({"response_id": "r", "digest": i["request_digest"], "nonce": i["nonce"],
                      "text": "x".repeat(21), "source": "cli"});
    let (status, err) = post(&api, submitted("name", long)).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("invalid_answer")),
        "{err}"
    );
    let ok = json!({"response_id": "r2", "digest": i["request_digest"], "nonce": i["nonce"],
                    "text": "Aurora", "source": "cli"});
    let (status, a) = post(&api, submitted("name", ok)).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["interaction"]["response"]["text"], "Aurora");
    let (status, u) = post(
        &api,
        event(
            "request.updated",
            "late",
            json!({"key": "name", "kind": "question", "message": "changed"}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{u}");
    assert_eq!(u["notification"]["message"], "Name the release");
    assert_eq!(u["notification"]["status"], "resolved");
}
