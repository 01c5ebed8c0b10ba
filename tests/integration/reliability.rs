//! Faults, races and hostile input against the real daemon (issue: reliability suite).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::support::{Api, Daemon, Home, BODY_FIELDS};

/// Cycles of the crash loop; `AGENTNOTIFY_CRASH_CYCLES` scales it (the full run is 50+).
fn crash_cycles() -> usize {
    std::env::var("AGENTNOTIFY_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
}

// Holds the heavy-test turn for its whole run (see support::heavy).
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loop_never_loses_or_doubles_an_acknowledged_answer() {
    let _heavy = crate::support::heavy();
    let home = Home::new();
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // id → the record as acknowledged (answered ones with their response).
    let mut acknowledged: HashMap<String, Value> = HashMap::new();
    let cycles = crash_cycles();
    let mut verified = 0usize;
    for cycle in 0..cycles {
        let mut d = Daemon::start(&home, &[]);
        let api = d.api(&home);
        // The store opened; everything acknowledged before is there and unchanged.
        for (id, record) in &acknowledged {
            let (s, now) = api.get(&format!("/v1/interactions/{id}")).await;
            assert_eq!(
                s, 200,
                "seed {seed} cycle {cycle}: acknowledged record lost"
            );
            if record["status"] == "answered" {
                assert_eq!(
                    now["response"], record["response"],
                    "seed {seed} cycle {cycle}: answer changed"
                );
                assert_eq!(now["status"], "answered");
            }
            verified += 1;
        }
        // Load: writers create and answer until the kill lands at a random moment.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let api = api.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        let body =
                            json!({"prompt": format!("crash {cycle} {w} {i}"), "agent": "load"});
                        let Ok(res) = api
                            .http
                            .post(format!("{}/v1/interactions/request", api.url))
                            .bearer_auth(&api.token)
                            .json(&body)
                            .send()
                            .await
                        else {
                            return;
                        };
                        if res.status() != 201 {
                            return;
                        }
                        let Ok(q) = res.json::<Value>().await else {
                            return;
                        };
                        let _ = tx.send(q.clone());
                        let answer = Api::answer(
                            &q,
                            &format!("r{w}-{i}"),
                            if i % 2 == 0 { "allow-once" } else { "deny" },
                        );
                        let Ok(res) = api
                            .http
                            .post(format!(
                                "{}/v1/interactions/{}/respond",
                                api.url,
                                q["id"].as_str().unwrap()
                            ))
                            .bearer_auth(&api.token)
                            .json(&answer)
                            .send()
                            .await
                        else {
                            return;
                        };
                        if res.status() != 200 {
                            return;
                        }
                        let Ok(a) = res.json::<Value>().await else {
                            return;
                        };
                        let _ = tx.send(a);
                    }
                })
            })
            .collect();
        drop(tx);
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..120))).await;
        d.kill9();
        for w in writers {
            let _ = w.await;
        }
        while let Ok(record) = rx.try_recv() {
            let id = record["id"].as_str().unwrap().to_string();
            // An answered acknowledgement supersedes the pending one for the same id.
            if record["status"] == "answered" || !acknowledged.contains_key(&id) {
                acknowledged.insert(id, record);
            }
        }
    }
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let answered = acknowledged
        .values()
        .filter(|r| r["status"] == "answered")
        .count();
    for (id, record) in &acknowledged {
        let (s, now) = api.get(&format!("/v1/interactions/{id}")).await;
        assert_eq!(s, 200);
        if record["status"] == "answered" {
            assert_eq!(now["response"], record["response"]);
        }
    }
    eprintln!("crash loop: {cycles} kill -9 cycles, {} acknowledged records ({answered} answers) verified {} times in all, seed {seed}", acknowledged.len(), verified + acknowledged.len());
    assert!(
        answered > cycles,
        "the load did too little to prove anything"
    );
}

