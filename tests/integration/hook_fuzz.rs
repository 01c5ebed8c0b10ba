//! Property test: random and mutated host payloads through the real hook binary.
//! Whatever comes in, the hook exits 0 and prints nothing or exactly one valid decision.

use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

use crate::support::{fixture, Home, HOOK};

const FIXTURES: &[&str] = &[
    "claude-bash.json",
    "claude-edit.json",
    "claude-mcp.json",
    "claude-askuserquestion.json",
    "claude-live-bash.json",
    "claude-live-askuserquestion.json",
    "codex-bash.json",
    "codex-apply-patch.json",
    "codex-live-bash.json",
    "codex-network.json",
];

fn random_string(rng: &mut StdRng) -> String {
    let pool = [
        "",
        " ",
        "\u{0}",
        "\n\t",
        "é漢😀",
        "\u{202e}rtl",
        "</script>",
        "\"\\",
        "mcp__",
        "mcp____x",
        "AskUserQuestion",
        "Bash",
        "allow",
        "deny",
    ];
    let mut s = String::new();
    for _ in 0..rng.random_range(0..4) {
        s.push_str(pool[rng.random_range(0..pool.len())]);
    }
    if rng.random_bool(0.05) {
        s.push_str(&"x".repeat(rng.random_range(1000..50_000)));
    }
    s
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..9) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e300),
        4 => json!(u64::MAX),
        5 if depth < 6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        6 if depth < 6 => {
            let mut m = Map::new();
            for _ in 0..rng.random_range(0..4) {
                m.insert(random_string(rng), random_value(rng, depth + 1));
            }
            Value::Object(m)
        }
        7 => {
            let n = rng.random_range(1..300);
            serde_json::from_str(&format!("{}{}", "[".repeat(n), "]".repeat(n)))
                .unwrap_or(Value::Null)
        }
        _ => json!(random_string(rng)),
    }
}

const KEYS: &[&str] = &[
    "session_id",
    "cwd",
    "tool_name",
    "tool_input",
    "turn_id",
    "permission_suggestions",
    "transcript_path",
    "hook_event_name",
    "mcp_server",
    "questions",
    "options",
    "command",
    "file_path",
    "label",
    "multiSelect",
    "permission_mode",
    "edits",
    "old_string",
    "new_string",
    "replace_all",
    "content",
    "plan",
    "preview",
    "description",
    "kind",
    "behavior",
    "rules",
    "type",
];

/// Payload shapes of SPEC §13 that no fixture has: every tool whose body is what runs,
/// AskUserQuestion with multiSelect and several questions, every kind of suggestion, and
/// inputs over the body limit. `permission_mode` varies so the PreToolUse path asks too.
fn shapes() -> Vec<Value> {
    let call = |tool: &str, input: Value, mode: &str| {
        json!({"session_id": "fuzz", "cwd": "/home/dev/shop", "transcript_path": null,
               "hook_event_name": "PermissionRequest", "permission_mode": mode,
               "tool_name": tool, "tool_input": input})
    };
    let edit = json!({"old_string": "a\nb", "new_string": "a\u{202e}\nc", "replace_all": true});
    let mut with_rules = call("Bash", json!({"command": "npm test"}), "default");
    with_rules["permission_suggestions"] = json!([
        {"type": "addRules", "behavior": "deny", "destination": "localSettings",
         "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}, {"toolName": "Read"}]},
        {"type": "replaceRules", "behavior": "ask", "destination": "userSettings",
         "rules": (0..80).map(|n| json!({"toolName": "Bash", "ruleContent": format!("x{n}")})).collect::<Vec<_>>()},
        {"type": "removeRules", "rules": []},
        {"type": "setMode", "mode": "bypassPermissions", "destination": "session"},
        {"type": "addDirectories", "directories": ["/", 7], "destination": "session"},
        {"type": "removeDirectories", "directories": null},
        {"type": {"odd": true}},
    ]);
    vec![
        call(
            "Write",
            json!({"file_path": "/tmp/a", "content": "x\n".repeat(3000)}),
            "default",
        ),
        call(
            "Edit",
            json!({"file_path": "/tmp/a", "old_string": "", "new_string": ""}),
            "plan",
        ),
        call(
            "MultiEdit",
            json!({"file_path": "/tmp/a", "edits": [edit.clone(), edit, {}, 5]}),
            "default",
        ),
        call("ExitPlanMode", json!({"plan": "1. a\n2. b"}), "plan"),
        call("Bash", json!({"command": "y".repeat(16_385)}), "default"),
        call(
            "mcp__s__t",
            json!({"deep": {"er": [1, 2, {"x": "\u{1b}[2K"}]}}),
            "acceptEdits",
        ),
        call(
            "AskUserQuestion",
            json!({"questions": [
                {"question": "Pick?", "header": "P", "multiSelect": true,
                 "options": [{"label": "A, b", "description": "d".repeat(600)}, {"label": "\"q\"", "preview": "p"}]},
                {"question": "Name?", "header": "N", "kind": "text"},
                {"question": "Pick?", "options": [{"label": "x"}, {"label": "y"}]},
            ]}),
            "acceptEdits",
        ),
        call(
            "AskUserQuestion",
            json!({"questions": [{"question": "Q", "multiSelect": true,
            "options": (0..13).map(|n| json!({"label": format!("o{n}")})).collect::<Vec<_>>()}]}),
            "default",
        ),
        with_rules,
    ]
}

/// Mutates `v` or, now and then, something inside it.
fn mutate(rng: &mut StdRng, v: &mut Value, depth: u32) {
    let descend = depth < 4 && rng.random_bool(0.5);
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let i = rng.random_range(0..m.len());
            let child = m.values_mut().nth(i).unwrap();
            return mutate(rng, child, depth + 1);
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let i = rng.random_range(0..a.len());
            return mutate(rng, &mut a[i], depth + 1);
        }
        _ => {}
    }
    match v {
        Value::Object(m) => {
            if !m.is_empty() && rng.random_bool(0.3) {
                let k = m.keys().nth(rng.random_range(0..m.len())).unwrap().clone();
                m.remove(&k);
            } else {
                let k = KEYS[rng.random_range(0..KEYS.len())].to_string();
                m.insert(k, random_value(rng, 0));
            }
        }
        Value::Array(a) => a.push(random_value(rng, 0)),
        other => *other = random_value(rng, 0),
    }
}

