//! The local web UI (SPEC §9) over HTTP: sessions, Host and Origin checks, headers, the nonce
//! never reaching the page, stale answers. The real-browser test is `tests/browser`.

/// Shared with `tests/browser`, which uses helpers this file does not.
#[allow(dead_code)]
mod daemon;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use daemon::{link_secret, TestDaemon, SESSION};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn permission(prompt: &str) -> Value {
    json!({"kind": "permission", "prompt": prompt, "agent": "claude", "project": "shop"})
}

fn respond_path(id: &str) -> String {
    format!("/ui/api/interactions/{id}/respond")
}

#[tokio::test]
async fn every_page_api_call_needs_the_session_header() {
    let d = TestDaemon::start();
    let q = d.ask(permission("git push --force")).await;
    let id = q["id"].as_str().unwrap();
    let bearer = format!("Bearer {}", d.token);
    let session = d.login().await;
    // A cookie is never read, not even one carrying a live session token.
    let as_cookie = format!("an_session={session}");
    let page_headers: Vec<(&str, &str)> = vec![("x-agentnotify-ui", "1"), ("origin", &d.url)];
    let routes = [
        (Method::GET, "/ui/api/interactions".to_string()),
        (Method::GET, "/ui/api/events".to_string()),
        (Method::POST, respond_path(id)),
        (Method::POST, format!("/ui/api/interactions/{id}/cancel")),
        (Method::GET, "/ui/api/no-such-route".to_string()),
    ];
    for (method, path) in &routes {
        let attempts: Vec<Vec<(&str, &str)>> = vec![
            page_headers.clone(),
            [page_headers.clone(), vec![(SESSION, "forged")]].concat(),
            [page_headers.clone(), vec![("authorization", &bearer)]].concat(),
            [page_headers.clone(), vec![(SESSION, "")]].concat(),
            [page_headers.clone(), vec![("cookie", &as_cookie)]].concat(),
        ];
        for headers in attempts {
            let r = d
                .send_body(
                    method.clone(),
                    path,
                    &headers,
                    Some(json!({"request_digest": q["request_digest"], "response_id": "x", "choice_id": "allow-once"})),
                )
                .await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {path}");
            assert_eq!(r.json()["code"], "no_session");
        }
    }
    assert_eq!(d.get(id).await["status"], "pending", "nothing changed");

    // The bearer API is unchanged: the session is no substitute for the token.
    let r = d
        .send(Method::GET, "/v1/interactions", &[(SESSION, &session)])
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = d.v1(Method::GET, "/v1/interactions", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["interactions"][0]["nonce"], q["nonce"]);
    // Minting a link needs the bearer token too.
    let r = d.send(Method::POST, "/v1/ui/link", &[]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_link_works_once_and_gives_the_page_a_session_but_no_cookie() {
    let d = TestDaemon::start();
    let link = d.link();
    assert!(link.starts_with(&format!("{}/ui/#t=", d.url)), "{link}");
    let secret = link_secret(&link);
    assert!(secret.len() >= 40, "{link}");
    // Following the link only loads the page: the fragment never reaches the server.
    let page = d.send(Method::GET, &link, &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.header("set-cookie").is_none());

    // Refused attempts do not spend the link.
    for headers in [
        vec![("origin", d.url.as_str())],
        vec![("x-agentnotify-ui", "1"), ("origin", "http://127.0.0.1:1")],
    ] {
        let r = d
            .send_body(
                Method::POST,
                "/ui/api/session",
                &headers,
                Some(json!({ "link": secret })),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert_eq!(r.json()["code"], "forbidden");
    }
    let first = d.sign_in(&secret).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json());
    assert!(first.header("set-cookie").is_none(), "no cookie, ever");
    let session = first.json()["session"].as_str().unwrap().to_string();
    assert!(session.len() >= 40, "a long random session token");
    assert_ne!(session, secret, "the session is not the link's secret");
    let ttl = first.json()["expires_in"].as_u64().unwrap();
    assert!(
        (60..=8 * 3600).contains(&ttl),
        "sessions last at most 8 h: {ttl}"
    );

    let second = d.sign_in(&secret).await;
    assert_eq!(second.status, StatusCode::FORBIDDEN, "a link works once");
    assert_eq!(second.json()["code"], "link_expired");
    assert!(second.json()["error"]
        .as_str()
        .unwrap()
        .contains("agentnotify ui"));

    // The session works; made-up or missing secrets do not.
    let r = d.page_get(&session, "/ui/api/interactions").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(d.sign_in("AAAA").await.status, StatusCode::FORBIDDEN);
    let r = d
        .send_body(
            Method::POST,
            "/ui/api/session",
            &[("x-agentnotify-ui", "1"), ("origin", &d.url)],
            Some(json!({"link": 5})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["error"].as_str().unwrap().starts_with("link"));
    let r = d.send(Method::GET, "/ui/api/session", &[]).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    // The old cookie-setting route is gone.
    let r = d
        .send(Method::GET, &format!("/ui/login?t={secret}"), &[])
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.header("set-cookie").is_none());

    // The API says how long a link lives: at most two minutes.
    let r = d.v1(Method::POST, "/v1/ui/link", None).await;
    assert_eq!(r.status, StatusCode::OK);
    let secs = r.json()["expires_in"].as_u64().unwrap();
    assert!((1..=120).contains(&secs), "{secs}");
}

/// A session works only under the `Host` it was started on: another name for this machine
/// (another origin to the browser) cannot use it.
#[tokio::test]
async fn a_session_works_only_on_the_host_it_was_issued_for() {
    let d = TestDaemon::start();
    let ip = format!("127.0.0.1:{}", d.port);
    let name = format!("localhost:{}", d.port);
    let session = d.login().await; // on 127.0.0.1
    let list_at = |host: String| {
        let (d, session) = (&d, session.clone());
        async move {
            d.send(
                Method::GET,
                "/ui/api/interactions",
                &[(SESSION, &session), ("host", &host)],
            )
            .await
        }
    };
    assert_eq!(list_at(ip.clone()).await.status, StatusCode::OK);
    for other in [
        name.clone(),
        format!("[::1]:{}", d.port),
        format!("LOCALHOST:{}", d.port),
    ] {
        let r = list_at(other.clone()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "Host {other}");
        assert_eq!(r.json()["code"], "no_session");
    }
    // Started on localhost, it is refused on 127.0.0.1.
    let secret = link_secret(&d.link());
    let origin = format!("http://{name}");
    let r = d
        .send_body(
            Method::POST,
            "/ui/api/session",
            &[
                ("x-agentnotify-ui", "1"),
                ("origin", &origin),
                ("host", &name),
            ],
            Some(json!({ "link": secret })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    let on_name = r.json()["session"].as_str().unwrap().to_string();
    let r = d
        .send(
            Method::GET,
            "/ui/api/interactions",
            &[(SESSION, &on_name), ("host", &ip)],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = d
        .send(
            Method::GET,
            "/ui/api/interactions",
            &[(SESSION, &on_name), ("host", &name)],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
}

/// Cookie tossing: another port of 127.0.0.1 can set cookies the browser then sends here.
/// No cookie is read, so none can sign the person out or in.
#[tokio::test]
async fn a_tossed_cookie_changes_nothing() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let q = d.ask(permission("make clean")).await;
    let tossed = "an_session=tossed; an_session=other; session=x";
    let r = d
        .send(
            Method::GET,
            "/ui/api/interactions",
            &[("cookie", tossed), (SESSION, &session)],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = d
        .send_body(
            Method::POST,
            &respond_path(q["id"].as_str().unwrap()),
            &[
                ("cookie", tossed),
                (SESSION, &session),
                ("x-agentnotify-ui", "1"),
                ("origin", &d.url),
            ],
            Some(json!({"request_digest": q["request_digest"], "response_id": "t1", "choice_id": "deny"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    assert_eq!(
        d.get(q["id"].as_str().unwrap()).await["response"]["choice_id"],
        "deny"
    );
}

#[tokio::test]
async fn host_must_be_loopback_with_our_port() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let other_port = format!("127.0.0.1:{}", d.port.wrapping_add(1));
    for bad in [
        "evil.example",
        "evil.example:80",
        &format!("evil.example:{}", d.port)[..],
        &other_port[..],
        &format!("127.0.0.2:{}", d.port)[..],
        &format!("localhost.evil.example:{}", d.port)[..],
    ] {
        for path in [
            "/ui/",
            "/ui/app.js",
            "/ui/api/session",
            "/ui/api/interactions",
        ] {
            let r = d
                .send(Method::GET, path, &[("host", bad), (SESSION, &session)])
                .await;
            assert_eq!(
                r.status,
                StatusCode::MISDIRECTED_REQUEST,
                "Host {bad} {path}"
            );
            assert_eq!(r.header("content-security-policy"), Some(CSP));
        }
    }
    for good in ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"] {
        let host = format!("{good}:{}", d.port);
        let r = d.send(Method::GET, "/ui/", &[("host", &host)]).await;
        assert_eq!(r.status, StatusCode::OK, "Host {host}");
    }
}

#[tokio::test]
async fn writes_need_the_custom_header_and_a_same_origin_origin() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let cookie = session.as_str();
    let q = d.ask(permission("terraform apply")).await;
    let id = q["id"].as_str().unwrap();
    let body = json!({"request_digest": q["request_digest"], "response_id": "w1", "choice_id": "allow-once"});
    let foreign = [
        "http://evil.example",
        "null",
        "http://127.0.0.1:1",
        "https://127.0.0.1",
    ];
    let mut attempts: Vec<Vec<(&str, &str)>> = vec![
        vec![(SESSION, cookie), ("origin", &d.url)],
        vec![(SESSION, cookie), ("x-agentnotify-ui", "1")],
        vec![
            (SESSION, cookie),
            ("x-agentnotify-ui", "0"),
            ("origin", &d.url),
        ],
        vec![
            (SESSION, cookie),
            ("x-agentnotify-ui", "1"),
            ("origin", &d.url),
            ("sec-fetch-site", "cross-site"),
        ],
    ];
    for o in &foreign {
        attempts.push(vec![
            (SESSION, cookie),
            ("x-agentnotify-ui", "1"),
            ("origin", o),
        ]);
    }
    for headers in &attempts {
        for path in [
            respond_path(id),
            format!("/ui/api/interactions/{id}/cancel"),
        ] {
            let r = d
                .send_body(Method::POST, &path, headers, Some(body.clone()))
                .await;
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{path} with {headers:?}");
            assert_eq!(r.json()["code"], "forbidden");
        }
    }
    assert_eq!(d.get(id).await["status"], "pending", "nothing changed");

    // The page's own request goes through, as source web.
    let r = d.page_post(&session, &respond_path(id), body.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    let record = d.get(id).await;
    assert_eq!(record["status"], "answered");
    assert_eq!(record["response"]["source"], "web");
    assert_eq!(record["response"]["choice_id"], "allow-once");
    // The page cannot pick another source or supply a nonce of its own.
    let q2 = d.ask(permission("npm publish")).await;
    let id2 = q2["id"].as_str().unwrap();
    let r = d
        .page_post(
            &session,
            &respond_path(id2),
            json!({"request_digest": q2["request_digest"], "response_id": "w2",
                   "choice_id": "deny", "source": "relay", "nonce": "forged"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    assert_eq!(d.get(id2).await["response"]["source"], "web");
}

#[tokio::test]
async fn every_ui_response_carries_the_security_headers() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let host = format!("127.0.0.1:{}", d.port);
    type Case<'a> = (Method, &'a str, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (Method::GET, "/ui/", vec![]),
        (Method::GET, "/ui", vec![]),
        (Method::GET, "/ui/app.js", vec![]),
        (Method::GET, "/ui/base.css", vec![]),
        (Method::GET, "/ui/app.css", vec![]),
        (Method::GET, "/ui/icon.svg", vec![]),
        (Method::GET, "/ui/nope", vec![]),
        (Method::POST, "/ui/api/session", vec![]),
        (Method::GET, "/ui/api/interactions", vec![]),
        (
            Method::GET,
            "/ui/api/interactions",
            vec![(SESSION, &session)],
        ),
        (
            Method::POST,
            "/ui/api/interactions/x/respond",
            vec![(SESSION, &session)],
        ),
        (Method::GET, "/ui/", vec![("host", "evil.example")]),
        (Method::DELETE, "/ui/", vec![("host", &host)]),
    ];
    for (method, path, headers) in cases {
        let r = d.send(method.clone(), path, &headers).await;
        let what = format!("{method} {path} {headers:?} -> {}", r.status);
        assert_eq!(r.header("content-security-policy"), Some(CSP), "{what}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{what}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{what}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
        assert!(r.status != StatusCode::INTERNAL_SERVER_ERROR, "{what}");
    }
    let page = d.send(Method::GET, "/ui/", &[]).await;
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let js = d.send(Method::GET, "/ui/app.js", &[]).await;
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
}

#[tokio::test]
async fn the_nonce_never_reaches_the_page() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let asked = [
        d.ask(permission("rm -rf build")).await,
        d.ask(
            json!({"kind": "single_choice", "prompt": "Which database?", "agent": "codex",
                      "choices": [{"id": "pg", "label": "Postgres", "detail": "v16"},
                                  {"id": "lite", "label": "SQLite"}]}),
        )
        .await,
        d.ask(json!({"kind": "text", "prompt": "Commit message?", "text_max_length": 80}))
            .await,
        d.ask(permission("cargo publish")).await,
    ];
    let nonces: Vec<String> = asked
        .iter()
        .map(|q| q["nonce"].as_str().unwrap().to_string())
        .collect();

    // Open the event stream first, so it sees the changes below.
    let mut events = d
        .http
        .get(format!("{}/ui/api/events", d.url))
        .header(SESSION, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        events.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );

    let mut bodies: Vec<(String, Vec<u8>)> = Vec::new();
    for path in ["/ui/", "/ui/app.js", "/ui/app.css", "/ui/icon.svg"] {
        bodies.push((path.into(), d.send(Method::GET, path, &[]).await.body));
    }
    let list = d.page_get(&session, "/ui/api/interactions").await;
    assert_eq!(list.json()["pending"].as_array().unwrap().len(), 4);
    bodies.push(("list".into(), list.body));

    let (p, c, t, last) = (&asked[0], &asked[1], &asked[2], &asked[3]);
    let answer = |q: &Value, extra: Value| {
        let mut b =
            json!({"request_digest": q["request_digest"], "response_id": format!("r-{}", q["id"])});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let pid = p["id"].as_str().unwrap();
    let r = d
        .page_post(
            &session,
            &respond_path(pid),
            answer(p, json!({"choice_id": "deny"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    bodies.push(("respond".into(), r.body));
    let r = d
        .page_post(
            &session,
            &respond_path(pid),
            answer(
                p,
                json!({"choice_id": "allow-once", "response_id": "other"}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    bodies.push(("conflict".into(), r.body));
    let cid = c["id"].as_str().unwrap();
    let r = d
        .page_post(
            &session,
            &respond_path(cid),
            answer(c, json!({"choice_id": "pg"})),
        )
        .await;
    bodies.push(("choice".into(), r.body));
    let tid = t["id"].as_str().unwrap();
    let r = d
        .page_post(
            &session,
            &respond_path(tid),
            answer(t, json!({"text": "x".repeat(81)})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "over the limit");
    bodies.push(("too long".into(), r.body));
    let r = d
        .page_post(
            &session,
            &respond_path(tid),
            answer(t, json!({"text": "Fix the flaky test"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    bodies.push(("text".into(), r.body));
    let lid = last["id"].as_str().unwrap();
    let r = d
        .page_post(
            &session,
            &format!("/ui/api/interactions/{lid}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    bodies.push(("cancel".into(), r.body));
    let list = d.page_get(&session, "/ui/api/interactions").await;
    assert_eq!(list.json()["history"].as_array().unwrap().len(), 4);
    bodies.push(("history".into(), list.body));

    // Read the event stream until it reported the last change.
    let mut stream = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&stream)
        .contains(&format!("\"id\":\"{lid}\",\"status\":\"cancelled\""))
    {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .expect("the stream reports every change in time")
            .unwrap()
            .expect("stream open");
        stream.extend_from_slice(&chunk);
    }
    bodies.push(("events".into(), stream));

    for (what, bytes) in &bodies {
        let text = String::from_utf8_lossy(bytes);
        for n in &nonces {
            assert!(!text.contains(n.as_str()), "the nonce appears in {what}");
        }
        assert!(
            !text.contains("\"nonce\""),
            "a nonce field appears in {what}"
        );
    }
    let history = d.page_get(&session, "/ui/api/interactions").await.json();
    let sources: Vec<&str> = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["response"]["source"].as_str())
        .collect();
    assert_eq!(sources, ["web", "web", "web"]);
}

#[tokio::test]
async fn a_stale_page_gets_a_clear_message_never_a_wrong_answer() {
    let d = TestDaemon::start();
    let session = d.login().await;

    // Answered elsewhere first: 409 that names the other surface.
    let q = d.ask(permission("kubectl delete ns staging")).await;
    let id = q["id"].as_str().unwrap();
    assert_eq!(d.answer_as(&q, "deny", "cli").await.status, StatusCode::OK);
    let r = d
        .page_post(&session, &respond_path(id), json!({"request_digest": q["request_digest"], "response_id": "w1", "choice_id": "allow-once"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json()["code"], "already_answered");
    let msg = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        msg.contains("already answered elsewhere (from cli): “Deny”."),
        "names the surface and what it recorded: {msg}"
    );
    assert_eq!(
        d.get(id).await["response"]["choice_id"],
        "deny",
        "the first answer stands"
    );

    // A digest the question does not have: refused, and the message says to reload.
    let q = d.ask(permission("drop table users")).await;
    let id = q["id"].as_str().unwrap();
    let r = d
        .page_post(&session, &respond_path(id), json!({"request_digest": "0".repeat(64), "response_id": "w2", "choice_id": "allow-once"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["code"], "digest_mismatch");
    assert!(r.json()["error"].as_str().unwrap().contains("changed"));
    assert_eq!(d.get(id).await["status"], "pending");

    // The question changed under the same key (superseded): the old one cannot be answered.
    let old = d
        .ask(json!({"prompt": "deploy v1", "key": "deploy", "agent": "codex"}))
        .await;
    let new = d
        .ask(json!({"prompt": "deploy v2", "key": "deploy", "agent": "codex"}))
        .await;
    let r = d
        .page_post(&session, &respond_path(old["id"].as_str().unwrap()), json!({"request_digest": old["request_digest"], "response_id": "w3", "choice_id": "allow-once"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["code"], "not_pending");
    assert!(r.json()["error"].as_str().unwrap().contains("changed"));
    assert_eq!(
        d.get(new["id"].as_str().unwrap()).await["status"],
        "pending"
    );

    // Withdrawn: withdrawing again, or answering it, says so.
    let q = d.ask(permission("rm -rf /tmp/cache")).await;
    let id = q["id"].as_str().unwrap();
    let cancel = format!("/ui/api/interactions/{id}/cancel");
    assert_eq!(
        d.page_post(&session, &cancel, json!({})).await.status,
        StatusCode::OK
    );
    assert_eq!(d.get(id).await["status"], "cancelled");
    let again = d.page_post(&session, &cancel, json!({})).await;
    assert_eq!(again.json()["code"], "not_pending");
    assert!(again.json()["error"]
        .as_str()
        .unwrap()
        .contains("withdrawn"));

    // A retry of the page's own accepted answer (same response_id) replays; it is not an error.
    let q = d.ask(permission("make release")).await;
    let id = q["id"].as_str().unwrap();
    let body = json!({"request_digest": q["request_digest"], "response_id": "same", "choice_id": "allow-once"});
    assert_eq!(
        d.page_post(&session, &respond_path(id), body.clone())
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        d.page_post(&session, &respond_path(id), body).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn bad_input_is_refused_never_a_500() {
    let d = TestDaemon::start();
    let session = d.login().await;
    let q = d.ask(permission("ls")).await;
    let id = q["id"].as_str().unwrap();
    let raw = |body: &'static str, path: String| {
        let d = &d;
        let session = session.clone();
        async move {
            d.http
                .post(format!("{}{path}", d.url))
                .header(SESSION, session)
                .header("x-agentnotify-ui", "1")
                .header("origin", &d.url)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    for body in [
        "",
        "null",
        "[]",
        "{",
        "\"x\"",
        "{\"response_id\": 5}",
        "{\"choice_id\": \"deny\"}",
    ] {
        let s = raw(body, respond_path(id)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "body {body:?}");
    }
    let s = raw("{}", respond_path(&"f".repeat(32))).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let s = raw("{}", respond_path("../../v1/status")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let s = raw("{}", "/ui/api/interactions/nope/cancel".into()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let r = d
        .page_post(&session, &respond_path(id), json!({"request_digest": q["request_digest"], "response_id": "a", "choice_id": "maybe"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["code"], "invalid_answer");
    assert_eq!(d.get(id).await["status"], "pending");
}

#[tokio::test]
async fn logs_never_carry_secrets_or_content() {
    let mut d = TestDaemon::start();
    let link = d.link();
    let token = link_secret(&link);
    let login = d.sign_in(&token).await;
    let session = login.json()["session"].as_str().unwrap().to_string();
    let q = d.ask(permission("echo secret-prompt-text")).await;
    let id = q["id"].as_str().unwrap();
    let r = d
        .page_post(&session, &respond_path(id), json!({"request_digest": q["request_digest"], "response_id": "resp-xyz", "choice_id": "allow-once"}))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let t = d.ask(json!({"kind": "text", "prompt": "Name?"})).await;
    let r = d
        .page_post(&session, &respond_path(t["id"].as_str().unwrap()), json!({"request_digest": t["request_digest"], "response_id": "r2", "text": "answer-text-here"}))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let _ = d.sign_in(&token).await; // a refused reuse is logged too
    let logs = d.stop_and_read_logs();
    assert!(
        logs.contains("web UI session started"),
        "logs were written: {logs}"
    );
    for secret in [
        token.as_str(),
        session.as_str(),
        q["nonce"].as_str().unwrap(),
        q["request_digest"].as_str().unwrap(),
        "secret-prompt-text",
        "answer-text-here",
        d.token.as_str(),
    ] {
        assert!(!logs.contains(secret), "the logs contain {secret:?}");
    }
}

#[tokio::test]
async fn an_open_page_keeps_an_on_demand_broker_up() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut d = TestDaemon::start_with(&["--on-demand", "--idle-exit-seconds", "1"]);
    let session = d.login().await;
    // A raw connection, so that dropping it really closes the socket, as a closed tab does.
    let mut page = tokio::net::TcpStream::connect(("127.0.0.1", d.port))
        .await
        .unwrap();
    let request = format!(
        "GET /ui/api/events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Agentnotify-Session: {session}\r\n\r\n",
        d.port
    );
    page.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("event: ready") {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), page.read(&mut buf))
            .await
            .expect("the stream starts in time")
            .unwrap();
        assert!(
            n > 0,
            "the stream closed: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    // Idle for three times the idle limit, but a page is watching: still up.
    assert!(
        !d.exits_within(std::time::Duration::from_secs(3)),
        "the broker exited under an open page"
    );
    drop(page);
    assert!(
        d.exits_within(std::time::Duration::from_secs(40)),
        "the broker did not idle out after the page closed"
    );
}

/// `/proc/*/cmdline` is world-readable: the opener gets a private file that forwards to the
/// link, never the link itself.
#[tokio::test]
async fn agentnotify_ui_never_puts_the_link_on_a_command_line() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start();
    let opener = crate::support::FakeOpener::new();
    let record = opener.record.clone();
    let out = d
        .home
        .cmd(support_bin())
        .arg("ui")
        .env("PATH", opener.path_env())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let link = stdout
        .lines()
        .find(|l| l.starts_with("http://"))
        .unwrap_or_else(|| panic!("the link is printed: {stdout}"))
        .to_string();
    let secret = link_secret(&link);
    assert!(secret.len() >= 40, "{link}");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !record.exists() {
        assert!(std::time::Instant::now() < deadline, "the opener never ran");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let argv = std::fs::read_to_string(&record).unwrap();
    assert!(
        !argv.contains(&secret),
        "the secret is in the opener's argv: {argv}"
    );
    let args: Vec<&str> = argv.lines().collect();
    assert_eq!(args.len(), 1, "{argv}");
    let page = std::path::Path::new(args[0]);
    assert!(page.starts_with(d.home.path()), "{argv}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(page), 0o600, "the forwarding page is private");
    assert_eq!(
        mode(page.parent().unwrap()) & 0o022,
        0,
        "in a folder nobody else can write"
    );
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        html.contains(&link),
        "the page forwards to the link: {html}"
    );
    // The opener did not spend the link: it is still good for one sign-in.
    assert_eq!(d.sign_in(&secret).await.status, StatusCode::OK);
}

fn support_bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentnotify")
}
