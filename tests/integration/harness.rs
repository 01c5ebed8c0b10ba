//! `install-harness`, `uninstall-harness` and `doctor` run as the real binary against
//! temporary HOME / CODEX_HOME / AGENTNOTIFY_HOME folders, checking the files they leave.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::Home;

const BIN: &str = env!("CARGO_BIN_EXE_agentnotify-hook");

/// The suite's temp home ([`Home`]) with a Codex home, a PATH and a cwd of its own, for
/// commands run with nothing else of the caller's environment.
struct Sandbox {
    _home: Home,
    root: PathBuf,
    home: PathBuf,
    codex_home: PathBuf,
    agentnotify_home: PathBuf,
    bin: PathBuf,
    cwd: PathBuf,
    codex_home_env: bool,
}

impl Sandbox {
    fn new() -> Sandbox {
        let base = Home::new();
        // Canonical, so paths we expect match what the binary computes.
        let root = std::fs::canonicalize(base.path()).unwrap();
        let home = root.join("home");
        let codex_home = root.join("codex-home");
        let agentnotify_home = root.join("agentnotify");
        let bin = root.join("bin");
        for d in [&home, &codex_home, &agentnotify_home, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        // A stand-in bridge executable, so the written path is predictable.
        let exe = bin.join("agentnotify-hook");
        std::fs::write(&exe, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Sandbox {
            _home: base,
            cwd: home.clone(),
            root,
            home,
            codex_home,
            agentnotify_home,
            bin,
            codex_home_env: true,
        }
    }

    fn exe(&self) -> String {
        self.bin.join("agentnotify-hook").display().to_string()
    }

    fn claude_settings(&self) -> PathBuf {
        self.home.join(".claude/settings.json")
    }

    fn codex_hooks(&self) -> PathBuf {
        self.codex_home.join("hooks.json")
    }

    fn codex_config(&self) -> PathBuf {
        self.codex_home.join("config.toml")
    }

    /// Runs the real binary with only the sandbox's environment.
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// [`Sandbox::run`] with extra environment variables.
    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_clear()
            .envs(env.iter().copied())
            .env("HOME", &self.home)
            .env("AGENTNOTIFY_HOME", &self.agentnotify_home)
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .current_dir(&self.cwd);
        if self.codex_home_env {
            cmd.env("CODEX_HOME", &self.codex_home);
        }
        cmd.output().unwrap()
    }

    /// Installs for `host` with the stand-in executable, plus `extra` arguments.
    fn install(&self, host: &str, extra: &[&str]) -> Output {
        let exe = self.exe();
        let mut args = vec!["install-harness", host, "--ask", "--command-path", &exe];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn assert_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn bak(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.bak", path.display()))
}

/// Our handlers in a hook file, by meaning.
fn our_handlers(doc: &Value) -> Vec<Value> {
    doc["hooks"]["PermissionRequest"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.contains("agentnotify-hook") && c.contains("ask-permission"))
        })
        .collect()
}

/// The Codex trust hash, computed here straight from the HOSTS.md recipe.
fn recipe_hash(command: &str, timeout: u64) -> String {
    let json = format!(
        r#"{{"event_name":"permission_request","hooks":[{{"async":false,"command":{},"timeout":{timeout},"type":"command"}}],"matcher":"*"}}"#,
        serde_json::to_string(command).unwrap()
    );
    let digest = Sha256::digest(json.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A snippet of the top-level `harness/` folder with its `"{{name}}"` placeholders replaced
/// (quotes included) by already-encoded values: what install must write.
fn filled(snippet: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(snippet.to_string(), |text, (name, value)| {
            let placeholder = format!("\"{{{{{name}}}}}\"");
            assert!(text.contains(&placeholder), "{placeholder} in {snippet}");
            text.replace(&placeholder, value)
        })
}

/// The host's hook file snippet for our command, as a fresh install writes it.
fn hook_snippet(snippet: &str, command: &str, timeout: u64) -> String {
    let mut values = vec![
        ("command", serde_json::to_string(command).unwrap()),
        ("timeout", timeout.to_string()),
    ];
    // Claude's snippet also holds the PreToolUse handler for AskUserQuestion.
    if snippet.contains("{{pre_tool_use_command}}") {
        let pre_tool_use = command.replace(" ask-permission ", " pre-tool-use ");
        values.push((
            "pre_tool_use_command",
            serde_json::to_string(&pre_tool_use).unwrap(),
        ));
    }
    filled(snippet, &values)
}

const CLAUDE_SNIPPET: &str = include_str!("../../harness/claude/settings.json");
const CODEX_SNIPPET: &str = include_str!("../../harness/codex/hooks.json");
const CODEX_TRUST_SNIPPET: &str = include_str!("../../harness/codex/trust.toml");

#[test]
fn fresh_claude_install_writes_the_spec_group() {
    let sb = Sandbox::new();
    let out = sb.install("claude", &[]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("installed the PermissionRequest hook"));
    let expected = hook_snippet(
        CLAUDE_SNIPPET,
        &format!("{} claude ask-permission --timeout 590", sb.exe()),
        600,
    );
    assert_eq!(read(&sb.claude_settings()), expected);
    assert!(!bak(&sb.claude_settings()).exists(), "nothing to back up");
}

#[test]
fn fresh_codex_install_writes_the_harness_snippet() {
    let sb = Sandbox::new();
    assert_code(&sb.install("codex", &["--timeout", "100"]), 0);
    let expected = hook_snippet(
        CODEX_SNIPPET,
        &format!("{} codex ask-permission --timeout 100", sb.exe()),
        110,
    );
    assert_eq!(read(&sb.codex_hooks()), expected);
}

#[test]
fn default_command_is_this_binary_by_absolute_path() {
    let sb = Sandbox::new();
    assert_code(&sb.run(&["install-harness", "claude", "--ask"]), 0);
    let doc = read_json(&sb.claude_settings());
    let exe = std::fs::canonicalize(BIN).unwrap();
    assert_eq!(
        our_handlers(&doc)[0]["command"],
        format!("{} claude ask-permission --timeout 590", exe.display())
    );
}

#[test]
fn second_run_changes_no_byte_and_says_so() {
    let sb = Sandbox::new();
    write(&sb.claude_settings(), "{\"model\": \"opus\"}\n");
    assert_code(&sb.install("claude", &[]), 0);
    let bytes = std::fs::read(sb.claude_settings()).unwrap();
    let inode = std::fs::metadata(sb.claude_settings()).unwrap().ino();
    let bak_bytes = std::fs::read(bak(&sb.claude_settings())).unwrap();

    let out = sb.install("claude", &[]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("already up to date"),
        "{}",
        stdout(&out)
    );
    assert_eq!(std::fs::read(sb.claude_settings()).unwrap(), bytes);
    assert_eq!(
        std::fs::metadata(sb.claude_settings()).unwrap().ino(),
        inode,
        "not even rewritten"
    );
    assert_eq!(
        std::fs::read(bak(&sb.claude_settings())).unwrap(),
        bak_bytes
    );
}

#[test]
fn unrelated_keys_other_hooks_and_order_survive() {
    let sb = Sandbox::new();
    let original = json!({
        "zeta": {"nested": [1, 2.5, "é"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/opt/audit pre"}]}],
            "PermissionRequest": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "/opt/other-tool ask"}]}],
            "Stop": []
        },
        "alpha": true
    });
    write(
        &sb.claude_settings(),
        &serde_json::to_string_pretty(&original).unwrap(),
    );
    assert_code(&sb.install("claude", &[]), 0);

