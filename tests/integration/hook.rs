//! The real `agentnotify-hook` fed real host payloads, against the real broker.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{fixture, run_with_stdin, Api, Daemon, Home, HOOK};

pub const ALLOW: &str = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;
pub const DENY: &str = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"Denied via agentnotify"}}}"#;

/// A hook process with its payload already written and stdin closed.
pub struct RunningHook {
    child: Child,
}

impl RunningHook {
    pub fn start(home: &Home, host: &str, payload: &str, extra: &[&str]) -> RunningHook {
        let mut cmd = home.cmd(HOOK);
        cmd.args([host, "ask-permission"]).args(extra);
        RunningHook::spawn(cmd, payload)
    }

    fn spawn(mut cmd: Command, payload: &str) -> RunningHook {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hook");
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(payload.as_bytes()).unwrap();
        drop(stdin);
        RunningHook { child }
    }

    /// Reads stdout to EOF (which needs every holder of the pipe gone) and the exit code.
    pub fn finish(mut self) -> (i32, String) {
        let mut stdout = self.child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut out = String::new();
            let _ = stdout.read_to_string(&mut out);
            let _ = tx.send(out);
        });
        let out = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("hook stdout never reached EOF: someone still holds it");
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        (code, out)
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// Waits (bounded) until `n` pending questions exist for a session; returns them.
pub async fn pending_for(api: &Api, session: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = api
            .get(&format!(
                "/v1/interactions?pending=true&limit=500&session={session}"
            ))
            .await;
        let list = v["interactions"].as_array().cloned().unwrap_or_default();
        if list.len() >= n {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} pending questions for {session}, have {}",
            list.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The notification the hook posts right after its question (bounded wait).
async fn notification_for(api: &Api, q: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, ns) = api.get("/v1/notifications").await;
        if let Some(n) = ns["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["interaction_id"] == q["id"])
        {
            return n.clone();
        }
        assert!(Instant::now() < deadline, "no notification for {}", q["id"]);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn session_of(payload: &str) -> String {
    serde_json::from_str::<Value>(payload).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn every_fixture_becomes_a_clear_question_and_the_answer_its_exact_decision() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    // (host, fixture, the one-line prompt, what the body holds, Always allow offered).
    // `None` as the body means: exactly the tool input's `command`, whole.
    type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a [&'a str]>, bool);
    let cases: &[Case] = &[
        (
            "claude",
            "claude-bash.json",
            "Run a command in shop? — Reinstall dependencies from the lockfile",
            None,
            true,
        ),
        (
            "claude",
            "claude-live-bash.json",
            "Run a command in shop? — create proof file",
            None,
            true,
        ),
        (
            "claude",
            "claude-edit.json",
            "Edit /home/dev/shop/src/cart.ts?",
            Some(&[
                "replace_all: false",
                "--- /home/dev/shop/src/cart.ts\n+++ /home/dev/shop/src/cart.ts\n",
                "\n-if (qty) return total\n",
                "\n+if (qty != null) return total\n",
            ]),
            true,
        ),
        (
            "claude",
            "claude-mcp.json",
            "Call MCP tool create_issue on server github?",
            Some(&[
                "{\n  \"owner\": \"acme\",",
                "\"body\": \"Steps: open cart, press pay.\"\n}",
            ]),
            false,
        ),
        (
            "codex",
            "codex-bash.json",
            "Run a command in shop? — Do you want to run a publish dry run?",
            None,
            false,
        ),
        (
            "codex",
            "codex-live-bash.json",
            "Run a command in shop? — Allow the fake model to run this command?",
            None,
            false,
        ),
        (
            "codex",
            "codex-apply-patch.json",
            "Apply a patch to 1 file in shop?",
            None,
            false,
        ),
        (
            "codex",
            "codex-network.json",
            "Allow network access to static.crates.io?",
            None,
            false,
        ),
    ];
    for (i, (host, file, prompt, body, always)) in cases.iter().enumerate() {
        let payload = fixture(file);
        let sent: Value = serde_json::from_str(&payload).unwrap();
        let session = session_of(&payload);
        // Other cases share a session id; answer them one at a time.
        let hook = RunningHook::start(&home, host, &payload, &[]);
        let q = pending_for(&api, &session, 1).await.remove(0);
        assert_eq!(q["kind"], "permission", "{file}");
        assert_eq!(q["agent"], *host, "{file}");
        assert_eq!(q["project"], "shop", "{file}");
        assert_eq!(q["session_id"].as_str(), Some(session.as_str()));
        assert_eq!(q["owner_lease"], true);
        assert!(
            q["key"].as_str().unwrap().starts_with(&format!("{host}-")),
            "{file}"
        );
        assert_eq!(q["prompt"], *prompt, "{file}");
        let shown = q["body"].as_str().unwrap();
        match body {
            None => assert_eq!(shown, sent["tool_input"]["command"], "{file}"),
            Some(parts) => {
                for part in *parts {
                    assert!(
                        shown.contains(part),
                        "{file}: body lacks {part:?}:\n{shown}"
                    );
                }
            }
        }
        let ids: Vec<&str> = q["choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        if *always {
            assert_eq!(ids, ["allow-once", "allow-always", "deny"], "{file}");
        } else {
            assert_eq!(ids, ["allow-once", "deny"], "{file}");
        }
        // A permission_required notification accompanies it.
        let n = notification_for(&api, &q).await;
        assert_eq!(n["type"], "permission_required");

        let (choice, want) = if i % 2 == 0 {
            ("allow-once", ALLOW)
        } else {
            ("deny", DENY)
        };
        let (s, _) = api.respond(&q, Api::answer(&q, "r", choice)).await;
        assert_eq!(s, 200);
        let (code, out) = hook.finish();
        assert_eq!(code, 0, "{file}");
        assert_eq!(out, format!("{want}\n"), "{file}");
        let (_, n) = api
            .get(&format!("/v1/notifications/{}", n["id"].as_str().unwrap()))
            .await;
        assert_eq!(n["status"], "resolved", "{file}");
    }
}

#[tokio::test]
async fn always_allow_returns_the_hosts_own_suggestions() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    let payload = fixture("claude-live-bash.json");
    let hook = RunningHook::start(&home, "claude", &payload, &[]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    api.respond(&q, Api::answer(&q, "r", "allow-always")).await;
    let (code, out) = hook.finish();
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let decision = &v["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "allow");
    let sent: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(
        decision["updatedPermissions"],
        sent["permission_suggestions"]
    );
    assert_eq!(out.lines().count(), 1);
}

#[tokio::test]
async fn ask_user_question_is_answered_with_the_chosen_label() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    for file in [
        "claude-askuserquestion.json",
        "claude-live-askuserquestion.json",
    ] {
        let payload = fixture(file);
        let sent: Value = serde_json::from_str(&payload).unwrap();
        let hook = RunningHook::start(&home, "claude", &payload, &[]);
        let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
        assert_eq!(q["kind"], "single_choice");
        let question = sent["tool_input"]["questions"][0]["question"]
            .as_str()
            .unwrap();
        assert!(q["prompt"].as_str().unwrap().contains(question));
        let options = &sent["tool_input"]["questions"][0]["options"];
        assert_eq!(q["choices"][1]["label"], options[1]["label"]);
        assert_eq!(q["choices"][1]["detail"], options[1]["description"]);
        assert_eq!(notification_for(&api, &q).await["type"], "input_required");
        api.respond(
            &q,
            Api::answer(&q, "r", q["choices"][1]["id"].as_str().unwrap()),
        )
        .await;
        let (code, out) = hook.finish();
        assert_eq!(code, 0);
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        let decision = &v["hookSpecificOutput"]["decision"];
        assert_eq!(decision["behavior"], "allow");
        let mut want = sent["tool_input"].clone();
        want["answers"] = json!({ question: options[1]["label"] });
        assert_eq!(decision["updatedInput"], want, "{file}");
    }
}

#[tokio::test]
async fn codex_never_receives_anything_but_behavior_and_message() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    // Even a Claude-only payload shape, run as Codex, gets no extras.
    let payload = fixture("claude-bash.json").replace("3f9c1d2e", "c0dec0de");
    let hook = RunningHook::start(&home, "codex", &payload, &[]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    let ids: Vec<&str> = q["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["allow-once", "deny"]);
    api.respond(&q, Api::answer(&q, "r", "allow-once")).await;
    assert_eq!(hook.finish(), (0, format!("{ALLOW}\n")));
}

#[tokio::test]
async fn bad_input_and_bad_arguments_print_nothing_and_exit_0() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let good = fixture("claude-bash.json");
    let huge = format!(
        "{{\"tool_name\":\"Bash\",\"x\":\"{}\"}}",
        "a".repeat(1024 * 1024 + 10)
    );
    let inputs: Vec<&[u8]> = vec![
        b"",
        b"   ",
        b"not json",
        b"[1,2]",
        b"null",
        b"\"Bash\"",
        b"{}",
        b"{\"tool_name\": 5}",
        b"\xff\xfe",
        huge.as_bytes(),
    ];
    for input in inputs {
        let mut cmd = home.cmd(HOOK);
        cmd.args(["claude", "ask-permission", "--timeout", "5"]);
        let (code, out, _) = run_with_stdin(cmd, input);
        assert_eq!(
            (code, out.as_str()),
            (0, ""),
            "{:?}",
            String::from_utf8_lossy(&input[..input.len().min(30)])
        );
    }
    for args in [
        &[][..],
        &["gemini", "ask-permission"][..],
        &["claude"][..],
        &["claude", "approve"][..],
        &["claude", "ask-permission", "--timeout", "soon"][..],
        &["claude", "ask-permission", "--bogus"][..],
        &["codex", "ask-permission", "extra"][..],
    ] {
        let mut cmd = home.cmd(HOOK);
        cmd.args(args);
        let (code, out, _) = run_with_stdin(cmd, good.as_bytes());
        assert_eq!((code, out.as_str()), (0, ""), "{args:?}");
    }
    assert!(
        home.api().pending().await.is_empty(),
        "a refused invocation opened a question"
    );
}

#[test]
fn no_broker_and_none_startable_prints_nothing_and_exits_0() {
    let home = Home::new();
    let mut cmd = home.cmd(HOOK);
    cmd.args(["claude", "ask-permission", "--timeout", "30"])
        .env("AGENTNOTIFY_BIN", home.path().join("no-such-agentnotify"));
    let started = Instant::now();
    let (code, out, _) = run_with_stdin(cmd, fixture("claude-bash.json").as_bytes());
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the hook waited out its budget instead of falling back"
    );
}

#[tokio::test]
async fn broker_killed_mid_wait_means_silence() {
    let home = Home::new();
    let mut d = Daemon::start(&home, &[]);
    let api = home.api();
    let payload = fixture("codex-bash.json");
    let hook = RunningHook::start(&home, "codex", &payload, &[]);
    pending_for(&api, &session_of(&payload), 1).await;
    d.kill9();
    assert_eq!(hook.finish(), (0, String::new()));
}

#[tokio::test]
async fn cancelled_superseded_and_budget_end_fall_back_and_withdraw() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    // Cancelled from elsewhere.
    let payload = fixture("codex-bash.json");
    let hook = RunningHook::start(&home, "codex", &payload, &[]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    api.post(
        &format!("/v1/interactions/{}/cancel", q["id"].as_str().unwrap()),
        json!(null),
    )
    .await;
    assert_eq!(hook.finish(), (0, String::new()));
    // Superseded: the same key re-asked with different content.
    let hook = RunningHook::start(&home, "codex", &payload, &[]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    api.ask(json!({"key": q["key"], "prompt": "something else", "agent": "codex"}))
        .await;
    assert_eq!(hook.finish(), (0, String::new()));
    let (_, old) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(old["status"], "superseded");
    // Budget ends: nothing printed, and the question is withdrawn, not left pending.
    let payload = fixture("claude-edit.json");
    let hook = RunningHook::start(&home, "claude", &payload, &["--timeout", "2"]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    assert_eq!(hook.finish(), (0, String::new()));
    let (_, after) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(after["status"], "cancelled");
    let (_, ns) = api.get("/v1/notifications?status=active").await;
    assert!(
        ns["notifications"].as_array().unwrap().is_empty(),
        "notifications left active: {ns}"
    );
}

#[tokio::test]
async fn host_signals_withdraw_the_question_and_exit_0_quickly() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    for (n, signal) in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
        .into_iter()
        .enumerate()
    {
        let payload = fixture("claude-live-bash.json").replace("0f94dd49", &format!("5160{n:04}"));
        let hook = RunningHook::start(&home, "claude", &payload, &[]);
        let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
        let sent = Instant::now();
        unsafe { libc::kill(hook.pid(), signal) };
        let (code, out) = hook.finish();
        let took = sent.elapsed();
        assert_eq!((code, out.as_str()), (0, ""), "signal {signal}");
        assert!(
            took < Duration::from_secs(2),
            "signal {signal}: exit took {took:?}"
        );
        // The hook withdrew it itself (not the owner lease 15 s later). On a busy disk the
        // broker's flush may finish after the hook is gone; the cancel still lands.
        let id = q["id"].as_str().unwrap();
        let (_, after) = api
            .get(&format!("/v1/interactions/{id}/wait?timeout=60"))
            .await;
        assert_eq!(after["status"], "cancelled", "signal {signal}");
        let explicit = format!("agentnotify::broker: interaction cancelled id=\"{id}\"");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !home.logs().contains(&explicit) {
            assert!(
                Instant::now() < deadline,
                "signal {signal}: the hook did not withdraw its question:\n{}",
                home.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn a_call_claude_decided_itself_withdraws_the_question() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    // The session transcript as Claude writes it: the call, then (once the person answered
    // Claude's own dialog) its result. The hook is told nothing else.
    let transcript = home.path().join("session.jsonl");
    let mut payload: Value = serde_json::from_str(&fixture("claude-live-bash.json")).unwrap();
    payload["transcript_path"] = json!(transcript);
    payload["session_id"] = json!("7a0e0000-0000-4000-8000-000000000001");
    let call = |line: Value| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&transcript)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    };
    call(json!({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": payload["tool_input"]}
    ]}}));
    let hook = RunningHook::start(&home, "claude", &payload.to_string(), &[]);
    let q = pending_for(&api, "7a0e0000-0000-4000-8000-000000000001", 1)
        .await
        .remove(0);
    call(json!({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    ]}}));
    let (code, out) = hook.finish();
    assert_eq!(
        (code, out.as_str()),
        (0, ""),
        "silent: Claude already decided"
    );
    let id = q["id"].as_str().unwrap();
    let (_, after) = api
        .get(&format!("/v1/interactions/{id}/wait?timeout=60"))
        .await;
    assert_eq!(after["status"], "cancelled", "withdrawn by the hook");
    assert!(home.logs().contains("the host decided the call itself"));
}

