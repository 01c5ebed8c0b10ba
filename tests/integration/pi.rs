//! Pi: `install-harness pi` and friends, the extension's gate (`agentnotify-hook pi
//! gate`), and `agentnotify pi` wrapping a scripted stand-in for Pi's RPC mode. The real
//! Pi drives both in tests/hosts/test_pi.py.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::hook::pending_for;
use crate::support::{run_with_stdin, Api, Daemon, Home, AGENTNOTIFY, HOOK};

const EXTENSION: &str = include_str!("../../harness/pi/agentnotify.ts");

// ---- setup ---------------------------------------------------------------------------

fn setup(home: &Home, args: &[&str], agent_dir: Option<&Path>) -> (i32, String, String) {
    let mut cmd = home.cmd(HOOK);
    cmd.args(args).env_remove("PI_CODING_AGENT_DIR");
    if let Some(dir) = agent_dir {
        cmd.env("PI_CODING_AGENT_DIR", dir);
    }
    run_with_stdin(cmd, b"")
}

fn default_extension(home: &Home) -> PathBuf {
    home.path().join("home/.pi/agent/extensions/agentnotify.ts")
}

fn rendered(exe: &str) -> String {
    EXTENSION.replace("\"{{hook}}\"", &Value::String(exe.into()).to_string())
}

#[test]
fn install_writes_the_shipped_extension_privately_and_a_second_run_changes_nothing() {
    let home = Home::new();
    let (code, out, err) = setup(
        &home,
        &["install-harness", "pi", "--command-path", HOOK],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    let path = default_extension(&home);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), rendered(HOOK));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(out.contains("/reload"), "{out}");
    let (code, out, _) = setup(
        &home,
        &["install-harness", "pi", "--command-path", HOOK],
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("already installed"), "{out}");
    // doctor sees it, with the executable it runs.
    let (code, out, _) = setup(&home, &["doctor", "pi", "--json"], None);
    let report: Value = serde_json::from_str(&out).unwrap();
    let pi: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["host"] == "pi")
        .collect();
    assert_eq!(pi.len(), 2, "{out}");
    assert!(pi.iter().all(|c| c["status"] == "ok"), "{out}");
    assert_eq!(pi[1]["detail"], HOOK);
    // Claude and Codex not being set up is no problem when Pi is.
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "hook_installed")
        .all(|c| c["status"] == "info"));
    // Every failing check is one outside Pi (the test's PATH lacks agentnotify-hook), so
    // the exit code follows from those alone.
    let failed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["status"] == "fail");
    assert_eq!(code, i32::from(failed), "{out}");
    // Uninstall removes exactly our file.
    let (code, out, _) = setup(&home, &["uninstall-harness", "pi"], None);
    assert_eq!(code, 0, "{out}");
    assert!(!path.exists());
    let (code, out, _) = setup(&home, &["uninstall-harness", "pi"], None);
    assert_eq!(code, 0);
    assert!(out.contains("not installed"), "{out}");
}

#[test]
fn pi_coding_agent_dir_is_respected_and_dry_run_writes_nothing() {
    let home = Home::new();
    let dir = home.path().join("agent");
    let (code, out, _) = setup(
        &home,
        &["install-harness", "pi", "--command-path", HOOK, "--dry-run"],
        Some(&dir),
    );
    assert_eq!(code, 0);
    assert!(out.contains("+const HOOK = "), "{out}");
    assert!(!dir.exists());
    let (code, _, _) = setup(
        &home,
        &["install-harness", "pi", "--command-path", HOOK],
        Some(&dir),
    );
    assert_eq!(code, 0);
    assert!(dir.join("extensions/agentnotify.ts").exists());
    assert!(!default_extension(&home).exists());
}

#[test]
fn a_file_that_is_not_ours_is_refused_untouched_unless_forced() {
    let home = Home::new();
    let path = default_extension(&home);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "export default function () {}\n").unwrap();
    for args in [
        &["install-harness", "pi", "--command-path", HOOK][..],
        &["uninstall-harness", "pi"][..],
    ] {
        let (code, _, err) = setup(&home, args, None);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("not agentnotify's Pi extension"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "export default function () {}\n"
        );
    }
    let (code, _, _) = setup(&home, &["doctor", "pi"], None);
    assert_eq!(code, 1, "doctor pi fails on a foreign file");
    let (code, _, _) = setup(
        &home,
        &["install-harness", "pi", "--command-path", HOOK, "--force"],
        None,
    );
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), rendered(HOOK));
    let bak = path.with_file_name("agentnotify.ts.bak");
    assert_eq!(
        std::fs::read_to_string(bak).unwrap(),
        "export default function () {}\n"
    );
}