    let doc = read_json(&sb.claude_settings());
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["zeta", "hooks", "alpha"]);
    let events: Vec<&String> = doc["hooks"].as_object().unwrap().keys().collect();
    assert_eq!(events, ["PreToolUse", "PermissionRequest", "Stop"]);
    let groups = doc["hooks"]["PermissionRequest"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        groups[0], original["hooks"]["PermissionRequest"][0],
        "other tool's group first, untouched"
    );
    assert_eq!(groups[1]["matcher"], "*");
    let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(
        pre[0], original["hooks"]["PreToolUse"][0],
        "theirs first, untouched"
    );
    assert_eq!(pre[1]["matcher"], "AskUserQuestion");
    // Everything but our groups is exactly the original.
    let mut without_ours = doc.clone();
    for event in ["PermissionRequest", "PreToolUse"] {
        without_ours["hooks"][event].as_array_mut().unwrap().pop();
    }
    assert_eq!(without_ours, original);
}

#[test]
fn changing_options_replaces_our_entry_in_place() {
    let sb = Sandbox::new();
    write(
        &sb.claude_settings(),
        r#"{"hooks": {"PermissionRequest": [
            {"matcher": "*", "hooks": [{"type": "command", "command": "/first"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "/old/place/agentnotify-hook claude ask-permission"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "/last"}]}
        ]}}"#,
    );
    let other_exe = sb.root.join("other dir/agentnotify-hook");
    let other = other_exe.display().to_string();
    let out = sb.run(&[
        "install-harness",
        "claude",
        "--ask",
        "--command-path",
        &other,
        "--timeout",
        "120",
    ]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("in place"), "{}", stdout(&out));
    let doc = read_json(&sb.claude_settings());
    let groups = doc["hooks"]["PermissionRequest"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "replaced, not added");
    assert_eq!(groups[0]["hooks"][0]["command"], "/first");
    assert_eq!(groups[2]["hooks"][0]["command"], "/last");
    assert_eq!(
        groups[1]["hooks"][0],
        json!({"type": "command", "command": format!("'{other}' claude ask-permission --timeout 120"), "timeout": 130})
    );

    assert_code(&sb.install("claude", &[]), 0);
    let doc = read_json(&sb.claude_settings());
    assert_eq!(our_handlers(&doc).len(), 1);
    assert_eq!(
        doc["hooks"]["PermissionRequest"][1]["hooks"][0]["timeout"],
        600
    );
}