#[tokio::test]
async fn cancel_racing_answer_has_one_winner_and_it_sticks() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    for round in 0..50 {
        let q = api.ask_permission(&format!("cancel race {round}")).await;
        let id = q["id"].as_str().unwrap().to_string();
        let answer = {
            let api = api.clone();
            let q = q.clone();
            tokio::spawn(async move { api.respond(&q, Api::answer(&q, "r", "allow-once")).await })
        };
        let cancel = {
            let api = api.clone();
            let id = id.clone();
            tokio::spawn(async move {
                api.post(&format!("/v1/interactions/{id}/cancel"), json!(null))
                    .await
            })
        };
        let (sa, va) = answer.await.unwrap();
        let (sc, vc) = cancel.await.unwrap();
        assert_eq!(sc, 200);
        let (_, stored) = api.get(&format!("/v1/interactions/{id}")).await;
        if sa == 200 {
            assert_eq!(stored["status"], "answered", "round {round}");
            assert_eq!(
                vc["status"], "answered",
                "cancel after the answer must report it"
            );
            assert_eq!(va["response"], stored["response"]);
        } else {
            assert_eq!(
                (sa, va["code"].as_str()),
                (400, Some("not_pending")),
                "round {round}"
            );
            assert_eq!(stored["status"], "cancelled");
        }
    }
}

#[tokio::test]
async fn keyed_re_requests_racing_a_supersede_leave_exactly_one_pending() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    for round in 0..20 {
        let key = format!("race-{round}");
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let api = api.clone();
                let key = key.clone();
                // Two different contents under one key, interleaved.
                let prompt = if i % 2 == 0 { "version A" } else { "version B" };
                tokio::spawn(async move {
                    api.post(
                        "/v1/interactions/request",
                        json!({"key": key, "prompt": prompt}),
                    )
                    .await
                })
            })
            .collect();
        for t in tasks {
            let (s, _) = t.await.unwrap();
            assert!(s == 200 || s == 201);
        }
        let (_, all) = api.get("/v1/interactions?limit=500").await;
        let mine: Vec<&Value> = all["interactions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["key"] == key.as_str())
            .collect();
        let pending = mine.iter().filter(|i| i["status"] == "pending").count();
        assert_eq!(pending, 1, "round {round}: {pending} pending for one key");
        assert!(mine
            .iter()
            .all(|i| i["status"] == "pending" || i["status"] == "superseded"));
    }
}

#[tokio::test]
async fn slow_partial_requests_do_not_starve_other_clients() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let addr = d.url.trim_start_matches("http://").to_string();
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"POST /v1/interactions/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            .await
            .unwrap();
        slow.push(s);
    }
    // Others are served meanwhile.
    for i in 0..20 {
        let q = api.ask_permission(&format!("while slow {i}")).await;
        assert_eq!(api.respond(&q, Api::answer(&q, "r", "deny")).await.0, 200);
    }
    // The header timeout closes a connection that never finishes its headers.
    let started = Instant::now();
    let mut s = slow.pop().unwrap();
    let mut buf = [0u8; 256];
    use tokio::io::AsyncReadExt;
    let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf))
        .await
        .expect("server never closed the slow connection");
    // Closed means end of stream (or a reset), never a reply to the half-sent request.
    assert!(
        matches!(n, Ok(0) | Err(_)),
        "the half-sent request got {n:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "closed before the header timeout"
    );
}

