//! The loopback API against the real daemon: answer rules, keys, auth, limits, junk input.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{assert_rate_limited, Api, Daemon, Home};

#[tokio::test]
async fn answer_rules_apply_in_order_with_their_codes() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("Deploy to prod?").await;
    let id = q["id"].as_str().unwrap();

    // 0: not an object, wrong types, bad lengths → invalid_request.
    for bad in [
        json!(null),
        json!([1]),
        json!({"response_id": 5}),
        json!({"response_id": ""}),
        json!({"response_id": "x".repeat(129)}),
        json!({"response_id": "r", "source": "has space"}),
        json!({"response_id": "r", "choice_id": 7}),
    ] {
        let (s, v) = api.respond(&q, bad.clone()).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad}"
        );
    }
    // 1: unknown id → 404.
    let (s, v) = api
        .post(
            "/v1/interactions/0123456789abcdef0123456789abcdef/respond",
            Api::answer(&q, "r", "deny"),
        )
        .await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")));
    // 3: digest differs.
    let mut body = Api::answer(&q, "r1", "deny");
    body["request_digest"] = json!("0".repeat(64));
    let (s, v) = api.respond(&q, body).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("digest_mismatch")));
    // 4: nonce missing or different.
    let mut body = Api::answer(&q, "r1", "deny");
    body.as_object_mut().unwrap().remove("nonce");
    assert_eq!(api.respond(&q, body).await.1["code"], "nonce_mismatch");
    let mut body = Api::answer(&q, "r1", "deny");
    body["nonce"] = json!("A".repeat(32));
    assert_eq!(api.respond(&q, body).await.1["code"], "nonce_mismatch");
    // 5: wrong shape for the kind.
    for (choice, text) in [
        (Some("maybe"), None),
        (None, Some("hi")),
        (Some("deny"), Some("hi")),
        (None, None),
    ] {
        let mut body = Api::answer(&q, "r1", "deny");
        body.as_object_mut().unwrap().remove("choice_id");
        if let Some(c) = choice {
            body["choice_id"] = json!(c);
        }
        if let Some(t) = text {
            body["text"] = json!(t);
        }
        let (s, v) = api.respond(&q, body).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_answer")),
            "{choice:?} {text:?}"
        );
    }
    // Still pending after all refusals.
    assert_eq!(
        api.get(&format!("/v1/interactions/{id}")).await.1["status"],
        "pending"
    );

    // 6: accept.
    let (s, accepted) = api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    assert_eq!(s, 200);
    assert_eq!(accepted["status"], "answered");
    assert_eq!(accepted["response"]["choice_id"], "deny");
    assert_eq!(accepted["response"]["response_id"], "r1");
    assert_eq!(accepted["response"]["source"], "cli");

    // Replay with the same response_id → 200 with the same record.
    let (s, replay) = api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    assert_eq!(s, 200);
    assert_eq!(replay, accepted);
    // A different answer, even a wrong-shaped one, is already_answered (rule 1 before 5).
    let (s, v) = api.respond(&q, Api::answer(&q, "r2", "allow-once")).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("already_answered")));
    let (s, v) = api.respond(&q, Api::answer(&q, "r3", "nonsense")).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("already_answered")));

    // 2: not pending (cancelled) → not_pending, and the message names the state.
    let c = api.ask_permission("Cancel me").await;
    let (s, _) = api
        .post(
            &format!("/v1/interactions/{}/cancel", c["id"].as_str().unwrap()),
            json!(null),
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = api.respond(&c, Api::answer(&c, "r", "deny")).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("not_pending")));
    assert!(v["error"].as_str().unwrap().contains("cancelled"), "{v}");
    // Cancel is idempotent on terminal ones; unknown → 404.
    let (s, v) = api
        .post(
            &format!("/v1/interactions/{}/cancel", c["id"].as_str().unwrap()),
            json!(null),
        )
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("cancelled")));
    let (s, _) = api
        .post(
            "/v1/interactions/ffffffffffffffffffffffffffffffff/cancel",
            json!(null),
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn text_and_single_choice_answers_are_checked_against_the_question() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let t = api
        .ask(json!({"kind": "text", "prompt": "Branch name?", "text_max_length": 5}))
        .await;
    assert_eq!(t["text_max_length"], 5);
    let mut body = Api::answer(&t, "t1", "x");
    body.as_object_mut().unwrap().remove("choice_id");
    body["text"] = json!("toolong");
    let (s, v) = api.respond(&t, body.clone()).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_answer")));
    assert!(v["error"].as_str().unwrap().contains("1-5"), "{v}");
    body["text"] = json!("main");
    let (s, v) = api.respond(&t, body).await;
    assert_eq!((s, v["response"]["text"].as_str()), (200, Some("main")));

    let c = api
        .ask(json!({"kind": "single_choice", "prompt": "DB?", "choices": [
            {"id": "pg", "label": "PostgreSQL", "detail": "v16"}, {"id": "sqlite", "label": "SQLite"}]}))
        .await;
    assert_eq!(c["choices"][0]["detail"], "v16");
    let (s, v) = api.respond(&c, Api::answer(&c, "c1", "sqlite")).await;
    assert_eq!(
        (s, v["response"]["choice_id"].as_str()),
        (200, Some("sqlite"))
    );
}