#[test]
fn invalid_json_is_refused_untouched_unless_forced() {
    let sb = Sandbox::new();
    let broken = "{\n  \"model\": \"opus\",\n}\n";
    write(&sb.claude_settings(), broken);
    let out = sb.install("claude", &[]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains("not valid JSON") && err.contains("line 3") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(read(&sb.claude_settings()), broken);
    assert!(!bak(&sb.claude_settings()).exists());

    let out = sb.install("claude", &["--force"]);
    assert_code(&out, 0);
    assert_eq!(our_handlers(&read_json(&sb.claude_settings())).len(), 1);
    assert_eq!(
        read(&bak(&sb.claude_settings())),
        broken,
        "the broken bytes are kept"
    );
}

#[test]
fn wrong_typed_hooks_are_refused_untouched_unless_forced() {
    let sb = Sandbox::new();
    let text = "{\"model\": \"opus\", \"hooks\": [\"not\", \"an object\"]}\n";
    write(&sb.claude_settings(), text);
    let out = sb.install("claude", &[]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("\"hooks\" must be an object but is an array"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&sb.claude_settings()), text);

    write(
        &sb.claude_settings(),
        "{\"hooks\": {\"PermissionRequest\": {}}}",
    );
    let out = sb.install("claude", &[]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("must be an array"),
        "{}",
        stderr(&out)
    );

    write(&sb.claude_settings(), text);
    assert_code(&sb.install("claude", &["--force"]), 0);
    let doc = read_json(&sb.claude_settings());
    assert_eq!(doc["model"], "opus", "other keys survive --force");
    assert_eq!(our_handlers(&doc).len(), 1);
    assert_eq!(read(&bak(&sb.claude_settings())), text);
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let sb = Sandbox::new();
    let text = "{\n  \"model\": \"opus\"\n}\n";
    write(&sb.claude_settings(), text);
    let out = sb.install("claude", &["--dry-run"]);
    assert_code(&out, 0);
    let diff = stdout(&out);
    assert!(
        diff.contains(&format!("--- {}", sb.claude_settings().display())),
        "{diff}"
    );
    assert!(
        diff.contains("-  \"model\": \"opus\"\n+  \"model\": \"opus\",\n"),
        "{diff}"
    );
    assert!(
        diff.contains(&format!(
            "+            \"command\": \"{} claude ask-permission --timeout 590\",",
            sb.exe()
        )),
        "{diff}"
    );
    assert_eq!(read(&sb.claude_settings()), text);
    assert!(!bak(&sb.claude_settings()).exists());

    // Nothing is created either.
    let out = sb.install("codex", &["--dry-run", "--trust"]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("+++ "), "{}", stdout(&out));
    assert!(!sb.codex_hooks().exists() && !sb.codex_config().exists());
}

#[test]
fn permissions_are_kept_and_the_backup_is_written_once() {
    let sb = Sandbox::new();
    let original = "{\"model\": \"opus\"}\n";
    write(&sb.claude_settings(), original);
    std::fs::set_permissions(sb.claude_settings(), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_code(&sb.install("claude", &[]), 0);
    assert_eq!(mode(&sb.claude_settings()), 0o600);
    assert_eq!(mode(&bak(&sb.claude_settings())), 0o600);
    assert_eq!(read(&bak(&sb.claude_settings())), original);

    std::fs::set_permissions(sb.claude_settings(), std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_code(&sb.install("claude", &["--timeout", "60"]), 0);
    assert_eq!(mode(&sb.claude_settings()), 0o640);
    assert_eq!(
        read(&bak(&sb.claude_settings())),
        original,
        "the .bak is the pre-install file, written once"
    );
}

#[test]
fn uninstall_restores_the_original_bytes() {
    let sb = Sandbox::new();
    // Formatting serde_json would never produce: it must come back exactly.
    let original =
        "{ \"model\":\"opus\",\n\t\"permissions\": {\"allow\": [ \"Bash(ls)\" ]}, \"hooks\": {}\n}";
    write(&sb.claude_settings(), original);
    assert_code(&sb.install("claude", &[]), 0);
    assert_ne!(read(&sb.claude_settings()), original);
    let out = sb.run(&["uninstall-harness", "claude"]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("restored"), "{}", stdout(&out));
    assert_eq!(read(&sb.claude_settings()), original);
    assert!(
        !bak(&sb.claude_settings()).exists(),
        "its content is back in place"
    );

    let out = sb.run(&["uninstall-harness", "claude"]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("not installed"));
    assert_eq!(read(&sb.claude_settings()), original);
}

#[test]
fn uninstall_removes_a_file_install_created() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    // A later reinstall with other options must not back up our own file as "original".
    assert_code(&sb.install("claude", &["--timeout", "30"]), 0);
    assert!(!bak(&sb.claude_settings()).exists());
    assert_code(&sb.run(&["uninstall-harness", "claude"]), 0);
    assert!(!sb.claude_settings().exists());
    assert!(
        !sb.home.join(".claude").exists(),
        "the folder install made is gone too"
    );
}

#[test]
fn uninstall_removes_exactly_ours_and_prunes_what_it_emptied() {
    let sb = Sandbox::new();
    let ours = |exe: &str| json!({"type": "command", "command": format!("{exe} claude ask-permission --timeout 590"), "timeout": 600});
    let theirs = json!({"type": "command", "command": "/opt/other-tool"});
    write(
        &sb.claude_settings(),
        &json!({
            "hooks": {
                "PermissionRequest": [
                    {"matcher": "*", "hooks": [theirs.clone(), ours("/a/agentnotify-hook")]},
                    {"matcher": "*", "hooks": [ours("/b/agentnotify-hook")]}
                ],
                "Stop": [{"hooks": [theirs.clone()]}]
            },
            "model": "opus"
        })
        .to_string(),
    );
    assert_code(&sb.run(&["uninstall-harness", "claude"]), 0);
    assert_eq!(
        read_json(&sb.claude_settings()),
        json!({
            "hooks": {
                "PermissionRequest": [{"matcher": "*", "hooks": [theirs.clone()]}],
                "Stop": [{"hooks": [theirs.clone()]}]
            },
            "model": "opus"
        })
    );

    write(
        &sb.claude_settings(),
        &json!({"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [ours("/a/agentnotify-hook")]}], "Stop": [{"hooks": [theirs.clone()]}]}}).to_string(),
    );
    assert_code(&sb.run(&["uninstall-harness", "claude"]), 0);
    assert_eq!(
        read_json(&sb.claude_settings()),
        json!({"hooks": {"Stop": [{"hooks": [theirs]}]}}),
        "the emptied group and event are pruned"
    );
}

#[test]
fn uninstall_keeps_later_edits_and_the_backup() {
    let sb = Sandbox::new();
    write(&sb.claude_settings(), "{\"model\": \"opus\"}\n");
    assert_code(&sb.install("claude", &[]), 0);
    let mut doc = read_json(&sb.claude_settings());
    doc["model"] = json!("sonnet");
    write(
        &sb.claude_settings(),
        &serde_json::to_string_pretty(&doc).unwrap(),
    );
    let out = sb.run(&["uninstall-harness", "claude"]);
    assert_code(&out, 0);
    assert_eq!(
        read(&sb.claude_settings()),
        "{\n  \"model\": \"sonnet\"\n}\n"
    );
    assert!(bak(&sb.claude_settings()).exists());
}

#[test]
fn codex_install_is_nested_under_hooks_and_respects_the_root_rule() {
    let sb = Sandbox::new();
    write(&sb.codex_hooks(), "{\"description\": \"team hooks\"}\n");
    let out = sb.install("codex", &[]);
    assert_code(&out, 0);
    let doc = read_json(&sb.codex_hooks());
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["description", "hooks"]);
    assert_eq!(
        doc["hooks"]["PermissionRequest"][0],
        json!({"matcher": "*", "hooks": [{"type": "command", "command": format!("{} codex ask-permission --timeout 590", sb.exe()), "timeout": 600}]})
    );
    let text = stdout(&out);
    assert!(
        text.contains("/hooks") && text.contains("--trust") && text.contains("untrusted"),
        "{text}"
    );
    assert!(
        !sb.codex_config().exists(),
        "no trust written without --trust"
    );

    // A flat (root-level) event list is rejected by Codex: refuse to build on it.
    let flat = "{\"PermissionRequest\": []}";
    write(&sb.codex_hooks(), flat);
    let out = sb.install("codex", &[]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("\"PermissionRequest\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&sb.codex_hooks()), flat);
}

#[test]
fn codex_home_defaults_to_dot_codex_in_home() {
    let mut sb = Sandbox::new();
    sb.codex_home_env = false;
    assert_code(&sb.install("codex", &[]), 0);
    assert!(sb.home.join(".codex/hooks.json").exists());
    assert!(!sb.codex_hooks().exists());
    assert_code(&sb.install("codex", &["--trust"]), 0);
    assert!(read(&sb.home.join(".codex/config.toml")).contains(&format!(
        "[hooks.state.\"{}:permission_request:0:0\"]",
        sb.home.join(".codex/hooks.json").display()
    )));
    assert_code(&sb.run(&["uninstall-harness", "codex"]), 0);
    assert!(
        !sb.home.join(".codex").exists(),
        "a clean home is clean again"
    );
}

#[test]
fn uninstall_never_removes_the_codex_home_folder() {
    let sb = Sandbox::new();
    for extra in [&[][..], &["--trust"][..]] {
        assert_code(&sb.install("codex", extra), 0);
        assert_code(&sb.run(&["uninstall-harness", "codex"]), 0);
        assert!(!sb.codex_hooks().exists() && !sb.codex_config().exists());
        assert!(sb.codex_home.is_dir(), "Codex needs CODEX_HOME to exist");
    }
}

const CODEX_CONFIG: &str = r#"# Codex settings, hand-written
model = "o3"          # the default model
approval_policy = "on-request"

[projects."/src/shop"]
trust_level = "trusted"   # keep me

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "9"]

# end of file comment
"#;

#[test]
fn codex_trust_writes_the_recipe_hash_and_uninstall_removes_exactly_it() {
    let sb = Sandbox::new();
    write(&sb.codex_config(), CODEX_CONFIG);
    std::fs::set_permissions(sb.codex_config(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = sb.install("codex", &["--trust"]);
    assert_code(&out, 0);

    let config = read(&sb.codex_config());
    assert!(
        config.starts_with(CODEX_CONFIG.trim_end_matches("# end of file comment\n")),
        "{config}"
    );
    assert!(config.contains("# end of file comment"), "{config}");
    let key = format!("{}:permission_request:0:0", sb.codex_hooks().display());
    let hash = recipe_hash(
        &format!("{} codex ask-permission --timeout 590", sb.exe()),
        600,
    );
    let entry = filled(
        CODEX_TRUST_SNIPPET,
        &[
            ("key", toml::Value::from(key.as_str()).to_string()),
            ("hash", toml::Value::from(hash.as_str()).to_string()),
        ],
    );
    assert!(config.contains(&entry), "expected\n{entry}\nin\n{config}");
    assert_eq!(mode(&sb.codex_config()), 0o600);
    assert_eq!(read(&bak(&sb.codex_config())), CODEX_CONFIG);

    // Rerun: no duplicate table, no byte changed.
    let out = sb.install("codex", &["--trust"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("already recorded"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(&sb.codex_config()), config);
    assert_eq!(config.matches("[hooks.state.").count(), 1);

    // Changing the budget changes the hash; the entry is updated, not duplicated.
    assert_code(&sb.install("codex", &["--trust", "--timeout", "100"]), 0);
    let updated = read(&sb.codex_config());
    assert_eq!(updated.matches("[hooks.state.").count(), 1, "{updated}");
    assert!(updated.contains(&recipe_hash(
        &format!("{} codex ask-permission --timeout 100", sb.exe()),
        110
    )));

    let out = sb.run(&["uninstall-harness", "codex"]);
    assert_code(&out, 0);
    assert_eq!(
        read(&sb.codex_config()),
        CODEX_CONFIG,
        "config.toml is byte-for-byte as before"
    );
    assert!(!sb.codex_hooks().exists());
}

#[test]
fn codex_trust_keeps_other_trust_entries_on_uninstall() {
    let sb = Sandbox::new();
    write(&sb.codex_config(), CODEX_CONFIG);
    assert_code(&sb.install("codex", &["--trust"]), 0);
    // Codex records another hook's trust after our install.
    let mut config = read(&sb.codex_config());
    config.push_str(
        "\n[hooks.state.\"/elsewhere/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:00\"\n",
    );
    write(&sb.codex_config(), &config);
    assert_code(&sb.run(&["uninstall-harness", "codex"]), 0);
    let after = read(&sb.codex_config());
    assert!(!after.contains("permission_request"), "{after}");
    assert!(
        after.contains(
            "[hooks.state.\"/elsewhere/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:00\""
        ),
        "{after}"
    );
    assert!(
        after.starts_with(CODEX_CONFIG.trim_end_matches("# end of file comment\n")),
        "{after}"
    );
}

#[test]
fn project_scope_writes_at_the_repository_root() {
    let mut sb = Sandbox::new();
    let repo = sb.root.join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    sb.cwd = repo.join("src/deep");
    assert_code(&sb.install("claude", &["--scope", "project"]), 0);
    assert_code(&sb.install("codex", &["--scope", "project", "--trust"]), 0);
    assert_eq!(
        our_handlers(&read_json(&repo.join(".claude/settings.json"))).len(),
        1
    );
    assert_eq!(
        our_handlers(&read_json(&repo.join(".codex/hooks.json"))).len(),
        1
    );
    assert!(!sb.claude_settings().exists() && !sb.codex_hooks().exists());
    let key = format!(
        "{}:permission_request:0:0",
        repo.join(".codex/hooks.json").display()
    );
    assert!(
        read(&sb.codex_config()).contains(&key),
        "trust lives in the user config.toml"
    );

    let out = sb.run(&["doctor", "claude", "codex"]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("project scope"), "{}", stdout(&out));
}

#[test]
fn doctor_is_green_when_everything_is_set_up() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    assert_code(&sb.install("codex", &["--trust"]), 0);
    let out = sb.run(&["doctor"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("All good.") && !text.contains("FAIL"),
        "{text}"
    );
    assert!(text.contains("not running (starts on demand)"), "{text}");

    let out = sb.run(&["doctor", "--json"]);
    assert_code(&out, 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], true);
    let trust = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "trust")
        .unwrap();
    assert_eq!(trust["trust"], "trusted");
    assert_eq!(trust["host"], "codex");
}

#[test]
fn doctor_says_when_claudes_ask_user_question_hook_is_missing() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    let check = |sb: &Sandbox| {
        let out = sb.run(&["doctor", "claude", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "ask_user_question_hook")
            .unwrap()
            .clone()
    };
    assert_eq!(check(&sb)["status"], "ok");
    // An install from before the PreToolUse path: only the PermissionRequest group.
    let mut doc = read_json(&sb.claude_settings());
    doc["hooks"].as_object_mut().unwrap().remove("PreToolUse");
    write(&sb.claude_settings(), &doc.to_string());
    let missing = check(&sb);
    assert_eq!(missing["status"], "info");
    assert!(missing["fix"]
        .as_str()
        .unwrap()
        .contains("install-harness claude"));
    assert_code(&sb.install("claude", &[]), 0);
    assert_eq!(check(&sb)["status"], "ok", "a reinstall adds it");
}

#[test]
fn doctor_reports_untrusted_and_modified_codex_hooks() {
    let sb = Sandbox::new();
    assert_code(&sb.install("codex", &[]), 0);
    let out = sb.run(&["doctor", "codex", "--json"]);
    assert_code(&out, 1);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let trust = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "trust")
        .unwrap()
        .clone();
    assert_eq!(trust["trust"], "untrusted");
    assert_eq!(trust["status"], "fail");
    assert!(trust["fix"].as_str().unwrap().contains("/hooks"));

    assert_code(&sb.install("codex", &["--trust"]), 0);
    assert_code(&sb.run(&["doctor", "codex"]), 0);
    // A new budget changes the hook, so the recorded trust no longer matches.
    assert_code(&sb.install("codex", &["--timeout", "300"]), 0);
    let out = sb.run(&["doctor", "codex"]);
    assert_code(&out, 1);
    assert!(stdout(&out).contains("trust: modified"), "{}", stdout(&out));
}

#[test]
fn doctor_fails_with_fixes_for_broken_setups() {
    let sb = Sandbox::new();
    // Nothing installed at all.
    let out = sb.run(&["doctor"]);
    assert_code(&out, 1);
    assert!(
        stdout(&out).contains("install-harness claude --ask"),
        "{}",
        stdout(&out)
    );

    assert_code(&sb.install("claude", &[]), 0);
    assert_code(&sb.run(&["doctor"]), 0);

    // The executable lost its x bit.
    std::fs::set_permissions(sb.exe(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = sb.run(&["doctor"]);
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  claude: command:") && text.contains("not executable"),
        "{text}"
    );
    assert!(
        text.contains("fix: run `agentnotify-hook install-harness claude --ask`"),
        "{text}"
    );
    std::fs::set_permissions(sb.exe(), std::fs::Permissions::from_mode(0o755)).unwrap();

    // A readable token file.
    let token = sb.agentnotify_home.join("token");
    write(&token, "secret");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = sb.run(&["doctor", "--json"]);
    assert_code(&out, 1);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "token_file")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "fail");
    assert!(check["fix"].as_str().unwrap().starts_with("chmod 600"));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_code(&sb.run(&["doctor"]), 0);

    // A named host that is not set up.
    let out = sb.run(&["doctor", "codex"]);
    assert_code(&out, 1);
    assert!(stdout(&out).contains("install-harness codex --ask"));
}

#[test]
fn doctor_fails_when_the_binary_is_not_on_path() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    std::fs::remove_file(sb.exe()).unwrap();
    let out = sb.run(&["doctor"]);
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(text.contains("FAIL  binary on path"), "{text}");
    assert!(text.contains("missing or not executable"), "{text}");
}

/// Serves one HTTP response on a loopback port and records broker.json (and the token a
/// broker writes first) pointing at it.
fn fake_broker(sb: &Sandbox, response: &'static str) -> std::thread::JoinHandle<String> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    write(
        &sb.agentnotify_home.join("broker.json"),
        &json!({"pid": 1, "port": port, "url": format!("http://127.0.0.1:{port}"), "version": "0.1.0", "api": "v1", "started_at": "2026-01-01T00:00:00Z"}).to_string(),
    );
    let token = sb.agentnotify_home.join("token");
    write(&token, "fake-token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.ends_with(b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        stream.write_all(response.as_bytes()).unwrap();
        String::from_utf8(request).unwrap()
    })
}

#[test]
fn doctor_reaches_a_running_broker() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    let body = r#"{"status":"ok","version":"9.9.9","api":"v1"}"#;
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let server = fake_broker(&sb, response);
    let out = sb.run(&["doctor"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("reachable at http://127.0.0.1:") && stdout(&out).contains("9.9.9"),
        "{}",
        stdout(&out)
    );
    assert!(server
        .join()
        .unwrap()
        .starts_with("GET /health HTTP/1.1\r\n"));
}

#[test]
fn doctor_fails_when_something_else_holds_the_broker_port() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    let server = fake_broker(&sb, "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    let out = sb.run(&["doctor"]);
    assert_code(&out, 1);
    assert!(
        stdout(&out).contains("not as the agentnotify broker"),
        "{}",
        stdout(&out)
    );
    server.join().unwrap();
}

/// doctor looks where every client looks: `AGENTNOTIFY_URL` counts only with
/// `AGENTNOTIFY_TOKEN`, as for the hook.
#[test]
fn doctor_finds_the_broker_as_the_hook_does() {
    let sb = Sandbox::new();
    assert_code(&sb.install("claude", &[]), 0);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let out = sb.run_with(&["doctor"], &[("AGENTNOTIFY_URL", &dead)]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("broker: not running (starts on demand)"),
        "{}",
        stdout(&out)
    );
    let out = sb.run_with(
        &["doctor"],
        &[("AGENTNOTIFY_URL", &dead), ("AGENTNOTIFY_TOKEN", "t")],
    );
    assert_code(&out, 1);
    assert!(
        stdout(&out).contains(&format!(
            "FAIL  broker: nothing answers at {dead} (AGENTNOTIFY_URL)"
        )),
        "{}",
        stdout(&out)
    );
}

#[test]
fn paths_with_spaces_are_quoted_for_the_shell() {
    let sb = Sandbox::new();
    let dir = sb.root.join("My Tools");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("agentnotify-hook");
    std::fs::copy(sb.bin.join("agentnotify-hook"), &exe).unwrap();
    let exe = exe.display().to_string();
    assert_code(
        &sb.run(&["install-harness", "codex", "--ask", "--command-path", &exe]),
        0,
    );
    let command = our_handlers(&read_json(&sb.codex_hooks()))[0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        command,
        format!("'{exe}' codex ask-permission --timeout 590")
    );
    // The shell sees one word for the executable.
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{} ; echo ran", command))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert_code(&sb.run(&["doctor", "codex", "--json"]), 1); // untrusted only
    let report: Value =
        serde_json::from_slice(&sb.run(&["doctor", "codex", "--json"]).stdout).unwrap();
    let failing: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0]["name"], "trust");
}

