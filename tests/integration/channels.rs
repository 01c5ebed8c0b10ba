//! Delivery (SPEC §11) with the real daemon: the one outbox, routes, consent, webhooks
//! checked by an independent Standard Webhooks implementation, and ntfy against the
//! loopback stand-in of `receivers.rs`.

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::receivers::{Ntfy, Request, WebhookReceiver};
use crate::support::{fixture, Api, Daemon, Home, AGENTNOTIFY, HOOK};

pub fn run(home: &Home, args: &[&str]) -> (i32, String, String) {
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

fn ok(home: &Home, args: &[&str]) -> String {
    let (code, out, err) = run(home, args);
    assert_eq!(code, 0, "{args:?}: {out} {err}");
    out
}

/// Adds a webhook channel; returns its signing secret (printed once).
pub fn add_webhook(home: &Home, id: &str, url: &str, extra: &[&str]) -> String {
    let mut args = vec!["channels", "add", "webhook", id, "--url", url];
    args.extend_from_slice(extra);
    let out = ok(home, &args);
    out.split_whitespace()
        .find(|w| w.starts_with("whsec_"))
        .unwrap_or_else(|| panic!("no secret printed: {out}"))
        .to_string()
}

pub fn add_ntfy(home: &Home, id: &str, server: &str, topic: &str, extra: &[&str]) {
    let mut args = vec![
        "channels", "add", "ntfy", id, "--server", server, "--topic", topic,
    ];
    args.extend_from_slice(extra);
    ok(home, &args);
}

/// The event type and `data` of a webhook request.
fn event(r: &Request) -> (String, Value) {
    let v = r.json();
    (
        v["type"].as_str().unwrap_or("").to_string(),
        v["data"].clone(),
    )
}

fn of_type<'a>(rs: &'a [Request], t: &str, id: &str) -> Vec<&'a Request> {
    rs.iter()
        .filter(|r| {
            let (ty, data) = event(r);
            ty == t && data["id"] == id
        })
        .collect()
}

