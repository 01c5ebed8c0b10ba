//! Another server on 127.0.0.1 (a dev server an agent started, another user's notebook),
//! opened in the same browser, gets no credential of the web UI and cannot use one: no
//! cookie exists for it to receive, the session lives in this origin's `sessionStorage`, and
//! a session is refused under another `Host`. A cookie it tosses signs nobody out.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::live::{allow_once_from_the_page, browser_or_skip, card, id, signed_in, WAIT};

/// A plain local web server on an ephemeral port that records every request head it gets.
struct OtherServer {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl OtherServer {
    async fn start() -> OtherServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    log.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).into_owned());
                    let body = "<!doctype html><title>another local server</title><p>hello</p>";
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        OtherServer { url, seen, task }
    }

    fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for OtherServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_origin_cannot_obtain_or_use_the_session_nor_sign_it_out() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (d, wd) = signed_in(&browser).await;
    let q = d
        .ask(json!({"kind": "permission", "agent": "claude", "prompt": "git push --force"}))
        .await;
    wd.wait_for(&card(&q), WAIT).await;
    let session = wd
        .script("return sessionStorage.getItem('agentnotify.session')")
        .await;
    let session = session
        .as_str()
        .expect("the page keeps its session")
        .to_string();
    assert!(session.len() >= 40);
    assert_eq!(
        wd.script("return document.cookie").await,
        "",
        "the page has no cookie"
    );

    // The same tab visits another local server, which tries everything a page can.
    let other = OtherServer::start().await;
    wd.goto(&format!("{}/", other.url)).await;
    let attack = format!(
        r#"return (async () => {{
            const out = {{ cookie: document.cookie, storage: sessionStorage.length }};
            // The old cookie had Path=/ui: any server got it with one same-origin fetch.
            await fetch('/ui/x', {{ credentials: 'include' }});
            const ui = 'http://127.0.0.1:{port}/ui/api';
            try {{
                const r = await fetch(ui + '/interactions', {{ credentials: 'include' }});
                out.list = r.status + ' ' + (await r.text());
            }} catch (e) {{ out.list = 'blocked'; }}
            try {{
                await fetch(ui + '/interactions/{id}/respond', {{
                    method: 'POST', mode: 'no-cors', credentials: 'include',
                    headers: {{ 'Content-Type': 'text/plain' }},
                    body: JSON.stringify({{ request_digest: '{digest}', response_id: 'evil',
                                            choice_id: 'allow-once' }}),
                }});
                out.respond = 'sent';
            }} catch (e) {{ out.respond = 'blocked'; }}
            // Cookie tossing: cookies for 127.0.0.1 reach every port, ours too.
            document.cookie = 'an_session=tossed; path=/ui/api; max-age=3600';
            document.cookie = 'an_session=tossed; path=/; max-age=3600';
            document.cookie = 'agentnotify.session=tossed; path=/; max-age=3600';
            await fetch('/ui/y', {{ credentials: 'include' }});
            return out;
        }})()"#,
        port = d.port,
        id = id(&q),
        digest = q["request_digest"].as_str().unwrap(),
    );
    let out: Value = wd.script(&attack).await;
    assert_eq!(
        out["cookie"], "",
        "no credential in the other origin's cookies"
    );
    assert_eq!(out["storage"], 0, "nor in its storage");
    let list = out["list"].as_str().unwrap();
    assert!(
        list == "blocked" || list.starts_with("401"),
        "the page API answered another origin: {list}"
    );
    assert!(!list.contains("git push"), "{list}");
    assert_eq!(d.get(id(&q)).await["status"], "pending", "nothing answered");
    let heads = other.heads();
    assert!(
        heads.len() >= 3,
        "the other server saw the page and both fetches: {heads:#?}"
    );
    for head in &heads {
        assert!(
            !head.contains(&session),
            "the other server received the session: {head}"
        );
    }
    let first_fetch = heads.iter().find(|h| h.starts_with("GET /ui/x")).unwrap();
    assert!(
        !first_fetch.to_ascii_lowercase().contains("an_session"),
        "a cookie of ours reached the other server: {first_fetch}"
    );

    // Even with the token, another name for this machine is another origin and Host: refused.
    wd.goto(&format!("http://localhost:{}/ui/", d.port)).await;
    wd.wait_for("#signin:not([hidden])", WAIT).await;
    let stolen = wd
        .script(&format!(
            "return fetch('/ui/api/interactions', {{ headers: {{ 'X-Agentnotify-Session': '{session}' }} }})\
             .then((r) => r.status)"
        ))
        .await;
    assert_eq!(
        stolen, 401,
        "a session works only on the Host it was issued for"
    );
    let _ = wd.console_errors().await; // the refused calls above were expected

    // Back on the page, with the tossed cookies in the browser: still signed in, and it answers.
    wd.goto(&format!("{}/ui/", d.url)).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    allow_once_from_the_page(&d, &wd, &q).await;
}