#[tokio::test]
async fn validation_messages_name_the_field_and_the_bound() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let cases = [
        (json!({"prompt": ""}), "prompt must be 1-2000 characters"),
        (
            json!({"prompt": "x".repeat(2001)}),
            "prompt must be 1-2000 characters",
        ),
        (
            json!({"prompt": "p", "kind": "single_choice", "choices": [{"id": "a", "label": "A"}]}),
            "choices must contain 2 to 12 entries for this kind",
        ),
        (
            json!({"prompt": "p", "choices": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]}),
            "choice ids must be unique",
        ),
        (
            json!({"prompt": "p", "choices": [{"id": "a b", "label": "A"}, {"id": "c", "label": "B"}]}),
            "choice id must match",
        ),
        (
            json!({"prompt": "p", "kind": "bogus"}),
            "kind must be one of",
        ),
        (json!({"prompt": "p", "agent": 1}), "agent must be a string"),
        (
            json!({"prompt": "p", "key": "k".repeat(101)}),
            "key must be at most 100 characters",
        ),
        (
            json!({"prompt": "p", "kind": "text", "text_max_length": 0}),
            "text_max_length must be between 1 and 2000",
        ),
    ];
    for (body, message) in cases {
        let (s, v) = api.post("/v1/interactions/request", body.clone()).await;
        assert_eq!(s, 400, "{body}");
        assert_eq!(v["code"], "invalid_request");
        assert!(
            v["error"].as_str().unwrap().contains(message),
            "{body} → {v}"
        );
    }
    // TTL is clamped, and blank agent becomes unknown.
    let q = api
        .ask(json!({"prompt": "p", "ttl_seconds": 5, "agent": "  "}))
        .await;
    assert_eq!(q["agent"], "unknown");
    let created = q["created_at"].as_str().unwrap();
    let expires = q["expires_at"].as_str().unwrap();
    let secs = |s: &str| humantime::parse_rfc3339_weak(s).unwrap();
    assert_eq!(
        secs(expires).duration_since(secs(created)).unwrap(),
        Duration::from_secs(30)
    );
    let q = api.ask(json!({"prompt": "p2", "ttl_seconds": 1e300})).await;
    let d = secs(q["expires_at"].as_str().unwrap())
        .duration_since(secs(q["created_at"].as_str().unwrap()))
        .unwrap();
    assert_eq!(d, Duration::from_secs(3600));
}

#[tokio::test]
async fn keyed_requests_reuse_or_supersede() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let body = json!({"prompt": "Run tests?", "key": "k1", "agent": "codex"});
    let (s, first) = api.post("/v1/interactions/request", body.clone()).await;
    assert_eq!(s, 201);
    let (s, again) = api.post("/v1/interactions/request", body.clone()).await;
    assert_eq!(s, 200);
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["nonce"], first["nonce"]);
    assert_eq!(again["expires_at"], first["expires_at"]);

    // A waiter on the old question wakes when it is superseded.
    let waiter = {
        let api = api.clone();
        let id = first["id"].as_str().unwrap().to_string();
        tokio::spawn(async move {
            api.get(&format!("/v1/interactions/{id}/wait?timeout=120"))
                .await
        })
    };
    let (s, newer) = api
        .post(
            "/v1/interactions/request",
            json!({"prompt": "Run ALL tests?", "key": "k1", "agent": "codex"}),
        )
        .await;
    assert_eq!(s, 201);
    assert_ne!(newer["id"], first["id"]);
    let (s, woke) = waiter.await.unwrap();
    assert_eq!((s, woke["status"].as_str()), (200, Some("superseded")));
    // The old one cannot be answered; the new one can.
    let (s, v) = api
        .respond(&first, Api::answer(&first, "r", "allow-once"))
        .await;
    assert_eq!((s, v["code"].as_str()), (400, Some("not_pending")));
    let (s, _) = api
        .respond(&newer, Api::answer(&newer, "r", "allow-once"))
        .await;
    assert_eq!(s, 200);
    // Once the keyed one is answered, the same key creates a new question.
    let (s, third) = api
        .post(
            "/v1/interactions/request",
            json!({"prompt": "Run ALL tests?", "key": "k1", "agent": "codex"}),
        )
        .await;
    assert_eq!(s, 201);
    assert_ne!(third["id"], newer["id"]);
}