/// Checks the signature with the `standardwebhooks` crate (not our code).
fn verify(secret: &str, r: &Request) {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &r.headers {
        headers.insert(
            reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&r.body, &headers)
        .unwrap_or_else(|e| panic!("signature does not verify: {e:?} {headers:?}"));
}

async fn status(api: &Api) -> Value {
    api.get("/v1/channels/status").await.1
}

/// Waits until the outbox, as `channels status` shows it, satisfies `pred`.
async fn wait_outbox(api: &Api, secs: u64, pred: impl Fn(&[Value]) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let st = status(api).await;
        if pred(st["outbox"].as_array().unwrap()) {
            return st;
        }
        assert!(Instant::now() < deadline, "outbox never got there: {st:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn start_hook(home: &Home, payload: &str) -> Child {
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

fn finish_hook(mut child: Child) -> String {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_events_are_signed_verify_independently_and_never_carry_the_nonce() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    let secret = add_webhook(&home, "ops", &rx.url, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("SECRET-drop-the-prod-db").await;
    let id = q["id"].as_str().unwrap().to_string();
    let got = rx
        .wait_for(10, |rs| !of_type(rs, "interaction.created", &id).is_empty())
        .await;
    let created = of_type(&got, "interaction.created", &id)[0];
    verify(&secret, created);
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(
        created.header("webhook-id"),
        Some(format!("deliver:interaction:{id}:ops").as_str())
    );
    // No consent: generic text only; never the nonce or digest.
    let raw = String::from_utf8_lossy(&created.body).into_owned();
    for secret_bit in [
        "SECRET-drop-the-prod-db",
        "shop",
        "allow-once",
        q["nonce"].as_str().unwrap(),
        q["request_digest"].as_str().unwrap(),
    ] {
        assert!(!raw.contains(secret_bit), "{secret_bit:?} left: {raw}");
    }
    let (_, data) = event(created);
    assert_eq!(
        (data["agent"].as_str(), data["kind"].as_str()),
        (Some("codex"), Some("permission"))
    );
    // Settled: interaction.resolved follows, signed the same way.
    api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    let got = rx
        .wait_for(10, |rs| {
            !of_type(rs, "interaction.resolved", &id).is_empty()
        })
        .await;
    let resolved = of_type(&got, "interaction.resolved", &id)[0];
    verify(&secret, resolved);
    assert_eq!(event(resolved).1["status"], "answered");
    assert!(!String::from_utf8_lossy(&resolved.body).contains(q["nonce"].as_str().unwrap()));
    // Notifications are events too.
    let (code, n) = api
        .post(
            "/v1/notifications",
            json!({"title": "Claude finished", "message": "in shop", "type": "completed", "agent": "claude"}),
        )
        .await;
    assert_eq!(code, 201);
    let nid = n["id"].as_str().unwrap().to_string();
    let got = rx
        .wait_for(10, |rs| {
            !of_type(rs, "notification.created", &nid).is_empty()
        })
        .await;
    verify(&secret, of_type(&got, "notification.created", &nid)[0]);
    // A signature made with another key does not verify: the check above means something.
    let other = tamper_secret(&secret);
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &created.headers {
        headers.insert(
            reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    assert!(standardwebhooks::Webhook::new(&other)
        .unwrap()
        .verify(&created.body, &headers)
        .is_err());
}

/// Another valid `whsec_` secret (a different key).
pub fn tamper_secret(secret: &str) -> String {
    let mut s = secret.to_string();
    let last = s.pop().unwrap();
    // Change a character in the middle of the base64 (the tail may be padding).
    let mid = s.len() / 2;
    let c = s.as_bytes()[mid];
    let replacement = if c == b'A' { 'B' } else { 'A' };
    s.replace_range(mid..mid + 1, &replacement.to_string());
    s.push(last);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_failures_are_retried_with_one_webhook_id_until_delivered() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    rx.set_status(500);
    add_webhook(&home, "ops", &rx.url, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("retry me").await;
    let id = q["id"].as_str().unwrap().to_string();
    // Refused twice (1 s apart, then about 2 s): recorded with the status code.
    rx.wait_for(20, |rs| of_type(rs, "interaction.created", &id).len() >= 2)
        .await;
    let st = wait_outbox(&api, 10, |o| {
        o.iter()
            .any(|e| e["subject_id"] == id.as_str() && e["attempts"].as_u64() >= Some(2))
    })
    .await;
    let entry = st["outbox"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subject_id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(entry["last_status"], 500, "{entry}");
    assert_eq!(entry["state"], "waiting");
    let ops = st["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ops")
        .unwrap()
        .clone();
    assert_eq!(ops["waiting"], 1, "{ops}");
    assert!(ops["last_error"].as_str().unwrap().contains("500"), "{ops}");
    // Then the receiver goes down altogether, and comes back: delivered.
    let port = rx.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rx = WebhookReceiver::start_on(port).await;
    let got = rx
        .wait_for(30, |rs| !of_type(rs, "interaction.created", &id).is_empty())
        .await;
    let ids: Vec<&str> = got.iter().filter_map(|r| r.header("webhook-id")).collect();
    assert!(ids
        .iter()
        .all(|w| *w == format!("deliver:interaction:{id}:ops")));
    wait_outbox(&api, 10, |o| {
        o.iter().all(|e| e["subject_id"] != id.as_str())
    })
    .await;
}

/// Standard Webhooks' delivery rules: a 410 means the endpoint is gone (the event is
/// dead-lettered at once, never retried); a 5xx or 429 with `Retry-After` is not tried again
/// before the receiver asked, however short our own backoff would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_gone_is_never_retried_and_retry_after_is_honoured() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    rx.set_status(410);
    add_webhook(&home, "ops", &rx.url, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let gone = api.ask_permission("gone").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let find = |st: &Value, id: &str| {
        st["outbox"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["subject_id"] == id && e["action"] == "deliver")
            .cloned()
            .unwrap()
    };
    let st = wait_outbox(&api, 10, |o| {
        o.iter()
            .any(|e| e["subject_id"] == gone.as_str() && e["state"] == "dead")
    })
    .await;
    let entry = find(&st, &gone);
    assert_eq!(entry["last_status"], 410, "{entry}");
    assert_eq!(entry["attempts"], 1, "{entry}");
    assert!(
        entry["last_error"].as_str().unwrap().contains("410 Gone"),
        "{entry}"
    );

    rx.set_status_retry_after(503, 120);
    let later = api.ask_permission("later").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = wait_outbox(&api, 10, |o| {
        o.iter()
            .any(|e| e["subject_id"] == later.as_str() && e["last_status"] == 503)
    })
    .await;
    let entry = find(&st, &later);
    assert_eq!(entry["state"], "waiting", "{entry}");
    let next =
        agentnotify::model::Timestamp::parse_rfc3339(entry["next_attempt_at"].as_str().unwrap())
            .unwrap();
    let wait = agentnotify::model::Timestamp::now().until(next);
    assert!(
        wait > Duration::from_secs(100),
        "the receiver asked for 120 s; the next try is in {wait:?} ({entry})"
    );
    // The gone endpoint's event was tried once only, though the dispatcher ran again since.
    assert_eq!(
        of_type(&rx.received(), "interaction.created", &gone).len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_undelivered_entries_delivers_every_one_after_restart_none_twice() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    rx.set_status(503);
    add_webhook(&home, "ops", &rx.url, &[]);
    let ntfy = Ntfy::start().await;
    add_ntfy(&home, "phone", &ntfy.url, "t-kill9", &[]);
    let mut d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let mut ids = Vec::new();
    for i in 0..5 {
        let q = api
            .ask(json!({"kind": "permission", "prompt": format!("q{i}"), "ttl_seconds": 600}))
            .await;
        ids.push(q["id"].as_str().unwrap().to_string());
    }
    // The webhook has refused each once; ntfy took them.
    rx.wait_for(20, |rs| {
        ids.iter()
            .all(|id| !of_type(rs, "interaction.created", id).is_empty())
    })
    .await;
    ntfy.wait_for(20, |n| n.shown("t-kill9").len() == 5).await;
    // And one acknowledged an instant before the kill: its entries were durable with it.
    let last = api
        .ask(json!({"kind": "permission", "prompt": "the last one", "ttl_seconds": 600}))
        .await;
    d.kill9();
    ids.push(last["id"].as_str().unwrap().to_string());
    let before_restart = rx.received().len();
    rx.set_status(200);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    wait_outbox(&api, 30, |o| {
        o.iter()
            .all(|e| e["action"] != "deliver" || e["state"] != "waiting")
    })
    .await;
    let got = rx.received();
    for id in &ids {
        // Delivered by the restarted broker, always under the one id the receiver dedupes on.
        assert!(
            !of_type(&got[before_restart..], "interaction.created", id).is_empty(),
            "{id} not delivered after the restart"
        );
        let wid = format!("deliver:interaction:{id}:ops");
        let all = of_type(&got, "interaction.created", id);
        assert!(all
            .iter()
            .all(|r| r.header("webhook-id") == Some(wid.as_str())));
    }
    let accepted: std::collections::BTreeSet<&str> = got
        .iter()
        .filter(|r| event(r).0 == "interaction.created")
        .filter_map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(
        accepted.len(),
        6,
        "one event per question, deduped by webhook-id"
    );
    // ntfy: still one notification per question (a repeat replaces by sequence id).
    ntfy.wait_for(20, |n| n.shown("t-kill9").len() == 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_answered_within_the_delay_sends_nothing_and_one_still_pending_arrives_after_it()
{
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    add_webhook(&home, "ops", &rx.url, &["--delay", "2"]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let answered = api.ask_permission("answered at the desk").await;
    let aid = answered["id"].as_str().unwrap().to_string();
    let st = status(&api).await;
    assert!(
        st["outbox"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["subject_id"] == aid.as_str() && e["state"] == "waiting"),
        "queued, held for the delay: {st}"
    );
    api.respond(&answered, Api::answer(&answered, "r1", "allow-once"))
        .await;
    // Answered before the delay: its entry is gone, nothing is left to send.
    wait_outbox(&api, 5, |o| {
        o.iter().all(|e| e["subject_id"] != aid.as_str())
    })
    .await;
    let started = Instant::now();
    let late = api.ask_permission("still pending").await;
    let lid = late["id"].as_str().unwrap().to_string();
    rx.wait_for(10, |rs| {
        !of_type(rs, "interaction.created", &lid).is_empty()
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "delivered before the delay: {:?}",
        started.elapsed()
    );
    assert!(of_type(&rx.received(), "interaction.created", &aid).is_empty());
    assert!(of_type(&rx.received(), "interaction.resolved", &aid).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_filter_and_consent_decides_what_leaves_the_machine() {
    let home = Home::new();
    let plain = WebhookReceiver::start().await;
    let full = WebhookReceiver::start().await;
    add_webhook(&home, "plain", &plain.url, &[]);
    add_webhook(&home, "full", &full.url, &["--include-message"]);
    let out = ok(
        &home,
        &["channels", "route", "add", "full", "--project", "shop"],
    );
    assert!(out.contains("replaces the catch-all"), "{out}");
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let shop = api
        .ask(json!({"kind": "permission", "prompt": "PROMPT-shop", "agent": "claude", "project": "shop"}))
        .await;
    let blog = api
        .ask(json!({"kind": "permission", "prompt": "PROMPT-blog", "agent": "claude", "project": "blog"}))
        .await;
    let (sid, bid) = (shop["id"].as_str().unwrap(), blog["id"].as_str().unwrap());
    let got = full
        .wait_for(10, |rs| !of_type(rs, "interaction.created", sid).is_empty())
        .await;
    let (_, data) = event(of_type(&got, "interaction.created", sid)[0]);
    assert_eq!(data["prompt"], "PROMPT-shop");
    assert_eq!(data["project"], "shop");
    assert_eq!(data["choices"][0]["id"], "allow-once");
    // The catch-all channel gets both, without the prompt, choices or project.
    let got = plain
        .wait_for(10, |rs| {
            !of_type(rs, "interaction.created", sid).is_empty()
                && !of_type(rs, "interaction.created", bid).is_empty()
        })
        .await;
    for r in &got {
        let raw = String::from_utf8_lossy(&r.body);
        for bit in ["PROMPT-", "shop", "blog", "allow-once", "Allow"] {
            assert!(!raw.contains(bit), "{bit:?} left without consent: {raw}");
        }
    }
    // The filtered route never queued the other project.
    let st = status(&api).await;
    assert!(!st["outbox"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["subject_id"] == bid && e["channel"] == "full"));
    assert!(of_type(&full.received(), "interaction.created", bid).is_empty());
}

/// The `http` actions of the (last) message about `title_part`… on `topic`.
fn actions_on(ntfy: &Ntfy, topic: &str) -> Vec<Value> {
    ntfy.shown(topic)
        .last()
        .map(|m| m["actions"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_buttons_answer_through_the_hook_and_replayed_unknown_or_stale_tokens_do_nothing() {
    let home = Home::new();
    let ntfy = Ntfy::start().await;
    add_ntfy(
        &home,
        "phone",
        &ntfy.url,
        "t-buttons",
        &["--include-message", "--answer-buttons"],
    );
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    ntfy.wait_for(10, |n| n.open_streams("t-buttons-answers") == 1)
        .await;
    let hook = start_hook(&home, &fixture("claude-bash.json"));
    ntfy.wait_for(20, |n| n.shown("t-buttons").len() == 1).await;
    let published = ntfy.publishes().last().unwrap().clone();
    assert_eq!(published["topic"], "t-buttons");
    assert_eq!(published["priority"], 5, "permission questions are urgent");
    assert!(published["click"].as_str().unwrap().ends_with("/ui"));
    assert!(published["tags"].is_array());
    let q = api.pending().await.remove(0);
    assert!(published["message"].as_str().unwrap().contains("npm ci"));
    let actions = actions_on(&ntfy, "t-buttons");
    assert!(!actions.is_empty() && actions.len() <= 3, "{actions:?}");
    let raw = published.to_string();
    assert!(!raw.contains(q["nonce"].as_str().unwrap()));
    assert!(!raw.contains(q["request_digest"].as_str().unwrap()));
    for a in &actions {
        assert_eq!(a["action"], "http");
        assert_eq!(a["method"], "POST");
        assert_eq!(a["clear"], true);
        assert_eq!(a["url"], format!("{}/t-buttons-answers", ntfy.url));
        assert!(a["body"].as_str().unwrap().len() >= 22, "≥128 bits");
    }
    // An unknown token does nothing.
    let bogus = json!({"url": format!("{}/t-buttons-answers", ntfy.url), "body": "not-a-token-at-all-xxxxxxxx"});
    assert_eq!(ntfy.press(&bogus).await, 200);
    let allow = actions
        .iter()
        .find(|a| a["label"].as_str().unwrap().starts_with("Allow"))
        .unwrap()
        .clone();
    let deny = actions
        .iter()
        .find(|a| a["label"] == "Deny")
        .unwrap()
        .clone();
    assert_eq!(ntfy.press(&allow).await, 200);
    let out = finish_hook(hook);
    let decision: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        decision["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{out}"
    );
    let (_, record) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(record["response"]["source"], "ntfy");
    let answered_at = record["answered_at"].clone();
    // Replaying the used token, or pressing the other (now stale) one, changes nothing.
    ntfy.press(&allow).await;
    ntfy.press(&deny).await;
    // Settled: the message is withdrawn from the phone.
    ntfy.wait_for(10, |n| n.shown("t-buttons").is_empty()).await;
    let (_, again) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        again["response"]["choice_id"],
        record["response"]["choice_id"]
    );
    assert_eq!(again["answered_at"], answered_at);
    assert!(home.logs().contains("unknown or used token ignored"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_answered_elsewhere_is_withdrawn_within_a_second() {
    let home = Home::new();
    let ntfy = Ntfy::start().await;
    add_ntfy(&home, "phone", &ntfy.url, "t-withdraw", &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("withdraw me").await;
    ntfy.wait_for(10, |n| n.shown("t-withdraw").len() == 1)
        .await;
    // Without consent: a generic title, no prompt, no buttons (their labels are choices).
    let p = ntfy.publishes().last().unwrap().clone();
    assert_eq!(p["title"], "Codex needs your answer");
    assert!(!p.to_string().contains("withdraw me"));
    assert!(p["actions"].as_array().is_none_or(|a| a.is_empty()));
    let t = Instant::now();
    api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    ntfy.wait_for(5, |n| n.shown("t-withdraw").is_empty()).await;
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(ntfy.deletes().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_a_button_pressed_while_the_broker_was_disconnected_still_counts() {
    let home = Home::new();
    let ntfy = Ntfy::start().await;
    add_ntfy(
        &home,
        "phone",
        &ntfy.url,
        "t-since",
        &["--include-message", "--answer-buttons"],
    );
    let mut d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    ntfy.wait_for(10, |n| n.open_streams("t-since-answers") == 1)
        .await;
    let q = api.ask_permission("press me while away").await;
    ntfy.wait_for(10, |n| n.shown("t-since").len() == 1).await;
    // A message before the button, so the cursor has something to be after.
    ntfy.press(&json!({"url": format!("{}/t-since-answers", ntfy.url), "body": "warm-up"}))
        .await;
    let actions = actions_on(&ntfy, "t-since");
    // The broker goes away (kill -9); the button is pressed while it is gone.
    d.kill9();
    ntfy.wait_for(10, |n| n.open_streams("t-since-answers") == 0)
        .await;
    let deny = actions
        .iter()
        .find(|a| a["label"] == "Deny")
        .unwrap()
        .clone();
    ntfy.press(&deny).await;
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let (_, done) = api
        .get(&format!(
            "/v1/interactions/{}/wait?timeout=20",
            q["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(done["status"], "answered", "{done}");
    assert_eq!(done["response"]["choice_id"], "deny");
    assert_eq!(done["response"]["source"], "ntfy");
    // A stream cut (not a restart) reconnects too.
    ntfy.cut_streams();
    ntfy.wait_for(10, |n| n.open_streams("t-since-answers") == 1)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_test_sends_now_and_the_cli_refuses_bad_input_naming_the_field() {
    let home = Home::new();
    let ntfy = Ntfy::start().await;
    add_ntfy(&home, "phone", &ntfy.url, "t-test", &[]);
    let _d = Daemon::start(&home, &[]);
    let out = ok(&home, &["channels", "test", "phone"]);
    assert!(out.contains("test notification sent"), "{out}");
    ntfy.wait_for(5, |n| n.shown("t-test").len() == 1).await;
    let (code, _, err) = run(&home, &["channels", "test", "nope"]);
    assert_eq!(code, 3, "{err}");
    // The API: a body that is not an object is refused with a reason, never a 500.
    let api = _d.api(&home);
    for path in ["/v1/channels/reload", "/v1/channels/phone/test"] {
        let (code, v) = api.post(path, json!([null, null])).await;
        assert_eq!(code, 400, "{path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("JSON object"), "{v}");
    }
    assert_eq!(api.post("/v1/channels/reload", json!({})).await.0, 200);
    let (code, _, err) = run(
        &home,
        &[
            "channels", "add", "ntfy", "x", "--server", "ftp://h", "--topic", "t",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("server"), "{err}");
    let (code, _, err) = run(
        &home,
        &[
            "channels", "add", "ntfy", "y", "--server", &ntfy.url, "--topic", "a b",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("topic"), "{err}");
    let (code, _, err) = run(
        &home,
        &[
            "channels",
            "add",
            "ntfy",
            "z",
            "--server",
            &ntfy.url,
            "--topic",
            "t2",
            "--answer-buttons",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--include-message"), "{err}");
    let (code, _, err) = run(
        &home,
        &["channels", "add", "desktop", "d", "--delay", "9999"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--delay"), "{err}");
    let (code, _, _) = run(&home, &["channels", "remove", "nope"]);
    assert_eq!(code, 3);
    // list: the settings, never a secret; help: every command.
    add_webhook(&home, "ops", "http://127.0.0.1:9/x", &[]);
    let list = ok(&home, &["channels", "list", "--json"]);
    assert!(!list.contains("whsec_"), "{list}");
    let v: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v["channels"].as_array().unwrap().len(), 2);
    let secrets = home.path().join("channel_secrets.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let help = ok(&home, &["channels", "--help"]);
    for cmd in [
        "add", "list", "status", "test", "enable", "disable", "remove", "route",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from --help: {help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_failing_for_24_hours_is_dead_lettered_and_shown_by_status_and_doctor() {
    use agentnotify::broker::outbox::{Action, OutboxEntry, Subject};
    use agentnotify::model::{InteractionRequest, Timestamp};
    let home = Home::new();
    // A receiver that is down.
    let port = WebhookReceiver::start().await.stop();
    add_webhook(&home, "ops", &format!("http://127.0.0.1:{port}/hook"), &[]);
    // A question whose delivery has been failing since yesterday (written as the broker
    // would have, before it starts).
    let id = {
        let store = agentnotify::store::Store::open(&home.path().join("broker.sled")).unwrap();
        let q = InteractionRequest::from_json(&json!({"kind": "permission", "prompt": "old"}))
            .unwrap()
            .into_interaction(Timestamp::now());
        store.put_interaction(&q).unwrap();
        let yesterday = Timestamp::now().minus(Duration::from_secs(25 * 3600));
        let mut e = OutboxEntry::new(
            Action::Deliver,
            Subject::Interaction,
            &q.id,
            "ops",
            yesterday,
            yesterday,
        );
        e.attempts = 40;
        store.put_outbox(&e.id, &e).unwrap();
        store.flush_now().unwrap();
        q.id
    };
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let st = wait_outbox(&api, 10, |o| {
        o.iter()
            .any(|e| e["subject_id"] == id.as_str() && e["state"] == "dead")
    })
    .await;
    assert_eq!(st["dead_letters"], 1, "{st}");
    let out = ok(&home, &["channels", "status"]);
    assert!(
        out.contains("dead 1") && out.contains("dead letter"),
        "{out}"
    );
    let (_, out, _) = crate::support::run_with_stdin(
        {
            let mut c = home.cmd(HOOK);
            c.arg("doctor");
            c
        },
        b"",
    );
    assert!(out.contains("dead-lettered"), "{out}");
    // Never retried again: the attempt count stays.
    let attempts = st["outbox"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subject_id"] == id.as_str())
        .unwrap()["attempts"]
        .clone();
    let later = status(&api).await;
    let now = later["outbox"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subject_id"] == id.as_str())
        .unwrap()["attempts"]
        .clone();
    assert_eq!(attempts, now);
}

fn notify_hook(home: &Home, host: &str, event: &Value) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let mut c = home.cmd(HOOK);
    c.args([host, "notify"]);
    let (code, out, err) = crate::support::run_with_stdin(c, event.to_string().as_bytes());
    (code, out, err, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_hooks_print_nothing_return_at_once_and_claude_finished_arrives_updated_in_place() {
    let home = Home::new();
    let rx = WebhookReceiver::start().await;
    add_webhook(&home, "ops", &rx.url, &["--include-message"]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let stop = json!({"hook_event_name": "Stop", "session_id": "sess-9", "cwd": "/home/dev/shop",
        "stop_hook_active": false, "last_assistant_message": "All tests pass."});
    let (code, out, err, took) = notify_hook(&home, "claude", &stop);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "", ""),
        "a Stop hook must print nothing"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    let got = rx
        .wait_for(10, |rs| {
            rs.iter().any(|r| event(r).0 == "notification.created")
        })
        .await;
    let (_, data) = event(
        got.iter()
            .find(|r| event(r).0 == "notification.created")
            .unwrap(),
    );
    assert_eq!(data["title"], "Claude finished in shop");
    assert_eq!(data["type"], "completed");
    let nid = data["id"].as_str().unwrap().to_string();
    // The same session again: the one notification is updated, and delivered again as a
    // new event (a new webhook-id).
    let (code, out, _, _) = notify_hook(
        &home,
        "claude",
        &json!({"hook_event_name": "SubagentStop",
        "session_id": "sess-9", "cwd": "/home/dev/shop", "stop_hook_active": false}),
    );
    assert_eq!((code, out.as_str()), (0, ""));
    let got = rx
        .wait_for(10, |rs| {
            of_type(rs, "notification.created", &nid).len() >= 2
        })
        .await;
    let all = of_type(&got, "notification.created", &nid);
    assert_ne!(all[0].header("webhook-id"), all[1].header("webhook-id"));
    assert_eq!(
        event(all[1]).1["title"],
        "Claude's subagent finished in shop"
    );
    let (_, list) = api.get("/v1/notifications?status=active").await;
    assert_eq!(list["notifications"].as_array().unwrap().len(), 1, "{list}");
    // A permission prompt's Notification is skipped (the question itself is out); Codex's Stop works.
    notify_hook(
        &home,
        "claude",
        &json!({"hook_event_name": "Notification", "notification_type": "permission_prompt",
        "message": "Claude needs your permission to use Bash", "session_id": "sess-9", "cwd": "/home/dev/shop"}),
    );
    let (code, out, _, _) = notify_hook(
        &home,
        "codex",
        &json!({"hook_event_name": "Stop", "session_id": "t-1",
        "cwd": "/home/dev/blog", "turn_id": "u", "stop_hook_active": false, "last_assistant_message": null,
        "model": "m", "permission_mode": "default", "transcript_path": null}),
    );
    assert_eq!((code, out.as_str()), (0, ""));
    rx.wait_for(10, |rs| {
        rs.iter()
            .any(|r| event(r).1["title"] == "Codex finished in blog")
    })
    .await;
    assert!(!rx.received().iter().any(|r| event(r).1["title"]
        .as_str()
        .unwrap_or("")
        .contains("permission")));
    // Garbage in: still nothing out, exit 0.
    let mut c = home.cmd(HOOK);
    c.args(["claude", "notify"]);
    let (code, out, _) = crate::support::run_with_stdin(c, b"{not json");
    assert_eq!((code, out.as_str()), (0, ""));
}