// ---- the gate ------------------------------------------------------------------------

fn call(session: &str, command: &str) -> String {
    json!({
        "tool_name": "bash",
        "tool_call_id": "call_1",
        "input": {"command": command},
        "cwd": "/home/dev/shop",
        "session_id": session,
    })
    .to_string()
}

fn gate(home: &Home, stdin: &str) -> Child {
    let mut child = home
        .cmd(HOOK)
        .args(["pi", "gate"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child
}

fn finish(mut child: Child) -> (i32, String) {
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (child.wait().unwrap().code().unwrap_or(-1), out)
}

async fn answer(api: &Api, q: &Value, choice: &str) {
    let (status, v) = api.respond(q, Api::answer(q, "r-1", choice)).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn the_gate_asks_what_runs_and_prints_the_persons_decision() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    for (n, (choice, decision)) in [("allow-once", "allow"), ("deny", "deny")]
        .iter()
        .enumerate()
    {
        let session = format!("pi-sess-{n}");
        let child = gate(&home, &call(&session, "rm -rf build"));
        let q = pending_for(&api, &session, 1).await.remove(0);
        assert_eq!(q["kind"], "permission");
        assert_eq!(q["agent"], "pi");
        assert_eq!(q["project"], "shop");
        assert_eq!(q["body"], "rm -rf build");
        assert_eq!(q["native_request_id"], "call_1");
        answer(&api, &q, choice).await;
        let expected = format!("{}\n", json!({"decision": decision}));
        assert_eq!(finish(child), (0, expected));
    }
}

#[tokio::test]
async fn the_gate_is_silent_on_garbage_and_on_what_it_cannot_show_whole() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let too_long = "x".repeat(16_385);
    let inputs = [
        String::new(),
        "not json".into(),
        "[1,2]".into(),
        json!({"tool_name": ""}).to_string(),
        json!({"tool_name": "bash", "input": {}}).to_string(),
        call("s", &too_long),
    ];
    for input in &inputs {
        let (code, out, _) = run_with_stdin(
            {
                let mut c = home.cmd(HOOK);
                c.args(["pi", "gate"]);
                c
            },
            input.as_bytes(),
        );
        assert_eq!((code, out.as_str()), (0, ""), "input {:.40}", input);
    }
    assert!(home.api().pending().await.is_empty());
}

#[tokio::test]
async fn a_signal_withdraws_the_gates_question_and_a_dead_broker_is_silence() {
    let home = Home::new();
    let mut d = Daemon::start(&home, &[]);
    let api = home.api();
    // Pi's own dialog answered first: the extension sends SIGTERM.
    let child = gate(&home, &call("pi-sig", "make deploy"));
    let q = pending_for(&api, "pi-sig", 1).await.remove(0);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(finish(child), (0, String::new()));
    let id = q["id"].as_str().unwrap();
    let (_, after) = api
        .get(&format!("/v1/interactions/{id}/wait?timeout=10"))
        .await;
    assert_eq!(after["status"], "cancelled");
    // The broker dies mid-wait: nothing is decided.
    let child = gate(&home, &call("pi-dead", "make deploy"));
    pending_for(&api, "pi-dead", 1).await;
    d.kill9();
    assert_eq!(finish(child), (0, String::new()));
}

// ---- the RPC wrapper -----------------------------------------------------------------

/// A stand-in for `pi --mode rpc`: writes its script of records, logs every line it reads,
/// and exits 7 once it got a reply for `s1`.
const FAKE_PI: &str = r#"
import json, os, sys
out = sys.stdout.buffer
def emit(b):
    out.write(b); out.flush()
emit(b"not json at all\n")
emit(json.dumps({"type": "extension_ui_request", "id": "n1", "method": "notify", "message": "hi"}).encode() + b"\n")
emit(json.dumps({"type": "extension_ui_request", "id": "s0", "method": "select", "title": "One option", "options": ["only"]}).encode() + b"\n")
emit(json.dumps({"type": "extension_ui_request", "id": "s1", "method": "select", "title": "Pick one", "options": ["a b", "c"]}).encode() + b"\n")
emit('{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Go\u2028on?","message":"sure"}\n'.encode())
with open(os.environ["FAKE_PI_LOG"], "ab") as log:
    for line in sys.stdin.buffer:
        log.write(line); log.flush()
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("id") == "s1":
            emit(b'{"type":"done"}\n')
            sys.exit(7)
"#;

struct Wrapper {
    child: Child,
    lines: std::sync::mpsc::Receiver<Vec<u8>>,
    log: PathBuf,
}

impl Wrapper {
    fn start(home: &Home) -> Wrapper {
        let script = home.path().join("fake_pi.py");
        std::fs::write(&script, FAKE_PI).unwrap();
        let log = home.path().join("fake_pi.log");
        let mut child = home
            .cmd(AGENTNOTIFY)
            .args(["pi", "--", "python3"])
            .arg(&script)
            .env("FAKE_PI_LOG", &log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                    break;
                }
                let _ = tx.send(line);
            }
        });
        Wrapper { child, lines, log }
    }

    fn line(&self) -> Vec<u8> {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a line from the wrapper")
    }
}