#[test]
fn setup_exit_codes_follow_the_one_table() {
    let sb = Sandbox::new();
    for args in [
        &["install-harness", "--bogus"][..],
        &["uninstall-harness", "claude", "--bogus"][..],
        &["doctor", "--bogus"][..],
    ] {
        assert_code(&sb.run(args), 2);
    }
    for args in [
        &["--help"][..],
        &["install-harness", "--help"][..],
        &["uninstall-harness", "--help"][..],
        &["doctor", "--help"][..],
    ] {
        let out = sb.run(args);
        assert_code(&out, 0);
        assert!(
            stdout(&out).contains("exit codes: 0 ok, 1 error, 2 usage, 3 not found.")
                || stdout(&out).contains("Exit codes: 0 ok, 1 error, 2 usage, 3 not found."),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    // The bridge itself never exits non-zero, whatever its arguments.
    assert_code(&sb.run(&["--bogus"]), 0);
}

#[test]
fn usage_errors_and_help() {
    let sb = Sandbox::new();
    let out = sb.run(&["install-harness", "claude", "--ask", "--trust"]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains("--trust applies to codex only"));
    let out = sb.run(&["install-harness", "vim"]);
    assert_code(&out, 2);
    let out = sb.run(&["install-harness", "--help"]);
    assert_code(&out, 0);
    let help = stdout(&out);
    assert!(
        help.contains("--dry-run") && help.contains("--scope") && help.contains("--command-path"),
        "{help}"
    );
    let out = sb.run(&[
        "install-harness",
        "claude",
        "--command-path",
        "relative/agentnotify-hook",
    ]);
    assert_code(&out, 1);
    assert!(stderr(&out).contains("absolute"), "{}", stderr(&out));
    let out = sb.run(&[
        "install-harness",
        "claude",
        "--command-path",
        "/usr/bin/env",
    ]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("agentnotify-hook executable"),
        "{}",
        stderr(&out)
    );
    assert!(!sb.claude_settings().exists());
}

#[test]
fn the_help_lists_every_host_one_line_each() {
    let sb = Sandbox::new();
    for command in ["install-harness", "uninstall-harness", "doctor"] {
        let out = sb.run(&[command, "--help"]);
        assert_code(&out, 0);
        let help = stdout(&out);
        for host in ["claude", "codex", "pi", "hermes", "openclaw"] {
            let lines = help
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("- {host}:")))
                .count();
            assert_eq!(lines, 1, "{command}: {host} in\n{help}");
        }
    }
    // Each host's files are named in install-harness' help.
    let help = stdout(&sb.run(&["install-harness", "--help"]));
    for file in [
        "settings.json",
        "hooks.json",
        "agentnotify.ts",
        "plugins/agentnotify/",
        "agentnotify-openclaw.service",
    ] {
        assert!(help.contains(file), "{file}: {help}");
    }
}

