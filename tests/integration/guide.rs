//! `agentnotify setup` as a person drives it (in tmux, keys typed) and as a script runs it
//! (`--yes`), on a temp HOME and AGENTNOTIFY_HOME; `doctor`'s channel and Relay findings;
//! completions and man pages kept in step with the clap definitions.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use clap::CommandFactory;

use crate::answer::Tmux;
use crate::relay::{run, RelayProc, Setup};
use crate::support::{Api, Daemon, Home, AGENTNOTIFY, HOOK};

/// PATH for the commands: our binaries and the system's folders, no `claude` or `codex`.
fn path() -> String {
    format!(
        "{}:/usr/bin:/bin",
        Path::new(AGENTNOTIFY).parent().unwrap().display()
    )
}

fn setup(home: &Home, args: &[&str]) -> Output {
    home.cmd(AGENTNOTIFY)
        .arg("setup")
        .args(args)
        .env("PATH", path())
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn doctor(home: &Home) -> String {
    let out = home
        .cmd(HOOK)
        .arg("doctor")
        .env("PATH", path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    text(&out)
}

/// Every file under `dir` with its bytes (the broker's store and logs left out).
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if [
            "store",
            "logs",
            "broker.json",
            "broker.sock",
            "broker.lock",
            "spawn.lock",
        ]
        .contains(&name.as_str())
        {
            continue;
        }
        if p.is_dir() {
            all.extend(files(&p));
        } else {
            all.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    all.sort();
    all
}

fn ntfy_topic(home: &Home) -> String {
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    let config: toml::Table = config.parse().unwrap();
    config["channels"]["channel"][0]["topic"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn setup_yes_wires_both_hosts_and_ntfy_says_where_and_a_second_run_changes_nothing() {
    let home = Home::new();
    let h = home.path().join("home");
    std::fs::create_dir_all(h.join(".claude")).unwrap();
    std::fs::create_dir_all(h.join(".codex")).unwrap();
    let args = [
        "--yes",
        "--ntfy",
        "http://127.0.0.1:9",
        "--include-message",
        "--no-test",
    ];
    let out = setup(&home, &args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");

    // Both hosts found by their folders, each file named as it is written.
    let claude = h.join(".claude/settings.json");
    let codex = h.join(".codex/hooks.json");
    for file in [&claude, &codex] {
        assert!(said.contains(&file.display().to_string()), "{said}");
    }
    assert!(
        said.contains(&format!(
            "writing {}",
            home.path().join("config.toml").display()
        )),
        "{said}"
    );
    let settings = std::fs::read_to_string(&claude).unwrap();
    assert!(settings.contains("claude ask-permission") && settings.contains("claude notify"));
    let hooks = std::fs::read_to_string(&codex).unwrap();
    assert!(hooks.contains("codex ask-permission") && hooks.contains("codex notify"));
    // Codex trust included: doctor's summary at the end says so.
    assert!(said.contains("ok    codex: trust: trusted"), "{said}");
    assert!(said.contains("== 4/4"), "{said}");

    // A fresh, unguessable topic, with its subscribe link.
    let topic = ntfy_topic(&home);
    let random = topic.strip_prefix("agentnotify-").unwrap();
    assert!(random.len() == 24 && random.chars().all(|c| c.is_ascii_alphanumeric()));
    assert!(
        said.contains(&format!("http://127.0.0.1:9/{topic}")),
        "{said}"
    );
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(config.contains("include_message = true") && config.contains("answer_buttons = true"));

    // Again: everything found as it was left, no byte changed, the same topic.
    let before = files(home.path());
    let out = setup(&home, &args);
    let again = text(&out);
    assert_eq!(out.status.code(), Some(0), "{again}");
    assert!(again.contains("Claude Code: already set up"), "{again}");
    assert!(again.contains("Codex: already set up"), "{again}");
    assert!(again.contains("ntfy: already set up"), "{again}");
    assert!(!again.contains("writing "), "{again}");
    assert_eq!(files(home.path()), before, "a second run changed files");
    assert_eq!(ntfy_topic(&home), topic);

    // Setup in another home makes another topic.
    let other = Home::new();
    assert_eq!(setup(&other, &args).status.code(), Some(0));
    assert_ne!(ntfy_topic(&other), topic);
}

#[test]
fn setup_offers_desktop_notifications_only_with_a_session_bus() {
    let home = Home::new();
    let out = setup(&home, &["--yes", "--desktop", "--no-test"]);
    assert!(text(&out).contains("Desktop notifications: not offered (no session D-Bus here)"));
    assert!(!home.path().join("config.toml").exists());

    let out = home
        .cmd(AGENTNOTIFY)
        .args(["setup", "--yes", "--desktop", "--no-test"])
        .env("PATH", path())
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(
        config.contains("kind = \"desktop\"") && config.contains("answer_buttons = true"),
        "{config}"
    );
}

#[test]
fn setup_adds_a_relay_pairs_a_phone_and_keeps_the_provider_on_a_second_run() {
    let home = Home::new();
    let relay = RelayProc::start(&home);
    let args = ["--yes", "--relay", relay.url.as_str(), "--no-test"];
    let out = setup(&home, &args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("relay provider phone added"), "{said}");
    assert!(
        said.contains(&format!("open on the phone: {}/app/#pair=", relay.url)),
        "{said}"
    );
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    let out = setup(&home, &args);
    let again = text(&out);
    assert_eq!(out.status.code(), Some(0), "{again}");
    assert!(
        again.contains("Phone app: already set up (relay provider phone)"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.toml")).unwrap(),
        config
    );
}

#[test]
fn setup_without_a_terminal_or_yes_refuses_and_names_the_flags() {
    let home = Home::new();
    let out = setup(&home, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("--yes") && said.contains("--host"), "{said}");
    assert!(!home.path().join("config.toml").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_yes_sends_a_test_question_through_the_hook_and_shows_the_answer() {
    let home = Home::new();
    std::fs::create_dir_all(home.path().join("home/.claude")).unwrap();
    let mut child = home
        .cmd(AGENTNOTIFY)
        .args(["setup", "--yes", "--test-timeout", "60"])
        .env("PATH", path())
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // The hook has opened its question once setup says it waits.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("Waiting up to") {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "setup ended before the test question: {seen}");
        seen.push_str(&line);
    }
    let api = home.api();
    let pending = api.pending().await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let (code, _) = api
        .respond(&pending[0], Api::answer(&pending[0], "r1", "allow-once"))
        .await;
    assert_eq!(code, 200);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(rest.contains("The hook printed this decision"), "{rest}");
    assert!(rest.contains(r#""behavior":"allow""#), "{rest}");
    assert!(rest.contains("== 4/4"), "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_in_a_terminal_asks_per_step_and_ends_with_the_answered_test_question() {
    let home = Home::new();
    std::fs::create_dir_all(home.path().join("home/.claude")).unwrap();
    let t = Tmux::program(&home, &["setup", "--test-timeout", "60"]);
    let screen = t.wait_for("Install them into Claude Code?").await;
    assert!(
        screen.contains("settings.json"),
        "the file is named first:\n{screen}"
    );
    t.keys(&["y"]);
    t.wait_for("Claude Code: installed").await;
    t.wait_for("Desktop notifications: not offered").await;
    t.wait_for("Get questions on your phone through the ntfy app?")
        .await;
    t.keys(&["y"]);
    t.wait_for("ntfy server").await;
    // Replace the offered default (ntfy.sh) with a local address.
    t.keys(&["C-u"]);
    t.type_text("http://127.0.0.1:9");
    t.keys(&["Enter"]);
    t.wait_for("Send the question's text through http://127.0.0.1:9?")
        .await;
    t.keys(&["n"]);
    let screen = t.wait_for("Subscribe to it in the ntfy app").await;
    assert!(
        screen.contains("http://127.0.0.1:9/agentnotify-"),
        "{screen}"
    );
    t.wait_for("Relay URL for the phone app").await;
    t.keys(&["Enter"]);
    t.wait_for("Phone app: skipped").await;
    t.wait_for("Send a test question now?").await;
    t.keys(&["y"]);
    t.wait_for("Waiting up to 60 s").await;

    // The person answers where they are (here: the CLI, as from another terminal).
    let api = home.api();
    let q = api.pending().await.remove(0);
    let out = home
        .cmd(AGENTNOTIFY)
        .args(["answer", q["id"].as_str().unwrap(), "--choice", "deny"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // The end of the run, then all of it (doctor's summary may scroll the decision away).
    t.wait_for("[exit 0]").await;
    let screen = t.scrollback();
    assert!(
        screen.contains("The hook printed this decision"),
        "{screen}"
    );
    // The person's deny, not any decision, is what the hook printed.
    assert!(screen.contains(r#""behavior":"deny""#), "{screen}");
    assert!(screen.contains("== 4/4"), "{screen}");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(config.contains("include_message = false"), "{config}");
}

/// Pi, Hermes and OpenClaw have integrations of their own: setup offers one when its program
/// is on PATH, installs it through `install-harness` (which names what it writes), and
/// leaves the others alone.
#[test]
fn setup_yes_installs_the_pi_extension_when_pi_is_on_path_and_only_then() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let bin = tempfile::tempdir().unwrap();
    let pi = bin.path().join("pi");
    std::fs::write(&pi, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&pi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent = home.path().join("pi-agent");
    let run = || {
        home.cmd(AGENTNOTIFY)
            .args(["setup", "--yes", "--no-test"])
            .env("PATH", format!("{}:{}", bin.path().display(), path()))
            .env("PI_CODING_AGENT_DIR", &agent)
            .env_remove("HERMES_HOME")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let extension = agent.join("extensions/agentnotify.ts");
    assert!(extension.is_file(), "{said}");
    assert!(
        said.contains("Pi: ") && said.contains("install-harness pi"),
        "{said}"
    );
    assert!(
        said.contains(&extension.display().to_string()),
        "the file is named: {said}"
    );
    assert!(said.contains("Hermes Agent: not found"), "{said}");
    assert!(said.contains("OpenClaw: not found"), "{said}");
    assert!(!home.path().join("home/.hermes").exists());
    // Again: the same file, unchanged.
    let before = std::fs::read(&extension).unwrap();
    let again = run();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(std::fs::read(&extension).unwrap(), before);
    // Only then: without `pi` on PATH, another home gets no extension.
    let other = Home::new();
    let agent = other.path().join("pi-agent");
    let out = other
        .cmd(AGENTNOTIFY)
        .args(["setup", "--yes", "--no-test"])
        .env("PATH", path())
        .env("PI_CODING_AGENT_DIR", &agent)
        .env_remove("HERMES_HOME")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("Pi: not found"), "{said}");
    assert!(!agent.join("extensions/agentnotify.ts").exists(), "{said}");
}

#[test]
fn doctor_without_channels_says_how_to_add_one() {
    let home = Home::new();
    let said = doctor(&home);
    assert!(said.contains("info  channels configured: none"), "{said}");
    assert!(said.contains("fix: run `agentnotify setup`"), "{said}");
    // An uninstalled Codex is fixed with trust included.
    assert!(
        said.contains("agentnotify-hook install-harness codex --ask --trust"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_a_channels_last_delivery_error_with_the_fix() {
    let home = Home::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (code, _, err) = run(
        &home,
        &[
            "channels",
            "add",
            "ntfy",
            "phone",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--topic",
            "t-doctor-test-topic",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let daemon = Daemon::start(&home, &[]);
    let api = daemon.api(&home);
    api.ask_permission("Run make?").await;
    // Wait (bounded) for the failed attempt to be recorded.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, s) = api.get("/v1/channels/status").await;
        if s["channels"][0]["last_error"].is_string() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no delivery failed: {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let said = doctor(&home);
    assert!(
        said.contains("ok    channels configured: phone (ntfy)"),
        "{said}"
    );
    assert!(
        said.contains("FAIL  channel delivery: phone: the last delivery failed:"),
        "{said}"
    );
    assert!(
        said.contains(
            "fix: see `agentnotify channels status`; try it with `agentnotify channels test phone`"
        ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_relay_link_configured_reachable_and_paired() {
    let mut s = Setup::new(3600).await;
    // The broker admits the registered phone when it next polls the Relay.
    let (code, polled) = s.poll();
    assert_eq!(code, 0, "{polled}");
    let said = doctor(&s.home);
    assert!(
        said.contains("ok    relay configured: home at http://"),
        "{said}"
    );
    assert!(said.contains("ok    relay reachable: home:"), "{said}");
    assert!(
        said.contains("ok    relay devices: home: 1 phone(s) paired"),
        "{said}"
    );
    let (_, status, _) = run(&s.home, &["relay", "status"]);
    assert!(status.contains("  reachable"), "{status}");

    // The Relay goes away: doctor says so and what to do.
    let _ = s.relay.child.kill();
    let _ = s.relay.child.wait();
    let said = doctor(&s.home);
    assert!(
        said.contains("FAIL  relay reachable: home: http://"),
        "{said}"
    );
    assert!(
        said.contains("fix: check the URL and your network"),
        "{said}"
    );
    // …and so does the command doctor points to.
    let (code, status, err) = run(&s.home, &["relay", "status"]);
    assert_eq!(code, 0, "{err}");
    assert!(status.contains("unreachable: "), "{status}");
}

#[test]
fn doctor_reports_a_relay_without_a_paired_phone_and_an_unchecked_link() {
    let home = Home::new();
    let relay = RelayProc::start(&home);
    let (code, _, err) = run(
        &home,
        &[
            "relay",
            "add",
            "home",
            "--url",
            &relay.url,
            "--include-message",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // No broker running: the link is not checked, and doctor says how to check it.
    let said = doctor(&home);
    assert!(
        said.contains("info  relay reachable: home: not checked"),
        "{said}"
    );
    assert!(
        said.contains("fix: check now with `agentnotify relay status`"),
        "{said}"
    );
    assert!(
        said.contains("FAIL  relay devices: home: no phone paired"),
        "{said}"
    );
    assert!(
        said.contains("fix: run `agentnotify relay pair home`"),
        "{said}"
    );
}

/// Every subcommand path of a clap command: ["relay", "add"], …
fn paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut p = prefix.to_vec();
        p.push(sub.get_name().to_string());
        out.push(p.clone());
        paths(sub, &p, out);
    }
}

#[test]
fn completions_and_man_pages_cover_every_subcommand_of_both_programs() {
    let home = Home::new();
    let man = home.path().join("man");
    let (code, said, err) = run(&home, &["man", "--out", man.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("agentnotify-hook-doctor.1"), "{said}");
    for (program, cmd) in [
        ("agentnotify", agentnotify::cli::Cli::command()),
        ("agentnotify-hook", agentnotify::setup::cli::Cli::command()),
    ] {
        let mut subs = Vec::new();
        paths(&cmd, &[], &mut subs);
        assert!(subs.len() >= 3, "{program}: {subs:?}");
        for shell in ["bash", "zsh", "fish"] {
            let (code, script, err) = run(&home, &["completions", shell, "--program", program]);
            assert_eq!(code, 0, "{err}");
            for sub in &subs {
                let last = sub.last().unwrap();
                assert!(
                    script.contains(last.as_str()),
                    "{program} {shell} completion lacks {sub:?}"
                );
            }
        }
        let mut page_names = vec![program.to_string()];
        page_names.extend(subs.iter().map(|s| format!("{program}-{}", s.join("-"))));
        for page in page_names {
            let file = man.join(format!("{page}.1"));
            let roff = std::fs::read_to_string(&file)
                .unwrap_or_else(|_| panic!("no man page {}", file.display()));
            assert!(roff.contains(".TH"), "{page}");
        }
    }
    // The page carries the command's own help text.
    let setup = std::fs::read_to_string(man.join("agentnotify-setup.1")).unwrap();
    assert!(setup.contains("test question"), "{setup}");
}
