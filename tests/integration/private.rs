//! A planted or shared home folder is refused, like ssh refuses a loose `~/.ssh`; what we
//! create is private (files 0600, folders 0700) and never written through a symlink.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::hook::RunningHook;
use crate::support::{fixture, Daemon, Home, AGENTNOTIFY};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every entry of the home, except the `HOME` the tests give the programs.
fn entries(home: &Home) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "home")
        .collect();
    names.sort();
    names
}

/// The daemon, the CLI and the hook all refuse `home`, naming `path` and `fix`; the hook
/// stays silent and exits 0; nothing is added to the home.
fn all_refuse(home: &Home, path: &Path, fix: &str) {
    let before = entries(home);
    let daemon = home
        .cmd(AGENTNOTIFY)
        // On demand with a short idle exit, so a broker that wrongly starts also ends.
        .args([
            "daemon",
            "--port",
            "0",
            "--on-demand",
            "--idle-exit-seconds",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let cli = home
        .cmd(AGENTNOTIFY)
        .args(["interactions", "list"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    for (what, out) in [("daemon", &daemon), ("cli", &cli)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(
            stderr.contains(&format!("refusing to use {}", path.display())) && stderr.contains(fix),
            "{what} must name {} and the fix {fix:?}: {stderr}",
            path.display()
        );
    }
    let hook = RunningHook::start(
        home,
        "claude",
        &fixture("claude-bash.json"),
        &["--timeout", "5"],
    );
    assert_eq!(hook.finish(), (0, String::new()), "the hook stays silent");
    assert!(home.broker_json().is_none(), "no broker was started");
    assert_eq!(entries(home), before, "nothing was added to a refused home");
}

#[test]
fn a_home_others_can_write_is_refused_with_the_path_and_the_fix() {
    let home = Home::new();
    chmod(home.path(), 0o777);
    all_refuse(&home, home.path(), "chmod 700");
    // Group-writable is as bad; fixed as told, it works.
    chmod(home.path(), 0o770);
    all_refuse(&home, home.path(), "chmod 700");
    chmod(home.path(), 0o700);
    let out = home
        .cmd(AGENTNOTIFY)
        .args(["token"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_token_another_user_planted_or_can_read_is_refused() {
    let home = Home::new();
    let token = home.path().join("token");
    std::fs::write(&token, "planted-by-someone-else").unwrap();
    chmod(&token, 0o644);
    all_refuse(&home, &token, "chmod 600");
    chmod(&token, 0o600);
    let path = std::ffi::CString::new(token.to_str().unwrap()).unwrap();
    // SAFETY: chown on a path we created; uid/gid of `nobody`.
    if unsafe { libc::chown(path.as_ptr(), 65534, 65534) } != 0 {
        eprintln!("not root: the other-owner case needs chown; only the mode case ran");
        return;
    }
    all_refuse(&home, &token, "chown");
    // A token file that is a symlink (to a file of ours, even) is refused too.
    std::fs::remove_file(&token).unwrap();
    let elsewhere = home.path().join("home").join("t");
    std::fs::write(&elsewhere, "x").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &token).unwrap();
    all_refuse(&home, &token, "rm");
}

#[tokio::test]
async fn a_symlinked_log_file_is_not_followed() {
    let home = Home::new();
    let logs = home.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    chmod(&logs, 0o700);
    let victim_dir = tempfile::tempdir().unwrap();
    let victim = victim_dir.path().join("victim");
    std::fs::write(&victim, "").unwrap();
    let day = &agentnotify::model::Timestamp::now().to_rfc3339()[..10];
    for name in ["broker", "hook"] {
        std::os::unix::fs::symlink(&victim, logs.join(format!("{name}.{day}.log"))).unwrap();
    }
    let mut d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("log me").await;
    assert_eq!(q["status"], "pending", "the broker works without its log");
    let hook = RunningHook::start(
        &home,
        "codex",
        &fixture("codex-bash.json"),
        &["--timeout", "1"],
    );
    assert_eq!(hook.finish(), (0, String::new()));
    // SIGTERM, so anything queued for the log is written before the check.
    unsafe { libc::kill(d.pid as i32, libc::SIGTERM) };
    let _ = d.child.wait();
    d.kill9();
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "",
        "a log line went through the symlink"
    );
    for name in ["broker", "hook"] {
        let link = logs.join(format!("{name}.{day}.log"));
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}

#[tokio::test]
async fn every_file_of_a_fresh_home_is_0600_and_every_folder_0700() {
    let home = Home::new();
    chmod(home.path(), 0o700);
    let mut d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("private").await;
    api.respond(&q, crate::support::Api::answer(&q, "r1", "deny"))
        .await;
    let hook = RunningHook::start(
        &home,
        "codex",
        &fixture("codex-bash.json"),
        &["--timeout", "1"],
    );
    assert_eq!(hook.finish(), (0, String::new()));
    let link = home
        .cmd(AGENTNOTIFY)
        .args(["ui", "--print"])
        .output()
        .unwrap();
    assert!(link.status.success());
    unsafe { libc::kill(d.pid as i32, libc::SIGTERM) };
    let _ = d.child.wait();
    d.kill9();

    let mut seen = Vec::new();
    let mut stack = vec![home.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path == home.path().join("home") {
                continue;
            }
            let rel = path
                .strip_prefix(home.path())
                .unwrap()
                .display()
                .to_string();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                assert_eq!(mode(&path), 0o700, "folder {rel}");
                stack.push(path);
            } else {
                assert!(kind.is_file(), "{rel} is a regular file");
                assert_eq!(mode(&path), 0o600, "file {rel} is {:o}", mode(&path));
            }
            seen.push(rel);
        }
    }
    seen.sort();
    eprintln!("checked: {seen:?}");
    for expected in [
        "token",
        "broker.lock",
        "broker.sled",
        "broker.sled/conf",
        "broker.sled/db",
        "logs",
    ] {
        assert!(seen.iter().any(|s| s == expected), "{expected} in {seen:?}");
    }
    assert!(
        seen.iter().any(|s| s.starts_with("logs/broker.")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s.starts_with("logs/hook.")), "{seen:?}");
}
