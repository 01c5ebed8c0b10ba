//! The `agentnotify` command line as a person uses it.

use std::process::Output;

use serde_json::Value;

use crate::support::{Daemon, Home, AGENTNOTIFY};

fn run(home: &Home, args: &[&str]) -> Output {
    home.cmd(AGENTNOTIFY)
        .args(args)
        .output()
        .expect("run agentnotify")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn ask_list_get_wait_respond_cancel_round_trip() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let out = run(
        &home,
        &[
            "interactions",
            "request",
            "--kind",
            "permission",
            "--prompt",
            "Deploy to prod?",
            "--choice",
            "allow-once:Allow once",
            "--choice",
            "deny:Deny",
            "--agent",
            "codex",
            "--project",
            "shop",
            "--session",
            "sess-1",
            "--ttl",
            "120",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let q = json_of(&out);
    let id = q["id"].as_str().unwrap();
    // The first digest test vector's question, hashed in the v2 encoding (SPEC §13.4).
    let canonical = r#"["agentnotify.interaction.v2","permission","codex","shop","sess-1","Deploy to prod?",null,[["allow-once","Allow once",null],["deny","Deny",null]],null,null,null]"#;
    assert_eq!(
        q["request_digest"].as_str().unwrap(),
        agentnotify::model::digest::hex_sha256(canonical.as_bytes())
    );
    let detailed = json_of(&run(
        &home,
        &[
            "interactions",
            "request",
            "--prompt",
            "Detailed?",
            "--choice",
            "a:A",
            "--choice",
            "b:B",
            "--choice-detail",
            "b:Nothing happens",
            "--kind",
            "single_choice",
        ],
    ));
    assert_eq!(detailed["choices"][1]["detail"], "Nothing happens");

    let list = run(&home, &["interactions", "list", "--pending"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains(id)
            && text.contains("permission/pending")
            && text.contains("Deploy to prod?")
            && text.contains("codex/shop"),
        "{text}"
    );
    let list = json_of(&run(
        &home,
        &["interactions", "list", "--json", "--agent", "codex"],
    ));
    assert_eq!(list["interactions"][0]["id"], id);

    let got = json_of(&run(&home, &["interactions", "get", id]));
    assert_eq!(got, q);
    let waited = json_of(&run(&home, &["interactions", "wait", id, "--timeout", "1"]));
    assert_eq!(waited["status"], "pending");

    let digest = q["request_digest"].as_str().unwrap();
    let nonce = q["nonce"].as_str().unwrap();
    let out = run(
        &home,
        &[
            "interactions",
            "respond",
            id,
            "--response-id",
            "r1",
            "--digest",
            digest,
            "--nonce",
            nonce,
            "--choice",
            "deny",
        ],
    );
    assert!(out.status.success());
    let answered = json_of(&out);
    assert_eq!(answered["response"]["source"], "cli");
    assert_eq!(answered["response"]["choice_id"], "deny");
    // Replay is fine; a different answer is an error with its code, exit 1.
    assert!(run(
        &home,
        &[
            "interactions",
            "respond",
            id,
            "--response-id",
            "r1",
            "--digest",
            digest,
            "--nonce",
            nonce,
            "--choice",
            "deny"
        ]
    )
    .status
    .success());
    let out = run(
        &home,
        &[
            "interactions",
            "respond",
            id,
            "--response-id",
            "r2",
            "--digest",
            digest,
            "--nonce",
            nonce,
            "--choice",
            "allow-once",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already_answered") && err.lines().count() == 1,
        "{err}"
    );
    let waited = json_of(&run(&home, &["interactions", "wait", id]));
    assert_eq!(waited["status"], "answered");

    let q2 = json_of(&run(
        &home,
        &["interactions", "request", "--prompt", "Cancel me"],
    ));
    let c = json_of(&run(
        &home,
        &["interactions", "cancel", q2["id"].as_str().unwrap()],
    ));
    assert_eq!(c["status"], "cancelled");

    // Not found → exit 3.
    let out = run(
        &home,
        &["interactions", "get", "0123456789abcdef0123456789abcdef"],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"));
    // Validation error → exit 1 with the message.
    let out = run(&home, &["interactions", "request", "--prompt", "   "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("prompt must be 1-2000 characters"));
    // Publish without relay → exit 1, relay_unavailable.
    let out = run(&home, &["interactions", "publish", id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("relay_unavailable"));
}

#[test]
fn help_is_there_and_usage_errors_exit_2() {
    let home = Home::new();
    let out = run(&home, &["help", "interactions"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "request",
        "list",
        "get",
        "wait",
        "respond",
        "cancel",
        "publish",
        "poll-responses",
        "request_digest",
    ] {
        assert!(
            text.contains(word),
            "help interactions lacks {word}: {text}"
        );
    }
    let out = run(&home, &["interactions", "respond", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--digest"));
    let out = run(&home, &["interactions", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        &home,
        &[
            "interactions",
            "respond",
            "abc",
            "--digest",
            "d",
            "--nonce",
            "n",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "respond needs --choice or --text"
    );
}

/// One table for both programs: 0 ok, 1 error, 2 usage, 3 not found, stated in `--help`.
#[test]
fn exit_codes_follow_the_one_table() {
    let home = Home::new();
    let out = run(&home, &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Exit codes: 0 ok, 1 error, 2 usage, 3 not found."),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&home, &["--bogus"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown option is a usage error"
    );
    let out = run(&home, &["interactions", "wait", "abc", "--timeout", "0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a value out of range is a usage error"
    );
    for args in [
        &["relay", "pair", "nosuch"][..],
        &["relay", "enable", "nosuch"][..],
        &["relay", "remove", "nosuch"][..],
    ] {
        let out = run(&home, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "agentnotify: no relay provider named \"nosuch\"\n"
        );
    }
    let out = run(&home, &["token", "--path"]);
    assert_eq!(out.status.code(), Some(0));
    let _d = Daemon::start(&home, &[]);
    let out = run(
        &home,
        &["interactions", "get", "0123456789abcdef0123456789abcdef"],
    );
    assert_eq!(out.status.code(), Some(3), "an unknown id is not found");
    let out = run(&home, &["status"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn the_cli_starts_a_broker_on_demand_and_status_and_stop_work() {
    let home = Home::new();
    let out = run(&home, &["status"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no broker is running"));
    let q = json_of(&run(
        &home,
        &["interactions", "request", "--prompt", "Spawned?"],
    ));
    assert_eq!(q["status"], "pending");
    let info = home
        .broker_json()
        .expect("broker.json written by the spawned broker");
    assert_eq!(info["api"], "v1");
    let status = json_of(&run(&home, &["status", "--json"]));
    assert_eq!(status["pending"], 1);
    assert_eq!(status["pid"], info["pid"]);
    let token = String::from_utf8_lossy(&run(&home, &["token"]).stdout)
        .trim()
        .to_string();
    assert_eq!(token, home.token());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["token", "broker.json"] {
            let mode = std::fs::metadata(home.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        for d in ["logs", "broker.sled"] {
            let mode = std::fs::metadata(home.path().join(d))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{d}");
        }
    }
}

#[test]
fn the_demo_asks_through_the_real_hook_and_shows_the_decision() {
    use std::io::{BufRead, BufReader, Read};
    let home = Home::new();
    let mut demo = home
        .cmd(AGENTNOTIFY)
        .args(["demo", "--timeout", "60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(demo.stdout.take().unwrap());
    let mut seen = String::new();
    let answer_line = loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "demo ended early:\n{seen}"
        );
        seen.push_str(&line);
        if line.contains("agentnotify answer ") && line.contains("--choice allow-once") {
            break line;
        }
    };
    assert!(
        seen.contains("rm -rf node_modules && npm ci"),
        "the question is shown:\n{seen}"
    );
    assert!(
        seen.contains("\n    agentnotify answer\n"),
        "the demo points to the picker:\n{seen}"
    );
    // Run exactly the line the demo told the person to copy.
    let command = answer_line.split('#').next().unwrap().trim();
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "agentnotify");
    let out = run(&home, &words[1..]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    assert!(demo.wait().unwrap().success());
    assert!(
        rest.contains(r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#),
        "{rest}"
    );
}

#[test]
fn stop_asks_the_broker_to_exit_once_idle() {
    let home = Home::new();
    let mut d = Daemon::start(&home, &[]);
    let out = run(&home, &["stop"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("will exit"),
        "{out:?}"
    );
    // Nothing pending: it exits (the daemon's own exit is the event).
    let status = d.child.wait().unwrap();
    assert!(status.success());
    assert!(home.broker_json().is_none(), "broker.json left behind");
    let out = run(&home, &["stop"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no broker is running"));
}