#[tokio::test]
async fn the_wrapper_passes_everything_through_and_answers_dialogs_from_the_broker() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let api = home.api();
    let mut w = Wrapper::start(&home);
    // Pi's stdout reaches the person byte for byte, garbage and U+2028 included.
    assert_eq!(w.line(), b"not json at all\n");
    assert!(String::from_utf8(w.line()).unwrap().contains("\"notify\""));
    assert!(String::from_utf8(w.line()).unwrap().contains("\"s0\""));
    assert!(String::from_utf8(w.line()).unwrap().contains("\"s1\""));
    assert_eq!(
        w.line(),
        "{\"type\":\"extension_ui_request\",\"id\":\"c1\",\"method\":\"confirm\",\"title\":\"Go\u{2028}on?\",\"message\":\"sure\"}\n".as_bytes()
    );
    let select = api
        .pending_where("a Pi question", |q| q["native_request_id"] == "s1")
        .await;
    assert_eq!(select["kind"], "single_choice");
    assert_eq!(select["prompt"], "Pick one");
    let labels: Vec<&str> = select["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["a b", "c"]);
    let confirm = api
        .pending_where("a Pi question", |q| q["native_request_id"] == "c1")
        .await;
    assert_eq!(
        (confirm["kind"].as_str(), confirm["body"].as_str()),
        (Some("permission"), Some("sure"))
    );
    // A one-option select cannot be a question: it is left to the client.
    assert!(api
        .pending()
        .await
        .iter()
        .all(|q| q["native_request_id"] != "s0"));
    // The person's garbage goes to Pi unchanged.
    let mut stdin = w.child.stdin.take().unwrap();
    stdin.write_all(b"\x01 not json\n").unwrap();
    stdin.flush().unwrap();
    answer(&api, &select, "o1").await;
    assert_eq!(w.line(), b"{\"type\":\"done\"}\n");
    let code = w.child.wait().unwrap().code();
    assert_eq!(code, Some(7), "Pi's exit code is the wrapper's");
    let log = std::fs::read_to_string(&w.log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "\x01 not json");
    let reply: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(
        reply,
        json!({"type": "extension_ui_response", "id": "s1", "value": "a b"})
    );
    // Pi exited: the confirm still open is withdrawn.
    let id = confirm["id"].as_str().unwrap();
    let (_, after) = api.get(&format!("/v1/interactions/{id}")).await;
    assert_eq!(after["status"], "cancelled");
    drop(stdin);
}

#[test]
fn the_wrapper_without_a_command_is_a_usage_error_and_a_missing_pi_an_error() {
    let home = Home::new();
    let (code, _, err) = run_with_stdin(
        {
            let mut c = home.cmd(AGENTNOTIFY);
            c.arg("pi");
            c
        },
        b"",
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run_with_stdin(
        {
            let mut c = home.cmd(AGENTNOTIFY);
            c.args(["pi", "--ttl", "5", "--", "pi"]);
            c
        },
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("--ttl"), "{err}");
    let (code, out, err) = run_with_stdin(
        {
            let mut c = home.cmd(AGENTNOTIFY);
            c.args(["pi", "--", "/nonexistent/pi", "--mode", "rpc"]);
            c
        },
        b"",
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("cannot start /nonexistent/pi"), "{err}");
}