fn payload(rng: &mut StdRng, fixtures: &[Value]) -> Vec<u8> {
    if rng.random_bool(0.05) {
        return (0..rng.random_range(0..200))
            .map(|_| rng.random::<u8>())
            .collect();
    }
    let mut v = fixtures[rng.random_range(0..fixtures.len())].clone();
    for _ in 0..rng.random_range(0..4) {
        mutate(rng, &mut v, 0);
    }
    let mut bytes = v.to_string().into_bytes();
    if rng.random_bool(0.2) && !bytes.is_empty() {
        match rng.random_range(0..3) {
            0 => bytes.truncate(rng.random_range(0..bytes.len())),
            1 => {
                let i = rng.random_range(0..bytes.len());
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
            _ => {
                let i = rng.random_range(0..bytes.len());
                bytes.insert(i, rng.random());
            }
        }
    }
    bytes
}

fn check_output(stdout: &[u8]) -> Result<(), String> {
    if stdout.is_empty() {
        return Ok(());
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_string())?;
    let line = text.strip_suffix('\n').ok_or("decision without newline")?;
    if line.contains('\n') {
        return Err(format!("more than one line: {text:?}"));
    }
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {text:?}"))?;
    let out = &v["hookSpecificOutput"];
    let behavior = match out["hookEventName"].as_str() {
        Some("PermissionRequest") => &out["decision"]["behavior"],
        Some("PreToolUse") => &out["permissionDecision"],
        _ => return Err(format!("not a decision: {text:?}")),
    };
    if !(behavior == "allow" || behavior == "deny") {
        return Err(format!("not a decision: {text:?}"));
    }
    Ok(())
}

#[test]
fn ten_thousand_hostile_payloads_never_break_the_hook() {
    let _heavy = crate::support::heavy();
    let cases: usize = std::env::var("AGENTNOTIFY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let seed: u64 = std::env::var("AGENTNOTIFY_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("hook fuzz: {cases} cases, seed {seed} (AGENTNOTIFY_FUZZ_SEED to replay)");
    let home = Home::new();
    let mut fixtures: Vec<Value> = FIXTURES
        .iter()
        .map(|f| serde_json::from_str(&fixture(f)).unwrap())
        .collect();
    fixtures.extend(shapes());
    let workers = 4;
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let fixtures = fixtures.clone();
            let home_path = home.path().to_path_buf();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(w as u64));
                for n in (w..cases).step_by(workers) {
                    let input = payload(&mut rng, &fixtures);
                    let (host, action) = match rng.random_range(0..5) {
                        0 | 1 => ("claude", "ask-permission"),
                        2 => ("claude", "pre-tool-use"),
                        3 => ("codex", "ask-permission"),
                        _ => ("codex", "pre-tool-use"),
                    };
                    let mut child = Command::new(HOOK)
                        .args([host, action, "--timeout", "5"])
                        .env("AGENTNOTIFY_HOME", &home_path)
                        .env("HOME", home_path.join("home"))
                        // A closed port: every payload that gets as far as the broker fails fast.
                        .env("AGENTNOTIFY_URL", "http://127.0.0.1:1")
                        .env("AGENTNOTIFY_TOKEN", "fuzz")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .expect("spawn hook");
                    let mut stdin = child.stdin.take().unwrap();
                    let writer = std::thread::spawn(move || {
                        use std::io::Write;
                        let _ = stdin.write_all(&input);
                        input
                    });
                    let out = child.wait_with_output().unwrap();
                    let input = writer.join().unwrap();
                    let shown =
                        String::from_utf8_lossy(&input[..input.len().min(300)]).into_owned();
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "case {n} (seed {seed}) exit {:?} for {shown}",
                        out.status
                    );
                    if let Err(e) = check_output(&out.stdout) {
                        panic!("case {n} (seed {seed}): {e} for {shown}");
                    }
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(
                        !stderr.contains("panicked"),
                        "case {n} (seed {seed}) panicked: {stderr}"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a fuzz worker failed");
    }
    assert!(
        !home.logs().contains("panicked"),
        "a hook panicked (see logs)"
    );
}