/// Hostile bodies for the request and respond routes, generated at random: never a 500,
/// never a dropped connection, and nothing is answered by accident.
#[tokio::test]
async fn random_bodies_never_get_a_500() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let target = api.ask_permission("fuzz target").await;
    let id = target["id"].as_str().unwrap().to_string();
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let cases: usize = std::env::var("AGENTNOTIFY_API_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    for n in 0..cases {
        let mut body = serde_json::Map::new();
        for _ in 0..rng.random_range(0..6) {
            let f = BODY_FIELDS[rng.random_range(0..BODY_FIELDS.len())];
            let v = match rng.random_range(0..8) {
                0 => Value::Null,
                1 => json!(rng.random::<i64>()),
                2 => json!(rng.random::<f64>() * 1e308),
                3 => json!("x".repeat(rng.random_range(0..3000))),
                4 => {
                    json!([{"id": "a", "label": "A"}, {"id": rng.random::<u8>().to_string(), "label": ""}])
                }
                5 => json!({"nested": [1, {"deeper": null}]}),
                6 => json!(rng.random::<bool>()),
                _ => json!(target[f].clone()),
            };
            body.insert(f.to_string(), v);
        }
        let path = match n % 3 {
            0 => "/v1/interactions/request".to_string(),
            1 => format!("/v1/interactions/{id}/respond"),
            _ => "/v1/notifications".to_string(),
        };
        let (s, v) = api.post(&path, Value::Object(body.clone())).await;
        assert!(s < 500, "seed {seed} case {n}: {s} {v} for {body:?}");
        assert!(
            v["code"].is_string() || s < 300,
            "seed {seed} case {n}: error without code: {v}"
        );
    }
    // No random body guessed the nonce.
    assert_eq!(
        api.get(&format!("/v1/interactions/{id}")).await.1["status"],
        "pending"
    );
}

/// Load: 200 hooks wait at once while 1,000 other requests flow; each hook gets exactly
/// the decision given to its own question.
// Holds the heavy-test turn for its whole run (see support::heavy).
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_waiting_hooks_each_get_their_own_decision_under_load() {
    let _heavy = crate::support::heavy();
    use crate::hook::{pending_for, RunningHook, ALLOW, DENY};
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    let hooks: Vec<_> = (0..200)
        .map(|i| {
            let payload = crate::support::fixture("codex-bash.json")
                .replace("019d8d5f-2325-7ca2-90d0-de30ca64fb2a", "load-session")
                .replace("cargo publish --dry-run", &format!("make job-{i}"));
            RunningHook::start(&home, "codex", &payload, &[])
        })
        .collect();
    let questions = pending_for(&api, "load-session", 200).await;
    let other: Vec<_> = (0..1000)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                match i % 4 {
                    0 => {
                        let q = api.ask_permission(&format!("noise {i}")).await;
                        assert_eq!(api.respond(&q, Api::answer(&q, "r", "deny")).await.0, 200);
                    }
                    1 => assert_eq!(
                        api.get("/v1/interactions?pending=true&limit=500").await.0,
                        200
                    ),
                    2 => assert_eq!(
                        api.post(
                            "/v1/notifications",
                            json!({"title": "noise", "message": format!("{i}")})
                        )
                        .await
                        .0,
                        201
                    ),
                    _ => assert_eq!(api.get("/v1/notifications?limit=10").await.0, 200),
                }
            })
        })
        .collect();
    // Answer every hook's question while the noise flows: even jobs allowed, odd denied.
    for q in &questions {
        let prompt = q["body"].as_str().unwrap();
        let job: usize = prompt
            .split("make job-")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let choice = if job.is_multiple_of(2) {
            "allow-once"
        } else {
            "deny"
        };
        let (s, v) = api.respond(q, Api::answer(q, "r", choice)).await;
        if s != 200 {
            let logs = home.logs();
            let reasons: Vec<&str> = logs
                .lines()
                .filter(|l| {
                    l.contains("no decision") || l.contains("lapsed") || l.contains("gave up")
                })
                .collect();
            panic!("job {job}: {s} {v}\n{}", reasons.join("\n"));
        }
    }
    for t in other {
        t.await.unwrap();
    }
    for (i, h) in hooks.into_iter().enumerate() {
        let want = if i.is_multiple_of(2) { ALLOW } else { DENY };
        let got = h.finish();
        if got != (0, format!("{want}\n")) {
            let logs = home.logs();
            let why: Vec<&str> = logs
                .lines()
                .filter(|l| {
                    l.contains("no decision") || l.contains("retrying") || l.contains("lapsed")
                })
                .collect();
            panic!("hook {i}: got {got:?}\n{}", why.join("\n"));
        }
    }
}