#[tokio::test]
async fn waiters_wake_on_answer_and_cancel_and_time_out_pending() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    for action in ["respond", "cancel"] {
        let q = api.ask_permission(&format!("wake on {action}")).await;
        let id = q["id"].as_str().unwrap().to_string();
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let api = api.clone();
                let id = id.clone();
                tokio::spawn(async move {
                    api.get(&format!("/v1/interactions/{id}/wait?timeout=300"))
                        .await
                })
            })
            .collect();
        // Let the waits register: the broker counts them in flight on the question.
        let started = std::time::Instant::now();
        if action == "respond" {
            api.respond(&q, Api::answer(&q, "r", "allow-once")).await;
        } else {
            api.post(&format!("/v1/interactions/{id}/cancel"), json!(null))
                .await;
        }
        for w in waiters {
            let (s, v) = w.await.unwrap();
            assert_eq!(s, 200);
            let want = if action == "respond" {
                "answered"
            } else {
                "cancelled"
            };
            assert_eq!(v["status"], want);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "waiters were not woken"
        );
    }
    // Timeout: returns the pending state.
    let q = api.ask_permission("nobody answers").await;
    let (s, v) = api
        .get(&format!(
            "/v1/interactions/{}/wait?timeout=1",
            q["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("pending")));
    for bad in ["0", "301", "abc", "-1"] {
        let (s, v) = api
            .get(&format!(
                "/v1/interactions/{}/wait?timeout={bad}",
                q["id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn fifty_concurrent_answers_accept_exactly_one_every_time() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    for round in 0..100 {
        let q = api.ask_permission(&format!("race {round}")).await;
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let api = api.clone();
                let q = q.clone();
                let choice = if i % 2 == 0 { "allow-once" } else { "deny" };
                tokio::spawn(async move {
                    api.respond(&q, Api::answer(&q, &format!("r{round}-{i}"), choice))
                        .await
                })
            })
            .collect();
        let mut ok = Vec::new();
        let mut conflicts = 0;
        for t in tasks {
            let (s, v) = t.await.unwrap();
            match s {
                200 => ok.push(v),
                409 => conflicts += 1,
                other => panic!("unexpected {other}: {v}"),
            }
        }
        assert_eq!((ok.len(), conflicts), (1, 49), "round {round}");
        let stored = api
            .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
            .await
            .1;
        assert_eq!(stored["response"], ok[0]["response"], "round {round}");
    }
}

#[tokio::test]
async fn lists_filter_and_sort_newest_first() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let mut ids = Vec::new();
    for (i, (agent, project)) in [("codex", "shop"), ("claude", "shop"), ("claude", "blog")]
        .iter()
        .enumerate()
    {
        let q = api
            .ask(json!({"prompt": format!("q{i}"), "agent": agent, "project": project, "session_id": format!("s{i}")}))
            .await;
        ids.push(q["id"].as_str().unwrap().to_string());
    }
    let first = api.ask_permission("answered one").await;
    api.respond(&first, Api::answer(&first, "r", "deny")).await;
    let list = |q: &'static str| {
        let api = api.clone();
        async move {
            let (s, v) = api.get(&format!("/v1/interactions{q}")).await;
            assert_eq!(s, 200, "{q}: {v}");
            v["interactions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["prompt"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list("?pending=true").await, ["q2", "q1", "q0"]);
    assert_eq!(list("").await, ["answered one", "q2", "q1", "q0"]);
    assert_eq!(list("?status=answered").await, ["answered one"]);
    assert_eq!(list("?agent=claude").await, ["q2", "q1"]);
    assert_eq!(list("?project=shop&pending=true").await, ["q1", "q0"]);
    assert_eq!(list("?session=s0").await, ["q0"]);
    assert_eq!(list("?limit=2").await, ["answered one", "q2"]);
    for bad in [
        "?limit=0",
        "?limit=501",
        "?status=weird",
        "?pending=maybe",
        "?pending=true&status=answered",
    ] {
        let (s, v) = api.get(&format!("/v1/interactions{bad}")).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn every_v1_route_needs_the_bearer_token() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let http = agentnotify::tls::plain_http_client().build().unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    let routes = [
        ("POST", "/v1/interactions/request".to_string()),
        ("GET", "/v1/interactions".to_string()),
        ("GET", format!("/v1/interactions/{id}")),
        ("GET", format!("/v1/interactions/{id}/wait?timeout=1")),
        ("POST", format!("/v1/interactions/{id}/respond")),
        ("POST", format!("/v1/interactions/{id}/cancel")),
        ("POST", format!("/v1/interactions/{id}/publish")),
        ("POST", "/v1/notifications".to_string()),
        ("GET", "/v1/notifications".to_string()),
        ("GET", format!("/v1/notifications/{id}")),
        ("POST", format!("/v1/notifications/{id}/resolve")),
        ("POST", format!("/v1/notifications/{id}/dismiss")),
        ("GET", "/v1/status".to_string()),
        ("POST", "/v1/admin/shutdown".to_string()),
        ("GET", "/v1/nonexistent".to_string()),
    ];
    for (method, path) in &routes {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Basic abc"),
            Some("Bearer "),
        ] {
            let mut req = http.request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{path}", d.url),
            );
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let res = req.body("{}").send().await.unwrap();
            assert_eq!(res.status().as_u16(), 401, "{method} {path} {auth:?}");
            let v: Value = res.json().await.unwrap();
            assert_eq!(v["code"], "unauthorized");
        }
    }
    // The broker is still running (admin/shutdown without auth did nothing).
    let health: Value = http
        .get(format!("{}/health", d.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["api"], "v1");
}

#[tokio::test]
async fn oversized_bodies_get_413_and_post_floods_get_429_with_retry_after() {
    let home = Home::new();
    let d = Daemon::start_with(
        &home,
        &[
            "daemon",
            "--port",
            "0",
            "--rate-limit",
            "1",
            "--rate-burst",
            "3",
        ],
    );
    let api = d.api(&home);
    // On a connection of its own: the server closes it after refusing the unread body, and
    // a pooled client could otherwise reuse it for the flood below as it closes.
    let once = agentnotify::tls::plain_http_client()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let res = once
        .post(format!("{}/v1/interactions/request", api.url))
        .bearer_auth(&api.token)
        .json(&json!({"prompt": "x".repeat(129 * 1024)}))
        .send()
        .await
        .unwrap();
    let s = res.status().as_u16();
    let v: Value = res.json().await.unwrap();
    assert_eq!((s, v["code"].as_str()), (413, Some("payload_too_large")));
    let mut limited = None;
    for i in 0..10 {
        let res = api
            .http
            .post(format!("{}/v1/notifications", api.url))
            .bearer_auth(&api.token)
            .json(&json!({"title": "t", "message": format!("m{i}")}))
            .send()
            .await
            .unwrap();
        if res.status() == 429 {
            limited = Some(res);
            break;
        }
    }
    assert_rate_limited(limited.expect("the rate limit never applied")).await;
    // GETs are not limited.
    for _ in 0..10 {
        assert_eq!(api.get("/v1/interactions").await.0, 200);
    }
}

/// Sends raw bytes over TCP and returns the status code of the reply.
async fn raw_status(url: &str, request: &[u8]) -> u16 {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn junk_input_never_gets_a_500() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("junk target").await;
    let id = q["id"].as_str().unwrap();
    let token = home.token();
    let post = |path: &str, body: &[u8]| {
        let mut r = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    let bodies: Vec<&[u8]> = vec![
        b"",
        b"null",
        b"{",
        b"\xff\xfe\x00",
        b"{\"prompt\": \"\xff\"}",
        b"[]",
        b"42",
        b"{\"prompt\": 1e999}",
        b"{\"ttl_seconds\": 99999999999999999999999, \"prompt\": \"p\"}",
        b"{\"prompt\": \"p\", \"choices\": {}}",
        b"{\"prompt\": \"p\", \"choices\": [null, 1]}",
        b"{\"response_id\": \"r\", \"nonce\": []}",
        b"{\"title\": null}",
    ];
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let paths = [
        "/v1/interactions/request".to_string(),
        format!("/v1/interactions/{id}/respond"),
        "/v1/notifications".to_string(),
    ];
    for path in &paths {
        for body in bodies.iter().copied().chain([nested.as_bytes()]) {
            let status = raw_status(&api.url, &post(path, body)).await;
            assert!(
                (200..500).contains(&status),
                "{path} {:?} → {status}",
                String::from_utf8_lossy(&body[..body.len().min(40)])
            );
        }
    }
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").into_bytes()
    };
    for path in [
        "/v1/interactions/..%2F..%2Fetc",
        "/v1/interactions/%00",
        "/v1/interactions/zzzz/wait",
        "/v1/interactions?limit=99999999999999999999999",
        "/v1//interactions",
        "/v1/interactions/a/b/c/d",
        "/v1/notifications/%ff",
        "/",
        "/v2/x",
        "/v1/interactions/request",
    ] {
        let status = raw_status(&api.url, &get(path)).await;
        assert!((400..500).contains(&status), "{path} → {status}");
    }
    // The question is untouched by all that.
    assert_eq!(
        api.get(&format!("/v1/interactions/{id}")).await.1["status"],
        "pending"
    );
}

#[tokio::test]
async fn notifications_dedupe_by_key_and_resolve_with_their_question() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let (s, n1) = api
        .post(
            "/v1/notifications",
            json!({"title": "Build", "message": "started", "key": "build-1", "type": "info"}),
        )
        .await;
    assert_eq!(s, 201);
    let (s, n2) = api.post("/v1/notifications", json!({"title": "Build", "message": "finished", "key": "build-1", "type": "completed", "priority": "low"})).await;
    assert_eq!(s, 200);
    assert_eq!(n2["id"], n1["id"]);
    assert_eq!(n2["message"], "finished");
    let (_, list) = api.get("/v1/notifications?status=active").await;
    assert_eq!(list["notifications"].as_array().unwrap().len(), 1);
    let (s, r) = api
        .post(
            &format!("/v1/notifications/{}/resolve", n1["id"].as_str().unwrap()),
            json!(null),
        )
        .await;
    assert_eq!((s, r["status"].as_str()), (200, Some("resolved")));
    // After resolve, the same key starts a new notification.
    let (s, n3) = api
        .post(
            "/v1/notifications",
            json!({"title": "Build", "message": "again", "key": "build-1"}),
        )
        .await;
    assert_eq!(s, 201);
    assert_ne!(n3["id"], n1["id"]);
    let (s, dm) = api
        .post(
            &format!("/v1/notifications/{}/dismiss", n3["id"].as_str().unwrap()),
            json!(null),
        )
        .await;
    assert_eq!((s, dm["status"].as_str()), (200, Some("dismissed")));

    // Linked to a question: resolved when the question is answered.
    let q = api.ask_permission("linked").await;
    let (_, n) = api
        .post("/v1/notifications", json!({"title": "Permission", "message": "linked", "type": "permission_required", "interaction_id": q["id"]}))
        .await;
    assert_eq!(n["status"], "active");
    api.respond(&q, Api::answer(&q, "r", "deny")).await;
    let (_, n) = api
        .get(&format!("/v1/notifications/{}", n["id"].as_str().unwrap()))
        .await;
    assert_eq!(n["status"], "resolved");

    for (body, msg) in [
        (json!({"message": "m"}), "title must be 1-200 characters"),
        (
            json!({"title": "t", "message": "m", "priority": "urgent"}),
            "priority must be one of",
        ),
        (
            json!({"title": "t", "message": "m", "metadata": {"x": "y".repeat(9000)}}),
            "metadata must be at most 8 KiB",
        ),
        (
            json!({"title": "t", "message": "m", "metadata": [1]}),
            "metadata must be an object",
        ),
    ] {
        let (s, v) = api.post("/v1/notifications", body).await;
        assert_eq!(s, 400);
        assert!(v["error"].as_str().unwrap().contains(msg), "{v}");
    }
    let (s, _) = api
        .get("/v1/notifications/0123456789abcdef0123456789abcdef")
        .await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn publish_without_a_relay_is_relay_unavailable() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("publish me").await;
    let (s, v) = api
        .post(
            &format!("/v1/interactions/{}/publish", q["id"].as_str().unwrap()),
            json!(null),
        )
        .await;
    assert_eq!((s, v["code"].as_str()), (400, Some("relay_unavailable")));
    let (s, _) = api
        .post(
            "/v1/interactions/0123456789abcdef0123456789abcdef/publish",
            json!(null),
        )
        .await;
    assert_eq!(s, 404);
}
