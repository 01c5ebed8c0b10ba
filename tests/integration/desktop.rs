//! The desktop channel on a real session D-Bus: a private `dbus-daemon` per test and
//! python3-dbusmock's notification-daemon template as the recording notification server
//! (Debian's `python3-dbusmock` and `dbus-daemon`, installed on first use by
//! `tests/support/provision.rs` when missing).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::provision;
use crate::support::{fixture, Api, Daemon, FakeOpener, Home, AGENTNOTIFY, HOOK};

/// A private session bus.
struct Bus {
    daemon: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Bus {
    fn start() -> Bus {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = Command::new(provision::require(&provision::DBUS_DAEMON))
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!(
                "--address=unix:path={}",
                dir.path().join("bus").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (apt: dbus) is installed");
        let mut line = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Bus {
            daemon,
            address: line.trim().to_string(),
            _dir: dir,
        }
    }

    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdin(Stdio::null());
        c
    }

    fn gdbus(&self, args: &[&str]) -> (bool, String) {
        let out = self
            .cmd(provision::require(&provision::GDBUS))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// Waits until `name` has an owner on this bus; returns it.
    fn wait_owner(&self, name: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (ok, out) = self.gdbus(&[
                "call",
                "--session",
                "-d",
                "org.freedesktop.DBus",
                "-o",
                "/org/freedesktop/DBus",
                "-m",
                "org.freedesktop.DBus.GetNameOwner",
                name,
            ]);
            if ok {
                return out;
            }
            assert!(Instant::now() < deadline, "{name} never appeared: {out}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// python3-dbusmock's notification daemon, logging every call to a file.
struct Mock {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mock {
    fn start(bus: &Bus, capabilities: &str) -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let params = json!({ "capabilities": capabilities }).to_string();
        let child = bus
            .cmd(provision::require(&provision::DBUSMOCK))
            .args([
                "-m",
                "dbusmock",
                "--session",
                "-t",
                "notification_daemon",
                "-l",
            ])
            .arg(&log)
            .args(["-p", &params])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3-dbusmock (apt) is installed");
        bus.wait_owner("org.freedesktop.Notifications");
        Mock {
            child,
            log,
            _dir: dir,
        }
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds a call of `what` (or panics after 20 s); returns the log
    /// from that call on (a call's arguments may span lines).
    fn wait_call(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let calls = self.calls();
            if let Some(at) = calls.find(&format!(" {what} ")) {
                return calls[at..].to_string();
            }
            assert!(
                Instant::now() < deadline,
                "no {what} call; calls: {}",
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The notification server itself emits ActionInvoked (what a click does).
    fn click(&self, bus: &Bus, id: u32, key: &str) {
        let (ok, out) = bus.gdbus(&[
            "call",
            "--session",
            "-d",
            "org.freedesktop.Notifications",
            "-o",
            "/org/freedesktop/Notifications",
            "-m",
            "org.freedesktop.DBus.Mock.EmitSignal",
            "org.freedesktop.Notifications",
            "ActionInvoked",
            "us",
            &format!("[<uint32 {id}>, <'{key}'>]"),
        ]);
        assert!(ok, "{out}");
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Emits `ActionInvoked(id, key)` from a connection that does not own the notification
/// server's name (any program on the session bus can), and waits until the broker has
/// logged that it ignored it.
async fn forge_click(bus: &Bus, home: &Home, id: u32, key: &str) {
    let (ok, out) = bus.gdbus(&[
        "emit",
        "--session",
        "-o",
        "/org/freedesktop/Notifications",
        "-s",
        "org.freedesktop.Notifications.ActionInvoked",
        &id.to_string(),
        &format!("'{key}'"),
    ]);
    assert!(ok, "{out}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !home
        .logs()
        .contains("does not own org.freedesktop.Notifications ignored")
    {
        assert!(Instant::now() < deadline, "the forged signal was not seen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn add_desktop(home: &Home, extra: &[&str]) {
    let mut args = vec!["channels", "add", "desktop", "laptop"];
    args.extend_from_slice(extra);
    let out = home.cmd(AGENTNOTIFY).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_buttons_answer_only_from_the_server_and_a_settled_question_closes() {
    let bus = Bus::start();
    let mock = Mock::start(&bus, "body actions");
    let home = Home::new().with_env("DBUS_SESSION_BUS_ADDRESS", &bus.address);
    add_desktop(&home, &["--answer-buttons"]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let mut hook = home
        .cmd(HOOK)
        .args(["claude", "ask-permission"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        hook.stdin
            .take()
            .unwrap()
            .write_all(fixture("claude-bash.json").as_bytes())
            .unwrap();
    }
    let notify = mock.wait_call("Notify");
    // The prompt (desktop shows it by default), one action per choice, urgency critical.
    assert!(notify.contains("\"agentnotify\""), "{notify}");
    assert!(notify.contains("npm ci"), "{notify}");
    assert!(
        notify.contains("allow-once") && notify.contains("deny"),
        "{notify}"
    );
    let q = api.pending().await.remove(0);
    // A signal from another connection on the bus, naming the same notification: ignored.
    forge_click(&bus, &home, 1, "allow-once").await;
    let (_, still) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        still["status"], "pending",
        "a forged signal answered: {still}"
    );
    // The server's own signal (a click on Deny) answers.
    mock.click(&bus, 1, "deny");
    let out = {
        use std::io::Read;
        let mut s = String::new();
        hook.stdout.take().unwrap().read_to_string(&mut s).unwrap();
        hook.wait().unwrap();
        s
    };
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "deny");
    let (_, record) = api
        .get(&format!("/v1/interactions/{}", q["id"].as_str().unwrap()))
        .await;
    assert_eq!(record["response"]["source"], "desktop");
    // Settled: closed on the desktop.
    mock.wait_call("CloseNotification");
}

/// A click on the notification itself (`default`) opens the web UI with a fresh one-time
/// link, through the private forwarding page (never the link on a command line); a forged
/// `default` from another connection on the bus opens nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_a_desktop_notification_opens_the_web_ui_with_a_one_time_link() {
    use std::os::unix::fs::PermissionsExt;
    let bus = Bus::start();
    let mock = Mock::start(&bus, "body actions");
    let opener = FakeOpener::new();
    let record = opener.record.clone();
    let home = Home::new()
        .with_env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .with_env("PATH", opener.path_env());
    add_desktop(&home, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    api.ask_permission("open me").await;
    let notify = mock.wait_call("Notify");
    assert!(
        notify.contains("'default'") || notify.contains("\"default\""),
        "the click action is offered: {notify}"
    );
    assert!(
        !notify.contains("allow-once"),
        "no answer buttons without --answer-buttons: {notify}"
    );
    // Forged: the same signal from a connection that does not own the name.
    forge_click(&bus, &home, 1, "default").await;
    assert!(!record.exists(), "a forged click opened the page");
    // The server's own signal: the page opens.
    mock.click(&bus, 1, "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !record.exists() {
        assert!(Instant::now() < deadline, "the opener never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let argv = std::fs::read_to_string(&record).unwrap();
    assert!(
        !argv.contains("#t="),
        "the link is on a command line: {argv}"
    );
    let page = std::path::Path::new(argv.trim());
    assert!(page.starts_with(home.path()), "{argv}");
    assert_eq!(
        std::fs::metadata(page).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        html.contains("/ui/#t="),
        "the page forwards to a login link: {html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_without_actions_shows_no_buttons_and_repeats_replace_in_place() {
    let bus = Bus::start();
    let mock = Mock::start(&bus, "body");
    let home = Home::new().with_env("DBUS_SESSION_BUS_ADDRESS", &bus.address);
    add_desktop(&home, &["--answer-buttons", "--no-message"]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    api.ask_permission("SECRET-desktop-prompt").await;
    let line = mock.wait_call("Notify");
    assert!(
        line.contains("[]"),
        "no actions without the capability: {line}"
    );
    assert!(
        !line.contains("SECRET-desktop-prompt"),
        "--no-message: {line}"
    );
    // A notification updated in place replaces the one shown (replaces_id).
    let n = json!({"title": "Claude finished", "message": "in shop", "type": "completed", "agent": "claude", "key": "claude:session:s"});
    api.post("/v1/notifications", n.clone()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.calls().matches("Notify").count() < 2 {
        assert!(Instant::now() < deadline, "{}", mock.calls());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.post("/v1/notifications", n).await;
    while mock.calls().matches("Notify").count() < 3 {
        assert!(Instant::now() < deadline, "{}", mock.calls());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let calls = mock.calls();
    let last = &calls[calls.rfind(" Notify ").unwrap()..];
    assert!(
        last.contains("\"agentnotify\" 2 "),
        "replaces the second notification: {last}"
    );
    // Three notifications over one connection: the server's capabilities were asked once.
    assert_eq!(calls.matches("GetCapabilities").count(), 1, "{calls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_bus_makes_the_desktop_unavailable_and_breaks_nothing_else() {
    let home = Home::new().with_env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus");
    add_desktop(&home, &[]);
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("no bus here").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let laptop = loop {
        let (_, st) = api.get("/v1/channels/status").await;
        let laptop = st["channels"][0].clone();
        if laptop["available"] == false && laptop["last_error"].is_string() {
            break laptop;
        }
        assert!(Instant::now() < deadline, "{st}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        laptop["unavailable_reason"]
            .as_str()
            .unwrap()
            .contains("D-Bus"),
        "{laptop}"
    );
    // Everything else works: the question is answered as usual.
    let (code, _) = api.respond(&q, Api::answer(&q, "r1", "deny")).await;
    assert_eq!(code, 200);
    let out = home
        .cmd(AGENTNOTIFY)
        .args(["channels", "status"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("UNAVAILABLE"));
}
