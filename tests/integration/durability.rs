//! Restart and crash survival, retention, and secret-free logs, with the real daemon.

use serde_json::{json, Value};

use crate::support::{Api, Daemon, Home};

#[tokio::test]
async fn kill_9_loses_nothing_acknowledged_and_the_store_reopens() {
    let home = Home::new();
    let mut acknowledged: Vec<Value> = Vec::new();
    for cycle in 0..5 {
        let mut d = Daemon::start(&home, &[]);
        let api = d.api(&home);
        // Everything acknowledged in earlier cycles is still there, unchanged.
        for record in &acknowledged {
            let (s, now) = api
                .get(&format!(
                    "/v1/interactions/{}",
                    record["id"].as_str().unwrap()
                ))
                .await;
            assert_eq!(s, 200, "cycle {cycle}");
            assert_eq!(&now, record, "cycle {cycle}: record changed across a crash");
        }
        // New work: questions, half of them answered, acknowledged with 200/201.
        let mut tasks = Vec::new();
        for i in 0..40 {
            let api = api.clone();
            tasks.push(tokio::spawn(async move {
                let q = api.ask_permission(&format!("cycle {cycle} q{i}")).await;
                if i % 2 == 0 {
                    let (s, a) = api
                        .respond(&q, Api::answer(&q, &format!("r{i}"), "allow-once"))
                        .await;
                    assert_eq!(s, 200);
                    a
                } else {
                    q
                }
            }));
        }
        for t in tasks {
            acknowledged.push(t.await.unwrap());
        }
        d.kill9();
    }
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let (_, all) = api.get("/v1/interactions?limit=500").await;
    assert_eq!(
        all["interactions"].as_array().unwrap().len(),
        acknowledged.len()
    );
    for record in &acknowledged {
        let (_, now) = api
            .get(&format!(
                "/v1/interactions/{}",
                record["id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(&now, record);
    }
    // Answered ones cannot be answered again after the restarts.
    let answered = acknowledged
        .iter()
        .find(|r| r["status"] == "answered")
        .unwrap();
    let (s, _) = api
        .respond(answered, Api::answer(answered, "late", "deny"))
        .await;
    assert_eq!(s, 409);
}

#[tokio::test]
async fn retention_prunes_old_terminal_records_at_start_up() {
    let home = Home::new();
    home.write_config("history_retention_days = 0\n");
    let mut d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let answered = api.ask_permission("old and answered").await;
    api.respond(&answered, Api::answer(&answered, "r", "deny"))
        .await;
    let pending = api.ask_permission("still pending").await;
    let (_, n) = api
        .post("/v1/notifications", json!({"title": "t", "message": "m"}))
        .await;
    api.post(
        &format!("/v1/notifications/{}/resolve", n["id"].as_str().unwrap()),
        json!(null),
    )
    .await;
    let (_, active) = api
        .post("/v1/notifications", json!({"title": "t2", "message": "m2"}))
        .await;
    d.kill9();

    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let (s, _) = api
        .get(&format!(
            "/v1/interactions/{}",
            answered["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(s, 404, "terminal interaction past retention was not pruned");
    let (s, p) = api
        .get(&format!(
            "/v1/interactions/{}",
            pending["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!((s, p["status"].as_str()), (200, Some("pending")));
    let (_, list) = api.get("/v1/notifications").await;
    let ids: Vec<&str> = list["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [active["id"].as_str().unwrap()]);
    assert!(home
        .logs()
        .contains("retention pruned interactions=1 notifications=1"));
}

#[tokio::test]
async fn a_second_daemon_leaves_the_first_alone() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let out = home
        .cmd(crate::support::AGENTNOTIFY)
        .args(["daemon", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("already running") && text.contains(&d.url),
        "{text}"
    );
    assert_eq!(home.api().get("/v1/status").await.1["pid"], d.pid);
}

#[tokio::test]
async fn logs_never_contain_prompts_choices_answers_digests_nonces_or_tokens() {
    let home = Home::new();
    // Channels too: their topics, tokens, secrets and the titles they show stay out of logs.
    let ntfy = crate::receivers::Ntfy::start().await;
    let hook_rx = crate::receivers::WebhookReceiver::start().await;
    let token_file = home.path().join("ntfy-token");
    std::fs::write(&token_file, "tk_SECRET-ntfy-newt").unwrap();
    crate::channels::add_ntfy(
        &home,
        "phone",
        &ntfy.url,
        "TOPIC-gecko",
        &[
            "--include-message",
            "--answer-buttons",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    let webhook_secret = crate::channels::add_webhook(&home, "ops", &hook_rx.url, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let prompt = "SECRET-PROMPT-rm-rf-zebra";
    let q = api
        .ask(
            json!({"kind": "single_choice", "prompt": prompt, "choices": [
            {"id": "choice-giraffe", "label": "LABEL-okapi", "detail": "DETAIL-narwhal"},
            {"id": "choice-b", "label": "LABEL-b"}]}),
        )
        .await;
    api.respond(&q, Api::answer(&q, "resp-quokka", "choice-giraffe"))
        .await;
    let t = api
        .ask(json!({"kind": "text", "prompt": "SECRET-text-prompt", "body": "BODY-quetzal"}))
        .await;
    let m = api
        .ask(json!({"kind": "multi_choice", "prompt": "SECRET-multi", "allow_other": true,
                    "choices": [{"id": "pick-tapir", "label": "A"}, {"id": "pick-b", "label": "B"}]}))
        .await;
    let mut picked = Api::answer(&m, "resp-m", "x");
    picked.as_object_mut().unwrap().remove("choice_id");
    picked["choice_ids"] = json!(["pick-tapir"]);
    picked["text"] = json!("OTHER-TEXT-kakapo");
    api.respond(&m, picked).await;
    let mut body = Api::answer(&t, "resp-t", "x");
    body.as_object_mut().unwrap().remove("choice_id");
    body["text"] = json!("ANSWER-TEXT-axolotl");
    api.respond(&t, body).await;
    // Refusals log too; they must not echo what was sent.
    let mut bad = Api::answer(&q, "resp-bad", "choice-b");
    bad["nonce"] = json!("WRONG-NONCE-pangolin");
    api.respond(&q, bad).await;
    api.post(
        "/v1/notifications",
        json!({"title": "TITLE-ibis", "message": "MESSAGE-tapir"}),
    )
    .await;
    // The hook path logs as well.
    let (code, _, _) = crate::support::run_with_stdin(
        {
            let mut c = home.cmd(crate::support::HOOK);
            c.args(["claude", "ask-permission", "--timeout", "1"]);
            c
        },
        crate::support::fixture("claude-bash.json").as_bytes(),
    );
    assert_eq!(code, 0);
    ntfy.wait_for(10, |n| !n.deletes().is_empty()).await;
    hook_rx
        .wait_for(10, |rs| {
            rs.iter()
                .any(|r| r.json()["type"] == "notification.created")
        })
        .await;
    let button_tokens: Vec<String> = ntfy
        .publishes()
        .iter()
        .flat_map(|p| p["actions"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["body"].as_str().map(String::from))
        .collect();
    assert!(
        !button_tokens.is_empty(),
        "no answer buttons were published"
    );
    drop(d);
    let logs = home.logs();
    assert!(
        logs.contains("delivered"),
        "deliveries were not logged at all"
    );
    for secret in button_tokens.iter().map(String::as_str).chain([
        "TOPIC-gecko",
        "tk_SECRET-ntfy-newt",
        webhook_secret.as_str(),
        webhook_secret.trim_start_matches("whsec_"),
        "needs your answer",
        "SECRET-PROMPT",
    ]) {
        assert!(!logs.contains(secret), "log leaks {secret:?}");
    }
    assert!(
        logs.contains("interaction answered"),
        "the scenario was not logged at all"
    );
    for secret in [
        prompt,
        "LABEL-okapi",
        "DETAIL-narwhal",
        "choice-giraffe",
        "resp-quokka",
        "ANSWER-TEXT-axolotl",
        "SECRET-text-prompt",
        "WRONG-NONCE-pangolin",
        "TITLE-ibis",
        "MESSAGE-tapir",
        q["request_digest"].as_str().unwrap(),
        q["nonce"].as_str().unwrap(),
        t["nonce"].as_str().unwrap(),
        &home.token(),
        "npm ci",
        "node_modules",
        "BODY-quetzal",
        "SECRET-multi",
        "pick-tapir",
        "OTHER-TEXT-kakapo",
    ] {
        assert!(!logs.contains(secret), "log leaks {secret:?}");
    }
}