#[tokio::test]
async fn a_killed_hook_loses_its_question_to_the_owner_lease() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    let payload = fixture("codex-live-bash.json");
    let mut hook = RunningHook::start(&home, "codex", &payload, &[]);
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    hook.child.kill().unwrap();
    let killed = Instant::now();
    let _ = hook.child.wait();
    let (_, after) = api
        .get(&format!(
            "/v1/interactions/{}/wait?timeout=60",
            q["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(after["status"], "cancelled");
    // The lease lapses 15 s after the last owner wait started; the bound here only has to
    // tell "the lease cancelled it" from "the 60 s wait ran out" on a loaded machine.
    eprintln!(
        "owner lease cancelled the question {:?} after the kill",
        killed.elapsed()
    );
    assert!(
        killed.elapsed() < Duration::from_secs(40),
        "lease took {:?}\n{}",
        killed.elapsed(),
        home.logs()
    );
    assert!(api.pending().await.is_empty());
}

#[tokio::test]
async fn parallel_requests_stay_apart_and_repeats_share_one_question() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    let payload = fixture("claude-bash.json");
    let other = payload.replace("rm -rf node_modules && npm ci", "npm test");
    let a = RunningHook::start(&home, "claude", &payload, &[]);
    let b = RunningHook::start(&home, "claude", &other, &[]);
    let qs = pending_for(&api, &session_of(&payload), 2).await;
    assert_eq!(
        qs.len(),
        2,
        "two different requests in one session must both stay pending"
    );
    // The same request again (a host retry) reuses its question.
    let a2 = RunningHook::start(&home, "claude", &payload, &[]);
    // The retry has attached once its hook logged its (reused) question.
    let deadline = Instant::now() + Duration::from_secs(10);
    while home.logs().matches("question open").count() < 3 {
        assert!(
            Instant::now() < deadline,
            "the repeated request never attached"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let qs = pending_for(&api, &session_of(&payload), 2).await;
    assert_eq!(qs.len(), 2, "a repeated request opened a new question");
    let q = qs
        .iter()
        .find(|q| q["body"].as_str().unwrap().contains("node_modules"))
        .unwrap();
    api.respond(q, Api::answer(q, "r", "allow-once")).await;
    assert_eq!(a.finish(), (0, format!("{ALLOW}\n")));
    assert_eq!(a2.finish(), (0, format!("{ALLOW}\n")));
    let q = qs
        .iter()
        .find(|q| q["body"].as_str().unwrap().contains("npm test"))
        .unwrap();
    api.respond(q, Api::answer(q, "r", "deny")).await;
    assert_eq!(b.finish(), (0, format!("{DENY}\n")));
}

#[tokio::test]
async fn a_cold_start_spawns_one_detached_broker_and_the_allow_is_honoured() {
    let home = Home::new();
    let payload = fixture("claude-live-bash.json");
    let hook = RunningHook::start(&home, "claude", &payload, &[]);
    // The hook started the broker itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while home.broker_json().is_none() {
        assert!(Instant::now() < deadline, "no broker was spawned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let api = home.api();
    let q = pending_for(&api, &session_of(&payload), 1).await.remove(0);
    api.respond(&q, Api::answer(&q, "r", "allow-once")).await;
    // finish() reads stdout to EOF: it only returns if the broker did not inherit it.
    assert_eq!(hook.finish(), (0, format!("{ALLOW}\n")));
    let broker_pid = home.broker_json().unwrap()["pid"].as_i64().unwrap() as i32;
    assert_eq!(
        unsafe { libc::kill(broker_pid, 0) },
        0,
        "the broker outlives the hook"
    );
    // Its own session: not in the hook's process group.
    assert_eq!(unsafe { libc::getsid(broker_pid) }, broker_pid);
}

// Holds the heavy-test turn for its whole run (see support::heavy).
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn twenty_hooks_at_once_start_exactly_one_broker() {
    let _heavy = crate::support::heavy();
    let home = Home::new();
    let base = fixture("codex-bash.json");
    let hooks: Vec<RunningHook> = (0..20)
        .map(|i| {
            RunningHook::start(
                &home,
                "codex",
                &base.replace(
                    "cargo publish --dry-run",
                    &format!("cargo test -p crate{i}"),
                ),
                &[],
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while home.broker_json().is_none() {
        assert!(Instant::now() < deadline, "no broker was spawned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let api = home.api();
    let qs = pending_for(&api, &session_of(&base), 20).await;
    assert_eq!(qs.len(), 20);
    assert_eq!(
        home.logs().matches("broker started").count(),
        1,
        "more than one broker started"
    );
    for q in &qs {
        api.respond(q, Api::answer(q, "r", "deny")).await;
    }
    for h in hooks {
        assert_eq!(h.finish(), (0, format!("{DENY}\n")));
    }
}