#[test]
fn an_option_of_another_host_is_a_usage_error_naming_both() {
    let sb = Sandbox::new();
    for (args, says) in [
        (
            &["install-harness", "hermes", "--url", "ws://127.0.0.1:1"][..],
            "--url applies to openclaw only, not hermes",
        ),
        (
            &["install-harness", "openclaw", "--scope", "project"][..],
            "--scope applies to claude and codex only, not openclaw",
        ),
        (
            &["install-harness", "pi", "--notify"][..],
            "--notify applies to claude and codex only, not pi",
        ),
        (
            &[
                "install-harness",
                "openclaw",
                "--command-path",
                "/x/agentnotify-hook",
            ][..],
            "--command-path applies to claude, codex, pi and hermes only, not openclaw",
        ),
        (
            &[
                "install-harness",
                "claude",
                "--agentnotify",
                "/x/agentnotify",
            ][..],
            "--agentnotify applies to openclaw only, not claude",
        ),
        (
            &["install-harness", "hermes", "--force"][..],
            "--force applies to claude, codex, pi and openclaw only, not hermes",
        ),
        (
            &["uninstall-harness", "claude", "--force"][..],
            "--force applies to pi only, not claude",
        ),
        (
            &["uninstall-harness", "hermes", "--scope", "user"][..],
            "--scope applies to claude and codex only, not hermes",
        ),
    ] {
        let out = sb.run(args);
        assert_code(&out, 2);
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
    // Nothing was written for any of them.
    assert!(!sb.home.join(".config").exists());
    assert!(!sb.home.join(".hermes").exists());
    assert!(!sb.home.join(".pi").exists());
    assert!(!sb.claude_settings().exists());
}

#[test]
fn doctor_openclaw_is_accepted_and_reports_the_unit() {
    let sb = Sandbox::new();
    let openclaw = |checks: &Value| -> Vec<Value> {
        checks["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["host"] == "openclaw")
            .cloned()
            .collect()
    };
    // Named and not set up: a problem, with the fix; no other host is checked.
    let out = sb.run(&["doctor", "openclaw", "--json"]);
    assert_code(&out, 1);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines = openclaw(&report);
    assert_eq!(lines.len(), 1, "{report:#}");
    assert_eq!(lines[0]["name"], "openclaw_unit");
    assert_eq!(lines[0]["status"], "fail");
    assert!(lines[0]["fix"]
        .as_str()
        .unwrap()
        .contains("install-harness openclaw"));
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["host"].is_null() || c["host"] == "openclaw"));
    // Unnamed, not installed and openclaw not on PATH: not mentioned.
    let report: Value = serde_json::from_slice(&sb.run(&["doctor", "--json"]).stdout).unwrap();
    assert!(openclaw(&report).is_empty(), "{report:#}");

    // Set up (the unit, and the token it names): doctor openclaw is all good, and so is
    // doctor, OpenClaw being a host set up.
    let agentnotify = sb.bin.join("agentnotify");
    std::fs::write(&agentnotify, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&agentnotify, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sb.run(&[
        "install-harness",
        "openclaw",
        "--agentnotify",
        agentnotify.to_str().unwrap(),
        "--url",
        "ws://127.0.0.1:9",
    ]);
    assert_code(&out, 0);
    assert!(sb
        .home
        .join(".config/systemd/user/agentnotify-openclaw.service")
        .exists());
    let token = sb.agentnotify_home.join("openclaw_gateway_token");
    write(&token, "tok\n");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = sb.run(&["doctor", "openclaw", "--json"]);
    assert_code(&out, 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<String> = openclaw(&report)
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "openclaw_unit",
            "openclaw_command",
            "openclaw_token",
            "openclaw_gateway"
        ],
        "{report:#}"
    );
    let out = sb.run(&["doctor"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("info  claude: hook installed: not installed"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn doctor_with_no_host_set_up_says_so_once() {
    let sb = Sandbox::new();
    let out = sb.run(&["doctor"]);
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  hosts: none is set up") && text.contains("1 problem(s) found."),
        "{text}"
    );
    for host in ["claude", "codex", "pi", "hermes"] {
        assert!(text.contains(&format!("info  {host}: ")), "{host}: {text}");
    }
}

/// The Codex trust hash of a Stop handler: `event_name: "stop"`, and no `matcher` key (the
/// group has none; verified with the real Codex by the host suite).
fn recipe_hash_stop(command: &str, timeout: u64) -> String {
    let json = format!(
        r#"{{"event_name":"stop","hooks":[{{"async":false,"command":{},"timeout":{timeout},"type":"command"}}]}}"#,
        serde_json::to_string(command).unwrap()
    );
    let digest = Sha256::digest(json.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

const CLAUDE_NOTIFY_SNIPPET: &str = include_str!("../../harness/claude/notify.json");

#[test]
fn notify_installs_the_stop_hooks_beside_the_question_hook_and_uninstall_removes_them_all() {
    let sb = Sandbox::new();
    let original = "{\n  \"model\": \"opus\"\n}\n";
    write(&sb.claude_settings(), original);
    let out = sb.install("claude", &["--notify"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("notify hooks (Stop, SubagentStop, Notification, SessionEnd)"),
        "{}",
        stdout(&out)
    );
    let doc = read_json(&sb.claude_settings());
    assert_eq!(
        our_handlers(&doc).len(),
        1,
        "the question hook is there too"
    );
    let notify_command = format!("{} claude notify", sb.exe());
    let snippet: Value = serde_json::from_str(CLAUDE_NOTIFY_SNIPPET).unwrap();
    for (event, groups) in snippet["hooks"].as_object().unwrap() {
        let ours = &doc["hooks"][event][0]["hooks"][0];
        assert_eq!(ours["command"], notify_command, "{event}");
        assert_eq!(ours["timeout"], groups[0]["hooks"][0]["timeout"], "{event}");
    }
    // SessionEnd's default is 1.5 s: the timeout is written explicitly.
    assert_eq!(doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 10);
    // A second run changes nothing; doctor sees them; uninstall gives the original back.
    let before = read(&sb.claude_settings());
    let out = sb.install("claude", &["--notify"]);
    assert!(
        stdout(&out).contains("already up to date"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(&sb.claude_settings()), before);
    let out = sb.run(&["doctor", "claude"]);
    assert!(
        stdout(&out).contains("notify hooks (Stop"),
        "{}",
        stdout(&out)
    );
    let out = sb.run(&["uninstall-harness", "claude"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("and 4 notify handler(s)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(&sb.claude_settings()), original);
}

#[test]
fn notify_alone_installs_no_question_hook_and_codex_stop_is_trusted_by_the_recipe() {
    let sb = Sandbox::new();
    let exe = sb.exe();
    let out = sb.run(&[
        "install-harness",
        "codex",
        "--notify",
        "--trust",
        "--command-path",
        &exe,
    ]);
    assert_code(&out, 0);
    let doc = read_json(&sb.codex_hooks());
    assert!(our_handlers(&doc).is_empty(), "{doc}");
    let command = format!("{exe} codex notify");
    assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["command"], command);
    let config = read(&sb.codex_config());
    let key = format!("{}:stop:0:0", sb.codex_hooks().display());
    assert!(config.contains(&key), "{config}");
    assert!(config.contains(&recipe_hash_stop(&command, 10)), "{config}");
    // With --ask too, both hooks are trusted (in one edit of config.toml).
    assert_code(&sb.install("codex", &["--notify", "--trust"]), 0);
    let config = read(&sb.codex_config());
    assert!(config.contains(&key), "{config}");
    assert!(config.contains(":permission_request:0:0"), "{config}");
    assert_code(&sb.run(&["uninstall-harness", "codex"]), 0);
    assert!(!sb.codex_hooks().exists());
    // The trust entry is gone (with the file, which install had created).
    assert!(!std::fs::read_to_string(sb.codex_config())
        .unwrap_or_default()
        .contains(&key));
}
